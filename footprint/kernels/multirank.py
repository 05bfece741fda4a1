"""Several ranks' traces analysed together: per-rank step time, the straggler, communication overlap, energy.

A distributed job writes one PyTorch profiler trace per rank (a directory, or a tar archive of them).
Each is analysed by `analysis.analyze_trace` on its own (the same conventions as one trace; in worker
processes, one per idle core, when there are several), keeping only a row of figures per rank, so memory
does not grow with the number of ranks. The
figures follow Holistic Trace Analysis (HTA), which is the reference for multi-rank traces:

- temporal breakdown (HTA's `get_temporal_breakdown`): over the GPU span (first start to last end),
  idle = span - busy, compute = union of computation kernels, non-compute = the rest (communication
  and memory copies not hidden under computation);
- communication/computation overlap (HTA's `get_comm_comp_overlap`): the share of communication time
  that runs while a computation kernel runs = 1 - exposed communication / communication;
- step time: the mean wall time of each rank's profiler steps that `--steps` selects;
- straggler: the rank that spends the least time in communication kernels — in a synchronous
  collective the last rank to arrive waits least while the others wait for it (HTA's signal: its
  communication kernels start late); the two such ranks are the candidates, as HTA's
  `get_potential_stragglers(num_candidates=2)`; the slowest step is reported beside it (without
  communication kernels it is the straggler);
- energy per rank: `--power RUN_DIR` attributes the run's samples of each rank's GPU (matched by the
  trace's device index) to that rank's trace window, as for one trace; without it, null.

Imports kernels' analysis, parallel (the worker count) and render; the catalogue from footprint.lca.
"""

from __future__ import annotations

import multiprocessing
import re
import statistics
import tarfile
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.analysis import analyze_trace
from footprint.kernels.parallel import can_fork, workers
from footprint.kernels.render import format_us

TRACE_NAME = re.compile(r"\.json(\.gz)?$")
RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_.]?(\d+)", re.I)
MAX_RANKS = 4096

DEFINITIONS = {
    "step_time_us": "mean wall time (CPU ProfilerStep span) of the rank's steps chosen by --steps",
    "temporal_breakdown": "HTA's get_temporal_breakdown: over the GPU span (first start to last end), idle = span - "
    "busy, compute = union of computation kernels, non_compute = span - idle - compute",
    "comm_comp_overlap": "HTA's get_comm_comp_overlap: communication time overlapped by computation / communication "
    "time = 1 - exposed communication / communication",
    "straggler": "the rank with the least time in communication kernels: the last to arrive at a synchronous "
    "collective waits least, the others wait for it (HTA's straggler signal: late-starting communication); "
    "candidates = the two such ranks (HTA's num_candidates=2); the slowest step is reported beside it",
    "energy_j": "the run's GPU energy in the rank's trace window, attributed as for one trace (--power); null without",
}


def rank_sources(target: str | Path) -> list[str]:
    """The per-rank traces of a directory (its .json/.json.gz files) or of a tar archive (ARCHIVE::MEMBER)."""
    path = Path(target)
    if path.is_dir():
        files = sorted(str(p) for p in path.iterdir() if p.is_file() and TRACE_NAME.search(p.name))
        if not files:
            raise FootprintError("no .json or .json.gz traces in this directory (one per rank expected)", str(path))
    elif path.is_file() and tarfile.is_tarfile(path):
        try:
            with tarfile.open(path, "r:*") as tf:
                names = sorted(m.name for m in tf.getmembers() if m.isfile() and TRACE_NAME.search(m.name))
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise FootprintError(f"cannot read the archive ({exc})", str(path)) from None
        if not names:
            raise FootprintError("the archive holds no .json trace", str(path))
        files = [f"{path}::{n}" for n in names]
    elif path.exists():
        raise FootprintError("--ranks expects a directory of per-rank traces or a tar archive of them", str(path))
    else:
        raise FootprintError("not found", str(path))
    if len(files) > MAX_RANKS:
        raise FootprintError(f"{len(files):,} traces: more than {MAX_RANKS:,} ranks is not supported", str(path))
    return files


def _rank_of(source: str, r: dict[str, Any]) -> int | None:
    dist = r["trace"].get("distributed")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    if type(rank) is int and 0 <= rank < 1 << 31:
        return rank
    m = RANK_IN_NAME.search(source.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _row(source: str, r: dict[str, Any]) -> dict[str, Any]:
    """One rank's figures from its analysis (see the module docstring for their definitions)."""
    summary = (r.get("steps") or {}).get("summary") or {}
    tl = r.get("timeline") or {}
    span, idle = r["total_time_us"], r["idle_time_us"]
    compute, comm, exposed = tl.get("computation_us"), tl.get("total_communication_us"), tl.get("exposed_communication_us")
    non_compute = span - idle - compute if compute is not None and span else None
    power = r.get("power") or {}
    return {
        "rank": None,
        "source": r["trace"]["source"],
        "path": source,
        "device": (r.get("device") or {}).get("name"),
        "steps": summary.get("count"),
        "step_time_us": summary.get("wall_us"),
        "step_time_us_min": summary.get("wall_us_min"),
        "step_time_us_max": summary.get("wall_us_max"),
        "gpu_span_us": span,
        "gpu_busy_us": r["busy_time_us"],
        "gpu_idle_us": idle,
        "compute_us": compute,
        "non_compute_us": non_compute,
        "communication_us": comm,
        "exposed_communication_us": exposed,
        "comm_comp_overlap": 1 - exposed / comm if comm and exposed is not None else None,
        "temporal_breakdown": {
            "idle_pct": _pct(_share(idle, span)),
            "compute_pct": _pct(_share(compute, span)),
            "non_compute_pct": _pct(_share(non_compute, span)),
        },
        "mfu": summary.get("mfu"),
        "energy_j": power.get("energy_in_trace_window_j"),
        "mean_power_w": power.get("mean_power_in_window_w"),
        "events": r["trace"]["events"],
        "warnings": r["warnings"],
    }


def _pct(share: float | None) -> float | None:
    return None if share is None else round(100 * share, 2)


def _assign_ranks(rows: list[dict[str, Any]], found: list[int | None], warnings: list[str]) -> None:
    """Ranks from the traces (distributedInfo, else the file name); the file order where those are missing or repeat."""
    if None in found or len(set(found)) != len(found):
        warnings.append(
            "rank numbers missing or repeated in the traces' distributedInfo and file names: ranks are numbered in file order"
        )
        found = list(range(len(rows)))
    for row, rank in zip(rows, found, strict=True):
        row["rank"] = rank
    rows.sort(key=lambda x: x["rank"])


def _straggler(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank the others wait for: least time in communication kernels (HTA's signal), else the slowest step."""
    timed = [x for x in rows if x["step_time_us"] is not None]
    slow = max(timed, key=lambda x: x["step_time_us"]) if len(timed) >= 2 else None
    med_step = statistics.median(x["step_time_us"] for x in timed) if slow else None
    comm = sorted((x for x in rows if x["communication_us"]), key=lambda x: x["communication_us"])
    if len(comm) >= 2:
        med = statistics.median(x["communication_us"] for x in comm)
        pick, basis = comm[0], "least communication time: the others wait for it in their collectives"
        waited = med - pick["communication_us"]
    elif slow is not None:
        pick, basis, waited = slow, "longest step time (no communication kernels in the traces)", None
    else:
        return None
    return {
        "rank": pick["rank"],
        "basis": basis,
        "candidates": [x["rank"] for x in comm[:2]] if len(comm) >= 2 else [pick["rank"]],
        "communication_us": pick["communication_us"],
        "others_wait_us_median": waited,
        "slowest_step_rank": slow["rank"] if slow else None,
        "slowest_step_us": slow["step_time_us"] if slow else None,
        "slowest_step_over_median_pct": round(100 * (slow["step_time_us"] / med_step - 1), 2) if slow and med_step else None,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(key: str) -> dict[str, float] | None:
        values = [x[key] for x in rows if x[key] is not None]
        if not values:
            return None
        return {"min": min(values), "median": statistics.median(values), "max": max(values)}

    energies = [x["energy_j"] for x in rows]
    return {
        "ranks": len(rows),
        "step_time_us": spread("step_time_us"),
        "gpu_busy_us": spread("gpu_busy_us"),
        "comm_comp_overlap": spread("comm_comp_overlap"),
        "mfu": spread("mfu"),
        "energy_j": sum(energies) if energies and None not in energies else None,
        "energy_note": None if None not in energies else "not available: give --power RUN_DIR (the run's GPU samples)",
    }


def _one_rank(job: tuple[str, Any, Any, int, dict[str, Any]]) -> tuple[dict[str, Any], int | None] | str:
    """One rank's row and number, or the one-line reason it could not be read."""
    source, power, steps, top, options = job
    try:
        r = analyze_trace(source, power=power, top=top, steps=steps, **options)
    except FootprintError as exc:
        return str(exc)
    return _row(source, r), _rank_of(source, r)


def _each_rank(jobs: list[tuple[str, Any, Any, int, dict[str, Any]]]) -> list[Any]:
    """`_one_rank` over the ranks: in worker processes, one per idle core, when there are several of both."""
    n = min(workers(), len(jobs))
    if n < 2 or not can_fork():
        return [_one_rank(j) for j in jobs]
    from footprint.lca.database import db

    db().gpus  # noqa: B018 - loaded once here, inherited by every worker through the fork
    with multiprocessing.get_context("fork").Pool(n) as pool:
        return pool.map(_one_rank, jobs, chunksize=1)


def analyze_ranks(
    target: str | Path, power: str | Path | None = None, steps: str | int = "steady", top: int = 0, **options: Any
) -> dict[str, Any]:
    """Every rank's trace in `target` (a directory or a tar archive), each analysed on its own (in worker
    processes when cores are idle); see the module docstring. `options` go to `analyze_trace` for every rank."""
    sources = rank_sources(target)
    rows, found, warnings = [], [], []
    for got in _each_rank([(s, power, steps, top, options) for s in sources]):
        if isinstance(got, str):  # one unreadable rank: the others are still analysed, and it is said
            warnings.append(f"left out, unreadable: {got}")
            continue
        rows.append(got[0])
        found.append(got[1])
    if not rows:
        analyze_trace(sources[0], power=power, top=top, steps=steps, **options)  # raises the first rank's error
        raise FootprintError("no rank's trace could be read", str(target))
    _assign_ranks(rows, found, warnings)
    devices = {x["device"] for x in rows}
    if len(devices) > 1:
        warnings.append(f"the ranks ran on different GPU models ({', '.join(sorted(map(str, devices)))})")
    if any(x["step_time_us"] is None for x in rows):
        warnings.append("some ranks have no ProfilerStep spans: their step time is not available")
    return {
        "target": str(target),
        "steps_choice": str(steps),
        "ranks": rows,
        "summary": _summary(rows),
        "straggler": _straggler(rows),
        "definitions": DEFINITIONS,
        "warnings": warnings,
    }


def _fmt(v: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}{unit}"


def render_ranks(result: dict[str, Any]) -> str:
    """The text table of `analyze_ranks`."""
    rows = result["ranks"]
    head = ["Rank", "Steps", "Step time", "GPU busy", "Idle", "Compute", "Non-comp.", "Comm.", "Overlap", "MFU", "Energy"]
    body = [
        [
            str(x["rank"]),
            _fmt(x["steps"], digits=0),
            format_us(x["step_time_us"]),
            format_us(x["gpu_busy_us"]),
            _fmt(x["temporal_breakdown"]["idle_pct"], "%"),
            _fmt(x["temporal_breakdown"]["compute_pct"], "%"),
            _fmt(x["temporal_breakdown"]["non_compute_pct"], "%"),
            format_us(x["communication_us"]),
            _fmt(None if x["comm_comp_overlap"] is None else 100 * x["comm_comp_overlap"], "%"),
            _fmt(None if x["mfu"] is None else 100 * x["mfu"], "%", 2),
            _fmt(x["energy_j"], " J"),
        ]
        for x in rows
    ]
    widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
    lines = [f"Ranks: {len(rows)} traces in {result['target']} (steps: {result['steps_choice']})"]
    lines += [
        "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) for cells in [head, ["-" * w for w in widths], *body]
    ]
    s, st = result["summary"], result["straggler"]
    if s["step_time_us"]:
        t = s["step_time_us"]
        lines.append(
            f"Step time across ranks: median {format_us(t['median'])} (min {format_us(t['min'])}, max {format_us(t['max'])})"
        )
    if st:
        lines.append(f"Straggler: rank {st['rank']} ({st['basis']}); candidates {', '.join(map(str, st['candidates']))}")
        if st["others_wait_us_median"] is not None:
            lines.append(
                f"  its communication {format_us(st['communication_us'])}, the median rank's "
                f"{format_us(st['communication_us'] + st['others_wait_us_median'])}"
            )
        if st["slowest_step_rank"] is not None:
            lines.append(
                f"  slowest step: rank {st['slowest_step_rank']}, {format_us(st['slowest_step_us'])}, "
                f"{_fmt(st['slowest_step_over_median_pct'], '%')} over the median rank"
            )
    lines.append(
        f"Energy, all ranks: {_fmt(s['energy_j'], ' J')}" if s["energy_j"] is not None else f"Energy: {s['energy_note']}"
    )
    lines.append(
        "Idle, compute, non-compute: HTA's temporal breakdown over each rank's GPU span; overlap: HTA's comm/comp overlap"
    )
    for w in result["warnings"]:
        lines.append(f"warning: {w}")
    seen: dict[str, list[int]] = {}
    for x in rows:
        for w in x["warnings"]:
            seen.setdefault(w, []).append(x["rank"])
    for w, ranks in seen.items():
        lines.append(f"warning (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}): {w}")
    return "\n".join(lines) + "\n"
