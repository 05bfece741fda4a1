"""An in-process stand-in for AMD's `amdsmi` Python module, so every AMD meter code path runs without an Instinct GPU.

It mirrors what `meters.amd` calls of the real library (ROCm's py-interface/amdsmi_interface.py, ROCm 6.x): the same
function names, argument order and return shapes (dicts with the real keys; "N/A" where a field is unsupported),
`AmdSmiLibraryException` with the real `err_code` values (AMDSMI_STATUS_*), a socket-power model integrated over
wall time into the 64-bit energy accumulator that `amdsmi_get_energy_count` returns with its resolution (15.3 µJ
per tick, as MI200/MI300 report), compute partitions (CPX: eight handles on one physical GPU, each reporting the
whole device's power and energy, as amd-smi shows them), and injected faults (no energy counter, as in a VM guest;
no socket power; a GPU that stops answering; ``rocm62``: the energy count as ROCm 6.2 and older return it, the
accumulator under the key ``power`` and no ``energy_accumulator``; ``stale``: an accumulator that never moves, as
reported on some MI100/MI210). Thread-safe.

    fake = FakeAmdSmi("2xMI300X")          # or FOOTPRINT_FAKE_AMDSMI=2xMI300X, read by meters.amd
    meter = AmdMeter(amdsmi=fake)

Spec items: ``[N x]MODEL[:PARTITION][/FAULT]``, e.g. ``1xMI300X:CPX``, ``2xMI250X/nocounter``; "missing" stands
for a machine without the library.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

# AMDSMI_STATUS_* values of amdsmi_wrapper.py (ROCm 6.x)
AMDSMI_STATUS_SUCCESS = 0
AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_RETRY = 9
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_NOT_FOUND = 31
AMDSMI_STATUS_NOT_INIT = 32
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34
AMDSMI_STATUS_UNKNOWN_ERROR = 4294967295
COUNTER_RESOLUTION_UJ = 15.3  # µJ per accumulator tick (MI200/MI300 firmware; amd-smi metric --energy shows it)
MAX_FAKE_GPUS = 4096


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2


class AmdSmiException(Exception):
    """Base class, as in amdsmi_exception.py."""


class AmdSmiLibraryException(AmdSmiException):
    """An error code of the library (`err_code`, `err_info`), as amdsmi raises it."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = {
            AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
            AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
            AMDSMI_STATUS_NOT_FOUND: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
            AMDSMI_STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
            AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
        }.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"


class AmdSmiParameterException(AmdSmiException):
    """A handle of the wrong type, as amdsmi raises it before calling the library."""


@dataclass(frozen=True)
class AmdModel:
    """A board as amdsmi reports it: market name, PCI device id, gfx target, power cap (W), compute units."""

    market_name: str
    device_id: int
    gfx: str
    power_cap_w: float
    compute_units: int
    mi300: bool  # MI300 and newer report current_socket_power; MI200 and older only average_socket_power


MODELS = {
    "MI300X": AmdModel("AMD Instinct MI300X", 0x74A1, "gfx942", 750.0, 304, True),
    "MI250X": AmdModel("AMD Instinct MI250X", 0x740C, "gfx90a", 560.0, 110, False),  # a spec item is one GCD (a handle)
    "MI210": AmdModel("AMD Instinct MI210", 0x740F, "gfx90a", 300.0, 104, False),
}
PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
FAULTS = ("nocounter", "nopower", "lost", "rocm62", "stale")
_ITEM = re.compile(r"^\s*(?:(\d+)\s*[xX]\s*)?([A-Za-z0-9\-]+?)\s*(?::\s*([A-Za-z]+))?\s*(?:/\s*([a-z0-9]+))?\s*$")


@dataclass
class _Device:
    """One physical GPU: its power model and accumulator (partitions share it)."""

    model: AmdModel
    serial: int
    partition: str
    fault: str | None
    t0: float
    phase: float
    lost_at: float | None = None

    def power_w(self, t: float) -> float:
        """Socket power: 55 % of the cap plus a 20 % swing with a 20 s period (deterministic)."""
        cap = self.model.power_cap_w
        return cap * (0.55 + 0.2 * math.sin(2 * math.pi * (t - self.t0) / 20.0 + self.phase))

    def energy_j(self, t: float) -> float:
        """The integral of `power_w` since the driver loaded (plus a boot-time offset, as a real counter has)."""
        cap, w = self.model.power_cap_w, 2 * math.pi / 20.0
        x = t - self.t0
        return 5.0e6 + cap * (0.55 * x - 0.2 / w * (math.cos(w * x + self.phase) - math.cos(self.phase)))


@dataclass(frozen=True)
class Handle:
    """A processor handle (the real one is a ctypes pointer): a physical device and its partition index."""

    device: int
    partition_id: int


@dataclass
class FakeAmdSmi:
    """A module-like object with amdsmi's functions. `spec`: "2xMI300X", "1xMI300X:CPX", "1xMI250X/nocounter"."""

    spec: str = "1xMI300X"
    clock: Callable[[], float] = time.monotonic
    is_fake: bool = True
    devices: list[_Device] = field(default_factory=list)
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiParameterException = AmdSmiParameterException

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._init = False
        t0 = self.clock()
        for i, (model, partition, fault) in enumerate(parse_spec(self.spec)):
            self.devices.append(_Device(model, 0x6F1F0A2B3C4D0000 + i, partition, fault, t0, 0.7 * i))
        self.handles = [Handle(d, p) for d, dev in enumerate(self.devices) for p in range(PARTITIONS[dev.partition])]

    @classmethod
    def from_env(cls, spec: str) -> FakeAmdSmi:
        return cls(spec)

    # --- library lifetime -------------------------------------------------------------------------
    def amdsmi_init(self, flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        if not isinstance(flag, AmdSmiInitFlags):
            raise AmdSmiParameterException(flag)
        self._init = True

    def amdsmi_shut_down(self) -> None:
        self._init = False

    def amdsmi_get_processor_handles(self) -> list[Handle]:
        self._check()
        return list(self.handles)

    # --- identity ---------------------------------------------------------------------------------
    def amdsmi_get_gpu_asic_info(self, h: Handle) -> dict[str, Any]:
        d = self._device(h)
        return {
            "market_name": d.model.market_name,
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": hex(d.model.device_id),
            "rev_id": "0x00",
            "asic_serial": f"0x{d.serial:016X}",
            "oam_id": h.device,
            "num_compute_units": d.model.compute_units // PARTITIONS[d.partition],
            "target_graphics_version": d.model.gfx,
        }

    def amdsmi_get_gpu_device_uuid(self, h: Handle) -> str:
        d = self._device(h)
        return f"{h.partition_id:02x}ff{d.model.device_id:04x}-0000-1000-80{h.device % 256:02x}-{d.serial & 0xFFFFFFFFFFFF:012x}"

    def amdsmi_get_gpu_driver_info(self, h: Handle) -> dict[str, str]:
        self._device(h)
        return {"driver_name": "amdgpu", "driver_version": "6.8.5", "driver_date": "2015/01/01 00:00"}

    def amdsmi_get_gpu_kfd_info(self, h: Handle) -> dict[str, Any]:
        self._device(h)
        return {"kfd_id": 1000 + 8 * h.device + h.partition_id, "node_id": 2 + h.device, "current_partition_id": h.partition_id}

    def amdsmi_get_gpu_compute_partition(self, h: Handle) -> str:
        return self._device(h).partition

    def amdsmi_get_gpu_memory_partition(self, h: Handle) -> str:
        self._device(h)
        return "NPS1"

    def amdsmi_get_power_cap_info(self, h: Handle) -> dict[str, int]:
        cap = int(self._device(h).model.power_cap_w * 1e6)  # µW, as amdsmi returns it
        return {"power_cap": cap, "default_power_cap": cap, "dpm_cap": 2100, "min_power_cap": 0, "max_power_cap": cap}

    # --- power and energy -------------------------------------------------------------------------
    def amdsmi_get_power_info(self, h: Handle) -> dict[str, Any]:
        d = self._device(h)
        if d.fault == "nopower":
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        p = int(round(d.power_w(self.clock())))
        cap = int(d.model.power_cap_w)
        return {
            "current_socket_power": p if d.model.mi300 else "N/A",
            "average_socket_power": "N/A" if d.model.mi300 else p,
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": cap,
        }

    def amdsmi_get_energy_count(self, h: Handle) -> dict[str, Any]:
        d = self._device(h)
        if d.fault == "nocounter":
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        t = self.clock()
        ticks = int(d.energy_j(d.t0 if d.fault == "stale" else t) * 1e6 / COUNTER_RESOLUTION_UJ) % 2**64
        if d.fault == "rocm62":  # py-interface before ROCm/amdsmi commit 95ca2b8 (ROCm 6.3)
            return {"power": ticks, "counter_resolution": COUNTER_RESOLUTION_UJ, "timestamp": int(t * 1e9)}
        return {
            "power": ticks,
            "energy_accumulator": ticks,
            "counter_resolution": COUNTER_RESOLUTION_UJ,
            "timestamp": int(t * 1e9),
        }

    # --- faults -----------------------------------------------------------------------------------
    def lose(self, device: int, at: float | None = None) -> None:
        """The device stops answering (AMDSMI_STATUS_NOT_FOUND) from `at` (default: now)."""
        self.devices[device].lost_at = self.clock() if at is None else at

    def _check(self) -> None:
        if not self._init:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)

    def _device(self, h: Any) -> _Device:
        if not isinstance(h, Handle):
            raise AmdSmiParameterException(h)
        self._check()
        d = self.devices[h.device]
        if d.fault == "lost" or (d.lost_at is not None and self.clock() >= d.lost_at):
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_FOUND)
        return d


def parse_spec(spec: str) -> list[tuple[AmdModel, str, str | None]]:
    """ "2xMI300X,1xMI250X/nocounter" -> [(model, partition, fault), ...], one per physical GPU."""
    out: list[tuple[AmdModel, str, str | None]] = []
    for item in (s for s in spec.split(",") if s.strip()):
        m = _ITEM.match(item)
        if not m:
            raise ValueError(f"cannot parse {item!r} (expected e.g. 2xMI300X, 1xMI300X:CPX, 1xMI250X/nocounter)")
        n, name, part, fault = int(m.group(1) or 1), m.group(2).upper(), (m.group(3) or "SPX").upper(), m.group(4)
        if name not in MODELS:
            raise ValueError(f"unknown AMD model {m.group(2)!r} (known: {', '.join(MODELS)})")
        if part not in PARTITIONS:
            raise ValueError(f"unknown compute partition {part!r} (known: {', '.join(PARTITIONS)})")
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        if len(out) + n > MAX_FAKE_GPUS or n < 1:
            raise ValueError(f"1 to {MAX_FAKE_GPUS} fake GPUs, got {n}")
        out += [(MODELS[name], part, fault)] * n
    if not out:
        raise ValueError("empty spec")
    return out
