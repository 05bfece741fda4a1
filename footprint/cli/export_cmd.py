"""`footprint export`: a run (or scenario) in the shapes other tools parse: codecarbon's emissions.csv, Prometheus text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command, group

    _, ex = group(
        sub,
        "export",
        "export a run in other tools' formats (codecarbon emissions.csv, Prometheus text)",
        """
footprint export emissions-csv runs/llama-ft -o emissions.csv     codecarbon's columns (a row per export)
footprint export prometheus runs/llama-ft -o /var/lib/node_exporter/textfile/footprint.prom""",
    )
    cc = command(
        ex,
        "emissions-csv",
        "codecarbon's emissions.csv columns (appends a row to an existing file)",
        "footprint export emissions-csv runs/llama-ft -o emissions.csv",
        handler=emissions_csv,
    )
    cc.add_argument("target", help="run directory (or scenario .yaml)")
    cc.add_argument("-o", "--output", default="emissions.csv", help="the CSV to write or append to (default: emissions.csv)")
    pr = command(
        ex,
        "prometheus",
        "the run's assessment as a Prometheus textfile (node_exporter's textfile collector)",
        "footprint export prometheus runs/llama-ft -o footprint.prom",
        handler=prometheus,
    )
    pr.add_argument("target", help="run directory (or scenario .yaml)")
    pr.add_argument("-o", "--output", required=True, help="e.g. /var/lib/node_exporter/textfile/footprint.prom")
    from footprint.cli.assess_cmd import add_samples

    add_samples(pr, "the _low/_high gauges")


def _check(target: str) -> None:
    from footprint.errors import FootprintError

    if not Path(target).exists():
        raise FootprintError("no such run directory or scenario file", target)


def emissions_csv(args: argparse.Namespace) -> int:
    from footprint.integrations.codecarbon import write_emissions_csv

    _check(args.target)
    from footprint.outputs import shown

    print(f"wrote {shown(write_emissions_csv(args.target, args.output))}", file=sys.stderr)
    return 0


def prometheus(args: argparse.Namespace) -> int:
    from footprint.errors import FootprintError
    from footprint.integrations.metrics import metrics, resolve

    _check(args.target)
    try:
        from footprint.integrations.prometheus import write_run_textfile
    except ImportError:
        raise FootprintError("needs prometheus_client: pip install 'footprint[integrations]'", key="prometheus") from None
    from footprint.outputs import check_file_target, shown

    check_file_target(args.output)  # refused before the assessment: a pipe, a device, a directory, a symlink out
    a, _ = resolve(args.target, args.samples)
    out = write_run_textfile(metrics(a), {"run": a.workload.name}, args.output)
    print(f"wrote {shown(out)}", file=sys.stderr)
    return 0
