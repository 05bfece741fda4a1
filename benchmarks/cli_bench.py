"""The CLI's fixed cost: whole-process wall time of short commands, a fresh process each, alternated.

    python -c pass                                   the interpreter alone
    footprint --help                                 imports and argument parsing
    footprint assess bloom-176b.yaml --samples 0     unit registry + database + scenario + one assessment,
                                                     pint's definitions cache warm, then cold (a new empty
                                                     FOOTPRINT_CACHE_DIR for every process)

With `--baseline DIR` (another checkout, e.g. `git archive main | tar -x -C /tmp/base`) the same
commands run from it too, alternated with this one, so the two are timed the same way in the same
run. Also: parsing every YAML file of lca_data/ and scenarios/ with PyYAML's pure-Python safe loader
against libyaml's C one (what `lca_data.loader.safe_load` uses), in this process.

    python benchmarks/cli_bench.py [--runs 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/bloom-176b.yaml"


def commands(cache: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    py = sys.executable
    fresh = {"FOOTPRINT_CACHE_DIR": "__fresh__"}
    warm = {"FOOTPRINT_CACHE_DIR": cache}
    return {
        "python -c pass": ([py, "-c", "pass"], {}),
        "footprint --help": ([py, "-m", "footprint.cli", "--help"], warm),
        "assess, cache warm": ([py, "-m", "footprint.cli", "assess", SCENARIO, "--samples", "0"], warm),
        "assess, cache cold": ([py, "-m", "footprint.cli", "assess", SCENARIO, "--samples", "0"], fresh),
    }


def run_once(cmd: list[str], extra: dict[str, str], root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(root)}
    for k, v in extra.items():
        env[k] = tempfile.mkdtemp(prefix="fp-cache-") if v == "__fresh__" else v
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:5])} in {root}: {out.stderr[-500:]}")
    return dt


def yaml_parse() -> None:
    import yaml

    texts = [p.read_text() for p in [*sorted((REPO / "lca_data").rglob("*.yaml")), *sorted((REPO / "scenarios").glob("*.yaml"))]]
    loaders = [("pure-Python SafeLoader", yaml.SafeLoader)]
    if getattr(yaml, "CSafeLoader", None):
        loaders.append(("libyaml CSafeLoader", yaml.CSafeLoader))
    res = {}
    for name, loader in loaders:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for text in texts:
                yaml.load(text, Loader=loader)  # noqa: S506 - safe loaders
            times.append(time.perf_counter() - t0)
        res[name] = times
        ms = sorted(t * 1000 for t in times)
        print(f"  {name:<24} {statistics.median(ms):.0f} ms ({ms[0]:.0f}-{ms[-1]:.0f}) for {len(texts)} files")
    if len(res) == 2:
        a, b = (statistics.median(v) for v in res.values())
        print(f"  C loader speed-up: {a / b:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", type=Path, help="another checkout to time the same way, alternated")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="fp-cache-warm-")
    roots = {"this": REPO}
    if args.baseline:
        roots["baseline"] = args.baseline.resolve()
    cmds = commands(cache)
    for root in roots.values():  # warm the pint cache and the page cache once, untimed
        run_once(*cmds["assess, cache warm"], root)
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(args.runs):
        for label, root in list(roots.items()) if r % 2 == 0 else list(roots.items())[::-1]:
            for name, (cmd, extra) in cmds.items():
                times.setdefault((label, name), []).append(run_once(cmd, extra, root))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; whole process, median (min-max) of {args.runs}, alternated")
    for (label, name), v in times.items():
        ms = sorted(x * 1000 for x in v)
        print(f"  {label:<8} {name:<22} {statistics.median(ms):.0f} ms ({ms[0]:.0f}-{ms[-1]:.0f})")
    if args.baseline:
        for name in cmds:
            a = statistics.median(times[("baseline", name)])
            b = statistics.median(times[("this", name)])
            print(f"  {name}: baseline / this = {a / b:.2f}x")
    print("YAML parsing of lca_data/ and scenarios/ (in this process):")
    yaml_parse()


if __name__ == "__main__":
    main()
