"""AMD Instinct GPU energy through `amdsmi` (AMD's Python library, ROCm), behind the same interface as the NVML meter.

Per physical GPU, in order of preference:

1. ``energy_counter``: differences of ``amdsmi_get_energy_count``'s ``energy_accumulator`` times its
   ``counter_resolution`` (µJ per tick; MI200 and MI300 report it). ROCm 6.2 and older return the accumulator under
   the key ``power`` (renamed in 6.3, the old key kept until 6.4), so either key is read. The GPU accounts energy
   itself, so the sampling rate only sets time resolution. Wrap-around (64-bit, amdsmi.h's uint64_t: never at
   2**32) and resets are handled by the NVML meter's rule (`meters.nvml.counter_delta_mj`), in the counter's own
   ticks. An accumulator that stands still for STALE_COUNTER_S while socket power reads watts is stale: the GPU
   falls back to 2 or 3 from then on.
2. ``instant_power``: ``amdsmi_get_power_info``'s ``current_socket_power`` (W, MI300 and newer) polled and
   integrated (trapezoid), where the counter is unavailable (a VM guest).
3. ``average_power``: ``average_socket_power`` (MI200 and older), integrated, with a note: it is an average.

Identity: the market name (``amdsmi_get_gpu_asic_info``: "AMD Instinct MI300X", a name the LCA catalogue
answers to), UUID, ASIC serial, gfx target, compute and memory partition, driver version and power cap. A GPU in a
compute partition mode (DPX, QPX, CPX) shows one handle per partition, each reporting the whole device's power
and energy: the device is measured once (its partition 0) and the notes say its energy is shared.
Nothing here raises into the caller after construction; a missing library is a note.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .base import AVERAGE_POWER, ENERGY_COUNTER, INSTANT_POWER, UNAVAILABLE, DeviceInfo
from .gpu_meter import GpuMeter
from .nvml import counter_delta_mj

ENV_FAKE = "FOOTPRINT_FAKE_AMDSMI"
_NOT_FOUND = 31  # AMDSMI_STATUS_NOT_FOUND: the device is gone
# A live GPU draws tens of watts at idle, so its accumulator (15.3 µJ ticks) moves between any two readings; one that
# stands still this long while socket power reads above zero is stale (ROCm/rocm_smi_lib#180 on an MI210,
# AMDResearch/hpcfund#21 on an MI100: the same value for a whole run) and socket power is polled instead.
STALE_COUNTER_S = 5.0
_INIT_HINTS = {  # AMDSMI_STATUS_NO_PERM, AMDSMI_STATUS_DRIVER_NOT_LOADED (amdsmi.h)
    10: ": this user cannot open /dev/kfd and /dev/dri/renderD* (ROCm needs it in the render and video groups)",
    34: ": the amdgpu kernel driver is not loaded",
}


def load_amdsmi() -> tuple[Any | None, list[str]]:
    """The amdsmi module to use and notes about it: FakeAmdSmi if FOOTPRINT_FAKE_AMDSMI is set, else amdsmi."""
    spec = os.environ.get(ENV_FAKE, "").strip()
    if spec:
        from .fake_amdsmi import FakeAmdSmi

        if spec.lower() == "missing":
            return None, [f"{ENV_FAKE}=missing: the amdsmi library is absent; no AMD GPU energy measured"]
        try:
            return FakeAmdSmi.from_env(spec), []
        except ValueError as exc:
            return None, [f"{ENV_FAKE}={spec!r} is not a valid fake device spec: {exc}"]
    try:
        import amdsmi  # ROCm's py-interface (pip install amdsmi, matching the installed ROCm)
    except Exception as exc:  # ImportError, or the binding's own failure to load libamd_smi.so
        return None, [f"amdsmi is not importable ({type(exc).__name__}: {exc}); no AMD GPU energy measured"]
    return amdsmi, []


def wanted() -> bool:
    """True where an AMD GPU can be measured: a fake is asked for, or amdsmi is installed and the kernel driver's
    /dev/kfd exists (checked without importing amdsmi, which loads the ROCm library)."""
    if os.environ.get(ENV_FAKE, "").strip():
        return True
    return os.path.exists("/dev/kfd") and importlib.util.find_spec("amdsmi") is not None


def _ticks(reading: dict[str, Any]) -> int:
    """The accumulator of an ``amdsmi_get_energy_count`` reading: ``energy_accumulator`` (ROCm 6.3 and newer), or
    ``power``, its name up to ROCm 6.2 (ROCm/amdsmi commit 95ca2b8, "Changed `power` parameter ... to
    `energy_accumulator`"). KeyError where neither is there."""
    return int(reading["energy_accumulator"] if "energy_accumulator" in reading else reading["power"])


def _code(exc: BaseException) -> int | None:
    v = getattr(exc, "err_code", None)
    return v if isinstance(v, int) else None


def _number(value: Any) -> float | None:
    """A reading, or None where amdsmi says it is unsupported ("N/A", or the max value of its integer type)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if value in (0xFFFF, 0xFFFFFFFF, 2**64 - 1) else float(value)


@dataclass
class _Gpu:
    info: DeviceInfo
    handle: Any
    resolution_uj: float = 0.0
    power_key: str = ""
    energy_j: float = 0.0
    power_w: float | None = None
    last_t: float | None = None
    last_ticks: int | None = None
    last_p: float | None = None
    p_max_w: float = 3000.0
    lost: bool = False
    moved_t: float | None = None  # when the accumulator last advanced


class AmdMeter(GpuMeter):
    """Energy of AMD Instinct GPUs through amdsmi.

    m = AmdMeter(); m.start(); samples = m.sample(); ...; m.stop(); m.devices -> [DeviceInfo]

    `amdsmi`: an amdsmi-like module (default: FakeAmdSmi if FOOTPRINT_FAKE_AMDSMI is set, else amdsmi).
    `devices`: indices into amdsmi's processor handles and/or UUIDs; default every GPU. `poll_period_s`: the power
    polling period where a GPU has no energy counter; `background_poll`: poll from a thread (else between samples).
    Start, sample and stop: `meters.gpu_meter.GpuMeter`, as for NVML.
    """

    name = "amdsmi"
    library = "amdsmi"

    def __init__(
        self,
        amdsmi: Any | None = None,
        devices: Sequence[int | str] | None = None,
        *,
        poll_period_s: float = 0.1,
        background_poll: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(devices, poll_period_s, background_poll, clock)
        self._lib = amdsmi

    # --- discovery ----------------------------------------------------------------------------------
    def _start(self) -> None:
        if self._lib is None:
            self._lib, notes = load_amdsmi()
            self.notes += notes
            if self._lib is None:
                return
        try:
            self._lib.amdsmi_init()
        except Exception as exc:  # the binding's AmdSmiLibraryException: say why in one line, with what to do
            self.notes.append(f"amdsmi_init failed ({_describe(exc)}){_INIT_HINTS.get(_code(exc) or -1, '')}")
            return
        self._initialised = True
        handles = list(self._lib.amdsmi_get_processor_handles())
        if not handles:
            self.notes.append("amdsmi found no AMD GPU")
            return
        asics = [self._get("amdsmi_get_gpu_asic_info", h) or {} for h in handles]
        partitions = [self._get("amdsmi_get_gpu_compute_partition", h) for h in handles]
        keys = [_device_key(a, p, i) for i, (a, p) in enumerate(zip(asics, partitions, strict=True))]
        first: dict[str, int] = {}  # device key -> its first handle: partitions of one GPU share the serial
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        measured: set[int] = set()
        for index, _ in self._select(handles):
            serial = keys[index]
            parent = first[serial]
            if parent in measured:
                continue
            measured.add(parent)
            partition = partitions[parent]
            g = self._probe(handles[parent], parent, asics[parent], partition)
            shared = keys.count(serial)
            if shared > 1:
                g.info.note(
                    f"compute partition {partition}: {shared} handles on this GPU each report the whole device's power and "
                    "energy, so it is measured once, as its first partition (every process on any of its partitions "
                    "records that one UUID, and a job merging them counts it once); the energy is shared by its partitions"
                )
            self._gpus.append(g)

    def _select(self, handles: list[Any]) -> list[tuple[int, Any]]:
        if self._selection is None:
            return list(enumerate(handles))
        out = []
        for spec in self._selection:
            if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
                i = int(spec)
                if 0 <= i < len(handles):
                    out.append((i, handles[i]))
                else:
                    self.notes.append(f"GPU {i} not found: amdsmi lists {len(handles)} handle(s)")
                continue
            match = [(i, h) for i, h in enumerate(handles) if self._get("amdsmi_get_gpu_device_uuid", h) == str(spec).strip()]
            out += match or []
            if not match:
                self.notes.append(f"no AMD GPU with UUID {spec!r}")
        return out

    def _get(self, name: str, *args: Any) -> Any:
        fn = getattr(self._lib, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:
            return None

    def _probe(self, h: Any, index: int, asic: dict[str, Any], partition: str | None) -> _Gpu:
        lib = self._lib
        driver = self._get("amdsmi_get_gpu_driver_info", h) or {}
        cap = _number((self._get("amdsmi_get_power_cap_info", h) or {}).get("power_cap"))
        name = str(asic.get("market_name") or "")
        info = DeviceInfo(
            uuid=str(self._get("amdsmi_get_gpu_device_uuid", h) or f"amd:{index}"),
            name=name if name and name != "N/A" else "unknown AMD GPU",
            index=index,
            driver_version=str(driver.get("driver_version")) if driver.get("driver_version") else None,
            architecture=str(asic.get("target_graphics_version") or "") or None,
            power_limit_w=cap / 1e6 if cap else None,  # amdsmi gives the cap in µW
            power_scope="socket",
            measured=not getattr(lib, "is_fake", False),
        )
        serial = asic.get("asic_serial")
        memory = self._get("amdsmi_get_gpu_memory_partition", h)
        info.note(
            f"amdsmi: ASIC serial {serial}, device id {asic.get('device_id')}, compute partition {partition or 'n/a'}, "
            f"memory partition {memory or 'n/a'}"
        )
        g = _Gpu(info=info, handle=h)
        if info.power_limit_w:
            g.p_max_w = max(2.0 * info.power_limit_w, 1500.0)
        try:
            e = lib.amdsmi_get_energy_count(h)
            ticks, res = _ticks(e), float(e["counter_resolution"])
            if res <= 0:
                raise ValueError(f"counter_resolution {res}")
        except Exception as exc:
            info.note(f"energy accumulator unavailable ({_describe(exc)}): socket power is polled instead")
        else:
            info.method, g.resolution_uj, g.last_ticks, g.last_t = ENERGY_COUNTER, res, ticks, self._clock()
            g.moved_t = g.last_t
            return g
        if not self._use_power(g):
            info.method = UNAVAILABLE
            info.note("no energy accumulator and no socket power: this GPU's energy is not measured")
        return g

    def _use_power(self, g: _Gpu) -> bool:
        """Switch ``g`` to polling socket power (instant, else average) if amdsmi reports one; False where neither."""
        power = self._get("amdsmi_get_power_info", g.handle) or {}
        for key, method in (("current_socket_power", INSTANT_POWER), ("average_socket_power", AVERAGE_POWER)):
            if _number(power.get(key)) is not None:
                g.info.method, g.power_key, g.info.poll_period_s = method, key, self.poll_period_s
                if method == AVERAGE_POWER:
                    g.info.note("fallback: integrating average_socket_power (MI200 and older): an average, not an instant")
                g.last_p = None
                self._read_power(g)
                return True
        return False

    # --- reading ------------------------------------------------------------------------------------
    @staticmethod
    def _needs_polling(g: _Gpu) -> bool:
        return g.info.method in (INSTANT_POWER, AVERAGE_POWER)

    def _shutdown(self) -> None:
        self._lib.amdsmi_shut_down()

    def _read(self, g: _Gpu) -> None:
        if g.lost:
            return
        if g.info.method == ENERGY_COUNTER:
            self._read_counter(g)
        else:
            self._read_power(g)

    def _read_counter(self, g: _Gpu) -> None:
        t = self._clock()
        try:
            ticks = _ticks(self._lib.amdsmi_get_energy_count(g.handle))
        except Exception as exc:
            self._on_error(g, exc, t)
            return
        assert g.last_ticks is not None and g.last_t is not None
        dt = t - g.last_t
        mj_per_tick = g.resolution_uj / 1000.0
        # NVML's wrap/reset rule in the counter's own ticks: plausibility and the estimate scaled to ticks
        delta, event = counter_delta_mj(
            g.last_ticks, ticks, dt, g.p_max_w / mj_per_tick, (g.last_p or 0.0) / mj_per_tick, moduli=(2**64,)
        )
        if event is not None:
            g.info.note(
                f"energy accumulator {event} handled" + (" (estimated from the power before it)" if event != "wrap" else "")
            )
        g.energy_j += delta * mj_per_tick / 1000.0
        if ticks != g.last_ticks or g.moved_t is None:
            g.moved_t = t
        elif t - g.moved_t >= STALE_COUNTER_S and self._stale(g, t):
            return
        if dt > 0:
            g.last_p = g.power_w = delta * mj_per_tick / 1000.0 / dt
            self._track_gap(g, dt)
        g.last_ticks, g.last_t = ticks, t

    def _stale(self, g: _Gpu, t: float) -> bool:
        """The accumulator stood still for STALE_COUNTER_S: if socket power reads above zero, poll it from now on."""
        power = self._get("amdsmi_get_power_info", g.handle) or {}
        p = _number(power.get("current_socket_power"))
        p = p if p is not None else _number(power.get("average_socket_power"))
        if not p:
            return False
        still = t - (g.moved_t or t)
        if not self._use_power(g):
            return False
        g.info.note(
            f"energy accumulator stale: unchanged for {still:.0f} s while socket power read {p:.0f} W (a known amdsmi "
            f"fault on some MI100/MI210, ROCm/rocm_smi_lib#180); socket power polled from then on, the {still:.0f} s "
            "before counted at that power (an estimate)"
        )
        g.energy_j += p * still
        self._start_polling()
        return True

    def _read_power(self, g: _Gpu) -> None:
        t = self._clock()
        try:
            p = _number(self._lib.amdsmi_get_power_info(g.handle).get(g.power_key))
        except Exception as exc:
            self._on_error(g, exc, t)
            return
        if p is None:
            g.info.errors += 1
            return
        if g.last_t is not None and g.last_p is not None and t > g.last_t:
            g.energy_j += 0.5 * (p + g.last_p) * (t - g.last_t)
            self._track_gap(g, t - g.last_t)
        g.last_t, g.last_p, g.power_w = t, p, p

    def _on_error(self, g: _Gpu, exc: BaseException, t: float) -> None:
        if _code(exc) == _NOT_FOUND:
            if not g.lost:
                g.lost, g.power_w = True, None
                g.info.note("GPU no longer found (AMDSMI_STATUS_NOT_FOUND): energy after the last good reading is not counted")
            return
        g.info.errors += 1
        g.info.note(f"transient read errors ({_describe(exc)}) were skipped; the next good reading covers the gap")


def _device_key(asic: dict[str, Any], partition: Any, index: int) -> str:
    """The physical GPU a handle belongs to: its ASIC serial where the GPU is partitioned (DPX/QPX/CPX: one handle per
    partition, one serial), else the handle itself. An unpartitioned GPU is never merged with another, even where
    serials repeat or are blank (a VM guest may report none, or zeros, for every GPU)."""
    serial = str(asic.get("asic_serial") or "").strip()
    real = serial not in ("", "N/A") and serial.strip("0xX") != ""
    if real and str(partition or "").upper() in ("DPX", "QPX", "CPX"):
        return serial
    return f"handle {index}"


def _describe(exc: BaseException) -> str:
    code = _code(exc)
    text = str(getattr(exc, "err_info", "") or exc).strip().replace("\n", " ")
    return f"{type(exc).__name__}" + (f", code {code}" if code is not None else "") + (f": {text}" if text else "")
