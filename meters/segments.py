"""Columnar segments of a journal: compact Parquet parts written as the run goes, read lazily.

A run of any length must stop, recover and be read in bounded time and memory, so the journal
(`X.journal.jsonl`, JSON lines, crash-safe) only holds the *tail* of the run: every `segment_s`
(5 minutes by default) the sampler rolls it aside and a background thread turns that piece into a
Parquet part, aggregates it, and applies the retention below. Beside the tail:

    X.segments/raw/<start_ms>-<end_ms>.parquet   every reading (10 Hz), one part per segment
    X.segments/1s/<start_ms>-<end_ms>.parquet    per second: last counter reading, min/mean/max power (hourly parts)
    X.segments/60s/<start_ms>-<end_ms>.parquet   per minute, the same columns (daily parts, kept for the whole run)
    X.segments/pending/<start_ms>-<end_ms>.jsonl  a rolled journal piece whose raw part is not written yet

Times are integer milliseconds since the journal's `t0` (the tracker's start); a part's name is the
span it covers, so a reader plans which files to open from names alone. Energy stays exact at every
resolution: each row keeps the cumulative counter reading (millijoules, as NVML counts) taken at its
own time, so the energy between any two rows, and the run's total, are differences of real readings.
Only power detail is thinned: full resolution for `raw_s`, per-second min/mean/max for `second_s`,
per-minute beyond. A part is deleted only once the coarser tier covering it is on disk, so whatever
instant the process dies at, the files cover the whole run (kill -9 loses at most the unflushed
~0.5 s of the tail).

pyarrow and numpy are imported only by the background thread and by readers, never at start.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

RAW, SECOND, MINUTE = "raw", "1s", "60s"
TIERS: dict[str, int] = {RAW: 0, SECOND: 1000, MINUTE: 60_000}  # tier -> bucket width in ms (0: every reading)
PENDING = "pending"
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
    """Aggregated rows of one tier waiting for their part (at most one part's worth)."""

    name: str
    part_ms: int
    chunks: list[dict[str, Any]] = field(default_factory=list)
    part_index: int | None = None
    rows: int = 0


class SegmentWriter:
    """Turns rolled journal pieces into Parquet parts in one background thread; never raises.

    The sampler thread calls `submit` at each roll (O(1): a queue put) and `close` at stop, which
    drains the queue and writes the partial per-second and per-minute parts: O(one part), whatever
    the run's length. Errors are kept in `errors` (bounded); the rolled journal piece stays on disk
    until its raw part is written, so a failure never loses data.
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
        self._last: dict[str, list[Any]] = {}  # uuid -> [t_ms, energy_mj, power_w, component]: the newest readings
        self._tiers = {
            SECOND: _TierState(SECOND, retention.second_part_s * 1000),
            MINUTE: _TierState(MINUTE, retention.minute_part_s * 1000),
        }
        self._covered = {RAW: -(2**62), SECOND: -(2**62), MINUTE: -(2**62)}  # end of the newest part of each tier
        self._closed = False

    def submit(self, job: _Job) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="footprint-segments", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self._guard(self._process, job)

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

        cols = _buffer_columns(job.buf, np)
        for i in np.unique(cols["dev"]) if len(cols["dev"]) else []:
            sel = np.flatnonzero(cols["dev"] == i)
            k = sel[np.argmax(cols["t_ms"][sel])]
            self._last[job.keys[i]] = [
                int(cols["t_ms"][k]),
                int(cols["energy_mj"][k]),
                _finite(cols["power_w"][k]),
                job.components[i],
            ]
        table = _raw_table(cols, job.keys, job.components)
        self._write(RAW, job.start_ms, job.end_ms, table)
        if job.pending is not None:
            with contextlib.suppress(FileNotFoundError):
                job.pending.unlink()
        self._add_rows(SECOND, _aggregate(table, 1000, np), job.end_ms)

    def _add_rows(self, tier: str, table: pa.Table | None, now_ms: int) -> None:
        """Add aggregated rows; write the tier's part when the rows reach the next part boundary."""
        st = self._tiers[tier]
        if table is not None and table.num_rows:
            import numpy as np

            part = np.floor_divide(table["t_ms"].to_numpy(), st.part_ms)
            for idx in np.unique(part).tolist():
                if st.part_index is not None and idx != st.part_index:
                    self._flush_tier(tier, (st.part_index + 1) * st.part_ms)
                st.part_index = idx
                st.chunks.append(table.filter(part == idx))
                st.rows += st.chunks[-1].num_rows
        if st.part_index is not None and now_ms >= (st.part_index + 1) * st.part_ms:
            self._flush_tier(tier, (st.part_index + 1) * st.part_ms)

    def _flush_tier(self, tier: str, end_ms: int | None) -> None:
        st = self._tiers[tier]
        if not st.chunks or st.part_index is None:
            return
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401

        table = pa.concat_tables(st.chunks)
        start = st.part_index * st.part_ms
        if end_ms is None:  # at close: the partial part covers up to the newest raw part (the tail holds the rest)
            newest_t = int(pa.compute.max(table["t_ms"]).as_py()) + 1
            end_ms = max(newest_t, min(self._covered[RAW], (st.part_index + 1) * st.part_ms))
        end = end_ms
        st.chunks, st.rows, st.part_index = [], 0, None
        table = table.sort_by([("uuid", "ascending"), ("t_ms", "ascending")])
        self._write(tier, start, end, table)
        if tier == SECOND:
            import numpy as np

            self._add_rows(MINUTE, _aggregate(table, 60_000, np), end)
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

    def _write(self, tier: str, start_ms: int, end_ms: int, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        folder = self.dir / tier
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / part_name(start_ms, end_ms)
        tmp = folder / f".{final.name}.{os.getpid()}.tmp"
        meta = {**self.meta, "tier": tier, "start_ms": start_ms, "end_ms": end_ms, "last": self._last}
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta, default=str).encode()})
        encodings = {c: "DELTA_BINARY_PACKED" for c in ("t_ms", "energy_mj", "n") if c in table.column_names}
        with pq.ParquetWriter(
            tmp, table.schema, compression="zstd", use_dictionary=["uuid", "component"], column_encoding=encodings
        ) as w:
            for batch in _by_device(table):  # one row group per device: a uuid filter skips the others
                w.write_table(batch)
        if self.fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        self._covered[tier] = max(self._covered[tier], end_ms)
        self.parts_written += 1


def _finite(x: float) -> float | None:
    return float(x) if x == x and abs(x) != math.inf else None


def _buffer_columns(buf: RawBuffer, np: Any) -> dict[str, Any]:
    energy = np.frombuffer(buf.energy_j, dtype=np.float64)
    return {
        "dev": np.frombuffer(buf.dev, dtype=np.int32),
        "t_ms": np.frombuffer(buf.t_ms, dtype=np.int64),
        "energy_mj": np.rint(energy * 1000.0).astype(np.int64),
        "power_w": np.frombuffer(buf.power_w, dtype=np.float64).astype(np.float32),
    }


def _schema(aggregated: bool) -> pa.Schema:
    import pyarrow as pa

    fields = [
        pa.field("uuid", pa.string()),
        pa.field("component", pa.string()),
        pa.field("t_ms", pa.int64()),
        pa.field("energy_mj", pa.int64()),
        pa.field("power_w", pa.float32()),
    ]
    if aggregated:
        fields += [pa.field("power_min_w", pa.float32()), pa.field("power_max_w", pa.float32()), pa.field("n", pa.int32())]
    return pa.schema(fields)


def _raw_table(cols: dict[str, Any], keys: Sequence[str], components: Sequence[str | None]) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    order = np.lexsort((cols["t_ms"], cols["dev"]))
    dev = cols["dev"][order]
    uuid = pa.DictionaryArray.from_arrays(pa.array(dev), pa.array(list(keys), pa.string())).cast(pa.string())
    comp = pa.array([components[i] for i in range(len(keys))], pa.string()).take(pa.array(dev))
    power = cols["power_w"][order]
    return pa.table(
        {
            "uuid": uuid,
            "component": comp,
            "t_ms": pa.array(cols["t_ms"][order]),
            "energy_mj": pa.array(cols["energy_mj"][order]),
            "power_w": pa.array(power, mask=np.isnan(power)),
        },
        schema=_schema(False),
    )


def _aggregate(table: pa.Table, width_ms: int, np: Any) -> pa.Table | None:
    """Per device and `width_ms` bucket: the last reading (time, counter) and min/mean/max power."""
    import pyarrow as pa

    if table.num_rows == 0:
        return None
    table = table.sort_by([("uuid", "ascending"), ("t_ms", "ascending")])
    uuid = table["uuid"].combine_chunks().dictionary_encode()
    dev = uuid.indices.to_numpy(zero_copy_only=False)
    t = table["t_ms"].to_numpy()
    bucket = np.floor_divide(t, width_ms)
    key_change = np.flatnonzero((np.diff(dev) != 0) | (np.diff(bucket) != 0)) + 1
    starts = np.concatenate([[0], key_change])
    ends = np.concatenate([key_change, [len(t)]]) - 1
    raw = "n" not in table.column_names
    mean = table["power_w"].to_numpy(zero_copy_only=False).astype(np.float64)
    lo = mean if raw else table["power_min_w"].to_numpy(zero_copy_only=False).astype(np.float64)
    hi = mean if raw else table["power_max_w"].to_numpy(zero_copy_only=False).astype(np.float64)
    n = np.where(np.isnan(mean), 0, 1 if raw else table["n"].to_numpy(zero_copy_only=False)).astype(np.int64)
    weighted = np.where(n > 0, np.nan_to_num(mean) * n, 0.0)
    n_sum = np.add.reduceat(n, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_b = np.where(n_sum > 0, np.add.reduceat(weighted, starts) / np.maximum(n_sum, 1), np.nan)
    lo_b = np.fmin.reduceat(lo, starts)
    hi_b = np.fmax.reduceat(hi, starts)
    f32 = lambda x: pa.array(x.astype(np.float32), mask=np.isnan(x))  # noqa: E731
    return pa.table(
        {
            "uuid": table["uuid"].take(pa.array(ends)),
            "component": table["component"].take(pa.array(ends)),
            "t_ms": pa.array(t[ends]),
            "energy_mj": table["energy_mj"].take(pa.array(ends)),
            "power_w": f32(mean_b),
            "power_min_w": f32(lo_b),
            "power_max_w": f32(hi_b),
            "n": pa.array(n_sum.astype(np.int32)),
        },
        schema=_schema(True),
    )


def _by_device(table: pa.Table) -> Iterator[pa.Table]:
    import pyarrow.compute as pc

    if table.num_rows == 0:
        yield table
        return
    values = pc.unique(table["uuid"]).to_pylist()
    if len(values) <= 1:
        yield table
        return
    for v in values:
        yield table.filter(pc.equal(table["uuid"], v))


# ================================================================================================
# Reading
# ================================================================================================
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


@dataclass(frozen=True)
class Source:
    """One file of a store and the span it is read for."""

    kind: str  # raw | 1s | 60s | pending | tail | journal (a v1 journal: the whole run)
    path: Path
    start_ms: int
    end_ms: int

    @property
    def res_ms(self) -> int:
        return TIERS.get(self.kind, 0)


BIG = 2**62


class Store:
    """One journal and its segments, read lazily: plan the files for a span, stream them as Arrow batches.

    `t0` is the journal's time origin (the header's `t0`, else its writer's start): rows' `t_s` count
    from it. A v1 journal (one JSON line per tick for the whole run, written before segments existed)
    is read the same way, streamed in chunks.
    """

    def __init__(self, journal_path: str | os.PathLike[str]) -> None:
        from .journal import read_header

        self.journal_path = Path(journal_path)
        self.dir = segments_dir(self.journal_path)
        header = read_header(self.journal_path)
        self.header = header
        self.version = int(header.get("version", 1) or 1)
        self.t0 = float(header.get("t0", header.get("t_monotonic", 0.0)) or 0.0)

    # ---- planning ----------------------------------------------------------------------------------
    def sources(self) -> dict[str, list[Source]]:
        """Every file, by kind. The tail covers from its segment start onwards."""
        out: dict[str, list[Source]] = {k: [] for k in (RAW, SECOND, MINUTE, PENDING, "tail")}
        for tier in (RAW, SECOND, MINUTE, PENDING):
            out[tier] = [Source(tier, p, a, b) for p, (a, b) in list_parts(self.dir, tier)]
        if self.journal_path.exists():
            if self.version < 2:
                out["tail"] = [Source("journal", self.journal_path, -BIG, BIG)]
            else:
                start = int(self.header.get("segment_start_ms", -BIG))
                out["tail"] = [Source("tail", self.journal_path, start, BIG)]
        return out

    def plan(self, lo_ms: int = -BIG, hi_ms: int = BIG, resolution_ms: int = 0) -> list[Source]:
        """The files to read for [lo_ms, hi_ms): for each instant the preferred tier that has it.

        Preference: the coarsest tier no coarser than `resolution_ms` (0: every reading), then the finer
        ones, then the coarser ones. Returned sources carry the sub-span to read from each file.
        """
        by = self.sources()
        tiers = sorted(TIERS, key=lambda k: (TIERS[k] > resolution_ms, -TIERS[k] if TIERS[k] <= resolution_ms else TIERS[k]))
        ordered: list[list[Source]] = []
        for tier in tiers:
            ordered.append(by[tier] + (by[PENDING] + by["tail"] if tier == RAW else []))
        remaining = [(lo_ms, hi_ms)]
        chosen: list[Source] = []
        for group in ordered:
            for src in group:
                nxt = []
                for a, b in remaining:
                    s, e = max(a, src.start_ms), min(b, src.end_ms)
                    if s < e:
                        chosen.append(Source(src.kind, src.path, s, e))
                        if a < s:
                            nxt.append((a, s))
                        if e < b:
                            nxt.append((e, b))
                    else:
                        nxt.append((a, b))
                remaining = nxt
                if not remaining:
                    break
            if not remaining:
                break
        return sorted(chosen, key=lambda s: s.start_ms)

    # ---- reading -----------------------------------------------------------------------------------
    def batches(
        self,
        lo_s: float | None = None,
        hi_s: float | None = None,
        *,
        resolution_s: float = 0.0,
        uuids: Iterable[str] | None = None,
        components: Iterable[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[pa.Table]:
        """Rows with `lo_s <= t_s < hi_s` (seconds since t0) as tables of `COLUMNS` (or `columns`), in time order
        per source. Column and time-range filters are pushed down to the Parquet reader."""
        lo = -BIG if lo_s is None else math.floor(lo_s * 1000)
        hi = BIG if hi_s is None else math.ceil(hi_s * 1000)
        want = list(columns or COLUMNS)
        uu = set(uuids) if uuids is not None else None
        cc = set(components) if components is not None else None
        for src in self.plan(lo, hi, int(resolution_s * 1000)):
            if src.kind in (PENDING, "tail", "journal"):
                for table in self._journal_tables(src):
                    yield from _finish(table, src, uu, cc, want)
            else:
                yield from self._parquet_tables(src, uu, cc, want)

    def _parquet_tables(self, src: Source, uu: set[str] | None, cc: set[str] | None, want: list[str]) -> Iterator[pa.Table]:
        import pyarrow.dataset as ds

        stored = set(_schema(src.kind != RAW).names)
        need = {"t_ms"} | {_STORED.get(c, c) for c in want} & stored
        if uu is not None or cc is not None:
            need |= {"uuid", "component"}
        flt = (ds.field("t_ms") >= src.start_ms) & (ds.field("t_ms") < src.end_ms)
        if uu is not None:
            flt &= ds.field("uuid").isin(sorted(uu))
        if cc is not None:
            flt &= ds.field("component").isin(sorted(cc))
        try:
            dataset = ds.dataset(str(src.path), format="parquet")
            for batch in dataset.to_batches(columns=sorted(need), filter=flt, batch_size=1 << 16):
                if batch.num_rows:
                    yield _normalise(batch, src.res_ms, want)
        except FileNotFoundError:  # expired by a live writer between planning and reading
            return

    def _journal_tables(self, src: Source) -> Iterator[pa.Table]:
        from .journal import iter_journal_chunks

        yield from iter_journal_chunks(src.path, t0=self.t0)

    def last_readings(self) -> dict[str, dict[str, Any]]:
        """{uuid: {t_s, energy_j, power_w, component}}: each device's newest reading, from the newest part's
        footer and the journal pieces after it (bounded: never the whole run)."""
        from .journal import iter_journal_chunks

        by = self.sources()
        last: dict[str, list[Any]] = {}
        newest = max((s for t in (RAW, SECOND, MINUTE) for s in by[t]), key=lambda s: s.end_ms, default=None)
        if newest is not None:
            last.update(_footer(newest.path).get("last", {}))
        after = newest.end_ms if newest is not None else -BIG
        for src in by[PENDING] + by["tail"]:
            if src.kind == PENDING and src.end_ms <= after:
                continue  # its raw part was written before the process died
            for chunk in iter_journal_chunks(src.path, t0=self.t0):
                _merge_last(last, chunk)
        return {
            u: {"t_s": v[0] / 1000.0, "energy_j": v[1] / 1000.0, "power_w": v[2], "component": v[3] if len(v) > 3 else None}
            for u, v in last.items()
        }


_STORED = {"t_s": "t_ms", "energy_j": "energy_mj"}


def _merge_last(last: dict[str, list[Any]], tbl: pa.Table) -> None:
    """Keep each device's newest (t_ms, energy_mj, power_w, component) from a raw table."""
    if tbl.num_rows == 0:
        return
    cols = tbl.select(["uuid", "t_ms", "energy_mj", "power_w", "component"]).to_pydict()
    for u, t, e, p, c in zip(cols["uuid"], cols["t_ms"], cols["energy_mj"], cols["power_w"], cols["component"], strict=True):
        prev = last.get(u)
        if prev is None or t >= prev[0]:
            last[u] = [t, e, p, c]


def _footer(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta.get(META_KEY, b"{}"))
    except Exception:
        return {}


def _finish(table: pa.Table, src: Source, uu: set[str] | None, cc: set[str] | None, want: list[str]) -> Iterator[pa.Table]:
    import pyarrow.compute as pc

    mask = pc.and_(pc.greater_equal(table["t_ms"], src.start_ms), pc.less(table["t_ms"], src.end_ms))
    if uu is not None:
        mask = pc.and_(mask, pc.is_in(table["uuid"], value_set=_pa_strings(uu)))
    if cc is not None:
        mask = pc.and_(mask, pc.is_in(table["component"], value_set=_pa_strings(cc)))
    table = table.filter(mask)
    if table.num_rows:
        yield _normalise(table, src.res_ms, want)


def _pa_strings(values: set[str]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())


def _normalise(data: Any, res_ms: int, want: list[str]) -> pa.Table:
    """Stored columns (t_ms, energy_mj...) -> the reader's columns (t_s, energy_j...), only those wanted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    names = set(table.column_names)
    n = table.num_rows
    out: dict[str, Any] = {}
    for c in want:
        if c == "t_s":
            out[c] = pc.divide(table["t_ms"].cast(pa.float64()), 1000.0)
        elif c == "energy_j":
            out[c] = pc.divide(table["energy_mj"].cast(pa.float64()), 1000.0)
        elif c in ("power_w", "power_min_w", "power_max_w"):
            src = c if c in names else "power_w"
            out[c] = table[src].cast(pa.float64())
        elif c == "n":
            out[c] = table["n"] if "n" in names else pc.if_else(pc.is_null(table["power_w"]), 0, 1).cast(pa.int32())
        elif c == "res_s":
            out[c] = pa.array([res_ms / 1000.0] * n, pa.float64())
        elif c in names:
            out[c] = table[c]
        else:
            out[c] = pa.nulls(n, pa.string())
    return pa.table(out)


def downsample(tables: Iterable[pa.Table], lo_s: float, hi_s: float, buckets: int, keys: Sequence[str] = ("uuid",)) -> pa.Table:
    """Per key and time bucket: min of power_min_w, max of power_max_w, sample-weighted mean power, and the
    last reading (time, cumulative energy). Streams: memory is O(keys x buckets), never O(rows), and the
    peaks of every bucket survive (a plot of min/max per pixel shows the spikes the raw data has).

    `tables` must come in time order per key (as `Store.batches` yields them): "last" is the input order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width = max((hi_s - lo_s) / max(buckets, 1), 1e-9)
    parts: list[pa.Table] = []
    rows = 0
    for table in tables:
        if table.num_rows == 0:
            continue
        b = pc.cast(pc.floor(pc.divide(pc.subtract(table["t_s"], lo_s), width)), pa.int64())
        b = pc.min_element_wise(pc.max_element_wise(b, 0), buckets - 1)
        n = table["n"].cast(pa.int64())
        part = pa.table(
            {
                **{k: table[k] for k in keys},
                "bucket": b,
                "power_min_w": table["power_min_w"],
                "power_max_w": table["power_max_w"],
                "wsum": pc.multiply(pc.fill_null(table["power_w"], 0.0), n.cast(pa.float64())),
                "n": n,
                "t_s": table["t_s"],
                "energy_j": table["energy_j"],
            }
        )
        parts.append(_reduce(part, keys))
        rows += parts[-1].num_rows
        if rows > 200_000:  # keep the partial aggregates bounded however many batches come
            parts = [_reduce(pa.concat_tables(parts), keys)]
            rows = parts[0].num_rows
    if not parts:
        return pa.table({**{k: pa.array([], pa.string()) for k in keys}, "t_s": pa.array([], pa.float64())})
    out = _reduce(pa.concat_tables(parts), keys)
    mean = pc.if_else(pc.greater(out["n"], 0), pc.divide(out["wsum"], pc.max_element_wise(out["n"], 1).cast(pa.float64())), None)
    out = out.append_column("power_w", mean.cast(pa.float64())).drop_columns(["wsum"])
    return out.sort_by([(k, "ascending") for k in keys] + [("bucket", "ascending")])


def _reduce(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One pass of the bucket aggregation; applying it to its own output gives the same result (mergeable)."""
    aggs = [("power_min_w", "min"), ("power_max_w", "max"), ("wsum", "sum"), ("n", "sum"), ("t_s", "max"), ("energy_j", "last")]
    g = table.group_by([*keys, "bucket"], use_threads=False).aggregate(aggs)
    names = {f"{c}_{f}": c for c, f in aggs}
    return g.rename_columns([names.get(n, n) for n in g.column_names])
