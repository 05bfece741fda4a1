"""`footprint factors`: per-kWh electricity factor files computed elsewhere, in the format site.electricity_factors reads."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import group

    _, fs = group(
        sub,
        "factors",
        "electricity factor files (site.electricity_factors) from a practitioner's LCA database",
        """
footprint factors brightway --project ei310 --database "ecoinvent-3.10-cutoff" \\
    --activity "market for electricity, low voltage" --location FR -o fr_grid.csv
footprint assess scenario.yaml --set site.electricity_factors=fr_grid.csv""",
    )
    bw = fs.add_parser(
        "brightway",
        help="Brightway LCIA of 1 kWh of an activity in the 16 EF categories (needs: pip install 'footprint[lca]')",
        description="Run Brightway's LCIA (bw2calc) of one kWh of a project's activity with each EF category's method "
        "and write the factor file site.electricity_factors reads. BRIGHTWAY2_DIR is honoured as Brightway honours it.",
    )
    bw.add_argument("--project", required=True, help="Brightway project name")
    bw.add_argument("--database", required=True, help="database holding the activity (e.g. ecoinvent-3.10-cutoff)")
    bw.add_argument("--activity", required=True, help="activity name, e.g. 'market for electricity, low voltage'")
    bw.add_argument("--location", help="activity location (e.g. FR) when the name exists in several")
    bw.add_argument(
        "--method-family", default="EF v3.1", help="LCIA method family, method[0] (default 'EF v3.1'; 'EF v3.1 no LT')"
    )
    bw.add_argument("-o", "--output", required=True, help="factor file to write (CSV; '-' for stdout)")
    bw.set_defaults(handler=brightway)


def brightway(args: argparse.Namespace) -> int:
    from footprint.cli.registry import emit
    from footprint.lca.brightway import compute, factor_file

    r = compute(args.project, args.database, args.activity, args.location, args.method_family)
    emit(factor_file(r), args.output)
    missing = [row.key for row in r.rows if row.value is None]
    if missing:
        print(f"not available (n/a in the file): {', '.join(missing)}", file=sys.stderr)
    return 0
