"""The fake NVML behaves like pynvml where the meter depends on it."""

from __future__ import annotations

import threading
import time

import pytest

from meters.fake_nvml import (
    NVML_FI_DEV_POWER_AVERAGE,
    NVML_FI_DEV_POWER_INSTANT,
    NVML_POWER_SCOPE_GPU,
    NVML_POWER_SCOPE_MODULE,
    NVML_SUCCESS,
    FakeNVML,
    Faults,
    ManualClock,
    NVMLError,
    parse_spec,
)


def test_spec_parsing_names_and_deterministic_uuids() -> None:
    assert [k for k, _ in parse_spec("8xH100-SXM5-80GB,1xV100-SXM2-32GB")] == ["H100-SXM5-80GB"] * 8 + ["V100-SXM2-32GB"]
    assert parse_spec("2x a100-sxm4-40gb @ 250W") == [("A100-SXM4-40GB", 250.0)] * 2
    with pytest.raises(ValueError, match="unknown fake GPU model"):
        parse_spec("1xZ9000")
    a, b = FakeNVML("2xA100-SXM4-40GB"), FakeNVML("2xA100-SXM4-40GB")
    a.nvmlInit()
    assert a.nvmlDeviceGetCount() == 2
    h = a.nvmlDeviceGetHandleByIndex(1)
    assert a.nvmlDeviceGetName(h) == "NVIDIA A100-SXM4-40GB"
    assert a.nvmlDeviceGetUUID(h).startswith("GPU-")
    assert a.uuid_of(1) == b.uuid_of(1) != a.uuid_of(0)
    assert a.nvmlDeviceGetHandleByUUID(a.uuid_of(1)) == h
    assert a.nvmlDeviceGetPowerManagementLimit(h) == 400_000
    assert a.nvmlSystemGetDriverVersion() == "550.54.15"


def test_uninitialised_and_library_missing() -> None:
    fake = FakeNVML("1xA100-SXM4-40GB")
    with pytest.raises(fake.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    missing = FakeNVML.from_env("missing")
    with pytest.raises(missing.NVMLError_LibraryNotFound) as info:
        missing.nvmlInit()
    assert info.value.value == 12 and str(info.value) == "NVML Shared Library Not Found"
    assert isinstance(NVMLError(15), fake.NVMLError_GpuIsLost) and fake.NVMLError_GPUIsLost is fake.NVMLError_GpuIsLost


def test_energy_counter_integrates_power_model_over_time() -> None:
    clock = ManualClock()
    fake = FakeNVML("1xH100-SXM5-80GB", power=lambda t: 100.0 + 100.0 * t, clock=clock)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    e0 = fake.nvmlDeviceGetTotalEnergyConsumption(h)
    clock.advance(2.0)
    e1 = fake.nvmlDeviceGetTotalEnergyConsumption(h)
    assert (e1 - e0) / 1000 == pytest.approx(400.0, abs=0.01)  # integral of 100 + 100 t over [0, 2]
    assert fake.true_energy_j(0) == pytest.approx(400.0, abs=0.01)


def test_power_usage_is_averaged_on_ampere_but_instant_on_ga100_and_volta() -> None:
    clock = ManualClock()
    step = lambda t: 100.0 if t < 5.0 else 300.0  # noqa: E731
    fake = FakeNVML("1xH100-SXM5-80GB,1xA100-SXM4-40GB,1xV100-SXM2-16GB", power=step, clock=clock)
    fake.nvmlInit()
    clock.advance(5.5)
    hs = [fake.nvmlDeviceGetHandleByIndex(i) for i in range(3)]
    assert fake.nvmlDeviceGetPowerUsage(hs[0]) == pytest.approx(200_000, rel=0.01)  # 1 s average
    assert fake.nvmlDeviceGetPowerUsage(hs[1]) == 300_000  # GA100: instantaneous
    assert fake.nvmlDeviceGetPowerUsage(hs[2]) == 300_000
    inst = fake.nvmlDeviceGetFieldValues(hs[0], [(NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_GPU), NVML_FI_DEV_POWER_AVERAGE])
    assert inst[0].nvmlReturn == NVML_SUCCESS and inst[0].value.uiVal == 300_000
    assert inst[1].value.uiVal == pytest.approx(200_000, rel=0.01)
    assert inst[0].timestamp > 1.6e15  # microseconds since 1970


def test_faults_unsupported_scope_lost_and_intermittent() -> None:
    clock = ManualClock()
    fake = FakeNVML(
        "1xP100-PCIE-16GB,1xA100-SXM4-40GB,1xGH200-480GB,1xH100-SXM5-80GB",
        clock=clock,
        faults={1: Faults(no_instant_power=True, lost_after_s=1.0), 3: Faults(error_rate=0.5, error_code=10)},
    )
    fake.nvmlInit()
    p100, a100, gh, h100 = (fake.nvmlDeviceGetHandleByIndex(i) for i in range(4))
    with pytest.raises(fake.NVMLError_NotSupported):
        fake.nvmlDeviceGetTotalEnergyConsumption(p100)  # pre-Volta
    assert fake.nvmlDeviceGetFieldValues(a100, [(NVML_FI_DEV_POWER_INSTANT, 0)])[0].nvmlReturn == 3
    gpu_scope, module_scope = fake.nvmlDeviceGetFieldValues(
        gh, [(NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_GPU), (NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_MODULE)]
    )
    assert gpu_scope.nvmlReturn == 3 and module_scope.nvmlReturn == 0
    clock.advance(1.5)
    with pytest.raises(fake.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetTotalEnergyConsumption(a100)
    outcomes = []
    for _ in range(200):
        try:
            fake.nvmlDeviceGetTotalEnergyConsumption(h100)
            outcomes.append(True)
        except fake.NVMLError_Timeout:
            outcomes.append(False)
    assert 60 < sum(outcomes) < 140


def test_counter_reset_and_wrap() -> None:
    clock = ManualClock()
    fake = FakeNVML(
        "2xA100-SXM4-40GB",
        power=200.0,
        clock=clock,
        faults={0: Faults(reset_at_s=1.0), 1: Faults(wrap_at_mj=2**32, initial_energy_mj=2**32 - 100_000)},
    )
    fake.nvmlInit()
    h0, h1 = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    before = fake.nvmlDeviceGetTotalEnergyConsumption(h0)
    clock.advance(1.5)
    assert fake.nvmlDeviceGetTotalEnergyConsumption(h0) == 100_000 < before  # 0.5 s x 200 W after reset
    assert fake.nvmlDeviceGetTotalEnergyConsumption(h1) == 200_000  # wrapped past 2**32
    assert fake.true_energy_j(1) == pytest.approx(300.0)


def test_mig_handles_map_to_parent_and_have_no_power() -> None:
    fake = FakeNVML("1xA100-SXM4-40GB", faults=Faults(mig_instances=3))
    fake.nvmlInit()
    parent = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetMigMode(parent) == [1, 1]
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(parent, 2)
    assert fake.nvmlDeviceIsMigDeviceHandle(mig) and not fake.nvmlDeviceIsMigDeviceHandle(parent)
    assert fake.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig) == parent
    assert fake.nvmlDeviceGetUUID(mig).startswith("MIG-") and fake.nvmlDeviceGetName(mig).endswith("MIG 1g.5gb")
    assert fake.nvmlDeviceGetHandleByUUID(fake.mig_uuids_of(0)[1]) == fake.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
    with pytest.raises(fake.NVMLError_NotSupported):
        fake.nvmlDeviceGetTotalEnergyConsumption(mig)


def test_latency_is_real_and_calls_are_thread_safe() -> None:
    fake = FakeNVML("4xH100-SXM5-80GB", latency_s=0.002)
    fake.nvmlInit()
    handles = [fake.nvmlDeviceGetHandleByIndex(i) for i in range(4)]
    t0 = time.perf_counter()
    fake.nvmlDeviceGetTotalEnergyConsumption(handles[0])
    assert time.perf_counter() - t0 >= 0.002
    fake.latency_s = 0.0
    readings: dict[int, list[int]] = {k: [] for k in range(8)}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for _ in range(300):
                readings[k].append(fake.nvmlDeviceGetTotalEnergyConsumption(handles[k % 4]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1 + 8 * 300
    # each thread saw a monotone counter even though two threads shared each device
    assert all(r == sorted(r) for r in readings.values())
