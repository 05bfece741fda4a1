"""Kernels: the analysis of a PyTorch profiler (Kineto) trace by footprint.kernels.trace.analyze_trace."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.escaping import md_text
from footprint.kernels.render import format_us, launchless
from footprint.lca.assessment import num

TOP = 20
MAX_TRACE_UPLOAD_MB = 50  # a trace upload larger than this is refused (the scenario upload's limit is 1 MB)
EXAMPLE_TRACE = Path(__file__).resolve().parents[1] / "examples" / "traces" / "cpu_training.json.gz"
SOURCES = ("Example: CPU training trace (examples/)", "Upload a trace", "Path on this machine")
MODES = ("Analyse a trace", "Compare two traces")


def analyzer() -> tuple[Any, str | None]:
    """(analyze_trace, None), or (None, why it is not available). Imported lazily: the module is optional."""
    try:
        module = importlib.import_module("footprint.kernels.trace")
    except Exception as exc:  # missing, or broken: the page says so instead of failing
        return None, f"footprint.kernels.trace cannot be imported ({type(exc).__name__}: {exc})"
    fn = getattr(module, "analyze_trace", None)
    if fn is None:
        return None, "footprint.kernels.trace has no analyze_trace()"
    return fn, None


@st.cache_data(show_spinner="Analysing the trace ...", max_entries=16)
def analyse(
    path: str, mtime: float, size: int, power: str | None, power_mtime: float | None, include_unlinked: bool = False
) -> dict[str, Any]:
    """analyze_trace(path[, power=run_dir]), cached until the trace (or the run) changes."""
    fn, why = analyzer()
    if fn is None:
        raise RuntimeError(why)
    kw = {"include_unlinked": True} if include_unlinked else {}
    result = fn(path, power=power, top=TOP, **kw) if power else fn(path, top=TOP, **kw)
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def _pct(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v * scale:.{digits}f} %"


def _gflop(flops: float | None) -> str:
    return "n/a" if flops is None else num(flops / 1e9)


def _op_row(o: dict[str, Any], time_label: str, time_key: str) -> dict[str, str]:
    """The columns every op table starts with (a CPU op's or a GPU op's), its time under ``time_label``."""
    return {
        "Op": o["name"],
        "Shape": o.get("shapes") or "",
        "dtype": o.get("dtype") or "",
        "Calls": f"{o['count']:,}",
        time_label: format_us(o[time_key]),
        "GFLOP": _gflop(o.get("flops")),
    }


def show_steps(r: dict[str, Any]) -> None:
    """One row per profiler step and the summary the `--steps` choice selects (steady state by default)."""
    steps = r.get("steps") or {}
    if not steps.get("detected"):
        return
    st.subheader(f"Profiler steps ({steps['detected']})")
    st.caption(f"Summary = {steps['selection']}. {steps.get('definition', '')}")
    rows = []
    for p in steps["per_step"]:
        row = {"#": p["index"], "Step": p["name"], "Wall": format_us(p["wall_us"])}
        if "busy_time_us" in p:
            cats = p["kernel_time_by_category_us"]
            row |= {
                "GPU busy": format_us(p["busy_time_us"]),
                "Idle": format_us(p["idle_time_us"]),
                "GEMM": format_us(cats["gemm"]),
                "Attention": format_us(cats["attention"]),
                "Comm (exposed)": f"{format_us(p['communication_us'])} ({format_us(p['exposed_communication_us'])})",
                "TFLOP/s": num(p.get("tflops_per_s_over_busy")),
                "MFU": _pct(p.get("mfu"), 100),
            }
        else:
            row |= {"Matrix ops": format_us(p["cpu_matrix_time_us"]), "GFLOP/s over wall": num(p.get("gflops_per_s_over_wall"))}
        row["GFLOP"] = _gflop(p.get("matrix_flops"))
        rows.append(row)
    st.dataframe(rows, hide_index=True, **ui.WIDE)


def show_cpu(r: dict[str, Any]) -> None:
    """The CPU operator table of a trace with no GPU events."""
    c = r["cpu"]
    st.markdown(
        f"**CPU operators** (no GPU events in the trace): {format_us(c['matrix_cpu_time_us'])} in ops with a FLOP model, "
        + ("FLOPs not available" if c["matrix_flops"] is None else f"{num(c['matrix_flops'] / 1e9)} GFLOP")
        + f", {num(c.get('matrix_gflops_per_s'))} GFLOP/s in them"
    )
    show_steps(r)
    st.subheader("Top CPU ops by time")
    st.dataframe(
        [_op_row(o, "CPU time", "cpu_time_us") | {"GFLOP/s": num(o.get("gflops_per_s"))} for o in c["ops"]],
        hide_index=True,
        **ui.WIDE,
    )
    power = r.get("power")
    if power and not power.get("available", True):
        st.info(f"Energy not attributed: {power['missing']}")
    ui.bullets("Warnings", r.get("warnings") or [])


def show_analysis(r: dict[str, Any]) -> None:
    """Device, time split, categories (time, FLOPs, % of peak), top ops, launch overhead, energy, warnings."""
    tr, d, tl, sm = r["trace"], r["device"], r["timeline"], r["summary"]
    st.caption(
        f"{tr['source']}: {tr['events']:,} events, {tr['json_bytes'] / 1e6:,.1f} MB of JSON read in {tr['parse_seconds']:.2f} s"
    )
    if r.get("cpu") is not None:
        show_cpu(r)
        return
    if d.get("catalogue_name"):
        st.markdown(
            f"**GPU:** {d.get('name') or 'unknown'} (device {d.get('index')}) = {d['catalogue_name']}: "
            f"dense {d.get('peak_dtype')} peak {num(d.get('peak_tflops'))} TFLOP/s"
            + (f", {num(d['memory_bandwidth_tbytes_per_s'])} TB/s" if d.get("memory_bandwidth_tbytes_per_s") else "")
        )
    else:
        st.markdown(f"**GPU:** {md_text(d.get('name') or 'unknown model')}: not in the catalogue, peaks not available")
    show_launchless(r)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("GPU time (trace)", format_us(r["total_time_us"]))
    c2.metric("Busy", format_us(r["busy_time_us"]), help="union of kernel, memcpy and memset intervals")
    c2.caption(f"{_pct(tl.get('busy_share'), 100)} busy, idle {format_us(r['idle_time_us'])}")
    c3.metric(
        "Matrix TFLOP/s",
        num(sm.get("matrix_tflops_per_s")),
        help="GEMM, attention and convolution FLOPs over their kernels' time",
    )
    c4.metric(
        "% of peak (whole trace)",
        _pct(sm.get("pct_of_peak_over_total"), digits=2),
        help="matrix FLOPs over the whole trace's time x the dense peak",
    )
    power = r.get("power")
    rows, chart = [], []
    for c, e in r["by_category"].items():
        if not e.get("count"):
            continue
        row = {
            "Category": c,
            "Kernels": f"{e['count']:,}",
            "Time": format_us(e["kernel_time_us"]),
            "Busy share": _pct(e.get("share_of_busy"), 100),
            "GFLOP": _gflop(e.get("flops")),
            "TFLOP/s": num(e.get("tflops_per_s")),
            "% of peak": _pct(e.get("pct_of_peak")),
            "TB/s": num(e.get("tbytes_per_s")),
        }
        if power:
            row.update({"Energy J": num(e.get("energy_j")), "GFLOP/J": num(e.get("gflops_per_j"))})
        rows.append(row)
        chart.append({"category": c, "time_us": float(e["kernel_time_us"] or 0.0)})
    st.subheader("Where the GPU time goes")
    st.dataframe(rows, hide_index=True, **ui.WIDE)
    _kernel_time_bars(chart, "category", max(120, 28 * len(chart)))
    st.caption(
        f"Computation {format_us(tl.get('computation_us'))}, exposed communication "
        f"{format_us(tl.get('exposed_communication_us'))}, exposed memcpy {format_us(tl.get('exposed_memcpy_us'))}."
    )
    ops = r.get("ops") or []
    if ops:
        st.subheader("Top ops by kernel time")
        st.dataframe(
            [
                _op_row(o, "Time", "kernel_time_us")
                | {
                    "TFLOP/s": num(o.get("tflops_per_s")),
                    "% of peak": _pct(o.get("pct_of_peak")),
                    "FLOP/B": num(o.get("arithmetic_intensity")),
                    "Bound": o.get("roofline") or "n/a",
                }
                for o in ops
            ],
            hide_index=True,
            **ui.WIDE,
        )
        if r.get("ops_total", 0) > len(ops):
            st.caption(f"{r['ops_total'] - len(ops)} more ops (the top {len(ops)} are shown).")
    show_steps(r)
    lo = r.get("launch_overhead") or {}
    if lo.get("kernels"):
        st.markdown(
            f"**Launch overhead:** {lo['kernels']:,} kernels, median {num(lo.get('median_kernel_us'))} us; "
            f"CPU launch calls {format_us(lo.get('cpu_launch_time_us'))} for {format_us(lo.get('gpu_kernel_time_us'))} "
            f"of kernels; {lo.get('short_kernels', 0):,} kernels under "
            f"{lo.get('short_kernel_threshold_us', 0):g} us; {lo.get('launch_bound_kernels') or 0:,} "
            f"launch-bound; {lo.get('idle_gaps', 0):,} idle gaps"
        )
    if power:
        st.markdown(
            f"**Energy** ({power.get('device_uuid')}, {power.get('energy_method')}): "
            f"{num(power.get('energy_in_trace_window_j'))} J in the trace window "
            f"({num(power.get('mean_power_in_window_w'))} W mean), of which idle {num(power.get('idle_j'))} J"
        )
        for n in [power.get("coarseness"), *(power.get("notes") or [])]:
            if n:
                st.caption(n)
    ui.bullets("Warnings", r.get("warnings") or [])
    with st.expander("Conventions"):
        st.markdown("\n".join(f"- **{k}**: {v}" for k, v in (r.get("conventions") or {}).items()))


def show_launchless(r: dict[str, Any]) -> None:
    """A warning per launchless bucket (TraceLens' linked-event rule: counted only with the option)."""
    for text, counted in launchless(r):
        st.warning(
            f"{text}: "
            + (
                "counted, as asked; the first step is charged for them."
                if counted
                else "not counted in any figure below (TraceLens' rule); tick 'Count launchless GPU events' to count them."
            )
        )


def show_generic(d: dict[str, Any]) -> None:
    """Fallback for a result of another shape: scalars, then each section as JSON."""
    st.dataframe([{"": k, "value": str(v)} for k, v in d.items() if not isinstance(v, (dict, list))], hide_index=True, **ui.WIDE)
    for k, v in d.items():
        if isinstance(v, (dict, list)) and v:
            with st.expander(k.replace("_", " ")):
                st.json(v)


def render(samples: int) -> None:
    st.title("Kernels")
    st.caption(
        "Where a training step's time goes, from a PyTorch profiler (Kineto) trace (.json or .json.gz): "
        "op categories, the top kernels and their share of the GPU's dense peak, as "
        "`footprint kernels analyze TRACE`."
    )
    fn, why = analyzer()
    if fn is None:
        st.warning(f"Kernel analysis is not available in this installation: {why}.")
        return
    if st.radio("Mode", MODES, key="k_mode", horizontal=True) == MODES[1]:
        render_diff()
        return
    source = st.radio("Trace", SOURCES, key="k_source", horizontal=True)
    path = trace_path(source)
    run_text = st.text_input(
        "Run directory for the energy per category (optional)",
        key="k_run",
        help="A run recorded by footprint.track during the profiled steps: its power samples "
        "are aligned with the timeline (footprint kernels analyze --power RUN)",
    )
    include = st.checkbox(
        "Count launchless GPU events",
        key="k_unlinked",
        help="GPU events with no launch call in the recording (mostly the previous iteration's queue, carried over "
        "from before it) are left out by default, as in TraceLens (footprint kernels analyze --include-unlinked)",
    )
    if path is None:
        return
    run = Path(run_text.strip()).expanduser() if run_text.strip() else None
    if run is not None and not (run / "run.json").is_file():
        st.error(f"footprint: error: {run}: not a run directory (no run.json)")
        return
    stat = path.stat()
    try:
        result = analyse(
            str(path),
            stat.st_mtime,
            stat.st_size,
            str(run) if run else None,
            (run / "run.json").stat().st_mtime if run else None,
            include,
        )
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    except Exception as exc:  # an unreadable trace: one line, no traceback
        st.error(f"Kernel analysis failed on {path.name}: {type(exc).__name__}: {exc}")
        return
    st.session_state["k_result"] = result
    try:
        show_analysis(result)
    except (KeyError, TypeError, AttributeError):  # a result of another shape: show it as it is
        show_generic(result)


def trace_path(source: str) -> Path | None:
    """The trace file to analyse from the chosen source (an upload is size-checked and kept in a temporary file)."""
    if source == SOURCES[0]:
        if not EXAMPLE_TRACE.is_file():
            st.error(
                f"footprint: error: {EXAMPLE_TRACE}: the example trace is missing "
                "(python examples/cpu_training_trace.py makes it)"
            )
            return None
        return EXAMPLE_TRACE
    if source == SOURCES[1]:
        up = st.file_uploader(
            f"Profiler trace (.json or .json.gz, at most {MAX_TRACE_UPLOAD_MB} MB)", type=["json", "gz"], key="k_upload"
        )
        if up is None:
            st.info("Upload a trace exported by torch.profiler (export_chrome_trace).")
            return None
        content = up.getvalue()
        if len(content) > MAX_TRACE_UPLOAD_MB * 1_000_000:
            st.error(
                f"footprint: error: {up.name}: file is larger than {MAX_TRACE_UPLOAD_MB} MB ({len(content):,} bytes uploaded)"
            )
            return None
        import hashlib
        import tempfile

        suffix = ".json.gz" if content[:2] == b"\x1f\x8b" else ".json"
        target = Path(tempfile.gettempdir()) / f"footprint-trace-{hashlib.sha256(content).hexdigest()[:16]}{suffix}"
        from footprint.errors import FootprintError
        from footprint.outputs import write_bytes

        try:  # through the safe writer: a link planted at this predictable name in /tmp is refused, not followed
            write_bytes(target, content)
        except FootprintError as exc:
            st.error(f"footprint: error: {exc}")
            return None
        return target
    path = ui.file_input("Profiler trace path", "k_path", "e.g. traces/step.json.gz", "trace file")
    if path is None and not st.session_state.get("k_path", "").strip():
        st.info("Give the path of a trace to analyse.")
    return path


# ---- two traces compared (footprint kernels diff) -----------------------------------------------------------
@st.cache_data(show_spinner="Comparing the traces ...", max_entries=8)
def compare(
    a: str, a_mtime: float, b: str, b_mtime: float, include: bool, train_steps: int, gpus: int, gpu: str
) -> dict[str, Any]:
    """diff_traces(a, b, ...), cached until either trace changes."""
    from footprint.kernels.diff import diff_traces

    size = {"train_steps": train_steps, "gpus": gpus, "gpu": gpu or None} if train_steps else {}
    return diff_traces(a, b, include_unlinked=include, **size)


def render_diff() -> None:
    """Two traces of the same model compared, as `footprint kernels diff A B --train-steps N --gpus N`."""
    c1, c2 = st.columns(2)
    with c1:
        a = ui.file_input("Trace A (before)", "k_diff_a", "e.g. traces/before.json.gz", "trace file")
    with c2:
        b = ui.file_input("Trace B (after)", "k_diff_b", "e.g. traces/after.json.gz", "trace file")
    c1, c2, c3 = st.columns(3)
    steps = int(c1.number_input("Training steps of the run (0: no footprint)", 0, 10**12, 0, key="k_diff_steps"))
    gpus = int(c2.number_input("GPUs", 1, 10**7, 1, key="k_diff_gpus"))
    gpu = c3.text_input("GPU (catalogue name; default trace A's)", key="k_diff_gpu")
    include = st.checkbox("Count launchless GPU events", key="k_diff_unlinked")
    if a is None or b is None:
        st.info("Give the paths of two traces of the same model (A before a change, B after).")
        return
    try:
        d = compare(str(a), a.stat().st_mtime, str(b), b.stat().st_mtime, include, steps, gpus, gpu.strip())
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    st.session_state["k_diff"] = d
    show_diff(d)


def show_diff(d: dict[str, Any]) -> None:
    """Totals with their change, kernel classes (table and chart), the ops that changed most, the footprint."""
    a, b = d["a"], d["b"]  # paths and device names from the traces: user text
    side_a, side_b = f"{md_text(a['source'])} ({md_text(a['device'])})", f"{md_text(b['source'])} ({md_text(b['device'])})"
    st.caption(f"A: {side_a}; B: {side_b}. Basis: {md_text(d['basis'])}.")
    t = d["totals"]
    cols = st.columns(4)
    for col, key, label, fmt in zip(
        cols,
        ("step_time_us", "busy_time_us", "matrix_tflops_per_s", "mfu"),
        ("Step time (B)", "GPU busy (B)", "Matrix TFLOP/s (B)", "MFU (B)"),
        (format_us, format_us, num, lambda v: _pct(v, 100, 2)),
        strict=True,
    ):
        f = t[key]
        delta = None if f["delta"] is None else (fmt(abs(f["delta"])) if f["delta"] >= 0 else "-" + fmt(-f["delta"]))
        col.metric(
            label, fmt(f["b"]) if f["b"] is not None else "n/a", delta=delta, delta_color="inverse" if "time" in key else "normal"
        )
    rows, chart = [], []
    for c, e in d["by_category"].items():
        ta, tb = e["time_us"]["a"] or 0.0, e["time_us"]["b"] or 0.0
        if not (ta or tb):
            continue
        rows.append(
            {
                "Kernel class": c,
                "Time A": format_us(ta),
                "Time B": format_us(tb),
                "Change": _pct(e["time_us"]["relative"], 100),
                "TFLOP/s A": num(e["tflops_per_s"]["a"]),
                "TFLOP/s B": num(e["tflops_per_s"]["b"]),
                "% of peak A": _pct(e["pct_of_peak"]["a"]),
                "% of peak B": _pct(e["pct_of_peak"]["b"]),
            }
        )
        chart += [{"class": c, "trace": "A", "time_us": ta}, {"class": c, "trace": "B", "time_us": tb}]
    st.subheader("Kernel classes")
    st.dataframe(rows, hide_index=True, **ui.WIDE)
    _kernel_time_bars(chart, "class", max(120, 40 * len(rows)), by_trace=True)
    st.subheader("Ops that changed most")
    st.dataframe(
        [
            {
                "Op": o["name"],
                "Shape": o["shapes"] or "",
                "In": o["in"],
                "Time A": format_us(o["time_us"]["a"]),
                "Time B": format_us(o["time_us"]["b"]),
                "Change": _pct(o["time_us"]["relative"], 100),
            }
            for o in d["ops"]
        ],
        hide_index=True,
        **ui.WIDE,
    )
    fp = d.get("footprint")
    if fp:
        st.subheader(f"Footprint of the training run ({fp['size']}, {fp['gpu']})")
        rows = [{"": "GPU-hours", "Unit": "h"} | _abd(fp["gpu_hours"]), {"": "IT energy", "Unit": "kWh"} | _abd(fp["energy_kwh"])]
        rows += [{"": c["name"], "Unit": c["unit"]} | _abd(c) for c in fp["categories"].values()]
        st.dataframe(rows, hide_index=True, **ui.WIDE)
        st.caption(fp["method"])
    ui.bullets("Warnings", d.get("warnings") or [])


def _abd(f: dict[str, Any]) -> dict[str, str]:
    return {"A": num(f["a"]), "B": num(f["b"]), "B - A": num(f["delta"]), "Change": _pct(f["relative"], 100)}


def _kernel_time_bars(chart: list[dict[str, Any]], y: str, height: int, by_trace: bool = False) -> None:
    """Horizontal bars of kernel time per ``y``: one trace sorted by time, or traces A and B side by side."""
    time = {"field": "time_us", "type": "quantitative"}
    enc: dict[str, Any] = {
        "y": {"field": y, "type": "nominal", "title": None, **({} if by_trace else {"sort": "-x"})},
        "x": {**time, "title": "kernel time (us)"},
        "tooltip": [{"field": y, "type": "nominal"}, {**time, "format": ",.1f"}],
    }
    if by_trace:
        enc["yOffset"] = {"field": "trace"}
        enc["color"] = {"field": "trace", "type": "nominal", "scale": {"range": ui.PALETTE[:2]}}
        enc["tooltip"].insert(1, {"field": "trace", "type": "nominal"})
    ui.vega(chart, {"mark": {"type": "bar"}, "height": height, "encoding": enc})
