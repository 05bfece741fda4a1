"""Tracker cost, side by side with codecarbon's tracker, in one run.

Prints: cold start time (new process: import + start), overhead per step of a CPU-bound training-like
loop with 8 fake GPUs sampled at 10 Hz (goal < 1 %), and the trackers' CPU use.

Run: python benchmarks/tracker_bench.py [--steps 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

FAKE = "8xH100-SXM5-80GB"
START_OURS = """
import time, tempfile
t0 = time.perf_counter()
import footprint
t = footprint.track(name="bench", output_dir=tempfile.mkdtemp()).start()
print((time.perf_counter() - t0) * 1000)
t.stop()
"""
START_CC = """
import time, logging
t0 = time.perf_counter()
from codecarbon import OfflineEmissionsTracker
t = OfflineEmissionsTracker(country_iso_code="FRA", save_to_file=False, log_level="error", measure_power_secs=1)
t.start()
print((time.perf_counter() - t0) * 1000)
t.stop()
"""


def cold_start(code: str, runs: int) -> float:
    env = {**os.environ, "FOOTPRINT_FAKE_NVML": FAKE}
    vals = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
        if out.returncode != 0 or not lines:
            raise RuntimeError(out.stderr[-500:])
        vals.append(float(lines[0]))
    return statistics.median(vals)


def work(n: int = 60_000) -> int:
    """A CPU-bound step holding the GIL (the worst case for a Python sampler thread): ~10 ms."""
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def loop(steps: int, tracker=None) -> tuple[float, float]:
    """(wall seconds per step, process CPU seconds per step)."""
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        work()
        if tracker is not None:
            tracker.step(tokens=1)
    return (time.perf_counter() - w0) / steps, (time.process_time() - c0) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=25, help="steps per block")
    ap.add_argument("--rounds", type=int, default=40, help="interleaved blocks per tracker")
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    os.environ["FOOTPRINT_FAKE_NVML"] = FAKE

    ours = cold_start(START_OURS, args.starts)
    cc = cold_start(START_CC, max(2, args.starts // 2))
    print(
        f"cold start (new process, import + start): footprint {ours:.0f} ms | codecarbon {cc:.0f} ms "
        f"| ratio codecarbon/footprint {cc / ours:.1f}x"
    )

    from codecarbon import OfflineEmissionsTracker

    import footprint

    loop(20)  # warm up
    t = footprint.track(name="bench", output_dir=tempfile.mkdtemp(), period_s=0.1).start()
    c0 = time.process_time()
    for m in t._sampler.meters:  # the host CPU estimate resolves codecarbon's TDP table in the background once
        if hasattr(m, "wait_resolved"):
            m.wait_resolved(30)
    print(
        f"one-time background cost of the host CPU estimate (codecarbon's TDP lookup): "
        f"{time.process_time() - c0:.2f} s CPU (off the step path; none where RAPL is readable)"
    )
    cc_t = OfflineEmissionsTracker(country_iso_code="FRA", save_to_file=False, log_level="error", measure_power_secs=1)
    cc_t.start()
    cc_t.stop()  # warm codecarbon too, so no import cost lands in its blocks
    clock = time.pthread_getcpuclockid(t._sampler._thread.ident)
    s_cpu0, s_wall0 = time.clock_gettime(clock), time.monotonic()
    base, ours_l, cc_l = [], [], []
    for _ in range(args.rounds):  # short interleaved blocks: CPU-speed drift hits all three alike
        base.append(loop(args.steps))
        ours_l.append(loop(args.steps, t))
        cc_t.start()
        cc_l.append(loop(args.steps))
        cc_t.stop()
    sampler_cpu = (time.clock_gettime(clock) - s_cpu0) / (time.monotonic() - s_wall0)
    stats = t._sampler.tick_stats()
    t.stop()
    b = statistics.median(x[0] for x in base)
    o = statistics.median(x[0] for x in ours_l)
    c = statistics.median(x[0] for x in cc_l)
    print(
        f"step time, CPU-bound loop ({args.rounds} interleaved blocks of {args.steps} steps, medians): "
        f"no tracker {b * 1000:.3f} ms | footprint (8 fake GPUs, 10 Hz) {o * 1000:.3f} ms ({(o / b - 1) * 100:+.2f} %)"
        f" | codecarbon (1 Hz) {c * 1000:.3f} ms ({(c / b - 1) * 100:+.2f} %)"
    )
    print(
        f"footprint sampler thread CPU: {sampler_cpu * 100:.2f} % of one core; {stats.get('ticks', 0):.0f} ticks, "
        f"wall per tick median {stats.get('median_s', 0) * 1e3:.2f} ms (includes waiting for the GIL held by the loop)"
    )


if __name__ == "__main__":
    main()
