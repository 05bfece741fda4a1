"""CPU operators of a trace with no GPU kernels: time, FLOPs and achieved GFLOP/s from recorded shapes.

The modelled ops are those of the GPU analysis (aten::mm, addmm, bmm, baddbmm, linear, matmul, the
convolutions, scaled-dot-product attention including the CPU flash-attention kernels), each counted
once with the same rule: the innermost modelled op of every subtree is resolved to the outermost op of
its family of lowest rank (aten::linear -> aten::addmm, aten::conv2d -> aten::convolution). Time is the
op's own span on the CPU (inclusive of what it calls, intra-op threads included as wall time); FLOPs
use the same formulas (2 per multiply-accumulate; `matmul_flops` leaves biases out, which is what
torch's FlopCounterMode counts).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from footprint.kernels.gpu import op_row, shape_text
from footprint.kernels.linking import ModelResolver, cpu_model_ops, link
from footprint.kernels.opmodels import MATRIX_CATEGORIES, MODEL_OPS, op_model
from footprint.kernels.reader import Scan
from footprint.kernels.steps import StepIndex


def _rate(flops: float | None, us: float) -> float | None:
    return flops / us / 1e3 if flops is not None and us > 0 else None


def analyse_cpu(s: Scan, steps: list[tuple[float, float, str]], top: int) -> tuple[dict[str, Any], list[list[int]]]:
    """(the "cpu" section of the result, the modelled-op indices of each step)."""
    parent, _, _ = link(s, [])
    resolve = ModelResolver(s.op_name, parent)
    mops = cpu_model_ops(s, parent, resolve)
    where = StepIndex(steps)
    per_step: list[list[int]] = [[] for _ in steps]
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    cats: dict[str, dict[str, Any]] = {
        c: {"count": 0, "cpu_time_us": 0.0, "flops": None, "matmul_flops": None} for c in MATRIX_CATEGORIES
    }
    no_shapes: dict[str, int] = defaultdict(int)
    intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i in mops:
        name = s.op_name[i]
        cat = MODEL_OPS[name][0]
        sk = s.op_sig[i]
        _, dims, types = s.sigs[sk] if sk is not None else (None, None, None)
        info = op_model(name, dims, types, s.op_conc.get(i))
        if info is None:
            no_shapes[name] += 1
        t = s.op_end[i] - s.op_ts[i]
        intervals[cat].append((s.op_ts[i], s.op_end[i]))
        k = where(s.op_ts[i])
        if k >= 0:
            per_step[k].append(i)
        shape = shape_text(dims)
        sig = json.dumps(info["params"], sort_keys=True) if info and info["params"] else shape
        dtype = info["dtype"] if info else None
        row = rows.get((name, sig, dtype))
        if row is None:
            row = rows[(name, sig, dtype)] = op_row(name, cat, shape, info, dtype, "cpu_time_us")
        row["count"] += 1
        row["cpu_time_us"] += t
        c = cats[cat]
        c["count"] += 1
        c["cpu_time_us"] += t
        if info is not None:
            for key, v in (("flops", info["flops"]), ("matmul_flops", info["matmul_flops"]), ("bytes", info["bytes"])):
                if v is not None:
                    row[key] = (row[key] or 0) + v
                    if key != "bytes":
                        c[key] = (c[key] or 0) + v
    ops = sorted(rows.values(), key=lambda r: -r["cpu_time_us"])
    for r in ops:
        r["gflops_per_s"] = _rate(r["flops"], r["cpu_time_us"])
        r["flops_per_call"] = r["flops"] / r["count"] if r["flops"] is not None else None
    for c in cats.values():
        c["gflops_per_s"] = _rate(c["flops"], c["cpu_time_us"])
    flops = sum(c["flops"] or 0 for c in cats.values())
    matmul = sum(c["matmul_flops"] or 0 for c in cats.values())
    time_us = sum(c["cpu_time_us"] for c in cats.values())
    known = any(c["flops"] is not None for c in cats.values())
    notes = []
    if no_shapes:
        notes.append(
            "FLOPs not available for "
            + ", ".join(f"{n:,} {k}" for k, n in sorted(no_shapes.items()))
            + " (no recorded shapes: profile with record_shapes=True)"
        )
    section = {
        "ops": ops[: max(0, int(top))],
        "ops_total": len(ops),
        "by_category": cats,
        "matrix_flops": flops if known else None,
        "matrix_flops_without_bias": matmul if known else None,
        "matrix_cpu_time_us": time_us,
        "matrix_gflops_per_s": _rate(flops if known else None, time_us),
        "threads": len({s.op_thread[i] for i in mops}),
        "intervals": {c: v for c, v in intervals.items()},
        "definition": "CPU operators with a FLOP model, each counted once (innermost modelled op resolved to "
        "its family's outermost op of lowest rank); time = the op's span on the CPU; GFLOP/s = FLOPs / that time",
        "notes": notes,
    }
    return section, per_step


def step_figures(s: Scan, idx: list[int], wall_us: float) -> dict[str, Any]:
    """The CPU figures of one step: modelled ops' time, FLOPs and rates (over their time and the wall)."""
    by_cat: dict[str, float] = defaultdict(float)
    flops = 0.0
    matmul = 0.0
    known = False
    for i in idx:
        name = s.op_name[i]
        by_cat[MODEL_OPS[name][0]] += s.op_end[i] - s.op_ts[i]
        sk = s.op_sig[i]
        _, dims, types = s.sigs[sk] if sk is not None else (None, None, None)
        info = op_model(name, dims, types, s.op_conc.get(i))
        if info is not None:
            known = True
            flops += info["flops"]
            matmul += info["matmul_flops"] or 0
    t = sum(by_cat.values())
    return {
        "cpu_matrix_time_us": t,
        "cpu_time_by_category_us": {c: by_cat.get(c, 0.0) for c in MATRIX_CATEGORIES},
        "matrix_flops": flops if known else None,
        "matrix_flops_without_bias": matmul if known else None,
        "gflops_per_s_in_ops": _rate(flops if known else None, t),
        "gflops_per_s_over_wall": _rate(flops if known else None, wall_us),
    }
