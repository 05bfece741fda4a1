"""GPU energy through NVML, choosing the best method each board supports and saying which it used.

Per device (keyed by UUID), in order of preference (MEASUREMENT.md sections 1 and 8):

1. ``energy_counter``: differences of ``nvmlDeviceGetTotalEnergyConsumption`` (mJ, Volta and newer).
   The GPU accounts energy itself, so the sampling rate only sets time resolution.
2. ``instant_power``: ``NVML_FI_DEV_POWER_INSTANT`` polled at <= 100 ms by a background thread and
   integrated with the trapezoid rule.
3. ``average_power``: ``nvmlDeviceGetPowerUsage`` integrated, only on boards older than Ampere with
   neither of the above (there NVML documents it as instantaneous). On Ampere (except GA100) and newer
   it is a 1 s average and is never integrated: such a board without 1 or 2 is ``unavailable``.

MIG instances map to their parent GPU, measured once (NVML cannot measure MIG slices). Counter resets
and wrap-around, unsupported calls, a lost GPU, transient errors and a missing NVML library are
handled and written into the device notes; nothing here raises into the caller after construction.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import (
    AVERAGE_POWER,
    ENERGY_COUNTER,
    INSTANT_POWER,
    UNAVAILABLE,
    DeviceInfo,
)
from .gpu_meter import GpuMeter

ENV_FAKE = "FOOTPRINT_FAKE_NVML"

# NVML codes and ids, compared by value so that any pynvml-shaped module works (real or fake).
_SUCCESS = 0
_ERR_UNINITIALIZED = 1
_ERR_NOT_SUPPORTED = 3
_ERR_NOT_FOUND = 6
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ARCH_VOLTA = 5
_ARCH_AMPERE = 7
_ARCH_UNKNOWN = 0xFFFFFFFF
_FI_POWER_INSTANT = 186
_SCOPE_GPU = 0
_SCOPE_MODULE = 1
_ARCH_NAMES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
_WRAP_MODULI = (2**32, 2**64)  # counter widths we can recognise a wrap-around for
_PROBE_TRIES = 3


def load_nvml() -> tuple[Any | None, list[str]]:
    """The NVML module to use and notes about it: FakeNVML if FOOTPRINT_FAKE_NVML is set, else pynvml.

    Imported lazily: pynvml is only needed once a meter starts.
    """
    spec = os.environ.get(ENV_FAKE, "").strip()
    if spec:
        from .fake_nvml import FakeNVML

        try:
            return FakeNVML.from_env(spec), []
        except ValueError as exc:
            return None, [f"{ENV_FAKE}={spec!r} is not a valid fake device spec: {exc}"]
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        return None, [f"pynvml (package nvidia-ml-py) is not importable ({exc}); no GPU energy measured"]
    notes = []
    if not hasattr(pynvml, "_nvmlGetFunctionPointer"):
        notes.append("the imported pynvml is not NVIDIA's nvidia-ml-py binding; readings may be wrong")
    return pynvml, notes


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _field_number(fv: Any) -> float:
    """Read a c_nvmlFieldValue_t value according to its valueType."""
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(getattr(fv, "valueType", 1)), "uiVal"
    )
    return float(getattr(fv.value, attr))


def counter_delta_mj(
    last_mj: int, new_mj: int, dt_s: float, p_max_w: float, p_last_w: float | None, moduli: tuple[int, ...] = _WRAP_MODULI
) -> tuple[float, str | None]:
    """Energy (mJ) between two counter readings, and what happened: None, "wrap", "reset" or "jump".

    A decrease is a wrap-around if completing the cycle of a 32- or 64-bit counter gives a plausible
    amount (<= p_max_w over the interval, plus 1 s slack for the counter's update period); otherwise it
    is a reset (driver reload): the counter restarted from 0, so at least `new_mj` was used, and
    `p_last_w * dt` estimates the part before the reset. An implausibly large increase ("jump") is
    replaced by the same estimate.
    """
    plausible = p_max_w * (max(dt_s, 0.0) + 1.0) * 1000.0
    estimate = (p_last_w or 0.0) * max(dt_s, 0.0) * 1000.0
    if new_mj >= last_mj:
        delta = float(new_mj - last_mj)
        if delta > plausible:
            return estimate, "jump"
        return delta, None
    for modulus in moduli:  # the widths the counter may have: a 64-bit counter never wraps at 2**32
        if last_mj < modulus:
            wrapped = float(modulus - last_mj + new_mj)
            if wrapped <= plausible:
                return wrapped, "wrap"
    if new_mj > plausible:
        return estimate, "reset"
    return max(float(new_mj), estimate), "reset"


@dataclass
class _Gpu:
    """Runtime state of one measured GPU (guarded by the meter's lock)."""

    info: DeviceInfo
    handle: Any
    scope_id: int = _SCOPE_GPU
    has_instant: bool = False
    energy_j: float = 0.0
    power_w: float | None = None
    last_t: float | None = None
    last_counter_mj: int | None = None
    last_p: float | None = None
    lost: bool = False
    p_max_w: float = 3000.0
    history: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=16))
    cross_energy_j: float = 0.0
    cross_last: tuple[float, float] | None = None
    events: dict[str, int] = field(default_factory=dict)


class NvmlMeter(GpuMeter):
    """Energy of NVIDIA GPUs through NVML.

    m = NvmlMeter(); m.start(); samples = m.sample(); ...; m.stop(); m.devices -> [DeviceInfo]

    `nvml`: a pynvml-like module (default: FakeNVML if FOOTPRINT_FAKE_NVML is set, else pynvml).
    `devices`: NVML indices and/or UUIDs ("GPU-..." or "MIG-..."); default: every GPU.
    `poll_period_s`: instant/average power polling period (<= 0.1 s recommended).
    `background_poll`: poll from an internal thread (set False when the caller samples often enough
    itself, e.g. deterministic tests). `cross_check`: also integrate instant power on counter devices
    and report the gap between the two in the notes. Start, sample and stop: `meters.gpu_meter.GpuMeter`.
    """

    name = "nvml"
    library = "NVML"

    def __init__(
        self,
        nvml: Any | None = None,
        devices: Sequence[int | str] | None = None,
        *,
        poll_period_s: float = 0.1,
        background_poll: bool = True,
        cross_check: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(devices, poll_period_s, background_poll, clock)
        self._nvml = nvml
        self.cross_check = cross_check
        self.driver_version: str | None = None

    # --- start-up -----------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._nvml is None:
            self._nvml, notes = load_nvml()
            self.notes.extend(notes)
            if self._nvml is None:
                return
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:
            code = _code(exc)
            if code == _ERR_LIBRARY_NOT_FOUND:
                self.notes.append("NVML library not found (no NVIDIA driver on this machine?): no GPU energy measured")
            elif code == _ERR_DRIVER_NOT_LOADED:
                self.notes.append("NVIDIA driver not loaded: no GPU energy measured")
            else:
                self.notes.append(f"nvmlInit failed ({type(exc).__name__}: {exc}): no GPU energy measured")
            return
        self._initialised = True
        try:
            self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as exc:
            self.notes.append(f"driver version unknown ({exc})")
        if getattr(nvml, "is_fake", False):
            self.notes.append("simulated GPUs (FakeNVML): readings come from a power model, not hardware")

        selection: list[int | str]
        if self._selection is None:
            try:
                selection = list(range(int(nvml.nvmlDeviceGetCount())))
            except Exception as exc:
                self.notes.append(f"nvmlDeviceGetCount failed ({exc}): no GPU energy measured")
                return
            if not selection:
                self.notes.append("NVML reports no GPU")
        else:
            selection = self._selection

        by_uuid: dict[str, _Gpu] = {}
        for spec in selection:
            try:
                handle, mig_uuid = self._resolve(spec)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            except Exception as exc:
                info = DeviceInfo(
                    uuid=str(spec),
                    name="unknown",
                    index=spec if isinstance(spec, int) else None,
                    driver_version=self.driver_version,
                )
                info.note(f"could not open GPU {spec!r}: {type(exc).__name__}: {exc}")
                self._failed.append(info)
                continue
            gpu = by_uuid.get(uuid)
            if gpu is None:
                gpu = self._probe(handle, uuid, spec if isinstance(spec, int) else None)
                by_uuid[uuid] = gpu
                self._gpus.append(gpu)
            if mig_uuid is not None:
                gpu.info.note(
                    f"MIG instance {mig_uuid} selected: NVML cannot measure MIG slices, so its parent GPU "
                    "is measured (once); that energy is shared by every instance on the GPU"
                )

    def _resolve(self, spec: int | str) -> tuple[Any, str | None]:
        """Handle of the physical GPU behind `spec`, and the MIG UUID if `spec` named a MIG instance."""
        nvml = self._nvml
        if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
            handle = nvml.nvmlDeviceGetHandleByIndex(int(spec))
        else:
            handle = nvml.nvmlDeviceGetHandleByUUID(str(spec).strip())
        try:
            flag = nvml.nvmlDeviceIsMigDeviceHandle(handle)  # pynvml returns a c_uint, not an int
            is_mig = bool(getattr(flag, "value", flag))
        except Exception:  # old driver or binding: no MIG
            is_mig = False
        if not is_mig:
            return handle, None
        mig_uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle), mig_uuid

    def _call(self, name: str, *args: Any) -> tuple[Any, BaseException | None]:
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None, AttributeError(f"{name} not in this NVML binding")
        try:
            return fn(*args), None
        except Exception as exc:
            return None, exc

    def _probe(self, handle: Any, uuid: str, index_hint: int | None) -> _Gpu:
        nvml = self._nvml
        name, _ = self._call("nvmlDeviceGetName", handle)
        index, _ = self._call("nvmlDeviceGetIndex", handle)
        arch, _ = self._call("nvmlDeviceGetArchitecture", handle)
        limit_mw, _ = self._call("nvmlDeviceGetPowerManagementLimit", handle)
        info = DeviceInfo(
            uuid=uuid,
            name=_text(name) if name is not None else "unknown NVIDIA GPU",
            index=int(index) if index is not None else index_hint,
            driver_version=self.driver_version,
            architecture=_ARCH_NAMES.get(int(arch), f"unknown ({arch})") if arch is not None else None,
            power_limit_w=float(limit_mw) / 1000.0 if limit_mw else None,
            measured=not getattr(nvml, "is_fake", False),
        )
        gpu = _Gpu(info=info, handle=handle)
        if info.power_limit_w:
            gpu.p_max_w = max(2.0 * info.power_limit_w, 1500.0)
        mig_mode, _ = self._call("nvmlDeviceGetMigMode", handle)
        if mig_mode and int(mig_mode[0]) == 1:
            info.note("MIG mode is enabled: the energy is the whole GPU's, shared by all its MIG instances")

        # Power field and its scope: GPU scope first, module scope (Grace Hopper) as fallback.
        for scope_id, scope_name in ((_SCOPE_GPU, "board"), (_SCOPE_MODULE, "module")):
            ok, err = self._probe_instant(handle, scope_id)
            if ok:
                gpu.has_instant, gpu.scope_id, info.power_scope = True, scope_id, scope_name
                break
            if err is not None and _code(err) == _ERR_GPU_IS_LOST:
                break
        if info.power_scope == "module":
            info.note(
                "GPU-scope power is not supported on this board (e.g. Grace Hopper): readings cover "
                "the whole module (GPU + Grace CPU + memory)"
            )

        # 1. the energy counter
        counter, err = None, None
        for _ in range(_PROBE_TRIES):
            counter, err = self._call("nvmlDeviceGetTotalEnergyConsumption", handle)
            if (
                err is None
                or _code(err) in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND, _ERR_GPU_IS_LOST)
                or isinstance(err, AttributeError)
            ):
                break
        if err is not None and _code(err) == _ERR_GPU_IS_LOST:
            info.method = UNAVAILABLE
            info.note("GPU lost (NVML_ERROR_GPU_IS_LOST) before measurement started")
            return gpu
        if err is None and counter is not None:
            info.method = ENERGY_COUNTER
            info.power_scope = info.power_scope or "board"
            if info.power_scope == "module":
                info.note("the energy counter's scope is assumed to be the module as well (not documented)")
            gpu.last_counter_mj = int(counter)
            gpu.last_t = self._clock()
            gpu.history.append((gpu.last_t, 0.0))
            return gpu
        known_arch = arch is not None and int(arch) != _ARCH_UNKNOWN
        why = "; it needs Volta or newer" if known_arch and int(arch) < _ARCH_VOLTA else ""
        info.note(f"total-energy counter unavailable ({_describe(err)}){why}")

        # 2. instant power, polled and integrated
        pre_ampere = known_arch and int(arch) < _ARCH_AMPERE
        if gpu.has_instant:
            info.method = INSTANT_POWER
            self._set_poll_notes(info)
            self._read_power(gpu)
            return gpu
        info.note("instant power field (NVML_FI_DEV_POWER_INSTANT) not supported")

        # 3. nvmlDeviceGetPowerUsage, only where NVML documents it as instantaneous (before Ampere)
        if pre_ampere:
            watts, err = self._call("nvmlDeviceGetPowerUsage", handle)
            if err is None and watts is not None:
                info.method = AVERAGE_POWER
                info.power_scope = "board"
                self._set_poll_notes(info)
                info.note(
                    "fallback: integrating nvmlDeviceGetPowerUsage (instantaneous on pre-Ampere boards "
                    "per NVML docs, but refreshed at the sensor's own rate); less accurate than a counter"
                )
                self._read_power(gpu)
                return gpu
            info.note(f"nvmlDeviceGetPowerUsage unavailable ({_describe(err)})")
        else:
            info.note(
                "not integrating nvmlDeviceGetPowerUsage: on Ampere (except GA100) and newer, or an "
                "unknown architecture, it is a 1 s average"
            )
        info.method = UNAVAILABLE
        info.note("no usable power or energy reading: this GPU's energy is not measured")
        return gpu

    def _probe_instant(self, handle: Any, scope_id: int) -> tuple[bool, BaseException | None]:
        err: BaseException | None = None
        for _ in range(_PROBE_TRIES):
            values, err = self._call("nvmlDeviceGetFieldValues", handle, [(_FI_POWER_INSTANT, scope_id)])
            if err is None:
                ret = int(getattr(values[0], "nvmlReturn", _SUCCESS))
                return ret == _SUCCESS, None
            if _code(err) in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND, _ERR_GPU_IS_LOST) or isinstance(err, AttributeError):
                break
        return False, err

    def _set_poll_notes(self, info: DeviceInfo) -> None:
        info.poll_period_s = self.poll_period_s
        if self.poll_period_s > 0.1:
            info.note(f"poll period {self.poll_period_s:g} s is longer than 100 ms: the integral misses short power changes")
        if not self.background_poll:
            info.note("no background polling: energy is integrated between the caller's samples")

    # --- reading ------------------------------------------------------------------------------------

    @staticmethod
    def _needs_polling(gpu: _Gpu) -> bool:
        return gpu.info.method in (INSTANT_POWER, AVERAGE_POWER)

    def _poll(self, gpu: _Gpu) -> None:
        if self._needs_polling(gpu):
            self._read(gpu, cross=False)
        elif self.cross_check and gpu.info.method == ENERGY_COUNTER:
            self._read_cross(gpu)

    def _shutdown(self) -> None:
        self._nvml.nvmlShutdown()

    def _read(self, gpu: _Gpu, cross: bool | None = None) -> None:
        if gpu.lost:
            return
        if gpu.info.method == ENERGY_COUNTER:
            self._read_counter(gpu)
            if self.cross_check if cross is None else cross:
                self._read_cross(gpu)
        elif self._needs_polling(gpu):
            self._read_power(gpu)

    def _read_counter(self, gpu: _Gpu) -> None:
        t = self._clock()
        try:
            mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(gpu.handle))
        except Exception as exc:
            self._on_error(gpu, exc, t)
            return
        if gpu.last_counter_mj is None or gpu.last_t is None:
            gpu.last_counter_mj, gpu.last_t = mj, t
            return
        dt = t - gpu.last_t
        delta_mj, event = counter_delta_mj(gpu.last_counter_mj, mj, dt, gpu.p_max_w, gpu.last_p)
        if event is not None:
            self._on_counter_event(gpu, event, t, delta_mj)
        gpu.energy_j += delta_mj / 1000.0
        self._track_gap(gpu, dt)
        gpu.last_counter_mj, gpu.last_t = mj, t
        gpu.history.append((t, gpu.energy_j))
        t_old, e_old = gpu.history[0]
        if t - t_old > 0:
            gpu.last_p = (gpu.energy_j - e_old) / (t - t_old)
            if not self.cross_check:
                gpu.power_w = gpu.last_p

    def _on_counter_event(self, gpu: _Gpu, event: str, t: float, delta_mj: float) -> None:
        gpu.events[event] = gpu.events.get(event, 0) + 1
        since = t - (self._t_start if self._t_start is not None else t)
        if event == "wrap":
            gpu.info.note("energy counter wrapped around; handled (the cycle was completed)")
        elif event == "reset":
            gpu.info.note(
                f"energy counter reset (driver reload?) near {since:.1f} s; the interval was "
                f"estimated at {delta_mj / 1000:.1f} J from the power before it"
            )
        else:
            gpu.info.note(
                f"implausible energy counter jump near {since:.1f} s ignored; the interval was estimated from the previous power"
            )

    def _read_power_w(self, gpu: _Gpu) -> float:
        if gpu.info.method == AVERAGE_POWER:
            return float(self._nvml.nvmlDeviceGetPowerUsage(gpu.handle)) / 1000.0
        values = self._nvml.nvmlDeviceGetFieldValues(gpu.handle, [(_FI_POWER_INSTANT, gpu.scope_id)])
        fv = values[0]
        ret = int(getattr(fv, "nvmlReturn", _SUCCESS))
        if ret != _SUCCESS:
            raise self._nvml.NVMLError(ret)
        return _field_number(fv) / 1000.0

    def _read_power(self, gpu: _Gpu) -> None:
        t = self._clock()
        try:
            p = self._read_power_w(gpu)
        except Exception as exc:
            self._on_error(gpu, exc, t)
            return
        if gpu.last_t is not None and gpu.last_p is not None:
            dt = t - gpu.last_t
            if dt > 0:
                gpu.energy_j += 0.5 * (p + gpu.last_p) * dt
                self._track_gap(gpu, dt)
            elif dt < 0:
                return
        gpu.last_t, gpu.last_p, gpu.power_w = t, p, p

    def _read_cross(self, gpu: _Gpu) -> None:
        if not gpu.has_instant or gpu.lost:
            return
        t = self._clock()
        try:
            values = self._nvml.nvmlDeviceGetFieldValues(gpu.handle, [(_FI_POWER_INSTANT, gpu.scope_id)])
        except Exception:
            return  # the cross-check is best effort; errors are counted on the main reading
        fv = values[0]
        if int(getattr(fv, "nvmlReturn", _SUCCESS)) != _SUCCESS:
            return
        p = _field_number(fv) / 1000.0
        if gpu.cross_last is not None and t > gpu.cross_last[0]:
            gpu.cross_energy_j += 0.5 * (p + gpu.cross_last[1]) * (t - gpu.cross_last[0])
        gpu.cross_last = (t, p)
        gpu.power_w = p

    def _on_error(self, gpu: _Gpu, exc: BaseException, t: float) -> None:
        since = t - (self._t_start if self._t_start is not None else t)
        if _code(exc) == _ERR_GPU_IS_LOST:
            if not gpu.lost:
                gpu.lost = True
                gpu.power_w = None
                ok = gpu.last_t is not None and self._t_start is not None
                last = (gpu.last_t - self._t_start) if ok else 0.0  # type: ignore[operator]
                gpu.info.note(
                    f"GPU lost (NVML_ERROR_GPU_IS_LOST) {since:.1f} s after start: energy after "
                    f"the last good reading ({last:.1f} s) is not counted"
                )
            return
        gpu.info.errors += 1
        gpu.info.note(f"transient read errors ({type(exc).__name__}: {exc}) were skipped; the next good reading covers the gap")

    def _summarise(self, gpu: _Gpu) -> None:
        info = gpu.info
        if info.errors:
            info.note(f"{info.errors} failed readings in total")
        if self.cross_check and info.method == ENERGY_COUNTER and gpu.cross_energy_j > 0:
            gap = (gpu.cross_energy_j - gpu.energy_j) / gpu.energy_j * 100 if gpu.energy_j else float("nan")
            info.note(
                f"cross-check: integrated instant power {gpu.cross_energy_j:.1f} J vs energy counter "
                f"{gpu.energy_j:.1f} J ({gap:+.1f} %)"
            )
        if self._needs_polling(gpu) and info.max_gap_s is not None and info.max_gap_s > 3 * self.poll_period_s:
            info.note(
                f"longest gap between power readings {info.max_gap_s:.2f} s (target "
                f"{self.poll_period_s:g} s): short power changes in it are missed"
            )


def _describe(err: BaseException | None) -> str:
    if err is None:
        return "no value"
    code = _code(err)
    return f"{type(err).__name__}" + (f", code {code}" if code is not None else "") + f": {err}"
