"""Carry the ADEME/Hubblo GPU LCA figures over into lca_data's own long CSV format.

Run from the repository root:  python -m lca_data.tools.convert_ademe [../shared/data/lca/ademe-gpu-lca]

Reads the unchanged copies of the calculator's data files and writes three CSV files, one value a
row, each row with its unit, source id and licence (CC BY-SA 4.0, share-alike kept):

- ademe_gpu_components.csv: per card x component x life-cycle stage x category (the 8 cards of the
  ADEME study; the H100 PCIe rows of the CSV are an older parametric example and are not carried over:
  the parametric model below reproduces the calculator's current H100 PCIe page instead);
- ademe_parametric_factors.csv: the per-unit average factors of the parametric model
  (average_model.json: per kg casing/heatsink, per cm2 board, per mm2 die incl. losses, per kg card);
- ademe_distribution_factors.csv: distribution factors per kg.km by transport mode;
- ademe_die_factor.csv: the GPU die's per-mm2 factor (incl. losses) that ADEME's own per-card dies imply, per
  category: the sum of the 8 cards' die impacts over the sum of their die areas with losses (lca_data/die_yield.py),
  so that a card without its own measurement inherits what the measured dies give (correction
  die_factor_from_measured_dies; the calculator's average factor, about 1.45x higher for an A100-size die, stays the
  "published" variant).

tests/test_lca_data.py re-reads the originals and checks every carried value.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import yaml

from lca_data.die_yield import die_area_with_losses
from lca_data.tools import write_csv

HERE = Path(__file__).resolve().parents[1]
DEFAULT_SRC = HERE.parent.parent / "shared" / "data" / "lca" / "ademe-gpu-lca"
SOURCE = "ademe-gpu-lca"
LICENCE = "CC BY-SA 4.0"
HEADER = (
    "# Derived from the ADEME/Hubblo GPU LCA data (hubblo-org/gpu-calculator src/data/gpu, commit "
    "2308a62): Lees-Perasso, Ekchajzer, Roussilhe, De Latour, ADEME 2026; Falk et al. 2025. "
    "Licence CC BY-SA 4.0 (share-alike). Written by lca_data/tools/convert_ademe.py.\n"
)
COMPONENTS = {
    "casing": "casing",
    "heatsink": "heatsink",
    "printed_wiring_board": "board",
    "graphics_processing_unit": "gpu_die",
    "video_ram": "memory",
    "upstream_transport": "upstream_transport",
    "end_of_life": "end_of_life",
}
# Unit of the quantity each per-unit factor multiplies.
BASIS = {
    "casing": "kg",
    "heatsink": "kg",
    "board": "cm**2",
    "gpu_die": "mm**2",
    "memory": "mm**2",
    "upstream_transport": "kg",
    "end_of_life": "kg",
}
STAGES = ("manufacturing", "transport", "use", "end_of_life")
EXCLUDED_CARDS = {"Average", "NVIDIA H100 PCIe 80GB"}


def _indicators() -> list[tuple[str, str, str]]:
    """(our key, ADEME acronym, unit) for the 16 categories and the primary-energy extra."""
    data = yaml.safe_load((HERE / "categories.yaml").read_text())
    return [(c["key"], c["ademe"], c["unit"]) for c in data["categories"] + data["extras"]]


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    write_csv(path, HEADER, fields, rows)


def convert(src: Path = DEFAULT_SRC, dest: Path = HERE) -> dict[str, int]:
    indicators = _indicators()
    counts: dict[str, int] = {}

    rows = []
    with (src / "gpus_impact_factors.csv").open() as fh:
        for rec in csv.DictReader(fh):
            card, comp = rec["graphics_card"], rec["component"]
            if card in EXCLUDED_CARDS or comp not in COMPONENTS:
                continue
            for stage in STAGES:
                for key, acr, unit in indicators:
                    raw = rec.get(f"{stage}_{acr}", "")
                    note = ""
                    if "," in raw:  # three cells of the source CSV use a decimal comma
                        note = f"decimal comma in the source CSV ({raw!r}) read as a decimal point"
                        raw = raw.replace(",", ".")
                    if raw in ("", None) or float(raw) == 0.0:
                        continue
                    rows.append(
                        {
                            "card": card,
                            "component": COMPONENTS[comp],
                            "stage": stage,
                            "category": key,
                            "value": raw,
                            "unit": unit,
                            "source": SOURCE,
                            "licence": LICENCE,
                            "note": note,
                        }
                    )
    _write(
        dest / "ademe_gpu_components.csv",
        ["card", "component", "stage", "category", "value", "unit", "source", "licence", "note"],
        rows,
    )
    counts["ademe_gpu_components.csv"] = len(rows)

    avg = json.loads((src / "average_model.json").read_text())["components"]
    rows = []
    for comp, ours in COMPONENTS.items():
        stage = "end_of_life" if ours == "end_of_life" else "manufacturing"
        for key, acr, unit in indicators:
            value = avg[comp][f"{stage}_{acr}"]
            rows.append(
                {
                    "component": ours,
                    "stage": stage,
                    "category": key,
                    "value": repr(float(value)),
                    "unit": f"{unit} / {BASIS[ours]}",
                    "source": SOURCE,
                    "licence": LICENCE,
                }
            )
    _write(dest / "ademe_parametric_factors.csv", ["component", "stage", "category", "value", "unit", "source", "licence"], rows)
    counts["ademe_parametric_factors.csv"] = len(rows)

    rows = []
    with (src / "transport_impacts.csv").open() as fh:
        for rec in csv.DictReader(fh):
            mode = rec["transport_mode"].removeprefix("transport_")
            for key, acr, unit in indicators:
                rows.append(
                    {
                        "mode": mode,
                        "category": key,
                        "value": rec[acr],
                        "unit": f"{unit} / (kg * km)",
                        "source": SOURCE,
                        "licence": LICENCE,
                    }
                )
    _write(dest / "ademe_distribution_factors.csv", ["mode", "category", "value", "unit", "source", "licence"], rows)
    counts["ademe_distribution_factors.csv"] = len(rows)
    rows = die_factor_rows(src, indicators)
    _write(dest / "ademe_die_factor.csv", ["component", "stage", "category", "value", "unit", "source", "licence", "note"], rows)
    counts["ademe_die_factor.csv"] = len(rows)
    return counts


def die_factor_rows(src: Path, indicators: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Per category: sum of the ADEME cards' GPU-die impacts / sum of their die areas with losses (an area-weighted
    mean of each card's per-mm2 factor: the large dies, the A100s and GH200, weigh most)."""
    area = {c["name"]: float(c["gpuSurface"]) for c in json.loads((src / "gpus.json").read_text())}
    dies = {}
    with (src / "gpus_impact_factors.csv").open() as fh:
        for rec in csv.DictReader(fh):
            if rec["component"] == "graphics_processing_unit" and rec["graphics_card"] not in EXCLUDED_CARDS:
                dies[rec["graphics_card"]] = rec
    missing = sorted(set(dies) - set(area))
    if missing:
        raise SystemExit(f"gpus.json: no GPU die area for {', '.join(missing)}")
    silicon = sum(die_area_with_losses(area[c]) for c in dies)
    cards = ", ".join(f"{c} ({area[c]:g} mm2)" for c in sorted(dies))
    rows = []
    for key, acr, unit in indicators:
        total = sum(float((rec.get(f"manufacturing_{acr}") or "0").replace(",", ".")) for rec in dies.values())
        rows.append(
            {
                "component": "gpu_die",
                "stage": "manufacturing",
                "category": key,
                "value": repr(total / silicon),
                "unit": f"{unit} / mm**2",
                "source": SOURCE,
                "licence": LICENCE,
                "note": f"sum of the per-card GPU-die impacts / sum of die areas with losses ({silicon:.0f} mm2): {cards}",
            }
        )
    return rows


if __name__ == "__main__":
    print(convert(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SRC))
