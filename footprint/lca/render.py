"""Text renderings of an Assessment: the terminal table, Markdown and CSV (`footprint assess --format`).

Above the Assessment and the caveats (`footprint.lca.notes`) in `footprint.lca`: it reads both, neither reads it.
JSON is the Assessment's own (`Assessment.to_json`).
"""

from __future__ import annotations

import csv
import io
from typing import Any

from footprint.escaping import md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import (
    PE_NOTE,
    SENSITIVITY_NOTE,
    Assessment,
    amount,
    gpus_text,
    hardware_text,
    key_figures_line,
    long_term_rows,
    mfu_text,
    num,
    partial_text,
    parts_text,
    pue_text,
    qty,
    sensitivity_rows,
    training_facts,
    water_text,
)
from footprint.lca.notes import note_count, note_groups
from footprint.lca.units import display_unit


def table_rows(a: Assessment) -> list[list[str]]:
    """The 16 categories as the terminal table, Markdown and the notebook view write them (`HEADERS`)."""
    rows = []
    for k in cat.keys():
        r = a.impacts[k]
        pe = (a.normalised.get(k) or {}).get("person_equivalents")
        total, low, high, unit = qty(r.total, r.unit, r.low, r.high)  # one readable unit per row
        rows.append(
            [
                r.name,
                total,
                unit,
                r.stage_text("manufacturing"),
                r.stage_text("transport"),
                r.stage_text("use"),
                r.stage_text("end_of_life"),
                f"{low} - {high}",
                num(pe),
            ]
        )
    return rows


HEADERS = ["Category", "Total", "Unit", "Manuf.", "Transp.", "Use", "EoL", "Low - high", "Person-eq."]


def _summary_lines(a: Assessment) -> list[str]:
    w = a.workload
    lines = [
        f"{w.name}",
        f"  {key_figures_line(a)}",
        f"  GPU: {gpus_text(a)}  |  "
        + (f"host-hours: {num(w.host_hours)}" if w.host_only else f"GPU-hours: {num(w.gpu_hours)} ({w.gpu_hours_method})"),
        f"  Energy: {amount(w.it_energy_kwh, 'kWh')} IT, {amount(a.facility_energy_kwh, 'kWh')} facility ({pue_text(w)})"
        f"  |  grid: {w.grid} ({a.zone.name})",
        f"  Energy obtained: {w.energy_method}",
        f"  Hardware: {hardware_text(a)}",
        f"  Water: {water_text(a)}",
        f"  Embodied data: {a.embodied_method}" + ("" if w.host_only else f"; geometry: {a.materials.get('geometry') or 'n/a'}"),
    ]
    if w.mfu is not None:
        lines.insert(3, f"  MFU: {mfu_text(w)}")
    if a.parts:
        lines.insert(3, f"  By GPU model: {parts_text(a)}")
    lines += [f"  {k}: {v}" for k, v in training_facts(a).items()]
    return lines


def single_score_line(a: Assessment) -> str | None:
    """The EF 3.1 single score and the categories that weigh most in it, in one line."""
    s = a.single_score
    if not s:
        return None
    top = sorted(a.normalised, key=lambda k: a.normalised[k]["points"], reverse=True)[:3]
    lead = ", ".join(f"{a.impacts[k].name.lower()} {a.normalised[k]['share_of_single_score']:.0%}" for k in top)
    partial = partial_text(a)
    head = f"Single score ({partial})" if partial else "Single score"
    return f"{head}: {num(s['value'])} Pt (low-high {num(s['low'])} - {num(s['high'])}); largest shares: {lead}"


NORMALISATION_NOTE = PE_NOTE + " Weighting into one score is a value choice (EF 3.1 weights)."
#: What a "not modelled" cell means, for every face that shows one (table, Markdown, report methods, dashboard).
NOT_MODELLED = (
    "no open factor for any technology of the electricity mix (no share is then given); a partly covered mix is a "
    "lower bound (notes); ≥ = the stage is a lower bound (its open inventory covers only part of the chain)"
)


def total_status(not_modelled: tuple[str, ...] | list[str]) -> str:
    """What a total that leaves stages out is, in every CSV that has a status (a run's, a fleet's): "" when whole."""
    return f"partial: {', '.join(not_modelled)} not modelled" if not_modelled else ""


SHARES_NOTE = f"Shares: stage / total. n/a = not available (no data), never zero; not modelled = {NOT_MODELLED}."


def to_table(a: Assessment, details: bool = False) -> str:
    """The summary, the 16 categories, the single score, then the caveats: one line per group (`note_groups`),
    or every item with ``details`` (`footprint assess --details`)."""
    rows = table_rows(a)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in (0, 2) else c.rjust(widths[i]) for i, c in enumerate(cells))

    out = _summary_lines(a) + ["", line(HEADERS), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out.append("")
    score = single_score_line(a)
    if score:
        out.append(score)
    out.append(SHARES_NOTE + " " + NORMALISATION_NOTE)
    if a.use_factors is not None:
        hourly = a.workload.hourly
        out.append(f"Electricity: {a.use_factors.label}." + (f" Use phase {hourly.method()}." if hourly else ""))
    groups = note_groups(a)
    if details:
        out += details_lines(a)
    if groups and details:
        for g in groups:
            out.append(f"{g.title} ({len(g.items)}): {g.summary}")
            out += [f"  - {x}" for x in g.items]
    elif groups:
        out.append(f"Notes ({note_count(groups)}, one line per group; --details lists each, --format json has them all):")
        out += [f"  {g.line()}" for g in groups]
    return "\n".join(out) + "\n"


def details_lines(a: Assessment) -> list[str]:
    """--details: each category's characterisation method and dominant stage (with the share of Monte Carlo draws that
    agree), why the single score is partial, and the use stage without and with long-term emissions."""
    out = ["Characterisation of the use-phase factor, dominant stage (share of Monte Carlo draws in which it is largest):"]
    for k in cat.keys():
        r = a.impacts[k]
        share = r.dominant_stage_draws
        votes = f" ({share:.0%} of draws)" if share is not None else ""
        out.append(f"  - {r.name}: {r.characterisation or 'n/a'}; dominant stage {r.dominant_text}{votes}")
    reasons = (a.single_score or {}).get("partial_reasons") or {}
    if reasons:
        out.append("Single score partial: " + "; ".join(f"{k}: {v}" for k, v in reasons.items()))
    rows = long_term_rows(a)
    if rows:
        out.append(f"Long-term emissions (site.long_term_emissions: {a.workload.long_term_emissions}), use stage both ways:")
        out += [f"  - {r[0]}: excluded {r[1]}, included {r[2]}; {r[4]}" for r in rows]
    return out


def to_markdown(a: Assessment) -> str:
    """A Markdown table with the summary above and the caveats below, each group's items folded (GitHub renders
    `<details>`)."""
    out = [f"# {md_text(a.workload.name)}", ""]  # user text (names, descriptions, notes) as literal Markdown
    out += [f"- {md_text(line.strip())}" for line in _summary_lines(a)[1:]]
    out += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(r) + " |" for r in table_rows(a)]
    score = single_score_line(a)
    out += ["", score, "", SHARES_NOTE + " " + NORMALISATION_NOTE] if score else ["", SHARES_NOTE]
    sens = sensitivity_rows(a)
    if sens:
        out += ["", "## What drives the uncertainty", "", SENSITIVITY_NOTE, ""]
        out += ["| " + " | ".join(sens[0]) + " |", "|" + "---|" * len(sens[0])]
        out += ["| " + " | ".join(r.values()) + " |" for r in sens]
    groups = note_groups(a)
    if groups:
        out += ["", "## Notes: scope, contested data and warnings", ""]
        for g in groups:
            out += [f"<details><summary><b>{g.title} ({len(g.items)})</b>: {_md_html(g.summary)}</summary>", ""]
            out += [f"- {md_text(x)}" for x in g.items] + ["", "</details>", ""]
    out += ["", "## Sources", ""] + [f"- {md_source(s)}" for s in a.sources]
    return "\n".join(out) + "\n"


def _md_html(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def md_source(s: dict[str, Any]) -> str:
    """A source as a Markdown link (its title) with its licence."""
    title = s["title"].replace("[", "(").replace("]", ")")
    url = s.get("url") or ""
    link = f"[{title}]({url})" if url.startswith(("http://", "https://")) else title
    return f"{link} — {s.get('licence') or 'licence not stated'}"


def to_csv(a: Assessment) -> str:
    """One row per category and stage (plus a total row per category); ``status`` says why a value is empty."""
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(["category", "name", "unit", "stage", "value", "share", "low", "high", "person_equivalents", "status"])
    for k in cat.keys():
        r = a.impacts[k]
        for stage in cat.stages():
            v = r.by_stage.get(stage)
            share = r.share(stage)
            status = "not modelled" if stage in r.not_modelled else ("not available" if v is None else "")
            wr.writerow(
                [k, r.name, display_unit(r.unit), stage, "" if v is None else repr(v), "" if share is None else f"{share:.6f}"]
                + ["", "", "", status]
            )
        pe = (a.normalised.get(k) or {}).get("person_equivalents")
        wr.writerow(
            [k, r.name, display_unit(r.unit), "total", repr(r.total), "1", repr(r.low), repr(r.high)]
            + ["" if pe is None else repr(pe), total_status(r.not_modelled)]
        )
    return buf.getvalue()


def render(a: Assessment, fmt: str, details: bool = False) -> str:
    if fmt == "json":
        return a.to_json() + "\n"
    if fmt == "csv":
        return to_csv(a)
    if fmt in ("md", "markdown"):
        return to_markdown(a)
    return to_table(a, details)
