"""Kernels: the analysis of a PyTorch profiler (Kineto) trace by footprint.kernels.trace.analyze_trace."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.kernels.trace import format_us
from footprint.lca.assessment import num

TOP = 20


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
def analyse(path: str, mtime: float, size: int, power: str | None, power_mtime: float | None) -> dict[str, Any]:
    """analyze_trace(path[, power=run_dir]), cached until the trace (or the run) changes."""
    fn, why = analyzer()
    if fn is None:
        raise RuntimeError(why)
    result = fn(path, power=power, top=TOP) if power else fn(path, top=TOP)
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def _pct(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v * scale:.{digits}f} %"


def show_analysis(r: dict[str, Any]) -> None:
    """Device, time split, categories (time, FLOPs, % of peak), top ops, launch overhead, energy, warnings."""
    tr, d, tl, sm = r["trace"], r["device"], r["timeline"], r["summary"]
    st.caption(
        f"{tr['source']}: {tr['events']:,} events, {tr['json_bytes'] / 1e6:,.1f} MB of JSON read in {tr['parse_seconds']:.2f} s"
    )
    if d.get("catalogue_name"):
        st.markdown(
            f"**GPU:** {d.get('name') or 'unknown'} (device {d.get('index')}) = {d['catalogue_name']}: "
            f"dense {d.get('peak_dtype')} peak {num(d.get('peak_tflops'))} TFLOP/s"
            + (f", {num(d['memory_bandwidth_tbytes_per_s'])} TB/s" if d.get("memory_bandwidth_tbytes_per_s") else "")
        )
    else:
        st.markdown(f"**GPU:** {d.get('name') or 'unknown model'}: not in the catalogue, peaks not available")
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
            "GFLOP": "n/a" if e.get("flops") is None else num(e["flops"] / 1e9),
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
    ui.vega(
        chart,
        {
            "mark": {"type": "bar"},
            "height": max(120, 28 * len(chart)),
            "encoding": {
                "y": {"field": "category", "type": "nominal", "sort": "-x", "title": None},
                "x": {"field": "time_us", "type": "quantitative", "title": "kernel time (us)"},
                "tooltip": [
                    {"field": "category", "type": "nominal"},
                    {"field": "time_us", "type": "quantitative", "format": ",.1f"},
                ],
            },
        },
    )
    st.caption(
        f"Computation {format_us(tl.get('computation_us'))}, exposed communication "
        f"{format_us(tl.get('exposed_communication_us'))}, exposed memcpy {format_us(tl.get('exposed_memcpy_us'))}."
    )
    ops = r.get("ops") or []
    if ops:
        st.subheader("Top ops by kernel time")
        st.dataframe(
            [
                {
                    "Op": o["name"],
                    "Shape": o.get("shapes") or "",
                    "dtype": o.get("dtype") or "",
                    "Calls": f"{o['count']:,}",
                    "Time": format_us(o["kernel_time_us"]),
                    "GFLOP": "n/a" if o.get("flops") is None else num(o["flops"] / 1e9),
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
    if r.get("warnings"):
        with st.expander(f"Warnings ({len(r['warnings'])})"):
            for w in r["warnings"]:
                st.markdown(f"- {w}")
    with st.expander("Conventions"):
        st.markdown("\n".join(f"- **{k}**: {v}" for k, v in (r.get("conventions") or {}).items()))


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
    text = st.text_input(
        "Profiler trace (.json or .json.gz)",
        key="k_path",
        placeholder="e.g. traces/step.json.gz (torch.profiler ... export_chrome_trace)",
    )
    run_text = st.text_input(
        "Run directory for the energy per category (optional)",
        key="k_run",
        help="A run recorded by footprint.track during the profiled steps: its power samples "
        "are aligned with the kernel timeline (footprint kernels analyze --power RUN)",
    )
    if not text.strip():
        st.info("Give the path of a trace to analyse.")
        return
    path = Path(text.strip()).expanduser()
    if not path.is_file():
        st.error(f"footprint: error: {path}: no such trace file")
        return
    run = Path(run_text.strip()).expanduser() if run_text.strip() else None
    if run is not None and not (run / "run.json").is_file():
        st.error(f"footprint: error: {run}: not a run directory (no run.json)")
        return
    stat = path.stat()
    try:
        result = analyse(
            str(path), stat.st_mtime, stat.st_size, str(run) if run else None, (run / "run.json").stat().st_mtime if run else None
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
