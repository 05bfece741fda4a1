"""Runs: a measured run directory (run.json, ranks/ with each rank's segments): power, energy, MFU, re-projection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.escaping import md_text
from footprint.lca.assessment import num, pct_sig, training_facts
from footprint.lca.workload import NO_GPU
from footprint.lca.workload_data import HOST_ONLY
from footprint.reports import palette
from footprint.tracking.runrecord import device_labels
from footprint.tracking.runview import energy_kind

RUN_CONTROLS = ("grid", "pue", "gpu", "lifetime_years")


def _apply_link() -> None:
    """A deep link (?run=NAME or ?run=PATH, read once by app.read_query_params): the folder and the run to open."""
    ss = st.session_state
    link = ss.pop("run_pending", None)
    if not link:
        return
    run = Path(str(link["run"])).expanduser()
    if link.get("runs"):
        ss["run_root"], ss["run_pick"] = str(link["runs"]), run.name
    elif len(run.parts) > 1 or (run / "run.json").is_file():  # a path to the run directory itself
        ss["run_root"] = str(run)
    else:  # a name in the default runs folder
        ss["run_root"], ss["run_pick"] = ss.get("run_root") or "runs", run.name
    ss["run_link_wanted"] = run.name


def _pick_run() -> Path | None:
    """The run directory the user chose: a run directory itself, or one of a runs folder's subdirectories."""
    ss = st.session_state
    ss.setdefault("run_root", "runs")
    _apply_link()
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
        st.info(f"{md_text(root)} is not a folder. Give a runs folder (e.g. runs) or a run directory with a run.json.")
        return None
    runs = core.find_runs(root)
    if not runs:
        st.info(
            f"No run directory (with a run.json) in {md_text(root)}. Record one with `footprint run --name NAME -- "
            "python train.py` or `footprint.track(...)`."
        )
        return None
    if runs == [root]:
        return root
    names = [p.name for p in runs]
    wanted = ss.pop("run_link_wanted", None)
    if wanted and wanted not in names:
        st.warning(f"No run {md_text(repr(wanted))} in {md_text(root)} (from the link); showing the newest one.")
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


PANEL_PX = 90  # height of one device's power panel
PANEL_WIDTH_PX = 820  # a faceted chart does not stretch to the container: about the main area at 1,400 px
MAX_PANELS = 16  # devices drawn as panels; a bigger run shows the first 16 and says so


def _power_panels(rows: Any) -> None:
    """Mean power per device as a line over its min-max band (one bucket per pixel: peaks stay visible), one panel
    per device on a shared scale, so that two GPUs drawing the same power never look like one."""
    x = {"field": "t_s", "type": "quantitative", "title": "time since start (s)"}
    devices = list(dict.fromkeys(rows["device"]))
    colour = {
        "field": "device",
        "type": "nominal",
        "scale": {"domain": devices, "range": [palette.series(i) for i in range(len(devices))]},
        "legend": None,
    }
    ui.vega(
        rows,
        {
            "facet": {
                "row": {
                    "field": "device",
                    "type": "nominal",
                    "sort": devices,
                    "title": None,
                    "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top"},
                }
            },
            "spacing": 18,
            "resolve": {"scale": {"y": "shared"}},
            "spec": {
                "height": PANEL_PX,
                "width": PANEL_WIDTH_PX,
                "layer": [
                    {
                        "mark": {"type": "area", "opacity": 0.25},
                        "encoding": {
                            "x": x,
                            "y": {"field": "power_min_w", "type": "quantitative", "title": "W"},
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
            "height": (PANEL_PX + 40) * len(devices),
        },
    )


def _energy_bars(totals: Any) -> None:
    """Energy per device (its last cumulative reading), one bar each."""
    rows = [{"device": d, "energy (kWh)": float(e) / 3.6e6} for d, e in totals.items()]
    ui.vega(
        rows,
        {
            "mark": {"type": "bar"},
            "height": 30 + 26 * len(rows),
            "encoding": {
                "y": {"field": "device", "type": "nominal", "sort": None, "title": None, "axis": {"labelLimit": 400}},
                "x": {"field": "energy (kWh)", "type": "quantitative"},
                "color": {
                    "field": "device",
                    "type": "nominal",
                    "scale": {"domain": list(totals.index), "range": [palette.series(i) for i in range(len(rows))]},
                    "legend": None,
                },
                "tooltip": [{"field": "device"}, {"field": "energy (kWh)", "format": ".4g"}],
            },
        },
    )


def _timeline(df: Any) -> None:
    if df is None or df.empty:
        st.info("No power samples in this run directory.")
        return
    devices = list(dict.fromkeys(df["device"]))
    shown = devices[:MAX_PANELS]
    _power_panels(df[df["device"].isin(shown)])
    totals = df.groupby("device", sort=False)["energy_j"].max()
    more = f" The first {len(shown)} of {len(devices)} devices are drawn." if len(devices) > len(shown) else ""
    st.caption(
        f"Power per device, one panel each on a shared scale: {core.TIMELINE_BUCKETS:,} time buckets, line = mean, "
        f"band = min to max.{more}"
    )
    _energy_bars(totals)
    st.caption("Energy per device: " + "; ".join(f"{md_text(d)}: {num(float(e) / 3.6e6)} kWh" for d, e in totals.items()) + ".")


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


def _hourly(match: Any) -> None:
    """The run's IT energy per UTC hour (bars) against that hour's carbon intensity (line, its own axis)."""
    if match is None:
        return
    d = match.to_dict()
    rows = [
        {"hour (UTC)": h, "IT energy (kWh)": e, "g CO2 eq/kWh": g}
        for h, e, g in zip(d["hours_utc"], d["it_energy_kwh"], d["g_per_kwh"], strict=True)
    ]
    x = {"field": "hour (UTC)", "type": "temporal", "title": "hour (UTC)"}
    tip = [{"field": "hour (UTC)", "type": "temporal", "timeUnit": "yearmonthdatehours"}]
    tip += [{"field": "IT energy (kWh)", "format": ".4g"}, {"field": "g CO2 eq/kWh", "format": ".4g"}]
    ui.vega(
        rows,
        {
            "height": 220,
            "layer": [
                {
                    "mark": {"type": "bar", "color": palette.series(0), "opacity": 0.7},
                    "encoding": {"x": x, "y": {"field": "IT energy (kWh)", "type": "quantitative"}, "tooltip": tip},
                },
                {
                    "mark": {"type": "line", "point": True, "color": palette.series(1)},
                    "encoding": {"x": x, "y": {"field": "g CO2 eq/kWh", "type": "quantitative"}, "tooltip": tip},
                },
            ],
            "resolve": {"scale": {"y": "independent"}},
        },
    )
    st.caption(md_text(f"Hourly profile: {match.method()}."))


def _reproject(run_dir: Path, samples: int) -> None:
    st.subheader("Re-project the measured run")
    st.caption(
        "The measured energy and duration under another grid, PUE, GPU generation or hardware lifetime: "
        "footprint.tracking.to_workload.workload_from_run(run_dir, sets), as `footprint assess RUN --set ...`."
    )
    try:
        measured = core.assess_run(run_dir, [], samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    w = measured.workload
    base = {k: core.base_controls(w)[k] for k in ("grid", "gpu", "lifetime_years")} | {"pue": round(w.pue, 2)}
    ss = st.session_state
    sid = str(run_dir)
    if ss.get("run_sid") != sid:
        for k, v in base.items():
            ss[f"run_{k}"] = v
        ss["run_sid"] = sid
    c1, c2, c3, c4 = st.columns(4)
    zones, gpus = core.zone_options(), core.gpu_options()
    if w.host_only:  # a run without GPU: the host only, unless a GPU is chosen (a what-if)
        gpus = {NO_GPU: HOST_ONLY, **gpus}
    c1.selectbox("Grid zone", list(zones), format_func=zones.get, key="run_grid")
    c2.slider("PUE", 1.0, 3.0, step=0.01, key="run_pue")
    c3.selectbox("GPU generation", list(gpus), format_func=lambda g: gpus[g], key="run_gpu")
    c4.slider("Hardware lifetime (years)", 0.25, 10.0, step=0.25, key="run_lifetime_years")
    hourly = st.text_input(
        "Hourly carbon intensity (CSV path)",
        key="run_hourly",
        help="Electricity Maps' hourly export or a datetime_utc,g_per_kwh file: the run's energy is matched to it hour "
        "by hour (climate change only), as --set site.carbon_intensity_hourly=FILE",
    ).strip()
    sets = []
    if ss["run_grid"] != base["grid"]:
        sets.append(f"site.grid={ss['run_grid']}")
    if abs(ss["run_pue"] - base["pue"]) > 1e-9:
        sets.append(f"site.pue={ss['run_pue']:g}")
    if ss["run_gpu"] != base["gpu"]:
        sets.append(f"hardware.gpu={ss['run_gpu']}")
    if abs(ss["run_lifetime_years"] - base["lifetime_years"]) > 1e-9:
        sets.append(f"hardware.lifetime={ss['run_lifetime_years']:g} years")
    if hourly:
        sets.append(f"site.carbon_intensity_hourly={hourly}")
    try:
        a = core.assess_run(run_dir, sets, samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    ss["run_result"] = {"run_dir": str(run_dir), "sets": sets, "totals": {k: r.total for k, r in a.impacts.items()}}
    if sets:
        st.code(core.cli_command(str(run_dir), sets), language="bash")
    _hourly(a.workload.hourly)
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
        st.error(md_text(f"footprint: error: {run_dir}: {exc}"))
        return
    opened = st.session_state.setdefault("opened_runs", [])
    if str(run_dir) not in opened:
        opened.append(str(run_dir))
    rec = run["record"]
    energy = rec.get("energy") or {}
    st.subheader(md_text(rec.get("name") or run_dir.name))  # user text: shown as typed, never as Markdown
    st.caption(md_text(f"Link to this run: ?run={run_dir} (or ?run={run_dir.name} for a run in ./runs)."))
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
    labels = device_labels(rec)
    devices = [
        {
            "device": labels.get((d.get("host"), str(d.get("uuid"))), ""),
            "component": d.get("component", "gpu"),
            "name": d.get("name"),
            "uuid": d.get("uuid"),
            "rank": d.get("rank"),
            "host": d.get("host"),
            "method": d.get("method"),
            "energy obtained": energy_kind(d),  # measured, simulated (fake NVML) or estimated: never an estimate as measured
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
            st.markdown(f"- {md_text(n)}")
        if rec.get("windows"):
            st.dataframe(rec["windows"], hide_index=True, **ui.WIDE)
    with t4:
        _reproject(run_dir, samples)
