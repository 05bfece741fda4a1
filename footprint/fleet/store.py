"""The fleet directory that `footprint fleet import` writes, atomically, and its readers.

    fleet/
      fleet.json              the import: sources, window, metric names, counts, unallocated share, notes
      ledger/month=YYYY-MM/part-*.parquet
                              the job ledger: one row per job (INDEX_COLUMNS), hive-partitioned by the month the
                              job started (DuckDB: read_parquet(..., hive_partitioning=true)); fleets written
                              before it have one index.parquet instead, read the same way
      job_gpus.parquet        one row per job and device
      gpus.parquet            one row per GPU (and host meter): energy and time seen, allocated, unallocated
      jobs/<job>/run.json     one run record per job, the tracker's format (`footprint assess` / `report` read it)
      series/part-*.parquet   every interval of telemetry and the job it went to (-1 unallocated, -2 gap)

Everything is written under a hidden sibling directory and renamed into place at the end, so a
failed import leaves nothing behind and a reader never sees half an import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.outputs import CLAIM_MARK, write_text

INDEX = "index.parquet"  # the job rows in one file: fleet directories written before the partitioned ledger
LEDGER = "ledger"  # the job rows, partitioned by month: ledger/month=YYYY-MM/part-NNNNN.parquet
NO_MONTH = "none"  # the partition of an empty ledger (DuckDB and pyarrow need one file to know the columns)
JOB_GPUS = "job_gpus.parquet"
JOB_GPU_COLUMNS = (
    *("job_id", "uuid", "name", "index", "host", "component", "method", "measured", "energy_j", "duration_s", "notes"),
)
GPUS = "gpus.parquet"
META = "fleet.json"
JOBS = "jobs"
SERIES = "series"
FORMAT = "footprint-fleet"
VERSION = 1
INDEX_COLUMNS = (
    "job_id",
    "name",
    "user",
    "account",
    "partition",
    "state",
    "source",
    "start",
    "end",
    "month",
    "duration_s",
    "gpu_count",
    "gpu_hours",
    "gpu_name",
    "gpu_model",
    "nodes",
    "gpu_energy_j",
    "cpu_energy_j",
    "ram_energy_j",
    "energy_j",
    "energy_method",
    "coverage",
    "grid",
    "pue",
    "run_dir",
    "notes",
)


FLOAT_COLUMNS = ("duration_s", "gpu_hours", "gpu_energy_j", "cpu_energy_j", "ram_energy_j", "energy_j", "coverage", "pue")
ROWS_PER_PART = 500  # ledger rows (and device rows) buffered as dicts, then written as a row group: memory stays bounded


def index_schema() -> Any:
    """index.parquet's Arrow schema, fixed so that every row group agrees (a chunk of all-None is still text)."""
    import pyarrow as pa

    def typ(c: str) -> Any:
        if c in FLOAT_COLUMNS:
            return pa.float64()
        if c == "gpu_count":
            return pa.int64()
        if c in ("start", "end"):
            return pa.timestamp("ns", tz="UTC")
        return pa.string()

    return pa.schema([(c, typ(c)) for c in INDEX_COLUMNS])


def index_table(columns: dict[str, Any]) -> tuple[Any, Any]:
    """Ledger rows as columns (as the importer builds them: lists or arrays, times in Unix seconds, None or NaN =
    not available) typed as the ledger's Arrow schema (without pandas: ~1 µs a job), and each row's month."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    n = len(columns["job_id"])
    got = {c: columns[c] if c in columns else [None] * n for c in INDEX_COLUMNS if c not in ("month", "gpu_hours")}
    times = {c: pd.to_datetime(np.asarray(got[c], np.float64), unit="s", utc=True) for c in ("start", "end")}
    month = np.datetime_as_string(times["start"].tz_localize(None).to_numpy().astype("datetime64[M]"), unit="M")
    month[times["start"].isna()] = NO_MONTH
    count = np.asarray(got["gpu_count"], np.int64)
    got["gpu_hours"] = np.asarray(got["duration_s"], np.float64) * count.astype(np.float64) / 3600.0
    schema = ledger_schema()
    arrays = [pa.array(times[f.name], f.type) if f.name in times else _typed(got[f.name], f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema), month


def _typed(values: Any, typ: Any) -> Any:
    """One column as its Arrow type; None (and NaN in a number column) is null, but a flag's None is False."""
    import numpy as np
    import pyarrow as pa

    if isinstance(values, pa.Array):  # typed already
        return values if values.type == typ else values.cast(typ)
    if pa.types.is_floating(typ):
        values = np.asarray(values, np.float64)
    elif pa.types.is_boolean(typ):
        values = np.asarray(values, bool)
    return pa.array(values, typ, from_pandas=True)


def _rows_to_columns(rows: list[dict[str, Any]], names: tuple[str, ...]) -> dict[str, list[Any]]:
    return {c: [r.get(c) for r in rows] for c in names}


class _PartWriter:
    """A Parquet file written a row group at a time from row dicts (or columns)."""

    def __init__(self, path: Path, schema: Any, table: Any) -> None:
        self.path, self.schema, self.table = path, schema, table
        self.rows: list[dict[str, Any]] = []
        self.writer: Any = None

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= ROWS_PER_PART:
            self.flush()

    def flush(self) -> None:
        if self.rows or self.writer is None:
            table = self.table(_rows_to_columns(self.rows, tuple(self.schema.names)))
            self.rows = []
            self.write(table)

    def write(self, table: Any) -> None:
        """A table of rows as one row group (the file opened at the first)."""
        import pyarrow.parquet as pq

        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema)
        self.writer.write_table(table)

    def close(self) -> None:
        self.flush()
        self.writer.close()


class _LedgerWriter:
    """Job rows into ``ledger/month=M/part-00000.parquet``: rows buffered (ROWS_PER_PART at most), then a row group
    in the file of each month they hold; the month is the directory's name (hive style), not a column."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: list[dict[str, Any]] = []
        self.files: dict[str, Any] = {}  # month -> its open ParquetWriter

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= ROWS_PER_PART:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            table, month = index_table(_rows_to_columns(self.rows, INDEX_COLUMNS))
            self.rows = []
            self.write_table(table, month)

    def write(self, df: Any) -> None:
        """Typed ledger rows (a frame with its month column)."""
        import pyarrow as pa

        schema = ledger_schema()
        months = df["month"].astype(object).where(df["month"].notna(), NO_MONTH)
        for month, part in df.drop(columns="month").groupby(months.to_numpy(), sort=True):
            self._file(str(month), schema).write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False))

    def write_table(self, table: Any, month: Any) -> None:
        """Ledger rows as a table and each row's month: a row group in each month's file, rows in their order."""
        import numpy as np

        for m in np.unique(month).tolist():
            part = table if (month == m).all() else table.take(np.flatnonzero(month == m))
            self._file(str(m), table.schema).write_table(part)

    def _file(self, month: str, schema: Any) -> Any:
        import pyarrow.parquet as pq

        if month not in self.files:
            d = self.root / f"month={month}"
            d.mkdir(parents=True, exist_ok=True)
            self.files[month] = pq.ParquetWriter(d / "part-00000.parquet", schema)
        return self.files[month]

    def close(self) -> None:
        self.flush()
        if not self.files:  # no job: one empty part, so that readers know the columns
            self._file(NO_MONTH, ledger_schema())
        for f in self.files.values():
            f.close()
        self.files = {}

    def abort(self) -> None:
        for f in self.files.values():
            f.close()
        self.files = {}


def ledger_schema() -> Any:
    """The schema of a ledger part: the index's less the month (its directory)."""
    schema = index_schema()
    return schema.remove(schema.get_field_index("month"))


def job_gpus_schema() -> Any:
    import pyarrow as pa

    types = {"index": pa.int64(), "measured": pa.bool_(), "energy_j": pa.float64(), "duration_s": pa.float64()}
    return pa.schema([(c, types.get(c, pa.string())) for c in JOB_GPU_COLUMNS])


def job_gpus_table(columns: dict[str, Any]) -> Any:
    """job_gpus rows as columns (lists or arrays, None = not available) typed as its schema."""
    import pyarrow as pa

    schema = job_gpus_schema()
    return pa.Table.from_arrays([_typed(columns[f.name], f.type) for f in schema], schema=schema)


def safe_name(job_id: str) -> str:
    """A directory name for a job id (``ns/pod`` -> ``ns__pod``)."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "__", job_id).strip(".") or "job"
    return name[:200]


class FleetWriter:
    """Writes a fleet directory under a temporary name; `commit()` moves it into place."""

    def __init__(self, out: str | Path, overwrite: bool = False) -> None:
        from footprint.outputs import check_dir_target, claim_new, write_error

        self.out = check_dir_target(out)  # not '', '/', a symlink, a file, a pipe or a device
        if self.out.is_dir() and any(self.out.iterdir()) and not overwrite:
            raise FootprintError("exists and is not empty: choose a new directory or pass --overwrite", str(self.out), "-o")
        self.overwrite = overwrite
        # a new directory is claimed now: of N concurrent imports into it one wins, the others fail here in one line
        self.made = False if overwrite else claim_new(self.out)
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name[:80]}.import-", suffix=".tmp", dir=self.out.parent))
        except OSError as e:
            if not overwrite:
                from footprint.outputs import release_claim

                release_claim(self.out, self.made)
            raise write_error(self.out, e) from None
        self.series_parts = 0
        self.records = True
        self._index = _LedgerWriter(self.tmp / LEDGER)
        self._job_gpus = _PartWriter(self.tmp / JOB_GPUS, job_gpus_schema(), job_gpus_table)

    def __enter__(self) -> FleetWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is not None:
            self.abort()

    def path(self, *parts: str) -> Path:
        return self.tmp.joinpath(*parts)

    def write_series(self, columns: dict[str, Any]) -> None:
        import pandas as pd

        if len(next(iter(columns.values()))) == 0:
            return
        (self.tmp / SERIES).mkdir(exist_ok=True)
        pd.DataFrame(columns).to_parquet(self.tmp / SERIES / f"part-{self.series_parts:05d}.parquet", index=False)
        self.series_parts += 1

    def write_record(self, job_id: str, record: dict[str, Any]) -> str:
        """One job's run record, through the tracker's own writer; returns its path relative to the fleet."""
        from footprint.tracking import runrecord

        rel = f"{JOBS}/{safe_name(job_id)}"  # the tracker's writer makes the directories
        runrecord.write_json(self.tmp / rel / "run.json", record)
        return rel

    def add_job(self, row: dict[str, Any]) -> None:
        """One job's ledger row (index.parquet), written a row group at a time."""
        self._index.add(row)

    def add_jobs_frame(self, df: Any) -> None:
        """Many ledger rows at once, as a typed frame with a month column: a row group per month they hold."""
        self._index.write(df)

    def add_jobs_columns(self, columns: dict[str, Any]) -> None:
        """Many ledger rows as columns (`index_table`'s input): a row group per month they hold, after the rows
        added one by one before them."""
        self._index.flush()
        self._index.write_table(*index_table(columns))

    def add_devices_columns(self, columns: dict[str, Any]) -> None:
        """Many job_gpus rows as columns (`job_gpus_table`'s input, notes already joined): one row group."""
        self._job_gpus.flush()
        self._job_gpus.write(job_gpus_table(columns))

    def add_job_devices(self, job_id: str, devices: list[dict[str, Any]]) -> None:
        """The ledger's per-job-per-device rows (job_gpus.parquet), whether or not a run record is written."""
        for d in devices:
            row = {k: d.get(k) for k in JOB_GPU_COLUMNS if k != "job_id"}
            row["notes"] = "; ".join(d.get("notes") or []) or None
            self._job_gpus.add({"job_id": job_id, **row})

    def close_ledger(self) -> None:
        self._index.close()
        self._job_gpus.close()

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_text(self.tmp / META, json.dumps({"format": FORMAT, "version": VERSION, **meta}, indent=2, default=str))

    def commit(self) -> Path:
        """Move the finished directory into place (the old one, with --overwrite, only once the new one is whole)."""
        from footprint.outputs import write_error

        old = None
        try:
            if not self.overwrite:
                (self.out / CLAIM_MARK).unlink()  # ours and otherwise empty: the rename replaces it
            elif self.out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.out.name[:80]}.", suffix=".old", dir=self.out.parent)) / "x"
                os.replace(self.out, old)
            os.replace(self.tmp, self.out)
        except OSError as e:
            raise write_error(self.out, e) from None
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
        return self.out

    def abort(self) -> None:
        from footprint.outputs import release_claim

        if not self.overwrite:
            release_claim(self.out, self.made)
        self._index.abort()
        if self._job_gpus.writer is not None:
            self._job_gpus.writer.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def ledger_source(fleet: str | Path) -> Path:
    """Where a fleet directory's job rows are: ``ledger/`` (partitioned by month) or, in one written before it,
    ``index.parquet``; a clear error when the folder is not a fleet import."""
    d = Path(fleet)
    if not d.is_dir():
        raise FootprintError("no such fleet directory (write one with `footprint fleet import`)", str(d))
    if (d / LEDGER).is_dir():
        return d / LEDGER
    if (d / INDEX).is_file():
        return d / INDEX
    raise FootprintError(f"no {LEDGER}/ or {INDEX}: not a fleet directory written by `footprint fleet import`", str(d))


def duckdb_source(fleet: str | Path) -> str:
    """The job rows as a DuckDB table function (the month from the partitions' names, as text)."""
    src = ledger_source(fleet)
    q = str(src).replace("'", "''")
    if src.is_dir():
        return f"read_parquet('{q}/month=*/*.parquet', hive_partitioning=true, hive_types={{'month': VARCHAR}})"
    return f"read_parquet('{q}')"


def _dataset(src: Path) -> Any:
    import pyarrow.dataset as ds

    if src.is_dir():
        return ds.dataset(src, format="parquet", partitioning="hive", schema=index_schema())
    return ds.dataset(src, format="parquet")


def read_index_schema(fleet: str | Path) -> list[str]:
    """The ledger's column names, checked as `read_index` checks them, without reading a row."""
    p, _ = _index_file(fleet, None)
    try:
        return list(_dataset(p).schema.names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FootprintError(f"unreadable parquet ({type(exc).__name__}: {str(exc)[:200]})", str(p)) from None


def read_index(fleet: str | Path, columns: tuple[str, ...] | None = None) -> Any:
    """The job ledger (only ``columns`` when given; columns of few values as categories, so a million jobs stay
    small) as a DataFrame, checked; a clear error when the folder is not a fleet import."""
    p, cols = _index_file(fleet, columns)
    try:
        df = _frame(_dataset(p).to_table(columns=cols))  # a million jobs' users are codes, not strings
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FootprintError(f"unreadable parquet ({type(exc).__name__}: {str(exc)[:200]})", str(p)) from None
    return _checked(df)


def iter_index(fleet: str | Path, columns: tuple[str, ...] | None = None, rows: int = 100_000) -> Iterator[Any]:
    """The job ledger ``rows`` at a time (Parquet record batches), each checked as `read_index` checks it."""
    import pyarrow as pa

    p, cols = _index_file(fleet, columns)
    try:
        # one batch at a time, read on this thread (Arrow's read-ahead would hold many)
        batches = _dataset(p).to_batches(
            columns=cols, batch_size=max(int(rows), 1), batch_readahead=0, fragment_readahead=0, use_threads=False
        )
        while True:
            try:
                b = next(batches)
            except StopIteration:
                return
            if b.num_rows:
                yield _checked(_frame(pa.Table.from_batches([b])))
            del b
    except FootprintError:
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FootprintError(f"unreadable parquet ({type(exc).__name__}: {str(exc)[:200]})", str(p)) from None


def _frame(table: Any) -> Any:
    """An Arrow table as a DataFrame, the columns of few values as categories."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, name in enumerate(table.column_names):
        if name in FEW_VALUES and not pa.types.is_dictionary(table.schema.field(i).type):
            table = table.set_column(i, name, pc.dictionary_encode(table.column(i)))
    return table.to_pandas()


def _index_file(fleet: str | Path, columns: tuple[str, ...] | None) -> tuple[Path, list[str]]:
    """The ledger's path and the columns to read, checked present."""
    p = ledger_source(fleet)
    cols = list(columns or INDEX_COLUMNS)
    try:
        names = set(_dataset(p).schema.names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FootprintError(f"unreadable parquet ({type(exc).__name__}: {str(exc)[:200]})", str(p)) from None
    missing = [c for c in cols if c not in names]
    if missing:
        raise FootprintError(f"missing columns {', '.join(missing)}: written by another version?", str(p))
    return p, cols


def _checked(df: Any) -> Any:
    """A damaged number (text, NaN, inf, negative) is "not available", never a result."""
    import pandas as pd

    for c in (x for x in NUMERIC_COLUMNS if x in df.columns):
        v = pd.to_numeric(df[c], errors="coerce").astype(float)
        df[c] = v.where(v.abs().lt(float("inf")) & v.ge(0))
    return df


FEW_VALUES = ("user", "account", "partition", "state", "source", "month", "gpu_name", "gpu_model", "energy_method", "grid")
NUMERIC_COLUMNS = ("duration_s", "gpu_count", "gpu_hours", "gpu_energy_j", "cpu_energy_j", "ram_energy_j", "energy_j", "pue")


def read_meta(fleet: str | Path) -> dict[str, Any]:
    from footprint.inputs import load_json, read_bytes

    p = Path(fleet) / META
    if not p.is_file():
        return {}
    return load_json(read_bytes(p, "fleet.json"), str(p))


def read_gpus(fleet: str | Path) -> Any:
    """gpus.parquet, or None when it is absent or unreadable (the unallocated share is then not available)."""
    import pandas as pd

    p = Path(fleet) / GPUS
    try:
        return pd.read_parquet(p) if p.is_file() else None
    except Exception:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        return None
