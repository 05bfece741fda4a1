"""Hardware: the GPU LCA database, card by card (components x categories), and every source with its licence."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.lca import categories as cat
from footprint.lca.assessment import num
from footprint.lca.units import display_unit


@st.cache_data(show_spinner=False, max_entries=64)
def card(gpu_id: str) -> dict[str, Any]:
    """`footprint gpus show ID --format json`: specs and embodied impacts by stage and component."""
    from footprint.lca.catalogue import gpu_card

    return gpu_card(gpu_id)


@st.cache_data(show_spinner=False)
def catalogue() -> list[dict[str, Any]]:
    """`footprint gpus`: one row per card."""
    d = core.database()
    rows = []
    for g in d.gpus.values():
        emb = d.embodied(g.id)
        peak = g.peak_tflops.get("bf16") or g.peak_tflops.get("fp16")
        rows.append(
            {
                "id": g.id,
                "name": g.name,
                "vendor": g.vendor,
                "TDP (W)": f"{g.tdp_w:g}",
                "bf16/fp16 TFLOP/s": "n/a" if peak is None else f"{peak:g}",
                "memory (GB)": "n/a" if g.memory_gb is None else f"{g.memory_gb:g}",
                "kg CO2 eq per card": num(float(emb.total()[0])),
                "embodied data": emb.method,
            }
        )
    return rows


@st.cache_data(show_spinner=False)
def sources() -> list[dict[str, Any]]:
    return [
        {k: s.get(k) for k in ("id", "title", "author", "year", "licence", "kind", "url")}
        for s in core.database().sources.values()
    ]


def component_rows(c: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(table rows: categories x components, chart rows: component shares, component order)."""
    comps = list(dict.fromkeys(k for v in c["impacts"].values() for k in v["by_component"]))
    table, shares = [], []
    for key in cat.keys() + tuple(x.key for x in cat.extras()):
        v = c["impacts"][key]
        row: dict[str, Any] = {"Category": v["name"], "Unit": display_unit(v["unit"]), "Total": num(v["total"])}
        for comp in comps:
            row[comp.replace("_", " ")] = num(v["by_component"].get(comp))
        table.append(row)
        if key in cat.keys() and v["total"]:
            for comp in comps:
                x = v["by_component"].get(comp)
                if x:
                    shares.append({"category": v["name"], "component": comp.replace("_", " "), "share": 100.0 * x / v["total"]})
    return table, shares, [x.replace("_", " ") for x in comps]


def render(samples: int) -> None:
    st.title("Hardware")
    st.caption(
        "The GPU LCA database: embodied impacts per card as the data source gives them (manufacturing, "
        "upstream transport and end of life; no distribution, no use), as `footprint gpus show`."
    )
    gpus = core.gpu_options()
    ss = st.session_state
    if ss.get("hw_gpu") not in gpus:
        ss["hw_gpu"] = next(iter(gpus))
    gpu_id = st.selectbox("GPU", list(gpus), format_func=lambda g: f"{gpus[g]} ({g})", key="hw_gpu")
    c = card(gpu_id)
    peaks = ", ".join(f"{k} {v:g}" for k, v in c["peak_tflops_dense"].items()) or "n/a"
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("TDP", f"{c['tdp_w']:g} W")
    c2.metric("Memory", "n/a" if c["memory_gb"] is None else f"{c['memory_gb']:g} GB")
    c3.metric(
        "GPU die",
        "n/a" if c["die_area_mm2"] is None else f"{c['die_area_mm2']:g} mm2",
        help=f"process node: {c['process_node'] or 'n/a'}",
    )
    cc = c["impacts"]["climate_change"]
    c4.metric("Climate change per card", core.quantity(cc["total"], cc["unit"]))
    st.markdown(
        f"**Embodied data:** {c['embodied_method']}  \n**Dense peaks (TFLOP/s):** {peaks}"
        + (f"  \n**Geometry proxied from:** {c['proxy_of']} (estimate)" if c["proxy_of"] else "")
    )
    table, shares, comps = component_rows(c)
    t1, t2, t3, t4 = st.tabs(["Components x categories", "Card notes and sources", "Catalogue", "All sources"])
    with t1:
        st.dataframe(table, hide_index=True, **ui.WIDE)
        ui.stage_chart(shares, group="component", order=comps)
        st.caption("Shares: component / card total, per category.")
        with st.expander("Parametric inputs"):
            st.json(c["parametric_inputs"])
    with t2:
        for n in c["notes"]:
            st.markdown(f"- {n}")
        st.dataframe(
            [{k: s.get(k) for k in ("id", "title", "year", "licence", "url")} for s in c["sources"]], hide_index=True, **ui.WIDE
        )
    with t3:
        st.dataframe(catalogue(), hide_index=True, **ui.WIDE)
    with t4:
        rows = sources()
        query = st.text_input("Filter sources", key="hw_filter", placeholder="e.g. ADEME, CC BY, codecarbon")
        if query:
            q = query.lower()
            rows = [r for r in rows if any(q in str(v).lower() for v in r.values())]
        st.dataframe(rows, hide_index=True, **ui.WIDE)
        st.caption(f"{len(rows)} sources. Files derived from the ADEME study keep its CC BY-SA 4.0 licence.")
