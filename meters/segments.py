"""Columnar segments of a journal: the format, the retention, and the writer (`meters.store` reads them).

A run of any length must stop, recover and be read in bounded time and memory, so the journal
(`X.journal.jsonl`, JSON lines, crash-safe) only holds the *tail* of the run: every `segment_s`
(5 minutes by default) the sampler rolls it aside and a background thread turns that piece into a
Parquet part, aggregates it, and applies the retention below. Beside the tail:

    X.segments/raw/<start_ms>-<end_ms>.parquet   every reading (10 Hz), one part per segment
    X.segments/1s/<start_ms>-<end_ms>.parquet    per second: last counter reading, min/mean/max power (hourly parts)
    X.segments/60s/<start_ms>-<end_ms>.parquet   per minute, the same columns (daily parts, kept for the whole run)
    X.segments/pending/<start_ms>-<end_ms>.jsonl  a rolled journal piece whose raw part is not written yet
    X.segments/last.json                          each device's newest reading in the parts (recover reads this)

Times are integer milliseconds since the journal's `t0` (the tracker's start); a part's name is the
span it covers, so a reader plans which files to open from names alone. Energy stays exact at every
resolution: each row keeps the cumulative counter reading (millijoules, as NVML counts) taken at its
own time, so the energy between any two rows, and the run's total, are differences of real readings.
Only power detail is thinned: full resolution for `raw_s`, per-second min/mean/max for `second_s`,
per-minute beyond. A part is deleted only once the coarser tier covering it is on disk, so whatever
instant the process dies at, the files cover the whole run (kill -9 loses at most the unflushed
~0.5 s of the tail).

pyarrow and numpy are imported only by the background thread (at the first roll) and by readers, never
at start; Arrow only writes the files (numpy sorts and aggregates).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

RAW, SECOND, MINUTE = "raw", "1s", "60s"
TIERS: dict[str, int] = {RAW: 0, SECOND: 1000, MINUTE: 60_000}  # tier -> bucket width in ms (0: every reading)
PENDING = "pending"
LAST = "last.json"
META_KEY = b"footprint"
# Columns a reader returns (every tier; raw rows have min = max = power_w and n = 1).
COLUMNS = ("uuid", "component", "t_s", "energy_j", "power_w", "power_min_w", "power_max_w", "n", "res_s")


@dataclass(frozen=True)
class Retention:
    """How long each resolution is kept, and how often the journal rolls into a part (seconds).

    Defaults keep a month at 10 Hz to ~10-15 MB per GPU: every reading for the last day, per-second
    aggregates for the last week, per-minute for the whole run. ``None`` keeps a tier for the whole run.
    """

    segment_s: int = 300
    raw_s: float | None = 86_400.0
    second_s: float | None = 7 * 86_400.0
    second_part_s: int = 3_600
    minute_part_s: int = 86_400

    def __post_init__(self) -> None:
        seg, sec, minute = self.segment_s, self.second_part_s, self.minute_part_s
        ok = (
            all(isinstance(v, int) and v >= 1 for v in (seg, sec, minute))
            and sec % 60 == 0
            and sec % seg == 0
            and minute % sec == 0
        )
        if not ok:
            raise ValueError(
                f"retention: segment_s ({seg}) must divide second_part_s ({sec}), a multiple of 60, which must "
                f"divide minute_part_s ({minute}); all whole seconds"
            )
        for name in ("raw_s", "second_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v >= 0 and math.isfinite(v)):
                raise ValueError(f"retention: {name} must be seconds >= 0 or None (keep for the whole run), not {v!r}")

    @classmethod
    def of(cls, value: Retention | dict[str, Any] | None) -> Retention:
        """A Retention from itself, a dict of its fields, or None (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"retention: unknown keys {sorted(unknown)} (expected {sorted(cls.__dataclass_fields__)})")
            return cls(**value)
        raise ValueError(f"retention: expected a Retention or a dict, not {type(value).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def segments_dir(journal_path: str | os.PathLike[str]) -> Path:
    """`X.segments/` beside the journal `X.journal.jsonl` (or `X.jsonl`)."""
    p = Path(journal_path)
    stem = p.name.removesuffix(".jsonl").removesuffix(".journal")
    return p.with_name(f"{stem}.segments")


def part_name(start_ms: int, end_ms: int, suffix: str = ".parquet") -> str:
    return f"{start_ms:013d}-{end_ms:013d}{suffix}"


def parse_span(path: Path) -> tuple[int, int] | None:
    """(start_ms, end_ms) from a part's name; None for anything else (temporary files, strays)."""
    name = path.name.split(".", 1)[0]
    a, sep, b = name.rpartition("-")
    if not sep:
        return None
    try:
        start, end = int(a), int(b)
    except ValueError:
        return None
    return (start, end) if end > start else None


# ================================================================================================
# Writing
# ================================================================================================
class RawBuffer:
    """One segment's readings as flat typed arrays (appended by the sampler thread: ~1 us per reading)."""

    __slots__ = ("dev", "t_ms", "energy_j", "power_w")

    def __init__(self) -> None:
        self.dev = array("i")
        self.t_ms = array("q")
        self.energy_j = array("d")
        self.power_w = array("d")

    def __len__(self) -> int:
        return len(self.t_ms)

    def add(self, dev: int, t_ms: int, energy_j: float, power_w: float | None) -> None:
        self.dev.append(dev)
        self.t_ms.append(t_ms)
        self.energy_j.append(energy_j)
        self.power_w.append(math.nan if power_w is None else power_w)


@dataclass
class _Job:
    start_ms: int
    end_ms: int
    buf: RawBuffer
    keys: list[str]
    components: list[str | None]
    pending: Path | None


@dataclass
class _TierState:
    """Aggregated rows of one tier waiting for their part (at most one part's worth), as numpy columns."""

    name: str
    part_ms: int
    chunks: list[dict[str, Any]] = field(default_factory=list)
    part_index: int | None = None


class SegmentWriter:
    """Turns rolled journal pieces into Parquet parts in one background thread; never raises.

    The sampler thread calls `submit` at each roll (O(1): a queue put) and `close` at stop, which
    drains the queue and writes the partial per-second and per-minute parts: O(one part), whatever
    the run's length. Sorting and aggregation are numpy; Arrow only writes the files (its compute
    kernels would cost the training process ~45 MB of resident memory). Errors are kept in `errors`
    (bounded); a rolled journal piece stays on disk until its raw part is written, so a failure
    never loses data.
    """

    def __init__(self, directory: Path, retention: Retention, meta: dict[str, Any], fsync: bool = False) -> None:
        self.dir = directory
        self.retention = retention
        self.meta = meta
        self.fsync = fsync
        self.errors: list[str] = []
        self.parts_written = 0
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._keys: list[str] = []  # device index -> uuid (only grows: indices stay valid for the run)
        self._components: list[str | None] = []
        self._last: dict[str, list[Any]] = {}  # uuid -> [t_ms, energy_mj, power_w, component]: the newest readings
        self._tiers = {
            SECOND: _TierState(SECOND, retention.second_part_s * 1000),
            MINUTE: _TierState(MINUTE, retention.minute_part_s * 1000),
        }
        self._covered = {RAW: -BIG, SECOND: -BIG, MINUTE: -BIG}  # end of the newest part of each tier
        self._closed = False

    def submit(self, job: _Job) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="footprint-segments", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._guard(self._process, job)
            finally:
                self._queue.task_done()

    def wait_idle(self) -> None:
        """Block until every submitted segment is written (tests and benchmarks; the sampler never waits)."""
        if self._thread is not None:
            self._queue.join()

    def _guard(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # the writer must never die: the journal piece stays for recover
            if len(self.errors) < 100:
                self.errors.append(f"segments: {type(exc).__name__}: {exc}")

    def close(self, timeout: float = 30.0) -> None:
        """Drain the queue, then write the partial aggregate parts. Runs in the caller's thread."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.errors.append("segments: the background writer did not finish in time; its journal pieces are kept")
                return
        for tier in (SECOND, MINUTE):
            self._guard(self._flush_tier, tier, None)

    # ---- one rolled segment ----------------------------------------------------------------------
    def _process(self, job: _Job) -> None:
        import numpy as np

        self._keys[: len(job.keys)] = job.keys
        self._components[: len(job.components)] = job.components
        if len(job.buf):
            cols = _sorted(
                {
                    "dev": np.frombuffer(job.buf.dev, dtype=np.int32),
                    "t_ms": np.frombuffer(job.buf.t_ms, dtype=np.int64),
                    "energy_mj": np.rint(np.frombuffer(job.buf.energy_j, dtype=np.float64) * 1000.0).astype(np.int64),
                    "power_w": np.frombuffer(job.buf.power_w, dtype=np.float64).astype(np.float32),
                }
            )
            ends = np.flatnonzero(np.diff(cols["dev"], append=-1) != 0)  # each device's last row (sorted by dev, t)
            for k in ends.tolist():
                uuid = self._keys[int(cols["dev"][k])]
                power = float(cols["power_w"][k])
                comp = self._components[int(cols["dev"][k])]
                self._last[uuid] = [int(cols["t_ms"][k]), int(cols["energy_mj"][k]), None if power != power else power, comp]
            self._write(RAW, job.start_ms, job.end_ms, cols)
            self._write_last(job.end_ms)  # before the journal piece goes: a reader always finds the newest readings
            self._add_rows(SECOND, _aggregate(cols, 1000), job.end_ms)
        if job.pending is not None:
            with contextlib.suppress(FileNotFoundError):
                job.pending.unlink()

    def _add_rows(self, tier: str, cols: dict[str, Any] | None, now_ms: int) -> None:
        """Add aggregated rows; write the tier's part when the rows reach the next part boundary."""
        import numpy as np

        st = self._tiers[tier]
        if cols is not None and len(cols["t_ms"]):
            part = np.floor_divide(cols["t_ms"], st.part_ms)
            for idx in np.unique(part).tolist():
                if st.part_index is not None and idx != st.part_index:
                    self._flush_tier(tier, (st.part_index + 1) * st.part_ms)
                st.part_index = idx
                sel = part == idx
                st.chunks.append({k: v[sel] for k, v in cols.items()})
        if st.part_index is not None and now_ms >= (st.part_index + 1) * st.part_ms:
            self._flush_tier(tier, (st.part_index + 1) * st.part_ms)

    def _flush_tier(self, tier: str, end_ms: int | None) -> None:
        st = self._tiers[tier]
        if not st.chunks or st.part_index is None:
            return
        import numpy as np

        cols = _sorted({k: np.concatenate([c[k] for c in st.chunks]) for k in st.chunks[0]})
        start = st.part_index * st.part_ms
        if end_ms is None:  # at close: the partial part covers up to the newest raw part (the tail holds the rest)
            end_ms = max(int(cols["t_ms"].max()) + 1, min(self._covered[RAW], (st.part_index + 1) * st.part_ms))
        st.chunks, st.part_index = [], None
        self._write(tier, start, end_ms, cols)
        if tier == SECOND:
            self._add_rows(MINUTE, _aggregate(cols, 60_000), end_ms)
            self._expire(RAW, self._covered[SECOND], self.retention.raw_s)
        else:
            self._expire(SECOND, self._covered[MINUTE], self.retention.second_s)

    def _expire(self, tier: str, covered_ms: int, keep_s: float | None) -> None:
        """Delete parts of `tier` older than `keep_s` whose span a coarser tier already covers."""
        if keep_s is None:
            return
        newest = self._covered[RAW]
        for path, (_, end) in list_parts(self.dir, tier):
            if end <= covered_ms and end <= newest - keep_s * 1000:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _write_last(self, end_ms: int) -> None:
        path = self.dir / LAST
        tmp = self.dir / f".{LAST}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"end_ms": end_ms, "last": self._last}))
        os.replace(tmp, path)

    def _write(self, tier: str, start_ms: int, end_ms: int, cols: dict[str, Any]) -> None:
        """One part: a row group per device (a device filter skips the others), atomically renamed into place."""
        import numpy as np
        import pyarrow.parquet as pq

        folder = self.dir / tier
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / part_name(start_ms, end_ms)
        tmp = folder / f".{final.name}.{os.getpid()}.tmp"
        table = to_table(cols, self._keys, self._components)
        meta = {**self.meta, "tier": tier, "start_ms": start_ms, "end_ms": end_ms}
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta, default=str).encode()})
        encodings = {c: "DELTA_BINARY_PACKED" for c in ("t_ms", "energy_mj", "n") if c in table.column_names}
        bounds = np.flatnonzero(np.diff(cols["dev"], prepend=-1, append=-1) != 0).tolist()
        with pq.ParquetWriter(
            tmp, table.schema, compression="zstd", use_dictionary=["uuid", "component"], column_encoding=encodings
        ) as w:
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                w.write_table(table.slice(a, b - a))
        if self.fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        self._covered[tier] = max(self._covered[tier], end_ms)
        self.parts_written += 1


BIG = 2**62


def _sorted(cols: dict[str, Any]) -> dict[str, Any]:
    """Rows ordered by device, then time."""
    import numpy as np

    order = np.lexsort((cols["t_ms"], cols["dev"]))
    return {k: v[order] for k, v in cols.items()}


def _schema(aggregated: bool) -> pa.Schema:
    import pyarrow as pa

    text = pa.dictionary(pa.int32(), pa.string())
    fields = [
        pa.field("uuid", text),
        pa.field("component", text),
        pa.field("t_ms", pa.int64()),
        pa.field("energy_mj", pa.int64()),
        pa.field("power_w", pa.float32()),
    ]
    if aggregated:
        fields += [pa.field("power_min_w", pa.float32()), pa.field("power_max_w", pa.float32()), pa.field("n", pa.int32())]
    return pa.schema(fields)


def to_table(cols: dict[str, Any], keys: Sequence[str], components: Sequence[str | None]) -> pa.Table:
    """numpy columns (dev index, t_ms, energy_mj, power...) -> the stored Arrow table (uuid and component as
    dictionaries over the device list: no Arrow compute kernel is called)."""
    import numpy as np
    import pyarrow as pa

    dev = cols["dev"].astype(np.int32)
    comp_values = sorted({c for c in components if c is not None})
    comp_index = np.array([comp_values.index(c) if c is not None else -1 for c in components] or [-1], dtype=np.int32)
    out = {
        "uuid": dict_array(dev, keys),
        "component": dict_array(comp_index[dev] if len(dev) else np.zeros(0, np.int32), comp_values),
        "t_ms": pa.array(cols["t_ms"].astype(np.int64)),
        "energy_mj": pa.array(cols["energy_mj"].astype(np.int64)),
    }
    for c in ("power_w", "power_min_w", "power_max_w"):
        if c in cols:
            x = cols[c].astype(np.float32)
            out[c] = pa.array(x, mask=np.isnan(x))
    aggregated = "n" in cols
    if aggregated:
        out["n"] = pa.array(cols["n"].astype(np.int32))
    return pa.table(out, schema=_schema(aggregated))


def dict_array(idx: Any, values: Sequence[Any]) -> pa.Array:
    """A dictionary-encoded string array from numpy indices (-1: null) and its values: no compute kernel."""
    import numpy as np
    import pyarrow as pa

    idx = np.asarray(idx)
    missing = idx < 0
    return pa.DictionaryArray.from_arrays(
        np.maximum(idx, 0).astype(np.int32), pa.array(list(values) or [""], pa.string()), mask=missing if missing.any() else None
    )


def _aggregate(cols: dict[str, Any], width_ms: int) -> dict[str, Any] | None:
    """Per device and `width_ms` bucket (rows sorted by device, time): the last reading (time and counter: exact
    energy) and the min/mean/max power, the mean weighted by the readings it holds."""
    import numpy as np

    t = cols["t_ms"]
    if len(t) == 0:
        return None
    dev = cols["dev"]
    bucket = np.floor_divide(t, width_ms)
    change = np.flatnonzero((np.diff(dev) != 0) | (np.diff(bucket) != 0)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(t)]]) - 1
    raw = "n" not in cols
    mean = cols["power_w"].astype(np.float64)
    lo = mean if raw else cols["power_min_w"].astype(np.float64)
    hi = mean if raw else cols["power_max_w"].astype(np.float64)
    n = np.where(np.isnan(mean), 0, 1 if raw else cols["n"]).astype(np.int64)
    n_sum = np.add.reduceat(n, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        wsum = np.add.reduceat(np.where(n > 0, np.nan_to_num(mean) * n, 0.0), starts)
        mean_b = np.where(n_sum > 0, wsum / np.maximum(n_sum, 1), np.nan)
        lo_b = np.fmin.reduceat(lo, starts)
        hi_b = np.fmax.reduceat(hi, starts)
    return {
        "dev": dev[ends],
        "t_ms": t[ends],
        "energy_mj": cols["energy_mj"][ends],
        "power_w": mean_b.astype(np.float32),
        "power_min_w": lo_b.astype(np.float32),
        "power_max_w": hi_b.astype(np.float32),
        "n": n_sum.astype(np.int32),
    }


def list_parts(directory: Path, tier: str) -> list[tuple[Path, tuple[int, int]]]:
    """The parts of one tier (or the pending journal pieces), sorted by start."""
    folder = directory / tier
    suffix = ".jsonl" if tier == PENDING else ".parquet"
    out = []
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            if p.name.endswith(suffix) and not p.name.startswith("."):
                span = parse_span(p)
                if span:
                    out.append((p, span))
    return sorted(out, key=lambda x: x[1])
