"""`footprint report`: the document a team attaches to its model card or sustainability statement.

One or more Assessments (assessed by the caller: `footprint.api` turns scenario files and run directories into
them; reports never call back into it) -> HTML (one self-contained file, figures as
inline SVG), Markdown (figures as SVG files beside it), the Assessment JSON, CSV (one row per
category and stage), PDF (the HTML printed by headless Chromium) or a BoAmps-style JSON.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from footprint import __version__
from footprint.errors import FootprintError
from footprint.escaping import csv_cell, md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import (
    LONG_TERM_HEADERS,
    PE_NOTE,
    SCORE_NOTE,
    SENSITIVITY_NOTE,
    Assessment,
    key_figures,
    long_term_rows,
    num,
    partial_text,
    pct,
    qty,
    sensitivity_rows,
    summary_facts,
    training_facts,
)
from footprint.lca.notes import NoteGroup, note_count, note_groups
from footprint.lca.render import NOT_MODELLED, md_source, to_csv
from footprint.lca.units import display_unit
from footprint.lca.workload_data import HOST_ONLY
from footprint.outputs import atomic_path, check_dir_target, check_file_target, write_text
from footprint.reports.browser import find_chromium, html_to_pdf

__all__ = ["FORMATS", "Section", "build_sections", "find_chromium", "html_to_pdf", "to_html", "to_markdown", "write_report"]

FORMATS = ("html", "md", "json", "csv", "pdf", "boamps")


@dataclass
class Section:
    """One target's assessment plus what only measured runs have (power, MFU) and an optional trace."""

    assessment: Assessment
    target: str
    run_dir: Path | None = None
    figures: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, Any] | None = None


def infer_format(output: str, fmt: str | None) -> str:
    if fmt:
        if fmt == "markdown":
            return "md"
        if fmt not in FORMATS:  # `report(..., format="exe")` would otherwise write HTML under any name
            raise FootprintError(f"unknown format {str(fmt)[:40]!r}: one of {', '.join(FORMATS)}", key="--format")
        return fmt
    name = output.lower()
    if name.endswith(".boamps.json"):
        return "boamps"
    suffix = Path(name).suffix.lstrip(".")
    if suffix in ("html", "htm"):
        return "html"
    if suffix in ("md", "markdown"):
        return "md"
    if suffix in FORMATS:
        return suffix
    raise FootprintError(
        f"cannot tell the format from {output!r}: use .html, .md, .json, .csv, .pdf, .boamps.json or --format", key="-o"
    )


def section(item: Assessment | Section) -> Section:
    """A Section as given, or one for an Assessment: named after its workload, with its run directory when the
    workload was read from a run record (its power figures)."""
    if isinstance(item, Section):
        return item
    src = item.workload.source
    run_dir = Path(src).parent if src and Path(src).name == "run.json" else None
    return Section(item, item.workload.name, run_dir)


def build_sections(items: list[Assessment | Section], trace: str | None = None) -> list[Section]:
    """The sections of a report, figures drawn: one per assessment (given, or built by `footprint.api`), and the
    trace's kernel figure on the first."""
    from footprint.reports import figures

    sections = []
    for item in items:
        s = section(item)
        a = s.assessment
        s.figures["stages"] = figures.stage_matrix(a)
        if not a.workload.host_only:  # a run without GPU: its server's embodied impacts have no components or mass
            s.figures["components"] = figures.components(a)
            s.figures["materials"] = figures.materials(a)
        score_fig = figures.single_score(a)
        if score_fig:
            s.figures["single_score"] = score_fig
        if s.run_dir is not None:
            _run_figures(s, s.run_dir)
        sections.append(s)
    if trace:
        from footprint.kernels.trace import analyze_trace

        sections[0].kernels = analyze_trace(trace)
        fig = figures.kernel_categories(sections[0].kernels)
        if fig:
            sections[0].figures["kernels"] = fig
    return sections


def _run_figures(s: Section, run_dir: Path) -> None:
    from footprint.reports import figures
    from footprint.tracking import runrecord

    notes: list[str] = []  # damaged parts and rank records, skipped: the report says so and shows the rest
    try:
        labels = runrecord.device_labels(runrecord.read_record(run_dir))
    except Exception:  # a damaged run.json: the figure keeps the raw device names
        labels = {}
    fig = figures.power_timeline(runrecord.power_timeline(run_dir, buckets=800, notes=notes), labels)
    if fig:
        s.figures["power"] = fig
    steps: list[float] = []
    for rec in runrecord.rank_records(run_dir, notes):
        steps = (rec.get("mfu") or {}).get("per_step_mfu") or steps
        if steps:
            break
    fig = figures.mfu_over_steps([float(v) for v in steps if isinstance(v, (int, float))])
    if fig:
        s.figures["mfu"] = fig
    if notes:
        from dataclasses import replace

        s.assessment = replace(s.assessment, warnings=tuple(dict.fromkeys([*s.assessment.warnings, *notes])))


# ---- text pieces shared by HTML and Markdown ----------------------------------------------------


def top_categories(a: Assessment, n: int = 3) -> list[str]:
    """The categories that weigh most in the EF 3.1 single score (the headline), else the fixed HEADLINE."""
    if not a.normalised:
        return list(cat.HEADLINE)
    return sorted(a.normalised, key=lambda k: a.normalised[k]["points"], reverse=True)[:n]


def summary_rows(a: Assessment) -> list[tuple[str, str]]:
    """The key figures (what ran, where, how long, how much energy, hardware and water) and the training story;
    the headline numbers (single score, categories) are in the headline above, never repeated here."""
    w = a.workload
    rows = [("Model / run", w.name + (f" — {w.description}" if w.description else "")), *summary_facts(a).items()]
    rows += list(training_facts(a).items())  # measured runs that counted steps or tokens
    if a.use_factors is not None:
        rows.append(("Electricity factors", a.use_factors.label))
    return rows


def headline(a: Assessment) -> list[tuple[str, str, str]]:
    """(label, value, detail) of the EF 3.1 cards, below the key figures (`key_cards`): the single score and the
    categories that weigh most in it, in person-equivalents."""
    out = []
    if a.single_score:
        sc = a.single_score
        partial = partial_text(a)
        out.append(
            (
                "EF 3.1 single score" + (" (partial)" if partial else ""),
                f"{num(sc['value'])} Pt",
                f"range {num(sc['low'])} – {num(sc['high'])} · weighting is a value choice"
                + (f" · {partial} (Methods)" if partial else ""),
            )
        )
    for k in top_categories(a) if a.normalised else []:
        r, n = a.impacts[k], a.normalised[k]
        v, low, high, unit = qty(r.total, r.unit, r.low, r.high)
        total = f"{v} {unit}, range {low} – {high}"
        share = pct(n["share_of_single_score"])
        out.append((r.name, num(n["person_equivalents"]), f"person-equivalents, {share} of the single score · {total}"))
    return out


def key_cards(a: Assessment) -> list[tuple[str, str, str]]:
    """(label, value, detail) of the key figures (kg CO2 eq, kWh, litres, GPU-hours) that lead every report."""
    return [
        (label, value, (f"range {rng.replace(' - ', ' – ')} · " if rng else "") + detail)
        for label, value, rng, detail in key_figures(a)
    ]


CAT_HEADERS = [
    "Category",
    "Total",
    "Unit",
    "Low",
    "High",
    "Person-eq.",
    "Manufacturing",
    "Transport",
    "Use",
    "End of life",
    "Dominant stage",
]
NORM_HEADERS = ["Category", "Person-equivalents", "Low", "High", "Weight", "Points (Pt)", "Share of single score"]


def normalised_rows(a: Assessment) -> list[list[str]]:
    """EF 3.1 person-equivalents and weighted points, largest share of the single score first."""
    rows = []
    for k in top_categories(a, len(a.normalised)):
        n = a.normalised[k]
        rows.append(
            [
                a.impacts[k].name,
                num(n["person_equivalents"]),
                num(n["low"]),
                num(n["high"]),
                f"{n['weight_percent']:.2f} %",
                num(n["points"]),
                pct(n["share_of_single_score"]),
            ]
        )
    return rows


def _card(label: str, value: str, detail: str) -> str:
    return (
        f'<div class="card"><div>{html.escape(label)}</div><div class="v">{html.escape(value)}</div>'
        f'<div class="u">{html.escape(detail)}</div></div>'
    )


def category_rows(a: Assessment) -> list[list[str]]:
    rows = []
    for c in cat.categories():
        r = a.impacts[c.key]
        total, low, high, unit = qty(r.total, r.unit, r.low, r.high)  # one readable unit per row
        rows.append(
            [
                r.name,
                total,
                unit,
                low,
                high,
                num((a.normalised.get(c.key) or {}).get("person_equivalents")),
                *(r.stage_text(s) for s in cat.stages()),
                r.dominant_text,
            ]
        )
    return rows


def _sensitivity_html(a: Assessment) -> list[str]:
    rows = sensitivity_rows(a)
    if not rows:
        return []
    return [
        "<h2>What drives the uncertainty</h2>",
        f'<p class="sub">{html.escape(SENSITIVITY_NOTE)}</p>',
        _table(list(rows[0]), [list(r.values()) for r in rows], "num sens"),
    ]


def _sensitivity_md(a: Assessment) -> list[str]:
    rows = sensitivity_rows(a)
    if not rows:
        return []
    return [
        "## What drives the uncertainty",
        "",
        SENSITIVITY_NOTE,
        "",
        _md_table(list(rows[0]), [list(r.values()) for r in rows]),
        "",
    ]


METHOD_HEADERS = ["Category", "Characterisation of the use-phase factor", "In the EF 3.1 single score", "Dominant stage"]


def method_rows(a: Assessment) -> list[list[str]]:
    """Per category: the characterisation method behind its use-phase factor, whether the single score counts it as
    EF 3.1 (else why it is partial), and the dominant stage with the share of Monte Carlo draws that agree."""
    reasons = (a.single_score or {}).get("partial_reasons") or {}
    rows = []
    for k in cat.keys():
        r = a.impacts[k]
        share = r.dominant_stage_draws
        dom = r.dominant_text + (f" ({share:.0%} of draws)" if share is not None else "")
        rows.append([r.name, r.characterisation or "n/a", f"partial: {reasons[r.name]}" if r.name in reasons else "yes", dom])
    return rows


def methods_text(a: Assessment) -> list[str]:
    d = a.to_dict()["method"]
    return [
        f"GPU time: {d['gpu_hours']}.",
        f"Energy: {d['energy']}.",
        f"Embodied: {d['embodied']}.",
        f"Use phase: {d['use']}.",
        f"Characterisation: {d['characterisation']}.",
        f"Long-term emissions: {d['long_term_emissions']}.",
        f"Uncertainty: {d['uncertainty']}.",
        "Dominant stage: named only where at least 90 % of the Monte Carlo draws agree; 'not determined (split)' below.",
        "Not available (n/a) means no data exists for that part; it is never counted as zero. "
        f"Not modelled means {NOT_MODELLED}.",
    ]


# ---- HTML ---------------------------------------------------------------------------------------

CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;max-width:1100px;margin:24px auto;
padding:0 16px;color:#222;line-height:1.4}
h1{font-size:1.7em;margin-bottom:0}h2{border-bottom:2px solid #4E79A7;padding-bottom:4px;margin-top:32px}
.sub{color:#666;margin-top:4px}table{border-collapse:collapse;width:100%;font-size:.88em;margin:8px 0}
th,td{border-bottom:1px solid #e3e3e3;padding:4px 6px;text-align:right;vertical-align:top}th{background:#f4f6fa}
td:first-child,th:first-child{text-align:left}.kv td{text-align:left}.kv td:first-child{font-weight:600;width:180px}
.cmp td,.cmp th{text-align:left}.src td,.src th{text-align:left}.num td:not(:first-child){white-space:nowrap}
.src td:first-child{width:62%}.src td:last-child{width:38%}
.num.sens td:last-child,.num.sens th:last-child{white-space:normal;text-align:left;width:45%}
@media (max-width:1000px){body{padding:0 8px}table{font-size:.74em}th,td{padding:3px 2px}
.num td:not(:first-child){white-space:normal}}
.notes td,.notes th{text-align:left}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{flex:1;min-width:180px;border:1px solid #dde3ee;border-radius:8px;
padding:10px 14px;background:#fafbfe}.card .v{font-size:1.5em;font-weight:700}.card .u{color:#666;font-size:.85em}
.cards.key{margin-bottom:12px}.key .card{background:#eef3fb;border-color:#4E79A7}.key .card .v{font-size:1.9em}
.key .card .u{color:#333}
.fig{margin:12px 0}.fig svg{max-width:100%;height:auto}
details{border:1px solid #e3e3e3;border-radius:6px;padding:6px 10px;margin:6px 0;background:#fcfcfd}
details summary{cursor:pointer}details[open] summary{margin-bottom:6px}details.warn summary b{color:#8a5300}
a{color:#2b5d99;overflow-wrap:anywhere}.cmp{overflow-x:auto}
@page{size:A4;margin:14mm 12mm}
@media print{body{max-width:none;margin:0;padding:0;font-size:10pt}h2{page-break-after:avoid}.fig{page-break-inside:avoid}
.cards{gap:6px}.card{min-width:0;padding:6px 8px}.card .v{font-size:1.2em}.key .card .v{font-size:1.4em}
table{font-size:8pt}th,td{padding:3px 4px}
tr{page-break-inside:avoid}details{border:none;padding:0;background:none}
.src td:first-child{width:70%}.src td:last-child{width:30%}}
"""


def _table(headers: list[str], rows: list[list[str]], cls: str = "", raw: bool = False) -> str:
    """An HTML table; cells are escaped unless ``raw`` (cells built here with their own escaping, e.g. links)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    cell = (lambda c: str(c)) if raw else (lambda c: html.escape(str(c)))
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _link(text: str, url: str | None) -> str:
    """An escaped link (http(s) URLs only; anything else stays text)."""
    if url and url.startswith(("http://", "https://")):
        return f'<a href="{html.escape(url, quote=True)}">{html.escape(text)}</a>'
    return html.escape(text)


def sources_html(a: Assessment) -> str:
    """Every source: its title linked to its URL, and its licence (two columns that print on A4)."""
    rows = [[_link(src["title"], src.get("url")), html.escape(src.get("licence") or "not stated")] for src in a.sources]
    return _table(["Source", "Licence"], rows, "src", raw=True)


def notes_html(groups: list[NoteGroup], open_all: bool = False) -> str:
    """The caveats, one folded block per group: its summary shows, its items open on a click (all open in a PDF)."""
    out = []
    for g in groups:
        cls = ' class="warn"' if g.key in ("inputs", "embodied", "electricity", "other") else ""
        cls += " open" if open_all else ""
        body = (
            _table(["Factor", "Unit", "Value (source)", "Other source", "Ratio"], [list(r.values()) for r in g.rows], "notes")
            if g.rows
            else "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in g.items) + "</ul>"
        )
        out.append(
            f"<details{cls}><summary><b>{html.escape(g.title)} ({len(g.items)})</b>: {html.escape(g.summary)}</summary>"
            f"{body}</details>"
        )
    return "".join(out)


def _fig(svg: str | None, caption: str) -> str:
    return f'<div class="fig">{svg}<div class="sub">{html.escape(caption)}</div></div>' if svg else ""


def _section_html(s: Section, printed: bool = False) -> str:
    a = s.assessment
    groups = note_groups(a)
    parts = [
        f"<h2>Summary — {html.escape(a.workload.name)}</h2>",
        f'<div class="cards key">{"".join(_card(*h) for h in key_cards(a))}</div>',
        f'<div class="cards">{"".join(_card(*h) for h in headline(a))}</div>',
        f'<p class="sub">{html.escape(SCORE_NOTE)}</p>',
        _table(["", ""], [list(r) for r in summary_rows(a)], "kv"),
        "<h2>All 16 EF 3.1 categories</h2>",
        _table(CAT_HEADERS, category_rows(a), "num"),
        _fig(s.figures.get("stages"), "Which stage dominates each category (n/a: no data for that stage)."),
        *_sensitivity_html(a),
        *_normalised_html(s),
        "<h2>Notes: scope, contested data and warnings</h2>",
        f'<p class="sub">{note_count(groups)} notes in {len(groups)} groups; open a group for its items. The Assessment '
        "JSON (<code>--format json</code>) lists them all.</p>",
        notes_html(groups, open_all=printed),
    ]
    if "components" in s.figures:  # a run without GPU has neither: its server's impacts come whole, without a mass
        parts += [
            "<h2>Embodied impacts by GPU component</h2>",
            _fig(s.figures.get("components"), f"Embodied data: {a.embodied_method}."),
            "<h2>Material footprint</h2>",
            _fig(
                s.figures.get("materials"),
                "Hardware consumed = GPU lifetimes x each part's mass. Element ranges are estimates from a generic PCB "
                "composition across literature sources (a diamond: the sources give one value).",
            ),
        ]
    if "power" in s.figures or "mfu" in s.figures:
        parts += [
            "<h2>Measured run</h2>",
            _fig(s.figures.get("power"), "Power per device, one panel each (same scale)."),
            _fig(s.figures.get("mfu"), "Steady-state MFU per step."),
        ]
    if s.kernels:
        k = s.kernels
        parts += [
            "<h2>Kernel analysis</h2>",
            _fig(s.figures.get("kernels"), "From the profiler trace."),
            f'<p class="sub">Device {html.escape(str((k.get("device") or {}).get("name")))}; busy '
            f"{num(k.get('busy_time_us'))} µs of {num(k.get('total_time_us'))} µs.</p>",
            *(f'<p class="sub">{html.escape(n)}.</p>' for n in _kernel_notes(k)),
        ]
    lt = long_term_rows(a)
    parts += [
        "<h2>Methods</h2><ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in methods_text(a)) + "</ul>",
        _table(METHOD_HEADERS, method_rows(a), "cmp"),
        *(["<h3>Long-term emissions, both ways (use stage)</h3>", _table(LONG_TERM_HEADERS, lt, "cmp")] if lt else []),
        "<h2>Sources and licences</h2>" + sources_html(a),
    ]
    return "\n".join(parts)


def _kernel_notes(k: dict[str, Any]) -> list[str]:
    """The trace's launchless GPU events (carried over from before the recording), as the CLI says them."""
    from footprint.kernels.render import linking_notes

    return [n[0].upper() + n[1:] for n in linking_notes(k)]


def _normalised_html(s: Section) -> list[str]:
    a = s.assessment
    if not a.normalised:
        return []
    return [
        "<h2>Which categories matter: EF 3.1 normalisation and weighting</h2>",
        _fig(s.figures.get("single_score"), "Share of the single score per category, with person-equivalents."),
        _table(NORM_HEADERS, normalised_rows(a), "num"),
        f'<p class="sub">{html.escape(PE_NOTE)} {html.escape(a.single_score.get("note", ""))}</p>',
    ]


def _compare_html(sections: list[Section]) -> str:
    from footprint.reports import figures

    names = [s.assessment.workload.name for s in sections]
    rows = []
    for c in cat.categories():
        rows.append(
            [c.name, display_unit(c.unit)]
            + [
                f"{num(s.assessment.impacts[c.key].total)} ({s.assessment.impacts[c.key].stage_text('use')} use)"
                for s in sections
            ]
        )
    facts = [summary_facts(s.assessment) for s in sections]
    summary = [[label] + [f[label] for f in facts] for label in facts[0]]
    return "\n".join(
        [
            "<h2>Comparison</h2>",
            '<div class="cmp">',
            _table([""] + names, summary, "cmp"),
            "</div>",
            _fig(
                figures.compare_headline([s.assessment for s in sections]),
                "Headline categories, log scale (each total at the end of its bar; whiskers: Monte Carlo low-high).",
            ),
            '<div class="cmp">',
            _table(["Category", "Unit"] + names, rows),
            "</div>",
        ]
    )


def to_html(sections: list[Section], printed: bool = False) -> str:
    """One self-contained HTML document; ``printed``: for the PDF (every folded note group open)."""
    title = " vs ".join(s.assessment.workload.name for s in sections)
    body = []
    if len(sections) > 1:
        body.append(_compare_html(sections))
    body += [_section_html(s, printed) for s in sections]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' "
        f"content='width=device-width,initial-scale=1'><title>{html.escape(title)} — footprint report</title>"
        f"<style>{CSS}</style></head><body><h1>Environmental footprint: {html.escape(title)}</h1>"
        f"<p class='sub'>16 EU Environmental Footprint 3.1 categories across the GPU's life. footprint "
        f"{__version__}, {stamp}.</p>{''.join(body)}</body></html>\n"
    )


# ---- Markdown -----------------------------------------------------------------------------------


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(map(md_text, headers)) + " |", "|" + "---|" * len(headers)]
        + ["| " + " | ".join(map(md_text, r)) + " |" for r in rows]
    )


def to_markdown(sections: list[Section], out: Path) -> str:
    from footprint.reports import figures

    fig_dir = check_dir_target(out.parent / f"{out.stem}_files")  # a symlink planted there is refused, not followed

    def fig(name: str, svg: str | None, caption: str, idx: int) -> str:
        if not svg:
            return ""
        path = fig_dir / f"{idx}-{name}.svg"
        write_text(path, svg)
        return f"![{md_text(caption)}]({fig_dir.name}/{path.name})\n\n*{caption}*\n"

    lines = [
        f"# Environmental footprint: {md_text(' vs '.join(s.assessment.workload.name for s in sections))}",
        "",
        f"16 EU Environmental Footprint 3.1 categories across the GPU's life (footprint {__version__}).",
        "",
    ]
    if len(sections) > 1:
        names = [s.assessment.workload.name for s in sections]
        lines += [
            "## Comparison",
            "",
            _md_table(
                ["Category", "Unit", *names],
                [
                    [c.name, display_unit(c.unit)] + [num(s.assessment.impacts[c.key].total) for s in sections]
                    for c in cat.categories()
                ],
            ),
            "",
            fig("compare", figures.compare_headline([s.assessment for s in sections]), "Headline categories, log scale", 0),
        ]
    for i, s in enumerate(sections):
        a = s.assessment
        lines += [
            f"## Summary — {md_text(a.workload.name)}",
            "",
            *[f"- **{md_text(label)}: {md_text(value)}** ({md_text(detail)})" for label, value, detail in key_cards(a)],
            "",
            *[f"- {md_text(label)}: {md_text(value)} ({md_text(detail)})" for label, value, detail in headline(a)],
            "",
            SCORE_NOTE,
            "",
            _md_table(["", ""], [list(r) for r in summary_rows(a)]),
            "",
            "## All 16 EF 3.1 categories",
            "",
            _md_table(CAT_HEADERS, category_rows(a)),
            "",
            fig("stages", s.figures.get("stages"), "Share of each life-cycle stage per category", i),
            *_sensitivity_md(a),
            *_normalised_md(s, fig, i),
            *_notes_md(a),
        ]
        if "components" in s.figures:  # none for a run without GPU
            lines += [
                "## Embodied impacts by GPU component",
                "",
                fig("components", s.figures.get("components"), f"Embodied data: {a.embodied_method}", i),
                "## Material footprint",
                "",
                fig("materials", s.figures.get("materials"), "Hardware consumed and the elements of its board and chips", i),
            ]
        if "power" in s.figures:
            lines += [
                "## Measured run",
                "",
                fig("power", s.figures.get("power"), "Power per device", i),
                fig("mfu", s.figures.get("mfu"), "MFU per step", i),
            ]
        if s.kernels:
            lines += ["## Kernel analysis", "", fig("kernels", s.figures.get("kernels"), "GPU time by kernel category", i)]
            lines += [line for n in _kernel_notes(s.kernels) for line in (f"{md_text(n)}.", "")]
        lines += ["## Methods", "", *(f"- {md_text(m)}" for m in methods_text(a))]
        lines += ["", _md_table(METHOD_HEADERS, method_rows(a))]
        lt = long_term_rows(a)
        if lt:
            lines += ["", "### Long-term emissions, both ways (use stage)", "", _md_table(LONG_TERM_HEADERS, lt)]
        lines += ["", "## Sources and licences", ""]
        lines += [f"- {md_source(src)}" for src in a.sources]
        lines.append("")
    return "\n".join(lines) + "\n"


def _normalised_md(s: Section, fig: Any, i: int) -> list[str]:
    a = s.assessment
    if not a.normalised:
        return []
    return [
        "## Which categories matter: EF 3.1 normalisation and weighting",
        "",
        fig("single_score", s.figures.get("single_score"), "Share of the single score per category", i),
        _md_table(NORM_HEADERS, normalised_rows(a)),
        "",
        f"{PE_NOTE} {a.single_score.get('note', '')}",
        "",
    ]


def _notes_md(a: Assessment) -> list[str]:
    """The caveats, one folded `<details>` block per group (GitHub renders them)."""
    groups = note_groups(a)
    if not groups:
        return []
    out = ["## Notes: scope, contested data and warnings", "", f"{note_count(groups)} notes in {len(groups)} groups.", ""]
    for g in groups:
        out += [f"<details><summary><b>{html.escape(g.title)} ({len(g.items)})</b>: {html.escape(g.summary)}</summary>", ""]
        out += [f"- {md_text(x)}" for x in g.items] + ["", "</details>", ""]
    return out


# ---- BoAmps-style export ------------------------------------------------------------------------


def to_boamps(a: Assessment) -> dict[str, Any]:
    """A BoAmps-style report (Boavizta's AI energy reporting format, github.com/Boavizta/BoAmps): header,
    task, measures, infrastructure, environment; the 16 EF categories ride in an extension block."""
    w = a.workload
    measured = w.energy_method.startswith("measured")
    return {
        "$schema": "https://raw.githubusercontent.com/Boavizta/BoAmps/main/model/report_schema.json",
        "header": {
            "formatVersion": "1.1.0",
            "reportId": str(uuid.uuid4()),
            "reportStatus": "draft",
            "reportDatetime": datetime.now(UTC).isoformat(timespec="seconds"),
            "licensing": "CC BY-SA 4.0 (ADEME-derived embodied data)",
            "publisher": {"name": "footprint", "confidentialityLevel": "public"},
        },
        "task": {
            "taskStage": "training",
            "taskFamily": "text generation" if w.model else None,
            "algorithms": [{"algorithmName": w.name, "parametersNumber": w.model.get("parameters") if w.model else None}],
            "dataset": [{"dataType": "token", "items": w.model.get("tokens")}] if w.model.get("tokens") else [],
        },
        "measures": [
            {
                "measurementMethod": f"footprint: {w.energy_method}",
                "unit": "kWh",
                "powerConsumption": w.it_energy_kwh,
                "measurementDuration": w.host_hours * 3600 if w.host_only else w.gpu_hours * 3600 / max(w.count, 1),
                # averageUtilizationGpu is the GPU's busy share (NVML/DCGM utilisation), which footprint does not
                # record: left out rather than filled with the MFU, a different quantity (in footprintExtension)
            }
        ],
        "infrastructure": {
            "infraType": "onPremise" if measured else "$other",
            "components": [
                {"componentName": HOST_ONLY, "componentType": "cpu", "nbComponent": 1}
                if w.gpu is None
                else {
                    "componentName": w.gpu.name,
                    "componentType": "gpu",
                    "nbComponent": w.count,
                    "memorySize": w.gpu.memory_gb,
                    "manufacturer": w.gpu.vendor,
                }
            ],
        },
        "environment": {
            "country": w.grid,
            "powerSourceCarbonIntensity": (w.carbon_intensity or a.zone.factors["climate_change"].value) * 1000,
        },
        "footprintExtension": {
            "pue": w.pue,
            "facilityEnergyKwh": a.facility_energy_kwh,
            "gpuHours": w.gpu_hours,
            "gpuEquivalents": w.gpu_equivalents,
            "mfu": w.mfu,  # model FLOPs utilisation: useful FLOPs / dense peak, not the GPU's busy share
            "mfuMethod": w.mfu_method,
            "waterL": a.water_l,
            "impacts": {
                k: {"unit": r.unit, "total": r.total, "low": r.low, "high": r.high}
                for k, r in a.impacts.items()
                if k in cat.keys()
            },
        },
    }


STDOUT_FORMATS = ("html", "json", "csv", "boamps")


def check_output(output: str, fmt: str | None) -> str:
    """The report's format, the target checked before any work (stdout needs a text format; a pipe, a device, a
    directory or a symlink out is refused)."""
    if output == "-":
        if fmt not in STDOUT_FORMATS:
            raise FootprintError(
                f"-o - (stdout) needs --format {'|'.join(STDOUT_FORMATS)}; Markdown and PDF need a file", key="--output"
            )
        return fmt
    check_file_target(Path(output))
    return infer_format(output, fmt)


def write_report(
    items: list[Assessment | Section], output: str, fmt: str | None = None, trace: str | None = None, quiet: bool = False
) -> Path | None:
    """Render assessments (or sections built by `footprint.api.report_sections`) into a report; returns the path
    written (None for stdout, output '-'). Assessing targets is the caller's (`footprint.api.write_report`)."""
    import sys

    fmt = check_output(output, fmt)
    out = Path(output)

    def write(text: str) -> Path | None:
        text = text if text.endswith("\n") else text + "\n"
        if output == "-":
            sys.stdout.write(text)
            return None
        write_text(out, text)
        return out

    assessments = [section(x).assessment for x in items]
    if fmt == "json":
        data: Any = assessments[0].to_dict() if len(assessments) == 1 else {"reports": [x.to_dict() for x in assessments]}
        return write(json.dumps(data, indent=2, default=str))
    if fmt == "boamps":
        b = [to_boamps(x) for x in assessments]
        return write(json.dumps(b[0] if len(b) == 1 else b, indent=2, default=str))
    if fmt == "csv":  # one table; with --compare, a first column names the scenario or run
        return write(to_csv(assessments[0]) if len(assessments) == 1 else _csv_with_names(assessments))
    from rich.console import Console

    console = Console(stderr=True)  # the status goes to stderr, and only to a terminal: redirected output stays clean
    with console.status("drawing the figures") if console.is_terminal and not quiet else contextlib.nullcontext():
        sections = build_sections(items, trace)
        if fmt == "md":
            write_text(out, to_markdown(sections, out))
        elif fmt == "html":
            return write(to_html(sections))
        else:
            with atomic_path(out) as tmp:  # Chromium writes the temporary file; renamed only when whole
                html_to_pdf(to_html(sections, printed=True), tmp)
    return out


def _csv_with_names(assessments: list[Assessment]) -> str:
    """The assessments' CSV tables one after the other, a first column naming each (neutralised: a name starting
    with = + - @ cannot run as a spreadsheet formula)."""
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    for i, a in enumerate(assessments):
        rows = list(csv.reader(io.StringIO(to_csv(a))))
        if i == 0:
            wr.writerow(["scenario", *rows[0]])
        wr.writerows([csv_cell(a.workload.name), *row] for row in rows[1:])
    return buf.getvalue()
