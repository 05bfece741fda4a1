"""Serving: a record written by `footprint serving import` or `watch`, per model, request and million tokens.

A thin view over `footprint.serving.report.build` (the numbers of `footprint serving report`), with the boundary
switch, the plots of energy per token and traffic, and a model's life beside its training record.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.escaping import md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import num
from footprint.lca.units import display_unit

BOUNDARIES = {"accelerators": "Accelerators only", "+host": "+ host", "+idle": "+ idle reserve", "+pue": "+ PUE (facility)"}


@st.cache_data(show_spinner="Assessing the serving record...", max_entries=16)
def serving_report(record: str, boundary: str, training: str, mtime: float) -> tuple[dict[str, Any], Any]:
    """`footprint serving report RECORD --boundary B [--training T] --format json`, cached until the record changes."""
    from footprint.serving.report import load

    rep, a = load(record, boundary=boundary, training=training or None)
    return rep, a.models_w


def model_rows(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model (then the unattributed residual): energy, tokens, and climate per unit at every boundary."""
    rows = []
    for m in rep["models"]:
        row = {
            "Model": m["model"],
            "Engine": m["engine"],
            "GPU kWh": num(m["gpu_j"] / 3.6e6),
            "Tokens in": num(m["tokens_in"]),
            "Tokens out": num(m["tokens_out"]),
            "Requests": num(m["requests"]),
            "J / output token": num(m["j_per_output_token"]),
        }
        for b, label in BOUNDARIES.items():
            per = (m["per_unit"][b] or {}).get("per_1000_requests")
            row[f"g CO2e / 1k requests, {label}"] = num(per["climate_change"] * 1000) if per else None
        rows.append(row)
    un = rep["unattributed"]
    rows.append({"Model": "(unattributed: idle and unused GPUs)", "GPU kWh": num(un["gpu_j"] / 3.6e6)})
    return rows


def category_rows(rep: dict[str, Any]) -> list[dict[str, Any]]:
    un = rep["unattributed"]["impacts"] or {}
    return [
        {
            "Category": c.name,
            "Unit": display_unit(c.unit),
            **{m["model"]: num(m["categories"][c.key]) for m in rep["models"]},
            "(unattributed)": num(un.get(c.key)),
        }
        for c in cat.categories()
    ]


def series_rows(models_w: Any, window_s: float) -> list[dict[str, Any]]:
    """Per model and window: hours from the start, J per output token, output tokens per second (the report's
    `series`: each window's rate over its real length)."""
    from footprint.serving.report import series

    s = series(models_w, window_s).rename(columns={"j_per_token": "J per output token", "tokens_per_s": "output tokens/s"})
    s["model"] = s["model"].str.split("/").str[-1]
    return [{k: (v if v == v else None) for k, v in r.items()} for r in s.to_dict("records")]


def render(samples: int) -> None:  # noqa: ARG001 - the serving report has no Monte Carlo of its own yet
    st.title("Serving")
    st.caption(
        "What serving a model costs, per request and per million tokens, from `footprint serving import prometheus|metrics` "
        "or `footprint serving watch` (DCGM energy + vLLM/TGI/SGLang/llama.cpp counters). Every metered GPU-joule goes to "
        "a model or to the unattributed residual."
    )
    root = ui.dir_input("Serving record", "serving_dir", "serving", "written by `footprint serving import ... -o DIR`")
    boundary = st.radio(
        "Boundary", list(BOUNDARIES), format_func=BOUNDARIES.get, horizontal=True, key="serving_boundary", index=3
    )
    training = st.text_input("Training record (optional)", key="serving_training", help="a run directory or scenario YAML")
    if root is None or not (root / "serving.json").is_file():
        st.info(
            f"No serving record in {md_text(root or '(empty)')}. "
            "Write one with `footprint serving import metrics FILES -o serving`."
        )
        return
    try:
        rep, models_w = serving_report(str(root), boundary, training.strip(), (root / "serving.json").stat().st_mtime)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    st.caption(
        f"Window {rep['start']} – {rep['end']}; site grid {rep['site']['grid'] or 'world average'}, PUE {rep['site']['pue']:g}"
    )
    c1, c2, c3 = st.columns(3)
    c1.metric("GPU energy metered (kWh)", num(rep["metered_gpu_j"] / 3.6e6))
    c2.metric("Models", len(rep["models"]))
    c3.metric(
        "Unattributed",
        f"{rep['unattributed']['gpu_j'] / max(rep['metered_gpu_j'], 1e-12):.1%}",
        help="idle energy of used GPUs and all the energy of GPUs no model used",
    )
    st.dataframe(model_rows(rep), hide_index=True, **ui.WIDE)
    with st.expander("All 16 categories at this boundary"):
        st.dataframe(category_rows(rep), hide_index=True, **ui.WIDE)
    rows = series_rows(models_w, float(rep["window_s"]))
    for field in ("J per output token", "output tokens/s"):
        ui.vega(
            rows,
            {
                "mark": {"type": "line"},
                "height": 220,
                "encoding": {
                    "x": {"field": "hours", "type": "quantitative"},
                    "y": {"field": field, "type": "quantitative"},
                    "color": {"field": "model", "type": "nominal", "legend": {"orient": "bottom"}},
                },
            },
        )
    if rep.get("life"):
        lf = rep["life"]
        st.subheader(f"A model's life: {md_text(lf['model'])}")
        d1, d2, d3 = st.columns(3)
        d1.metric("Training (kg CO2 eq)", num(lf["training"]["impacts"]["climate_change"]))
        d2.metric("Serving per day (kg CO2 eq)", num(lf["serving_per_day"]["climate_change"]))
        d3.metric("Serving overtakes training", lf["overtakes_on"] or "n/a", help="projected at the measured traffic")
    health = [h for h in rep["health"] if h["gaps"] or h["resets"]]
    if health:
        with st.expander(f"Counter health: {len(health)} counter(s) with gaps or resets"):
            st.dataframe(health, hide_index=True, **ui.WIDE)
    with st.expander("Notes and method"):
        for n in rep["notes"]:  # model names and server warnings: a label could hold a link or an outside image
            st.markdown(f"- {md_text(n)}")
        for k, v in rep["method"].items():
            st.markdown(f"- **{md_text(k)}**: {md_text(v)}")
