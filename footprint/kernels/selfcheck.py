"""`footprint kernels predict`: a CPU profile predicts a training step on its own CPU, and is checked against one.

The self-check that makes the kernel model falsifiable: `predict_step(profile, shape)` composes one
training step of a transformer encoder (the op mix of `footprint.kernels.profile`, with the batch size
and sequence length: T = batch x seq tokens) from the profile's *measured rates* (achieved TFLOP/s of
the verified GEMM and attention results, interpolated in log arithmetic intensity; the elementwise
bandwidth for the non-matmul remainder and AdamW's update), then `measure_step(shape)` times the same
model's training step on this CPU with the profile's thread count, and the error is reported. GPU
profiles stay what scenarios use (`training.kernel_profile`).

Model spec (`--model`): ``example`` (examples/cpu_training_trace.py's model) or
``layers=2,hidden=128,heads=4,seq_len=64,batch_size=8,vocab_size=1000``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.machine import median_ci
from footprint.kernels.profile import (
    DTYPE_BYTES,
    REMAINDER_ELEMENTS_PER_LAYER,
    REMAINDER_ELEMENTS_PER_VOCAB,
    Profile,
    attention_intensity,
    gemm_intensity,
    interpolate,
)

EXAMPLE = {"layers": 2, "hidden": 128, "heads": 4, "seq_len": 64, "batch_size": 8, "vocab_size": 1000}
KEYS = tuple(EXAMPLE)
ADAMW_ELEMENTS_PER_PARAMETER = 10  # read p, g, m, v and write p, m, v (+ a few temporaries): an estimate


def parse_model(spec: str) -> dict[str, int]:
    """``example`` or ``key=value,...`` with every key of EXAMPLE (positive integers)."""
    text = spec.strip()
    if text == "example":
        return dict(EXAMPLE)
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in KEYS:
            raise FootprintError(f"unknown key {key!r}; expected {', '.join(KEYS)} (or 'example')", key="--model")
        try:
            out[key] = int(value)
        except ValueError:
            raise FootprintError(f"{key} must be an integer, got {value.strip()!r}", key="--model") from None
        if out[key] < 1:
            raise FootprintError(f"{key} must be >= 1, got {out[key]}", key="--model")
    missing = [k for k in KEYS if k not in out]
    if missing:
        raise FootprintError(
            f"missing {', '.join(missing)} (e.g. --model {','.join(f'{k}={v}' for k, v in EXAMPLE.items())})", key="--model"
        )
    if out["hidden"] % out["heads"]:
        raise FootprintError(f"hidden {out['hidden']} is not a multiple of heads {out['heads']}", key="--model")
    return out


def parameters(shape: dict[str, int]) -> int:
    """Trainable parameters of `build_model(shape)`: embedding, layers (12 h^2 + 13 h), LM head."""
    h, v, L = shape["hidden"], shape["vocab_size"], shape["layers"]
    return v * h + L * (12 * h * h + 13 * h) + (h * v + v)


def _rate_points(profile: Profile, op: str, dtype: str, pass_: str | None = None) -> list[tuple[float, float, str]]:
    pts = []
    for r in profile.results:
        if not r.verified or r.op != op or r.dtype != dtype or (pass_ is not None and r.pass_ != pass_):
            continue
        rate = r.achieved_gbs if op == "elementwise" else r.achieved_tflops
        if rate:
            x = r.intensity if op != "attention" else attention_intensity(r.shape["s"], DTYPE_BYTES[dtype], r.causal)
            pts.append((x, rate, r.label()))
    return pts


def predict_step(profile: Profile, shape: dict[str, int], dtype: str = "fp32") -> dict[str, Any]:
    """Predicted seconds of one training step from the profile's measured rates, op by op."""
    file = str(profile.path) if profile.path else None
    el = DTYPE_BYTES[dtype]
    L, h, s, b, V = shape["layers"], shape["hidden"], shape["seq_len"], shape["batch_size"], shape["vocab_size"]
    T = b * s
    gemm = _rate_points(profile, "gemm", dtype)
    if not gemm:
        raise FootprintError(
            f"no verified {dtype} GEMM result (failed or noisy timings are never used): re-run the bench on a quiet machine",
            file,
            "results",
        )
    ops: list[dict[str, Any]] = []
    notes: list[str] = []

    def add(name: str, flops: float, match: Any, unit: float) -> None:
        ops.append(
            {"op": name, "flops": flops, "rate": match.value, "time_s": flops / (match.value * unit), "basis": match.basis}
        )
        if match.extrapolated:
            notes.append(f"{name}: outside the measured range, nearest result used ({match.basis})")

    for name, n_out, k_in, count in (
        ("qkv", 3 * h, h, L),
        ("attn_proj", h, h, L),
        ("mlp_up", 4 * h, h, L),
        ("mlp_down", h, 4 * h, L),
        ("lm_head", V, h, 1),
    ):
        for pass_, (m, n, k) in (("fwd", (T, n_out, k_in)), ("bwd dX", (T, k_in, n_out)), ("bwd dW", (k_in, n_out, T))):
            add(f"{name} {pass_}", 2.0 * m * n * k * count, interpolate(gemm, gemm_intensity(m, n, k, el)), 1e12)
    fwd = 4.0 * b * h * s * s * L  # QK^T and AV of every head: 4 b H s^2 d = 4 b h s^2
    for pass_, mult in (("fwd", 1.0), ("bwd", 2.0)):  # the bench's convention: backward 2x the forward
        pts = _rate_points(profile, "attention", dtype, pass_)
        if pts:
            add(f"attention {pass_}", mult * fwd, interpolate(pts, attention_intensity(s, el)), 1e12)
        else:
            notes.append(f"no verified attention {pass_} result: attention {pass_} timed at the GEMM rate of QK^T")
            add(f"attention {pass_}", mult * fwd, interpolate(gemm, gemm_intensity(s, s, h // shape["heads"], el)), 1e12)
    bw = _rate_points(profile, "elementwise", dtype)
    if bw:
        elements = (REMAINDER_ELEMENTS_PER_LAYER * h * L + REMAINDER_ELEMENTS_PER_VOCAB * V) * T
        match = interpolate(bw, float(T * h))
        ops.append(
            {
                "op": "non_matmul",
                "flops": 0.0,
                "rate": match.value,
                "time_s": elements * el / (match.value * 1e9),
                "basis": match.basis,
            }
        )
        n_par = parameters(shape)
        ops.append(
            {
                "op": "optimizer (AdamW)",
                "flops": 0.0,
                "rate": match.value,
                "time_s": ADAMW_ELEMENTS_PER_PARAMETER * n_par * el / (match.value * 1e9),
                "basis": match.basis,
            }
        )
    else:
        notes.append("no verified elementwise result: the non-matmul remainder and the optimizer are not counted")
    step = sum(o["time_s"] for o in ops)
    for o in ops:
        o["share"] = o["time_s"] / step
    return {"step_time_s": step, "tokens_per_step": T, "ops": ops, "notes": notes, "dtype": dtype}


def build_model(shape: dict[str, int], seed: int = 0) -> Any:
    """Embedding, a pre-LN transformer encoder (SDPA inside), LM head: the model the example trace records."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    h, v = shape["hidden"], shape["vocab_size"]
    layer = nn.TransformerEncoderLayer(h, shape["heads"], 4 * h, dropout=0.0, batch_first=True, norm_first=True)
    encoder = nn.TransformerEncoder(layer, shape["layers"], enable_nested_tensor=False)
    return nn.Sequential(nn.Embedding(v, h), encoder, nn.Linear(h, v))


def make_batch(shape: dict[str, int], seed: int = 0) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    size = (shape["batch_size"], shape["seq_len"])
    return torch.randint(0, shape["vocab_size"], size, generator=g), torch.randint(0, shape["vocab_size"], size, generator=g)


def train_step(model: Any, opt: Any, x: Any, y: Any) -> None:
    import torch.nn.functional as F

    opt.zero_grad(set_to_none=True)
    logits = model(x)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
    opt.step()


def measure_step(shape: dict[str, int], threads: int, steps: int = 10, warmup: int = 3) -> dict[str, Any]:
    """Median seconds of a training step of `build_model(shape)` on this CPU (AdamW), with its 95 % CI."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = build_model(shape)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = make_batch(shape)
        for _ in range(warmup):
            train_step(model, opt, x, y)
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            train_step(model, opt, x, y)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    med, lo, hi = median_ci(times)
    return {"median_s": med, "ci95_s": [lo, hi], "steps": steps, "threads": threads, "stdev_s": statistics.pstdev(times)}


def main_predict(args: Any) -> int:
    """`footprint kernels predict --profile cpu.yaml --model SPEC [--steps N] [--format table|json]`."""
    import json
    import sys

    from footprint.kernels.machine import load
    from footprint.kernels.profile import load_profile

    shape = parse_model(args.model)
    steps = getattr(args, "steps", 10)
    if steps is None or steps < 3:
        raise FootprintError(f"--steps must be >= 3, got {steps}", key="--steps")
    profile = load_profile(args.profile)
    if profile.kind != "cpu":
        raise FootprintError(
            f"a {profile.kind} profile predicts scenarios (training.kernel_profile); this self-check compares with a step "
            "measured on this CPU: give a CPU profile (footprint kernels bench --device cpu)",
            str(args.profile),
            "device.kind",
        )
    dtype = "fp32"
    pred = predict_step(profile, shape, dtype)
    threads = int((profile.device.get("threads") or 0) or 1)
    state = load(window=0.3)
    meas = measure_step(shape, threads, steps)
    err = pred["step_time_s"] / meas["median_s"] - 1
    result = {
        "profile": str(args.profile),
        "device": profile.name,
        "model": shape,
        "parameters": parameters(shape),
        "predicted": pred,
        "measured": meas,
        "error": err,
        "machine": state,
        "method": "predicted = sum over the step's ops of FLOPs / the profile's measured rate (GEMM and attention "
        "TFLOP/s interpolated in log arithmetic intensity) + bytes / measured elementwise bandwidth; measured = "
        "median wall time of training steps of the same model on this CPU with the profile's thread count",
    }
    if getattr(args, "format", "table") == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    print(f"profile {args.profile} ({profile.name}, {threads} threads), model {shape} ({parameters(shape):,} parameters)")
    for o in sorted(pred["ops"], key=lambda o: -o["time_s"])[:8]:
        print(f"  {o['op']:<18} {o['time_s'] * 1e3:9.3f} ms  {o['share']:6.1%}  ({o['basis']})")
    lo, hi = meas["ci95_s"]
    print(
        f"predicted step {pred['step_time_s'] * 1e3:.2f} ms; measured {meas['median_s'] * 1e3:.2f} ms "
        f"(median of {steps}, 95% CI {lo * 1e3:.2f}-{hi * 1e3:.2f} ms); error {err:+.0%}"
    )
    for n in pred["notes"]:
        print(f"  - {n}")
    if state["loaded"]:
        print(
            f"footprint: warning: the machine is loaded ({'; '.join(state['reasons'])}): the measured step is noisy",
            file=sys.stderr,
        )
    return 0
