"""The fleet directory that `footprint fleet import` writes, atomically, and its readers.

    fleet/
      fleet.json              the import: sources, window, metric names, counts, unallocated share, notes
      index.parquet           the fleet index: one row per job (INDEX_COLUMNS)
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
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.outputs import write_text

INDEX = "index.parquet"
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


def safe_name(job_id: str) -> str:
    """A directory name for a job id (``ns/pod`` -> ``ns__pod``)."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "__", job_id).strip(".") or "job"
    return name[:200]


class FleetWriter:
    """Writes a fleet directory under a temporary name; `commit()` moves it into place."""

    def __init__(self, out: str | Path, overwrite: bool = False) -> None:
        from footprint.outputs import check_dir_target, write_error

        self.out = check_dir_target(out)  # not '', '/', a symlink, a file, a pipe or a device
        if self.out.is_dir() and any(self.out.iterdir()) and not overwrite:
            raise FootprintError("exists and is not empty: choose a new directory or pass --overwrite", str(self.out), "-o")
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=f".{self.out.name[:80]}.import-", suffix=".tmp", dir=self.out.parent)
            self.tmp = Path(tmp)
            (self.tmp / JOBS).mkdir()
        except OSError as e:
            raise write_error(self.out, e) from None
        self.series_parts = 0

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

        rel = f"{JOBS}/{safe_name(job_id)}"
        runrecord.write_json(self.tmp / rel / "run.json", record)
        return rel

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_text(self.tmp / META, json.dumps({"format": FORMAT, "version": VERSION, **meta}, indent=2, default=str))

    def commit(self) -> Path:
        """Move the finished directory into place (the old one, with --overwrite, only once the new one is whole)."""
        from footprint.outputs import write_error

        old = None
        try:
            if self.out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.out.name[:80]}.", suffix=".old", dir=self.out.parent)) / "x"
                os.replace(self.out, old)
            os.replace(self.tmp, self.out)
        except OSError as e:
            raise write_error(self.out, e) from None
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
        return self.out

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def read_index(fleet: str | Path) -> Any:
    """The fleet index as a DataFrame, checked; a clear error when the folder is not a fleet import."""
    import pandas as pd

    d = Path(fleet)
    if not d.is_dir():
        raise FootprintError("no such fleet directory (write one with `footprint fleet import`)", str(d))
    p = d / INDEX
    if not p.is_file():
        raise FootprintError(f"no {INDEX}: not a fleet directory written by `footprint fleet import`", str(d))
    try:
        df = pd.read_parquet(p)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FootprintError(f"unreadable parquet ({type(exc).__name__}: {exc})", str(p)) from None
    missing = [c for c in INDEX_COLUMNS if c not in df.columns]
    if missing:
        raise FootprintError(f"missing columns {', '.join(missing)}: written by another version?", str(p))
    for c in NUMERIC_COLUMNS:  # a damaged number (text, NaN, inf, negative) is "not available", never a result
        v = pd.to_numeric(df[c], errors="coerce").astype(float)
        df[c] = v.where(v.abs().lt(float("inf")) & v.ge(0))
    return df


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
