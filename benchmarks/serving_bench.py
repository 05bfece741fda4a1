"""Serving at fleet scale: a month of a 64-GPU serving fleet (8 nodes x 8 H100, 4 models on vLLM, TGI and SGLang, one
pod per GPU, node RAPL on every node) through a real Prometheus, imported and assessed, against the PromQL lower bound.

The series come from `footprint.serving.synthetic.bench_fleet` (scraped every 60 s: DCGM energy counters, engine
counters and histogram sums), backfilled by promtool and served by Debian's prometheus on 127.0.0.1 (kept in
--cache between runs). Timed, alternated, each ``--repeat`` times:

- the lower bound: the import's PromQL alone (`footprint.serving.promsource.Queries.all`: the same range queries,
  same step, same chunks, answers decoded and dropped), in this process;
- `footprint serving import prometheus` then the report's assessment (`footprint.serving.report.build`: all models,
  four boundaries, 16 categories, per-unit figures), in a fresh process: wall time and its peak RSS.

Run: python benchmarks/serving_bench.py [--days 30] [--repeat 3] [--cache /tmp/footprint-serving-bench]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

START = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
WINDOW = 300.0

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.serving import report, store
from footprint.serving.assess import Site
from footprint.serving.importer import import_prometheus
t0 = time.perf_counter()
from footprint.serving.attribution import parse_map
gmap = parse_map({{"pods": {pods!r}}}, "bench")
import_prometheus({out!r}, PrometheusClient(PromConfig({url!r}, timeout_s=600)), {start}, {end}, {window}, 60.0, Site("FRA", 1.2),
                  gpu_map=gmap)
t1 = time.perf_counter()
meta, a = store.read({out!r})
rep = report.build(meta, a, Site("FRA", 1.2))
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "assess_s": t2 - t1, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "models": len(rep["models"]), "metered_kwh": rep["metered_gpu_j"] / 3.6e6,
                  "closure_j": rep["closure"]["difference_j"], "windows": int(a.models_w["window"].nunique())}}))
"""


def spread(xs: list[float], unit: str = "s") -> str:
    return f"median {statistics.median(xs):.2f} {unit} (min {min(xs):.2f}, max {max(xs):.2f}, n={len(xs)})"


def tsdb(cache: Path, days: float) -> Path:
    """The fleet's TSDB, generated and backfilled once per (days) into the cache."""
    from footprint.fleet import promserver
    from footprint.serving import synthetic

    d = cache / f"days-{days:g}"
    if (d / "tsdb" / "done").exists():
        return d / "tsdb"
    d.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    f = synthetic.bench_fleet(START, days=days, scrape_s=60.0)
    synthetic.write(f, d / "metrics.om")
    print(f"generated {d / 'metrics.om'} ({(d / 'metrics.om').stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t:.0f} s")
    t = time.perf_counter()
    promserver.backfill(d / "metrics.om", d / "tsdb")
    print(f"backfilled in {time.perf_counter() - t:.0f} s")
    (d / "metrics.om").unlink()
    (d / "tsdb" / "done").write_text("")
    return d / "tsdb"


def tgi_pods() -> dict[str, str]:
    """TGI publishes no model label: the map names the model of its pods, as a user would."""
    from footprint.serving import synthetic

    f = synthetic.bench_fleet(START, days=1 / 24)
    models = {m.name: m.engine for m in f.models}
    return {p.name: p.model for p in f.pods if models[p.model] == "tgi"}


def lower_bound(url: str, end: float) -> float:
    """The import's queries alone: same expressions, step and chunks; answers decoded, nothing else."""
    from footprint.fleet.prometheus import PromConfig, PrometheusClient
    from footprint.serving import engines
    from footprint.serving.promsource import MAX_POINTS, Queries
    from footprint.serving.telemetry import HOST_COUNTERS

    c = PrometheusClient(PromConfig(url, timeout_s=600))
    t = time.perf_counter()
    names = set(c.metric_names())
    found = engines.detect(names, url)
    queries = Queries(WINDOW).all(found, "DCGM_FI_DEV_POWER_USAGE" in names, [m for m in HOST_COUNTERS if m in names])
    n = int((end - START) // WINDOW)
    for q in queries:
        first = 1
        while first <= n:
            last = min(n, first + MAX_POINTS - 1)
            c.query_range(q, START + first * WINDOW, START + last * WINDOW, WINDOW)
            first = last + 1
    return time.perf_counter() - t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=float, default=30.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "footprint-serving-bench"))
    args = p.parse_args()
    from footprint.fleet import promserver

    if promserver.missing():
        print(f"skipped: {promserver.missing()}")
        return 0
    db = tsdb(Path(args.cache), args.days)
    end = START + args.days * 86400
    bound, full, imp, ass, peak = [], [], [], [], []
    info: dict = {}
    with promserver.serve(db, timeout_s=300) as url, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            bound.append(lower_bound(url, end))
            out = Path(tmp) / f"rec{i}"
            code = CHILD.format(repo=str(REPO), out=str(out), url=url, start=START, end=end, window=WINDOW, pods=tgi_pods())
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            full.append(time.perf_counter() - t)
            info = json.loads(r.stdout.strip().splitlines()[-1])
            imp.append(info["import_s"])
            ass.append(info["assess_s"])
            peak.append(info["peak_mb"])
    print(
        f"{args.days:g} days x 64 GPUs, {info['models']} models, {info['windows']} windows of {WINDOW:g} s; "
        f"GPU energy {info['metered_kwh']:,.0f} kWh; closure difference {info['closure_j']:.3g} J"
    )
    print(f"  PromQL lower bound (the import's queries alone): {spread(bound)}")
    print(f"  import (queries + attribution + record):         {spread(imp)}")
    print(f"  assessment (report.build: 4 boundaries x 16 categories, per unit): {spread(ass)}")
    print(f"  whole process (start-up, import, assessment):    {spread(full)}")
    both = statistics.median([a + b for a, b in zip(imp, ass, strict=True)])
    print(f"  ratio import+assessment / lower bound: {both / statistics.median(bound):.2f}x")
    print(f"  peak RSS of the process: {spread(peak, 'MB')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
