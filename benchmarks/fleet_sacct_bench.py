"""The client's per-job work at cluster scale: sacct parsed (columnar against the rules line by line), and the
ledger written from the jobs' energies (`job_rows.JobRows`, 2,000 jobs a chunk, as the aggregated import does).

    python benchmarks/fleet_sacct_bench.py [--jobs 630000] [--repeat 2]

Writes a `sacct --parsable2` export of ``--jobs`` GPU jobs as `footprint.fleet.synthetic.sacct_text` prints
them (a job line, then its batch, extern and one step line; 1-8 GPUs on nodes of 8, 0.5-8 h over a month,
4,096 GPUs), then parses it in fresh processes, `parse_sacct(columnar=True)` and `columnar=False` alternated,
each timed around `read_sacct` alone (wall and process CPU: on a shared machine the CPU is the steadier
figure); peak RSS is the process's, Arrow and pandas imported first (the import holds them anyway). Then, in
``--repeat`` more fresh processes, the jobs' ledger and job_gpus rows: each job given energy and seconds on as
many GPUs of its node as it holds, plus its node's CPU meter, written chunk by chunk into a fleet directory
(timed apart from the parse). Prints medians with min-max.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from footprint.fleet.slurm import SACCT_FIELDS

CHILD = """
import json, resource, sys, time
from datetime import UTC
import pandas, pyarrow.compute, pyarrow.parquet
from footprint.fleet import slurm
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], newline=None) as f:
    r = slurm.parse_sacct(f, UTC, sys.argv[1], columnar=sys.argv[2] == "1")
wall, cpu = time.perf_counter() - t, time.process_time() - c
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": wall, "cpu": cpu, "jobs": len(r.jobs), "rss_mb": peak / 1024, "base_mb": base / 1024}))
"""


LEDGER = """
import json, resource, sys, tempfile, time
from datetime import UTC
import numpy as np, pandas, pyarrow.parquet
from footprint.fleet import slurm
from footprint.fleet.attribution import Plan
from footprint.fleet.job_rows import JobRows, catalogue_id
from footprint.fleet.jobtable import SLURM, JobTable
from footprint.fleet.store import FleetWriter
from footprint.fleet.telemetry import CPU, GPU_COUNTER, Device, Telemetry
with open(sys.argv[1], newline=None) as f:
    sacct = slurm.parse_sacct(f, UTC, sys.argv[1])
jobs = sacct.jobs
hosts = sorted({h for i in range(len(jobs)) for h in jobs.hosts(i)[0]})
tel = Telemetry()
for h in hosts:
    for g in range(8):
        tel.devices.append(Device(len(tel.devices), GPU_COUNTER, h, f"{h}:{g}", g, f"GPU-{h}-{g}", "NVIDIA H100 80GB HBM3"))
    tel.devices.append(Device(len(tel.devices), CPU, h, f"{h}:cpu"))
first = {h: 9 * k for k, h in enumerate(hosts)}
start, end = jobs.column("start"), jobs.column("end")
plan = Plan(tel, (float(start.min()), float(end.max())))
plan.jobs = table = JobTable(jobs)
for i in range(len(jobs)):
    table.add(jobs.job_id[i], SLURM, start[i], end[i], i)
catalogue_id("NVIDIA H100 80GB HBM3")  # the GPU catalogue loaded once, before the clock
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rng = np.random.default_rng(0)
made = made_cpu = 0.0
t0, cpu0 = time.perf_counter(), time.process_time()
with tempfile.TemporaryDirectory() as tmp, FleetWriter(tmp + "/fleet") as w:
    w.records = False
    rows = JobRows(plan, {}, {"grid": "FRA", "pue": 1.2})
    for c0 in range(0, len(table), 2000):
        t1, c1 = time.perf_counter(), time.process_time()
        pair_j, pair_s = {}, {}
        for j in range(c0, min(c0 + 2000, len(table))):
            (h, k), = table[j].gpus_by_host.items()
            g0 = first[h] + int(rng.integers(0, 9 - k))
            for d in range(g0, g0 + k):
                pair_j[(j, d)], pair_s[(j, d)] = 1e6, end[j] - start[j]
            pair_j[(j, first[h] + 8)] = 2e5
        made += time.perf_counter() - t1
        made_cpu += time.process_time() - c1
        ledger, devices = rows.columns(range(c0, min(c0 + 2000, len(table))), pair_j, pair_s)
        w.add_jobs_columns(ledger)
        w.add_devices_columns(devices)
    w.close_ledger()
    wall = time.perf_counter() - t0 - made  # the pairs are the evaluation's (aggregate), not the ledger's
    cpu = time.process_time() - cpu0 - made_cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": wall, "cpu": cpu, "jobs": len(table), "rss_mb": peak / 1024, "base_mb": base / 1024}))
"""


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def write_export(path: Path, jobs: int, gpus: int = 4096, seed: int = 0) -> None:
    rng = random.Random(seed)
    start0 = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
    users = [f"user{i:03d}" for i in range(200)]
    with path.open("w") as f:
        f.write("|".join(SACCT_FIELDS) + "\n")
        for i in range(jobs):
            n = rng.choice((1, 1, 1, 2, 4, 8))
            node = rng.randrange(gpus // 8)
            start = start0 + rng.uniform(0, 30 * 86400)
            dur = rng.uniform(1800, 8 * 3600)
            end = start + dur
            elapsed = f"{int(dur) // 3600:02d}:{int(dur) % 3600 // 60:02d}:{int(dur) % 60:02d}"
            tres = f"billing={8 * n},cpu={8 * n},gres/gpu={n},mem={64 * n}G,node=1"
            job, user = str(100_000 + i), rng.choice(users)
            row = [job, job, "train", user, f"proj-{user[-2:]}", "gpu", _ts(start), _ts(end), elapsed, tres]
            f.write("|".join([*row, f"gpu-{node:04d}", "COMPLETED", ""]) + "\n")
            for step in ("batch", "extern", "0"):
                srow = [f"{job}.{step}", f"{job}.{step}", step, "", row[4], "", row[6], row[7], elapsed, tres]
                f.write("|".join([*srow, f"gpu-{node:04d}", "COMPLETED", ""]) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=630_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sacct.txt"
        write_export(path, args.jobs)
        size = path.stat().st_size / 1e6
        print(f"sacct export: {args.jobs:,} jobs, {size:.0f} MB")
        runs: dict[str, list[dict]] = {"columnar": [], "line by line": []}
        for _ in range(args.repeat):
            for name, flag in (("columnar", "1"), ("line by line", "0")):
                out = subprocess.run([sys.executable, "-c", CHILD, str(path), flag], capture_output=True, text=True, check=True)
                runs[name].append(json.loads(out.stdout))
        for name, rs in runs.items():
            w, c = [r["wall"] for r in rs], [r["cpu"] for r in rs]
            rss = [r["rss_mb"] for r in rs]
            print(
                f"{name:13s} {statistics.median(w):6.2f} s ({min(w):.2f}-{max(w):.2f}), CPU {statistics.median(c):.2f} s "
                f"({min(c):.2f}-{max(c):.2f}), {statistics.median(c) / args.jobs * 1e6:5.1f} us/job of CPU, "
                f"peak RSS {statistics.median(rss):.0f} MB "
                f"({rs[0]['base_mb']:.0f} MB with Arrow and pandas imported), {rs[0]['jobs']:,} jobs"
            )
        cmd = [sys.executable, "-c", LEDGER, str(path)]
        rs = [json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout) for _ in range(args.repeat)]
        r = rs[0]
        w, c = [x["wall"] for x in rs], [x["cpu"] for x in rs]
        print(
            f"ledger rows   {statistics.median(w):6.2f} s ({min(w):.2f}-{max(w):.2f}), CPU {statistics.median(c):.2f} s "
            f"({min(c):.2f}-{max(c):.2f}), {statistics.median(c) / r['jobs'] * 1e6:5.1f} us/job of CPU (ledger and job_gpus "
            "written), "
            f"peak RSS {r['rss_mb']:.0f} MB ({r['base_mb']:.0f} MB with the jobs parsed and the plan's table built)"
        )


if __name__ == "__main__":
    main()
