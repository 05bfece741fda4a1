"""Record a short CPU training trace: a small transformer encoder, five profiler steps, shapes recorded.

    python examples/cpu_training_trace.py [-o examples/traces/cpu_training.json.gz] [--steps 5]

Writes a PyTorch profiler (Kineto) trace, gzipped, of ``schedule(wait=1, warmup=1, active=STEPS)``
training steps of `tiny_model()` (2 encoder layers, hidden 128, 4 heads, batch 8 x 64 tokens, a
vocabulary of 1,000; AdamW), with ``record_shapes=True`` so that `footprint kernels analyze` can count
each operator's FLOPs. The trace in the repository (examples/traces/cpu_training.json.gz) was made by
this script; the README, the dashboard's Kernels page and the tests use it. `model_flops_per_step()`
counts the same step with torch's FlopCounterMode (footprint.flops.counting.measure_flops), the
reference the trace's FLOPs are checked against.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any

from footprint.kernels.selfcheck import train_step

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "traces" / "cpu_training.json.gz"
SHAPE = {"layers": 2, "hidden": 128, "heads": 4, "seq_len": 64, "batch_size": 8, "vocab_size": 1000}  # = selfcheck.EXAMPLE


def tiny_model(seed: int = 0) -> Any:
    """The example's model (footprint.kernels.selfcheck.build_model of SHAPE), the one `kernels predict --model example` times."""
    from footprint.kernels.selfcheck import build_model

    return build_model(SHAPE, seed)


def batch(seed: int = 0) -> tuple[Any, Any]:
    from footprint.kernels.selfcheck import make_batch

    return make_batch(SHAPE, seed)


def model_flops_per_step() -> int:
    """FLOPs of one training step (forward and backward) by torch's FlopCounterMode."""
    import torch
    import torch.nn.functional as F

    from footprint.flops.counting import measure_flops

    model = tiny_model()
    x, y = batch()

    def fwd_bwd() -> None:
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()

    with torch.enable_grad():
        return measure_flops(fwd_bwd)


def record(out: Path = DEFAULT_OUT, steps: int = 5, threads: int = 1) -> Path:
    """Train and profile; write the gzipped trace to `out`."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(threads)
    model = tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = batch()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=steps),
            record_shapes=True,
            on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
        ) as prof:
            for _ in range(steps + 2):
                train_step(model, opt, x, y)
                prof.step()
        with open(raw, "rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--steps", type=int, default=5, help="active (recorded) profiler steps")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: a reproducible trace)")
    a = ap.parse_args()
    path = record(a.output, a.steps, a.threads)
    print(
        f"wrote {path} ({path.stat().st_size / 1e3:,.0f} kB); FlopCounterMode: {model_flops_per_step() / 1e9:.4g} GFLOP per step"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
