"""What the GPU did over a set of its events: timeline, categories, ops with FLOPs and % of peak, launch overhead.

`classify(...)` gives every GPU event of the analysed device its category and its op instance once;
`aggregate(...)` then turns any subset of those events (the whole trace, one profiler step, the steps
of a steady state) into the same figures, so a step's figures are by construction the whole-trace
figures of a trace holding only that step's events. Conventions are in `CONVENTIONS` (and the README).
"""

from __future__ import annotations

import json
import statistics
from array import array
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.intervals import length, subtract, union
from footprint.kernels.linking import ModelResolver
from footprint.kernels.opmodels import (
    CATEGORIES,
    KERNEL,
    MATRIX_CATEGORIES,
    MEMCPY,
    MEMSET,
    MODEL_OPS,
    SHORT_KERNEL_US,
    estimate,
    kernel_class,
    op_model,
)
from footprint.kernels.reader import Scan

CONVENTIONS = {
    "flops": "2 FLOPs per multiply-accumulate, from recorded shapes (TraceLens' formulas). GEMM 2MNK per matrix "
    "(x batch) plus MN for the bias of addmm/baddbmm/linear; `matmul_flops` / gemm.flops_without_bias "
    "leave the bias out. Convolution 2 x output elements x prod(weight[1:]) (+ output for the bias); "
    "backward: input and weight gradients (2x) + bias. Attention 4 B H Sq Skv d, halved when causal; "
    "backward 2.5x (flash recomputation). Elementwise 1 per output element, reductions 1 per input "
    "element (estimates).",
    "bytes": "each tensor read or written once: GEMM A + B + C (+ bias N); convolution input + weight + output "
    "(+ bias); attention Q, K, V, O (backward adds dO, dQ, dK, dV); elementwise inputs + output",
    "time": "microseconds; an op's kernel time is the union of its kernels' intervals",
    "peaks": "dense per-dtype peaks from lca_data; pct_of_peak of a category = its FLOPs / sum(op time x the "
    "peak of the op's dtype); null where the card or dtype has no peak (never 0)",
    "roofline": "arithmetic intensity = FLOPs / bytes; ridge point = dense peak of the op's dtype (fp32 vector "
    "peak for elementwise and reduction ops) / DRAM bandwidth",
    "linking": "only GPU events whose launch call (cuda_runtime/cuda_driver event with the same correlation id) is in "
    "the recording count (TraceLens' rule). Launchless events are reported apart: 'carried_over' (they start "
    "before the first recorded launch, or their correlation id is below every recorded launch's: queued by the "
    "previous, unprofiled iteration) and 'unlinked' (the others); include_unlinked (--include-unlinked) counts "
    "them, as HTA does. A trace with no launch calls at all counts every event",
    "steps": "a profiler step is a ProfilerStep#N span on the CPU, identified by its time span (names can repeat "
    "across schedule cycles); a GPU event belongs to the step in which the CPU launched it (HTA's convention; "
    "a launchless event counted with --include-unlinked, to the step its own start falls in); a step's "
    "busy/idle/total and categories are the whole-trace definitions applied to its events only; wall = the "
    "CPU span; MFU = matrix FLOPs / (wall x dense peak)",
    "communication": "NCCL/RCCL/gloo kernels (by name); exposed = not overlapped by computation kernels "
    "(TraceLens' exposed_comm_time; HTA's comm/comp overlap is 1 - exposed / total)",
}

TIMELINE_DEFINITION = (
    "busy = union of kernel, memcpy and memset intervals on the device; total = first start to "
    "last end; idle = total - busy (TraceLens' gpu_timeline); computation = non-communication kernels "
    "and memsets; exposed = not overlapped by computation (or communication, for memcpy)"
)


class Device:
    """The analysed GPU: its catalogue card, dense peaks per dtype (FLOP/s) and DRAM bandwidth (B/s)."""

    def __init__(self, index: Any, props: dict[str, Any] | None, warnings: list[str]) -> None:
        self.index = index
        self.props = props
        self.trace_name = (props or {}).get("name")
        self.card = None
        self.peaks: dict[str, float] = {}
        self.bandwidth: float | None = None
        if self.trace_name:
            from footprint.lca.database import db

            try:
                self.card = db().find_gpu(self.trace_name)
            except FootprintError:
                warnings.append(
                    f"{self.trace_name!r} is not in the GPU catalogue: peaks are not available, "
                    f"pct_of_peak and the roofline class are null"
                )
        if self.card is not None:
            self.peaks = {k: v * 1e12 for k, v in self.card.peak_tflops.items()}
            self.bandwidth = self.card.memory_bandwidth_bps
            if self.bandwidth is None:
                warnings.append(
                    f"{self.card.name}: memory bandwidth is not in lca_data, so the roofline class "
                    f"(compute- or memory-bound) is not available"
                )

    def peak(self, dtype: str | None) -> float | None:
        return self.peaks.get(dtype) if dtype else None

    def ridge(self, dtype: str | None, vector: bool = False) -> float | None:
        peak = self.peak("fp32" if vector else dtype)
        if peak is None or not self.bandwidth:
            return None
        return peak / self.bandwidth

    def describe(self, main_dtype: str | None) -> dict[str, Any]:
        props = self.props
        peak_main = self.peak(main_dtype)
        return {
            "index": self.index,
            "name": self.trace_name,
            "catalogue_id": self.card.id if self.card else None,
            "catalogue_name": self.card.name if self.card else None,
            "peak_dtype": main_dtype,
            "peak_tflops": peak_main / 1e12 if peak_main else None,
            "dtype_peaks": {k: v / 1e12 for k, v in self.peaks.items()} or None,
            "memory_bandwidth_tbytes_per_s": self.bandwidth / 1e12 if self.bandwidth else None,
            "ridge_point_flops_per_byte": self.ridge(main_dtype) if main_dtype else None,
            "memory_gb": props["totalGlobalMem"] / 1e9 if props and props.get("totalGlobalMem") else None,
            "sms": (props or {}).get("numSms"),
            "compute_capability": f"{props['computeMajor']}.{props['computeMinor']}"
            if props and "computeMajor" in props and "computeMinor" in props
            else None,
            "peaks_note": "dense peaks from lca_data" if self.peaks else "not available (card not in the catalogue)",
        }


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def op_row(name: str, cat: str, shape: str, info: dict[str, Any] | None, dtype: str | None, time_key: str) -> dict[str, Any]:
    """A fresh row of the operator table (GPU kernels or CPU ops, whose time column is ``time_key``): counts and
    times start at 0, FLOPs and bytes unknown until an op model gives them."""
    return {
        "name": name,
        "category": cat,
        "shapes": shape or None,
        "params": (info or {}).get("params") or None,
        "dtype": dtype,
        "count": 0,
        time_key: 0.0,
        "flops": None,
        "matmul_flops": None,
        "bytes": None,
    }


def shape_text(dims: Any) -> str:
    """The tensor inputs' shapes, "(141, 512) x (512, 30522)"; a tensor list as "[(1, 768), (8, 768)]"."""

    def one(d: Any) -> str:
        if any(isinstance(x, list) for x in d):
            return "[" + ", ".join(one(x) for x in d if isinstance(x, list)) + "]"
        return "(" + ", ".join(str(x) for x in d) + ")"

    if not isinstance(dims, list):
        return ""
    return " x ".join(one(d) for d in dims if isinstance(d, list) and d)


def is_comm(name: str) -> bool:
    """A communication kernel (TraceLens and HTA: NCCL/RCCL by name; gloo runs on the CPU)."""
    low = name.lower()
    return "nccl" in low or "rccl" in low


class Classified:
    """Per GPU event (sorted by start): its category, op-instance key and launch call, computed once."""

    def __init__(self, s: Scan, gpu: list[tuple[Any, ...]], leaf: array, launch_of: list[Any], resolve: ModelResolver) -> None:
        self.s, self.gpu, self.leaf, self.launch_of = s, gpu, leaf, launch_of
        names = s.op_name
        kclass: dict[str, str] = {}
        tf32_name: dict[str, bool] = {}
        comm_name: dict[str, bool] = {}
        self.cat: list[str] = []
        self.key: list[Any] = []
        self.tf32: set[Any] = set()  # instance keys with a TF32 kernel
        self.comm = array("b")
        for j, g in enumerate(gpu):
            kind, kname = g[3], g[4]
            lf = leaf[j]
            m = resolve(lf) if lf >= 0 else -1
            if m >= 0:  # everything a modelled op launched is its time (memsets of cuBLAS/cuDNN included)
                cat = MODEL_OPS[names[m]][0]
                key: Any = m
            elif kind in (MEMCPY, MEMSET):
                cat = "memcpy"
                key = ("memcpy", kname)
            else:
                cat = kclass.get(kname)
                if cat is None:
                    cat = kclass[kname] = kernel_class(kname)
                key = lf if lf >= 0 else ("kernel", kname)
            if kind == KERNEL:
                t = tf32_name.get(kname)
                if t is None:
                    t = tf32_name[kname] = "tf32" in kname.lower()
                if t:
                    self.tf32.add(key)
            c = comm_name.get(kname)
            if c is None:
                c = comm_name[kname] = is_comm(kname)
            self.cat.append(cat)
            self.key.append(key)
            self.comm.append(c)
        self.info_cache: dict[tuple[Any, ...], tuple[dict[str, Any] | None, str, str]] = {}

    def op_info(self, key: int, cat: str) -> tuple[dict[str, Any] | None, str, str]:
        """(FLOP/byte model or None, shape text, row signature) of the op instance `key`."""
        s = self.s
        name, sk, conc = s.op_name[key], s.op_sig[key], s.op_conc.get(key)
        ck = (name, sk, cat, repr(conc) if conc is not None else None)
        hit = self.info_cache.get(ck)
        if hit is None:
            _, dims, types = s.sigs[sk] if sk is not None else (None, None, None)
            if cat in MATRIX_CATEGORIES and name in MODEL_OPS:
                info = op_model(name, dims, types, conc)
            elif cat in ("elementwise", "reduction"):
                info = estimate(cat, name, dims, types)
            else:
                info = None
            shape = shape_text(dims)
            sig = json.dumps(info["params"], sort_keys=True) if info and info["params"] else shape
            hit = self.info_cache[ck] = (info, shape, sig)
        return hit


def timeline(gpu: list[tuple[Any, ...]], comm: array, idx: Sequence[int]) -> dict[str, Any]:
    """Busy, total, computation, communication and memcpy time (TraceLens' gpu_timeline) of events `idx`."""
    all_iv = union(((gpu[j][0], gpu[j][0] + gpu[j][1]) for j in idx), presorted=True)
    comp_iv = union(((gpu[j][0], gpu[j][0] + gpu[j][1]) for j in idx if gpu[j][3] != MEMCPY and not comm[j]), presorted=True)
    comm_iv = union(((gpu[j][0], gpu[j][0] + gpu[j][1]) for j in idx if gpu[j][3] != MEMCPY and comm[j]), presorted=True)
    mem_iv = union(((gpu[j][0], gpu[j][0] + gpu[j][1]) for j in idx if gpu[j][3] == MEMCPY), presorted=True)
    busy = length(all_iv)
    total = (all_iv[-1][1] - all_iv[0][0]) if all_iv else 0.0
    return {
        "intervals": all_iv,
        "busy": busy,
        "total": total,
        "computation_us": length(comp_iv),
        "exposed_communication_us": length(subtract(comp_iv, comm_iv)),
        "exposed_memcpy_us": length(subtract(comm_iv, subtract(comp_iv, mem_iv))),
        "total_communication_us": length(comm_iv),
        "total_memcpy_us": length(mem_iv),
        "busy_share": busy / total if total > 0 else None,
    }


class _Totals:
    """Per-category sums while op rows are built."""

    def __init__(self) -> None:
        self.count: dict[str, int] = defaultdict(int)
        self.time: dict[str, float] = defaultdict(float)
        self.flops: dict[str, float] = defaultdict(float)
        self.known: dict[str, bool] = defaultdict(bool)
        self.flops_time: dict[str, float] = defaultdict(float)
        self.peak_time: dict[str, float] = defaultdict(float)  # sum of time x peak over ops with a peak
        self.peak_flops: dict[str, float] = defaultdict(float)
        self.bytes: dict[str, float] = defaultdict(float)
        self.bytes_time: dict[str, float] = defaultdict(float)
        self.matmul: dict[str, float] = defaultdict(float)
        self.no_shapes: dict[str, int] = defaultdict(int)
        self.matrix_flops = 0.0
        self.by_dtype: dict[str, float] = defaultdict(float)
        self.memcpy_bytes = 0.0


def _instances(c: Classified, idx: Sequence[int], tot: _Totals) -> dict[Any, list[float]]:
    """Each op instance's union of kernel intervals ([time, start, end], events sorted by start)."""
    gpu, cats, keys = c.gpu, c.cat, c.key
    inst: dict[Any, list[float]] = {}
    for j in idx:
        g = gpu[j]
        ts, dur, cat, key = g[0], g[1], cats[j], keys[j]
        if cat == "memcpy" and g[3] in (MEMCPY, MEMSET) and isinstance(g[7], (int, float)) and not isinstance(key, int):
            tot.memcpy_bytes += g[7]
        tot.count[cat] += 1
        tot.time[cat] += dur
        end = ts + dur
        cur = inst.get(key)
        if cur is None:
            inst[key] = [0.0, ts, end]
        elif ts <= cur[2]:
            if end > cur[2]:
                cur[2] = end
        else:
            cur[0] += cur[2] - cur[1]
            cur[1], cur[2] = ts, end
    return inst


def _rows(
    c: Classified, device: Device, inst: dict[Any, list[float]], tot: _Totals, first_cat: dict[Any, str]
) -> tuple[dict[tuple[Any, ...], dict[str, Any]], dict[Any, dict[str, Any]]]:
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    row_of: dict[Any, dict[str, Any]] = {}
    names = c.s.op_name
    for key, (acc, cs, ce) in inst.items():
        cat = first_cat[key]
        t = acc + ce - cs
        if isinstance(key, int):
            info, shape, sig = c.op_info(key, cat)
            name = names[key]
            if info is None and cat in MATRIX_CATEGORIES and name in MODEL_OPS:
                tot.no_shapes[name] += 1
        else:
            name, shape, sig = (f"({key[0]}) {key[1]}" if key[0] == "kernel" else key[1]), "", ""
            info = None
        dtype = info["dtype"] if info else None
        if dtype == "fp32" and cat in MATRIX_CATEGORIES and key in c.tf32:
            dtype = "tf32"
        rk = (name, sig, dtype, cat)
        row = rows.get(rk)
        if row is None:
            row = rows[rk] = op_row(name, cat, shape, info, dtype, "kernel_time_us")
            row["flops_model"] = (info or {}).get("model")
            row["_kernels"] = defaultdict(float)
        row["count"] += 1
        row["kernel_time_us"] += t
        row_of[key] = row
        if info is not None:
            f, mf, b = info["flops"], info["matmul_flops"], info["bytes"]
            row["flops"] = (row["flops"] or 0) + f
            if mf is not None:
                row["matmul_flops"] = (row["matmul_flops"] or 0) + mf
                tot.matmul[cat] += mf
            if b is not None:
                row["bytes"] = (row["bytes"] or 0) + b
                tot.bytes[cat] += b
                tot.bytes_time[cat] += t
            tot.flops[cat] += f
            tot.known[cat] = True
            tot.flops_time[cat] += t
            if cat in MATRIX_CATEGORIES:
                tot.matrix_flops += f
                if dtype:
                    tot.by_dtype[dtype] += f
                pk = device.peak(dtype)
                if pk:
                    tot.peak_time[cat] += t * pk
                    tot.peak_flops[cat] += f
    return rows, row_of


def _finish_row(row: dict[str, Any], device: Device) -> dict[str, Any]:
    kernels = row.pop("_kernels")
    row["kernels"] = [k for k, _ in sorted(kernels.items(), key=lambda kv: -kv[1])[:3]]
    t = row["kernel_time_us"]
    f, b = row["flops"], row["bytes"]
    row["flops_per_call"] = f / row["count"] if f is not None else None
    row["tflops_per_s"] = f / t / 1e6 if f is not None and t > 0 else None
    matrix = row["category"] in MATRIX_CATEGORIES
    pk = device.peak(row["dtype"]) if matrix else None
    row["pct_of_peak"] = (100 * f / (t * 1e-6) / pk) if f is not None and pk and t > 0 else None
    row["arithmetic_intensity"] = f / b if f is not None and b else None
    row["tbytes_per_s"] = b / t / 1e6 if b and t > 0 else None
    row["pct_of_bandwidth"] = (100 * b / (t * 1e-6) / device.bandwidth) if b and t > 0 and device.bandwidth else None
    ridge = device.ridge(row["dtype"], vector=not matrix) if row["dtype"] else None
    ai = row["arithmetic_intensity"]
    row["ridge_point"] = ridge
    row["roofline"] = None if ai is None or ridge is None else ("compute-bound" if ai >= ridge else "memory-bound")
    return row


def _categories(tot: _Totals, busy: float) -> dict[str, dict[str, Any]]:
    by_category: dict[str, dict[str, Any]] = {}
    for cat in CATEGORIES:
        t = tot.time.get(cat, 0.0)
        known = tot.known.get(cat, False)
        f = tot.flops[cat] if known else None
        ft = tot.flops_time.get(cat, 0.0)
        b = tot.bytes.get(cat) or (tot.memcpy_bytes if cat == "memcpy" and tot.memcpy_bytes else None)
        bt = tot.bytes_time.get(cat, 0.0) if cat != "memcpy" else t
        entry = {
            "flops": f,
            "kernel_time_us": t,
            "count": tot.count.get(cat, 0),
            "share_of_busy": (t / busy) if busy > 0 else None,
            "time_with_flops_us": ft if known else None,
            "tflops_per_s": (f / ft / 1e6) if f is not None and ft > 0 else None,
            "pct_of_peak": (100 * tot.peak_flops[cat] / (tot.peak_time[cat] * 1e-6)) if tot.peak_time.get(cat) else None,
            "bytes": b,
            "tbytes_per_s": (b / bt / 1e6) if b and bt > 0 else None,
        }
        if cat == "gemm":
            entry["flops_without_bias"] = tot.matmul.get(cat) if known else None
        by_category[cat] = entry
    return by_category


def _launch_overhead(c: Classified, idx: Sequence[int], all_iv: list[tuple[float, float]]) -> dict[str, Any]:
    gpu, launch_of = c.gpu, c.launch_of
    kernel_durs = array("d")
    launch_durs = array("d")
    launch_gaps = array("d")
    launch_bound = 0
    for j in idx:
        g = gpu[j]
        if g[3] != KERNEL:
            continue
        kernel_durs.append(g[1])
        rt = launch_of[j]
        if rt is not None:
            launch_durs.append(rt[1])
            launch_gaps.append(g[0] - rt[0])
            if rt[1] >= g[1]:
                launch_bound += 1
    gaps = [all_iv[i + 1][0] - all_iv[i][1] for i in range(len(all_iv) - 1)]
    short = [d for d in kernel_durs if d < SHORT_KERNEL_US]
    ksum = sum(kernel_durs)
    return {
        "kernels": len(kernel_durs),
        "launches_linked": len(launch_durs),
        "cpu_launch_time_us": sum(launch_durs) if launch_durs else None,
        "gpu_kernel_time_us": ksum,
        "launch_to_kernel_time_ratio": ratio(sum(launch_durs), ksum) if launch_durs else None,
        "median_launch_us": median(launch_durs),
        "median_kernel_us": median(kernel_durs),
        "median_launch_to_start_us": median(launch_gaps),
        "launch_bound_kernels": launch_bound if launch_durs else None,
        "short_kernel_threshold_us": SHORT_KERNEL_US,
        "short_kernels": len(short),
        "short_kernel_time_us": sum(short),
        "short_kernel_share": len(short) / len(kernel_durs) if kernel_durs else None,
        "idle_gaps": len(gaps),
        "median_idle_gap_us": median(gaps),
        "note": "launch_bound_kernels: kernels whose launch call took at least as long as the kernel ran; many of "
        "them, with a mostly idle GPU, mean the CPU cannot feed the GPU (CUDA graphs, fusion, larger batches)",
    }


def aggregate(c: Classified, device: Device, idx: Sequence[int], with_ops: bool = True) -> dict[str, Any]:
    """The figures of GPU events `idx` (indices into the device's sorted events)."""
    tl = timeline(c.gpu, c.comm, idx)
    busy, total = tl["busy"], tl["total"]
    tot = _Totals()
    inst = _instances(c, idx, tot)
    first_cat = {}
    for j in idx:
        first_cat.setdefault(c.key[j], c.cat[j])
    rows, row_of = _rows(c, device, inst, tot, first_cat)
    ops: list[dict[str, Any]] = []
    if with_ops:
        for j in idx:  # the kernels behind each row, by time
            row_of[c.key[j]]["_kernels"][c.gpu[j][4]] += c.gpu[j][1]
        ops = [_finish_row(row, device) for row in rows.values()]
        ops.sort(key=lambda r: -r["kernel_time_us"])
    main_dtype = max(tot.by_dtype, key=lambda d: tot.by_dtype[d]) if tot.by_dtype else None
    if main_dtype is None and device.peaks:
        main_dtype = "bf16" if "bf16" in device.peaks else next(iter(device.peaks))
    peak_main = device.peak(main_dtype)
    matrix_time = sum(tot.flops_time.get(cat, 0.0) for cat in MATRIX_CATEGORIES)
    f = tot.matrix_flops
    summary = {
        "matrix_flops": f if any(tot.known.get(cat) for cat in MATRIX_CATEGORIES) else None,
        "matrix_kernel_time_us": matrix_time,
        "matrix_tflops_per_s": f / matrix_time / 1e6 if matrix_time > 0 else None,
        "tflops_per_s_over_busy": f / busy / 1e6 if busy > 0 and f else None,
        "tflops_per_s_over_total": f / total / 1e6 if total > 0 and f else None,
        "pct_of_peak_over_total": (100 * f / (total * 1e-6) / peak_main) if total > 0 and peak_main and f else None,
        "flops_by_dtype": dict(tot.by_dtype) or None,
    }
    return {
        "timeline": tl,
        "by_category": _categories(tot, busy),
        "ops": ops,
        "summary": summary,
        "main_dtype": main_dtype,
        "no_shapes": dict(tot.no_shapes),
        "launch_overhead": _launch_overhead(c, idx, tl["intervals"]) if with_ops else None,
    }
