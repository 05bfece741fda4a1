"""Scenario explorer: a shipped or uploaded scenario, what-if controls, the 16 categories against the base."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.lca.workload import apply_overrides

ONE_MOVE = {"mfu": 0.5, "lifetime_years": 5.0, "grid": "POL"}
ONE_MOVE_LABEL = "What if MFU were 50 %, the GPU lived 5 years, the grid were Poland's?"


def _set_controls(values: dict[str, Any]) -> None:
    for k, v in values.items():
        st.session_state[f"ex_{k}"] = v


def _one_move() -> None:
    values = dict(ONE_MOVE)
    if not st.session_state.get("ex_mfu_enabled"):
        values.pop("mfu")
    _set_controls(values)


def _reset() -> None:
    _set_controls(st.session_state.get("ex_base") or {})


def _scenario() -> tuple[dict[str, Any], str, str] | None:
    """(scenario mapping, file name for messages and the CLI, id) or None (with a message shown)."""
    side = st.sidebar
    source = side.radio("Scenario source", ["Shipped scenario", "Upload or paste YAML"], key="ex_source", horizontal=True)
    if source == "Shipped scenario":
        shipped = core.shipped_scenarios()
        wanted = (st.session_state.get("ex_pending") or {}).pop("scenario", None)
        if wanted:
            match = [label for label, path in shipped.items() if Path(path).name in (wanted, f"{wanted}.yaml")]
            if match:
                st.session_state["ex_scenario"] = match[0]
            else:
                st.warning(f"No shipped scenario {wanted!r} (from the link); showing the first one.")
        if st.session_state.get("ex_scenario") not in shipped:
            st.session_state["ex_scenario"] = next(iter(shipped))
        label = side.selectbox("Scenario", list(shipped), key="ex_scenario")
        path = shipped[label]
        return core.read_scenario(path), path, path
    kwargs = {"max_upload_size": 1} if "max_upload_size" in _params(st.file_uploader) else {}
    up = side.file_uploader("Scenario YAML (at most 1 MB)", type=["yaml", "yml"], key="up_scenario", **kwargs)
    pasted = side.text_area(
        "... or paste a scenario",
        key="ex_paste",
        height=160,
        placeholder="name: my run\nhardware: {gpu: H100-SXM5-80GB, count: 8}\n...",
    )
    if up is not None:
        name, content = up.name, up.getvalue()
    elif pasted and pasted.strip():
        name, content = "pasted.yaml", pasted.encode("utf-8")
    else:
        st.info(
            "Upload a scenario YAML or paste one in the sidebar (keys as in the shipped scenarios and "
            'the README\'s "Scenarios" section).'
        )
        return None
    data = core.parse_upload(name, content)
    return data, name, f"{name}:{hashlib.sha1(content).hexdigest()}"


def _params(fn: Any) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _controls(data: dict[str, Any], w: Any, sid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The what-if widgets (sidebar), initialised from the scenario whenever the scenario changes."""
    base = core.base_controls(w)
    ss = st.session_state
    if ss.get("ex_sid") != sid:
        _set_controls(base)
        ss["ex_sid"], ss["ex_base"] = sid, base
    else:
        for k, v in base.items():
            ss.setdefault(f"ex_{k}", v)
    mode = core.mfu_mode(data, w)
    ss["ex_mfu_enabled"] = mode.kind != "disabled"
    pending = ss.pop("ex_pending", None)
    if pending:
        values, bad = core.parse_controls(pending, core.gpu_options(), core.zone_options())
        _set_controls(values)
        if bad:
            st.warning("Ignored in the link: " + "; ".join(bad))
    side = st.sidebar
    side.subheader("What if ...")
    side.slider(
        "MFU (model FLOPs utilisation)",
        0.01,
        1.0,
        step=0.01,
        key="ex_mfu",
        format="%.2f",
        disabled=mode.kind == "disabled",
        help=mode.explanation,
    )
    side.caption(("MFU disabled: " if mode.kind == "disabled" else "") + mode.explanation)
    gpus = core.gpu_options()
    side.selectbox("GPU type", list(gpus), format_func=lambda g: f"{gpus[g]} ({g})", key="ex_gpu")
    side.number_input("GPU count", min_value=1, step=1, key="ex_count")
    side.slider("Hardware lifetime (years)", 0.25, 10.0, step=0.25, key="ex_lifetime_years")
    side.slider("Utilisation (share of the lifetime the GPU is busy)", 0.05, 1.0, step=0.05, key="ex_utilization")
    zones = core.zone_options()
    side.selectbox("Grid zone", list(zones), format_func=zones.get, key="ex_grid")
    side.slider("PUE", 1.0, 3.0, step=0.01, key="ex_pue")
    side.number_input(
        "On-site WUE (L/kWh of IT energy)", min_value=0.0, max_value=20.0, step=0.1, key="ex_wue", placeholder="not available"
    )
    side.number_input(
        "Off-site EWIF (L/kWh of facility energy)",
        min_value=0.0,
        max_value=50.0,
        step=0.1,
        key="ex_ewif",
        placeholder="not available",
    )
    return {k: ss[f"ex_{k}"] for k in core.CONTROL_KEYS}, base


def render(samples: int) -> None:
    st.title("Scenario explorer")
    try:
        picked = _scenario()
        if picked is None:
            return
        data, file, sid = picked
        base_w = core.workload_of(data, file)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    chosen, base_controls = _controls(data, base_w, sid)
    sets, notes = core.build_sets(data, base_w, chosen, base_controls)

    st.subheader(base_w.name)
    if base_w.description:
        st.caption(base_w.description)
    c1, c2, _ = st.columns([3, 1, 2])
    c1.button(
        ONE_MOVE_LABEL,
        key="btn_one_move",
        on_click=_one_move,
        type="primary",
        help="Sets MFU 0.50, hardware lifetime 5 years and grid POL in one click",
    )
    c2.button("Reset", key="btn_reset", on_click=_reset, help="Back to the scenario as stated")
    try:
        with st.spinner(f"Assessing the 16 categories ({samples:,} Monte Carlo samples)..."):
            base = core.assess_data(data, file, samples)
            a = core.assess_whatif(data, sets, file, samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        st.caption("Equivalent command: `" + core.cli_command(file, sets) + "`")
        return
    st.session_state["ex_result"] = {
        "file": file,
        "sets": sets,
        "samples": samples,
        "totals": {k: r.total for k, r in a.impacts.items()},
        "base_totals": {k: r.total for k, r in base.impacts.items()},
        "gpu_hours": a.workload.gpu_hours,
        "gpu_lifetimes": a.workload.gpu_lifetimes,
        "gpu_equivalents": a.workload.gpu_equivalents,
    }
    if sets:
        st.session_state["ex_whatif"] = {
            "label": f"What-if: {base_w.name}",
            "data": apply_overrides(data, sets, file),
            "file": file,
        }
        st.code(core.cli_command(file, sets), language="bash")
        for n in notes:
            st.caption(n)
    else:
        st.caption(
            "The scenario as stated. Move a control in the sidebar to see what changes; the metrics then "
            "show the change from this base."
        )
    ui.headline(a, base if sets else None)
    t1, t5, t2, t3, t4 = st.tabs(
        [
            "16 categories",
            "Person-equivalents and single score",
            "GPU lifetimes and materials",
            "Summary",
            "Notes and sources",
        ]
    )
    with t1:
        ui.categories(a, base if sets else None)
    with t5:
        ui.normalised(a, base if sets else None)
    with t2:
        ui.materials(a)
    with t3:
        st.dataframe(core.summary_rows(a), hide_index=True, **ui.WIDE)
        lazy = "callable" in (st.download_button.__doc__ or "")  # built on click where Streamlit allows it
        st.download_button(
            "Assessment JSON",
            a.to_json if lazy else a.to_json(),
            file_name=f"{base_w.name}.json",
            mime="application/json",
            key="btn_json",
        )
    with t4:
        ui.warnings_and_sources(a)
