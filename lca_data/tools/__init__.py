"""Scripts that derive lca_data files from their sources (run from the repository root), and what they share."""

from __future__ import annotations

import csv
from pathlib import Path


def write_csv(path: Path, header: str, fields: list[str], rows: list[dict]) -> None:
    """A derived CSV: provenance comment line(s), then the header row and one row per value."""
    with path.open("w", newline="") as fh:
        fh.write(header)
        writer = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
