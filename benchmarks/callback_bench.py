"""Cost of footprint's transformers.Trainer callback per optimizer step, beside codecarbon measuring the same run.

Three set-ups, alternated round by round in one process on the same tiny GPT-2 (built from a config,
CPU, 2 micro-batches of 8 x 64 tokens per optimizer step, logging every 10 steps):
  none        the Trainer alone
  footprint   callbacks=[FootprintCallback(...)] (fake NVML, 1 GPU sampled at 10 Hz): tokens hook, windows,
              FLOPs of one step counted (FlopCounterMode), live metrics through Trainer.log at each logging step
  codecarbon  codecarbon's OfflineEmissionsTracker started before trainer.train() and stopped after it
              (what a codecarbon user does; HF's own CodeCarbonCallback wraps the online tracker)
The step time is the median gap between consecutive on_step_end events, the first 5 steps of a run
skipped (warm-up, and the one step footprint counts FLOPs on); the spread is over rounds. On a shared
machine that gap swings by tens of percent between rounds, so the benchmark also times what footprint
itself runs on the training thread: every callback event and the tokens hook (perf_counter around
each call), per optimizer step, and the one-time train begin / end (tracker start, run record, report).

Run: python benchmarks/callback_bench.py [--rounds 5] [--steps 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

os.environ.setdefault("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PrinterCallback, Trainer, TrainerCallback, TrainingArguments  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()


INNER: dict[str, float] = {}
HOT = ("on_step_begin", "on_step_end", "on_log", "on_evaluate", "on_save", "_count_tokens")
ONCE = ("on_train_begin", "on_train_end")


def timed(cb: Any) -> Any:
    """Wrap the callback's methods so that the time spent in them is added up (per method name)."""
    for name in HOT + ONCE:
        fn = getattr(cb, name)

        def wrapper(*args: Any, _fn: Any = fn, _name: str = name, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                INNER[_name] = INNER.get(_name, 0.0) + time.perf_counter() - t0

        setattr(cb, name, wrapper)
    return cb


class StepClock(TrainerCallback):
    def __init__(self) -> None:
        self.t: list[float] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.t.append(time.perf_counter())


def one_run(kind: str, steps: int, out: str) -> tuple[float, float]:
    """(median step time after warm-up, wall time of trainer.train() incl. start/stop of the measurement) in s."""
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=256, bos_token_id=0, eos_token_id=0)
    data = [{"input_ids": (x := torch.randint(0, 256, (64,))), "labels": x} for _ in range(steps * 16)]
    args = TrainingArguments(
        output_dir=f"{out}/{kind}",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        max_steps=steps,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        log_level="error",
    )
    clock = StepClock()
    callbacks: list[Any] = [clock]
    if kind == "footprint":
        from footprint.integrations.huggingface import FootprintCallback

        callbacks.insert(0, timed(FootprintCallback(name=f"bench-{time.monotonic_ns()}", output_dir=out, host=False)))
    trainer = Trainer(model=GPT2LMHeadModel(cfg), args=args, train_dataset=data, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # no console printing in the timed loop
    t0 = time.perf_counter()
    if kind == "codecarbon":
        from codecarbon import OfflineEmissionsTracker

        cc = OfflineEmissionsTracker(country_iso_code="FRA", save_to_file=False, log_level="error", measure_power_secs=1)
        cc.start()
        trainer.train()
        cc.stop()
    else:
        trainer.train()
    wall = time.perf_counter() - t0
    gaps = [b - a for a, b in zip(clock.t[5:-1], clock.t[6:], strict=False)]
    return statistics.median(gaps), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    torch.set_num_threads(1)  # a 2-core machine: leave one core to the samplers
    kinds = ["none", "footprint", "codecarbon"]
    step: dict[str, list[float]] = {k: [] for k in kinds}
    hot_us: list[float] = []
    once_ms: list[float] = []
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as out:
        one_run("none", 10, out)  # warm imports and kernels
        for r in range(a.rounds):
            for k in kinds[r % 3 :] + kinds[: r % 3]:  # rotate the order every round
                INNER.clear()
                s, w = one_run(k, a.steps, out)
                if k == "footprint":
                    hot_us.append(sum(INNER.get(n, 0.0) for n in HOT) / a.steps * 1e6)
                    once_ms.append(sum(INNER.get(n, 0.0) for n in ONCE) * 1e3)
                step[k].append(s * 1000)
                wall[k].append(w)

    def spread(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f})"

    base, best = statistics.median(step["none"]), min(step["none"])
    print(f"HF Trainer, tiny GPT-2 on CPU, {a.steps} optimizer steps x {a.rounds} rounds (alternated)")
    for k in kinds:
        m = statistics.median(step[k])
        print(
            f"  step time, {k:10s}: {spread(step[k])} ms  (median {(m - base) / base:+.2%}, "
            f"best round {(min(step[k]) - best) / best:+.2%} vs none)"
        )
    for k in kinds:
        print(f"  trainer.train() wall, {k:10s}: {spread(wall[k])} s")
    print(f"  footprint callback on the training thread, per optimizer step: {spread(hot_us)} us")
    print(f"  footprint callback, train begin + end (tracker start, run record): {spread(once_ms)} ms")


if __name__ == "__main__":
    main()
