"""AmdMeter on the fake amdsmi: the energy accumulator and its resolution, power polling where there is none,
compute partitions measured once, wrap-around, a lost GPU and a missing library; never an exception."""

from __future__ import annotations

import pytest

from meters.amd import AmdMeter, load_amdsmi
from meters.base import AVERAGE_POWER, ENERGY_COUNTER, INSTANT_POWER, UNAVAILABLE
from meters.fake_amdsmi import COUNTER_RESOLUTION_UJ, AmdSmiLibraryException, FakeAmdSmi, parse_spec
from meters.fake_nvml import ManualClock


def run(spec: str, seconds: float = 40.0, step: float = 0.05) -> tuple[AmdMeter, FakeAmdSmi, float]:
    """Drive a meter on fake time: start, sample every `step` s, stop; returns it, the fake and the start time."""
    clock = ManualClock()
    fake = FakeAmdSmi(spec, clock=clock)
    meter = AmdMeter(fake, background_poll=False, clock=clock)
    t0 = clock()
    meter.start()
    for _ in range(round(seconds / step)):
        clock.advance(step)
        meter.sample()
    meter.stop()
    return meter, fake, t0


def truth_j(fake: FakeAmdSmi, device: int, t0: float, seconds: float) -> float:
    d = fake.devices[device]
    return d.energy_j(t0 + seconds) - d.energy_j(t0)


def test_the_energy_accumulator_times_its_resolution_is_the_energy() -> None:
    meter, fake, t0 = run("2xMI300X")
    assert [d.method for d in meter.devices] == [ENERGY_COUNTER, ENERGY_COUNTER]
    for i, s in enumerate(meter.sample()):
        # ticks of 15.3 µJ floored at both ends: within two ticks of the integral
        assert s.energy_j_cumulative == pytest.approx(truth_j(fake, i, t0, 40.0), abs=2 * COUNTER_RESOLUTION_UJ * 1e-6)
    d = meter.devices[0]
    assert d.name == "AMD Instinct MI300X" and d.power_limit_w == 750.0 and d.architecture == "gfx942"
    assert d.measured is False  # a fake is simulated, never measured
    assert len({x.uuid for x in meter.devices}) == 2


def test_without_the_accumulator_socket_power_is_integrated() -> None:
    meter, fake, t0 = run("1xMI300X/nocounter,1xMI250X/nocounter")
    mi300, mi250 = meter.devices
    assert (mi300.method, mi250.method) == (INSTANT_POWER, AVERAGE_POWER)
    assert any("AMDSMI_STATUS_NOT_SUPPORTED" in n for n in mi300.notes)
    assert any("average_socket_power" in n for n in mi250.notes)
    for i, s in enumerate(meter.sample()):  # whole watts, trapezoid at 20 Hz over a 20 s sine
        assert s.energy_j_cumulative == pytest.approx(truth_j(fake, i, t0, 40.0), rel=2e-3)


def test_a_partitioned_gpu_is_measured_once_and_says_its_energy_is_shared() -> None:
    meter, fake, t0 = run("1xMI300X:CPX,1xMI300X")
    assert len(fake.handles) == 9 and len(meter.devices) == 2
    cpx = meter.devices[0]
    assert any("compute partition CPX: 8 handles" in n and "measured once" in n for n in cpx.notes)
    assert meter.sample()[0].energy_j_cumulative == pytest.approx(truth_j(fake, 0, t0, 40.0), rel=1e-6)


def test_a_process_on_any_partition_measures_the_gpu_as_its_first_partition() -> None:
    """Ranks on partitions 3 and 5 of one CPX GPU record the same device (its partition 0's UUID): merged once."""
    fake = FakeAmdSmi("1xMI300X:CPX,1xMI300X")
    uuids = []
    for rank_handle in (3, 5):
        m = AmdMeter(fake, devices=[rank_handle], background_poll=False)
        m.start()
        uuids.append([d.uuid for d in m.devices])
        m.stop()
    fake.amdsmi_init()
    assert uuids == [[fake.amdsmi_get_gpu_device_uuid(fake.handles[0])]] * 2


def test_selection_by_index_and_uuid() -> None:
    fake = FakeAmdSmi("3xMI300X")
    fake.amdsmi_init()
    uuid = fake.amdsmi_get_gpu_device_uuid(fake.handles[2])
    meter = AmdMeter(fake, devices=[0, uuid, 7], background_poll=False)
    meter.start()
    meter.stop()
    assert [d.index for d in meter.devices] == [0, 2]
    assert any("GPU 7 not found" in n for n in meter.notes)


def test_wrap_around_of_the_accumulator_is_completed() -> None:
    clock = ManualClock()
    fake = FakeAmdSmi("1xMI300X", clock=clock)
    ticks = iter([2**64 - 1000, 2**64 - 500, 300])
    fake.amdsmi_get_energy_count = lambda h: {"energy_accumulator": next(ticks), "counter_resolution": 15.3}  # type: ignore[method-assign]
    meter = AmdMeter(fake, background_poll=False, clock=clock)
    meter.start()
    for _ in range(2):
        clock.advance(1.0)
        samples = meter.sample()
    assert samples[0].energy_j_cumulative == pytest.approx((500 + 800) * 15.3e-6)  # 500 ticks, then 500 + 300 across 2**64
    assert any("wrap" in n for n in meter.devices[0].notes)


def test_a_lost_gpu_keeps_its_energy_so_far_and_says_so() -> None:
    clock = ManualClock()
    fake = FakeAmdSmi("1xMI300X", clock=clock)
    meter = AmdMeter(fake, background_poll=False, clock=clock)
    t0 = clock()
    meter.start()
    clock.advance(5.0)
    meter.sample()
    fake.lose(0)
    clock.advance(5.0)
    s = meter.sample()[0]
    assert s.energy_j_cumulative == pytest.approx(truth_j(fake, 0, t0, 5.0), abs=1e-4)
    assert any("AMDSMI_STATUS_NOT_FOUND" in n for n in meter.devices[0].notes)
    meter.stop()


def test_a_missing_library_or_bad_spec_is_a_note_never_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_AMDSMI", "missing")
    meter = AmdMeter()
    meter.start()
    assert meter.devices == [] and meter.sample() == [] and "library is absent" in meter.notes[0]
    meter.stop()
    monkeypatch.setenv("FOOTPRINT_FAKE_AMDSMI", "2xMI999")
    lib, notes = load_amdsmi()
    assert lib is None and "unknown AMD model" in notes[0]
    monkeypatch.delenv("FOOTPRINT_FAKE_AMDSMI")
    m = AmdMeter(FakeAmdSmi("1xMI300X/lost"), background_poll=False)  # every call answers NOT_FOUND
    m.start()
    assert m.devices[0].method == UNAVAILABLE and m.sample() == []
    m.stop()


def test_the_fake_mirrors_amdsmi_shapes_and_errors() -> None:
    fake = FakeAmdSmi("1xMI300X")
    with pytest.raises(AmdSmiLibraryException) as err:
        fake.amdsmi_get_processor_handles()  # before amdsmi_init: AMDSMI_STATUS_NOT_INIT
    assert err.value.err_code == 32
    fake.amdsmi_init()
    h = fake.amdsmi_get_processor_handles()[0]
    assert set(fake.amdsmi_get_energy_count(h)) == {"power", "energy_accumulator", "counter_resolution", "timestamp"}
    assert set(fake.amdsmi_get_power_info(h)) >= {"current_socket_power", "average_socket_power", "power_limit"}
    assert fake.amdsmi_get_power_info(h)["average_socket_power"] == "N/A"
    assert fake.amdsmi_get_gpu_asic_info(h)["market_name"] == "AMD Instinct MI300X"
    with pytest.raises(ValueError, match="unknown compute partition"):
        parse_spec("1xMI300X:ZPX")


def test_rocm_6_2_and_older_name_the_accumulator_power_and_it_is_still_the_counter() -> None:
    """Up to ROCm 6.2 amdsmi_get_energy_count returns the accumulator as 'power' (no 'energy_accumulator'): the meter
    reads the counter there, not falling back to polling socket power."""
    meter, fake, t0 = run("1xMI300X/rocm62,1xMI250X/rocm62")
    fake.amdsmi_init()
    assert set(fake.amdsmi_get_energy_count(fake.handles[0])) == {"power", "counter_resolution", "timestamp"}
    assert [d.method for d in meter.devices] == [ENERGY_COUNTER, ENERGY_COUNTER]
    for i, s in enumerate(meter.sample()):
        assert s.energy_j_cumulative == pytest.approx(truth_j(fake, i, t0, 40.0), abs=2 * COUNTER_RESOLUTION_UJ * 1e-6)


def test_a_stale_accumulator_falls_back_to_socket_power_instead_of_zero() -> None:
    """Some MI100/MI210 return the same accumulator for a whole run (ROCm/rocm_smi_lib#180): a counter that stands
    still while socket power reads watts is stale, and the meter polls power rather than report 0 J as measured."""
    meter, fake, t0 = run("1xMI300X/stale,1xMI300X")
    stale, good = meter.devices
    assert (stale.method, good.method) == (INSTANT_POWER, ENERGY_COUNTER)
    assert any(n.startswith("energy accumulator stale: unchanged for 5 s") for n in stale.notes)
    e = meter.sample()[0].energy_j_cumulative
    # the first 5 s are estimated at the power read then (the fake's power swings +-20 % over 20 s)
    assert e == pytest.approx(truth_j(fake, 0, t0, 40.0), rel=0.03)


def test_an_init_refused_for_permissions_is_one_line_saying_what_to_do() -> None:
    """amdsmi_init raising (a user outside the render/video groups) is a one-line note naming the status and the fix,
    never the exception's multi-line text or a traceback."""
    fake = FakeAmdSmi("1xMI300X")

    def refuse(*_: object) -> None:
        raise AmdSmiLibraryException(10)  # AMDSMI_STATUS_NO_PERM

    fake.amdsmi_init = refuse  # type: ignore[method-assign]
    meter = AmdMeter(fake, background_poll=False)
    meter.start()
    meter.stop()
    assert meter.devices == [] and not meter.available
    assert meter.notes == [
        "amdsmi_init failed (AmdSmiLibraryException, code 10: AMDSMI_STATUS_NO_PERM - Permission Denied): this user "
        "cannot open /dev/kfd and /dev/dri/renderD* (ROCm needs it in the render and video groups)"
    ]


@pytest.mark.parametrize("serial", ["0x0000000000000000", "N/A", "", "0x6F1F0A2B3C4D0000"])
def test_unpartitioned_gpus_are_never_merged_whatever_their_serials(serial: str) -> None:
    """A VM guest may report a blank, "N/A" or zero ASIC serial, or the same one, for every GPU: only the handles of a
    partitioned GPU (DPX/QPX/CPX) are one device; eight SPX GPUs stay eight, each with its own energy."""
    clock = ManualClock()
    fake = FakeAmdSmi("2xMI300X", clock=clock)
    real = fake.amdsmi_get_gpu_asic_info
    fake.amdsmi_get_gpu_asic_info = lambda h: {**real(h), "asic_serial": serial}  # type: ignore[method-assign]
    meter = AmdMeter(fake, background_poll=False, clock=clock)
    meter.start()
    clock.advance(1.0)
    samples = meter.sample()
    meter.stop()
    assert len(meter.devices) == 2 and len({s.uuid for s in samples}) == 2
    assert not any("measured once" in n for d in meter.devices for n in d.notes)


def test_the_64_bit_accumulator_is_never_read_as_a_32_bit_wrap() -> None:
    """amdsmi's accumulator is a uint64: a driver reload just below 2**32 ticks (65.7 kJ at 15.3 µJ) is a reset,
    estimated from the power before it, not a 32-bit wrap-around that would credit a minute at 500 W with 4 kJ."""
    clock = ManualClock()
    fake = FakeAmdSmi("1xMI300X", clock=clock)
    per_s = round(500.0 / 15.3e-6)  # 500 W in ticks per second
    ticks = iter([4_000_000_000, 4_000_000_000 + per_s, 10])
    fake.amdsmi_get_energy_count = lambda h: {"energy_accumulator": next(ticks), "counter_resolution": 15.3}  # type: ignore[method-assign]
    meter = AmdMeter(fake, background_poll=False, clock=clock)
    meter.start()
    clock.advance(1.0)
    meter.sample()
    clock.advance(60.0)
    samples = meter.sample()
    assert samples[0].energy_j_cumulative == pytest.approx(500.0 * 61, rel=1e-3)  # 500 J, then 60 s at 500 W
    assert any("reset" in n for n in meter.devices[0].notes) and not any("wrap" in n for n in meter.devices[0].notes)
