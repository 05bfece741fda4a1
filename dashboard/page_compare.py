"""Compare: two to four scenarios, what-ifs or measured runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.escaping import md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, gpus_text, lifetimes, qty

MAX_ITEMS = 4


def options() -> dict[str, tuple[str, Any]]:
    """Label -> ('scenario', path) | ('whatif', {data, file}) | ('run', run_dir)."""
    out: dict[str, tuple[str, Any]] = {label: ("scenario", path) for label, path in core.shipped_scenarios().items()}
    whatif = st.session_state.get("ex_whatif")
    if whatif:
        out[whatif["label"] + " (from the explorer)"] = ("whatif", whatif)
    for run_dir in st.session_state.get("opened_runs", []):
        out[f"Run: {Path(run_dir).name} ({run_dir})"] = ("run", run_dir)
    return out


def _assess(kind: str, ref: Any, samples: int) -> Assessment:
    if kind == "scenario":
        return core.assess_data(core.read_scenario(ref), ref, samples)
    if kind == "whatif":
        return core.assess_data(ref["data"], ref["file"], samples)
    return core.assess_run(ref, [], samples)


def render(samples: int) -> None:
    st.title("Compare")
    st.caption(
        "Two to four shipped scenarios, the explorer's current what-if, or runs opened on the Runs page, "
        "side by side. The first one is the reference for the changes shown under the metrics."
    )
    opts = options()
    ss = st.session_state
    current = [o for o in ss.get("cmp_items", []) if o in opts]
    if not current:
        current = [o for o in opts if o.startswith(("BLOOM", "Llama 2"))][:2] or list(opts)[:2]
    ss["cmp_items"] = current
    picked = st.multiselect("Scenarios or runs (2 to 4)", list(opts), key="cmp_items", max_selections=MAX_ITEMS)
    if len(picked) < 2:
        st.info("Pick at least two to compare.")
        return
    items: list[tuple[str, Assessment]] = []
    for label in picked:
        kind, ref = opts[label]
        try:
            items.append((label, _assess(kind, ref, samples)))
        except core.USER_ERRORS as exc:
            ui.show_user_error(exc)
        except OSError as exc:
            st.error(f"{label}: {exc}")
    if len(items) < 2:
        return
    names = _short_names([label for label, _ in items])
    items = [(n, a) for n, (_, a) in zip(names, items, strict=True)]
    ref = items[0][1]
    cols = st.columns(len(items))
    for col, (name, a) in zip(cols, items, strict=True):
        with col:
            st.markdown(f"**{md_text(name)}**")  # a scenario's name is user text: shown as typed
            st.caption(md_text(f"{gpus_text(a)}, {a.workload.grid}"))
            for k in cat.HEADLINE:
                r = a.impacts[k]
                delta = None if a is ref else core.change(r.total, ref.impacts[k].total)
                total, unit = qty(r.total, r.unit)
                st.metric(f"{r.name} ({unit})", total, delta=delta, delta_color="inverse")
            st.metric(
                "GPU lifetimes consumed",
                lifetimes(a.workload.gpu_lifetimes),
                delta=None if a is ref else core.change(a.workload.gpu_lifetimes, ref.workload.gpu_lifetimes),
                delta_color="inverse",
                help=ui.hardware_help(a),
            )
    st.subheader("All 16 categories")
    st.dataframe(core.compare_table(items), hide_index=True, **ui.WIDE)
    _chart(core.relative_to_max(items), [n for n, _ in items])
    st.caption(
        "Bars: each category's total as a share of the largest of the compared totals. "
        f"Monte Carlo ranges use {samples} samples; see each scenario in the explorer for low-high."
    )
    ss["cmp_result"] = {name: {k: a.impacts[k].total for k in cat.keys()} for name, a in items}


def _short_names(labels: list[str]) -> list[str]:
    """Column names: the label without the file in brackets, made unique."""
    out: list[str] = []
    for label in labels:
        name = label.split(" (")[0]
        base, i = name, 2
        while name in out:
            name, i = f"{base} #{i}", i + 1
        out.append(name)
    return out


def _chart(rows: list[dict[str, Any]], names: list[str]) -> None:
    cats = list(dict.fromkeys(r["category"] for r in rows))
    ui.vega(
        rows,
        {
            "mark": {"type": "bar"},
            "height": max(300, 16 * len(cats) * len(names)),
            "encoding": {
                "y": {
                    "field": "category",
                    "type": "nominal",
                    "sort": cats,
                    "title": None,
                    "axis": {"labelLimit": ui.LABEL_LIMIT},
                },
                "yOffset": {"field": "scenario", "type": "nominal", "sort": names},
                "x": {"field": "percent of max", "type": "quantitative", "title": "% of the largest total"},
                "color": {
                    "field": "scenario",
                    "type": "nominal",
                    "sort": names,
                    "scale": {"domain": names, "range": ui.PALETTE},
                    "legend": {"orient": "bottom", "title": None, "labelLimit": 400},
                },
                "tooltip": [
                    {"field": "category", "type": "nominal"},
                    {"field": "scenario", "type": "nominal"},
                    {"field": "percent of max", "type": "quantitative", "format": ".1f"},
                ],
            },
        },
    )
