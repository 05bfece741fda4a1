"""The job ledger: a fleet directory's jobs as rows (`ledger/month=*/part-*.parquet`, `job_gpus.parquet`), read with DuckDB.

One row per job (ids, user, account, partition, window, GPUs, GPU-hours, energy by component, method,
coverage, site) and one per job and device beside it; no directory per job. DuckDB reads only the
columns and rows a command needs (a million jobs' report reads eight columns), and the same files are
what pandas, Spark or Trino read. A job's run record — the tracker's format, which `footprint assess`
and `footprint report` take — is rebuilt from its rows on demand (`job_record`, `footprint fleet job`).
Fleet directories written before the ledger (records under ``jobs/``) stay readable: their record is
returned as written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet import store
from footprint.fleet.records import run_record
from footprint.lca import DEFAULT_SAMPLES


def _sql_path(p: Path) -> str:
    return str(p).replace("'", "''")


class NoDuckDB(FootprintError):
    """DuckDB could not start (a process limited in address space: DuckDB reserves ~700 MB of it)."""


def _connect() -> Any:
    """An in-memory DuckDB, small: one thread, a bounded buffer pool (the ledger is read, never held)."""
    import duckdb

    try:
        return duckdb.connect(config={"threads": 1, "memory_limit": "256MB"})
    except duckdb.Error as exc:
        raise NoDuckDB(f"DuckDB cannot start here ({str(exc).splitlines()[0][:120]})", key="ledger") from None


def query(fleet: str | Path, sql: str, params: list[Any] | None = None) -> Any:
    """A DuckDB query over the ledger's views ``jobs`` (ledger/, partitioned by month; index.parquet in fleets
    written before it) and ``job_gpus``; a pandas DataFrame."""
    import duckdb

    d = Path(fleet)
    src = store.duckdb_source(d)
    con = _connect()
    try:
        con.execute(f"CREATE VIEW jobs AS SELECT * FROM {src}")
        gp = d / store.JOB_GPUS
        if gp.is_file():
            con.execute(f"CREATE VIEW job_gpus AS SELECT * FROM read_parquet('{_sql_path(gp)}')")
        return con.execute(sql, params or []).df()
    except duckdb.Error as exc:
        raise FootprintError(f"cannot read the ledger ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})", str(d)) from None
    finally:
        con.close()


def read_jobs(fleet: str | Path, columns: tuple[str, ...]) -> Any:
    """These columns of every job (DuckDB reads no other), in the ledger's order."""
    cols = ", ".join(f'"{c}"' for c in columns)
    return query(fleet, f"SELECT {cols} FROM jobs")


def job_record(fleet: str | Path, job_id: str) -> dict[str, Any]:
    """The job's run record: as written when the import wrote records, else rebuilt from its ledger rows; with its
    energy per UTC hour where the import kept the per-interval series (--exact), for an hourly carbon intensity."""
    rec = _job_record(fleet, job_id)
    hours = job_energy_by_hour(fleet, str(job_id))
    if hours:
        from footprint.lca.hourly import iso_hours

        rec["energy_by_hour_utc"] = iso_hours(hours)
    return rec


def job_energy_by_hour(fleet: str | Path, job_id: str) -> dict[float, float] | None:
    """The job's energy per UTC hour (hour start -> J) from the series/ intervals attributed to it (DuckDB reads only
    its rows); None where the import kept no series (the default server-side aggregation keeps none)."""
    import duckdb

    from footprint.lca.hourly import intervals_by_hour

    parts = Path(fleet) / store.SERIES
    if not parts.is_dir() or not any(parts.glob("*.parquet")):
        return None
    con = _connect()
    try:
        df = con.execute(
            f"SELECT t0, t1, energy_j FROM read_parquet('{_sql_path(parts)}/*.parquet') WHERE CAST(job_id AS VARCHAR) = ?",
            [job_id],
        ).df()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return intervals_by_hour(df["t0"].to_numpy(), df["t1"].to_numpy(), df["energy_j"].to_numpy()) or None


def _job_record(fleet: str | Path, job_id: str) -> dict[str, Any]:

    rows = query(fleet, "SELECT * FROM jobs WHERE job_id = ?", [str(job_id)])
    if rows.empty:
        raise FootprintError(f"no job {job_id!r} in this fleet (`footprint fleet report DIR --by job` lists them)", str(fleet))
    row = rows.iloc[0].to_dict()
    rec_dir = row.get("run_dir")
    if isinstance(rec_dir, str) and rec_dir and (Path(fleet) / rec_dir / "run.json").is_file():
        from footprint.inputs import load_json, read_bytes

        p = Path(fleet) / rec_dir / "run.json"
        return load_json(read_bytes(p, "run.json"), str(p))
    devices = _devices(fleet, str(job_id))
    meta = store.read_meta(fleet)
    notes = [n for n in str(row.get("notes") or "").split("; ") if n]
    site = {k: _num(row.get(k)) if k == "pue" else row.get(k) for k in ("grid", "pue") if _present(row.get(k))}
    return run_record(
        name=row.get("name") or str(job_id),
        job_id=str(job_id),
        imported_from="+".join(x for x in ("prometheus-dcgm" if row.get("source") != "slurm-only" else "", "slurm") if x),
        start=row["start"].timestamp(),
        end=row["end"].timestamp(),
        duration_s=_num(row.get("duration_s")),
        devices=devices,
        site=site or None,
        slurm={k: row.get(k) for k in ("user", "account", "partition", "state")} if row.get("user") else None,
        telemetry={
            "coverage": _num(row.get("coverage")),
            "method": row.get("energy_method"),
            "import": meta.get("method", "exact"),
            "window": meta.get("window"),
        },
        notes=notes + ["rebuilt from the fleet ledger (its job and job_gpus rows) by `footprint fleet job`"],
    )


def _devices(fleet: str | Path, job_id: str) -> list[dict[str, Any]]:
    if not (Path(fleet) / store.JOB_GPUS).is_file():
        raise FootprintError(f"no {store.JOB_GPUS} and no run record for job {job_id!r}: re-import with this version", str(fleet))
    df = query(fleet, "SELECT * FROM job_gpus WHERE job_id = ?", [job_id])
    out = []
    for r in df.to_dict("records"):
        d = {k: (None if not _present(v) else v) for k, v in r.items() if k != "job_id"}
        d["notes"] = [n for n in str(d.get("notes") or "").split("; ") if n]
        for k in ("energy_j", "duration_s"):
            d[k] = _num(d.get(k))
        if d.get("index") is not None:
            d["index"] = int(d["index"])
        d["measured"] = bool(d.get("measured"))
        out.append(d)
    return out


def _present(v: Any) -> bool:
    import pandas as pd

    return v is not None and not (pd.api.types.is_scalar(v) and pd.isna(v))


def _num(v: Any) -> float | None:
    return float(v) if _present(v) and np.isfinite(float(v)) else None


# ---- sums for the report -------------------------------------------------------------------------------

MAX_LISTED = 1000  # jobs not assessed listed one by one; beyond this they are counted
_NUM = "CASE WHEN isfinite(TRY_CAST({c} AS DOUBLE)) AND TRY_CAST({c} AS DOUBLE) >= 0 THEN TRY_CAST({c} AS DOUBLE) END"
_OK = "({e} > 0 AND {h} > 0 AND gpu_model IS NOT NULL)".format(e=_NUM.format(c="energy_j"), h=_NUM.format(c="gpu_hours"))


def _group_sql(by: str) -> str:
    col = {"gpu": "gpu_name"}.get(by, by)
    return f"coalesce(CAST(\"{col}\" AS VARCHAR), '(none)')"


def sums(fleet: str | Path, by: str) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The report's inputs, summed by DuckDB so that memory does not grow with the job count (the central
    result and its Monte Carlo are linear in GPU-hours and energy, so sums per group and factor set give
    every group's numbers exactly): (rows per group and factor set with their summed GPU-hours, energy and
    job count; jobs not assessed, at most MAX_LISTED; the fleet's first site; counts). Where DuckDB cannot
    start, pandas computes the same from the columns it needs."""
    store.read_index_schema(fleet)
    try:
        return _sums_duckdb(fleet, by)
    except NoDuckDB:
        return _sums_pandas(fleet, by)


def _sums_duckdb(fleet: str | Path, by: str) -> tuple[Any, Any, Any, dict[str, Any]]:
    e, h = _NUM.format(c="energy_j"), _NUM.format(c="gpu_hours")
    parts = query(
        fleet,
        f"SELECT {_group_sql(by)} AS grp, CAST(gpu_model AS VARCHAR) AS gpu_model, CAST(gpu_name AS VARCHAR) AS gpu_name,"
        f" CAST(grid AS VARCHAR) AS grid, {_NUM.format(c='pue')} AS pue, count(*) AS jobs, sum({h}) AS gpu_hours,"
        f" sum({e}) AS energy_j FROM jobs WHERE {_OK} GROUP BY ALL ORDER BY ALL",
    )
    left = query(
        fleet,
        f"SELECT CAST(job_id AS VARCHAR) AS job_id, {h} AS gpu_hours, {e} AS energy_j, CAST(gpu_model AS VARCHAR) AS"
        f" gpu_model, CAST(gpu_name AS VARCHAR) AS gpu_name, CAST(grid AS VARCHAR) AS grid, {_NUM.format(c='pue')} AS pue"
        f" FROM jobs WHERE NOT coalesce({_OK}, false) LIMIT {MAX_LISTED}",
    )
    counts = (
        query(
            fleet,
            f"SELECT count(*) AS jobs, count(*) FILTER (WHERE NOT coalesce({_OK}, false)) AS left_out,"
            f" sum({h}) FILTER (WHERE NOT coalesce({_OK}, false)) AS left_hours,"
            f" count(*) FILTER (WHERE TRY_CAST(coverage AS DOUBLE) < 0.99) AS low_coverage,"
            f" first(CAST(grid AS VARCHAR)) AS grid, first({_NUM.format(c='pue')}) AS pue FROM jobs",
        )
        .iloc[0]
        .to_dict()
    )
    site = {"grid": counts.pop("grid"), "pue": counts.pop("pue")}
    return parts, left, site, counts


def _sums_pandas(fleet: str | Path, by: str) -> tuple[Any, Any, Any, dict[str, Any]]:
    df = store.read_index(fleet, (*TOP_COLUMNS, "partition", "month", "grid", "pue"))  # numbers checked there
    ok = (df["energy_j"] > 0) & (df["gpu_hours"] > 0) & df["gpu_model"].notna()
    col = {"gpu": "gpu_name"}.get(by, by)
    text = ("gpu_model", "gpu_name", "grid")
    d = df[ok].assign(grp=df[col].astype(object).where(df[col].notna(), "(none)").astype(str), jobs=1)
    d = d.astype({c: object for c in text})
    parts = (
        d.groupby(["grp", *text, "pue"], dropna=False, sort=True)
        .agg(jobs=("jobs", "sum"), gpu_hours=("gpu_hours", "sum"), energy_j=("energy_j", "sum"))
        .reset_index()
    )
    left = df[~ok].head(MAX_LISTED)[["job_id", "gpu_hours", "energy_j", *text, "pue"]].astype({c: object for c in text})
    counts = {
        "jobs": len(df),
        "left_out": int((~ok).sum()),
        "left_hours": float(df.loc[~ok, "gpu_hours"].sum()),
        "low_coverage": int((df["coverage"].astype(float) < 0.99).sum()),
    }
    site = {"grid": df["grid"].iloc[0] if len(df) else None, "pue": df["pue"].iloc[0] if len(df) else None}
    return parts, left.assign(job_id=left["job_id"].astype(str)), site, counts


TOP_COLUMNS = ("job_id", "name", "user", "account", "gpu_name", "gpu_model", "gpu_count", "gpu_hours", "energy_j",
               "coverage", "run_dir")  # fmt: skip


def top_jobs(fleet: str | Path, coef: Any, n: int) -> Any:
    """The ``n`` jobs of highest climate change: ``coef`` gives per factor set (gpu_model, grid, pue) the
    kg CO2 eq of one GPU-hour (a) and one kWh (b); DuckDB ranks a x GPU-hours + b x kWh over every job (pandas
    where DuckDB cannot start)."""
    if n <= 0 or coef.empty:
        return coef.iloc[0:0]
    try:
        return _top_duckdb(fleet, coef, n)
    except NoDuckDB:
        df = store.read_index(fleet, (*TOP_COLUMNS, "grid", "pue"))
        keys = ["gpu_model", "grid", "pue"]
        df = df.astype({"gpu_model": object, "grid": object}).merge(coef, on=keys, how="inner")
        df = df[(df["energy_j"] > 0) & (df["gpu_hours"] > 0)]
        df["cc"] = df["a"] * df["gpu_hours"] + df["b"] * df["energy_j"] / 3.6e6
        return df.nlargest(int(n), "cc").assign(job_id=lambda x: x["job_id"].astype(str))


def _top_duckdb(fleet: str | Path, coef: Any, n: int) -> Any:
    import duckdb

    e, h = _NUM.format(c="energy_j"), _NUM.format(c="gpu_hours")
    con = _connect()
    try:
        con.register("coef", coef)
        src = store.duckdb_source(fleet)
        return con.execute(
            f"SELECT CAST(j.job_id AS VARCHAR) AS job_id, j.name, j.user, j.account, j.gpu_name, j.gpu_count, {h} AS"
            f" gpu_hours, {e} AS energy_j, TRY_CAST(j.coverage AS DOUBLE) AS coverage, j.run_dir,"
            f" c.a * {h} + c.b * {e} / 3.6e6 AS cc FROM {src} j JOIN coef c"
            " ON CAST(j.gpu_model AS VARCHAR) = c.gpu_model AND CAST(j.grid AS VARCHAR) IS NOT DISTINCT FROM c.grid"
            f" AND {_NUM.format(c='j.pue')} IS NOT DISTINCT FROM c.pue WHERE {_OK.replace('gpu_model', 'j.gpu_model')}"
            f" ORDER BY cc DESC LIMIT {int(n)}"
        ).df()
    except duckdb.Error as exc:
        raise FootprintError(f"cannot read the ledger ({str(exc).splitlines()[0][:200]})", str(fleet)) from None
    finally:
        con.close()


# ---- every job, assessed -------------------------------------------------------------------------------

JOB_COLUMNS = ("job_id", "name", "user", "account", "partition", "state", "start", "gpu_name", "gpu_model", "gpu_count",
               "gpu_hours", "energy_j", "coverage", "grid", "pue")  # fmt: skip


def job_table(
    fleet: str | Path, sets: list[str] | None = None, chunk: int = 100_000, samples: int = DEFAULT_SAMPLES, seed: int = 0
) -> Any:
    """Every job with its footprint in all 16 categories (central values), one DataFrame: for a program that
    wants the table whole (`job_chunks` streams it, as `footprint fleet report --by job` does)."""
    import pandas as pd

    df = store.read_index(fleet, JOB_COLUMNS)  # text as categories: a million jobs stay small
    mc = _Ranges(samples, seed)
    parts = [_job_frame(df.iloc[s0 : s0 + chunk], sets, mc) for s0 in range(0, len(df), chunk)]
    parts = parts or [_job_frame(df, sets, mc)]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)


def job_chunks(
    fleet: str | Path, sets: list[str] | None = None, chunk: int = 20_000, samples: int = DEFAULT_SAMPLES, seed: int = 0
) -> Iterator[Any]:
    """The job table ``chunk`` ledger rows at a time (read in Parquet batches, assessed, handed on, freed):
    memory is bounded by the chunk, not the job count."""
    mc = _Ranges(samples, seed)  # the engine run once per factor set, not once per chunk
    for df in store.iter_index(fleet, JOB_COLUMNS, chunk):
        yield _job_frame(df, sets, mc)


@dataclass
class _Ranges:
    """What the job table's chunks share: the Monte Carlo settings, the engine's result per factor set and the
    percentile nodes of `footprint.lca.batch.row_ranges`."""

    samples: int
    seed: int
    bases: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    nodes: dict[int, Any] = field(default_factory=dict)


def _job_frame(df: Any, sets: list[str] | None, mc: _Ranges | None = None) -> Any:
    """These ledger rows with their footprint in all 16 categories (the engine's batch, linear in GPU-hours and
    energy); a row that cannot be assessed keeps its place, with the reason."""
    import pandas as pd

    from footprint.fleet.assess import assess_index
    from footprint.lca import categories as cat
    from footprint.lca.units import display_unit

    n = len(df)
    cats = cat.categories() + cat.extras()
    names = ["facility_energy_kwh", "gpu_lifetimes", "single_score_pt"] + [f"{c.key} [{display_unit(c.unit)}]" for c in cats]
    values = {k: np.full(n, np.nan) for k in names}
    mc = mc or _Ranges(0, 0)
    batch, rows, reasons = assess_index(df, sets, mc.bases)
    if len(rows):
        values["facility_energy_kwh"][rows] = batch.facility_energy_kwh
        values["gpu_lifetimes"][rows] = batch.gpu_lifetimes
        values["single_score_pt"][rows] = batch.single_score()
        for c, k in zip(cats, names[3:], strict=True):
            values[k][rows] = batch.total(c.key)
    if mc.samples > 1:  # low-high of the 16 categories, each job's own Monte Carlo draws
        values |= _low_high(batch, rows, n, mc)
    partial = np.full(n, "", dtype=object)
    if len(rows):
        partial[rows] = np.array([_partial_text(b) for b in batch.bases], dtype=object)[batch.template_index]
    cols = {
        "job_id": df["job_id"],
        "name": df["name"],
        "user": df["user"],
        "account": df["account"],
        "partition": df["partition"],
        "state": df["state"],
        "start": df["start"],
        "gpu": df["gpu_name"],
        "gpus": df["gpu_count"].astype("Int64"),
        "gpu_hours": df["gpu_hours"],
        "energy_kwh": df["energy_j"] / 3.6e6,
        "coverage": df["coverage"],
    }
    cols = {k: v.reset_index(drop=True) for k, v in cols.items()}  # categories stay categories
    return pd.DataFrame(cols | values | {"partial": partial, "not_assessed": reasons})


def _partial_text(basis: Any) -> str:
    """The categories whose totals leave a stage out for this factor set (the engine's `not_modelled`), as a run's
    CSV says it: "ozone_depletion: partial: use not modelled; ..." ("" when every total is whole)."""
    from footprint.lca.render import total_status

    parts = []
    for key, r in basis.per_gpu_hour.impacts.items():
        stages = tuple(dict.fromkeys([*r.not_modelled, *basis.per_kwh.impacts[key].not_modelled]))
        if stages:
            parts.append(f"{key}: {total_status(stages)}")
    return "; ".join(parts)


def _low_high(batch: Any, rows: np.ndarray, n: int, mc: _Ranges) -> dict[str, np.ndarray]:
    from footprint.lca import categories as cat
    from footprint.lca.batch import row_ranges
    from footprint.lca.database import IDX
    from footprint.lca.units import display_unit

    q = row_ranges(batch, mc.samples, mc.seed, mc.nodes) if len(rows) else None
    out: dict[str, np.ndarray] = {}
    for c in cat.categories():
        for side, i in (("low", 0), ("high", 1)):
            v = np.full(n, np.nan)
            if q is not None:
                v[rows] = q[:, IDX[c.key], i]
            out[f"{c.key} {side} [{display_unit(c.unit)}]"] = v
    return out


def write_jobs(
    fleet: str | Path,
    output: str | None,
    fmt: str,
    sets: list[str] | None = None,
    chunk: int = 20_000,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> Path | None:
    """The job table as text, CSV or JSON (each job's low-high from ``samples`` Monte Carlo draws), streamed chunk
    by chunk to ``output`` (atomically, through `footprint.outputs.atomic_path`) or to stdout: a million jobs are
    never held at once."""
    import sys

    from footprint.outputs import atomic_path, write_error

    parts = _rendered(job_chunks(fleet, sets, chunk, samples, seed), fmt)
    if not output:
        for text in parts:
            sys.stdout.write(text)
        return None
    with atomic_path(output) as tmp:
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                for text in parts:
                    fh.write(text)
        except OSError as e:
            raise write_error(output, e) from None
    return Path(output)


def _rendered(chunks: Iterator[Any], fmt: str) -> Iterator[str]:
    """Each chunk as text: the CSV header, the JSON array's brackets and the table's column heads once."""
    first = True
    widths: dict[str, int] = {}
    if fmt == "json":
        yield '{"jobs": ['
    for table in chunks:
        if fmt == "json":
            recs = json.loads(table.to_json(orient="records", date_format="iso"))
            body = ",\n".join(json.dumps(r) for r in recs)
            if body:
                yield ("\n" if first else ",\n") + body
                first = False
        else:
            text, widths = render_jobs(table, fmt, header=first, widths=widths)
            first = False
            yield text
    if fmt == "json":
        yield "\n]}\n"
    elif first:  # no job at all: the heads alone
        yield render_jobs(_job_frame(_empty_index(), None), fmt)[0]


def _empty_index() -> Any:
    import pandas as pd

    return pd.DataFrame({c: pd.Series([], dtype=float if c in store.NUMERIC_COLUMNS else object) for c in JOB_COLUMNS})


def render_jobs(table: Any, fmt: str, header: bool = True, widths: dict[str, int] | None = None) -> tuple[str, dict[str, int]]:
    """One chunk of the job table as CSV (every column) or aligned text (the main figures; ``widths`` carries the
    columns' widths from chunk to chunk, so that chunks line up), and the widths used."""
    if fmt == "csv":
        return _csv(table, header), {}
    cc = next((c for c in table.columns if c.startswith("climate_change [")), None)
    cols = ["job_id", "user", "gpu", "gpus", "gpu_hours", "energy_kwh"] + ([cc] if cc else [])
    view = table[cols].astype(object).where(table[cols].notna(), None)
    for c in ("gpu_hours", "energy_kwh", *([cc] if cc else [])):
        view[c] = view[c].map(lambda x: "n/a" if x is None else f"{x:.4g}")
    lo, hi = (cc.replace(" [", f" {side} [") if cc else "" for side in ("low", "high"))
    if cc and lo in table and hi in table:  # the central value, then its low-high
        rng = [f" ({a:.3g}-{b:.3g})" if a == a and b == b else "" for a, b in zip(table[lo], table[hi], strict=True)]
        view[cc] = view[cc] + rng
    view = view.map(lambda x: "n/a" if x is None else str(x))
    w = dict(widths or {})
    for c in cols:
        w[c] = max(w.get(c, len(c)), int(view[c].str.len().max()) if len(view) else 0)
    lines = [" ".join(c.rjust(w[c]) for c in cols)] if header else []
    lines += [" ".join(v.rjust(w[c]) for c, v in zip(cols, row, strict=True)) for row in view.itertuples(index=False)]
    return "\n".join(lines) + "\n", w


def _csv(table: Any, header: bool) -> str:
    """One chunk as CSV, written by Arrow's CSV writer (pandas' formats a float at a time); text cells through
    `footprint.escaping.csv_cell`, the start time in one ISO format whatever the rows."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from footprint.escaping import csv_cell

    def cells(col: Any) -> Any:  # every text column, whatever its dtype (object, category, string, Arrow string)
        numeric = pd.api.types.is_numeric_dtype(col) or pd.api.types.is_datetime64_any_dtype(col)
        return col if numeric or pd.api.types.is_bool_dtype(col) else col.astype(object).map(csv_cell)

    safe = table.apply(cells)
    if "start" in safe and hasattr(safe["start"], "dt"):
        t = safe["start"]
        t = t.dt.tz_localize("UTC") if t.dt.tz is None else t.dt.tz_convert("UTC")
        safe["start"] = t.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    arrow = pa.Table.from_pandas(safe, preserve_index=False)
    for i, f in enumerate(arrow.schema):
        if pa.types.is_dictionary(f.type):
            arrow = arrow.set_column(i, f.name, arrow.column(i).cast(pa.string()))
    out = pa.BufferOutputStream()
    pacsv.write_csv(arrow, out, pacsv.WriteOptions(include_header=header, quoting_style="needed"))
    return out.getvalue().to_pybytes().decode("utf-8")
