"""Trace parsing cost, side by side with Holistic Trace Analysis (HTA), in one run.

Builds a large synthetic PyTorch profiler trace (>= 100 MB of uncompressed JSON, in a temporary
directory) by replicating a real trace's events with shifted timestamps, correlation ids and External
ids, then analyses it in fresh processes: `footprint.kernels.trace.analyze_trace` (streaming) and HTA's
`TraceAnalysis` (its parser and DataFrame build, default JSON backend). Prints time, speed (MB/s of
uncompressed JSON), peak memory (max RSS of the process; and, in a second run under tracemalloc, the
peak Python heap during the analysis alone) and the ratios.

Run: python benchmarks/trace_bench.py [--trace PATH] [--mb 120] [--no-hta] [--hta-backend json|ijson_batch_and_compress]
HTA: pip install HolisticTraceAnalysis (not a footprint dependency).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = (
    REPO.parent / "shared/data/traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
)

OURS = """
import json, resource, sys, time, tracemalloc
from footprint.kernels.trace import analyze_trace
import footprint.lca.database as d; d.db().gpus  # catalogue load is a one-time cost, not parsing
if sys.argv[2] == "trace":
    tracemalloc.start()
t = time.perf_counter()
r = analyze_trace(sys.argv[1])
dt = time.perf_counter() - t
traced = tracemalloc.get_traced_memory()[1] if sys.argv[2] == "trace" else None
print(json.dumps({"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "traced": traced,
                  "parse_seconds": r["trace"]["parse_seconds"], "busy_us": r["busy_time_us"],
                  "kernels": r["launch_overhead"]["kernels"]}))
"""

HTA = """
import json, logging, resource, sys, time, tracemalloc
logging.disable(logging.CRITICAL)
from hta.configs.parser_config import ParserBackend, ParserConfig
from hta.trace_analysis import TraceAnalysis
cfg = ParserConfig.get_default_cfg()
cfg.set_parser_backend(ParserBackend(sys.argv[3]))
ParserConfig.set_default_cfg(cfg)
if sys.argv[4] == "trace":
    tracemalloc.start()
t = time.perf_counter()
a = TraceAnalysis(trace_files={0: sys.argv[1]}, trace_dir=sys.argv[2])
dt = time.perf_counter() - t
traced = tracemalloc.get_traced_memory()[1] if sys.argv[4] == "trace" else None
print(json.dumps({"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "traced": traced,
                  "events": int(len(a.t.get_trace(0)))}))
"""


def kineto_text(e: dict) -> str:
    """One event laid out as the PyTorch profiler (libkineto) writes it."""
    top = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in e.items() if k not in ("ts", "dur", "args"))
    lines = ["  {", f"    {top}" + ("," if any(k in e for k in ("ts", "dur", "args")) else "")]
    timing = ", ".join(f'"{k}": {json.dumps(e[k])}' for k in ("ts", "dur") if k in e)
    if timing:
        lines.append(f"    {timing}" + ("," if "args" in e else ""))
    if "args" in e:
        body = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in e["args"].items())
        lines += ['    "args": {', f"      {body}", "    }"]
    return "\n".join(lines) + "\n  }"


def build(src: Path, out: Path, target_mb: float) -> tuple[int, int]:
    """Write `src`'s events replicated until the file holds `target_mb` MB; returns (bytes, copies)."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        data = json.load(f)
    events = data.pop("traceEvents")
    one = sum(len(kineto_text(e)) + 2 for e in events)
    copies = max(1, int(target_mb * 1e6 // one) + 1)
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)
    ids = [
        v
        for e in events
        for v in ((e.get("args") or {}).get("correlation"), (e.get("args") or {}).get("External id"), e.get("id"))
        if isinstance(v, int)
    ]
    id_step = (max(ids) + 1) if ids else 0
    head = {k: v for k, v in data.items() if k != "metadata"}
    with open(out, "w") as f:
        f.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items() if k != "traceEvents"))
        f.write('  "traceEvents": [\n')
        first = True
        for k in range(copies):
            shift = k * (span + 1000.0)
            for e in events:
                if k:
                    e = dict(e)
                    if isinstance(e.get("ts"), (int, float)):
                        e["ts"] = e["ts"] + shift
                    if isinstance(e.get("id"), int):
                        e["id"] += k * id_step
                    args = e.get("args")
                    if isinstance(args, dict):
                        args = dict(args)
                        for key in ("correlation", "External id"):
                            if isinstance(args.get(key), int):
                                args[key] += k * id_step
                        e["args"] = args
                f.write(("" if first else ",\n") + kineto_text(e))
                first = False
        f.write("\n  ]\n}\n")
    return out.stat().st_size, copies


def run(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="real trace whose events are replicated")
    ap.add_argument("--mb", type=float, default=120.0, help="size of the synthetic trace (uncompressed MB)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of ours (best is reported; HTA: one timed run)")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument(
        "--hta-backend",
        default="json",
        help="HTA parser backend: json (its default), ijson, ijson_batched, ijson_batch_and_compress",
    )
    a = ap.parse_args()
    if not a.trace.is_file():
        ap.error(f"--trace {a.trace}: no such file (a Kineto JSON trace, .json or .json.gz)")
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp:
        path = Path(tmp) / "rank-0.json"
        t = time.perf_counter()
        size, copies = build(a.trace, path, a.mb)
        mb = size / 1e6
        print(
            f"synthetic trace: {mb:,.1f} MB of JSON ({copies} copies of {a.trace.name}), built in {time.perf_counter() - t:.1f} s"
        )
        ours = min((run(OURS, str(path), "time") for _ in range(max(1, a.runs))), key=lambda r: r["seconds"])
        ours_mem = run(OURS, str(path), "trace")["traced"]
        print(
            f"footprint: {ours['seconds']:.2f} s = {mb / ours['seconds']:.1f} MB/s (parse pass {ours['parse_seconds']:.2f} s);"
            f" peak RSS {ours['maxrss_kb'] / 1024:,.0f} MB (process, imports included); peak Python heap during "
            f"the analysis {ours_mem / 1e6:,.1f} MB ({ours_mem / size:.2f} x the JSON); {ours['kernels']:,} kernels, "
            f"busy {ours['busy_us'] / 1e3:,.1f} ms"
        )
        if a.no_hta:
            return 0
        import importlib.util

        if importlib.util.find_spec("hta") is None:
            print("HTA is not installed (pip install HolisticTraceAnalysis): no comparison")
            return 0
        try:
            hta = run(HTA, str(path), tmp, a.hta_backend, "time")
            hta_mem = run(HTA, str(path), tmp, a.hta_backend, "trace")["traced"]
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"HTA failed: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}")
            return 1
        print(
            f"HTA ({a.hta_backend} backend): {hta['seconds']:.2f} s = {mb / hta['seconds']:.1f} MB/s; peak RSS "
            f"{hta['maxrss_kb'] / 1024:,.0f} MB; peak Python heap {hta_mem / 1e6:,.1f} MB "
            f"({hta_mem / size:.2f} x the JSON); {hta['events']:,} events in its DataFrame"
        )
        print(
            f"ratio HTA / footprint: time {hta['seconds'] / ours['seconds']:.1f}x, peak RSS "
            f"{hta['maxrss_kb'] / ours['maxrss_kb']:.1f}x, peak Python heap {hta_mem / ours_mem:.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
