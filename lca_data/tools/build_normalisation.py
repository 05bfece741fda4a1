"""Write lca_data/ef_normalisation_weighting.csv from the cited EF 3.1 normalisation and weighting table.

Run from the repository root:  python -m lca_data.tools.build_normalisation [../shared/reference/ef_normalisation_weighting.csv]

The reference table (JRC EF 3.1 sets, read in three independent copies, each row with its provenance and
licence) is carried over value for value: the category's key, the normalisation factor per person per
year in the unit of lca_data/categories.yaml, the weight in percent, the source id
(`jrc-ef31-normalisation-weighting`, lca_data/sources/electricity.yaml) and the row's note. The sentence
every note repeats ("Weight identical in EF 3.0 and 3.1 (with toxicity).") is said once, in the header.
tests/test_normalisation.py re-runs this and checks the shipped file is its output.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from lca_data import loader
from lca_data.tools import write_csv

HERE = Path(__file__).resolve().parents[1]
DEFAULT_SRC = HERE.parent.parent / "shared" / "reference" / "ef_normalisation_weighting.csv"
OUT = HERE / "ef_normalisation_weighting.csv"
SOURCE = "jrc-ef31-normalisation-weighting"
REPEATED = ". Weight identical in EF 3.0 and 3.1 (with toxicity)."
FIELDS = ["category", "normalisation", "unit", "weight_percent", "source", "note"]
HEADER = (
    "# EF 3.1 normalisation (global impact per person per year, reference year 2010) and weighting (%, toxicity\n"
    f"# included; the 16 weights sum to 100). Source: {SOURCE} (lca_data/sources/electricity.yaml),\n"
    "# copied from ../shared/reference/ef_normalisation_weighting.csv (tests/test_normalisation.py checks the copy).\n"
    "# Weighting is a value choice (Sala et al. 2018), not a natural-science result.\n"
)


def rows(src: Path) -> list[dict[str, str]]:
    """The shipped rows, in the reference's order; SystemExit naming the row when it is not EF 3.1 or not known."""
    units = {c["key"]: c["unit"] for c in loader.load_categories()["categories"]}
    out = []
    with src.open(newline="") as fh:
        for r in csv.DictReader(fh):
            key = r["category_key"]
            if key not in units or r["ef_version"] != "EF 3.1":
                raise SystemExit(f"{src}: {key!r}: expected an EF 3.1 category of lca_data/categories.yaml")
            note = r["note"][: -len(REPEATED)] if r["note"].endswith(REPEATED) else r["note"]
            out.append(
                {
                    "category": key,
                    "normalisation": r["nf_per_person"],
                    "unit": f"{units[key]} per person per year",
                    "weight_percent": r["weighting_percent"],
                    "source": SOURCE,
                    "note": note,
                }
            )
    return out


def main(argv: list[str]) -> None:
    src = Path(argv[0]) if argv else DEFAULT_SRC
    shipped = rows(src)
    write_csv(OUT, HEADER, FIELDS, shipped)
    print(f"wrote {OUT.relative_to(HERE.parent)} ({len(shipped)} categories) from {src}")


if __name__ == "__main__":
    main(sys.argv[1:])
