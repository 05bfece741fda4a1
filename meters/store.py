"""Reading a journal and its segments lazily: plan the files for a span, stream them, downsample.

One `Store` per journal (one rank of a run). `plan` picks, for each instant of the span asked for,
the tier that holds it at the wanted resolution, from the parts' names alone; `batches` streams those
files as Arrow tables with the column, time-range and device filters pushed down (only the columns
asked for are decoded, and only the row groups, one per device, whose statistics can match);
`downsample` folds any stream into min/mean/max per time bucket in O(devices x buckets) memory.

Arrow is used to read Parquet and hold columns, never for its compute kernels (the first call costs a
process ~45 MB of resident memory): filtering, sorting and aggregation are numpy. Journal pieces (the
tail, a pending piece, or a whole v1 journal written before segments existed) are parsed in chunks.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .segments import BIG, COLUMNS, LAST, MINUTE, PENDING, RAW, SECOND, TIERS, _schema, dict_array, list_parts, segments_dir

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

_STORED = {"t_s": "t_ms", "energy_j": "energy_mj"}


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


class Store:
    """One journal and its segments. `t0` is the journal's time origin (the header's `t0`, else its
    writer's start): rows' `t_s` count from it."""

    def __init__(self, journal_path: str | os.PathLike[str]) -> None:
        from .journal import header_number, read_header

        self.journal_path = Path(journal_path)
        self.dir = segments_dir(self.journal_path)
        self.notes: list[str] = []  # parts skipped because they could not be read (damaged, truncated, not Parquet)
        self.header = read_header(self.journal_path) if self.journal_path.is_file() else {}
        if not self.header:  # killed in the instant of a roll without hard links: the newest piece has the header
            pieces = list_parts(self.dir, PENDING) if self.dir.is_dir() else []
            self.header = read_header(pieces[-1][0]) if pieces else {}
        self.version = int(header_number(self.header, "version", default=1))
        self.t0 = header_number(self.header, "t0", "t_monotonic")
        self._segment_start = int(header_number(self.header, "segment_start_ms", default=-BIG))

    # ---- planning ----------------------------------------------------------------------------------
    def sources(self) -> dict[str, list[Source]]:
        """Every file, by kind. The tail covers from its segment start onwards (a v1 journal: everything)."""
        listed = self.dir.is_dir()
        out = {
            k: [Source(k, p, a, b) for p, (a, b) in (list_parts(self.dir, k) if listed else [])]
            for k in (RAW, SECOND, MINUTE, PENDING)
        }
        out["tail"] = []
        if self.journal_path.is_file():
            kind = "tail" if self.version >= 2 else "journal"
            out["tail"] = [Source(kind, self.journal_path, self._segment_start, BIG)]
        return out

    def plan(self, lo_ms: int = -BIG, hi_ms: int = BIG, resolution_ms: int = 0) -> list[Source]:
        """The files to read for [lo_ms, hi_ms): for each instant, the preferred tier that has it.

        Preference: the coarsest tier no coarser than `resolution_ms` (0: every reading), then the finer
        ones, then the coarser ones. The sources returned carry the sub-span to read from each file."""
        by = self.sources()
        tiers = sorted(TIERS, key=lambda k: (TIERS[k] > resolution_ms, -TIERS[k] if TIERS[k] <= resolution_ms else TIERS[k]))
        remaining = [(lo_ms, hi_ms)]
        chosen: list[Source] = []
        for tier in tiers:
            for src in by[tier] + (by[PENDING] + by["tail"] if tier == RAW else []):
                nxt = []
                for a, b in remaining:
                    s, e = max(a, src.start_ms), min(b, src.end_ms)
                    if s >= e:
                        nxt.append((a, b))
                        continue
                    chosen.append(Source(src.kind, src.path, s, e))
                    nxt += [x for x in ((a, s), (e, b)) if x[0] < x[1]]
                remaining = nxt
                if not remaining:
                    return sorted(chosen, key=lambda x: x.start_ms)
        return sorted(chosen, key=lambda x: x.start_ms)

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
        """Rows with `lo_s <= t_s < hi_s` (seconds since t0) as tables of `COLUMNS` (or `columns`), in time
        order per device within each source, sources in time order."""
        lo = -BIG if lo_s is None else math.floor(lo_s * 1000)
        hi = BIG if hi_s is None else math.ceil(hi_s * 1000)
        want = list(columns or COLUMNS)
        uu = set(uuids) if uuids is not None else None
        cc = set(components) if components is not None else None
        for src in self.plan(lo, hi, int(resolution_s * 1000)):
            if src.kind in (PENDING, "tail", "journal"):
                from .journal import iter_journal_chunks

                try:
                    for chunk in iter_journal_chunks(src.path, t0=self.t0):
                        yield from _finish(chunk, src, uu, cc, want)
                except OSError as exc:
                    self._skipped(src, exc)
            else:
                yield from _parquet(src, uu, cc, want, self._skipped)

    def _skipped(self, src: Source, exc: BaseException) -> None:
        note = f"{src.path.parent.name}/{src.path.name}: unreadable ({type(exc).__name__}: {str(exc)[:120]}): skipped"
        if note not in self.notes:
            self.notes.append(note)

    def last_readings(self) -> dict[str, dict[str, Any]]:
        """{uuid: {t_s, energy_j, power_w, component}}: each device's newest reading, from `last.json` and the
        journal pieces after it. Bounded and pure Python (no pyarrow): what `footprint recover` needs."""
        from .journal import last_readings as journal_last

        last: dict[str, list[Any]] = {}
        after = -BIG
        try:
            data = json.loads((self.dir / LAST).read_text())
            last.update({u: r for u, r in (data.get("last") or {}).items() if _reading(r)})
            after = int(data.get("end_ms", after))
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):
            if (self.dir / LAST).exists():
                self.notes.append(f"{LAST}: unreadable: the newest readings come from the journal pieces only")
        by = self.sources()
        for src in by[PENDING] + by["tail"]:
            if src.kind == PENDING and src.end_ms <= after:
                continue  # its raw part and last.json were written before the process died
            try:
                newest = journal_last(src.path, self.t0)
            except OSError as exc:
                self._skipped(src, exc)
                continue
            for uuid, reading in newest.items():
                prev = last.get(uuid)
                if prev is None or reading[0] >= prev[0]:
                    last[uuid] = reading
        return {
            u: {"t_s": v[0] / 1000.0, "energy_j": v[1] / 1000.0, "power_w": v[2], "component": v[3] if len(v) > 3 else None}
            for u, v in last.items()
        }


def _reading(r: Any) -> bool:
    """Whether a last.json entry is [t_ms, energy_mJ, power or null, component?] with finite numbers."""
    if not (isinstance(r, list) and len(r) >= 3):
        return False
    num = [isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r[:3]]
    return num[0] and num[1] and r[1] >= 0 and (num[2] or r[2] is None)


def _parquet(src: Source, uu: set[str] | None, cc: set[str] | None, want: list[str], skipped: Any = None) -> Iterator[pa.Table]:
    """One part, pushed down: only the columns asked for, only the row groups whose statistics can match. A part
    that cannot be read (truncated, not Parquet, columns missing) is reported to ``skipped`` and left out."""
    import pyarrow.parquet as pq

    stored = set(_schema(src.kind != RAW).names)
    need = {"t_ms"} | ({_STORED.get(c, c) for c in want} & stored)
    if uu is not None or cc is not None:
        need |= {"uuid", "component"}
    if "n" in want and "n" not in stored:
        need.add("power_w")
    try:
        f = pq.ParquetFile(src.path)
        groups = [i for i in range(f.metadata.num_row_groups) if _may_match(f.metadata.row_group(i), src, uu, cc)]
        if groups:
            for batch in f.iter_batches(batch_size=1 << 16, row_groups=groups, columns=sorted(need), use_threads=False):
                yield from _finish(batch, src, uu, cc, want)
    except FileNotFoundError:  # expired by a live writer between planning and reading
        return
    except Exception as exc:  # noqa: BLE001 - a damaged part costs its span, never the read
        if skipped is None:
            raise
        skipped(src, exc)


def _may_match(rg: Any, src: Source, uu: set[str] | None, cc: set[str] | None) -> bool:
    """Whether a row group's min/max statistics allow rows in the source's span and the wanted devices."""
    for j in range(rg.num_columns):
        col = rg.column(j)
        st = col.statistics
        if st is None or not st.has_min_max:
            continue
        name = col.path_in_schema
        if name == "t_ms" and (st.max < src.start_ms or st.min >= src.end_ms):
            return False
        wanted = uu if name == "uuid" else cc if name == "component" else None
        if wanted is not None and not any(_text(st.min) <= v <= _text(st.max) for v in wanted):
            return False
    return True


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _codes(column: Any) -> tuple[Any, list[Any]]:
    """(indices, values) of a string column, dictionary-encoded or not (no Arrow compute: numpy and lists).
    Index -1 is null."""
    import numpy as np
    import pyarrow as pa

    col = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_dictionary(col.type):
        idx = col.indices.to_numpy(zero_copy_only=False)
        idx = np.where(col.indices.is_valid().to_numpy(zero_copy_only=False), idx, -1) if col.null_count else idx
        return idx.astype(np.int64), col.dictionary.to_pylist()
    values, inverse = np.unique(np.array(col.to_pylist(), dtype=object).astype(str), return_inverse=True)
    nulls = np.array([v is None for v in col.to_pylist()]) if col.null_count else None
    idx = inverse.astype(np.int64)
    if nulls is not None:
        idx[nulls] = -1
    return idx, values.tolist()


def _finish(data: Any, src: Source, uu: set[str] | None, cc: set[str] | None, want: list[str]) -> Iterator[pa.Table]:
    """The rows of a batch inside the source's span and devices, in the reader's columns."""
    import numpy as np
    import pyarrow as pa

    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    names = set(table.column_names)
    t = table["t_ms"].to_numpy(zero_copy_only=False)
    mask = (t >= src.start_ms) & (t < src.end_ms)
    text = {c: _codes(table[c]) for c in ("uuid", "component") if c in names}
    for name, wanted in (("uuid", uu), ("component", cc)):
        if wanted is not None:
            idx, values = text[name]
            ok = np.array([v in wanted for v in values] + [False])
            mask &= ok[idx]
    if not mask.any():
        return

    def num(name: str, scale: float = 1.0) -> Any:
        x = table[name].to_numpy(zero_copy_only=False).astype(np.float64)[mask]
        return pa.array(x / scale if scale != 1.0 else x, mask=np.isnan(x))

    n = int(mask.sum())
    out: dict[str, Any] = {}
    for c in want:
        if c in text:
            out[c] = dict_array(text[c][0][mask], text[c][1])
        elif c in _STORED:
            out[c] = num(_STORED[c], 1000.0)
        elif c in ("power_w", "power_min_w", "power_max_w"):
            out[c] = num(c if c in names else "power_w")
        elif c == "n":
            x = table["n"].to_numpy(zero_copy_only=False)[mask] if "n" in names else None
            if x is None:
                x = np.isfinite(table["power_w"].to_numpy(zero_copy_only=False).astype(np.float64)[mask])
            out[c] = pa.array(x.astype(np.int32))
        elif c == "res_s":
            out[c] = pa.array(np.full(n, src.res_ms / 1000.0))
        else:
            out[c] = pa.nulls(n, pa.string())
    yield pa.table(out)


# ---- downsampling for plots -------------------------------------------------------------------------
def downsample(tables: Iterable[pa.Table], lo_s: float, hi_s: float, buckets: int, keys: Sequence[str] = ("uuid",)) -> pa.Table:
    """Per key and time bucket: min of power_min_w, max of power_max_w, sample-weighted mean power, and the
    last reading (time, cumulative energy). Streams: memory is O(keys x buckets), never O(rows), and the
    peaks of every bucket survive (a plot of min/max per pixel shows the spikes the raw data has)."""
    import numpy as np
    import pyarrow as pa

    width = max((hi_s - lo_s) / max(buckets, 1), 1e-9)
    acc: dict[tuple[Any, ...], dict[str, Any]] = {}
    for table in tables:
        if table.num_rows == 0:
            continue
        t = table["t_s"].to_numpy(zero_copy_only=False).astype(np.float64)
        col = {c: _floats(table[c]) for c in ("power_w", "power_min_w", "power_max_w", "energy_j")}
        n = table["n"].to_numpy(zero_copy_only=False).astype(np.int64)
        b = np.clip(np.floor((t - lo_s) / width), 0, buckets - 1).astype(np.int64)
        codes, combos = _key_codes(table, keys)
        for code, key in combos.items():
            sel = codes == code
            a = acc.get(key)
            if a is None:
                a = acc[key] = {
                    "power_min_w": np.full(buckets, np.nan),
                    "power_max_w": np.full(buckets, np.nan),
                    "wsum": np.zeros(buckets),
                    "n": np.zeros(buckets, dtype=np.int64),
                    "t_s": np.full(buckets, -np.inf),
                    "energy_j": np.full(buckets, np.nan),
                }
            bb, tt = b[sel], t[sel]
            np.fmin.at(a["power_min_w"], bb, col["power_min_w"][sel])
            np.fmax.at(a["power_max_w"], bb, col["power_max_w"][sel])
            np.add.at(a["wsum"], bb, np.nan_to_num(col["power_w"][sel]) * n[sel])
            np.add.at(a["n"], bb, n[sel])
            before = a["t_s"][bb].copy()
            np.maximum.at(a["t_s"], bb, tt)
            newest = (tt == a["t_s"][bb]) & (tt > before)  # the bucket's newest reading is in this batch
            a["energy_j"][bb[newest]] = col["energy_j"][sel][newest]
    names = (*keys, "bucket", "t_s", "power_w", "power_min_w", "power_max_w", "n", "energy_j")
    out: dict[str, list[Any]] = {k: [] for k in names}
    for key in sorted(acc, key=lambda k: tuple(str(x) for x in k)):
        a = acc[key]
        have = np.flatnonzero(np.isfinite(a["t_s"]))
        for k, v in zip(keys, key, strict=True):
            out[k] += [v] * len(have)
        out["bucket"] += have.tolist()
        out["t_s"] += a["t_s"][have].tolist()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(a["n"][have] > 0, a["wsum"][have] / np.maximum(a["n"][have], 1), np.nan)
        for name, values in (("power_w", mean), ("power_min_w", a["power_min_w"][have]), ("power_max_w", a["power_max_w"][have])):
            out[name] += [None if x != x else float(x) for x in values]
        out["n"] += a["n"][have].tolist()
        out["energy_j"] += [None if x != x else float(x) for x in a["energy_j"][have]]
    return pa.table(out)


def _floats(column: Any) -> Any:
    import numpy as np

    return column.to_numpy(zero_copy_only=False).astype(np.float64)


def _key_codes(table: pa.Table, keys: Sequence[str]) -> tuple[Any, dict[int, tuple[Any, ...]]]:
    """One integer per row for its combination of key columns, and the combination of each integer."""
    import numpy as np
    import pyarrow as pa

    code = np.zeros(table.num_rows, dtype=np.int64)
    lists = []
    for k in keys:
        column = table[k]
        if pa.types.is_integer(column.type) and not column.null_count:
            values_np, idx = np.unique(column.to_numpy(), return_inverse=True)
            values = values_np.tolist()
        else:
            idx, values = _codes(column)
        code = code * (len(values) + 1) + np.where(idx < 0, len(values), idx)
        lists.append(values)
    out: dict[int, tuple[Any, ...]] = {}
    for c in np.unique(code).tolist():
        rest, key = c, []
        for values in reversed(lists):
            rest, r = divmod(rest, len(values) + 1)
            key.append(values[r] if r < len(values) else None)
        out[c] = tuple(reversed(key))
    return code, out
