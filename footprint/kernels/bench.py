"""Kernel benchmarks: GEMM, attention and an elementwise op, timed and metered, into an efficiency profile.

`footprint kernels bench [--device cuda|cpu] [--quick] [--dtypes bf16,fp16,fp32] -o profile.yaml`

For every configuration (op x shape x dtype):

1. **correctness first**: the result is checked against an fp64 reference computed on the same
   (rounded) inputs, on a subset of rows (up to 64) so that large shapes stay cheap. The error is
   max |out - ref| / max |ref| and the tolerance is dtype-aware, scaled with the reduction length k:
   ``tol = base x max(1, sqrt(k / 1024))``, base bf16 1e-2, fp16 1e-3, tf32 2e-3, fp32 1e-5 (x2 for
   attention forward, x5 for its backward, checked on dQ). A configuration that fails is kept, marked
   ``verified: false``, and never used for prediction.
2. **timing** after warm-up: per-call CUDA events on GPUs (launched back to back, synchronised once),
   ``time.perf_counter`` on CPUs; median and inter-quartile range over the repetitions.
3. **energy** over the same timed loop: NVML (the GPU's total-energy counter where it has one) on
   GPUs; on CPUs RAPL where readable, else codecarbon's TDP x load estimate, marked ``measured: false``.
   Windows shorter than 1 s are flagged (the A100/H100 power sensor averages ~25 ms of every 100 ms).

Reported per configuration: achieved TFLOP/s (2 FLOPs per multiply-accumulate), % of the card's dense
peak for the dtype (from lca_data; ``null`` = not available on CPUs, never 0), J per call and J per
TFLOP. FLOP conventions: GEMM 2MNK; attention forward 4 b h s^2 d (halved when causal, the
FlashAttention papers' convention), backward 2x the forward (the model-FLOP convention: the flash
kernel's recomputation is not counted); elementwise ``x + y`` moves 3 n elements (GB/s reported).
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.machine import CI_TARGET, ci_rel, load, physical_cores
from footprint.kernels.profile import DTYPE_BYTES, attention_intensity, gemm_intensity

PROFILE_FORMAT = 1
BENCH_DTYPES = ("bf16", "fp16", "fp32", "tf32")
TOL_BASE = {"bf16": 1e-2, "fp16": 1e-3, "tf32": 2e-3, "fp32": 1e-5}
DEFAULT_DTYPES = {
    ("cuda", False): ("bf16", "fp16", "fp32"),
    ("cuda", True): ("bf16",),
    ("cpu", False): ("fp32",),  # bf16 on CPUs without native support (AVX512-BF16/AMX) is emulated, very slow
    ("cpu", True): ("fp32",),
}
ENERGY_MIN_WINDOW_S = 1.0
BUDGET_FACTOR = 4  # a configuration is timed for at most this many target windows while its median is not tight
NOISY_IQR = 0.25  # IQR above this share of the median flags the timing as noisy
VERIFY_ROWS = 64

# Timing budget per configuration: warm-up seconds, target timed window, repetitions min/max.
_BUDGET = {
    ("cuda", False): (0.1, 1.0, 10, 20000),
    ("cuda", True): (0.02, 0.2, 5, 5000),
    ("cpu", False): (0.05, 0.5, 5, 2000),
    ("cpu", True): (0.005, 0.03, 3, 50),
}


def tolerance(dtype: str, k: int, factor: float = 1.0) -> float:
    """Verification tolerance on max |out - ref| / max |ref| for a reduction of length k."""
    return TOL_BASE[dtype] * factor * max(1.0, math.sqrt(k / 1024))


def gemm_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


def attention_flops(b: int, h: int, s: int, d: int, causal: bool = False, backward: bool = False) -> float:
    """Forward 4 b h s^2 d (QK^T and AV), halved when causal; backward 2x forward."""
    fwd = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return 2.0 * fwd if backward else fwd


# ---- sweeps --------------------------------------------------------------------------------------


def llm_gemm_shapes(tokens: int, hidden: int) -> list[tuple[int, int, int]]:
    """The GEMMs of one transformer layer as (M, N, K): forward QKV, attention projection, MLP up and
    down, plus the weight-gradient shapes of the MLP (K = tokens). The input-gradient shapes of the
    MLP equal the forward shapes of its other half."""
    t, h = tokens, hidden
    return [(t, 3 * h, h), (t, h, h), (t, 4 * h, h), (t, h, 4 * h), (h, 4 * h, t), (4 * h, h, t)]


def sweep(device: str, quick: bool) -> dict[str, list[dict[str, Any]]]:
    """Shapes per op for a device and mode."""
    if device == "cpu" and quick:
        squares, llm = [128, 256, 512], [(512, 256)]
        attn = [dict(b=1, h=4, s=256, d=64, causal=False)]
        elem = [1 << 20]
    elif device == "cpu":
        squares, llm = [256, 512, 1024, 2048], [(2048, 512), (2048, 1024)]
        attn = [dict(b=4096 // s, h=8, s=s, d=64, causal=False) for s in (512, 1024, 2048)]
        elem = [1 << 20, 1 << 24]
    elif quick:
        squares, llm = [1024, 2048, 4096], [(4096, 2048)]
        attn = [dict(b=2, h=16, s=2048, d=128, causal=True)]
        elem = [1 << 26]
    else:
        squares, llm = [256, 512, 1024, 2048, 4096, 8192], [(8192, h) for h in (1024, 2048, 4096, 8192)]
        # FlashAttention-style sweep: 16k tokens per batch, head dim 128, causal and not.
        attn = [
            dict(b=16384 // s, h=16, s=s, d=128, causal=c) for c in (True, False) for s in (512, 1024, 2048, 4096, 8192, 16384)
        ]
        elem = [1 << 22, 1 << 26, 1 << 28]
    gemms: list[tuple[int, int, int]] = [(n, n, n) for n in squares]
    for t, h in llm:
        gemms += [s for s in llm_gemm_shapes(t, h) if s not in gemms]
    return {"gemm": [dict(M=m, N=n, K=k) for m, n, k in gemms], "attention": attn, "elementwise": [dict(n=n) for n in elem]}


# ---- the kernels under test (module-level so tests can substitute a wrong one) ----------------------


def _matmul(a: Any, b: Any) -> Any:
    import torch

    return torch.matmul(a, b)


def _sdpa(q: Any, k: Any, v: Any, causal: bool) -> Any:
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _add(x: Any, y: Any) -> Any:
    import torch

    return torch.add(x, y)


# ---- device, meter, timing -----------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise FootprintError("the kernel bench needs torch: pip install -e '.[torch]'", key="kernels bench") from None
    return torch


def resolve_threads(threads: int | None) -> int:
    """CPU threads for the bench: as given (>= 1), else the physical cores of this process's affinity."""
    if threads is None:
        return physical_cores()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise FootprintError(f"--threads must be a positive integer, got {threads!r}", key="--threads")
    return threads


def resolve_device(device: str | None) -> str:
    torch = _torch()
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cuda", "cpu"):
        raise FootprintError(f"unknown device {device!r}; allowed: cuda, cpu", key="--device")
    if device == "cuda" and not torch.cuda.is_available():
        raise FootprintError(
            "cuda requested but torch sees no CUDA GPU (torch "
            f"{torch.__version__}; CPU-only build or no driver); use --device cpu",
            key="--device",
        )
    return device


def parse_dtypes(dtypes: str | Sequence[str]) -> list[str]:
    """Comma-separated or listed dtype names, checked against BENCH_DTYPES (no torch needed)."""
    items = [d.strip().lower() for d in (dtypes.split(",") if isinstance(dtypes, str) else dtypes)]
    items = [d for d in items if d]
    if not items:
        raise FootprintError("empty dtype list; allowed: " + ", ".join(BENCH_DTYPES), key="--dtypes")
    for d in items:
        if d not in BENCH_DTYPES:
            raise FootprintError(f"unknown dtype {d!r}; allowed: {', '.join(BENCH_DTYPES)}", key="--dtypes")
    return list(dict.fromkeys(items))


def resolve_dtypes(dtypes: str | Sequence[str] | None, device: str, quick: bool) -> list[str]:
    if dtypes is None:
        return list(DEFAULT_DTYPES[(device, quick)])
    items = parse_dtypes(dtypes)
    for d in items:
        if d == "tf32" and device != "cuda":
            raise FootprintError("tf32 is a CUDA tensor-core mode; on CPU use fp32", key="--dtypes")
    return items


def _torch_dtype(torch: Any, dtype: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[dtype]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def describe_device(device: str) -> dict[str, Any]:
    """Name, kind and dense catalogue peaks (TFLOP/s per dtype) of the bench device."""
    torch = _torch()
    if device == "cpu":
        return {
            "name": _cpu_name(),
            "kind": "cpu",
            "threads": int(torch.get_num_threads()),
            "catalogue_id": None,
            "peak_tflops": {},
            "peak_note": "not available: the catalogue has no CPU peaks, so % of peak is null",
        }
    idx = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    name = torch.cuda.get_device_name(idx)
    out: dict[str, Any] = {
        "name": name,
        "kind": "cuda",
        "index": idx,
        "capability": f"{props.major}.{props.minor}",
        "memory_gb": round(props.total_memory / 1e9, 1),
        "cuda": torch.version.cuda,
        "catalogue_id": None,
        "peak_tflops": {},
    }
    from footprint.errors import UnknownGpuError
    from footprint.lca.database import db

    try:
        gpu = db().find_gpu(name)
    except UnknownGpuError as exc:
        out["peak_note"] = f"not available: {exc} (so % of peak is null)"
        return out
    out["catalogue_id"] = gpu.id
    out["catalogue_name"] = gpu.name
    out["peak_tflops"] = {k: float(v) for k, v in gpu.peak_tflops.items() if k in BENCH_DTYPES}
    out["peak_note"] = "dense peaks from lca_data/gpus.yaml (fp32 is the non-tensor rate; tf32 the tensor-core one)"
    return out


class _EnergyMeter:
    """One meter for the whole bench: `read()` gives cumulative J of the device (None if unknown)."""

    def __init__(self, device: str) -> None:
        self.meter: Any = None
        self.uuids: list[str] = []
        self.info: dict[str, Any] = {"method": "unavailable", "measured": False, "notes": []}
        if device == "cuda":
            self._start_nvml()
        else:
            self._start_host()

    def _start_nvml(self) -> None:
        import os

        from meters.nvml import NvmlMeter

        torch = _torch()
        idx = torch.cuda.current_device()
        # NVML names the device by UUID ("GPU-..."/"MIG-..."); torch gives the bare UUID. Else the index,
        # through CUDA_VISIBLE_DEVICES.
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        by_index: int | str = visible[idx] if idx < len(visible) else idx
        if isinstance(by_index, str) and by_index.isdigit():
            by_index = int(by_index)
        candidates: list[int | str] = []
        uuid = str(getattr(torch.cuda.get_device_properties(idx), "uuid", "") or "")
        if uuid:
            candidates += [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]
        candidates.append(by_index)
        notes: list[str] = []
        for spec in candidates:
            m = NvmlMeter(devices=[spec])
            m.start()
            devs = [d for d in m.devices if d.method != "unavailable"]
            if devs:
                break
            notes += list(m.notes) + [n for d in m.devices for n in d.notes]
            m.stop()
        else:
            self.info = {
                "name": "nvml",
                "method": "unavailable",
                "measured": False,
                "notes": list(dict.fromkeys(notes)) or ["NVML could not measure this GPU"],
            }
            return
        self.meter = m
        self.uuids = [d.uuid for d in devs]
        d = devs[0]
        fake = any("FakeNVML" in n for n in m.notes)
        self.info = {
            "name": "nvml",
            "method": d.method,
            "measured": not fake,
            "device": d.name,
            "power_scope": d.power_scope,
            "driver": d.driver_version,
            "notes": list(dict.fromkeys(list(m.notes) + list(d.notes))),
        }

    def _start_host(self) -> None:
        from meters.cpu_estimate import host_meters

        (m, *_) = host_meters(include_ram=False)
        m.start()
        self.meter = m
        if m.name == "rapl":
            devs = [d for d in m.devices if d.method == "rapl"]
            self.uuids = [d.uuid for d in devs]
            self.info = {
                "name": "rapl",
                "method": "rapl",
                "measured": True,
                "domains": [d.name for d in devs],
                "scope": "whole CPU package(s) and DRAM, other processes included",
                "notes": list(m.notes),
            }
        else:
            m.wait_resolved(timeout=20.0)
            m.sample()
            cpu = m.devices[0]
            self.uuids = [cpu.uuid]
            self.info = {
                "name": "cpu_estimate",
                "method": "estimated",
                "measured": False,
                "tdp_w": cpu.power_limit_w,
                "scope": "whole CPU package (codecarbon's TDP for the "
                "model, or 4 W per thread when unknown) x (0.1 + 0.9 x machine load^3)",
                "notes": list(dict.fromkeys(cpu.notes)),
            }

    def read(self) -> float | None:
        if self.meter is None or not self.uuids:
            return None
        samples = {s.uuid: s.energy_j_cumulative for s in self.meter.sample()}
        vals = [samples.get(u) for u in self.uuids]
        if any(v is None for v in vals):
            return None
        return float(sum(v for v in vals if v is not None))

    def stop(self) -> None:
        if self.meter is not None:
            try:
                self.meter.stop()
            except Exception as exc:  # a meter must never break the bench
                self.info.setdefault("notes", []).append(f"meter stop failed: {exc}")


def _time_loop(fn: Callable[[], Any], device: str, budget: tuple[float, float, int, int], meter: _EnergyMeter) -> dict[str, Any]:
    """Warm up, then time `fn` repeatedly; per-call times and the energy over the timed loop."""
    torch = _torch()
    warm_s, target_s, min_reps, max_reps = budget
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    n_warm = 0
    while n_warm < 3 or time.perf_counter() - t0 < warm_s:
        fn()
        n_warm += 1
        if device == "cuda" and n_warm % 8 == 0:
            sync()
        if n_warm >= 1000:
            break
    sync()
    per_call = (time.perf_counter() - t0) / n_warm
    reps = int(min(max_reps, max(min_reps, math.ceil(target_s / max(per_call, 1e-9)))))
    e0 = meter.read()
    w0 = time.perf_counter()
    times: list[float] = []
    deadline = w0 + BUDGET_FACTOR * target_s
    while True:  # rounds of `reps` calls until the median is tight, or the budget is spent
        times += _timed_round(fn, device, reps, sync)
        if len(times) >= max_reps * BUDGET_FACTOR or time.perf_counter() >= deadline:
            break
        if len(times) >= 6 and ci_rel(times) <= CI_TARGET:
            break
    window = time.perf_counter() - w0
    e1 = meter.read()
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    energy = (e1 - e0) / len(times) if e0 is not None and e1 is not None and e1 >= e0 else None
    return {
        "reps": len(times),
        "median_s": statistics.median(times),
        "iqr_s": q[2] - q[0],
        "ci95_rel": ci_rel(times),
        "window_s": window,
        "energy_j": energy,
    }


def _timed_round(fn: Callable[[], Any], device: str, reps: int, sync: Callable[[], Any]) -> list[float]:
    """Per-call seconds of `reps` calls: CUDA events on GPUs (synchronised once), perf_counter on CPUs."""
    if device == "cuda":
        torch = _torch()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            fn()
            ends[i].record()
        sync()
        return [st.elapsed_time(en) / 1e3 for st, en in zip(starts, ends, strict=True)]
    times = []
    for _ in range(reps):
        c0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - c0)
    return times


def _rows(n: int, limit: int = VERIFY_ROWS) -> list[int]:
    """Up to `limit` evenly spread indices of 0..n-1, first and last included."""
    if n <= limit:
        return list(range(n))
    return sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def _rel_err(out: Any, ref: Any) -> float:
    torch = _torch()
    out = out.double()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    denom = float(ref.abs().max())
    return float((out - ref).abs().max()) / (denom if denom > 0 else 1.0)


# ---- one configuration per op --------------------------------------------------------------------


def _bench_gemm(shape: dict[str, int], dtype: str, device: str, budget: Any, meter: _EnergyMeter, gen: Any) -> dict[str, Any]:
    torch = _torch()
    m, n, k = shape["M"], shape["N"], shape["K"]
    td = _torch_dtype(torch, dtype)
    a = torch.randn(m, k, generator=gen, device=device).to(td)
    b = torch.randn(k, n, generator=gen, device=device).to(td)
    out = _matmul(a, b)
    rows = torch.tensor(_rows(m), device=device)
    ref = a.index_select(0, rows).double() @ b.double()
    err = _rel_err(out.index_select(0, rows), ref)
    tol = tolerance(dtype, k)
    del out, ref  # free device memory before timing
    timing = _time_loop(lambda: _matmul(a, b), device, budget, meter)
    el = DTYPE_BYTES[dtype]
    return {
        "op": "gemm",
        "shape": dict(shape),
        "dtype": dtype,
        "verified": bool(err <= tol),
        "max_rel_error": _num(err),
        "tolerance": _num(tol),
        "flops": gemm_flops(m, n, k),
        "arithmetic_intensity": round(gemm_intensity(m, n, k, el), 2),
        **timing,
    }


def _attn_reference(q: Any, k: Any, v: Any, dout: Any, rows: Any, causal: bool) -> tuple[Any, Any]:
    """fp64 output and dQ for query `rows` of batch 0 and up to 2 heads."""
    torch = _torch()
    hs = min(2, q.shape[1])
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    qs = q[0, :hs].index_select(1, rows).double()
    ks, vs = k[0, :hs].double(), v[0, :hs].double()
    scores = qs @ ks.transpose(-1, -2) * scale
    if causal:
        cols = torch.arange(k.shape[2], device=q.device)
        scores = scores.masked_fill(cols[None, :] > rows[:, None], -math.inf)
    p = torch.softmax(scores, dim=-1)
    o = p @ vs
    do = dout[0, :hs].index_select(1, rows).double()
    dp = do @ vs.transpose(-1, -2)
    dq = (p * (dp - (do * o).sum(-1, keepdim=True))) @ ks * scale
    return o, dq


def _bench_attention(
    shape: dict[str, Any], dtype: str, device: str, budget: Any, meter: _EnergyMeter, gen: Any
) -> list[dict[str, Any]]:
    torch = _torch()
    b, h, s, d = shape["b"], shape["h"], shape["s"], shape["d"]
    causal = bool(shape.get("causal", False))
    td = _torch_dtype(torch, dtype)

    def make() -> Any:
        return torch.randn(b, h, s, d, generator=gen, device=device).to(td).requires_grad_()

    q, k, v = make(), make(), make()
    dout = torch.randn(b, h, s, d, generator=gen, device=device).to(td)
    out = _sdpa(q, k, v, causal)
    (dq,) = torch.autograd.grad(out, (q,), dout, retain_graph=True)
    rows = torch.tensor(_rows(s), device=device)
    o_ref, dq_ref = _attn_reference(q.detach(), k.detach(), v.detach(), dout, rows, causal)
    hs = o_ref.shape[0]
    err_f = _rel_err(out.detach()[0, :hs].index_select(1, rows), o_ref)
    err_b = _rel_err(dq[0, :hs].index_select(1, rows), dq_ref)
    tol_f, tol_b = tolerance(dtype, s, 2.0), tolerance(dtype, s, 5.0)
    el = DTYPE_BYTES[dtype]
    results = []
    with torch.no_grad():
        t_fwd = _time_loop(lambda: _sdpa(q, k, v, causal), device, budget, meter)
    fl = attention_flops(b, h, s, d, causal)
    results.append(
        {
            "op": "attention",
            "pass": "fwd",
            "shape": {**shape, "causal": causal},
            "dtype": dtype,
            "verified": bool(err_f <= tol_f),
            "max_rel_error": _num(err_f),
            "tolerance": _num(tol_f),
            "flops": fl,
            "arithmetic_intensity": round(attention_intensity(s, el, causal), 2),
            **t_fwd,
        }
    )
    t_bwd = _time_loop(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), device, budget, meter)
    fl = attention_flops(b, h, s, d, causal, backward=True)
    results.append(
        {
            "op": "attention",
            "pass": "bwd",
            "shape": {**shape, "causal": causal},
            "dtype": dtype,
            "verified": bool(err_f <= tol_f and err_b <= tol_b),
            "max_rel_error": _num(max(err_f, err_b)),
            "tolerance": _num(tol_b),
            "verification": "dQ on a subset of query rows (and the forward)",
            "flops": fl,
            "arithmetic_intensity": round(attention_intensity(s, el, causal), 2),
            **t_bwd,
        }
    )
    return results


def _bench_elementwise(
    shape: dict[str, int], dtype: str, device: str, budget: Any, meter: _EnergyMeter, gen: Any
) -> dict[str, Any]:
    torch = _torch()
    n = shape["n"]
    td = _torch_dtype(torch, dtype)
    x = torch.randn(n, generator=gen, device=device).to(td)
    y = torch.randn(n, generator=gen, device=device).to(td)
    out = _add(x, y)
    err = _rel_err(out, x.double() + y.double())
    tol = tolerance(dtype, 1)
    timing = _time_loop(lambda: _add(x, y), device, budget, meter)
    nbytes = 3 * n * DTYPE_BYTES[dtype]
    return {
        "op": "elementwise",
        "kernel": "add",
        "shape": dict(shape),
        "dtype": dtype,
        "verified": bool(err <= tol),
        "max_rel_error": _num(err),
        "tolerance": _num(tol),
        "flops": float(n),
        "bytes": nbytes,
        "achieved_gbs": round(nbytes / timing["median_s"] / 1e9, 3) if timing["median_s"] > 0 else None,
        **timing,
    }


def _num(x: float, digits: int = 4) -> float | None:
    """Plain float for YAML, significant digits kept; inf/nan -> None."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _finish(r: dict[str, Any], peaks: dict[str, float]) -> dict[str, Any]:
    """Derived figures: TFLOP/s, % of peak, J per TFLOP; energy window flags."""
    med = r["median_s"]
    r["achieved_tflops"] = _num(r["flops"] / med / 1e12) if med > 0 else None
    peak = peaks.get(r["dtype"])
    if r["op"] == "elementwise":
        r["pct_of_peak"] = None  # memory-bound: a % of the compute peak would mislead; no bandwidth peak in the catalogue
    else:
        r["pct_of_peak"] = _num(100 * r["achieved_tflops"] / peak) if peak and r["achieved_tflops"] else None
    e = r.pop("energy_j")
    r["energy_j"] = _num(e) if e is not None else None
    r["j_per_tflop"] = _num(e / (r["flops"] / 1e12)) if e is not None and e > 0 else None
    if r["op"] == "elementwise":
        r["j_per_gb"] = _num(e / (r["bytes"] / 1e9)) if e is not None and e > 0 else None
    window = r.pop("window_s")
    r["energy_window_s"] = _num(window, 3)
    if e is not None and window < ENERGY_MIN_WINDOW_S:
        r["energy_note"] = f"timed window {window:.3g} s < {ENERGY_MIN_WINDOW_S:g} s: energy per call is unreliable"
    r["correct"] = r["verified"]
    noisy = []
    if med > 0 and r["iqr_s"] > NOISY_IQR * med:
        noisy.append(f"IQR {r['iqr_s'] / med:.0%} of the median")
    if r["ci95_rel"] > CI_TARGET:
        noisy.append(f"the median's 95 % CI is +/-{min(r['ci95_rel'], 9.99):.0%} after {r['reps']} calls")
    if noisy:
        r["timing_note"] = (
            "noise, not a timing: " + "; ".join(noisy) + " (a busy machine, or frequency changes); re-run on an idle machine"
        )
        r["verified"] = False  # never used for prediction
    r["ci95_rel"] = _num(r["ci95_rel"]) if math.isfinite(r["ci95_rel"]) else None
    for key in ("median_s", "iqr_s"):
        r[key] = _num(r[key])
    r["flops"] = float(r["flops"])
    return r


def run_bench(
    device: str | None = None,
    quick: bool = False,
    dtypes: str | Sequence[str] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    seed: int = 0,
    threads: int | None = None,
    machine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the sweep; return the profile mapping (see the module docstring). Raises FootprintError on
    bad arguments before anything runs. `threads`: torch's CPU threads (default: the physical cores of
    this process's affinity); `machine`: the load measured before (measured here when not given)."""
    torch = _torch()
    dev = resolve_device(device)
    dts = resolve_dtypes(dtypes, dev, quick)
    threads = resolve_threads(threads)
    before = machine if machine is not None else load()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    info = describe_device(dev)
    budget = _BUDGET[(dev, quick)]
    shapes = sweep(dev, quick)
    meter = _EnergyMeter(dev)
    gen = torch.Generator(device=dev).manual_seed(seed)
    prec = torch.get_float32_matmul_precision()
    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    try:
        for dtype in dts:
            if dev == "cuda":
                torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
            jobs: list[tuple[Callable[..., Any], dict[str, Any]]] = [(_bench_gemm, s) for s in shapes["gemm"]]
            if dtype != "tf32":
                jobs += [(_bench_attention, s) for s in shapes["attention"]]
                jobs += [(_bench_elementwise, s) for s in shapes["elementwise"]]
            for fn, shape in jobs:
                out = fn(shape, dtype, dev, budget, meter, gen)
                for r in out if isinstance(out, list) else [out]:
                    r = _finish(r, info["peak_tflops"])
                    results.append(r)
                    if progress is not None:
                        progress(r)
    finally:
        torch.set_float32_matmul_precision(prec)
        torch.set_num_threads(old_threads)
        meter.stop()
    after = load(window=0.2)
    notes = [
        "GEMM inputs are reused call after call (warm caches), as in vendor benchmarks",
        "correctness: fp64 reference on a subset of up to 64 rows; verified: false results are never used for prediction",
    ]
    if not meter.info.get("measured"):
        notes.append(
            f"energy {meter.info.get('method')}: not measured"
            + (" (estimated, codecarbon-style)" if meter.info.get("method") == "estimated" else "")
        )
    try:
        from importlib.metadata import version

        fp_version = version("footprint")
    except Exception:
        fp_version = None
    return {
        "footprint_profile": PROFILE_FORMAT,
        "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "footprint": fp_version,
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "device": info,
        "meter": meter.info,
        "machine": {
            "loaded": bool(before["loaded"] or after["loaded"]),
            "before": before,
            "after": after,
            "note": "a loaded machine (load average >= half the usable CPUs, or another process above 25 % of a CPU) "
            "gives noisy timings; those whose median is not tight are marked verified: false and never used",
        },
        "settings": {
            "threads": threads,
            "ci_target": CI_TARGET,
            "quick": quick,
            "dtypes": dts,
            "timing": "CUDA events" if dev == "cuda" else "time.perf_counter",
            "warmup_s": budget[0],
            "target_window_s": budget[1],
            "min_reps": budget[2],
            "max_reps": budget[3],
            "seed": seed,
            "duration_s": round(time.perf_counter() - t_start, 2),
        },
        "notes": notes,
        "results": results,
    }


# ---- CLI ------------------------------------------------------------------------------------------


def _shape_text(r: dict[str, Any]) -> str:
    s = r["shape"]
    if r["op"] == "gemm":
        return f"{s['M']}x{s['N']}x{s['K']}"
    if r["op"] == "attention":
        return f"b{s['b']} h{s['h']} s{s['s']} d{s['d']}{' causal' if s.get('causal') else ''} {r['pass']}"
    return f"n={s['n']:,}"


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def format_row(r: dict[str, Any]) -> str:
    op = r["op"]
    rate = f"{_fmt(r.get('achieved_gbs'), '.1f')} GB/s" if op == "elementwise" else f"{_fmt(r['achieved_tflops'], '.4g')} TFLOP/s"
    pct = "n/a" if r["pct_of_peak"] is None else f"{r['pct_of_peak']:.1f}%"
    jpt = r.get("j_per_gb") if op == "elementwise" else r["j_per_tflop"]
    unit = "J/GB" if op == "elementwise" else "J/TFLOP"
    ok = ("ok" if r.get("correct", r["verified"]) else "FAILED") + ("~" if r.get("timing_note") else "")
    return (
        f"{op:<11} {_shape_text(r):<30} {r['dtype']:<5} {ok:<6} err {_fmt(r['max_rel_error'], '.1e'):>7}  "
        f"{r['median_s'] * 1e3:9.3f} ms +/- {r['iqr_s'] * 1e3:.3f}  {rate:>16}  peak {pct:>6}  "
        f"{_fmt(r['j_per_tflop'] if op != 'elementwise' else jpt, '.4g')} {unit}"
    )


def main_bench(args: Any) -> int:
    """`footprint kernels bench`: run, print one line per configuration, write the profile YAML.

    Exit code 0 when every configuration verified, 1 when some failed (the profile is still written,
    with those results marked verified: false), 2 on bad arguments (FootprintError, nothing written)."""
    import yaml

    from footprint.outputs import check_file_target, write_text

    out = Path(getattr(args, "output", None) or "profile.yaml")
    if not out.parent.exists():
        raise FootprintError(f"directory {out.parent} does not exist", file=str(out), key="-o")
    check_file_target(out)  # before the benchmark: a directory, a pipe, a device or a symlink out is refused
    if getattr(args, "dtypes", None) is not None:
        parse_dtypes(args.dtypes)  # fail fast, before torch is imported
    threads = resolve_threads(getattr(args, "threads", None))
    dev = resolve_device(getattr(args, "device", None))
    dts = resolve_dtypes(getattr(args, "dtypes", None), dev, bool(getattr(args, "quick", False)))
    before = load()
    if before["loaded"]:
        print(
            "footprint: warning: the machine is loaded (" + "; ".join(before["reasons"]) + "): timings will be noisy, "
            "and those whose median is not tight are marked verified: false",
            file=sys.stderr,
        )
    _torch().set_num_threads(threads)
    info = describe_device(dev)
    peaks = ", ".join(f"{k} {v:g}" for k, v in info["peak_tflops"].items() if k in dts) or "not available"
    print(f"device: {info['name']} ({dev}, {threads} threads); dense peak TFLOP/s: {peaks}; dtypes: {', '.join(dts)}")
    prof = run_bench(
        dev,
        bool(getattr(args, "quick", False)),
        dts,
        progress=lambda r: print(format_row(r), flush=True),
        threads=threads,
        machine=before,
    )
    m = prof["meter"]
    print(
        f"energy: {m['method']} ({'measured' if m.get('measured') else 'not measured'}"
        + (f", TDP {m['tdp_w']:g} W" if m.get("tdp_w") else "")
        + ")"
    )
    write_text(
        out,
        "# footprint kernel efficiency profile (footprint kernels bench); see README "
        "'Kernel benchmarks and predicted MFU'\n" + yaml.safe_dump(prof, sort_keys=False),
    )
    noisy = [r for r in prof["results"] if r.get("timing_note")]
    if noisy:
        after = prof["machine"]["after"]
        print(
            f"footprint: warning: {len(noisy)} timing(s) are noise (marked ~, verified: false, never used for prediction: "
            f"the median's 95 % CI is wider than +/-{CI_TARGET:.0%} or the IQR above {NOISY_IQR:.0%})"
            + (f"; the machine is loaded ({'; '.join(after['reasons'])})" if after["loaded"] else ""),
            file=sys.stderr,
        )
    bad = [r for r in prof["results"] if not r["correct"]]
    unused = [r for r in prof["results"] if not r["verified"]]
    print(
        f"wrote {out}: {len(prof['results'])} results, {len(prof['results']) - len(unused)} verified, "
        f"{prof['settings']['duration_s']:.1f} s"
    )
    if bad:
        print(
            f"footprint: warning: {len(bad)} result(s) failed verification (kept as verified: false, never used "
            "for prediction): " + "; ".join(f"{r['op']} {_shape_text(r)} {r['dtype']}" for r in bad[:5]),
            file=sys.stderr,
        )
    return 1 if unused else 0
