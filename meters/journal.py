"""Append-only, crash-tolerant journal of meter samples (JSON lines).

Written by the sampler as it goes and flushed to the OS at least every `flush_interval_s`, so a
process killed with SIGKILL loses at most about that much (the page cache survives the process; an
optional fsync guards against power loss). `read_journal` rebuilds the samples from a journal whose
writer died mid-line: a torn last line is ignored, never fatal.

Format (one JSON value per line):

    {"type": "header", "format": "footprint-meters-journal", "version": 1, "pid": ..., ...}
    {"type": "devices", "t": 12.3, "keys": ["GPU-...", ...], "devices": [DeviceInfo dicts]}
    [t, e0, p0, e1, p1, ...]         one tick: its monotonic time, then cumulative J and W per key
    {"type": "event", "t": ..., "kind": "error", ...}
    {"type": "end", "t": ..., "totals": {...}}       only after a clean stop

Energies are cumulative since each meter's start, so a lost line costs resolution, not energy.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .base import DeviceInfo, DeviceSample

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "footprint-meters-journal"
VERSION = 1


def _num(x: float | None, digits: int) -> str:
    if x is None or x != x or x in (float("inf"), float("-inf")):
        return "null"
    return f"{x:.{digits}f}"


class JournalWriter:
    """Writes the journal. Not thread-safe by itself: the sampler calls it from one thread at a time."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        meta: dict[str, Any] | None = None,
        flush_interval_s: float = 0.5,
        fsync_interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_interval_s = flush_interval_s
        self.fsync_interval_s = fsync_interval_s
        self._clock = clock
        self._fh: TextIO | None = open(self.path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._last_flush = clock()
        self._last_fsync = self._last_flush
        self.lines = 0
        header = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "pid": os.getpid(),
            "wall_time": time.time(),
            "t_monotonic": clock(),
        }
        header.update(meta or {})
        self._write(json.dumps(header, default=str))
        self.flush(force=True)

    @property
    def closed(self) -> bool:
        return self._fh is None

    def _write(self, line: str) -> None:
        if self._fh is not None:
            self._fh.write(line)
            self._fh.write("\n")
            self.lines += 1

    def set_devices(self, t: float, devices: Iterable[DeviceInfo]) -> None:
        """Declare the column order (by UUID) for the sample lines that follow, with device records."""
        infos = list(devices)
        keys = list(dict.fromkeys([*self._keys, *(d.uuid for d in infos)]))
        self._keys, self._index = keys, {k: i for i, k in enumerate(keys)}
        self._write(json.dumps({"type": "devices", "t": t, "keys": keys, "devices": [d.to_dict() for d in infos]}, default=str))

    def write_samples(self, t: float, samples: Iterable[DeviceSample]) -> None:
        """One line per tick; devices missing from this tick are written as null."""
        samples = list(samples)
        unknown = [s for s in samples if s.uuid not in self._index]
        if unknown:  # a device the caller did not declare: declare it minimally first
            self.set_devices(t, [DeviceInfo(uuid=s.uuid, name=s.uuid) for s in unknown])
        row: list[str] = ["null"] * (2 * len(self._keys))
        for s in samples:
            i = self._index[s.uuid]
            row[2 * i] = _num(s.energy_j_cumulative, 4)
            row[2 * i + 1] = _num(s.power_w, 2)
        self._write(f"[{_num(t, 4)}{',' if row else ''}{','.join(row)}]")

    def event(self, t: float, kind: str, **fields: Any) -> None:
        self._write(json.dumps({"type": "event", "t": t, "kind": kind, **fields}, default=str))

    def maybe_flush(self, now: float | None = None) -> None:
        """Flush if the last flush is older than the interval (called every tick: cheap otherwise)."""
        now = self._clock() if now is None else now
        if now - self._last_flush >= self.flush_interval_s:
            self.flush(now=now)

    def flush(self, force: bool = False, now: float | None = None) -> None:
        if self._fh is None:
            return
        now = self._clock() if now is None else now
        self._fh.flush()
        self._last_flush = now
        if self.fsync_interval_s is not None and (force or now - self._last_fsync >= self.fsync_interval_s):
            os.fsync(self._fh.fileno())
            self._last_fsync = now

    def close(self, t: float | None = None, totals: dict[str, Any] | None = None) -> None:
        """Write the end marker (a clean stop) and close."""
        if self._fh is None:
            return
        if totals is not None:
            self._write(json.dumps({"type": "end", "t": t, "totals": totals}, default=str))
        self._fh.flush()
        if self.fsync_interval_s is not None:
            os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None


@dataclass
class Journal:
    """A journal read back: samples, device records, events and whether the run ended cleanly."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    samples: list[DeviceSample] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] | None = None
    complete: bool = False
    bad_lines: int = 0
    torn_tail: bool = False

    @property
    def last_t(self) -> float | None:
        return max((s.t_monotonic for s in self.samples), default=None)

    def energy_j(self) -> dict[str, float]:
        """Last cumulative energy per device: the run's energy up to the last journaled tick."""
        out: dict[str, float] = {}
        for s in self.samples:
            out[s.uuid] = s.energy_j_cumulative
        return out

    def to_frame(self) -> pd.DataFrame:
        """Samples as a DataFrame (uuid, t_monotonic, energy_j_cumulative, power_w)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "uuid": [s.uuid for s in self.samples],
                "t_monotonic": [s.t_monotonic for s in self.samples],
                "energy_j_cumulative": [s.energy_j_cumulative for s in self.samples],
                "power_w": [s.power_w for s in self.samples],
            }
        )


def read_journal(path: str | os.PathLike[str]) -> Journal:
    """Rebuild samples from a journal, also one whose writer was killed (torn last line tolerated)."""
    p = Path(path)
    j = Journal(path=p)
    keys: list[str] = []
    with open(p, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    # The file ends with "\n" after a complete line; anything after the last newline is a torn write.
    tail = lines.pop() if lines else ""
    if tail.strip():
        j.torn_tail = True
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            j.bad_lines += 1
            continue
        if isinstance(value, list):
            if not value or not keys:
                continue
            t = float(value[0])
            for i, key in enumerate(keys):
                k = 1 + 2 * i
                if k >= len(value) or value[k] is None:
                    continue
                power = value[k + 1] if k + 1 < len(value) else None
                j.samples.append(DeviceSample(key, t, float(value[k]), float(power) if power is not None else None))
        elif isinstance(value, dict):
            kind = value.get("type")
            if kind == "header":
                j.header = value
            elif kind == "devices":
                keys = [str(k) for k in value.get("keys", [])]
                for d in value.get("devices", []):
                    try:
                        info = DeviceInfo.from_dict(d)
                    except TypeError:
                        continue
                    j.devices[info.uuid] = info
            elif kind == "event":
                j.events.append(value)
            elif kind == "end":
                j.totals = value.get("totals")
                j.complete = True
        else:
            j.bad_lines += 1
    return j
