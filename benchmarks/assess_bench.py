"""Assessment throughput: time of one assessment with 1 and 10,000 Monte Carlo samples (percentiles, interquartile
range and the sensitivity table included), its parts, and import cost.

Run: python benchmarks/assess_bench.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, best) wall-clock seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def spread(fn, repeat: int) -> str:
    """Wall-clock and CPU time of ``repeat`` calls: median [min - max] in ms (CPU time: this process only, what a
    shared machine's other load does not add)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return (
        f"wall median {statistics.median(wall):.2f} ms [{min(wall):.2f} - {max(wall):.2f}], "
        f"CPU median {statistics.median(cpu):.2f} ms [{min(cpu):.2f} - {max(cpu):.2f}]"
    )


def main() -> None:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import footprint"], capture_output=True, text=True)
    total_us = sum(
        int(line.split("|")[1])
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and line.split("|")[2].strip() == "footprint"
    )
    print(f"import footprint (cumulative, -X importtime): {total_us / 1000:.1f} ms")

    from footprint.lca.engine import assess
    from footprint.lca.workload import load_scenario

    cold = time.perf_counter()
    w = load_scenario(REPO / "scenarios" / "bloom-176b.yaml")
    assess(w, samples=1)
    print(
        f"first scenario load + assessment (builds the unit registry and database): {(time.perf_counter() - cold) * 1000:.0f} ms"
    )
    med, best = timed(lambda: load_scenario(REPO / "scenarios" / "bloom-176b.yaml"), 20)
    print(f"load + validate scenario (warm): median {med * 1000:.2f} ms, best {best * 1000:.2f} ms")
    for n in (1, 10_000):
        what = "samples x 16 categories, percentiles and sensitivity table" if n > 1 else "sample (no Monte Carlo)"
        print(f"assess, {n:>6} {what}: {spread(lambda n=n: assess(w, samples=n), 30)}")
    from footprint.lca import engine as lca
    from footprint.lca import montecarlo

    d = lca.db()
    inp = lca._inputs(d, w, [], [])  # what assess draws from, built once outside the timing
    rel = lca._power_relative(d)
    print(
        f"Monte Carlo draws alone, 10,000 samples x 17 indicators: {spread(lambda: montecarlo.draw(w, 10_000, 0, inp, rel), 30)}"
    )
    draws = montecarlo.draw(w, 10_000, 0, inp, rel)
    print(f"percentiles + sensitivity table of those draws: {spread(lambda: montecarlo.summarise(draws), 30)}")
    print(f"total benchmark wall time: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
