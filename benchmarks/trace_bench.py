"""Trace analysis cost, the whole `footprint kernels analyze` CLI against HTA's parse, alternated in one run.

Builds a large synthetic PyTorch profiler trace (default 178 MB of uncompressed JSON, in a temporary
directory) by replicating a real trace's events with shifted timestamps, correlation ids and External
ids in libkineto's layout. Then, round after round, alternated: the whole CLI in a fresh process
(`python -m footprint.cli kernels analyze TRACE --format json`, interpreter start, imports, catalogue
and output included; once with its default worker processes, once with FOOTPRINT_TRACE_WORKERS=1) and
HTA's `TraceAnalysis` constructor (its parser and DataFrame build, default JSON backend, timed inside
its process: HTA's parse alone, not its interpreter start). Prints the median and range of each, the
ratio per round, and the peak memory of the CLI: the sum of the peak RSS (VmHWM) of its process and
of each worker, sampled every 20 ms (an upper bound: pages a worker shares with its parent after the
fork count twice). The CLI runs as installed: its bytecode compiled first, and a first run (printed
apart from the rounds) fills an empty cache folder (pint's unit definitions, the validated GPU
catalogue: footprint.lca.diskcache) as a user's first command does.

Run: python benchmarks/trace_bench.py [--trace PATH] [--mb 178] [--rounds 5] [--no-hta] [--hta-python PY]
HTA: pip install HolisticTraceAnalysis (not a footprint dependency; --hta-python picks an interpreter
that has it, e.g. a virtual environment made for it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = (
    REPO.parent / "shared/data/traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
)

HTA = """
import json, logging, resource, sys, time
logging.disable(logging.CRITICAL)
from hta.configs.parser_config import ParserBackend, ParserConfig
from hta.trace_analysis import TraceAnalysis
cfg = ParserConfig.get_default_cfg()
cfg.set_parser_backend(ParserBackend(sys.argv[3]))
ParserConfig.set_default_cfg(cfg)
def cpu():
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
c, t = cpu(), time.perf_counter()
a = TraceAnalysis(trace_files={0: sys.argv[1]}, trace_dir=sys.argv[2])
dt, dc = time.perf_counter() - t, cpu() - c
print(json.dumps({"seconds": dt, "cpu_seconds": dc, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
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
    copies = max(1, math.ceil(target_mb * 1e6 / one))
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


def _tree_hwm_kb(root: int, seen: dict[int, int]) -> None:
    """Record in `seen` each process's peak RSS so far (VmHWM, kB), for a process and its descendants."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as fh:
                hwm = next((int(x.split()[1]) for x in fh if x.startswith("VmHWM:")), 0)
            seen[pid] = max(seen.get(pid, 0), hwm)
            with open(f"/proc/{pid}/task/{pid}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue


def cli(path: Path, workers: str | None, cache: Path) -> dict:
    """The whole CLI on `path` in a fresh process: wall seconds, peak memory (MB), and what it found."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "FOOTPRINT_CACHE_DIR": str(cache),
    }
    if workers:
        env["FOOTPRINT_TRACE_WORKERS"] = workers
    argv = [sys.executable, "-m", "footprint.cli", "kernels", "analyze", str(path), "--format", "json"]
    seen: dict[int, int] = {}
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def watch() -> None:
        while p.poll() is None:
            _tree_hwm_kb(p.pid, seen)
            time.sleep(0.02)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    out, err = p.communicate(timeout=1800)
    dt = time.perf_counter() - t
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w.join()
    if p.returncode != 0:
        raise RuntimeError(err.decode()[-2000:])
    r = json.loads(out)
    return {
        "seconds": dt,
        "cpu_seconds": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime),
        "peak_mb": sum(seen.values()) / 1024,
        "busy_us": r["busy_time_us"],
        "kernels": r["launch_overhead"]["kernels"],
        "parse_seconds": r["trace"]["parse_seconds"],
    }


def run(code: str, *args: str, python: str = sys.executable) -> dict:
    p = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"median {fmt.format(statistics.median(values))} (min {fmt.format(min(values))}, max {fmt.format(max(values))})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="real trace whose events are replicated")
    ap.add_argument("--mb", type=float, default=178.0, help="size of the synthetic trace (uncompressed MB)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds (each: footprint, footprint 1 worker, HTA)")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--hta-python", default=sys.executable, help="the interpreter with HolisticTraceAnalysis installed")
    ap.add_argument(
        "--hta-backend",
        default="json",
        help="HTA parser backend: json (its default), ijson, ijson_batched, ijson_batch_and_compress",
    )
    a = ap.parse_args()
    if not a.trace.is_file():
        ap.error(f"--trace {a.trace}: no such file (a Kineto JSON trace, .json or .json.gz)")
    hta_ok = not a.no_hta and subprocess.run([a.hta_python, "-c", "import hta"], capture_output=True).returncode == 0
    if not a.no_hta and not hta_ok:
        print(f"HTA is not importable by {a.hta_python} (pip install HolisticTraceAnalysis): no comparison")
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp:
        path = Path(tmp) / "rank-0.json"
        t = time.perf_counter()
        size, copies = build(a.trace, path, a.mb)
        mb = size / 1e6
        print(
            f"synthetic trace: {mb:,.1f} MB of JSON ({copies} copies of {a.trace.name}), built in {time.perf_counter() - t:.1f} s"
        )
        print(f"cores usable: {len(os.sched_getaffinity(0))}; load average before: {os.getloadavg()[0]:.2f}")
        # As installed: bytecode compiled (pip does it at install; PYTHONDONTWRITEBYTECODE would otherwise make
        # every run compile the package again). The first run fills an empty cache folder (pint's unit definitions,
        # the validated GPU catalogue) as a user's first command does; the rounds then find it warm.
        subprocess.run([sys.executable, "-m", "compileall", "-q", "footprint", "lca_data"], cwd=REPO, capture_output=True)
        cache = Path(tmp) / "cache"
        first = cli(path, None, cache)
        print(
            f"first run, empty cache folder (unit definitions and GPU catalogue built and checked): {first['seconds']:.2f} s, "
            f"CPU {first['cpu_seconds']:.2f} s"
        )
        ours: list[dict] = []
        one: list[dict] = []
        hta: list[dict] = []
        for _ in range(max(1, a.rounds)):
            ours.append(cli(path, None, cache))
            one.append(cli(path, "1", cache))
            if hta_ok:
                hta.append(run(HTA, str(path), tmp, a.hta_backend, python=a.hta_python))
        s = [r["seconds"] for r in ours]
        print(
            f"footprint CLI (default workers): {spread(s)} s = {mb / statistics.median(s):.0f} MB/s; parse pass "
            f"{spread([r['parse_seconds'] for r in ours])} s; peak memory (process tree) "
            f"{spread([r['peak_mb'] for r in ours], '{:.0f}')} MB; {ours[0]['kernels']:,} kernels, "
            f"busy {ours[0]['busy_us'] / 1e3:,.1f} ms"
        )
        s1 = [r["seconds"] for r in one]
        print(
            f"footprint CLI (FOOTPRINT_TRACE_WORKERS=1): {spread(s1)} s = {mb / statistics.median(s1):.0f} MB/s; peak memory "
            f"{spread([r['peak_mb'] for r in one], '{:.0f}')} MB; busy {one[0]['busy_us'] / 1e3:,.1f} ms"
        )
        print(
            f"CPU time (user + system, all processes): footprint CLI {spread([r['cpu_seconds'] for r in ours])} s, "
            f"1 worker {spread([r['cpu_seconds'] for r in one])} s"
        )
        if not hta:
            return 0
        h = [r["seconds"] for r in hta]
        print(
            f"HTA ({a.hta_backend} backend), TraceAnalysis() alone: {spread(h)} s = {mb / statistics.median(h):.1f} MB/s; "
            f"peak RSS {spread([r['maxrss_kb'] / 1024 for r in hta], '{:.0f}')} MB; {hta[0]['events']:,} events in its DataFrame"
        )
        print(
            f"ratio HTA parse / footprint whole CLI, per round: {spread([x / y for x, y in zip(h, s, strict=True)], '{:.1f}')}x "
            f"(1 worker: {spread([x / y for x, y in zip(h, s1, strict=True)], '{:.1f}')}x)"
        )
        hc, oc, oc1 = [r["cpu_seconds"] for r in hta], [r["cpu_seconds"] for r in ours], [r["cpu_seconds"] for r in one]
        print(
            f"CPU time: HTA parse {spread(hc)} s; ratio HTA / footprint CLI per round "
            f"{spread([x / y for x, y in zip(hc, oc, strict=True)], '{:.1f}')}x "
            f"(1 worker: {spread([x / y for x, y in zip(hc, oc1, strict=True)], '{:.1f}')}x)"
        )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
