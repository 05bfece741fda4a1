"""A fleet report rendered as a page, and `footprint fleet report` written in any format: the numbers come from
`footprint.fleet.report.build_report` (or the ledger's streamed `--by job` listing), the page's style and figures
from the reports' own.

Layer: consumers (`footprint.reports`); imports the fleet producer and the core.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet.report import (
    METHOD,
    UNALLOCATED,
    FleetReport,
    Rows,
    _pct,
    _range_text,
    build_report,
    infer_format,
    low_high,
    not_modelled_note,
    to_csv,
    to_json,
    to_table,
)
from footprint.lca import DEFAULT_SAMPLES
from footprint.outputs import check_file_target, write_text
from footprint.reports import palette
from footprint.reports.figures import _plt, _svg
from footprint.reports.report import CSS, _fig, _table


def to_html(r: FleetReport) -> str:
    from footprint import __version__
    from footprint.lca import categories as cat
    from footprint.lca.assessment import lifetimes, num
    from footprint.lca.units import display_unit

    t = r.totals
    win = r.meta.get("window") or {}
    cc_unit = display_unit(r.units["climate_change"])
    cards = [
        ("Jobs assessed", f"{t.jobs:,} of {r.jobs_total:,}", "with a known GPU model and measured energy"),
        ("GPU-hours", num(t.gpu_hours), f"{lifetimes(t.gpu_lifetimes)} GPU lifetimes consumed"),
        ("Energy", f"{num(t.energy_kwh)} kWh", f"IT; {num(t.facility_energy_kwh)} kWh facility"),
        ("Climate change", f"{num(t.impacts.get('climate_change'))}", cc_unit + _range_text(t, "climate_change")),
        (
            "Unallocated",
            _pct(r.unallocated_share.get("gpu_time")),
            f"of GPU time; {_pct(r.unallocated_share.get('gpu_energy'))} of GPU energy",
        ),
    ]
    card_html = "".join(
        f'<div class="card"><div>{html.escape(a)}</div><div class="v">{html.escape(b)}</div>'
        f'<div class="u">{html.escape(c)}</div></div>'
        for a, b, c in cards
    )
    head = [r.by, "Jobs", "GPU-hours", "Energy kWh", "GPU lifetimes", "Single score (Pt)"] + [
        f"{r_.name} ({display_unit(r_.unit)})" for r_ in (cat.by_key(k) for k in cat.HEADLINE)
    ]

    def line(x: Rows) -> list[str]:
        return [
            x.label,
            f"{x.jobs:,}" if x.jobs else "",
            num(x.gpu_hours),
            num(x.energy_kwh),
            lifetimes(x.gpu_lifetimes),
            num(x.single_score_pt),
        ] + [num(x.impacts.get(k)) for k in cat.HEADLINE]

    group_rows = [line(g) for g in r.groups] + [line(t)] + ([line(r.unallocated)] if r.unallocated else [])
    shown = r.groups[:8]
    cat_rows = [
        [c.name, display_unit(c.unit)]
        + [num(g.impacts.get(c.key)) for g in shown]
        + [num(t.impacts.get(c.key)), low_high(t, c.key) or "n/a"]
        + [num(r.unallocated.impacts.get(c.key)) if r.unallocated else "n/a"]
        + [t.status(c.key)]
        for c in cat.categories()
    ]
    top_rows = [
        [
            j["job_id"],
            str(j["name"]),
            str(j["user"]),
            str(j["gpus"]),
            num(j["gpu_hours"]),
            num(j["energy_kwh"]),
            num(j["climate_change_kg"]),
            _pct(j["coverage"]),
        ]
        for j in r.top_jobs
    ]
    parts = [
        f"<h1>Fleet footprint</h1><p class='sub'>{html.escape(r.fleet)} · {html.escape(str(win.get('start')))} – "
        f"{html.escape(str(win.get('end')))} · by {html.escape(r.by)} · footprint {__version__}</p>",
        f'<div class="cards">{card_html}</div>',
        _fig(_figure(r), f"Climate change by {r.by} and life-cycle stage (unallocated GPU time beside the groups)."),
        f"<h2>By {html.escape(r.by)}</h2>",
        _table(head, group_rows),
        "<h2>All 16 EF 3.1 categories</h2>",
        '<div class="cmp">',
        _table(
            ["Category", "Unit"] + [g.label for g in shown] + ["All jobs", "All jobs low-high", UNALLOCATED, "Status"], cat_rows
        ),
        "</div>",
        f"<p class='sub'>{html.escape(note)}</p>" if (note := not_modelled_note(r)) else "",
        f"<p class='sub'>{len(r.groups) - len(shown)} more group(s) in the CSV/JSON output.</p>"
        if len(r.groups) > len(shown)
        else "",
        "<h2>Top jobs</h2>",
        _table(
            ["Job", "Name", "User", "GPUs", "GPU-hours", "Energy kWh", f"Climate change ({cc_unit})", "Telemetry coverage"],
            top_rows,
        ),
    ]
    if r.not_assessed:
        rows = [[x["job_id"], num(x["gpu_hours"]), x["reason"]] for x in r.not_assessed[:50]]
        parts += ["<h2>Not assessed</h2>", _table(["Job", "GPU-hours", "Reason"], rows)]
    parts += [
        "<h2>Method</h2><ul>"
        + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in METHOD.items())
        + "</ul>",
        "<h2>Warnings</h2><ul class='warn'>" + "".join(f"<li>{html.escape(w)}</li>" for w in r.warnings) + "</ul>",
        "<h2>Sources and licences</h2>"
        + _table(["Source", "Licence", "Link"], [[s["title"], s.get("licence") or "", s.get("url") or ""] for s in r.sources]),
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' "
        f"content='width=device-width,initial-scale=1'><title>Fleet footprint — footprint</title><style>{CSS}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def _figure(r: FleetReport) -> str | None:
    from footprint.lca import categories as cat

    rows = r.groups[:12] + ([r.unallocated] if r.unallocated else [])
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2))
    left = np.zeros(len(rows))
    for s in cat.stages():
        vals = np.array([x.by_stage["climate_change"].get(s) or 0.0 for x in rows])
        ax.barh([x.label for x in rows], vals, left=left, color=palette.stage(s), label=palette.label(s))
        left += vals
    ax.invert_yaxis()
    ax.set_xlabel("kg CO2 eq")
    ax.legend(fontsize=7, frameon=False, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)))
    return _svg(fig)


def write_report(
    fleet: str | Path,
    output: str | None,
    by: str = "user",
    fmt: str | None = None,
    top: int = 10,
    sets: list[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> Path | None:
    """Build the report and write it to ``output`` (atomically), or return None after printing it when no output."""
    fmt = infer_format(output, fmt)
    if output:
        check_file_target(output)  # refused before the work (a pipe, a device, a directory, a symlink out)
    if by == "job":
        from footprint.fleet import ledger

        if fmt == "html":
            raise FootprintError("--by job: table, csv or json (a page per million jobs is no report)", key="--format")
        return ledger.write_jobs(fleet, output, fmt, sets, samples=samples, seed=seed)
    rep = build_report(fleet, by, top, sets, samples, seed)
    text = {"table": to_table, "html": to_html, "csv": to_csv, "json": to_json}[fmt](rep)
    if not output:
        import sys

        sys.stdout.write(text)
        return None
    return write_text(output, text)
