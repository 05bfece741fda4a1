"""An in-process stand-in for the `pynvml` module, so every NVML code path runs without a GPU.

There is no official NVML mock (see MEASUREMENT.md section 5); this one models what the meter depends
on: NVML-style names and deterministic UUIDs, a power model integrated into a millijoule energy
counter over wall time, the 1 s averaging of `nvmlDeviceGetPowerUsage` on Ampere (except GA100) and
newer, per-call latency, MIG handles, and injected faults (no energy counter, no instant-power field,
counter reset and wrap-around, GPU lost, library missing, intermittent errors). It is thread-safe.

    fake = FakeNVML("8xH100-SXM5-80GB,1xV100-SXM2-32GB")
    meter = NvmlMeter(nvml=fake)

The environment variable FOOTPRINT_FAKE_NVML (read by `meters.nvml`) takes the same spec string, or
"missing" for a machine without the NVML library.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
import uuid as _uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

# --- constants (same names and values as nvidia-ml-py's pynvml) --------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

NVML_DEVICE_ARCH_KEPLER = 2
NVML_DEVICE_ARCH_MAXWELL = 3
NVML_DEVICE_ARCH_PASCAL = 4
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_TURING = 6
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_ADA = 8
NVML_DEVICE_ARCH_HOPPER = 9
NVML_DEVICE_ARCH_BLACKWELL = 10
NVML_DEVICE_ARCH_UNKNOWN = 0xFFFFFFFF

NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186

NVML_POWER_SCOPE_GPU = 0
NVML_POWER_SCOPE_MODULE = 1
NVML_POWER_SCOPE_MEMORY = 2

NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

_ERROR_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """Mirrors pynvml.NVMLError: `NVMLError(code)` returns the matching subclass, `.value` is the code."""

    _value_class: dict[int, type[NVMLError]] = {}
    value: int

    def __new__(cls, value: int = NVML_ERROR_UNKNOWN, *args: Any) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._value_class.get(value, NVMLError)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int = NVML_ERROR_UNKNOWN, *args: Any) -> None:
        super().__init__(self.value)

    def __str__(self) -> str:
        return _ERROR_STRINGS.get(self.value, f"NVML Error with code {self.value}")


def _error_class(name: str, code: int) -> type[NVMLError]:
    def __new__(cls: type[NVMLError], *args: Any) -> NVMLError:
        return NVMLError.__new__(cls, code)

    def __init__(self: NVMLError, *args: Any) -> None:
        Exception.__init__(self, code)

    klass = type(name, (NVMLError,), {"__new__": __new__, "__init__": __init__})
    NVMLError._value_class[code] = klass
    return klass


# pynvml's generated names: NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost
ERROR_CLASSES: dict[str, type[NVMLError]] = {
    name: _error_class(name, code)
    for name, code in {
        "NVMLError_Uninitialized": NVML_ERROR_UNINITIALIZED,
        "NVMLError_InvalidArgument": NVML_ERROR_INVALID_ARGUMENT,
        "NVMLError_NotSupported": NVML_ERROR_NOT_SUPPORTED,
        "NVMLError_NoPermission": NVML_ERROR_NO_PERMISSION,
        "NVMLError_NotFound": NVML_ERROR_NOT_FOUND,
        "NVMLError_DriverNotLoaded": NVML_ERROR_DRIVER_NOT_LOADED,
        "NVMLError_Timeout": NVML_ERROR_TIMEOUT,
        "NVMLError_LibraryNotFound": NVML_ERROR_LIBRARY_NOT_FOUND,
        "NVMLError_FunctionNotFound": NVML_ERROR_FUNCTION_NOT_FOUND,
        "NVMLError_GpuIsLost": NVML_ERROR_GPU_IS_LOST,
        "NVMLError_Unknown": NVML_ERROR_UNKNOWN,
    }.items()
}


def _raise(code: int) -> NoReturn:
    raise NVMLError(code)


# --- device models ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuModel:
    """A board as NVML reports it. `tdp_w` is the default power limit."""

    nvml_name: str
    arch: int
    tdp_w: float
    ga100: bool = False  # GA100 (A100) reports instant power from nvmlDeviceGetPowerUsage
    module_scope_only: bool = False  # Grace Hopper: GPU-scope power unsupported, module scope works
    instant_field: bool = True  # NVML_FI_DEV_POWER_INSTANT available with this board's driver
    mig_capable: bool = False
    mig_profile: str = "1g.10gb"


# Names as NVML returns them (nvidia-smi -L). K80's last driver branch (470) predates the instant-power
# field, so it is modelled without it (an assumption, used to exercise the average-power fallback).
MODELS: dict[str, GpuModel] = {
    "A100-SXM4-40GB": GpuModel(
        "NVIDIA A100-SXM4-40GB", NVML_DEVICE_ARCH_AMPERE, 400, ga100=True, mig_capable=True, mig_profile="1g.5gb"
    ),
    "A100-SXM4-80GB": GpuModel("NVIDIA A100-SXM4-80GB", NVML_DEVICE_ARCH_AMPERE, 400, ga100=True, mig_capable=True),
    "A100-PCIE-40GB": GpuModel(
        "NVIDIA A100-PCIE-40GB", NVML_DEVICE_ARCH_AMPERE, 250, ga100=True, mig_capable=True, mig_profile="1g.5gb"
    ),
    "A100-PCIE-80GB": GpuModel("NVIDIA A100 80GB PCIe", NVML_DEVICE_ARCH_AMPERE, 300, ga100=True, mig_capable=True),
    "A10G": GpuModel("NVIDIA A10G", NVML_DEVICE_ARCH_AMPERE, 300),
    "A40": GpuModel("NVIDIA A40", NVML_DEVICE_ARCH_AMPERE, 300),
    "RTX-3090": GpuModel("NVIDIA GeForce RTX 3090", NVML_DEVICE_ARCH_AMPERE, 350),
    "L4": GpuModel("NVIDIA L4", NVML_DEVICE_ARCH_ADA, 72),
    "H100-SXM5-80GB": GpuModel("NVIDIA H100 80GB HBM3", NVML_DEVICE_ARCH_HOPPER, 700, mig_capable=True),
    "H100-PCIE-80GB": GpuModel("NVIDIA H100 PCIe", NVML_DEVICE_ARCH_HOPPER, 350, mig_capable=True),
    "H200-SXM-141GB": GpuModel("NVIDIA H200", NVML_DEVICE_ARCH_HOPPER, 700, mig_capable=True, mig_profile="1g.18gb"),
    "GH200-480GB": GpuModel("NVIDIA GH200 480GB", NVML_DEVICE_ARCH_HOPPER, 900, module_scope_only=True, mig_capable=True),
    "B200": GpuModel("NVIDIA B200", NVML_DEVICE_ARCH_BLACKWELL, 1000, mig_capable=True, mig_profile="1g.23gb"),
    "T4": GpuModel("Tesla T4", NVML_DEVICE_ARCH_TURING, 70),
    "V100-SXM2-16GB": GpuModel("Tesla V100-SXM2-16GB", NVML_DEVICE_ARCH_VOLTA, 300),
    "V100-SXM2-32GB": GpuModel("Tesla V100-SXM2-32GB", NVML_DEVICE_ARCH_VOLTA, 300),
    "V100-PCIE-32GB": GpuModel("Tesla V100-PCIE-32GB", NVML_DEVICE_ARCH_VOLTA, 250),
    "P100-PCIE-16GB": GpuModel("Tesla P100-PCIE-16GB", NVML_DEVICE_ARCH_PASCAL, 250),
    "K80": GpuModel("Tesla K80", NVML_DEVICE_ARCH_KEPLER, 149, instant_field=False),
}


def _model_key(text: str) -> str:
    key = text.strip().upper().replace(" ", "-").replace("_", "-")
    for prefix in ("NVIDIA-", "TESLA-"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key


_SPEC_ITEM = re.compile(r"^\s*(?:(\d+)\s*[xX]\s*)?([A-Za-z0-9_\- ]+?)\s*(?:@\s*([\d.]+)\s*W?)?\s*$")


MAX_FAKE_GPUS = 4096  # a fake machine larger than this is a typo in FOOTPRINT_FAKE_NVML, not a machine


def parse_spec(spec: str) -> list[tuple[str, float | None]]:
    """ "2xA100-SXM4-40GB,1xV100-SXM2-32GB@250W" -> [(model key, watts or None), ...], one per GPU."""
    out: list[tuple[str, float | None]] = []
    for item in spec.split(","):
        if not item.strip():
            continue
        m = _SPEC_ITEM.match(item)
        if not m:
            raise ValueError(f"bad fake NVML device spec {item!r}; expected e.g. '2xA100-SXM4-40GB'")
        count = int(m.group(1) or 1)
        if len(out) + count > MAX_FAKE_GPUS:
            raise ValueError(f"more than {MAX_FAKE_GPUS} fake GPUs in {spec[:60]!r}")
        key = _model_key(m.group(2))
        if key not in MODELS:
            raise ValueError(f"unknown fake GPU model {m.group(2)!r}; known: {', '.join(sorted(MODELS))}")
        watts = float(m.group(3)) if m.group(3) else None
        out.extend([(key, watts)] * count)
    return out


# --- faults, clock, handles -------------------------------------------------------------------------


@dataclass
class Faults:
    """Faults injected into one device. Times are seconds since the FakeNVML was created."""

    no_energy_counter: bool = False  # as on pre-Volta boards (also automatic for those models)
    no_instant_power: bool = False  # NVML_FI_DEV_POWER_INSTANT returns NOT_SUPPORTED
    no_power_usage: bool = False  # nvmlDeviceGetPowerUsage raises NOT_SUPPORTED
    reset_at_s: float | None = None  # energy counter restarts from 0 (driver reload)
    wrap_at_mj: int | None = None  # counter wraps modulo this value
    initial_energy_mj: int | None = None  # counter value at creation (default: deterministic, large)
    lost_after_s: float | None = None  # every call on the device raises NVMLError_GpuIsLost
    error_rate: float = 0.0  # probability that a reading call raises `error_code`
    error_code: int = NVML_ERROR_UNKNOWN
    mig_instances: int = 0  # MIG enabled with this many instances


class ManualClock:
    """A clock tests advance by hand, for deterministic integration (pass to FakeNVML and the meter)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._t = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._t += seconds
            return self._t


@dataclass(frozen=True)
class FakeHandle:
    """Opaque device handle (real NVML gives ctypes pointers; callers only pass them back)."""

    gpu: int
    mig: int | None = None


@dataclass
class _FieldValueUnion:
    dVal: float = 0.0
    uiVal: int = 0
    ulVal: int = 0
    ullVal: int = 0
    sllVal: int = 0
    siVal: int = 0
    usVal: int = 0


@dataclass
class FieldValue:
    """Same attribute names as pynvml.c_nvmlFieldValue_t."""

    fieldId: int
    scopeId: int = 0
    timestamp: int = 0  # microseconds since 1970
    latencyUsec: int = 0
    valueType: int = NVML_VALUE_TYPE_UNSIGNED_INT
    nvmlReturn: int = NVML_SUCCESS
    value: _FieldValueUnion = field(default_factory=_FieldValueUnion)


PowerSource = float | Callable[[float], float]


@dataclass
class _Device:
    index: int
    key: str
    model: GpuModel
    uuid: str
    power: PowerSource
    faults: Faults
    energy_mj: float  # the counter, before wrap
    true_energy_mj: float = 0.0  # ground truth since creation, unaffected by reset/wrap
    last_t: float = 0.0  # seconds since creation up to which energy is integrated
    reset_done: bool = False
    rng: random.Random = field(default_factory=random.Random)
    mig_uuids: list[str] = field(default_factory=list)


class FakeNVML:
    """A pynvml look-alike. Pass it wherever a `pynvml` module is expected (duck-typed)."""

    NVMLError = NVMLError  # constants and the other error classes are set on the class below
    is_fake = True  # lets meters mark readings from this module as simulated

    def __init__(
        self,
        spec: str = "1xA100-SXM4-40GB",
        *,
        power: PowerSource | Sequence[PowerSource] | None = None,
        faults: Faults | Mapping[int, Faults] | None = None,
        latency_s: float = 0.0,
        update_period_s: float = 0.0,
        library_missing: bool = False,
        driver_version: str = "550.54.15",
        clock: Callable[[], float] = time.monotonic,
        integration_step_s: float = 0.002,
        seed: int = 0,
    ) -> None:
        """`power`: watts or f(t) -> watts (t = seconds since creation), one for all or one per GPU;
        default 75 % of each board's TDP. `update_period_s` > 0 makes readings refresh only on that
        grid, as real sensors do (~100 ms on A100/H100)."""
        self.spec = spec
        self._clock = clock
        self._t0 = clock()
        self._wall0 = time.time()
        self._lock = threading.RLock()
        self._init_count = 0
        self.latency_s = latency_s
        self.update_period_s = update_period_s
        self.library_missing = library_missing
        self.driver_version = driver_version
        self._step = integration_step_s
        self.calls: Counter[str] = Counter()
        items = parse_spec(spec)
        self._devices: list[_Device] = []
        for i, (key, watts) in enumerate(items):
            model = MODELS[key]
            if isinstance(power, Sequence) and not isinstance(power, str):
                p: PowerSource = power[i]
            elif power is not None:
                p = power  # type: ignore[assignment]
            else:
                p = watts if watts is not None else 0.75 * model.tdp_w
            if isinstance(faults, Faults):
                f = faults
            elif faults is not None:
                f = faults.get(i, Faults())
            else:
                f = Faults()
            uid = "GPU-" + str(_uuid.uuid5(_uuid.NAMESPACE_URL, f"footprint-fake-nvml/{i}/{key}"))
            initial = f.initial_energy_mj
            if initial is None:  # as if the driver had been loaded for a while
                initial = 10**9 + 7_654_321 * (i + 1)
            dev = _Device(
                index=i,
                key=key,
                model=model,
                uuid=uid,
                power=p,
                faults=f,
                energy_mj=float(initial),
                rng=random.Random(seed * 1000 + i),
            )
            dev.mig_uuids = ["MIG-" + str(_uuid.uuid5(_uuid.NAMESPACE_URL, f"{uid}/mig/{m}")) for m in range(f.mig_instances)]
            self._devices.append(dev)

    @classmethod
    def from_env(cls, value: str, **kwargs: Any) -> FakeNVML:
        """Build from FOOTPRINT_FAKE_NVML: a device spec, or "missing" (no NVML library)."""
        if value.strip().lower() in {"missing", "none", "absent"}:
            return cls("1xA100-SXM4-40GB", library_missing=True, **kwargs)
        return cls(value, **kwargs)

    # --- helpers for tests --------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since creation on the fake's clock (the time base of faults and load functions)."""
        return self._clock() - self._t0

    def true_energy_j(self, index: int) -> float:
        """Ground-truth energy of GPU `index` since creation (ignores reset/wrap), for assertions."""
        with self._lock:
            dev = self._devices[index]
            self._advance(dev, self.elapsed(), quantize=False)
            return dev.true_energy_mj / 1000.0

    def true_energy_between_j(self, index: int, t_start: float, t_end: float) -> float:
        """Ground-truth energy of GPU `index` between two readings of the clock (absolute times)."""
        dev = self._devices[index]
        return self._integrate(dev.power, t_start - self._t0, t_end - self._t0)

    def uuid_of(self, index: int) -> str:
        return self._devices[index].uuid

    def mig_uuids_of(self, index: int) -> list[str]:
        return list(self._devices[index].mig_uuids)

    # --- power model --------------------------------------------------------------------------------

    def _power_at(self, dev: _Device, t: float) -> float:
        p = dev.power
        return float(p(t)) if callable(p) else float(p)

    def _integrate(self, p: PowerSource, a: float, b: float) -> float:
        """Joules between a and b (seconds since creation)."""
        if b <= a:
            return 0.0
        if not callable(p):
            return float(p) * (b - a)
        n = max(1, math.ceil((b - a) / self._step))
        h = (b - a) / n
        total = 0.5 * (p(a) + p(b))
        for k in range(1, n):
            total += p(a + k * h)
        return total * h

    def _quantize(self, t: float) -> float:
        if self.update_period_s > 0:
            return math.floor(t / self.update_period_s) * self.update_period_s
        return t

    def _advance(self, dev: _Device, t: float, quantize: bool = True) -> None:
        """Integrate the power model into the counter up to time t (monotone)."""
        if quantize:
            t = self._quantize(t)
        f = dev.faults
        if f.reset_at_s is not None and not dev.reset_done and t >= f.reset_at_s:
            self._advance_raw(dev, f.reset_at_s)
            dev.energy_mj = 0.0
            dev.reset_done = True
        self._advance_raw(dev, t)

    def _advance_raw(self, dev: _Device, t: float) -> None:
        if t <= dev.last_t:
            return
        e_mj = self._integrate(dev.power, dev.last_t, t) * 1000.0
        dev.energy_mj += e_mj
        dev.true_energy_mj += e_mj
        dev.last_t = t

    # --- call plumbing ------------------------------------------------------------------------------

    def _latency(self) -> None:
        """Real sleep, outside the lock, so concurrent callers overlap as they do with the real library."""
        if self.latency_s > 0:
            time.sleep(self.latency_s)

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if self._init_count <= 0:
            _raise(NVML_ERROR_UNINITIALIZED)

    def _device(self, handle: Any, *, reading: bool = False) -> _Device:
        if not isinstance(handle, FakeHandle) or not 0 <= handle.gpu < len(self._devices):
            _raise(NVML_ERROR_INVALID_ARGUMENT)
        dev = self._devices[handle.gpu]
        f = dev.faults
        if f.lost_after_s is not None and self.elapsed() >= f.lost_after_s:
            _raise(NVML_ERROR_GPU_IS_LOST)
        if reading and f.error_rate > 0 and dev.rng.random() < f.error_rate:
            _raise(f.error_code)
        return dev

    # --- the pynvml API subset ----------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        with self._lock:
            self.calls["nvmlInit"] += 1
            if self.library_missing:
                _raise(NVML_ERROR_LIBRARY_NOT_FOUND)
            self._init_count += 1

    def nvmlShutdown(self) -> None:
        with self._lock:
            self.calls["nvmlShutdown"] += 1
            if self._init_count <= 0:
                _raise(NVML_ERROR_UNINITIALIZED)
            self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._latency()
        with self._lock:
            self._enter("nvmlSystemGetDriverVersion")
            return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetCount")
            return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetHandleByIndex")
            if not isinstance(index, int) or not 0 <= index < len(self._devices):
                _raise(NVML_ERROR_INVALID_ARGUMENT)
            return FakeHandle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> FakeHandle:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetHandleByUUID")
            text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            for dev in self._devices:
                if dev.uuid == text:
                    return FakeHandle(dev.index)
                if text in dev.mig_uuids:
                    return FakeHandle(dev.index, dev.mig_uuids.index(text))
            _raise(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetIndex")
            return self._device(handle).index

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetName")
            dev = self._device(handle)
            if handle.mig is not None:
                return f"{dev.model.nvml_name} MIG {dev.model.mig_profile}"
            return dev.model.nvml_name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetUUID")
            dev = self._device(handle)
            return dev.mig_uuids[handle.mig] if handle.mig is not None else dev.uuid

    def nvmlDeviceGetArchitecture(self, handle: FakeHandle) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetArchitecture")
            return self._device(handle).model.arch

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeHandle) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetPowerManagementLimit")
            dev = self._device(handle)
            if handle.mig is not None:
                _raise(NVML_ERROR_NOT_SUPPORTED)
            return int(dev.model.tdp_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        """Millijoules since driver load; NOT_SUPPORTED before Volta and on MIG handles."""
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetTotalEnergyConsumption")
            dev = self._device(handle, reading=True)
            if handle.mig is not None or dev.faults.no_energy_counter or dev.model.arch < NVML_DEVICE_ARCH_VOLTA:
                _raise(NVML_ERROR_NOT_SUPPORTED)
            self._advance(dev, self.elapsed())
            value = int(dev.energy_mj)
            if dev.faults.wrap_at_mj:
                value %= dev.faults.wrap_at_mj
            return value

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        """Milliwatts: a 1 s average on Ampere (except GA100) and newer, instantaneous otherwise."""
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetPowerUsage")
            dev = self._device(handle, reading=True)
            if handle.mig is not None or dev.faults.no_power_usage:
                _raise(NVML_ERROR_NOT_SUPPORTED)
            t = self._quantize(self.elapsed())
            if dev.model.arch >= NVML_DEVICE_ARCH_AMPERE and not dev.model.ga100:
                watts = self._integrate(dev.power, t - 1.0, t) / 1.0
            else:
                watts = self._power_at(dev, t)
            return int(round(watts * 1000))

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, fieldIds: Sequence[Any]) -> list[FieldValue]:
        """Per-field status in `nvmlReturn`, like the real call; supports instant/average power and
        the energy field, with (fieldId, scopeId) tuples or bare ids."""
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetFieldValues")
            dev = self._device(handle, reading=True)
            t = self._quantize(self.elapsed())
            stamp = int((self._wall0 + t) * 1e6)
            out: list[FieldValue] = []
            for item in fieldIds:
                fid, scope = item if isinstance(item, tuple) else (item, NVML_POWER_SCOPE_GPU)
                fv = FieldValue(fieldId=fid, scopeId=scope, timestamp=stamp, latencyUsec=0)
                scope_ok = (scope == NVML_POWER_SCOPE_MODULE) if dev.model.module_scope_only else (scope == NVML_POWER_SCOPE_GPU)
                if handle.mig is not None or not scope_ok:
                    fv.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
                elif fid == NVML_FI_DEV_POWER_INSTANT:
                    if dev.faults.no_instant_power or not dev.model.instant_field:
                        fv.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
                    else:
                        fv.value.uiVal = int(round(self._power_at(dev, t) * 1000))
                elif fid == NVML_FI_DEV_POWER_AVERAGE:
                    if dev.model.arch < NVML_DEVICE_ARCH_AMPERE or dev.model.ga100:
                        fv.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
                    else:
                        fv.value.uiVal = int(round(self._integrate(dev.power, t - 1.0, t) * 1000))
                elif fid == NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
                    if dev.faults.no_energy_counter or dev.model.arch < NVML_DEVICE_ARCH_VOLTA:
                        fv.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
                    else:
                        self._advance(dev, self.elapsed())
                        fv.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                        fv.value.ullVal = int(dev.energy_mj)
                else:
                    fv.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
                out.append(fv)
            return out

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetMigMode")
            dev = self._device(handle)
            if not dev.model.mig_capable:
                _raise(NVML_ERROR_NOT_SUPPORTED)
            mode = NVML_DEVICE_MIG_ENABLE if dev.mig_uuids else NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetMaxMigDeviceCount")
            dev = self._device(handle)
            return 7 if dev.model.mig_capable else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, index: int) -> FakeHandle:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
            dev = self._device(handle)
            if handle.mig is not None:
                _raise(NVML_ERROR_INVALID_ARGUMENT)
            if not 0 <= index < len(dev.mig_uuids):
                _raise(NVML_ERROR_NOT_FOUND)
            return FakeHandle(dev.index, index)

    def nvmlDeviceIsMigDeviceHandle(self, handle: FakeHandle) -> int:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceIsMigDeviceHandle")
            self._device(handle)
            return int(handle.mig is not None)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: FakeHandle) -> FakeHandle:
        self._latency()
        with self._lock:
            self._enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
            self._device(handle)
            if handle.mig is None:
                _raise(NVML_ERROR_INVALID_ARGUMENT)
            return FakeHandle(handle.gpu)


for _name, _value in list(globals().items()):
    if _name.startswith("NVML_"):
        setattr(FakeNVML, _name, _value)
for _name, _cls in ERROR_CLASSES.items():
    setattr(FakeNVML, _name, _cls)
FakeNVML.NVMLError_GPUIsLost = ERROR_CLASSES["NVMLError_GpuIsLost"]  # type: ignore[attr-defined]
