"""Drawing blocks the pages share: headline metrics, the 16-category table and chart, materials, notes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core
from footprint.escaping import md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import (
    SCORE_NOTE,
    SENSITIVITY_NOTE,
    Assessment,
    hardware_text,
    key_figures,
    lifetimes,
    num,
    partial_text,
    plain,
    qty,
    sensitivity_rows,
)
from footprint.lca.render import NOT_MODELLED
from footprint.lca.workload import Workload
from footprint.reports import palette

STAGE_ORDER = list(core.STAGE_LABELS.values())
_VERSION = tuple(int(x) for x in re.findall(r"\d+", st.__version__)[:2])
# width="stretch" replaced use_container_width=True (deprecated) in recent Streamlit releases.
WIDE: dict[str, Any] = {"width": "stretch"} if _VERSION >= (1, 50) else {"use_container_width": True}
# Colours: the report's (footprint.reports.palette), so that a stage or a component has one colour everywhere.
STAGE_SCALE = palette.vega_scale(palette.STAGES, core.STAGE_LABELS)
PALETTE = list(palette.SERIES)
LABEL_LIMIT = 260  # pixels of an axis label before Vega-Lite cuts it


def headline(a: Assessment, base: Assessment | None = None) -> None:
    """The key figures first (kg CO2 eq, kWh, litres of water, GPU-hours, each with its range: what most readers came
    for), then the other headline categories and GPU lifetimes consumed; deltas are the change from ``base``."""
    w, bw = a.workload, base.workload if base is not None else None
    values = [a.impacts["climate_change"].total, a.facility_energy_kwh, a.water_l["total"], _hours(w)]
    olds = (
        [base.impacts["climate_change"].total, base.facility_energy_kwh, base.water_l["total"], _hours(bw)]
        if base is not None and bw is not None
        else [None] * 4
    )
    cols = st.columns(4)
    for col, (label, value, rng, detail), v, old in zip(cols, key_figures(a), values, olds, strict=True):
        number, _, unit = value.partition(" ")  # the unit in the label: a narrow column cuts the value's tail
        title = f"{label} ({unit})" if unit else label
        col.metric(title, number, delta=core.change(v, old), delta_color="inverse", help=detail)
        col.caption((f"range {rng} · " if rng else "") + detail)
    others = [k for k in cat.HEADLINE if k != "climate_change"]
    cols = st.columns(len(others) + 1)
    for col, k in zip(cols, others, strict=False):
        r = a.impacts[k]
        total, low, high, unit = qty(r.total, r.unit, r.low, r.high)
        col.metric(
            f"{r.name} ({unit})",
            total,
            delta=core.change(r.total, base.impacts[k].total) if base is not None else None,
            delta_color="inverse",
            help=f"low - high {low} - {high} (Monte Carlo, {a.samples} samples)",
        )
    if w.host_only:
        cols[-1].metric("Server lifetimes consumed", lifetimes(w.host_lifetimes), help=hardware_text(a))
    else:
        cols[-1].metric(
            "GPU lifetimes consumed",
            lifetimes(w.gpu_lifetimes),
            delta=core.change(w.gpu_lifetimes, bw.gpu_lifetimes if bw else None),
            delta_color="inverse",
            help=f"GPU-hours / (lifetime x utilisation); {hardware_help(a)}",
        )
    st.caption(SCORE_NOTE)


def _hours(w: Workload) -> float:
    """The key figures' fourth number: GPU-hours, or the host-hours of a run without GPU."""
    return w.host_hours if w.host_only else w.gpu_hours


STAGE_SHORT = {"manufacturing": "Manuf.", "transport": "Transp.", "use": "Use", "end_of_life": "EoL"}


def categories(a: Assessment, base: Assessment | None = None) -> None:
    """All 16 categories: a static table with stage shares (it wraps long cells instead of scrolling sideways: every
    row and column is visible at 1,400 px), and a stacked bar chart of the shares."""
    import pandas as pd

    rename = {core.STAGE_LABELS[k]: v for k, v in STAGE_SHORT.items()}
    rows = [{rename.get(k, k): v for k, v in r.items()} for r in core.categories_table(a, base)]
    st.table(pd.DataFrame(rows).set_index("Category"))
    stage_chart(core.stage_shares(a), order=STAGE_ORDER)
    st.caption(
        "Shares: stage / total (Manuf. manufacturing, Transp. transport, EoL end of life). n/a = not available (no open "
        f"data for that stage), never zero; n/a stages are left out of the chart. Not modelled = {NOT_MODELLED}."
    )
    sens = sensitivity_rows(a)
    if sens:
        st.markdown("**What drives the uncertainty**")
        st.dataframe(sens, hide_index=True, **WIDE)
        st.caption(SENSITIVITY_NOTE)


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
    partial = partial_text(a)
    st.caption((f"**Single score {partial}** (see each category's characterisation below). " if partial else "") + s["note"])
    st.dataframe(core.normalised_rows(a, base), hide_index=True, **WIDE)
    st.caption(
        "Person-equivalents: impact / EF 3.1 normalisation factor (the annual impact of an average world citizen). "
        f"Electricity: {a.use_factors.label if a.use_factors else 'n/a'}. Factors whose sources disagree by more "
        "than 3x are under Notes and sources (contested data)."
    )


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
    if group == "stage":
        scale = STAGE_SCALE
    else:  # components, named as people read them ("gpu die"): the palette's colour of each
        scale = {"domain": order, "range": [palette.component(x.replace(" ", "_")) for x in order]}
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


def hardware_help(a: Assessment) -> str:
    if a.workload.host_only:  # no GPU: server lifetimes, whose mass the host model does not state
        return hardware_text(a)
    m = a.materials
    text = f"{plain(m['mass_consumed_kg'])} kg of hardware (GPU lifetimes x {num(m['card_mass_kg'])} kg card mass)"
    if a.workload.gpu_lifetimes >= 1:
        text += f"; {a.workload.gpu_equivalents:,} GPU-equivalents when rounded up (Falk et al.)"
    return text


def materials(a: Assessment) -> None:
    if a.workload.host_only:
        st.info(hardware_text(a))
        return
    m = a.materials
    c1, c2, c3 = st.columns(3)
    c1.metric(
        "GPU lifetimes consumed",
        lifetimes(m["gpu_lifetimes"]),
        help="GPU-hours / (lifetime x utilisation): the hardware lifetimes the run uses up (Falk et al.); "
        "never rounded up (a short run uses a fraction of one GPU)",
    )
    c2.metric("Hardware consumed", f"{plain(m['mass_consumed_kg'])} kg", help=hardware_help(a))
    c3.metric("Card mass", f"{num(m['card_mass_kg'])} kg", help="one GPU card, the data source's mass")
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


def notes(a: Assessment) -> None:
    """The caveats in groups, as the report and `footprint assess`: a summary line each, the items folded."""
    from footprint.lca.notes import note_count, note_groups

    groups = note_groups(a)
    st.caption(f"{note_count(groups)} notes in {len(groups)} groups (the Assessment JSON lists them all).")
    for g in groups:
        with st.expander(f"**{md_text(g.title)} ({len(g.items)})**: {md_text(g.summary)}"):
            if g.rows:
                st.dataframe(list(g.rows), hide_index=True, **WIDE)
            else:
                st.markdown("\n".join(f"- {md_text(x)}" for x in g.items))


def warnings_and_sources(a: Assessment) -> None:
    notes(a)
    with st.expander("Method"):
        d = a.to_dict()["method"]
        st.markdown("\n".join(f"- **{md_text(k)}**: {md_text(v)}" for k, v in d.items()))
    with st.expander(f"Sources ({len(a.sources)})"):
        st.dataframe(
            [{k: s.get(k) for k in ("title", "licence", "year", "url", "id")} for s in a.sources],
            hide_index=True,
            column_config={"url": st.column_config.LinkColumn("link"), "title": st.column_config.TextColumn(width="large")},
            **WIDE,
        )


def dir_input(label: str, key: str, default: str, help: str) -> Path | None:
    """A directory field kept in the session (``default`` at first): the path given, or None while it is empty."""
    st.session_state.setdefault(key, default)
    text = st.text_input(label, key=key, help=help)
    return Path(text.strip()).expanduser() if text.strip() else None


def file_input(label: str, key: str, placeholder: str, what: str = "file") -> Path | None:
    """A file path field: the file, or None (with one error line when the path names no ``what``)."""
    text = st.text_input(label, key=key, placeholder=placeholder)
    if not text.strip():
        return None
    path = Path(text.strip()).expanduser()
    if not path.is_file():
        st.error(md_text(f"footprint: error: {path}: no such {what}"))
        return None
    return path


def bullets(title: str, items: list[str]) -> None:
    """``title (n)`` folded over one bullet per item (shown as text), or nothing when there are none."""
    if items:
        with st.expander(f"{title} ({len(items)})"):
            st.markdown("\n".join(f"- {md_text(x)}" for x in items))


def show_user_error(exc: BaseException) -> None:
    """A user mistake as the CLI prints it: one line, no traceback."""
    st.error(md_text(f"footprint: error: {core.user_error_message(exc)}"))
