"""Tracker cost beside codecarbon and Zeus, each figure measuring exactly what it names.

1. Cold start of a tracked process: the wall time of a whole fresh process that imports the tool,
   starts a tracker and stops it (interpreter start included; a bare `python -c pass` is timed too).
   footprint, codecarbon and Zeus alternate, one fresh process each per round.
2. Per-step overhead: the same training-like step timed in blocks of `--block` seconds with no
   tracker at all, then with each tool running (started before the block, stopped after: start and
   stop are outside the timed block, and nothing else samples during any block), rounds alternated.
   Two steps: a GIL-bound pure-Python step (the worst case for a Python sampling thread) and a
   numpy (or torch) step that releases the GIL. Overhead = time per step with the tool / without - 1,
   paired by round, median (range) over rounds, in wall time (what the job feels) and in process CPU
   time (every thread of the process, the tool's own included; not inflated by other processes on a
   shared machine, and for a GIL-bound step an upper bound of the wall overhead). Goal: under 1 %.
   Also the footprint sampler thread's own CPU time per second of run (its thread CPU clock: exact on
   a busy machine; with a GIL-bound step it is about what the step loses, GIL hand-offs aside).

Each tool measures what it can on this machine: footprint samples 8 fake H100s (the real NVML meter
code against `meters.fake_nvml`, 10 Hz) plus host CPU and RAM (codecarbon's estimate method);
codecarbon (`OfflineEmissionsTracker`, measure_power_secs=1 so it does sample within a block) and
Zeus (`ZeusMonitor` windows, no background sampling) find no GPU here and measure the CPU/RAM they can.

    python benchmarks/tracker_bench.py [--starts 7] [--rounds 6] [--block 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

FAKE = "8xH100-SXM5-80GB"
PROCESS = {
    "python -c pass": "pass",
    "footprint": (
        "import tempfile, footprint\nt = footprint.track(name='bench', output_dir=tempfile.mkdtemp()).start()\nt.stop()\n"
    ),
    "footprint (host=False)": (
        "import tempfile, footprint\n"
        "t = footprint.track(name='bench', output_dir=tempfile.mkdtemp(), host=False).start()\n"
        "t.stop()\n"
    ),
    "codecarbon": (
        "from codecarbon import OfflineEmissionsTracker\n"
        "t = OfflineEmissionsTracker(country_iso_code='FRA', save_to_file=False, log_level='error')\n"
        "t.start()\n"
        "t.stop()\n"
    ),
    "zeus": ("from zeus.monitor import ZeusMonitor\nm = ZeusMonitor()\nm.begin_window('w')\nm.end_window('w')\n"),
}


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def fmt(values: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    v = sorted(x * scale for x in values)
    return f"{statistics.median(v):.0f} {unit} ({v[0]:.0f}-{v[-1]:.0f})"


def cold_starts(runs: int) -> dict[str, list[float]]:
    """Whole-process wall time per tool, tools alternated round by round (rotated order)."""
    env = {**os.environ, "FOOTPRINT_FAKE_NVML": FAKE, "PYTHONWARNINGS": "ignore"}
    tools = [k for k in PROCESS if k not in ("codecarbon", "zeus") or have(k)]
    times: dict[str, list[float]] = {k: [] for k in tools}
    for r in range(runs):
        order = tools[r % len(tools) :] + tools[: r % len(tools)]
        for name in order:
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", PROCESS[name]], capture_output=True, text=True, env=env)
            dt = time.perf_counter() - t0
            if out.returncode != 0:
                raise RuntimeError(f"{name}: {out.stderr[-600:]}")
            times[name].append(dt)
    return times


# ---- per-step overhead -------------------------------------------------------------------------------
def python_step(n: int = 60_000) -> int:
    """A GIL-bound step (pure Python), ~10 ms."""
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def make_array_step() -> tuple[str, Callable[[], Any]]:
    """A step that releases the GIL: a matmul chain in torch (one thread) where installed, else numpy."""
    if have("torch"):
        import torch

        torch.set_num_threads(1)
        lib: Any = torch
        a, label = torch.randn(384, 384), "torch matmul (1 thread)"
    else:
        import numpy as np

        lib = np
        a, label = np.random.default_rng(0).standard_normal((384, 384)), "numpy matmul"

    def step() -> Any:
        x = a
        for _ in range(4):
            x = lib.tanh(x @ a) * 0.1
        return x

    return label, step


class NoTool:
    """No tracker at all (and the base of the others: each does nothing until it overrides)."""

    name = "none"

    def start(self) -> None:
        pass

    def step(self) -> None:
        pass

    def stop(self) -> None:
        pass


class Footprint(NoTool):
    name = "footprint"

    def __init__(self, out: str) -> None:
        self.out, self.t, self.n = out, None, 0
        self.thread_cpu = self.thread_wall = 0.0

    def start(self) -> None:
        import footprint

        self.n += 1
        self.t = footprint.track(name=f"b{self.n}", output_dir=self.out, period_s=0.1).start()
        self._clock = time.pthread_getcpuclockid(self.t._sampler._thread.ident)
        self._c0, self._w0 = time.clock_gettime(self._clock), time.perf_counter()

    def step(self) -> None:
        self.t.step(tokens=1)

    def stop(self) -> None:
        # the sampler thread's own CPU time: exact whatever else runs on the machine
        self.thread_cpu += time.clock_gettime(self._clock) - self._c0
        self.thread_wall += time.perf_counter() - self._w0
        self.t.stop()

    def sampler_stats(self) -> dict[str, float]:
        return self.t._sampler.tick_stats() if self.t and self.t._sampler else {}


class Codecarbon(NoTool):
    name = "codecarbon"

    def start(self) -> None:
        from codecarbon import OfflineEmissionsTracker

        self.t = OfflineEmissionsTracker(country_iso_code="FRA", save_to_file=False, log_level="error", measure_power_secs=1)
        self.t.start()

    def stop(self) -> None:
        self.t.stop()


class Zeus(NoTool):
    name = "zeus"

    def start(self) -> None:
        from zeus.monitor import ZeusMonitor

        self.m = getattr(self, "m", None) or ZeusMonitor()
        self.m.begin_window("block")

    def stop(self) -> None:
        self.m.end_window("block")


def calibrate(step: Callable[[], Any], seconds: float) -> int:
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.5:
        step()
        n += 1
    per = (time.perf_counter() - t0) / n
    return max(5, int(seconds / per))


def block(step: Callable[[], Any], tool: Any, steps: int) -> tuple[float, float]:
    """(wall, process CPU) seconds per step over one block with `tool` running (its start and stop are not
    timed). Process CPU counts every thread of this process (the tools' samplers included) and, unlike wall
    time, is not inflated when other processes take the CPU."""
    tool.start()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
            tool.step()
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
    finally:
        tool.stop()


def overhead(label: str, step: Callable[[], Any], tools: list[Any], rounds: int, seconds: float) -> None:
    steps = calibrate(step, seconds)
    for tool in tools:  # warm each tool once (imports, the CPU estimate's table, NVML init) outside the blocks
        block(step, tool, 3)
        if isinstance(tool, Footprint):
            tool.thread_cpu = tool.thread_wall = 0.0
    per: dict[str, list[tuple[float, float]]] = {t.name: [] for t in tools}
    for r in range(rounds):
        order = tools[r % len(tools) :] + tools[: r % len(tools)]
        for tool in order:
            per[tool.name].append(block(step, tool, steps))
    base = per["none"]
    print(
        f"{label}: {steps} steps per block ({statistics.median(b[0] for b in base) * 1e3:.2f} ms per step without "
        f"a tracker), {rounds} rounds"
    )
    for tool in tools:
        if tool.name == "none":
            continue
        wall = [(x[0] / b[0] - 1) * 100 for x, b in zip(per[tool.name], base, strict=True)]
        cpu = [(x[1] / b[1] - 1) * 100 for x, b in zip(per[tool.name], base, strict=True)]
        extra = ""
        if isinstance(tool, Footprint):
            st = tool.sampler_stats()
            share = tool.thread_cpu / tool.thread_wall * 100 if tool.thread_wall else float("nan")
            extra = f"; sampler thread CPU {share:.2f} % of one core"
            if st.get("ticks"):
                extra += f", tick median {st['median_s'] * 1e3:.2f} ms wall"
            tool.thread_cpu = tool.thread_wall = 0.0
        print(
            f"  {tool.name:<10} wall {statistics.median(wall):+.2f} % ({min(wall):+.2f} to {max(wall):+.2f}), "
            f"process CPU {statistics.median(cpu):+.2f} % ({min(cpu):+.2f} to {max(cpu):+.2f}) per step{extra}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=7, help="fresh processes per tool for the cold start")
    ap.add_argument("--rounds", type=int, default=8, help="alternated blocks per tool and step kind")
    ap.add_argument("--block", type=float, default=3.0, help="seconds per timed block")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; figures: median (min-max)")
    missing = [m for m in ("codecarbon", "zeus") if not have(m)]
    if missing:
        print(f"not installed, skipped: {', '.join(missing)} (pip install -e '.[bench]' for Zeus)")

    times = cold_starts(args.starts)
    print(f"\n1. Cold start, whole process (import + start + stop), {args.starts} fresh processes each, alternated:")
    for name, v in times.items():
        print(f"  {name:<24} {fmt(v)}")
    ours = statistics.median(times["footprint"])
    for peer in ("codecarbon", "zeus"):
        if peer in times:
            theirs = statistics.median(times[peer])
            print(f"  {peer}/footprint: {theirs / ours:.1f}x (goal >= 5x against codecarbon)")

    os.environ["FOOTPRINT_FAKE_NVML"] = FAKE
    import logging

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    out = tempfile.mkdtemp()
    tools: list[Any] = [NoTool(), Footprint(out)]
    if have("codecarbon"):
        tools.append(Codecarbon())
    if have("zeus"):
        tools.append(Zeus())
    print(f"\n2. Per-step overhead, blocks of {args.block:g} s, nothing else sampling:")
    overhead("GIL-bound Python step", python_step, tools, args.rounds, args.block)
    label, array_step = make_array_step()
    overhead(f"{label} step (releases the GIL)", array_step, tools, args.rounds, args.block)


if __name__ == "__main__":
    main()
