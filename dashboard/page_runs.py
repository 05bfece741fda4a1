"""Runs: a measured run directory (run.json, ranks/ with each rank's segments): power, energy, MFU, re-projection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.lca.assessment import num, pct_sig, training_facts

RUN_CONTROLS = ("grid", "pue", "gpu", "lifetime_years")


def _pick_run() -> Path | None:
    """The run directory the user chose: a run directory itself, or one of a runs folder's subdirectories."""
    ss = st.session_state
    ss.setdefault("run_root", "runs")
    text = st.text_input(
        "Runs folder or run directory",
        key="run_root",
        help="A folder of runs (e.g. runs/, as `footprint run` writes them) or one run directory "
        "(with run.json). Nothing outside the folder you give is read.",
    )
    if not text.strip():
        return None
    root = Path(text.strip()).expanduser()
    if not root.is_dir():
        st.info(f"{root} is not a folder. Give a runs folder (e.g. runs) or a run directory with a run.json.")
        return None
    runs = core.find_runs(root)
    if not runs:
        st.info(
            f"No run directory (with a run.json) in {root}. Record one with `footprint run --name NAME -- "
            "python train.py` or `footprint.track(...)`."
        )
        return None
    if runs == [root]:
        return root
    names = [p.name for p in runs]
    if ss.get("run_pick") not in names:
        ss["run_pick"] = names[-1]
    name = st.selectbox("Run", names, key="run_pick")
    return root / name


def _line(rows: Any, x: tuple[str, str], y: tuple[str, str], colour: str, height: int, points: bool = False) -> None:
    ui.vega(
        rows,
        {
            "mark": {"type": "line", "point": points},
            "height": height,
            "encoding": {
                "x": {"field": x[0], "type": "quantitative", "title": x[1]},
                "y": {"field": y[0], "type": "quantitative", "title": y[1]},
                "color": {
                    "field": colour,
                    "type": "nominal",
                    "scale": {"range": ui.PALETTE},
                    "legend": {"orient": "bottom", "title": None, "labelLimit": 400},
                },
                "tooltip": [
                    {"field": colour, "type": "nominal"},
                    {"field": x[0], "type": "quantitative"},
                    {"field": y[0], "type": "quantitative", "format": ".4g"},
                ],
            },
        },
    )


def _power_band(rows: Any, height: int) -> None:
    """Mean power per device as a line over its min-max band (one bucket per pixel: peaks stay visible)."""
    x = {"field": "t_s", "type": "quantitative", "title": "time since start (s)"}
    colour = {
        "field": "device",
        "type": "nominal",
        "scale": {"range": ui.PALETTE},
        "legend": {"orient": "bottom", "title": None, "labelLimit": 400},
    }
    ui.vega(
        rows,
        {
            "height": height,
            "layer": [
                {
                    "mark": {"type": "area", "opacity": 0.25},
                    "encoding": {
                        "x": x,
                        "y": {"field": "power_min_w", "type": "quantitative", "title": "power (W)"},
                        "y2": {"field": "power_max_w"},
                        "color": colour,
                    },
                },
                {
                    "mark": {"type": "line"},
                    "encoding": {
                        "x": x,
                        "y": {"field": "power_w", "type": "quantitative"},
                        "color": colour,
                        "tooltip": [
                            {"field": "device", "type": "nominal"},
                            {"field": "t_s", "type": "quantitative", "format": ".1f"},
                            {"field": "power_w", "type": "quantitative", "format": ".4g", "title": "mean W"},
                            {"field": "power_min_w", "type": "quantitative", "format": ".4g", "title": "min W"},
                            {"field": "power_max_w", "type": "quantitative", "format": ".4g", "title": "max W"},
                        ],
                    },
                },
            ],
        },
    )


def _timeline(df: Any) -> None:
    if df is None or df.empty:
        st.info("No power samples in this run directory.")
        return
    _power_band(df, 260)
    _line(df, ("t_s", "time since start (s)"), ("energy_j", "cumulative energy (J)"), "device", 200)
    totals = df.groupby("device")["energy_j"].max()
    st.caption(
        "Energy per device (last cumulative reading): "
        + "; ".join(f"{d}: {num(float(e))} J" for d, e in totals.items())
        + f". Power is shown as {core.TIMELINE_BUCKETS:,} time buckets per device: line = mean, band = min to max."
    )


def _mfu(record: dict[str, Any], per_step: list[dict[str, Any]]) -> None:
    m = record.get("mfu") or {}
    if not m and not per_step:
        st.info("No MFU in this run: give the tracker FLOPs (t.step(flops=...), track(model=...) or t.watch(model)).")
        return
    c1, c2, c3 = st.columns(3)
    c1.metric(
        "Run MFU",
        pct_sig(m.get("run_mfu")),
        help="job FLOPs / (all GPU-hours x dense peak), stalls included",
    )
    c2.metric(
        "Steady-state MFU",
        pct_sig(m.get("steady_state_mfu")),
        help="median over steps (first 10 % skipped) of step FLOPs / (step time x peak)",
    )
    c3.metric(
        "Peak per GPU",
        "n/a" if m.get("peak_tflops_per_gpu") is None else f"{m['peak_tflops_per_gpu']:g} TFLOP/s {m.get('dtype', '')}",
    )
    if m.get("dtype_source"):
        st.caption(f"Peak: dense {m.get('dtype')} ({m['dtype_source']}).")
    if m.get("note"):
        st.caption(m["note"])
    if per_step:
        _line(per_step, ("step", "step"), ("MFU %", "MFU (%)"), "rank", 220, points=len(per_step) < 60)
        st.caption("Per-step MFU of each rank (ranks/rank-*.json: mfu.per_step_mfu, the last 200 steps).")


def _training(run_dir: Path, rec: dict[str, Any], samples: int) -> None:
    """The training story: steps, tokens, throughput, energy and CO2 eq per million tokens, energy by window kind."""
    from footprint.tracking.story import training_story

    story = training_story(rec)
    if not story:
        st.info(
            "No steps or tokens in this run (not measured): count them with `footprint run --count-steps`, "
            "`t.step(tokens=...)` or a framework callback (footprint.integrations)."
        )
        return
    try:
        facts = training_facts(core.assess_run(run_dir, [], samples))
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    st.dataframe([{"": k, "value": v} for k, v in facts.items()], hide_index=True, **ui.WIDE)
    shares = story.get("gpu_energy_share") or {}
    if shares:
        rows = [{"window kind": k.replace("_", " "), "share of GPU energy (%)": v * 100} for k, v in shares.items()]
        ui.vega(
            rows,
            {
                "mark": "bar",
                "height": 40 + 24 * len(rows),
                "encoding": {
                    "y": {"field": "window kind", "type": "nominal", "title": None, "sort": "-x"},
                    "x": {"field": "share of GPU energy (%)", "type": "quantitative"},
                    "tooltip": [{"field": "window kind"}, {"field": "share of GPU energy (%)", "format": ".3g"}],
                },
            },
        )
    if story.get("short_windows"):
        st.warning(story["short_windows"])


def _reproject(run_dir: Path, samples: int) -> None:
    st.subheader("Re-project the measured run")
    st.caption(
        "The measured energy and duration under another grid, PUE, GPU generation or hardware lifetime: "
        "footprint.lca.workload.workload_from_run(run_dir, sets), as `footprint assess RUN --set ...`."
    )
    try:
        measured = core.assess_run(run_dir, [], samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    w = measured.workload
    base = {"grid": w.grid, "pue": round(w.pue, 2), "gpu": w.gpu.id, "lifetime_years": core.base_controls(w)["lifetime_years"]}
    ss = st.session_state
    sid = str(run_dir)
    if ss.get("run_sid") != sid:
        for k, v in base.items():
            ss[f"run_{k}"] = v
        ss["run_sid"] = sid
    c1, c2, c3, c4 = st.columns(4)
    zones, gpus = core.zone_options(), core.gpu_options()
    c1.selectbox("Grid zone", list(zones), format_func=zones.get, key="run_grid")
    c2.slider("PUE", 1.0, 3.0, step=0.01, key="run_pue")
    c3.selectbox("GPU generation", list(gpus), format_func=lambda g: gpus[g], key="run_gpu")
    c4.slider("Hardware lifetime (years)", 0.25, 10.0, step=0.25, key="run_lifetime_years")
    sets = []
    if ss["run_grid"] != base["grid"]:
        sets.append(f"site.grid={ss['run_grid']}")
    if abs(ss["run_pue"] - base["pue"]) > 1e-9:
        sets.append(f"site.pue={ss['run_pue']:g}")
    if ss["run_gpu"] != base["gpu"]:
        sets.append(f"hardware.gpu={ss['run_gpu']}")
    if abs(ss["run_lifetime_years"] - base["lifetime_years"]) > 1e-9:
        sets.append(f"hardware.lifetime={ss['run_lifetime_years']:g} years")
    try:
        a = core.assess_run(run_dir, sets, samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    ss["run_result"] = {"run_dir": str(run_dir), "sets": sets, "totals": {k: r.total for k, r in a.impacts.items()}}
    if sets:
        st.code(core.cli_command(str(run_dir), sets), language="bash")
    ui.headline(a, measured if sets else None)
    ui.categories(a, measured if sets else None)
    with st.expander("Summary"):
        st.dataframe(core.summary_rows(a), hide_index=True, **ui.WIDE)
    ui.warnings_and_sources(a)


def render(samples: int) -> None:
    st.title("Runs")
    run_dir = _pick_run()
    if run_dir is None:
        return
    try:
        run = core.read_run(str(run_dir), (run_dir / "run.json").stat().st_mtime)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    except OSError as exc:
        st.error(f"footprint: error: {run_dir}: {exc}")
        return
    opened = st.session_state.setdefault("opened_runs", [])
    if str(run_dir) not in opened:
        opened.append(str(run_dir))
    rec = run["record"]
    energy = rec.get("energy") or {}
    st.subheader(str(rec.get("name") or run_dir.name))
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Duration", f"{float(rec.get('duration_s') or 0):,.1f} s")
    steps, tokens = rec.get("steps"), rec.get("tokens")
    c2.metric(
        "Steps",
        "n/a" if steps is None else f"{int(steps):,}",
        help=f"tokens: {'n/a' if tokens is None else f'{int(tokens):,}'} (n/a: not measured)",
    )
    c3.metric(
        "GPU energy",
        "n/a" if energy.get("gpu_j") is None else f"{num(energy['gpu_j'] / 3.6e6)} kWh",
        help="n/a = no reading (not available), never zero",
    )
    c4.metric(
        "Total energy",
        "n/a" if energy.get("total_j") is None else f"{num(energy['total_j'] / 3.6e6)} kWh",
        help=f"GPU {num(energy.get('gpu_j'))} J, CPU {num(energy.get('cpu_j'))} J, RAM {num(energy.get('ram_j'))} J",
    )
    devices = [
        {
            "component": d.get("component", "gpu"),
            "name": d.get("name"),
            "uuid": d.get("uuid"),
            "rank": d.get("rank"),
            "host": d.get("host"),
            "method": d.get("method"),
            "measured": d.get("measured"),
            "energy (J)": num(d.get("energy_j")),
        }
        for d in rec.get("devices", [])
    ]
    t0, t1, t2, t3, t4 = st.tabs(["Training", "Power and energy", "MFU", "Devices and notes", "Re-projection"])
    with t0:
        _training(run_dir, rec, samples)
    with t1:
        if run["samples_note"]:
            st.info(run["samples_note"])
        _timeline(run["timeline"])
    with t2:
        _mfu(rec, run["per_step_mfu"])
    with t3:
        st.dataframe(devices, hide_index=True, **ui.WIDE)
        for n in rec.get("notes", []):
            st.markdown(f"- {n}")
        if rec.get("windows"):
            st.dataframe(rec["windows"], hide_index=True, **ui.WIDE)
    with t4:
        _reproject(run_dir, samples)
