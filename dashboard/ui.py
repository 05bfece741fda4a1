"""Drawing blocks the pages share: headline metrics, the 16-category table and chart, materials, notes."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from dashboard import core
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, num
from footprint.lca.units import display_unit

STAGE_ORDER = list(core.STAGE_LABELS.values())
_VERSION = tuple(int(x) for x in re.findall(r"\d+", st.__version__)[:2])
# width="stretch" replaced use_container_width=True (deprecated) in recent Streamlit releases.
WIDE: dict[str, Any] = {"width": "stretch"} if _VERSION >= (1, 50) else {"use_container_width": True}
STAGE_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2"]
PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac", "#ff9da6"]
LABEL_LIMIT = 260  # pixels of an axis label before Vega-Lite cuts it


def headline(a: Assessment, base: Assessment | None = None) -> None:
    """The three headline categories (climate change, human toxicity cancer, minerals and metals) as metrics,
    with their change from ``base``; then GPU-hours, energy, GPU-equivalents and water."""
    cols = st.columns(len(cat.HEADLINE))
    for col, k in zip(cols, cat.HEADLINE, strict=True):
        r = a.impacts[k]
        delta = core.change(r.total, base.impacts[k].total) if base is not None else None
        col.metric(
            f"{r.name} ({display_unit(r.unit)})",
            num(r.total),
            delta=delta,
            delta_color="inverse",
            help=f"low - high {num(r.low)} - {num(r.high)} (Monte Carlo, {a.samples} samples)"
            + ("" if base is None else f"; base {core.quantity(base.impacts[k].total, r.unit)}"),
        )
    w = a.workload
    bw = base.workload if base is not None else None
    cols = st.columns(4)
    figures = [
        ("GPU-hours", w.gpu_hours, bw.gpu_hours if bw else None, "h"),
        ("Energy (IT)", w.it_energy_kwh, bw.it_energy_kwh if bw else None, "kWh"),
        ("GPU-equivalents", float(w.gpu_equivalents), float(bw.gpu_equivalents) if bw else None, ""),
        ("Water", a.water_l["total"], base.water_l["total"] if base is not None else None, "L"),
    ]
    for col, (label, value, old, unit) in zip(cols, figures, strict=True):
        shown = num(value) if unit else f"{int(value):,}"
        col.metric(f"{label} ({unit})" if unit else label, shown, delta=core.change(value, old), delta_color="inverse")


def categories(a: Assessment, base: Assessment | None = None) -> None:
    """All 16 categories: a table with stage shares, and a stacked bar chart of the shares."""
    st.dataframe(core.categories_table(a, base), hide_index=True, **WIDE)
    stage_chart(core.stage_shares(a), order=STAGE_ORDER)
    st.caption(
        "Shares: stage / total. n/a = not available (no open data for that stage), never zero; "
        "n/a stages are left out of the chart."
    )


def normalised(a: Assessment, base: Assessment | None = None) -> None:
    """EF 3.1 single score and person-equivalents, with the value-choice caveat and the contested data."""
    s = a.single_score
    if not s:
        return
    delta = core.change(s["value"], base.single_score["value"]) if base is not None and base.single_score else None
    st.metric(
        "EF 3.1 single score (Pt)",
        num(s["value"]),
        delta=delta,
        delta_color="inverse",
        help=f"low - high {num(s['low'])} - {num(s['high'])}; 1 Pt = the weighted annual impact of one person",
    )
    st.caption(s["note"])
    st.dataframe(core.normalised_rows(a, base), hide_index=True, **WIDE)
    st.caption(
        "Person-equivalents: impact / EF 3.1 normalisation factor (the annual impact of an average world citizen). "
        f"Electricity: {a.use_factors.label if a.use_factors else 'n/a'}."
    )
    rows = core.contested_rows(a)
    if rows:
        with st.expander(f"Contested data ({len(rows)}): sources that differ by more than 3x"):
            st.dataframe(rows, hide_index=True, **WIDE)
            st.caption("The Monte Carlo range of each of these factors spans both sources.")


def vega(rows: Any, spec: dict[str, Any]) -> None:
    """A Vega-Lite chart from a plain spec (no altair import: it costs seconds on a cold start).
    The spec's "height" (pixels of the plot) is passed to Streamlit as the element's height."""
    spec = dict(spec)
    height = spec.pop("height", None)
    extra = {"height": int(height) + 110} if height and _VERSION >= (1, 50) else {}
    if height and not extra:
        spec["height"] = height
    st.vega_lite_chart(rows, spec, **WIDE, **extra)


def stage_chart(rows: list[dict[str, Any]], group: str = "stage", order: list[str] | None = None) -> None:
    """Stacked horizontal bars of shares (percent) per category, coloured by ``group`` (stage or component)."""
    if not rows:
        return
    names = list(dict.fromkeys(r["category"] for r in rows))
    order = order or list(dict.fromkeys(r[group] for r in rows))
    rows = [{**r, "rank": order.index(r[group])} for r in rows]
    scale = {"domain": order, "range": STAGE_COLOURS if group == "stage" else PALETTE}
    vega(
        rows,
        {
            "mark": {"type": "bar"},
            "height": max(160, 26 * len(names)),
            "encoding": {
                "y": {"field": "category", "type": "nominal", "sort": names, "title": None, "axis": {"labelLimit": LABEL_LIMIT}},
                "x": {
                    "field": "share",
                    "type": "quantitative",
                    "stack": "zero",
                    "title": "share of the category total (%)",
                    "scale": {"nice": False},
                },
                "color": {"field": group, "type": "nominal", "scale": scale, "legend": {"orient": "bottom", "title": None}},
                "order": {"field": "rank", "type": "quantitative"},
                "tooltip": [
                    {"field": "category", "type": "nominal"},
                    {"field": group, "type": "nominal"},
                    {"field": "share", "type": "quantitative", "format": ".1f"},
                ],
            },
        },
    )


def materials(a: Assessment) -> None:
    m = a.materials
    c1, c2, c3 = st.columns(3)
    c1.metric(
        "GPU lifetimes consumed",
        f"{m['gpu_lifetimes']:,.2f}",
        help="GPU-hours / (lifetime x utilisation): the hardware lifetimes the run uses up (Falk et al.)",
    )
    c2.metric("GPU-equivalents", f"{m['gpu_equivalents']:,}", help="ceil of the GPU lifetimes consumed")
    c3.metric(
        "Material footprint",
        f"{num(m['mass_gpu_equivalents_kg'])} kg",
        help=f"GPU-equivalents x card mass (hardware consumed: {num(m['mass_consumed_kg'])} kg)",
    )
    mass, elements = core.materials_rows(a)
    left, right = st.columns(2)
    left.dataframe(mass, hide_index=True, **WIDE)
    if elements:
        right.dataframe(elements, hide_index=True, **WIDE)
        est = m.get("elements_estimate") or {}
        right.caption(f"Element ranges in the board and chips (estimate): {est.get('basis') or ''} [{est.get('source') or ''}]")
    if m.get("note"):
        st.caption(m["note"] + (" Card geometry is a proxy (estimate)." if m.get("estimate") else ""))
    facts = m.get("facts") or {}
    if facts:
        with st.expander("Composition facts (cited)"):
            st.dataframe(
                [
                    {
                        "fact": k.replace("_", " "),
                        "value": str(v.get("value")),
                        "note": v.get("note", ""),
                        "source": v.get("source", ""),
                    }
                    for k, v in facts.items()
                ],
                hide_index=True,
                **WIDE,
            )


def warnings_and_sources(a: Assessment) -> None:
    with st.expander(f"Warnings ({len(a.warnings)}) and method"):
        for w in a.warnings:
            st.markdown(f"- {w}")
        d = a.to_dict()["method"]
        st.markdown("\n".join(f"- **{k}**: {v}" for k, v in d.items()))
    with st.expander(f"Sources ({len(a.sources)})"):
        st.dataframe(
            [{k: s.get(k) for k in ("id", "title", "year", "licence", "url")} for s in a.sources], hide_index=True, **WIDE
        )


def show_user_error(exc: BaseException) -> None:
    """A user mistake as the CLI prints it: one line, no traceback."""
    st.error(f"footprint: error: {core.user_error_message(exc)}")
