"""Write the factor-audit section of docs/validation.md: footprint's national use-phase factors beside the
per-country values other open tools carry, and a summary of lca_data/electricity_audit.csv.

Run from the repository root:  python -m footprint.lca.factor_audit

The reference values (lca_data/electricity_zone_cited.csv: ADEME Base IMPACTS 2011 as shipped by boaviztapi)
are never a factor (the open factors are the better-rated source: a 2023 mix against a 2011 one); they widen a zone's
Monte Carlo range to contain them, so "inside" here is read on the range from footprint's own sources before that
widening. Ill-posed comparisons (ADEME's freshwater eutrophication, flat across mixes; zero values) are marked. The
table reports each zone x category as it falls: ratio footprint / reference, within 10x, within 3x, reference inside
footprint's own 95 % range. The section sits between two markers in docs/validation.md; a test recomputes it.

It lives in the core, not in lca_data/tools/ with the build scripts, because it reads the zone factors as the core
computes them (footprint.lca.electricity) and lca_data imports nothing of ours. Only `main` writes (docs/validation.md
of a repository checkout); nothing in footprint imports this module.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

from footprint.lca import electricity
from lca_data import loader

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "validation.md"
BEGIN, END = "<!-- factor-audit:begin (footprint/lca/factor_audit.py) -->", "<!-- factor-audit:end -->"
ZONES = ("FRA", "DEU", "USA", "CHN", "IND", "POL")
CATEGORIES = (  # the 24 cells; acidification is reported beside them
    "eutrophication_freshwater",
    "ionising_radiation",
    "resource_use_minerals_metals",
    "particulate_matter",
)
EXTRA = ("acidification",)


def cells() -> list[dict]:
    """One comparison per zone x category (the 24, then the extra categories)."""
    refs = {(r["zone"], r["category"]): r for r in loader.load_electricity_zone_cited()}
    out = []
    for category in (*CATEGORIES, *EXTRA):
        for code in ZONES:
            ref = refs.get((code, category))
            f = electricity.zone(code).factors[category]
            if ref is None or f.value is None:
                continue
            other = float(ref["value"])
            ratio = f.value / other
            low, high = f.own_range or (f.low, f.high)
            out.append(
                {
                    "zone": code,
                    "category": category,
                    "counted": category in CATEGORIES,
                    "value": f.value,
                    "low": low,
                    "high": high,
                    "ill_posed": electricity.ill_posed(ref["source"], category, other),
                    "unit": f.unit,
                    "reference": other,
                    "source": ref["source"],
                    "ratio": ratio,
                    "within_10x": 0.1 <= ratio <= 10,
                    "within_3x": 1 / 3 <= ratio <= 3,
                    "inside": low <= other <= high,
                }
            )
    return out


UNIT_CHECK_SOURCE = "benportner-ecoinvent-ilcd"  # ecoinvent 3.5, ILCD 2.0 2018: the same units as UNECE's method


def unit_check() -> list[dict]:
    """Per category, each technology factor over ecoinvent 3.5's value for the same technology. A unit slip
    (per MWh read as per kWh, Bq as kBq, g as kg) moves every technology of a category by the same 1,000x;
    a median ratio within 10x with the technologies agreeing rules it out."""
    by: dict[str, dict[str, float]] = {}
    for r in loader.load_electricity_crosscheck():
        if r["second_source"] == UNIT_CHECK_SOURCE and r["quantity"] == "factor" and r["ratio"]:
            by.setdefault(r["category"], {})[r["subject"]] = float(r["ratio"])
    out = []
    for category, ratios in by.items():
        vals = sorted(ratios.values())
        median = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] * vals[len(vals) // 2]) ** 0.5
        spread = vals[-1] / vals[0] if vals[0] > 0 else math.inf
        # a slip moves every technology by one factor; ratios 100x apart are a difference of inventory scope
        # (USLCI's ozone depletion: few ozone-depleting flows in its chains), not a unit
        scope_gap = spread >= 100
        out.append(
            {
                "category": category,
                "ratios": ratios,
                "median": median,
                "consistent": 0.1 <= median <= 10 or scope_gap,
                "scope_gap": scope_gap and not 0.1 <= median <= 10,
            }
        )
    return out


def _slip(c: dict) -> str:
    if c.get("scope_gap"):
        return "no: the technologies' ratios are 100x+ apart (inventory scope, not a unit)"
    return "no" if c["consistent"] else "suspected"


def _unit_lines() -> list[str]:
    lines = [
        "Unit check of every category against ecoinvent 3.5 (ILCD 2.0 2018) per technology: footprint / ecoinvent. "
        "A unit slip would move all technologies of a category by the same factor of 1,000:",
        "",
        "| category | ratio per technology | median | unit slip |",
        "|---|---|---|---|",
    ]
    for c in unit_check():
        per = ", ".join(f"{t} {v:.2g}" for t, v in sorted(c["ratios"].items()))
        lines.append(f"| {c['category'].replace('_', ' ')} | {per} | {c['median']:.2g} | {_slip(c)} |")
    return lines


def _audit_summary() -> list[str]:
    rows = list(csv.DictReader(io.StringIO(_strip(loader.DATA_DIR / "electricity_audit.csv"))))
    missing = {(r["zone"], r["technology"], r["category"]) for r in rows if r["role"] == "not_modelled"}
    factors = {
        (r["zone"], r["technology"], r["category"]): r for r in rows if (r["zone"], r["technology"], r["category"]) not in missing
    }
    two = sum(1 for r in factors.values() if int(r["independent_sources"]) >= 2)
    by_cat: dict[str, list[str]] = {}
    for _, tech, category in sorted(missing):
        by_cat.setdefault(category.replace("_", " "), []).append(tech)
    techs = loader.load_electricity_technologies() + loader.load_electricity_zone_technologies()
    dist = {d: sum(1 for r in techs if r["distribution"] == d) for d in ("lognormal", "uniform")}
    bound_rows = [r for r in techs if r["scope"] == electricity.PARTIAL_CHAIN]
    bounds = sorted({f"{r['technology']} {r['category'].replace('_', ' ')}" for r in bound_rows})
    water = dist["uniform"] - len(bound_rows)
    return [
        f"- {len(factors)} technology x category factors ({len(loader.load_electricity_technologies())} generic, "
        f"{len(loader.load_electricity_zone_technologies())} zone rows), {len(rows)} audit rows "
        "(lca_data/electricity_audit.csv: every value a factor was built from or checked against, with ratio, unit, "
        "year and licence).",
        f"- {two} factors have at least two independent sources; {len(factors) - two} rest on one source "
        "(their P rating is 4, and the audit lists them).",
        f"- Distributions: {dist['lognormal']} lognormal (central value strictly inside its 95 % range), "
        f"{dist['uniform']} uniform: {water} operational water of wind (0 L/kWh: not an EF category), "
        f"{len(bounds)} lower bounds from the bound up to the highest source (the open inventory covers only part of "
        f"the chain: {', '.join(bounds)}).",
        f"- {len(missing)} technology x category pairs have no open life-cycle value (lca_data/electricity_not_modelled.csv: "
        "zero by construction from direct emissions alone, never shipped as a 0 central value): missing in a zone's "
        "mix, whose factor is then the rest of the mix, labelled a lower bound (not modelled where nothing is left): "
        + "; ".join(f"{c}: {', '.join(t)}" for c, t in by_cat.items())
        + ".",
    ]


def _strip(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))


def render() -> str:
    """The generated section, markers included."""
    rows = cells()
    counted = [c for c in rows if c["counted"]]
    n10 = sum(c["within_10x"] for c in counted)
    n3 = sum(c["within_3x"] for c in counted)
    nin = sum(c["inside"] for c in counted)
    both = sum(c["within_10x"] and c["inside"] for c in counted)
    fair = [c for c in counted if not c["ill_posed"]]
    f10 = sum(c["within_10x"] for c in fair)
    lines = [
        BEGIN,
        "",
        f"Of the {len(counted)} zone x category cells (freshwater eutrophication, ionising radiation, minerals and metals, "
        f"particulate matter for {', '.join(ZONES)}): **{n10} within 10x, {n3} within 3x, {nin} with the reference inside "
        f"footprint's own range, {both} within 10x with the reference inside the range**. Of these, {len(fair)} are fair "
        f"comparisons ({f10} within 10x) and {len(counted) - len(fair)} ill-posed: ADEME's freshwater eutrophication is flat "
        "across mixes (EF-compliant datasets without long-term emissions, no coal signal), so it cannot test a factor. "
        "Acidification is listed below them and not counted. Reference: ADEME Base IMPACTS 2011 per-country factors as "
        "boaviztapi ships them (never a factor: the open factors are the better-rated source, a 2023 mix against a 2011 "
        "one; since issue 29 they widen the zone's Monte Carlo range, so 'inside' is read on footprint's own range before "
        "that widening).",
        "",
        "| zone | category | footprint (own 95 % range) | reference | ratio | within 10x | within 3x | inside range "
        "| comparison |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        name = c["category"].replace("_", " ") + ("" if c["counted"] else " (not counted)")
        lines.append(
            f"| {c['zone']} | {name} | {c['value']:.3g} ({c['low']:.3g} - {c['high']:.3g}) {c['unit']} | {c['reference']:.3g} | "
            f"{c['ratio']:.3g} | {_yes(c['within_10x'])} | {_yes(c['within_3x'])} | {_yes(c['inside'])} | "
            f"{'ill-posed' if c['ill_posed'] else 'fair'} |"
        )
    lines += ["", *_unit_lines(), "", *_audit_summary(), "", END]
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def updated(doc: str) -> str:
    """docs/validation.md with its factor-audit section replaced by :func:`render`."""
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC.name}: the markers {BEGIN!r} and {END!r} are missing")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + render() + tail


def main() -> int:
    DOC.write_text(updated(DOC.read_text()))
    print(f"wrote the factor-audit section of {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
