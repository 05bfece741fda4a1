"""`footprint fleet import`: per-job run records and the fleet index from Prometheus/DCGM and/or SLURM.

Two passes over the telemetry, each bounded in memory by one time chunk: the first fetches the
window chunk by chunk into a spool (and notes which job labels each GPU carried and how busy each
GPU was), the second gives every interval to a job (`attribution`) and writes the series, the
per-job records and the index. Without Prometheus, the jobs come from sacct alone: GPU-hours from
the allocation, energy only where SLURM's ConsumedEnergyRaw is given a scope.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet.attribution import GAP, UNALLOCATED, Activity, Job, LabelStats, Plan, Totals, attribute
from footprint.fleet.job_rows import (
    HOST_METHOD,
    HOST_NOTE,
    NO_HOST_METER,
    JobRows,
    catalogue_id,
    coverage_note,
    type_name,
    unlabelled_note,
    unmeasured,
)
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.fleet.records import run_record
from footprint.fleet.sacct_jobs import SacctJobs
from footprint.fleet.slurm import SacctReading, SacctResult
from footprint.fleet.store import FleetWriter
from footprint.fleet.telemetry import (
    CPU,
    GPU_COUNTER,
    GPU_GAUGE,
    KIND_NAMES,
    RAM,
    Chunk,
    DcgmNames,
    Device,
    Fetcher,
    describe,
    method_name,
)

Progress = Callable[[str, int | None, int], None]  # (phase, total or None, advance)


@dataclass
class ImportOptions:
    start: float | None = None
    end: float | None = None
    prom: PromConfig | None = None
    names: DcgmNames = field(default_factory=DcgmNames)
    sacct: SacctResult | SacctReading | None = None  # a reading: joined once the server has listed its series
    site: dict[str, Any] | None = None
    gpu_types: dict[str, str] = field(default_factory=dict)  # SLURM gres type -> catalogue GPU name
    chunk_s: float = 6 * 3600
    max_gap_s: float = 300.0
    slurm_energy_scope: str | None = None  # None | "gpu" | "cpu": what ConsumedEnergyRaw measures at this site
    now: float | None = None
    keep_series: bool = True
    overwrite: bool = False
    exact: bool = False  # read every raw sample (the join of `attribution`) instead of the server's aggregation
    exact_below_s: float = 600.0  # aggregated import: jobs shorter than this from their raw samples
    max_samples: float = 5_000_000  # aggregated import: samples one request may read (the server's limit is 50 M)
    concurrency: int = 4
    records: bool | None = None  # a run.json per job (default: only with exact)


@dataclass
class ImportSummary:
    out: Path
    jobs: int
    devices: int
    gpu_energy_j: float | None
    allocated_energy_j: float | None
    unallocated_energy_j: float | None
    skipped: list[str]
    notes: list[str]


def _window(opts: ImportOptions, now: float) -> tuple[float, float]:
    start, end = opts.start, opts.end
    if start is None or end is None:
        assert not isinstance(opts.sacct, SacctReading)
        jobs = SacctJobs.of(opts.sacct.jobs if opts.sacct else [])
    if start is None:
        if not jobs:
            raise FootprintError("give --start (no sacct jobs to take the window from)", key="--start")
        start = float(jobs.column("start").min())
    if end is None:
        if not jobs:
            raise FootprintError("give --end (no sacct jobs to take the window from)", key="--end")
        end = float(np.nan_to_num(jobs.column("end"), nan=now).max())
    if end <= start:
        raise FootprintError(f"--end {_iso(end)} is not after --start {_iso(start)}", key="--end")
    return start, min(end, now) if opts.end is None else end


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (and restored as it was): an import allocates millions of small
    objects that live until it ends (answers, label sets, job tables), and every full collection walks all of
    them, an import's whole heap, again and again (a 512-GPU month: 23 s of client CPU with it, 16 s without,
    the same peak RSS). What an import builds holds no reference cycle that must be freed before it ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def import_fleet(out: str | Path, opts: ImportOptions, progress: Progress | None = None) -> ImportSummary:
    """Write a fleet directory (see `footprint.fleet.store`) from the sources in ``opts``.

    Running jobs (End=Unknown) last until ``opts.now``, else until sacct ran (a file's modification
    time), else until now; and never past the window's end.
    """
    with gc_paused():
        return _import(out, opts, progress)


def _import(out: str | Path, opts: ImportOptions, progress: Progress | None) -> ImportSummary:
    started = time.time()
    if opts.prom is None and opts.sacct is None:
        raise FootprintError("nothing to import: give a Prometheus --url, a sacct file, or both")
    later = opts.prom is not None and not opts.exact and opts.start is not None and opts.end is not None
    if not later:  # the window or the first step needs the jobs: the sacct file read now
        opts = _with_sacct(opts)
    now = _now(opts, started)  # a sacct file read later moves it: `_aggregated` asks again once it is joined
    window = _window(opts, now)  # (a window given whole does not read ``now``)
    with FleetWriter(out, opts.overwrite) as w:
        w.records = opts.exact if opts.records is None else opts.records
        if opts.prom is None:
            summary = _from_sacct(w, opts, window, now)
        elif opts.exact:
            summary = _from_prometheus(w, opts, window, now, progress)
        else:
            summary = _aggregated(w, opts, window, started, progress)
        w.close_ledger()
        w.commit()
    if opts.prom is not None and not opts.exact:
        import shutil

        shutil.rmtree(resume_dir(Path(out)), ignore_errors=True)
    summary.out = Path(out)
    return summary


def _with_sacct(opts: ImportOptions) -> ImportOptions:
    """``opts`` with the sacct file read (`SacctReading`: waited for, its error raised here)."""
    return replace(opts, sacct=opts.sacct.result()) if isinstance(opts.sacct, SacctReading) else opts


def _now(opts: ImportOptions, started: float) -> float:
    """Where running jobs end: ``opts.now``, else when sacct ran, else when the import started."""
    taken = opts.sacct.taken_at if isinstance(opts.sacct, SacctResult) else None
    return opts.now if opts.now is not None else (taken if taken is not None else started)


# ---- with telemetry ---------------------------------------------------------------------------------


def _from_prometheus(
    w: FleetWriter, opts: ImportOptions, window: tuple[float, float], now: float, progress: Progress | None
) -> ImportSummary:
    fetch = _connect(opts, window)
    client = fetch.client
    fetch.discover()
    tel = fetch.t
    stats, activity = _spool(w, fetch, window, progress)
    if not tel.devices:
        raise FootprintError("the series were found but hold no sample inside the window", key="--start")
    plan = Plan(tel, window)
    plan.build(opts.sacct.jobs if opts.sacct else None, stats, activity, now)
    totals = _attribute_spool(w, plan, opts.keep_series, progress)
    pairs = _pairs(totals)
    source = _source(opts, window)
    for j, job in enumerate(plan.jobs):
        w.add_job(_write_job(w, j, job, plan, pairs.get(j), opts, source))
    return _close(w, opts, window, plan, _gpus_table(tel.devices, totals), tel.notes + plan.notes, client_info(client), {})


def _aggregated(
    w: FleetWriter, opts: ImportOptions, window: tuple[float, float], started: float, progress: Progress | None
) -> ImportSummary:
    """The default: per-job energies evaluated by the server (`footprint.fleet.aggregate`); a sacct file still
    being read (`SacctReading`) is joined once the server has listed its series."""

    from footprint.fleet import aggregate, promql
    from footprint.fleet.summaries import Summaries

    fetch = _connect(opts, window)
    client = fetch.client
    found = aggregate.discover(client, fetch, window, opts.concurrency)
    opts = _with_sacct(opts)  # read while the server listed its series
    now = _now(opts, started)
    tel = fetch.t
    plan = Plan(tel, window)
    resume = resume_dir(w.out)
    resume.mkdir(exist_ok=True)
    ev = promql.Evaluator(
        client,
        promql.scrape_interval(client, opts.names.energy_metric + opts.names.matchers(), window[1]),
        opts.max_samples,
        opts.concurrency,
        (lambda done, total: progress("querying", total, 1)) if progress else None,
        resume,
    )
    method = "server-side increase()" if opts.names.recorded else "server-side per-series summaries (count/min/max/resets)"
    source = {**_source(opts, window), "method": method}
    try:
        unlabelled = aggregate.hosts_without_labels(found)
        curves = None
        if not opts.names.recorded:  # the counters as curves from a few grouped queries per day (`summaries`)
            sm = Summaries(client, found, window, ev.scrape_s, opts.max_gap_s, unlabelled, opts.concurrency, resume)
            curves = sm.build()
            if sm.by_increase:  # each group's first sample from increase(), no resets() (`Summaries._increase_ok`)
                source["method"] = "server-side per-series summaries (count/increase/max)"
            ev.requests += sm.stats.get("requests", 0) - sm.stats.get("reused", 0)
            ev.splits += sm.stats.get("splits", 0)
            ev.reused += sm.stats.get("reused", 0)
            found.jobs_on = aggregate.curve_spans(found, curves, sm.s, window)
            act = aggregate.curve_activity(client, found, curves, window, unlabelled)
        else:
            act = aggregate.activity(client, found, window, unlabelled)
        plan.build(opts.sacct.jobs if opts.sacct else None, found.jobs_on, act, now)
        if curves is None:
            aggregate.refine_label_jobs(plan, found, ev)
        e, chunks = aggregate.evaluate(client, plan, found, ev, opts.exact_below_s, curves=curves)
        rows = JobRows(plan, opts.gpu_types, opts.site)
        for jobs, part in chunks:  # a chunk of jobs evaluated, written and dropped
            _write_chunk(w, plan, jobs, part, opts, source, rows)
    except FootprintError as exc:
        kept = sum(1 for _ in resume.glob("*.json"))
        if not kept:
            raise
        more = f" ({kept} answers kept in {resume}: the same command resumes from them)"
        raise type(exc)(exc.detail + more, exc.file, exc.key) from None
    agg = {"requests": ev.requests, "reused": ev.reused, "splits": ev.splits, "scrape_s": ev.scrape_s}
    if curves is not None:
        agg["raw_bins"] = curves.raw_bins
        agg["first_sample"] = "increase" if sm.by_increase else "min"
    if e.by_activity:
        plan.notes.append(
            f"{e.by_activity} stretch(es) of a GPU shared by jobs on MIG instances split by the instances' activity "
            f"({opts.names.activity_metric}); other shared stretches evenly"
        )
    prom = {**client_info(client), "aggregation": agg}
    if client.warnings:
        meta_notes = [f"the server answered with warnings (partial data?): {'; '.join(client.warnings[:5])}"]
        agg["partial"] = True
    else:
        meta_notes = []
    notes = meta_notes + tel.notes + plan.notes
    extra = {"method": "aggregated", "partial": bool(client.warnings)}
    return _close(w, opts, window, plan, aggregate.gpu_rows(found, plan, e), notes, prom, extra)


def _connect(opts: ImportOptions, window: tuple[float, float]) -> Fetcher:
    """The server's client and the series fetcher over the window (both imports start here)."""
    assert opts.prom is not None
    return Fetcher(PrometheusClient(opts.prom), opts.names, window[0], window[1], opts.chunk_s, opts.max_gap_s)


def _source(opts: ImportOptions, window: tuple[float, float]) -> dict[str, Any]:
    assert opts.prom is not None
    return {"prometheus": opts.prom.url, "window": [_iso(window[0]), _iso(window[1])]}


def _close(
    w: FleetWriter,
    opts: ImportOptions,
    window: tuple[float, float],
    plan: Plan,
    gpus: Any,
    notes: list[str],
    prom: dict[str, Any],
    extra: dict[str, Any],
) -> ImportSummary:
    """gpus.parquet and fleet.json written; the summary of an import with telemetry."""
    gpus.to_parquet(w.path("gpus.parquet"), index=False)
    meta = _meta(opts, window, len(plan.jobs), notes, prom)
    meta["telemetry"] = t = _telemetry_meta(gpus, plan)
    meta.update(extra)
    w.write_meta(meta)
    total, alloc = t["gpu_energy_j"], t["allocated_energy_j"]
    n = len(plan.tel.devices)
    return ImportSummary(w.out, len(plan.jobs), n, total, alloc, total - alloc, meta["skipped"], meta["notes"])


def _write_chunk(
    w: FleetWriter, plan: Plan, jobs: range, e: Any, opts: ImportOptions, source: dict[str, Any], rows: JobRows
) -> None:
    """The ledger rows (or run records, when asked) of these jobs, from their evaluated energies."""
    import pandas as pd

    for j in sorted(e.exact_jobs):
        if j in jobs:
            plan.jobs[j].note(f"shorter than {opts.exact_below_s:g} s: energy from its raw samples (counter read at the edges)")
    if w.records:  # the full run record, through the tracker's writer (slow: only when asked)
        by_job: dict[int, list[tuple[int, float, float]]] = {}
        for (j, dev), v in sorted(e.pair_j.items()):
            by_job.setdefault(j, []).append((dev, v, e.pair_s.get((j, dev), 0.0)))
        for j in jobs:
            pairs = pd.DataFrame(by_job[j], columns=["dev", "energy_j", "seconds"]) if j in by_job else None
            w.add_job(_write_job(w, j, plan.jobs[j], plan, pairs, opts, source))
    else:  # the ledger's and job_gpus' columns for the whole chunk (`job_rows`)
        ledger, devices = rows.columns(jobs, e.pair_j, e.pair_s)
        w.add_jobs_columns(ledger)
        w.add_devices_columns(devices)
    for j in jobs:
        plan.jobs.notes.pop(j, None)  # written: its notes are no longer held


def resume_dir(out: Path) -> Path:
    """Where an aggregated import keeps the server's answers until it succeeds (beside the output, hidden)."""
    return out.parent / f".{out.name}.resume"


def _spool(w: FleetWriter, fetch: Fetcher, window: tuple[float, float], progress: Progress | None) -> tuple[LabelStats, Activity]:
    """Pass 1: fetch chunk by chunk into spool/ (parquet), noting job labels and GPU activity on the way."""
    import pandas as pd

    spool = w.path("spool")
    spool.mkdir()
    stats, activity = LabelStats(), Activity(*window)
    n = len(fetch.chunk_bounds())
    if progress:
        progress("fetching", n, 0)
    for i, c in enumerate(fetch.chunks(lambda k: progress("fetching", n, k) if progress else None)):
        gpu = np.array([d.kind in (GPU_COUNTER, GPU_GAUGE) for d in fetch.t.devices], bool)
        if len(c.t0):
            stats.add(c, gpu)
            activity.add(c, gpu)
            pd.DataFrame(c.__dict__).to_parquet(spool / f"{i:05d}.parquet", index=False)
    return stats, activity


def _attribute_spool(w: FleetWriter, plan: Plan, keep_series: bool, progress: Progress | None) -> Totals:
    """Pass 2: every spooled chunk through the join; the series written, the spool removed."""
    import pandas as pd

    spool = w.path("spool")
    totals = Totals(len(plan.tel.devices))
    parts = sorted(spool.glob("*.parquet"))
    if progress:
        progress("attributing", len(parts), 0)
    keys = np.array([j.key for j in plan.jobs] + ["(gap)", "(unallocated)"], dtype=object)
    for p in parts:
        df = pd.read_parquet(p)
        rows = attribute(Chunk(*(df[f].to_numpy() for f in ("dev", "t0", "t1", "energy_j", "lab0", "lab1", "gap"))), plan, totals)
        if keep_series:
            rows["job_id"] = pd.Categorical(keys[rows["job"]])
            w.write_series(rows)
        p.unlink()
        if progress:
            progress("attributing", len(parts), 1)
    spool.rmdir()
    return totals


def _telemetry_meta(gpus: Any, plan: Plan) -> dict[str, Any]:
    """fleet.json's telemetry block: what the GPUs measured, what jobs held, the unallocated share."""
    g = gpus[gpus["component"] == "gpu"]
    total, alloc, gap = (float(g[c].sum()) for c in ("energy_j", "allocated_energy_j", "gap_energy_j"))
    seconds, alloc_s = float(g["seconds"].sum()), float(g["allocated_seconds"].sum())
    return {
        "queries": plan.tel.queries,
        "devices": len(plan.tel.devices),
        "gpus": len(g),
        "labelled_nodes": sorted(plan.labelled_hosts),
        "unlabelled_nodes": sorted(set(plan.host_gpus) - plan.labelled_hosts),
        "gpu_energy_j": total,
        "allocated_energy_j": alloc,
        "gap_energy_j": gap,
        "unallocated_energy_j": total - alloc - gap,
        "gpu_seconds": seconds,
        "allocated_gpu_seconds": alloc_s,
        "unallocated_share_energy": (total - alloc) / total if total > 0 else None,
        "unallocated_share_time": 1 - alloc_s / seconds if seconds > 0 else None,
        "resets": int(g["resets"].sum()),
    }


def client_info(client: PrometheusClient) -> dict[str, Any]:
    try:
        info = client.buildinfo()
    except FootprintError:
        info = {}
    return {"url": client.base, "version": info.get("version"), "requests": client.requests}


def _pairs(totals: Totals) -> dict[int, Any]:
    import pandas as pd

    if not totals.pairs:
        return {}
    df = pd.concat(totals.pairs, ignore_index=True).groupby(["job", "dev"], sort=True).sum().reset_index()
    return {int(j): g for j, g in df.groupby("job", sort=False)}


def _gpus_table(devices: list[Device], t: Totals) -> Any:
    import pandas as pd

    rows = []
    for d in devices:
        r = describe(d)
        r["component"] = "gpu" if d.kind in (GPU_COUNTER, GPU_GAUGE) else KIND_NAMES[d.kind]
        r.update(
            energy_j=float(t.dev_energy[d.id]),
            seconds=float(t.dev_seconds[d.id]),
            allocated_energy_j=float(t.dev_alloc_energy[d.id]),
            allocated_seconds=float(t.dev_alloc_seconds[d.id]),
            gap_energy_j=float(t.dev_gap_energy[d.id]),
            unallocated_energy_j=float(t.dev_energy[d.id] - t.dev_alloc_energy[d.id] - t.dev_gap_energy[d.id]),
            first_seen=_iso(d.first_t) if math.isfinite(d.first_t) else None,
            last_seen=_iso(d.last_t) if math.isfinite(d.last_t) else None,
        )
        rows.append(r)
    return pd.DataFrame(rows)


def _device_notes(d: Device, job: Job, max_gap_s: float) -> list[str]:
    notes = []
    name = _gpu_label(d)
    if d.last_t < job.end - max_gap_s:
        notes.append(f"{name} stopped reporting at {_iso(d.last_t)}, before the job's end: energy after that is not measured")
    if d.first_t > job.start + max_gap_s:
        notes.append(f"{name} started reporting at {_iso(d.first_t)}, after the job's start: energy before that is not measured")
    resets = [t for t in d.reset_times if job.start <= t <= job.end]
    if resets:
        notes.append(
            f"{name}: energy counter reset {len(resets)} time(s) during the job (driver reload?): counted from the new "
            "value as PromQL increase() does; the energy between the last sample and the reset is lost"
        )
    return notes


def _write_job(
    w: FleetWriter, j: int, job: Job, plan: Plan, pairs: Any, opts: ImportOptions, source: dict[str, Any]
) -> dict[str, Any]:
    devs = plan.tel.devices
    devices: list[dict[str, Any]] = []
    notes = list(job.notes)
    gpu_seconds = 0.0
    per_host: dict[str, int] = {}
    cpu: dict[tuple[str, int], float] = {}
    if pairs is not None:
        for dev, e, s in zip(pairs["dev"].tolist(), pairs["energy_j"].tolist(), pairs["seconds"].tolist(), strict=True):
            d = devs[dev]
            if d.kind in (CPU, RAM):
                cpu[(d.host, d.kind)] = cpu.get((d.host, d.kind), 0.0) + e
                continue
            gpu_seconds += s
            per_host[d.host] = per_host.get(d.host, 0) + 1
            name = d.model or type_name(job.types_by_host.get(d.host), opts.gpu_types) or "unknown GPU"
            devices.append({**_gpu_device(d, name, e, s), "notes": _device_notes(d, job, opts.max_gap_s)})
            notes += [n for n in devices[-1]["notes"]]
    for host, k in job.gpus_by_host.items():
        missing = k - per_host.get(host, 0)
        if missing > 0:
            model = next((d.model for d in plan.host_gpus.get(host, []) if d.model), None)
            name = model or type_name(job.types_by_host.get(host), opts.gpu_types) or "unknown GPU"
            devices += [unmeasured(job.key, host, i, name) for i in range(missing)]
            if host in plan.labelled_hosts:
                notes.append(unlabelled_note(host, k, per_host.get(host, 0)))
    for (host, kind), e in sorted(cpu.items()):
        devices.append(
            {
                "uuid": f"{host}:{KIND_NAMES[kind]}",
                "name": f"{host} {KIND_NAMES[kind].upper()} (node meter)",
                "host": host,
                "component": KIND_NAMES[kind],
                "method": HOST_METHOD,
                "measured": True,
                "energy_j": e,
                "notes": [HOST_NOTE],
            }
        )
    if not cpu:
        notes.append(NO_HOST_METER)
    allocated = job.duration_s * job.gpu_count
    coverage = gpu_seconds / allocated if allocated > 0 else None
    if coverage is not None and coverage < 0.99:
        notes.append(coverage_note(coverage))
    methods = sorted({d["method"] for d in devices if d["component"] == "gpu" and d["measured"]})
    return _finish(
        w, job, devices, notes, coverage, "+".join(methods) or "none", opts, {**source, "gpu_seconds_measured": gpu_seconds}
    )


def _index_row(
    job: Job,
    opts: ImportOptions,
    gpu_count: int,
    gpu_name: str | None,
    energy: dict[str, float | None],
    method: str,
    coverage: float | None,
    run_dir: str | None,
    notes: list[str],
) -> dict[str, Any]:
    """The job's ledger row (`store.INDEX_COLUMNS` less those the writer derives) from its energies
    (``energy``: `runrecord.energy_summary`'s keys)."""
    sj = job.slurm
    return {
        "job_id": job.key,
        "name": (sj.name if sj and sj.name else None) or job.key,
        "user": sj.user if sj else None,
        "account": (sj.account if sj else None) or (job.key.split("/")[0] if "/" in job.key else None),
        "partition": sj.partition if sj else None,
        "state": sj.state if sj else None,
        "source": job.source,
        "start": job.start,
        "end": job.end,
        "duration_s": job.duration_s,
        "gpu_count": gpu_count,
        "gpu_name": gpu_name,
        "gpu_model": catalogue_id(gpu_name),
        "nodes": ",".join(job.gpus_by_host) or None,
        "gpu_energy_j": energy["gpu_j"],
        "cpu_energy_j": energy["cpu_j"],
        "ram_energy_j": energy["ram_j"],
        "energy_j": energy["total_j"],
        "energy_method": method if energy["total_j"] is not None else "none",
        "coverage": coverage,
        "grid": (opts.site or {}).get("grid"),
        "pue": (opts.site or {}).get("pue"),
        "run_dir": run_dir,
        "notes": "; ".join(notes) or None,
    }


def _gpu_device(d: Device, name: str, e: float, sec: float) -> dict[str, Any]:
    return {
        "uuid": d.uuid or f"{d.host}:gpu{d.gpu_index}",
        "name": name,
        "index": d.gpu_index,
        "host": d.host,
        "component": "gpu",
        "method": method_name(d),
        "measured": True,
        "energy_j": e,
        "duration_s": sec,
    }


def _finish(
    w: FleetWriter,
    job: Job,
    devices: list[dict[str, Any]],
    notes: list[str],
    coverage: float | None,
    method: str,
    opts: ImportOptions,
    telemetry: dict[str, Any] | None,
) -> dict[str, Any]:
    """Write the job's run record and return its index row."""
    from footprint.lca.workload import run_scenario

    sj = job.slurm
    record = run_record(
        name=(sj.name if sj and sj.name else None) or job.key,
        job_id=job.key,
        imported_from="+".join(p for p in ("prometheus-dcgm" if telemetry else "", "slurm" if sj else "") if p),
        start=job.start,
        end=job.end,
        duration_s=job.duration_s,
        devices=devices,
        site=dict(opts.site) if opts.site else None,
        slurm=_slurm_block(job) if sj else None,
        telemetry={**telemetry, "coverage": coverage, "method": method} if telemetry else None,
        notes=notes,
    )
    rel = w.write_record(job.key, record) if w.records else None
    w.add_job_devices(job.key, devices)
    gpus = sum(1 for d in devices if d["component"] == "gpu")
    gpu_name = run_scenario(record)["hardware"].get("gpu")
    return _index_row(job, opts, gpus, gpu_name, record["energy"], method, coverage, rel, record["notes"])


def _slurm_block(job: Job) -> dict[str, Any]:
    sj = job.slurm
    assert sj is not None
    return {
        "job_id": sj.job_id,
        "raw_id": sj.raw_id,
        "user": sj.user,
        "account": sj.account,
        "partition": sj.partition,
        "state": sj.state,
        "start_utc": _iso(sj.start),
        "end_utc": _iso(sj.end) if sj.end else None,
        "elapsed_s": sj.elapsed_s,
        "nodes": sj.nodes,
        "gpus": sj.gpu_count,
        "gpu_types": {h: t for h, t in job.types_by_host.items() if t},
        "consumed_energy_j": sj.consumed_energy_j,
        "consumed_energy_from": sj.consumed_energy_from,
        "line": sj.line,
    }


def _meta(
    opts: ImportOptions, window: tuple[float, float], n_jobs: int, notes: list[str], prom: dict[str, Any] | None
) -> dict[str, Any]:
    from footprint import __version__

    sacct = opts.sacct
    return {
        "created_utc": _iso(time.time()),
        "footprint_version": __version__,
        "window": {"start": _iso(window[0]), "end": _iso(window[1]), "start_unix": window[0], "end_unix": window[1]},
        "site": opts.site,
        "jobs": n_jobs,
        "sources": {
            "prometheus": prom,
            "dcgm_names": {k: v for k, v in opts.names.__dict__.items()},
            "sacct": {"source": sacct.source, "fields": list(sacct.fields), "jobs": len(sacct.jobs)} if sacct else None,
            "slurm_energy_scope": opts.slurm_energy_scope,
        },
        "skipped": list(sacct.skipped) if sacct else [],
        "notes": list(dict.fromkeys(notes)),
    }


# ---- sacct alone --------------------------------------------------------------------------------------


def _from_sacct(w: FleetWriter, opts: ImportOptions, window: tuple[float, float], now: float) -> ImportSummary:
    from footprint.fleet.telemetry import Telemetry

    assert opts.sacct is not None
    plan = Plan(Telemetry(), window)
    plan.build(opts.sacct.jobs, LabelStats(), Activity(*window), now)
    for job in plan.jobs:
        sj = job.slurm
        assert sj is not None
        notes = list(job.notes)
        devices = []
        for host, k in job.gpus_by_host.items():
            name = type_name(job.types_by_host.get(host), opts.gpu_types) or "unknown GPU"
            devices += [unmeasured(job.key, host, i, name) for i in range(k)]
        method = "none"
        energy = sj.consumed_energy_j
        if energy is not None and opts.slurm_energy_scope:
            share = min(job.duration_s / max((sj.end or now) - sj.start, 1e-9), 1.0)
            energy *= share
            if opts.slurm_energy_scope == "gpu":
                for d in devices:
                    d.update(energy_j=energy / len(devices), measured=True, method="slurm ConsumedEnergyRaw")
                    d["notes"] = ["SLURM's ConsumedEnergyRaw (GPU energy plugin), split evenly over the job's GPUs"]
            else:
                devices.append(
                    {
                        "uuid": f"slurm:{job.key}:cpu",
                        "name": "host CPU (SLURM energy plugin)",
                        "component": "cpu",
                        "method": "slurm ConsumedEnergyRaw",
                        "measured": True,
                        "energy_j": energy,
                        "notes": ["SLURM's ConsumedEnergyRaw declared as CPU energy (--slurm-energy-scope cpu)"],
                    }
                )
            method = f"slurm ConsumedEnergyRaw ({opts.slurm_energy_scope})"
            notes.append(
                f"energy from SLURM's ConsumedEnergyRaw ({sj.consumed_energy_from}), declared as {opts.slurm_energy_scope} "
                "energy; sacct(1): it reflects the job's real consumption only for an exclusive allocation"
                + ("" if share >= 0.999 else f"; scaled by {share:.0%}, the part of the job inside the window")
            )
        elif energy is not None:
            notes.append(
                f"SLURM recorded ConsumedEnergyRaw = {energy:g} J, whose scope (node, CPU or GPU) depends on the site's "
                "AcctGatherEnergyType: not used; pass --slurm-energy-scope gpu|cpu to use it"
            )
            method = "none"
        if method == "none":
            notes.append("no energy measured for this job (no telemetry): GPU-hours only; `footprint assess` needs an energy")
        w.add_job(_finish(w, job, devices, notes, None, method, opts, None))
    meta = _meta(opts, window, len(plan.jobs), plan.notes, None)
    w.write_meta(meta)
    return ImportSummary(w.out, len(plan.jobs), 0, None, None, None, meta["skipped"], meta["notes"])


def _iso(t: float | None) -> str:
    return "?" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpu_label(d: Device) -> str:
    return f"{d.host}:gpu{d.gpu_index}" if d.gpu_index is not None else d.key


__all__ = ["GAP", "UNALLOCATED", "ImportOptions", "ImportSummary", "import_fleet"]
