"""`analyze_trace`: one trace in, the whole-trace figures, the per-step figures and (with a run) energy out.

Order of work: read the trace once (`reader`), pick the device the kernels ran on, link each GPU event
to the op that launched it (`linking`), classify events once (`gpu.Classified`), then aggregate the
whole trace and each profiler step with the same code (`gpu.aggregate`), so a step's figures equal the
whole-trace figures of a trace that holds only that step's events. A trace without GPU events gets
the CPU operator analysis (`cpu`) instead. Energy attribution (`energy`) comes last.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from footprint.kernels import cpu as cpu_ops
from footprint.kernels.energy import MissingEnergy, attribute, attribute_energy
from footprint.kernels.gpu import (
    CONVENTIONS,
    TIMELINE_DEFINITION,
    Classified,
    Device,
    aggregate,
    median,
)
from footprint.kernels.linking import CARRIED_OVER, UNLINKED, ModelResolver, link, partition
from footprint.kernels.opmodels import CATEGORIES, KERNEL, MATRIX_CATEGORIES
from footprint.kernels.parallel import read_trace
from footprint.kernels.reader import Scan
from footprint.kernels.render import format_us
from footprint.kernels.steps import StepIndex, parse_choice, select, spans


def _pick_device(s: Scan, warnings: list[str]) -> tuple[Any, dict[str, Any] | None, list[dict[str, Any]]]:
    dev_time: dict[Any, float] = defaultdict(float)
    for g in s.gpu:
        try:
            dev_time[g[2]] += g[1]
        except TypeError:  # an unhashable device id
            continue
    props_list = s.meta.get("deviceProperties") if isinstance(s.meta.get("deviceProperties"), list) else []
    if not dev_time:
        warnings.append(
            "the trace has no GPU kernels, memcpy or memset events (a CPU-only profile?): CPU operators analysed instead"
        )
        return None, None, props_list
    device_index = max(dev_time, key=lambda d: dev_time[d])
    others = {d: t for d, t in dev_time.items() if d != device_index}
    if others:
        n_other = sum(1 for g in s.gpu if g[2] != device_index)
        warnings.append(
            f"{n_other:,} GPU events on other devices ({', '.join(map(str, sorted(others, key=str)))}) "
            f"are left out: device {device_index} is analysed (analyse one device at a time)"
        )
    props = next((p for p in props_list if isinstance(p, dict) and p.get("id") == device_index), None)
    if props is None:
        warnings.append(
            "the trace has no deviceProperties entry for the kernels' device: the GPU model is unknown, peaks are not available"
            if not props_list
            else f"no deviceProperties entry has id {device_index} (the kernels' device): the GPU model is "
            f"unknown, peaks are not available"
        )
    return device_index, props, props_list


def _step_row(k: int, span: tuple[float, float, str], agg: dict[str, Any], n_events: int, peak: float | None) -> dict[str, Any]:
    tl, sm, cats = agg["timeline"], agg["summary"], agg["by_category"]
    wall = span[1] - span[0]
    f = sm["matrix_flops"]
    return {
        "index": k + 1,
        "name": span[2],
        "start_us": span[0],
        "wall_us": wall,
        "gpu_events": n_events,
        "busy_time_us": tl["busy"],
        "idle_time_us": tl["total"] - tl["busy"],
        "total_time_us": tl["total"],
        "busy_share": tl["busy_share"],
        "kernel_time_by_category_us": {c: cats[c]["kernel_time_us"] for c in CATEGORIES},
        "communication_us": tl["total_communication_us"],
        "exposed_communication_us": tl["exposed_communication_us"],
        "exposed_memcpy_us": tl["exposed_memcpy_us"],
        "matrix_flops": f,
        "flops_by_category": {c: cats[c]["flops"] for c in MATRIX_CATEGORIES},
        "matrix_tflops_per_s": sm["matrix_tflops_per_s"],
        "tflops_per_s_over_busy": sm["tflops_per_s_over_busy"],
        "tflops_per_s_over_total": sm["tflops_per_s_over_total"],
        "mfu": f / (wall * 1e-6) / peak if f and peak and wall > 0 else None,
    }


def _summary(rows: list[dict[str, Any]], chosen: list[int], peak: float | None, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """Means over the chosen steps (sums / n), with the spread of the wall and busy times."""
    sel = [rows[k] for k in chosen]
    if not sel:
        return None
    n = len(sel)

    def mean(key: str) -> float | None:
        vals = [r[key] for r in sel]
        return None if any(v is None for v in vals) else sum(vals) / n

    out: dict[str, Any] = {"steps": [r["index"] for r in sel], "count": n}
    for key in fields:
        out[key] = mean(key)
    for key in ("kernel_time_by_category_us", "flops_by_category", "cpu_time_by_category_us"):
        if key in sel[0]:
            out[key] = {
                c: (None if any(r[key][c] is None for r in sel) else sum(r[key][c] for r in sel) / n) for c in sel[0][key]
            }
    walls = [r["wall_us"] for r in sel]
    out["wall_us_min"], out["wall_us_median"], out["wall_us_max"] = min(walls), median(walls), max(walls)
    flops = sum(r["matrix_flops"] or 0 for r in sel)
    if "busy_time_us" in out:
        busy = sum(r["busy_time_us"] for r in sel)
        out["tflops_per_s_over_busy"] = flops / busy / 1e6 if busy > 0 and flops else None
        out["mfu"] = flops / (sum(walls) * 1e-6) / peak if flops and peak and sum(walls) > 0 else None
    else:
        out["gflops_per_s_over_wall"] = flops / sum(walls) / 1e3 if flops and sum(walls) > 0 else None
    return out


_GPU_FIELDS = (
    "wall_us",
    "busy_time_us",
    "idle_time_us",
    "total_time_us",
    "communication_us",
    "exposed_communication_us",
    "exposed_memcpy_us",
    "matrix_flops",
)
_CPU_FIELDS = ("wall_us", "cpu_matrix_time_us", "matrix_flops", "matrix_flops_without_bias")


def _steps_section(
    step_spans: list[tuple[float, float, str]], rows: list[dict[str, Any]], choice: str | int, peak: float | None, gpu: bool
) -> dict[str, Any]:
    chosen, sentence = select(len(step_spans), choice)
    return {
        "detected": len(step_spans),
        "choice": choice,
        "selection": sentence,
        "per_step": rows,
        "summary": _summary(rows, chosen, peak, _GPU_FIELDS if gpu else _CPU_FIELDS),
        "definition": CONVENTIONS["steps"],
    }


def _load_catalogue() -> Any:
    """The GPU catalogue, loaded while worker processes read a big trace (it is needed next)."""
    from footprint.lca.database import db

    return db().gpus


@dataclass
class Analysis:
    """`analyze_trace`'s result and what it was computed from (the trace diff aggregates other subsets)."""

    result: dict[str, Any]
    classified: Classified | None
    device: Device
    counted: Sequence[int]  # indices of the GPU events the figures count
    per_step: list[list[int]]  # counted GPU events of each profiler step
    chosen: list[int]  # the steps the summary covers


def analyze_trace(
    path: str | Path, power: str | Path | None = None, top: int = 20, steps: str | int = "steady", include_unlinked: bool = False
) -> dict[str, Any]:
    """Analyse a PyTorch profiler (Kineto) trace; conventions in `gpu.CONVENTIONS` and the README.

    Returns ``{"trace", "device", "busy_time_us", "idle_time_us", "total_time_us", "timeline", "summary",
    "by_category", "ops", "launch_overhead", "steps", "linking", "cpu" (CPU-only traces), "power" (with
    `power`), "conventions", "warnings"}``; the top-level figures are whole-trace, ``steps`` holds each
    profiler step and the summary of the steps `steps` selects (``"steady"``, ``"all"`` or a step number).
    Only GPU events launched within the recording count (TraceLens' rule); ``linking`` reports the others
    (carried over from before the recording, or otherwise launchless), which `include_unlinked` counts too.
    """
    return analyse(path, power, top, steps, include_unlinked).result


def _bucket(c: Classified, device: Device, idx: list[int], counted: bool) -> dict[str, Any]:
    """Count, time span, busy and kernel time (per category) of a set of launchless GPU events."""
    agg = aggregate(c, device, idx, with_ops=False)
    iv = agg["timeline"]["intervals"]
    return {
        "events": len(idx),
        "counted": counted,
        "busy_time_us": agg["timeline"]["busy"],
        "kernel_time_us": sum(c.gpu[j][1] for j in idx),
        "start_us": iv[0][0] if iv else None,
        "end_us": iv[-1][1] if iv else None,
        "kernel_time_by_category_us": {k: v["kernel_time_us"] for k, v in agg["by_category"].items() if v["count"]},
    }


def _linking_section(
    s: Scan, c: Classified, device: Device, parts: tuple[list[int], list[int], list[int]], include: bool, warnings: list[str]
) -> tuple[dict[str, Any], Sequence[int]]:
    """The `linking` section and the GPU events that count (linked ones, or all with `include`)."""
    linked, carried, unlinked = parts
    n = len(c.gpu)
    no_launches = n > 0 and not s.launch
    counted: Sequence[int] = range(n) if include or no_launches else linked
    counts_all = len(counted) == n
    section = {
        "convention": CONVENTIONS["linking"],
        "include_unlinked": include,
        "gpu_events": n,
        "linked_events": len(linked),
        "counted_events": len(counted),
        CARRIED_OVER: _bucket(c, device, carried, counts_all),
        UNLINKED: _bucket(c, device, unlinked, counts_all),
    }
    if no_launches:
        warnings.append(
            "the trace records no launch calls (cuda_runtime/cuda_driver events), so no GPU event can be linked: all "
            f"{n:,} are counted"
        )
    how = (
        "counted (--include-unlinked): the first step is charged for work launched before the recording"
        if counts_all
        else "left out of every figure, as TraceLens does (--include-unlinked / include_unlinked=True counts them)"
    )
    if carried:
        b = section[CARRIED_OVER]
        warnings.append(
            f"{len(carried):,} of {n:,} GPU events ({format_us(b['busy_time_us'])} of GPU busy time) were launched "
            f"before the recording began (no launch call in the trace; queued by the previous, unprofiled "
            f"iteration): carried over from before the recording, {how}"
        )
    if unlinked and not no_launches:
        b = section[UNLINKED]
        warnings.append(
            f"{len(unlinked):,} of {n:,} GPU events ({format_us(b['busy_time_us'])} of GPU busy time) have no launch "
            f"call in the recording although they were queued during it: {how}"
        )
    return section, counted


def analyse(
    path: str | Path, power: str | Path | None = None, top: int = 20, steps: str | int = "steady", include_unlinked: bool = False
) -> Analysis:
    """`analyze_trace`, keeping the classified events (see `Analysis`)."""
    choice = parse_choice(steps)
    file = str(path)
    s, label, warnings = read_trace(path, meanwhile=_load_catalogue)
    meta = s.meta
    device_index, props, _ = _pick_device(s, warnings)
    device = Device(device_index, props, warnings)
    gpu = sorted((g for g in s.gpu if g[2] == device_index), key=lambda g: g[0]) if device_index is not None else []
    parent, leaf, launch_of = link(s, gpu)
    c = Classified(s, gpu, leaf, launch_of, ModelResolver(s.op_name, parent))
    parts = partition(s, gpu, launch_of)
    linking, counted = _linking_section(s, c, device, parts, include_unlinked, warnings)
    whole = aggregate(c, device, counted)
    tl = whole["timeline"]
    all_iv, busy, total = tl.pop("intervals"), tl.pop("busy"), tl.pop("total")
    tl["definition"] = TIMELINE_DEFINITION
    if whole["no_shapes"]:
        warnings.append(
            "FLOPs not available for "
            + ", ".join(f"{n:,} {k}" for k, n in sorted(whole["no_shapes"].items()))
            + " (no recorded shapes: profile with record_shapes=True; convolutions also need the "
            "'Concrete Inputs' of PyTorch >= 2.1)"
        )
    n_kernels = sum(1 for j in counted if gpu[j][3] == KERNEL)
    n_unlinked = sum(1 for j in counted if leaf[j] < 0 and gpu[j][3] == KERNEL)
    if n_kernels and n_unlinked:
        warnings.append(
            f"{n_unlinked:,} of {n_kernels:,} kernels could not be linked to a CPU op (no launch event or "
            f"enclosing op): they are listed by kernel name"
        )
    main_dtype = whole["main_dtype"]
    peak = device.peak(main_dtype)
    step_spans = spans(s.steps)
    base_ns = meta.get("baseTimeNanoseconds")
    result: dict[str, Any] = {
        "trace": {
            "path": file,
            "source": label,
            "events": s.events,
            "json_bytes": s.bytes,
            "parse_seconds": round(s.seconds, 4),
            "parse_mb_per_s": round(s.bytes / 1e6 / s.seconds, 1) if s.seconds > 0 else None,
            "schema_version": meta.get("schemaVersion"),
            "base_time_ns": base_ns,
            "distributed": meta.get("distributedInfo"),
            "cpu_ops": len(s.op_ts),
            "gpu_events": len(gpu),
            "gpu_events_counted": len(counted),
            "start_us": all_iv[0][0] if all_iv else None,
            "end_us": all_iv[-1][1] if all_iv else None,
        },
        "device": device.describe(main_dtype),
        "busy_time_us": busy,
        "idle_time_us": total - busy,
        "total_time_us": total,
        "timeline": tl,
        "summary": whole["summary"],
        "by_category": whole["by_category"],
        "ops": whole["ops"][: max(0, int(top))],
        "ops_total": len(whole["ops"]),
        "launch_overhead": whole["launch_overhead"],
        "linking": linking,
        "conventions": CONVENTIONS,
        "warnings": warnings,
    }
    cpu_intervals: dict[str, list[tuple[float, float]]] = {}
    per_step: list[list[int]] = [[] for _ in step_spans]
    if gpu:
        per_step = _place(gpu, launch_of, counted, StepIndex(step_spans), len(step_spans), warnings)
        rows = [
            _step_row(k, sp, aggregate(c, device, per_step[k], with_ops=False), len(per_step[k]), peak)
            for k, sp in enumerate(step_spans)
        ]
        result["steps"] = _steps_section(step_spans, rows, choice, peak, gpu=True)
        result["steps"]["gpu_events_outside_steps"] = len(counted) - sum(map(len, per_step))
    else:
        section, per_step_ops = cpu_ops.analyse_cpu(s, step_spans, top)
        cpu_intervals = section.pop("intervals")
        warnings.extend(section["notes"])
        result["cpu"] = section
        rows = []
        for k, sp in enumerate(step_spans):
            wall = sp[1] - sp[0]
            rows.append(
                {"index": k + 1, "name": sp[2], "start_us": sp[0], "wall_us": wall}
                | cpu_ops.step_figures(s, per_step_ops[k], wall)
            )
        result["steps"] = _steps_section(step_spans, rows, choice, None, gpu=False)
    if power is not None:
        if gpu:
            result["power"] = attribute_energy(power, result, gpu, _energy_keys(c, parts, len(counted)), base_ns, file)
        else:
            durations = [b - a for v in cpu_intervals.values() for a, b in v]
            try:
                result["power"] = attribute(power, result, cpu_intervals, base_ns, file, "cpu", median(durations))
            except MissingEnergy as exc:
                result["power"] = {"component": "cpu", "available": False, "missing": str(exc), "run_dir": str(power)}
    return Analysis(result, c if gpu else None, device, counted, per_step, select(len(step_spans), choice)[0])


def _place(
    gpu: list[tuple[Any, ...]], launch_of: list[Any], counted: Sequence[int], where: StepIndex, n: int, warnings: list[str]
) -> list[list[int]]:
    """The counted GPU events of each step: by the launch call's start (HTA), else (launchless events counted
    with --include-unlinked) by the event's own start."""
    per_step: list[list[int]] = [[] for _ in range(n)]
    outside = 0
    for j in counted:
        rt = launch_of[j]
        k = where(rt[0] if rt is not None else gpu[j][0])
        if k >= 0:
            per_step[k].append(j)
        else:
            outside += 1
    if n and outside:
        warnings.append(
            f"{outside:,} of {len(counted):,} counted GPU events were launched outside every ProfilerStep span: they "
            "count in the whole-trace figures only"
        )
    return per_step


def _energy_keys(c: Classified, parts: tuple[list[int], list[int], list[int]], n_counted: int) -> list[str]:
    """Each GPU event's energy key: its category, or (when not counted) its launchless bucket."""
    keys = list(c.cat)
    if n_counted < len(keys):
        for bucket, idx in ((CARRIED_OVER, parts[1]), (UNLINKED, parts[2])):
            for j in idx:
                keys[j] = bucket
    return keys
