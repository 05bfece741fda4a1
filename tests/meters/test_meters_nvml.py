"""NvmlMeter on the fake NVML: every method, every injected fault, MIG, and the selection rules."""

from __future__ import annotations

import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meters.base import AVERAGE_POWER, ENERGY_COUNTER, INSTANT_POWER, UNAVAILABLE
from meters.fake_nvml import FakeNVML, Faults, ManualClock
from meters.nvml import NvmlMeter, counter_delta_mj


def run(fake: FakeNVML, clock: ManualClock, seconds: float, step: float = 0.1, **kwargs) -> NvmlMeter:
    """Drive a meter deterministically: start, sample every `step` s of fake time, stop."""
    meter = NvmlMeter(fake, background_poll=False, clock=clock, **kwargs)
    meter.start()
    for _ in range(round(seconds / step)):
        clock.advance(step)
        meter.sample()
    meter.stop()
    return meter


def by_index(meter: NvmlMeter) -> dict[int | None, object]:
    return {d.index: d for d in meter.devices}


def test_method_per_architecture_and_energy_matches_truth() -> None:
    clock = ManualClock()
    load = lambda t: 150.0 + 50.0 * ((t * 3) % 1.0)  # noqa: E731  (sawtooth, 3 Hz)
    fake = FakeNVML(
        "1xA100-SXM4-40GB,1xV100-SXM2-32GB,1xP100-PCIE-16GB,1xK80,1xH100-SXM5-80GB",
        power=load,
        clock=clock,
        faults={4: Faults(no_energy_counter=True, no_instant_power=True)},
    )
    meter = NvmlMeter(fake, background_poll=False, clock=clock)
    meter.start()
    t0 = clock()
    for _ in range(100):
        clock.advance(0.05)
        samples = meter.sample()
    meter.stop()
    devs = by_index(meter)
    assert [devs[i].method for i in range(5)] == [ENERGY_COUNTER, ENERGY_COUNTER, INSTANT_POWER, AVERAGE_POWER, UNAVAILABLE]
    truth = fake.true_energy_between_j(0, t0, clock())
    energy = {s.uuid: s.energy_j_cumulative for s in samples}
    for i in range(4):
        assert energy[fake.uuid_of(i)] == pytest.approx(truth, rel=0.01), devs[i].method
    assert fake.uuid_of(4) not in energy  # unavailable devices give no samples...
    h100 = devs[4]  # ...but their record says why
    assert any("1 s average" in n for n in h100.notes) and any("not measured" in n for n in h100.notes)
    assert any("fallback" in n for n in devs[3].notes)  # K80 integrates nvmlDeviceGetPowerUsage, and says so
    assert any("Volta or newer" in n for n in devs[2].notes)
    assert devs[2].poll_period_s == 0.1 and devs[0].poll_period_s is None
    assert {d.driver_version for d in meter.devices} == {"550.54.15"}
    assert {d.power_scope for d in meter.devices if d.method != UNAVAILABLE} == {"board"}
    assert devs[0].architecture == "Ampere" and devs[0].power_limit_w == 400.0
    assert not devs[0].measured  # simulated readings are marked as such


def test_power_usage_never_integrated_on_ampere_or_newer() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xA10G,1xH100-SXM5-80GB,1xB200", clock=clock, faults=Faults(no_energy_counter=True, no_instant_power=True))
    meter = run(fake, clock, 1.0)
    assert all(d.method == UNAVAILABLE for d in meter.devices)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 0


def test_instant_power_used_without_counter_on_ampere() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xA10G", clock=clock, power=lambda t: 100 + 100 * (t % 1.0 < 0.5), faults=Faults(no_energy_counter=True))
    t0 = clock()
    meter = run(fake, clock, 4.0, step=0.02)
    (dev,) = meter.devices
    assert dev.method == INSTANT_POWER
    assert meter.energy_j()[dev.uuid] == pytest.approx(fake.true_energy_between_j(0, t0, clock()), rel=0.02)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 0


def test_grace_hopper_module_scope() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xGH200-480GB", clock=clock, faults=Faults(no_energy_counter=True))
    meter = run(fake, clock, 1.0)
    (dev,) = meter.devices
    assert dev.method == INSTANT_POWER and dev.power_scope == "module"
    assert any("Grace" in n for n in dev.notes)
    clock2 = ManualClock()
    counter = run(FakeNVML("1xGH200-480GB", clock=clock2), clock2, 0.5)
    assert counter.devices[0].method == ENERGY_COUNTER and counter.devices[0].power_scope == "module"


def test_counter_wrap_and_reset_are_handled() -> None:
    clock = ManualClock()
    fake = FakeNVML(
        "3xA100-SXM4-40GB",
        power=250.0,
        clock=clock,
        faults={
            0: Faults(wrap_at_mj=2**32, initial_energy_mj=2**32 - 150_000),
            1: Faults(reset_at_s=1.05),
            2: Faults(wrap_at_mj=2**32, initial_energy_mj=2**32 - 1_000, reset_at_s=2.0),
        },
    )
    t0 = clock()
    meter = run(fake, clock, 3.0)
    truth = 250.0 * (clock() - t0)
    energy = meter.energy_j()
    devs = by_index(meter)
    assert energy[fake.uuid_of(0)] == pytest.approx(truth, rel=1e-3)
    assert any("wrapped" in n for n in devs[0].notes)
    assert energy[fake.uuid_of(1)] == pytest.approx(truth, rel=1e-3)  # gap estimated from the power before
    assert any("reset" in n for n in devs[1].notes)
    assert energy[fake.uuid_of(2)] == pytest.approx(truth, rel=1e-3)
    assert {"wrapped", "reset"} <= {w for n in devs[2].notes for w in ("wrapped", "reset") if w in n}


@given(last=st.integers(0, 2**64 - 1), used=st.integers(0, 10**7), dt=st.floats(0.01, 10.0))
def test_counter_delta_recovers_wrap_for_any_start(last: int, used: int, dt: float) -> None:
    used = min(used, int(1000 * 1000 * dt))  # at most 1 kW over dt
    for modulus in (2**32, 2**64):
        start = last % modulus
        new = (start + used) % modulus
        delta, event = counter_delta_mj(start, new, dt, 1500.0, None)
        assert delta == used
        assert event == ("wrap" if new < start else None)


def test_counter_delta_reset_and_jump() -> None:
    assert counter_delta_mj(5_000_000_000, 1_000, 1.0, 1500.0, 300.0) == (300_000.0, "reset")
    assert counter_delta_mj(5_000_000_000, 400_000, 1.0, 1500.0, 300.0) == (400_000.0, "reset")
    assert counter_delta_mj(1_000, 10**12, 1.0, 1500.0, 300.0) == (300_000.0, "jump")


def test_gpu_lost_mid_run_keeps_energy_so_far() -> None:
    clock = ManualClock()
    fake = FakeNVML(
        "2xH100-SXM5-80GB,1xP100-PCIE-16GB",
        power=500.0,
        clock=clock,
        faults={1: Faults(lost_after_s=1.0), 2: Faults(lost_after_s=1.0)},
    )
    t0 = clock()
    meter = run(fake, clock, 3.0)
    devs = by_index(meter)
    energy = meter.energy_j()
    assert energy[fake.uuid_of(0)] == pytest.approx(500.0 * (clock() - t0), rel=1e-3)
    for i in (1, 2):
        assert energy[fake.uuid_of(i)] == pytest.approx(500.0 * 1.0, rel=0.11)  # up to the last good read
        assert any("GPU lost" in n for n in devs[i].notes)


def test_gpu_lost_before_start() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xH100-SXM5-80GB", clock=clock, faults=Faults(lost_after_s=0.0))
    meter = run(fake, clock, 0.5)
    (dev,) = meter.devices
    assert dev.method == UNAVAILABLE and any("lost" in n for n in dev.notes)


def test_intermittent_errors_are_skipped_not_raised() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xH100-SXM5-80GB,1xP100-PCIE-16GB", power=300.0, clock=clock, seed=3, faults=Faults(error_rate=0.3))
    t0 = clock()
    meter = run(fake, clock, 5.0)
    for i, dev in enumerate(d for d in meter.devices):
        assert dev.method in (ENERGY_COUNTER, INSTANT_POWER)
        assert dev.errors > 5 and any("failed readings" in n for n in dev.notes)
        # the last reading may itself have failed: compare with the truth up to its time
        assert meter.energy_j()[fake.uuid_of(i)] == pytest.approx(300.0 * (clock() - t0), abs=300.0 * 0.5)


def test_library_missing_and_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = NvmlMeter(FakeNVML(library_missing=True))
    meter.start()
    assert meter.sample() == [] and meter.devices == [] and not meter.available
    assert any("library not found" in n.lower() for n in meter.notes)
    meter.stop()

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    meter = NvmlMeter()
    meter.start()
    assert meter.sample() == [] and any("not importable" in n for n in meter.notes)
    meter.stop()


def test_env_var_selects_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "2xA100-SXM4-40GB")
    with NvmlMeter() as meter:
        assert [d.name for d in meter.devices] == ["NVIDIA A100-SXM4-40GB"] * 2
        assert len(meter.sample()) == 2
    assert any("simulated" in n for n in meter.notes)
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "missing")
    with NvmlMeter() as meter:
        assert meter.devices == [] and any("library not found" in n.lower() for n in meter.notes)
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "3xNoSuchGPU")
    with NvmlMeter() as meter:
        assert meter.devices == [] and any("not a valid" in n for n in meter.notes)


def test_selection_by_index_uuid_and_mig_counts_parent_once() -> None:
    clock = ManualClock()
    fake = FakeNVML("2xA100-SXM4-40GB,1xH100-SXM5-80GB", power=200.0, clock=clock, faults={0: Faults(mig_instances=3)})
    mig = fake.mig_uuids_of(0)
    meter = NvmlMeter(fake, [mig[0], mig[2], 2, fake.uuid_of(0), "GPU-not-there", 7], background_poll=False, clock=clock)
    meter.start()
    clock.advance(1.0)
    samples = meter.sample()
    meter.stop()
    assert [s.uuid for s in samples] == [fake.uuid_of(0), fake.uuid_of(2)]  # parent measured once
    parent = meter.devices[0]
    assert parent.uuid == fake.uuid_of(0) and parent.name == "NVIDIA A100-SXM4-40GB"
    assert sum(n.startswith("MIG instance MIG-") for n in parent.notes) == 2
    assert any("MIG mode is enabled" in n for n in parent.notes)
    assert samples[0].energy_j_cumulative == pytest.approx(200.0, rel=1e-3)
    failed = [d for d in meter.devices if d.method == UNAVAILABLE]
    assert [d.uuid for d in failed] == ["GPU-not-there", "7"]
    assert all(any("could not open" in n for n in d.notes) for d in failed)


def test_background_polling_with_real_clock() -> None:
    fake = FakeNVML("1xP100-PCIE-16GB,1xV100-SXM2-16GB", power=lambda t: 100.0 + 100.0 * (t % 0.2 < 0.1))
    meter = NvmlMeter(fake, poll_period_s=0.01, cross_check=True)
    meter.start()
    t0 = time.monotonic()
    time.sleep(0.6)
    samples = meter.sample()
    t1 = time.monotonic()
    meter.stop()
    p100, v100 = meter.devices
    assert p100.method == INSTANT_POWER and p100.poll_period_s == 0.01
    assert fake.calls["nvmlDeviceGetFieldValues"] > 30  # polled by the thread, not only at sample()
    truth = fake.true_energy_between_j(0, t0, t1)
    assert samples[0].energy_j_cumulative == pytest.approx(truth, rel=0.15)
    assert any("cross-check" in n for n in v100.notes)


def test_meter_never_raises_with_a_broken_binding() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise RuntimeError("boom")

    meter = NvmlMeter(Broken())
    meter.start()
    assert meter.sample() == [] and any("boom" in n for n in meter.notes)
    meter.stop()

    class Flaky(FakeNVML):
        def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # type: ignore[override]
            if self.calls["flaky"] > 0:
                raise ValueError("not an NVMLError at all")
            self.calls["flaky"] += 1
            return super().nvmlDeviceGetTotalEnergyConsumption(handle)

    clock = ManualClock()
    meter = run(Flaky("1xH100-SXM5-80GB", clock=clock), clock, 0.5)
    assert meter.devices[0].errors == 5


def test_poll_period_longer_than_100ms_is_noted() -> None:
    clock = ManualClock()
    meter = run(FakeNVML("1xP100-PCIE-16GB", clock=clock), clock, 1.0, poll_period_s=0.5)
    assert any("longer than 100 ms" in n for n in meter.devices[0].notes)
