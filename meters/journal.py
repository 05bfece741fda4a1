"""Append-only, crash-tolerant journal of meter samples (JSON lines), rolled into columnar segments.

Written by the sampler as it goes and flushed to the OS at least every `flush_interval_s`, so a
process killed with SIGKILL loses at most about that much (the page cache survives the process; an
optional fsync guards against power loss). With a `Retention`, the journal only holds the tail of
the run: every `segment_s` it is renamed into `X.segments/pending/` and a background thread writes it
as a Parquet part (see `meters.segments`), so neither the file, nor stopping, nor reading grows with
the run. Readers stream: a torn last line is ignored, never fatal.

Format (one JSON value per line):

    {"type": "header", "format": "footprint-meters-journal", "version": 2, "pid": ..., "t0": ...,
     "segment_start_ms": ...}                  (each rolled piece starts with its own header)
    {"type": "devices", "t": 12.3, "keys": ["GPU-...", ...], "devices": [DeviceInfo dicts]}
    [t, e0, p0, e1, p1, ...]         one tick: its monotonic time, then cumulative J and W per key
    {"type": "event", "t": ..., "kind": "error", ...}
    {"type": "end", "t": ..., "totals": {...}}       only after a clean stop

Energies are cumulative since each meter's start, so a lost line costs resolution, not energy.
Version 1 journals (the whole run in one file, before segments) read the same way.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .base import DeviceInfo, DeviceSample
from .segments import PENDING, RawBuffer, Retention, SegmentWriter, _Job, part_name, segments_dir

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

FORMAT = "footprint-meters-journal"
VERSION = 2
MAX_EVENTS = 1000  # events kept by a reader (errors are rate-limited by the writer; progress keeps only the last)


def _num(x: float | None, digits: int) -> str:
    return f"{x:.{digits}f}" if x is not None and math.isfinite(x) else "null"


class JournalWriter:
    """Writes the journal. Not thread-safe by itself: the sampler calls it from one thread at a time.

    `retention` (a `meters.segments.Retention`) turns on rolling into Parquet segments; without it the
    journal is one file for the whole run.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        meta: dict[str, Any] | None = None,
        flush_interval_s: float = 0.5,
        fsync_interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        retention: Retention | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_interval_s = flush_interval_s
        self.fsync_interval_s = fsync_interval_s
        self._clock = clock
        self._meta = dict(meta or {})
        now = clock()
        self.t0 = float(self._meta.get("t0", now))
        self.retention = retention
        self._seg_ms = retention.segment_s * 1000 if retention else 0
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._device_dicts: dict[str, dict[str, Any]] = {}
        self._progress_line: str | None = None
        self._fh: TextIO | None = None
        self._last_flush = now
        self._last_fsync = now
        self.lines = 0
        self.rolls = 0
        self.segments: SegmentWriter | None = None
        self._buf = RawBuffer()
        self._seg_start = (self._ms(now) // self._seg_ms) * self._seg_ms if self._seg_ms else 0
        self._seg_end = self._seg_start + self._seg_ms if self._seg_ms else 2**62
        seg_dir = segments_dir(self.path)
        _set_aside(self.path, seg_dir)
        if retention is not None:
            self.segments = SegmentWriter(seg_dir, retention, self._static_meta(), fsync=fsync_interval_s is not None)
        self._open(now)
        self.flush(force=True)

    def _ms(self, t: float) -> int:
        return round((t - self.t0) * 1000.0)

    def _static_meta(self) -> dict[str, Any]:
        keep = ("rank", "local_rank", "world_size", "host", "pid", "name", "t0", "start_unix", "period_s")
        return {"format": "footprint-meters-segments", "version": 1, **{k: self._meta[k] for k in keep if k in self._meta}}

    def _open(self, now: float, path: Path | None = None) -> None:
        """Open a (new) tail: its header, then the device records and the last progress, so each piece stands alone."""
        self._fh = open(path or self.path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        header = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "pid": os.getpid(),
            "wall_time": time.time(),
            "t_monotonic": now,
            **self._meta,
            "t0": self.t0,
        }
        if self.retention is not None:
            header["segment_start_ms"] = self._seg_start
            header["retention"] = self.retention.to_dict()
        self._write(json.dumps(header, default=str))
        if self._keys:
            self._write_devices(now)
        if self._progress_line:
            self._write(self._progress_line)

    @property
    def closed(self) -> bool:
        return self._fh is None

    def _write(self, line: str) -> None:
        if self._fh is not None:
            self._fh.write(line)
            self._fh.write("\n")
            self.lines += 1

    def _write_devices(self, t: float, infos: Iterable[dict[str, Any]] | None = None) -> None:
        devices = list(self._device_dicts.values()) if infos is None else list(infos)
        self._write(json.dumps({"type": "devices", "t": t, "keys": self._keys, "devices": devices}, default=str))

    def set_devices(self, t: float, devices: Iterable[DeviceInfo]) -> None:
        """Declare the column order (by UUID) for the sample lines that follow, with device records."""
        infos = [d.to_dict() for d in devices]
        for d in infos:
            self._device_dicts[d["uuid"]] = d
        keys = list(dict.fromkeys([*self._keys, *(d["uuid"] for d in infos)]))
        self._keys, self._index = keys, {k: i for i, k in enumerate(keys)}
        self._write_devices(t, infos)

    def write_samples(self, t: float, samples: Iterable[DeviceSample]) -> None:
        """One line per tick; devices missing from this tick are written as null."""
        samples = list(samples)
        t_ms = self._ms(t)
        if t_ms >= self._seg_end:
            self._roll(t_ms, t)
        unknown = [s for s in samples if s.uuid not in self._index]
        if unknown:  # a device the caller did not declare: declare it minimally first
            self.set_devices(t, [DeviceInfo(uuid=s.uuid, name=s.uuid) for s in unknown])
        row: list[str] = ["null"] * (2 * len(self._keys))
        buf = self._buf if self.segments is not None else None
        index, finite = self._index, math.isfinite
        for s in samples:  # the hot path of every tick: plain formatting, no helper calls
            i = index[s.uuid]
            e, p = s.energy_j_cumulative, s.power_w
            ok_p = p is not None and finite(p)
            if ok_p:
                row[2 * i + 1] = f"{p:.2f}"
            if e is not None and finite(e):
                row[2 * i] = f"{e:.4f}"
                if buf is not None:
                    buf.dev.append(i)
                    buf.t_ms.append(t_ms)
                    buf.energy_j.append(e)
                    buf.power_w.append(p if ok_p else math.nan)
        self._write(f"[{_num(t, 4)}{',' if row else ''}{','.join(row)}]")

    def _roll(self, t_ms: int, t: float) -> None:
        """Set the tail aside as a pending piece, start a new tail, and hand the piece to the segment writer."""
        if self._fh is None or self.segments is None:
            return
        new_start = (t_ms // self._seg_ms) * self._seg_ms
        pending = self.segments.dir / PENDING / part_name(self._seg_start, new_start, ".jsonl")
        self._fh.flush()
        if self.fsync_interval_s is not None:
            os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        pending.parent.mkdir(parents=True, exist_ok=True)
        # The journal path never disappears (a kill at any instant leaves a tail to find): the piece gets a
        # second name, the new tail is written aside and swapped in. Readers take the piece's span from the
        # piece and the rest from the tail, so the moment both hold the same lines counts them once.
        try:
            os.link(self.path, pending)
        except OSError:  # a filesystem without hard links: a plain rename (the tail is missing for a moment)
            os.replace(self.path, pending)
        comps = [self._device_dicts.get(k, {}).get("component") for k in self._keys]
        job = _Job(self._seg_start, new_start, self._buf, list(self._keys), comps, pending)
        self._buf = RawBuffer()
        self._seg_start, self._seg_end = new_start, new_start + self._seg_ms
        fresh = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()
        self._open(t, fresh)
        self.flush(force=True, now=t)
        os.replace(fresh, self.path)
        self.rolls += 1
        self.segments.submit(job)

    def event(self, t: float, kind: str, **fields: Any) -> None:
        line = json.dumps({"type": "event", "t": t, "kind": kind, **fields}, default=str)
        if kind == "progress":
            self._progress_line = line
        self._write(line)

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
        """Write the end marker (a clean stop), close the tail, then let the segment writer finish:
        O(one segment) whatever the run's length (the tail itself stays as the newest piece)."""
        if self._fh is None:
            return
        if totals is not None:
            self._write(json.dumps({"type": "end", "t": t, "totals": totals}, default=str))
        self._fh.flush()
        if self.fsync_interval_s is not None:
            os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        if self.segments is not None:
            self.segments.close()

    def abandon(self) -> None:
        """Give up the journal after a write error: close what can be closed, never raise (the segment writer
        finishes the parts it holds)."""
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(Exception):
                fh.close()
        if self.segments is not None:
            with contextlib.suppress(Exception):
                self.segments.close()

    @property
    def errors(self) -> list[str]:
        return self.segments.errors if self.segments is not None else []


def _set_aside(path: Path, seg_dir: Path) -> None:
    """A journal or segments left by an earlier run under the same name are renamed, never mixed in or lost."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for p in (path, seg_dir):
        if p.exists() and (p.is_dir() or p.stat().st_size > 0):
            os.replace(p, p.with_name(f"{p.name}.old-{stamp}-{os.getpid()}"))


# ================================================================================================
# Reading
# ================================================================================================
@dataclass
class Journal:
    """A journal read back: samples (as flat columns), device records, events and whether it ended cleanly."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))
    progress: dict[str, Any] | None = None  # the last progress event (steps, tokens, FLOPs)
    totals: dict[str, Any] | None = None
    complete: bool = False
    bad_lines: int = 0
    torn_tail: bool = False
    uuid: list[str] = field(default_factory=list)
    t: array = field(default_factory=lambda: array("d"))
    energy: array = field(default_factory=lambda: array("d"))
    power: array = field(default_factory=lambda: array("d"))  # NaN where unknown

    @property
    def samples(self) -> list[DeviceSample]:
        """The samples as objects (convenient for small journals; the columns are the compact form)."""
        return [
            DeviceSample(u, t, e, None if p != p else p)
            for u, t, e, p in zip(self.uuid, self.t, self.energy, self.power, strict=True)
        ]

    @property
    def last_t(self) -> float | None:
        return max(self.t) if self.t else None

    def energy_j(self) -> dict[str, float]:
        """Last cumulative energy per device: the energy up to the last journaled tick."""
        return dict(zip(self.uuid, self.energy, strict=True))

    def to_frame(self) -> pd.DataFrame:
        """Samples as a DataFrame (uuid, t_monotonic, energy_j_cumulative, power_w)."""
        import numpy as np
        import pandas as pd

        return pd.DataFrame(
            {
                "uuid": self.uuid,
                "t_monotonic": np.frombuffer(self.t, dtype=np.float64),
                "energy_j_cumulative": np.frombuffer(self.energy, dtype=np.float64),
                "power_w": np.frombuffer(self.power, dtype=np.float64),
            }
        )


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The first line's header ({} if there is none or it is unreadable): cheap on a journal of any size."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            value = json.loads(fh.readline(1 << 20) or "{}")
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) and value.get("type") == "header" else {}


def header_number(header: dict[str, Any], *keys: str, default: float = 0.0) -> float:
    """The first of ``keys`` in a header that is a finite number (a damaged header reads as the default)."""
    for k in keys:
        v = header.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return default


def _number(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _ticks(path: Path, j: Journal) -> Iterator[tuple[float, list[Any], list[str]]]:
    """Stream a journal line by line: update `j` (header, devices, events, end) and yield (t, values, keys) per tick."""
    keys: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            if not raw.endswith("\n"):  # anything after the last newline is a torn write
                if raw.strip():
                    j.torn_tail = True
                break
            line = raw.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                j.bad_lines += 1
                continue
            if isinstance(value, list):
                t = _number(value[0]) if value else None
                if t is None:
                    j.bad_lines += 1  # a tick line whose time is not a number: skipped, the next ones read on
                elif keys:
                    yield t, value, keys
            elif isinstance(value, dict):
                kind = value.get("type")
                if kind == "header":
                    if not j.header:
                        j.header = value
                elif kind == "devices":
                    listed, devices = value.get("keys"), value.get("devices")
                    if not isinstance(listed, list) or not isinstance(devices, list):
                        j.bad_lines += 1
                        continue
                    keys = [str(k) for k in listed]
                    for d in devices:
                        try:
                            info = DeviceInfo.from_dict(d)
                        except Exception:  # noqa: BLE001 - a damaged device record is skipped
                            continue
                        if isinstance(info.uuid, str):
                            j.devices[info.uuid] = info
                elif kind == "event":
                    if value.get("kind") == "progress":
                        j.progress = value
                    else:
                        j.events.append(value)
                elif kind == "end":
                    j.totals = value.get("totals")
                    j.complete = True
            else:
                j.bad_lines += 1


def _readings(values: list[Any], keys: list[str]) -> Iterator[tuple[str, float, float]]:
    """(uuid, energy J, power W or NaN) of one tick line; devices without a finite energy reading >= 0 are
    skipped (a damaged value costs that reading, never the line or the journal)."""
    n = len(values)
    for i, key in enumerate(keys):
        k = 1 + 2 * i
        if k >= n:
            break
        energy = _number(values[k])
        if energy is None or energy < 0:
            continue
        power = _number(values[k + 1]) if k + 1 < n else None
        yield key, energy, math.nan if power is None or power < 0 else power


def read_journal(path: str | os.PathLike[str], samples: bool = True) -> Journal:
    """Read one journal file (a tail, a pending piece or a v1 whole-run journal), also one whose writer was
    killed (torn last line tolerated). Streams the file; memory is that of its samples as flat columns,
    or none with `samples=False` (header, devices, events and the last progress only)."""
    p = Path(path)
    j = Journal(path=p)
    for t, values, keys in _ticks(p, j):
        if not samples:
            continue
        for key, e, pw in _readings(values, keys):
            j.uuid.append(key)
            j.t.append(t)
            j.energy.append(e)
            j.power.append(pw)
    return j


def last_readings(path: str | os.PathLike[str], t0: float | None = None) -> dict[str, list[Any]]:
    """{uuid: [t_ms since t0, energy_mj, power_w, component]} of each device's newest reading in one journal
    file: streamed, memory O(devices), pure Python."""
    p = Path(path)
    j = Journal(path=p)
    newest: dict[str, tuple[float, float, float]] = {}
    for t, values, keys in _ticks(p, j):
        for key, e, pw in _readings(values, keys):
            newest[key] = (t, e, pw)
    base = header_number(j.header, "t0", "t_monotonic") if t0 is None else t0
    comp = {u: info.component for u, info in j.devices.items()}
    out: dict[str, list[Any]] = {}
    for u, (t, e, pw) in newest.items():
        out[u] = [round((t - base) * 1000.0), round(e * 1000.0), None if pw != pw else pw, comp.get(u)]
    return out


def iter_journal_chunks(path: str | os.PathLike[str], t0: float | None = None, rows: int = 1 << 16) -> Iterator[pa.Table]:
    """Stream a journal as Arrow tables of the raw segment schema (uuid, component, t_ms since `t0`,
    energy_mj, power_w), `rows` readings at a time: a journal of any size in bounded memory."""
    import numpy as np
    import pyarrow as pa

    from .segments import _schema, dict_array

    p = Path(path)
    j = Journal(path=p)
    base = t0
    codes: dict[str, int] = {}
    dev = array("i")
    t_ms = array("q")
    e_j = array("d")
    p_w = array("d")

    def table() -> pa.Table:
        keys = list(codes)
        comps = [j.devices[u].component if u in j.devices else None for u in keys]
        values = sorted({c for c in comps if c is not None})
        comp_idx = np.array([values.index(c) if c is not None else -1 for c in comps], dtype=np.int32)
        d = np.frombuffer(dev, dtype=np.int32)
        power = np.frombuffer(p_w, dtype=np.float64).astype(np.float32)
        return pa.table(
            {
                "uuid": dict_array(d, keys),
                "component": dict_array(comp_idx[d], values),
                "t_ms": pa.array(np.frombuffer(t_ms, dtype=np.int64)),
                "energy_mj": pa.array(np.rint(np.frombuffer(e_j, dtype=np.float64) * 1000.0).astype(np.int64)),
                "power_w": pa.array(power, mask=np.isnan(power)),
            },
            schema=_schema(False),
        )

    for t, values, keys in _ticks(p, j):
        if base is None:
            base = header_number(j.header, "t0", "t_monotonic", default=t)
        ms = round((t - base) * 1000.0)
        for key, e, pw in _readings(values, keys):
            dev.append(codes.setdefault(key, len(codes)))
            t_ms.append(ms)
            e_j.append(e)
            p_w.append(pw)
        if len(t_ms) >= rows:
            yield table()
            dev, t_ms, e_j, p_w = array("i"), array("q"), array("d"), array("d")
    if len(t_ms):
        yield table()
