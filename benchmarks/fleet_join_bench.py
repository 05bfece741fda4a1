"""The aggregated import's join without a server: who held which GPU (`attribution.Plan.build`) and the stretches
each job is evaluated over (`aggregate.holdings`), at the job counts of a 4,096-GPU month.

4,096 GPUs (8 a node; the first node without the job label, its GPUs' curves drawn at 300 W at 30 s scrapes),
N single-GPU jobs of 0.5-8 h on GPUs drawn at random over 30 days (so jobs overlap on a GPU, and its stretches
are shared: a harder case than a scheduler's), each known to SLURM and, on labelled nodes, by its label. Client
CPU (process time) of each step, the best of ``--repeat`` runs, per job; ``--sizes`` shows whether it grows
linearly. ``PYTHONPATH=OTHER_CHECKOUT python benchmarks/fleet_join_bench.py`` measures another version the same
way (the same seed, the same jobs).

Run: python benchmarks/fleet_join_bench.py [--sizes 100000,400000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
import types

import numpy as np

from footprint.fleet.aggregate import EdgeActivity, holdings
from footprint.fleet.attribution import Plan
from footprint.fleet.curves import Curve
from footprint.fleet.sacct_jobs import Allocation, SacctJobs, SlurmJob
from footprint.fleet.spans import LabelSpans
from footprint.fleet.telemetry import GPU_COUNTER, Device, Telemetry

GPUS, T0, SPAN = 4096, 1.7e9, 30 * 86400.0


def _fleet(n: int) -> tuple[Telemetry, SacctJobs, LabelSpans, EdgeActivity]:
    rng = np.random.default_rng(0)
    devs = [Device(i, GPU_COUNTER, f"n{i // 8:04d}", f"n{i // 8:04d}/gpu{i % 8}", i % 8, labelled=i >= 8) for i in range(GPUS)]
    tel = Telemetry(devices=devs)
    gpu = rng.integers(0, GPUS, n)
    start = T0 + rng.uniform(0, SPAN, n)
    end = start + rng.uniform(1800, 8 * 3600, n)
    sacct, spans = SacctJobs(), LabelSpans()
    for i, (g, a, b) in enumerate(zip(gpu.tolist(), start.tolist(), end.tolist(), strict=True)):
        job = str(100_000 + i)
        sacct.append(SlurmJob(job, None, "x", "u", "a", "p", "COMPLETED", a, b, None, [Allocation((devs[g].host,), (1,), None)]))
        if devs[g].labelled:
            spans.add(tel.label_id(job), g, a, b)
    t = np.arange(T0, T0 + SPAN, 30.0)
    curves = {d: Curve(t, np.arange(len(t)) * 300.0 * 30, np.arange(len(t)) * 30.0) for d in range(8)}
    return tel, sacct, spans, EdgeActivity(T0, T0 + SPAN, curves)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100000,400000")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    for n in [int(x) for x in args.sizes.split(",")]:
        tel, sacct, spans, act = _fleet(n)
        found = types.SimpleNamespace(fetch=types.SimpleNamespace(t=tel), jobs_on=spans)
        runs: dict[str, list[float]] = {"Plan.build": [], "holdings": []}
        items = 0
        for _ in range(args.repeat):
            plan = Plan(tel, (T0, T0 + SPAN))
            a = time.process_time()
            plan.build(sacct, spans, act, now=T0 + SPAN)
            b = time.process_time()
            items = len(holdings(plan, found))  # type: ignore[arg-type]
            runs["Plan.build"].append(b - a)
            runs["holdings"].append(time.process_time() - b)
        cells = [f"{k} {min(v):.2f} s ({min(v) / n * 1e6:.1f} us a job; max {max(v):.2f} s)" for k, v in runs.items()]
        print(f"{n:,} jobs, {items:,} stretches: " + ", ".join(cells))


if __name__ == "__main__":
    main()
