"""`footprint assess` and `footprint report`: a scenario or a run, assessed and written out."""

from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = ("table", "json", "csv", "md")


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("assess", help="assess a scenario YAML (or a run directory)")
    a.add_argument("target", help="scenario .yaml file or run directory")
    a.add_argument("--format", choices=FORMATS, default="table")
    a.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set training.mfu=0.5 --set site.grid=POL",
    )
    a.add_argument("--samples", type=int, default=2000, help="Monte Carlo samples for low-high (0: none)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("-o", "--output", help="write to this file instead of stdout")
    a.set_defaults(handler=assess)

    rp = sub.add_parser("report", help="write a report: HTML, Markdown, JSON, CSV, PDF or BoAmps JSON")
    rp.add_argument("target", help="scenario .yaml or run directory")
    rp.add_argument("--compare", nargs="+", default=[], metavar="OTHER", help="more scenarios or runs, side by side")
    rp.add_argument("-o", "--output", required=True, help="report.html | .md | .json | .csv | .pdf | .boamps.json")
    rp.add_argument("--format", choices=("html", "md", "json", "csv", "pdf", "boamps"), help="default: from -o")
    rp.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    rp.add_argument("--samples", type=int, default=2000)
    rp.add_argument("--trace", help="a profiler trace to analyse into the report's kernel section")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.set_defaults(handler=report)


def _check_samples(samples: int) -> None:
    from footprint.errors import FootprintError

    if samples < 0:
        raise FootprintError(f"--samples must be >= 0, got {samples}", key="--samples")


def assess(args: argparse.Namespace) -> int:
    from footprint.cli.app import emit
    from footprint.lca.assessment import render
    from footprint.lca.engine import assess
    from footprint.lca.workload import load_scenario, workload_from_run

    _check_samples(args.samples)
    target = Path(args.target)
    if target.is_dir() or target.name == "run.json":
        workload = workload_from_run(target, args.sets)
    else:
        workload = load_scenario(target, args.sets)
    emit(render(assess(workload, samples=args.samples, seed=args.seed), args.format), args.output)
    return 0


def report(args: argparse.Namespace) -> int:
    import sys

    from footprint.errors import FootprintError
    from footprint.reports.report import write_report

    _check_samples(args.samples)
    for t in [args.target, *args.compare]:
        if not Path(t).exists():
            raise FootprintError("no such scenario file or run directory", t)
    out = write_report([args.target, *args.compare], args.output, args.format, args.sets, args.samples, args.trace, args.quiet)
    print(f"wrote {out}", file=sys.stderr)
    return 0
