"""The run record: what the tracker writes, how ranks merge, how a killed run is recovered.

Layout of a run directory (one per job):

    run.json              job record: devices (each GPU once), energy, duration, steps, ranks, hosts, site
    samples.parquet       time series: rank, host, uuid, component, t_s, energy_j (cumulative), power_w
    ranks/rank-00000.json            one record per rank (merged into run.json)
    ranks/rank-00000.journal.jsonl   the crash-safe journal each rank writes as it goes

Every energy says how it was obtained (device ``method``, ``measured``); anything estimated or
missing is in ``notes``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

FORMAT = "footprint-run"
VERSION = 1
RANKS_DIR = "ranks"
GPU_COMPONENTS = ("gpu",)
CPU_COMPONENTS = ("cpu",)
RAM_COMPONENTS = ("dram", "ram")


def utc_iso(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).isoformat(timespec="seconds")


def rank_paths(run_dir: Path, rank: int) -> tuple[Path, Path]:
    """(record, journal) paths of one rank."""
    base = run_dir / RANKS_DIR / f"rank-{rank:05d}"
    return base.with_suffix(".json"), Path(f"{base}.journal.jsonl")


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic write: a reader never sees half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FootprintError("not found", str(path)) from None
    except ValueError as exc:
        raise FootprintError(f"not valid JSON ({exc})", str(path)) from None


def energy_summary(devices: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """{gpu_j, cpu_j, ram_j, total_j}; a component with no reading is None (not available), never 0."""
    sums: dict[str, float | None] = {"gpu_j": None, "cpu_j": None, "ram_j": None}
    for d in devices:
        comp = d.get("component", "gpu")
        key = (
            "gpu_j"
            if comp in GPU_COMPONENTS
            else "cpu_j"
            if comp in CPU_COMPONENTS
            else "ram_j"
            if comp in RAM_COMPONENTS
            else None
        )
        if key is None or d.get("energy_j") is None:
            continue
        sums[key] = (sums[key] or 0.0) + float(d["energy_j"])
    known = [v for v in sums.values() if v is not None]
    return {**sums, "total_j": sum(known) if known else None}


def merge_ranks(records: list[dict[str, Any]], name: str, site: Any = None) -> dict[str, Any]:
    """One job record from per-rank records: each GPU once, host meters once per host."""
    records = sorted(records, key=lambda r: r.get("rank", 0))
    devices: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    notes: list[str] = []
    for rec in records:
        for d in rec.get("devices", []):
            key = (d["uuid"], "" if d.get("component", "gpu") == "gpu" else rec.get("host", ""))
            if key in seen:
                notes.append(
                    f"device {d['uuid']} was measured by more than one rank; counted once (rank {rec.get('rank')} dropped)"
                )
                continue
            seen.add(key)
            devices.append({**d, "rank": rec.get("rank"), "host": rec.get("host")})
        notes += [f"rank {rec.get('rank')}: {n}" for n in rec.get("notes", [])]
    gpus = [d for d in devices if d.get("component", "gpu") == "gpu"]
    for i, d in enumerate(gpus):
        d.setdefault("job_index", i)
    starts = [r["start_unix"] for r in records if r.get("start_unix") is not None]
    ends = [r["end_unix"] for r in records if r.get("end_unix") is not None]
    duration = (max(ends) - min(starts)) if starts and ends else max((r.get("duration_s", 0) for r in records), default=0.0)
    hosts: dict[str, dict[str, Any]] = {}
    for rec in records:
        h = hosts.setdefault(rec.get("host", "?"), {"host": rec.get("host", "?"), "ranks": [], "gpus": []})
        h["ranks"].append(rec.get("rank"))
        h["gpus"] += [d["uuid"] for d in rec.get("devices", []) if d.get("component", "gpu") == "gpu"]
    world = max((r.get("world_size", 1) for r in records), default=1)
    present = {r.get("rank") for r in records}
    missing = sorted(set(range(world)) - present)
    if missing:
        notes.append(f"records of ranks {missing} are missing: their GPUs are not counted")
    steps = max((r.get("steps", 0) for r in records), default=0)
    tokens = sum(r.get("tokens", 0) or 0 for r in records)
    flops = sum(r.get("flops", 0) or 0 for r in records)
    first = records[0] if records else {}
    hw = sum(r.get("hardware_flops", 0) or 0 for r in records)
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "start_utc": utc_iso(min(starts)) if starts else None,
        "end_utc": utc_iso(max(ends)) if ends else None,
        "duration_s": duration,
        "steps": steps,
        "tokens": tokens,
        "flops": flops or None,
        "hardware_flops": hw or None,
        "flops_method": first.get("flops_method"),
        "mfu": job_mfu(records, gpus, flops, hw, duration),
        "devices": gpus + [d for d in devices if d.get("component", "gpu") != "gpu"],
        "energy": energy_summary(devices),
        "ranks": [{k: r.get(k) for k in ("rank", "local_rank", "host", "pid", "complete", "recovered")} for r in records],
        "world_size": world,
        "hosts": list(hosts.values()),
        "site": site if site is not None else first.get("site"),
        "slurm": first.get("slurm"),
        "windows": [w for r in records for w in r.get("windows", [])],
        "step_times": first.get("step_times"),
        "notes": list(dict.fromkeys(notes)),
    }


def job_mfu(
    records: list[dict[str, Any]], gpus: list[dict[str, Any]], flops: float, hw: float, duration: float
) -> dict[str, Any] | None:
    """Run MFU = the job's FLOPs over all its GPU-hours (stalls and restarts included), beside the steady state."""
    ranks = [r["mfu"] for r in records if isinstance(r.get("mfu"), dict) and r["mfu"].get("peak_tflops")]
    if not flops or not ranks or not gpus or duration <= 0:
        return None
    peak = (
        ranks[0]["peak_tflops"]
        * 1e12
        / max(1, len([d for d in records[0].get("devices", []) if d.get("component", "gpu") == "gpu"]))
    )
    gpu_seconds = duration * len(gpus)
    steady = [r["steady_state_mfu"] for r in ranks if r.get("steady_state_mfu") is not None]
    steady_h = [r["steady_state_hfu"] for r in ranks if r.get("steady_state_hfu") is not None]
    return {
        "dtype": ranks[0].get("dtype"),
        "dtype_source": ranks[0].get("dtype_source"),
        "peak_tflops_per_gpu": peak / 1e12,
        "method": ranks[0].get("method"),
        "run_mfu": flops / (gpu_seconds * peak),
        "run_hfu": (hw or flops) / (gpu_seconds * peak),
        "steady_state_mfu": sum(steady) / len(steady) if steady else None,
        "steady_state_hfu": sum(steady_h) / len(steady_h) if steady_h else None,
        "definition": "run: job FLOPs / (all GPU-hours x dense peak), stalls included; steady state: median "
        "over steps (first 10 % skipped) of step FLOPs / (step time x peak), mean over ranks",
    }


def rank_records(run_dir: Path) -> list[dict[str, Any]]:
    return [read_json(p) for p in sorted((run_dir / RANKS_DIR).glob("rank-*.json"))]


def write_samples(run_dir: Path) -> Path | None:
    """samples.parquet from every rank's journal (pandas/pyarrow are imported here, at stop, never per step)."""
    import pandas as pd

    from meters.journal import read_journal

    frames = []
    for jp in sorted((run_dir / RANKS_DIR).glob("rank-*.journal.jsonl")):
        j = read_journal(jp)
        if not j.samples:
            continue
        df = j.to_frame()
        rank = int(j.header.get("rank", jp.name.split("-")[1].split(".")[0]))
        df.insert(0, "rank", rank)
        df.insert(1, "host", j.header.get("host"))
        df["component"] = [j.devices[u].component if u in j.devices else None for u in df["uuid"]]
        t0 = j.header.get("t0", df["t_monotonic"].min())
        df["t_s"] = df["t_monotonic"] - t0
        frames.append(df.rename(columns={"energy_j_cumulative": "energy_j"}))
    if not frames:
        return None
    out = run_dir / "samples.parquet"
    cols = ["rank", "host", "uuid", "component", "t_s", "energy_j", "power_w"]
    pd.concat(frames, ignore_index=True)[cols].to_parquet(out, index=False)
    return out


def merge(run_dir: str | Path, name: str | None = None) -> dict[str, Any]:
    """`footprint merge`: write run.json + samples.parquet from the per-rank records."""
    run_dir = Path(run_dir)
    records = rank_records(run_dir)
    if not records:
        raise FootprintError(f"no per-rank records in {RANKS_DIR}/ (run `footprint recover` for a killed run)", str(run_dir))
    record = merge_ranks(records, name or records[0].get("name") or run_dir.name)
    write_json(run_dir / "run.json", record)
    write_samples(run_dir)
    return record


def recover(run_dir: str | Path) -> dict[str, Any]:
    """`footprint recover`: rebuild rank records from the journals of a killed run, then merge."""
    from meters.journal import read_journal

    run_dir = Path(run_dir)
    journals = sorted((run_dir / RANKS_DIR).glob("rank-*.journal.jsonl"))
    if not journals:
        raise FootprintError(f"no journal found under {RANKS_DIR}/: is this a run directory?", str(run_dir))
    for jp in journals:
        rec_path = Path(str(jp).replace(".journal.jsonl", ".json"))
        if rec_path.exists() and read_json(rec_path).get("complete"):
            continue
        j = read_journal(jp)
        h = j.header
        energies = j.energy_j()
        t_first = min((s.t_monotonic for s in j.samples), default=h.get("t0"))
        t_last = j.last_t if j.last_t is not None else t_first
        t0 = h.get("t0", t_first)
        duration = max((t_last or 0.0) - (t0 or 0.0), 0.0)
        progress = [e for e in j.events if e.get("kind") == "progress"]
        last = progress[-1] if progress else {}
        devices = []
        for uuid, info in j.devices.items():
            d = info.to_dict()
            d["energy_j"] = energies.get(uuid)
            d["notes"] = [*d.get("notes", []), "recovered from the journal of a killed run"]
            devices.append(d)
        start_unix = h.get("start_unix")
        rec = {
            "rank": h.get("rank", 0),
            "local_rank": h.get("local_rank", 0),
            "world_size": h.get("world_size", 1),
            "host": h.get("host"),
            "pid": h.get("pid"),
            "name": h.get("name"),
            "site": h.get("site"),
            "slurm": h.get("slurm"),
            "start_unix": start_unix,
            "end_unix": (start_unix + duration) if start_unix is not None else None,
            "duration_s": duration,
            "steps": last.get("steps", 0),
            "tokens": last.get("tokens", 0),
            "flops": last.get("flops", 0),
            "devices": devices,
            "complete": False,
            "recovered": True,
            "notes": [
                f"recovered from the journal: samples up to {duration:.1f} s after start; anything after "
                f"the last flush (at most ~1 s) is lost"
            ]
            + (["journal ended with a torn line"] if j.torn_tail else []),
        }
        write_json(rec_path, rec)
    return merge(run_dir)


def host_info() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def slurm_info() -> dict[str, str] | None:
    keys = (
        "SLURM_JOB_ID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_NODELIST",
        "SLURM_NTASKS",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_CLUSTER_NAME",
        "SLURM_JOB_PARTITION",
    )
    found = {k.removeprefix("SLURM_").lower(): os.environ[k] for k in keys if k in os.environ}
    return found or None
