"""`footprint kernels diff A B`: what changed between two traces of the same model, down to the footprint.

Each trace is analysed as `analyze_trace` does (same linked-event rule, same `--steps` choice); the two
are compared on one basis, per profiler step (the mean over the chosen steps) when both traces have
steps, else per trace:

- totals: step time (the steps' mean wall time; the GPU's first start to last end for a trace without
  steps), GPU busy time, matrix FLOPs, achieved TFLOP/s, MFU, energy attributed (with run directories);
- per kernel class (`opmodels.CATEGORIES`): kernel time, FLOPs, achieved TFLOP/s, % of the dense peak,
  energy attributed;
- per op (name, shapes, dtype, class): calls, kernel time, FLOPs, TFLOP/s, % of peak. An op absent from
  one trace has 0 calls, time and FLOPs there, and no rate;
- footprint (`footprint.lca`): a training run of a stated size assessed twice, with the GPU-hours of
  each trace's step time, through the scenario path (`workload_from_dict`, `engine.assess`).

Every figure is ``{"a": ..., "b": ..., "delta": b - a, "relative": delta / a}`` (null where either side
is not available). CPU-only traces compare their modelled CPU operators: classes and ops are the whole
trace's figures per recorded step, the totals the chosen steps' (as `analyze` reports them).

Imports `footprint.kernels` modules and `footprint.lca` (the core) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.analysis import Analysis, analyse
from footprint.kernels.energy import attribute
from footprint.kernels.gpu import aggregate
from footprint.kernels.opmodels import CATEGORIES, MATRIX_CATEGORIES

TIME_WAYS = ("gpu_hours", "flops", "mfu", "duration", "kernel_profile", "energy")  # replaced by the trace's GPU-hours


def figure(a: float | None, b: float | None) -> dict[str, float | None]:
    """One compared figure: both values, B - A and (B - A) / A."""
    delta = b - a if a is not None and b is not None else None
    return {"a": a, "b": b, "delta": delta, "relative": delta / a if delta is not None and a else None}


def _per(v: float | None, n: int) -> float | None:
    return None if v is None else v / n


def _rate(flops: float | None, us: float | None) -> float | None:
    return flops / us / 1e6 if flops is not None and us else None


# ---- one side ---------------------------------------------------------------------------------------------
def _gpu_side(an: Analysis, power: str | Path | None) -> dict[str, Any]:
    r, c = an.result, an.classified
    assert c is not None
    st = r["steps"]
    by_steps = bool(an.chosen)
    idx = sorted(j for k in an.chosen for j in an.per_step[k]) if by_steps else list(an.counted)
    n = len(an.chosen) if by_steps else 1
    agg = aggregate(c, an.device, idx)
    sm = st["summary"] if by_steps else None
    cats = {
        cat: {
            "time_us": e["kernel_time_us"] / n,
            "flops": _per(e["flops"], n),
            "tflops_per_s": e["tflops_per_s"],
            "pct_of_peak": e["pct_of_peak"],
            "energy_j": None,
        }
        for cat, e in agg["by_category"].items()
    }
    ops = {
        (o["name"], o["shapes"], o["dtype"], o["category"]): {
            "count": o["count"] / n,
            "time_us": o["kernel_time_us"] / n,
            "flops": _per(o["flops"], n),
            "tflops_per_s": o["tflops_per_s"],
            "pct_of_peak": o["pct_of_peak"],
        }
        for o in agg["ops"]
    }
    flops = agg["summary"]["matrix_flops"]
    totals = {
        "step_time_us": sm["wall_us"] if sm else r["total_time_us"],
        "busy_time_us": sm["busy_time_us"] if sm else r["busy_time_us"],
        "matrix_flops": _per(flops, n),
        "matrix_tflops_per_s": agg["summary"]["matrix_tflops_per_s"],
        "mfu": sm["mfu"] if sm else _mfu(flops, r["total_time_us"], an.device.peak(agg["main_dtype"])),
        "energy_j": None,
    }
    side = _describe(r, by_steps)
    if power is not None:
        energy = _energy(an, idx, power)
        totals["energy_j"] = _per(energy["energy_j"], n)
        for cat in CATEGORIES:
            cats[cat]["energy_j"] = energy["by_category_j"][cat] / n
        side["energy"] = {k: energy[k] for k in ("run_dir", "device_uuid", "energy_method", "coarseness", "notes")}
    return side | {"totals": totals, "by_category": cats, "ops": ops}


def _mfu(flops: float | None, us: float, peak: float | None) -> float | None:
    return flops / (us * 1e-6) / peak if flops and peak and us > 0 else None


def _energy(an: Analysis, idx: list[int], power: str | Path) -> dict[str, Any]:
    """The run's GPU energy attributed to the compared events: their categories, and the idle time between them."""
    c = an.classified
    assert c is not None
    per_cat: dict[str, list[tuple[float, float]]] = {}
    for j in idx:
        g = c.gpu[j]
        per_cat.setdefault(c.cat[j], []).append((g[0], g[0] + g[1]))
    if not per_cat:
        raise FootprintError("no GPU events in the compared steps to attribute energy to", an.result["trace"]["path"])
    r = an.result
    scratch = {"device": r["device"], "by_category": {cat: {"flops": None} for cat in CATEGORIES}}
    out = attribute(
        power, scratch, per_cat, r["trace"]["base_time_ns"], r["trace"]["path"], "gpu", r["launch_overhead"]["median_kernel_us"]
    )
    out["energy_j"] = out["energy_in_trace_window_j"]
    return out


def _cpu_side(an: Analysis) -> dict[str, Any]:
    r = an.result
    st, cpu = r["steps"], r["cpu"]
    sm = st["summary"]
    n_all = max(1, st["detected"])
    cats = {}
    for cat in MATRIX_CATEGORIES:  # the whole trace per recorded step, as the ops (CPU ops are not kept per step)
        e = cpu["by_category"][cat]
        t, f = e["cpu_time_us"] / n_all, _per(e["flops"], n_all)
        cats[cat] = {"time_us": t, "flops": f, "tflops_per_s": _rate(f, t), "pct_of_peak": None, "energy_j": None}
    ops = {
        (o["name"], o["shapes"], o["dtype"], o["category"]): {
            "count": o["count"] / n_all,
            "time_us": o["cpu_time_us"] / n_all,
            "flops": _per(o["flops"], n_all),
            "tflops_per_s": _rate(o["flops"], o["cpu_time_us"]),
            "pct_of_peak": None,
        }
        for o in cpu["ops"]
    }
    totals = {
        "step_time_us": sm["wall_us"] if sm else None,
        "busy_time_us": sm["cpu_matrix_time_us"] if sm else cpu["matrix_cpu_time_us"],
        "matrix_flops": sm["matrix_flops"] if sm else cpu["matrix_flops"],
        "matrix_tflops_per_s": _rate(cpu["matrix_flops"], cpu["matrix_cpu_time_us"]),
        "mfu": None,
        "energy_j": None,
    }
    return _describe(r, bool(sm)) | {"totals": totals, "by_category": cats, "ops": ops}


def _describe(r: dict[str, Any], by_steps: bool) -> dict[str, Any]:
    d = r["device"]
    return {
        "trace": r["trace"]["path"],
        "source": r["trace"]["source"],
        "kind": "cpu" if r.get("cpu") is not None else "gpu",
        "device": d.get("catalogue_name") or d.get("name"),
        "catalogue_id": d.get("catalogue_id"),
        "peak_dtype": d.get("peak_dtype"),
        "basis": f"per step, the mean over {r['steps']['selection']}" if by_steps else "whole trace",
        "steps": r["steps"]["summary"]["steps"] if by_steps else [],
        "carried_over_events": (r.get("linking") or {}).get("carried_over", {}).get("events", 0),
        "warnings": r["warnings"],
    }


def _side(path: str | Path, steps: str | int, include_unlinked: bool, power: str | Path | None, top: int) -> dict[str, Any]:
    an = analyse(path, top=top, steps=steps, include_unlinked=include_unlinked)
    if not an.result["trace"]["events"]:
        raise FootprintError("the trace holds no events: nothing to compare", str(path))
    if an.classified is None:
        if power is not None:
            raise FootprintError("--power-a/--power-b attribute GPU energy; this trace has no GPU events", str(path))
        return _cpu_side(an)
    return _gpu_side(an, power)


# ---- the comparison ---------------------------------------------------------------------------------------
def _compare_ops(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """Ops of either trace, by the size of their time change; an op absent from one side ran 0 times there."""
    absent = {"count": 0.0, "time_us": 0.0, "flops": 0.0, "tflops_per_s": None, "pct_of_peak": None}
    rows = []
    for key in dict.fromkeys([*a, *b]):
        x, y = a.get(key, absent), b.get(key, absent)
        if key in a and key in b and x["flops"] is None:
            y = y | {"flops": None}
        row = {"name": key[0], "shapes": key[1], "dtype": key[2], "category": key[3], "in": _presence(key in a, key in b)}
        row |= {f: figure(x[f], y[f]) for f in ("count", "time_us", "flops", "tflops_per_s", "pct_of_peak")}
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["time_us"]["delta"] or 0.0))
    return rows[: max(0, int(top))]


def _presence(in_a: bool, in_b: bool) -> str:
    return "both" if in_a and in_b else ("a" if in_a else "b")


def diff_traces(
    a: str | Path,
    b: str | Path,
    *,
    steps: str | int = "steady",
    include_unlinked: bool = False,
    power_a: str | Path | None = None,
    power_b: str | Path | None = None,
    scenario: str | Path | None = None,
    train_steps: int | None = None,
    gpus: int | None = None,
    gpu: str | None = None,
    samples: int = 0,
    top: int = 20,
) -> dict[str, Any]:
    """Compare trace `b` with trace `a` (see the module docstring); with `scenario` or `train_steps`, the change in a
    training run's footprint (GPU-hours and the 16 EF 3.1 categories)."""
    sa = _side(a, steps, include_unlinked, power_a, top=1_000_000)
    sb = _side(b, steps, include_unlinked, power_b, top=1_000_000)
    warnings = _consistency(sa, sb)
    cats = sorted({*sa["by_category"], *sb["by_category"]}, key=lambda c: CATEGORIES.index(c))
    fields = ("time_us", "flops", "tflops_per_s", "pct_of_peak", "energy_j")
    out: dict[str, Any] = {
        "a": {k: v for k, v in sa.items() if k not in ("totals", "by_category", "ops")},
        "b": {k: v for k, v in sb.items() if k not in ("totals", "by_category", "ops")},
        "basis": sa["basis"] if sa["basis"] == sb["basis"] else f"A {sa['basis']}; B {sb['basis']}",
        "include_unlinked": include_unlinked,
        "totals": {k: figure(sa["totals"][k], sb["totals"][k]) for k in sa["totals"]},
        # a CPU trace has the matrix categories only: a category one side lacks is not available there, not 0
        "by_category": {c: {f: figure(_of(sa, c, f), _of(sb, c, f)) for f in fields} for c in cats},
        "ops": _compare_ops(sa["ops"], sb["ops"], top),
        "ops_total": len({*sa["ops"], *sb["ops"]}),
        "footprint": None,
        "warnings": warnings,
    }
    if scenario is not None or train_steps is not None:
        out["footprint"] = run_footprint(sa, sb, scenario=scenario, train_steps=train_steps, gpus=gpus, gpu=gpu, samples=samples)
    return out


def _of(side: dict[str, Any], category: str, field: str) -> Any:
    return side["by_category"].get(category, {}).get(field)


def _consistency(sa: dict[str, Any], sb: dict[str, Any]) -> list[str]:
    """What makes the comparison weaker: different devices, kinds, bases, carried-over work."""
    w = []
    if sa["kind"] != sb["kind"]:
        w.append(f"A is a {sa['kind'].upper()} trace and B a {sb['kind'].upper()} trace: only the shared figures compare")
    elif sa["device"] != sb["device"]:
        w.append(f"the traces ran on different devices (A {sa['device']}, B {sb['device']}): % of peak is each device's own")
    if sa["basis"].split(",")[0] != sb["basis"].split(",")[0]:
        w.append(f"the bases differ (A {sa['basis']}; B {sb['basis']}): figures per step and per trace do not compare")
    for name, s in (("A", sa), ("B", sb)):
        if s["carried_over_events"]:
            w.append(f"{name}: {s['carried_over_events']:,} GPU events carried over from before the recording ({s['source']})")
    return w


# ---- footprint at a stated size ---------------------------------------------------------------------------
def _scenario_data(
    sa: dict[str, Any], scenario: str | Path | None, gpus: int | None, gpu: str | None
) -> tuple[dict[str, Any], list[str]]:
    """The scenario both sides are assessed with (its GPU time left to the traces), and notes on where it came from."""
    from footprint.lca.workload import read_yaml

    notes: list[str] = []
    if scenario is not None:
        data = read_yaml(scenario)
        if not isinstance(data.get("training", {}), dict) or not isinstance(data.get("hardware", {}), dict):
            raise FootprintError("training and hardware must be mappings", str(scenario))
        if "energy" in data.get("training", {}):
            notes.append("the scenario's stated energy is left out: each side's energy is its GPU-hours x power")
    else:
        card = gpu or sa["catalogue_id"]
        if card is None:
            raise FootprintError(
                f"trace A's device ({sa['device'] or 'unknown'}) is not in the GPU catalogue: give --gpu NAME or --scenario FILE",
                key="--gpu",
            )
        data = {"name": "training run", "hardware": {"gpu": card}, "training": {"power_fraction_of_tdp": 1.0}}
        notes.append("no scenario: the GPU draws its TDP (an upper bound; --scenario FILE states the power, site and grid)")
    hw = data.setdefault("hardware", {})
    if gpu:
        hw["gpu"] = gpu
    if gpus:
        hw["count"] = gpus
    return data, notes


def _with_hours(data: dict[str, Any], hours: float) -> dict[str, Any]:
    """The scenario with `hours` GPU-hours as its only way to GPU time (and no stated energy)."""
    tr = {k: v for k, v in data.get("training", {}).items() if k not in TIME_WAYS}
    return {**data, "training": {**tr, "gpu_hours": f"{hours!r} h"}}


def run_footprint(
    sa: dict[str, Any],
    sb: dict[str, Any],
    *,
    scenario: str | Path | None,
    train_steps: int | None,
    gpus: int | None,
    gpu: str | None,
    samples: int,
) -> dict[str, Any]:
    """The footprint of the same training run at A's and at B's step time: GPU-hours, energy, every EF 3.1 category.

    With `train_steps`: GPU-hours = steps x step time x GPUs. With a scenario alone: A is the scenario's own
    GPU-hours and B = A x (B's step time / A's).
    """
    from footprint.lca.engine import assess
    from footprint.lca.workload import workload_from_dict

    step_a, step_b = sa["totals"]["step_time_us"], sb["totals"]["step_time_us"]
    if not step_a or not step_b:
        raise FootprintError(
            "the footprint needs both traces' step time (ProfilerStep spans, or GPU events)", key="--train-steps"
        )
    data, notes = _scenario_data(sa, scenario, gpus, gpu)
    file = str(scenario) if scenario is not None else None
    count = workload_from_dict(_with_hours(data, 1.0), file).count  # the scenario checked, its GPU count
    if train_steps is not None:
        hours = {"a": train_steps * step_a * 1e-6 * count / 3600, "b": train_steps * step_b * 1e-6 * count / 3600}
        size = f"{train_steps:,} steps on {count:,} GPU{'s' if count != 1 else ''}"
    else:
        stated = workload_from_dict(data, file)
        hours = {"a": stated.gpu_hours, "b": stated.gpu_hours * step_b / step_a}
        size = f"the scenario's {stated.gpu_hours:,.4g} GPU-hours at A's step time"
    results = {}
    for side, h in hours.items():
        results[side] = assess(workload_from_dict(_with_hours(data, h), file), samples=samples)
    wa, wb = results["a"].workload, results["b"].workload
    return {
        "size": size,
        "gpu": wa.gpu.name,
        "gpus": count,
        "scenario": file,
        "method": "GPU-hours = training steps x step time x GPUs"
        if train_steps is not None
        else "A: the scenario's GPU-hours; B: A's x B's step time / A's step time",
        "gpu_hours": figure(wa.gpu_hours, wb.gpu_hours),
        "energy_kwh": figure(wa.it_energy_kwh, wb.it_energy_kwh),
        "facility_energy_kwh": figure(results["a"].facility_energy_kwh, results["b"].facility_energy_kwh),
        "categories": {
            k: {"name": ra.name, "unit": ra.unit} | figure(ra.total, results["b"].impacts[k].total)
            for k, ra in results["a"].impacts.items()
        },
        "notes": notes + list(dict.fromkeys(wa.notes)),
    }
