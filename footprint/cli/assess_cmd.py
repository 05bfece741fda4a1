"""`footprint assess` and `footprint report`: a scenario or a run, assessed and written out.

`assess` prints the numbers (a table, or the Assessment JSON / CSV / a Markdown table); `report`
writes a document around them (figures, methods, sources, warnings). Their JSON and CSV are the same.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from footprint.inputs import MAX_SAMPLES, number_arg

FORMATS = ("table", "json", "csv", "md")
REPORT_FORMATS = ("html", "md", "json", "csv", "pdf", "boamps")
SETS_HELP = "override a scenario key, repeatable: --set training.mfu=0.5 --set site.grid=POL"


def add_samples(p: argparse.ArgumentParser, ranges: str = "the low-high ranges") -> None:
    """``--samples``: the Monte Carlo size, every front end's default and the input contract's ceiling."""
    from footprint.lca import DEFAULT_SAMPLES

    p.add_argument(
        "--samples",
        type=number_arg(int, 0, MAX_SAMPLES),
        default=DEFAULT_SAMPLES,
        help=f"Monte Carlo samples for {ranges} (default {DEFAULT_SAMPLES}, as the dashboard; 0: none; at most {MAX_SAMPLES:,})",
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=SETS_HELP)
    add_samples(p)
    p.add_argument(
        "--seed", type=number_arg(int, 0, 2**63 - 1), default=0, help="random seed of the Monte Carlo (default 0: reproducible)"
    )


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command

    a = command(
        sub,
        "assess",
        "assess a scenario YAML or a run directory in the 16 EF 3.1 categories",
        """
footprint assess scenarios/bloom-176b.yaml
footprint assess scenarios/bloom-176b.yaml --details     every note: use-phase scope, contested data, warnings
footprint assess scenarios/gpt-4-falk.yaml --set training.mfu=0.5 --set hardware.lifetime="5 years"
footprint assess runs/demo --set site.grid=POL        re-project a measured run onto another grid
footprint assess scenarios/llama-2-70b.yaml --format json -o llama.json""",
        handler=assess,
    )
    a.add_argument(
        "target", help="scenario .yaml file or a shipped scenario's name (bloom-176b), or run directory (or its run.json)"
    )
    a.add_argument(
        "--format", choices=FORMATS, default="table", help="table (default), the Assessment JSON, CSV, or a Markdown table"
    )
    _common(a)
    a.add_argument(
        "--details",
        action="store_true",
        help="table: list every note (use-phase scope per category, contested data, warnings) instead of one line per group",
    )
    a.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    rp = command(
        sub,
        "report",
        "write a report: HTML, Markdown, JSON, CSV, PDF or BoAmps JSON",
        """
footprint report scenarios/bloom-176b.yaml -o bloom.html
footprint report scenarios/bloom-176b.yaml --compare scenarios/gpt-4-falk.yaml -o compare.html
footprint report runs/demo -o demo.pdf                 needs Chromium (see `footprint doctor`)
footprint report scenarios/olmo-2-7b.yaml --format json -o -      to stdout""",
        handler=report,
    )
    rp.add_argument("target", help="scenario .yaml file or a shipped scenario's name (bloom-176b), or run directory")
    rp.add_argument("--compare", nargs="+", default=[], metavar="OTHER", help="more scenarios or runs, side by side")
    rp.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="report.html | .md | .json | .csv | .pdf | .boamps.json; '-' writes html/json/csv/boamps to stdout",
    )
    rp.add_argument("--format", choices=REPORT_FORMATS, help="default: from the extension of -o")
    _common(rp)
    rp.add_argument("--trace", metavar="TRACE", help="a profiler trace to analyse into the report's kernel section")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")


def assess(args: argparse.Namespace) -> int:
    from footprint.api import to_workload
    from footprint.cli.registry import emit
    from footprint.lca.engine import assess
    from footprint.lca.render import render

    workload = to_workload(Path(args.target), args.sets)
    emit(render(assess(workload, samples=args.samples, seed=args.seed), args.format, args.details), args.output)
    return 0


def report(args: argparse.Namespace) -> int:
    import sys

    from footprint.api import write_report
    from footprint.errors import FootprintError
    from footprint.lca.workload import scenario_path, shipped_scenarios

    for t in [args.target, *args.compare]:
        if not scenario_path(t).exists():
            raise FootprintError(
                f"no such scenario file or run directory (shipped scenarios: {', '.join(shipped_scenarios())})", t
            )
    out = write_report(
        [args.target, *args.compare],
        args.output,
        args.format,
        args.sets,
        args.samples,
        args.trace,
        args.quiet,
        seed=args.seed,
    )
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)
    return 0
