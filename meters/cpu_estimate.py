"""Estimated CPU (and RAM) power when RAPL cannot be read, following codecarbon's method.

codecarbon (MEASUREMENT.md section 2): CPU power = TDP x (0.1 + 0.9 x load^3) in machine mode when
psutil is available, else TDP x 0.5; the TDP comes from its table of 2000+ CPUs (generic 85 W when
the model is unknown and no better guess exists); RAM = 5 W per estimated DIMM. We reuse codecarbon's
own lookup so both tools agree, and mark every number ``method="estimated"`` (``measured=False``).

codecarbon's own `TDP()` takes 1-3 s (it imports pandas and runs py-cpuinfo), which made a whole
tracked process as slow to start and stop as codecarbon itself. `fast_estimate` gives the same
numbers in milliseconds: the CPU model from /proc/cpuinfo (what py-cpuinfo reports as brand_raw on
Linux), codecarbon's own CPU table (its packaged cpu_power.csv, read with the csv module) matched
exactly as codecarbon matches it (`match_cpu`), and its RAM heuristic (its `RAM` class, a light
import). Anything it cannot settle (no /proc/cpuinfo model, no table, SLURM CPU counts) falls back
to codecarbon's full lookup. The lookup runs in a background thread: ``start()`` returns at once,
samples appear once the TDP is known (the integral of the load factor is kept from the start, so no
energy is lost by the delay).
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import ESTIMATED, DeviceInfo, DeviceSample

# codecarbon's constants (codecarbon/external/hardware.py at 3.3.x), used if it cannot be imported.
GENERIC_TDP_W = 85.0
CONSTANT_FRACTION = 0.5
GENERIC_RAM_W = 10.0
LOAD_INTERVAL_S = 1.0  # how often the machine's CPU load is read (codecarbon reads it every 15 s by default)
POWER_PER_THREAD_W = 4.0  # codecarbon's DEFAULT_POWER_PER_CORE for CPUs missing from its table


@dataclass
class HostEstimate:
    """What the estimator resolved: CPU model and TDP, RAM power, and where they came from."""

    cpu_model: str | None = None
    tdp_w: float | None = None
    ram_power_w: float | None = None
    notes: list[str] = field(default_factory=list)


def codecarbon_estimate(include_ram: bool = True) -> HostEstimate:
    """CPU model/TDP and RAM power from codecarbon's tables and heuristics (slow: ~1-3 s)."""
    import logging

    est = HostEstimate()
    cc_logger = logging.getLogger("codecarbon")
    previous: int | None = None
    try:
        from codecarbon.core.cpu import TDP

        previous = cc_logger.level  # read after import: codecarbon sets its own level then
        cc_logger.setLevel(logging.ERROR)  # its unknown-CPU warnings are kept in our notes instead
        tdp = TDP()
        est.cpu_model = tdp.model
        est.tdp_w = float(tdp.tdp) if tdp.tdp else None
        if est.tdp_w is None:
            est.notes.append(f"CPU {tdp.model!r} not in codecarbon's TDP table")
        else:
            est.notes.append(
                f"TDP {est.tdp_w:g} W for {tdp.model!r} from codecarbon's CPU table "
                "(or its 4 W-per-thread guess for unknown models)"
            )
    except Exception as exc:
        est.notes.append(f"codecarbon CPU lookup failed ({type(exc).__name__}: {exc})")
    if previous is not None:
        cc_logger.setLevel(previous)
    if include_ram:
        est.ram_power_w, note = codecarbon_ram_w()
        est.notes.append(note)
    return est


def codecarbon_ram_w() -> tuple[float | None, str]:
    """RAM power from codecarbon's per-DIMM heuristic (its `RAM` class: a light import, no pandas)."""
    import logging

    cc_logger = logging.getLogger("codecarbon")
    try:
        from codecarbon.external.ram import RAM

        previous = cc_logger.level
        cc_logger.setLevel(logging.ERROR)
        try:
            watts = float(RAM(tracking_mode="machine").total_power().W)
        finally:
            cc_logger.setLevel(previous)
        return watts, f"RAM {watts:g} W from codecarbon's per-DIMM heuristic (5 W per slot)"
    except Exception as exc:
        return None, f"codecarbon RAM estimate failed ({type(exc).__name__}: {exc})"


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's brand string ("model name"), as py-cpuinfo reports it on Linux; None where there is none."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        return None
    return None


@lru_cache(maxsize=2)
def codecarbon_cpu_table(path: str | None = None) -> tuple[tuple[str, float | None], ...]:
    """(name, TDP W or None) rows of codecarbon's packaged CPU table, found without importing codecarbon;
    every row is kept (as codecarbon's matcher sees them), an unreadable TDP as None."""
    if path is None:
        spec = importlib.util.find_spec("codecarbon")
        if spec is None or not spec.submodule_search_locations:
            return ()
        path = str(Path(next(iter(spec.submodule_search_locations))) / "data" / "hardware" / "cpu_power.csv")
    rows = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                name = row.get("Name")
                if name is None:
                    continue
                try:
                    rows.append((name, float(row.get("TDP") or "nan")))
                except ValueError:
                    rows.append((name, None))
    except OSError:
        return ()
    return tuple(rows)


def _tokens(text: str) -> frozenset[str]:
    """rapidfuzz's default_process (lower case, non-alphanumerics to spaces) split into tokens."""
    return frozenset(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def match_cpu(model: str, names: Sequence[str]) -> str | None:
    """codecarbon's `TDP._get_matching_cpu` (non-greedy) without rapidfuzz: an exact case-insensitive name,
    then again with "(R)", " CPU", "@ x.xxGHz" removed, then the one table name whose word set contains, or
    is contained in, the model's (rapidfuzz's token_set_ratio of 100); several such names: no match."""
    lowered = [n.lower() for n in names]
    if model.lower() in lowered:
        return names[lowered.index(model.lower())]
    raw = model.replace("(R)", "")
    cut = raw.find(" CPU @ ")
    if cut > 0:
        raw = raw[:cut]
    raw = re.sub(r" @\s*\d+\.\d+GHz", "", raw.replace(" CPU", ""))
    if raw.lower() in lowered:
        return names[lowered.index(raw.lower())]
    mine = _tokens(raw)
    if not mine:
        return None
    found = [n for n in names if (t := _tokens(n)) and (t <= mine or mine <= t)]
    return found[0] if len(found) == 1 else None


def fast_estimate(include_ram: bool = True) -> HostEstimate:
    """codecarbon's CPU TDP and RAM power in milliseconds (see the module docstring); falls back to
    `codecarbon_estimate` where this cannot give codecarbon's answer."""
    model = cpu_model()
    table = codecarbon_cpu_table()
    if model is None or not table or (os.environ.get("SLURM_JOB_ID") and match_cpu(model, [n for n, _ in table]) is None):
        return codecarbon_estimate(include_ram)
    est = HostEstimate(cpu_model=model)
    name = match_cpu(model, [n for n, _ in table])
    tdp = dict(table).get(name) if name is not None else None
    if tdp is not None and math.isfinite(tdp) and tdp > 0:
        est.tdp_w = tdp
        est.notes.append(f"TDP {est.tdp_w:g} W for {model!r} from codecarbon's CPU table (matched {name!r})")
    else:
        try:
            import psutil

            threads = psutil.cpu_count()
        except Exception:
            threads = os.cpu_count()
        if threads:
            est.tdp_w = POWER_PER_THREAD_W * threads
            est.notes.append(
                f"TDP {est.tdp_w:g} W for {model!r}: not in codecarbon's CPU table, so its {POWER_PER_THREAD_W:g} W "
                f"per thread x {threads} threads"
            )
        else:
            est.notes.append(f"CPU {model!r} not in codecarbon's TDP table")
    if include_ram:
        est.ram_power_w, note = codecarbon_ram_w()
        est.notes.append(note)
    return est


@dataclass
class _Channel:
    info: DeviceInfo
    energy_j: float = 0.0
    power_w: float | None = None


class CpuEstimateMeter:
    """Modelled CPU and RAM power integrated over time. `resolve` is injectable to skip codecarbon."""

    name = "cpu_estimate"

    def __init__(
        self,
        *,
        include_cpu: bool = True,
        include_ram: bool = True,
        tdp_w: float | None = None,
        ram_power_w: float | None = None,
        mode: str = "auto",  # auto | cpu_load | constant
        resolve: Callable[[bool], HostEstimate] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.include_cpu = include_cpu
        self.include_ram = include_ram
        self._tdp_override = tdp_w
        self._ram_override = ram_power_w
        self.mode = mode
        self._resolve_fn = resolve or fast_estimate
        self._clock = clock
        self._lock = threading.Lock()
        self._resolved = threading.Event()
        self._thread: threading.Thread | None = None
        self._estimate = HostEstimate()
        self._psutil: Any = None
        self._t0: float | None = None
        self._t_last: float | None = None
        self._t_load = float("-inf")
        self._factor_integral = 0.0  # integral of the TDP fraction over time (s)
        self._factor_now = CONSTANT_FRACTION
        self.notes: list[str] = []
        self._cpu = _Channel(
            DeviceInfo(
                uuid="estimate:cpu", name="CPU (estimated)", method=ESTIMATED, component="cpu", power_scope="host", measured=False
            )
        )
        self._ram = _Channel(
            DeviceInfo(
                uuid="estimate:ram", name="RAM (estimated)", method=ESTIMATED, component="ram", power_scope="host", measured=False
            )
        )

    @property
    def devices(self) -> list[DeviceInfo]:
        out = []
        if self.include_cpu:
            out.append(self._cpu.info)
        if self.include_ram:
            out.append(self._ram.info)
        return out

    def start(self) -> None:
        """Return at once; the TDP lookup runs in a background thread."""
        with self._lock:
            if self._t0 is not None:
                return
            self._t0 = self._t_last = self._clock()
            if self.mode in ("auto", "cpu_load") and self.include_cpu:
                try:
                    import psutil

                    psutil.cpu_percent(interval=None)  # primes the counter; the first value is meaningless
                    self._psutil = psutil
                except ImportError:
                    self.notes.append("psutil not installed: constant mode (TDP x 0.5)")
            mode = "cpu_load" if self._psutil is not None else "constant"
            self._cpu.info.note(
                "estimated, not measured: TDP x (0.1 + 0.9 x machine CPU load^3), codecarbon's machine mode"
                if mode == "cpu_load"
                else "estimated, not measured: TDP x 0.5 (codecarbon's constant mode)"
            )
            self._ram.info.note("estimated, not measured: constant RAM power (codecarbon's DIMM heuristic)")
        need_cpu = self.include_cpu and self._tdp_override is None
        need_ram = self.include_ram and self._ram_override is None
        if need_cpu or need_ram:
            self._thread = threading.Thread(target=self._resolve, args=(need_ram,), name="cpu-estimate", daemon=True)
            self._thread.start()
        else:
            self._finish_resolution(HostEstimate())

    def _resolve(self, need_ram: bool) -> None:
        try:
            est = self._resolve_fn(need_ram)
        except Exception as exc:
            est = HostEstimate(notes=[f"CPU/RAM estimate failed: {type(exc).__name__}: {exc}"])
        self._finish_resolution(est)

    def _finish_resolution(self, est: HostEstimate) -> None:
        with self._lock:
            if self._tdp_override is not None:
                est.tdp_w = self._tdp_override
                est.notes.append(f"TDP {self._tdp_override:g} W given by the user")
            if self._ram_override is not None:
                est.ram_power_w = self._ram_override
                est.notes.append(f"RAM power {self._ram_override:g} W given by the user")
            if est.tdp_w is None:
                est.tdp_w = GENERIC_TDP_W
                est.notes.append(f"generic TDP {GENERIC_TDP_W:g} W (codecarbon's default)")
            if est.ram_power_w is None:
                est.ram_power_w = GENERIC_RAM_W
                est.notes.append(f"generic RAM power {GENERIC_RAM_W:g} W")
            self._estimate = est
            for note in est.notes:
                target = self._ram.info if note.startswith(("RAM", "generic RAM", "codecarbon RAM")) else self._cpu.info
                target.note(note)
            if est.cpu_model:
                self._cpu.info.name = f"{est.cpu_model} (estimated)"
            self._cpu.info.power_limit_w = est.tdp_w
        self._resolved.set()

    def _advance(self, t: float) -> None:
        if self._t_last is None:
            return
        dt = t - self._t_last
        if dt <= 0:
            return
        self._factor_integral += self._factor_now * dt  # the load read last applies until the next read
        self._t_last = t
        if self._psutil is None:
            self._factor_now = CONSTANT_FRACTION
        elif t - self._t_load >= LOAD_INTERVAL_S:  # /proc/stat once a second, not at every 10 Hz tick
            self._t_load = t
            try:
                load = float(self._psutil.cpu_percent(interval=None)) / 100.0
                self._factor_now = 0.1 + 0.9 * load**3
            except Exception as exc:
                self._cpu.info.errors += 1
                self._cpu.info.note(f"CPU load unreadable ({exc}); previous load kept")

    def sample(self) -> list[DeviceSample]:
        """Estimated cumulative energy; empty until the TDP is resolved. Never raises."""
        try:
            with self._lock:
                t = self._clock()
                self._advance(t)
                if not self._resolved.is_set() or self._t0 is None:
                    return []
                out: list[DeviceSample] = []
                est = self._estimate
                if self.include_cpu and est.tdp_w is not None:
                    self._cpu.energy_j = est.tdp_w * self._factor_integral
                    self._cpu.power_w = est.tdp_w * self._factor_now
                    out.append(DeviceSample(self._cpu.info.uuid, t, self._cpu.energy_j, self._cpu.power_w))
                if self.include_ram and est.ram_power_w is not None:
                    self._ram.energy_j = est.ram_power_w * (t - self._t0)
                    self._ram.power_w = est.ram_power_w
                    out.append(DeviceSample(self._ram.info.uuid, t, self._ram.energy_j, self._ram.power_w))
                return out
        except Exception as exc:
            self._cpu.info.errors += 1
            self._cpu.info.note(f"estimate failed: {type(exc).__name__}: {exc}")
            return []

    def wait_resolved(self, timeout: float | None = None) -> bool:
        """Block until the TDP lookup is done (for tests and for a final sample at stop)."""
        return self._resolved.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for the lookup so that a final sample has numbers; fall back to generics."""
        if self._thread is not None and not self._resolved.wait(timeout):
            self._finish_resolution(HostEstimate(notes=["TDP lookup did not finish in time"]))


def host_meters(
    powercap_root: str | None = None,
    *,
    include_ram: bool = True,
    resolve: Callable[[bool], HostEstimate] | None = None,
) -> Sequence[Any]:
    """Meters for the host: RAPL where readable, else the estimate; RAM estimated if RAPL has no DRAM."""
    from .rapl import DEFAULT_ROOT, RaplMeter

    rapl = RaplMeter(powercap_root or DEFAULT_ROOT)
    meters: list[Any] = []
    if rapl.available:
        meters.append(rapl)
        if include_ram and not rapl.has_dram:
            meters.append(CpuEstimateMeter(include_cpu=False, include_ram=True, resolve=resolve))
    else:
        est = CpuEstimateMeter(include_cpu=True, include_ram=include_ram, resolve=resolve)
        reasons = [n for d in rapl.devices for n in d.notes] + rapl.notes
        if reasons:
            est._cpu.info.note("RAPL unusable: " + "; ".join(dict.fromkeys(reasons)))
        meters.append(est)
    return meters
