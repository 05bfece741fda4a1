"""Text and JSON output of `analyze_trace`'s result: the tables `footprint kernels analyze` prints.

Whole-trace sections as before (device, GPU time, categories, top ops, launch overhead, energy), plus
the profiler steps (one line each and the summary the `--steps` choice selects, with the choice
printed) and, for CPU-only traces, the CPU operator table. Imports `opmodels` (category names) only.
"""

from __future__ import annotations

import json
import math
from typing import Any

from footprint.kernels.opmodels import CATEGORIES, MATRIX_CATEGORIES


def fmt_count(v: float | None, digits: int = 3) -> str:
    """Kernel-table numbers: whole numbers above 1,000 (GFLOP, counts), 3 significant digits below."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1e-3:
        return f"{float(f'{v:.{digits}g}'):g}"
    return f"{v:.2e}"


def format_us(v: float | None) -> str:
    """Microseconds for people: "41.3 us", "3.908 ms", "1.204 s"."""
    if v is None:
        return "n/a"
    if v >= 1e6:
        return f"{v / 1e6:.3f} s"
    if v >= 1e3:
        return f"{v / 1e3:.3f} ms"
    return f"{v:.1f} us"


def _table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def render_table(r: dict[str, Any]) -> str:
    d, tr, tl = r["device"], r["trace"], r["timeline"]
    out = [
        f"Trace: {tr['source']}  ({tr['events']:,} events, {tr['json_bytes'] / 1e6:,.1f} MB of JSON read in "
        f"{tr['parse_seconds']:.2f} s)"
    ]
    if d["name"] or d["index"] is not None:
        gpu = f"GPU: {d['name'] or 'unknown model'} (device {d['index']})"
        if d["catalogue_name"]:
            gpu += f" = {d['catalogue_name']}: dense {d['peak_dtype']} peak {fmt_count(d['peak_tflops'])} TFLOP/s"
            if d["memory_bandwidth_tbytes_per_s"]:
                gpu += (
                    f", {fmt_count(d['memory_bandwidth_tbytes_per_s'])} TB/s, ridge point "
                    f"{fmt_count(d['ridge_point_flops_per_byte'])} FLOP/byte"
                )
        else:
            gpu += ": not in the catalogue, peaks not available"
        out.append(gpu)
    if r.get("cpu") is not None:
        out += _cpu_lines(r)
        return "\n".join(out) + "\n"
    out += _step_lines(r)
    total = r["total_time_us"]
    share = tl["busy_share"]
    out.append(
        "GPU time (whole trace):" if (r.get("steps") or {}).get("detected") else "GPU time:",
    )
    out[-1] += (
        f" total {format_us(total)}  |  busy {format_us(r['busy_time_us'])}"
        + (f" ({share:.1%})" if share is not None else "")
        + f"  |  idle {format_us(r['idle_time_us'])}"
        + (f" ({1 - share:.1%})" if share is not None else "")
    )
    out.append(
        f"  computation {format_us(tl['computation_us'])}, exposed communication "
        f"{format_us(tl['exposed_communication_us'])}, exposed memcpy {format_us(tl['exposed_memcpy_us'])}"
    )
    out += _linking_lines(r)
    sm = r["summary"]
    if sm["matrix_flops"]:
        line = (
            f"Matrix FLOPs (GEMM, attention, convolution): {sm['matrix_flops'] / 1e9:,.4g} GFLOP; "
            f"{fmt_count(sm['matrix_tflops_per_s'])} TFLOP/s in their kernels, {fmt_count(sm['tflops_per_s_over_total'])} "
            f"TFLOP/s over the whole trace"
        )
        if sm["pct_of_peak_over_total"] is not None:
            line += f" ({sm['pct_of_peak_over_total']:.2f} % of peak)"
        out.append(line)
    power = r.get("power")
    heads = ["Category", "Kernels", "Time", "Busy", "GFLOP", "TFLOP/s", "% peak", "TB/s"]
    if power:
        heads += ["Energy J", "GFLOP/J"]
    rows = []
    for c in CATEGORIES:
        e = r["by_category"][c]
        if not e["count"]:
            continue
        row = [
            c,
            f"{e['count']:,}",
            format_us(e["kernel_time_us"]),
            f"{e['share_of_busy']:.1%}" if e["share_of_busy"] is not None else "n/a",
            fmt_count(e["flops"] / 1e9) if e["flops"] is not None else "n/a",
            fmt_count(e["tflops_per_s"]),
            f"{e['pct_of_peak']:.1f}" if e["pct_of_peak"] is not None else "n/a",
            fmt_count(e["tbytes_per_s"]),
        ]
        if power:
            row += [fmt_count(e.get("energy_j")), fmt_count(e.get("gflops_per_j"))]
        rows.append(row)
    out += [""] + _table(heads, rows)
    if r["ops"]:
        heads = ["Top ops (by kernel time)", "Shape", "dtype", "Calls", "Time", "GFLOP", "TFLOP/s", "% peak", "FLOP/B", "Bound"]
        rows = []
        for o in r["ops"]:
            rows.append(
                [
                    _short(o["name"], 48),
                    _short(o["shapes"] or "", 40),
                    o["dtype"] or "",
                    f"{o['count']:,}",
                    format_us(o["kernel_time_us"]),
                    fmt_count(o["flops"] / 1e9) if o["flops"] is not None else "n/a",
                    fmt_count(o["tflops_per_s"]),
                    f"{o['pct_of_peak']:.1f}" if o["pct_of_peak"] is not None else "n/a",
                    fmt_count(o["arithmetic_intensity"]),
                    o["roofline"] or "n/a",
                ]
            )
        out += [""] + _table(heads, rows, left=(0, 1, 2, 9))
        if r["ops_total"] > len(r["ops"]):
            out.append(f"({r['ops_total'] - len(r['ops'])} more ops; --top N shows more)")
    lo = r["launch_overhead"]
    if lo["kernels"]:
        out += [
            "",
            f"Launch overhead: {lo['kernels']:,} kernels, median {fmt_count(lo['median_kernel_us'])} us; CPU launch "
            f"calls {format_us(lo['cpu_launch_time_us'])} for {format_us(lo['gpu_kernel_time_us'])} of kernels "
            f"(ratio {fmt_count(lo['launch_to_kernel_time_ratio'])}); {lo['short_kernels']:,} kernels under "
            f"{lo['short_kernel_threshold_us']:g} us; {lo['launch_bound_kernels'] or 0:,} launch-bound; "
            f"{lo['idle_gaps']:,} idle gaps (median {fmt_count(lo['median_idle_gap_us'])} us)",
        ]
    if power:
        out += _energy_lines(
            power,
            power["energy_method"],
            f"of which idle {fmt_count(power['idle_j'])} J; "
            f"{fmt_count(power['outside_trace_j'])} J of the same samples fall outside the trace",
        )
    return "\n".join(out + _warning_lines(r)) + "\n"


BUCKETS = {"carried_over": "carried over from before the recording", "unlinked": "launched without a recorded launch call"}


def launchless(r: dict[str, Any]) -> list[tuple[str, bool]]:
    """The launchless GPU events (TraceLens' linked-event rule): (how many, how much GPU time; counted or not)."""
    lk = r.get("linking") or {}
    out = []
    for key, what in BUCKETS.items():
        b = lk.get(key) or {}
        if b.get("events"):
            text = (
                f"{b['events']:,} GPU events {what} ({format_us(b['busy_time_us'])} busy, "
                f"{format_us(b['kernel_time_us'])} of kernel time)"
            )
            out.append((text, bool(b["counted"])))
    return out


def linking_notes(r: dict[str, Any]) -> list[str]:
    """One line per launchless bucket: "counted: ..." or "not counted: ..."."""
    return [f"{'counted' if counted else 'not counted'}: {text}" for text, counted in launchless(r)]


def _linking_lines(r: dict[str, Any]) -> list[str]:
    return ["  " + n for n in linking_notes(r)]


def _energy_lines(power: dict[str, Any], scope: str, tail: str) -> list[str]:
    """The energy paragraph under a GPU or CPU table: window energy, mean power, how coarse, notes."""
    return [
        "",
        f"Energy ({power['device_uuid']}, {scope}): {fmt_count(power['energy_in_trace_window_j'])} J in the trace window "
        f"({fmt_count(power['mean_power_in_window_w'])} W mean), {tail}",
        f"  {power['coarseness']}",
        *(f"  - {n}" for n in power["notes"]),
    ]


def _warning_lines(r: dict[str, Any]) -> list[str]:
    return ["", "Warnings:", *(f"  - {w}" for w in r["warnings"])] if r["warnings"] else []


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    return str(o)


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, default=_json_default, allow_nan=False) + "\n"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _step_lines(r: dict[str, Any]) -> list[str]:
    """One line per profiler step and the summary of the chosen steps (GPU traces)."""
    st = r.get("steps") or {}
    if not st.get("detected"):
        return []
    out = ["", f"Profiler steps: {st['detected']} ProfilerStep spans; summary = {st['selection']}"]
    heads = [
        "#",
        "Step",
        "Wall",
        "GPU busy",
        "Idle",
        "GEMM",
        "Attention",
        "Elementwise",
        "Comm (exposed)",
        "GFLOP",
        "TFLOP/s",
        "MFU",
    ]
    rows = []
    for p in st["per_step"]:
        cats = p["kernel_time_by_category_us"]
        rows.append(
            [
                str(p["index"]),
                _short(p["name"], 24),
                format_us(p["wall_us"]),
                format_us(p["busy_time_us"]),
                format_us(p["idle_time_us"]),
                format_us(cats["gemm"]),
                format_us(cats["attention"]),
                format_us(cats["elementwise"]),
                f"{format_us(p['communication_us'])} ({format_us(p['exposed_communication_us'])})",
                fmt_count(p["matrix_flops"] / 1e9) if p["matrix_flops"] is not None else "n/a",
                fmt_count(p["tflops_per_s_over_busy"]),
                _pct(p["mfu"]),
            ]
        )
    out += _table(heads, rows, left=(1,))
    sm = st.get("summary")
    if sm:
        cats = sm["kernel_time_by_category_us"]
        which = ", ".join(map(str, sm["steps"])) if sm["count"] <= 6 else f"{sm['count']} steps"
        out.append(
            f"Per step (steps {which}, mean): wall "
            f"{format_us(sm['wall_us'])} (min {format_us(sm['wall_us_min'])}, max {format_us(sm['wall_us_max'])}), GPU busy "
            f"{format_us(sm['busy_time_us'])}, idle {format_us(sm['idle_time_us'])}; GEMM {format_us(cats['gemm'])}, attention "
            f"{format_us(cats['attention'])}, elementwise {format_us(cats['elementwise'])}, communication "
            f"{format_us(sm['communication_us'])} of which exposed {format_us(sm['exposed_communication_us'])}; "
            + (f"{sm['matrix_flops'] / 1e9:,.4g} GFLOP, " if sm["matrix_flops"] else "")
            + f"{fmt_count(sm['tflops_per_s_over_busy'])} TFLOP/s over busy, MFU {_pct(sm['mfu'])} (over the wall time)"
        )
    out.append("")
    return out


def _cpu_lines(r: dict[str, Any]) -> list[str]:
    """The CPU operator table of a trace with no GPU events, its steps and its energy."""
    c = r["cpu"]
    out = [
        f"CPU operators (no GPU events in the trace): {c['ops_total']:,} op kinds with a FLOP model, "
        f"{format_us(c['matrix_cpu_time_us'])} of CPU time, "
        + (f"{c['matrix_flops'] / 1e9:,.4g} GFLOP" if c["matrix_flops"] is not None else "FLOPs not available")
        + f", {fmt_count(c['matrix_gflops_per_s'])} GFLOP/s in them"
    ]
    st = r.get("steps") or {}
    if st.get("detected"):
        out += ["", f"Profiler steps: {st['detected']} ProfilerStep spans; summary = {st['selection']}"]
        rows = [
            [
                str(p["index"]),
                _short(p["name"], 24),
                format_us(p["wall_us"]),
                format_us(p["cpu_matrix_time_us"]),
                fmt_count(p["matrix_flops"] / 1e9) if p["matrix_flops"] is not None else "n/a",
                fmt_count(p["gflops_per_s_in_ops"]),
                fmt_count(p["gflops_per_s_over_wall"]),
            ]
            for p in st["per_step"]
        ]
        out += _table(["#", "Step", "Wall", "Matrix ops", "GFLOP", "GFLOP/s in ops", "GFLOP/s over wall"], rows, left=(1,))
        sm = st.get("summary")
        if sm:
            out.append(
                f"Per step (mean of {sm['count']}): wall {format_us(sm['wall_us'])} (min {format_us(sm['wall_us_min'])}, max "
                f"{format_us(sm['wall_us_max'])}), matrix ops {format_us(sm['cpu_matrix_time_us'])}, "
                + (f"{sm['matrix_flops'] / 1e9:,.4g} GFLOP, " if sm["matrix_flops"] is not None else "")
                + f"{fmt_count(sm['gflops_per_s_over_wall'])} GFLOP/s over the wall time"
            )
    power = r.get("power")
    with_energy = bool(power and power.get("available", True))
    heads = ["Category", "Calls", "CPU time", "GFLOP", "GFLOP/s"] + (["Energy J", "GFLOP/J"] if with_energy else [])
    rows = []
    for cat in MATRIX_CATEGORIES:
        e = c["by_category"][cat]
        if not e["count"]:
            continue
        row = [
            cat,
            f"{e['count']:,}",
            format_us(e["cpu_time_us"]),
            fmt_count((e["flops"] or 0) / 1e9) if e["flops"] is not None else "n/a",
            fmt_count(e["gflops_per_s"]),
        ]
        if with_energy:
            row += [fmt_count(e.get("energy_j")), fmt_count(e.get("gflops_per_j"))]
        rows.append(row)
    out += [""] + _table(heads, rows)
    if c["ops"]:
        rows = [
            [
                _short(o["name"], 48),
                _short(o["shapes"] or "", 40),
                o["dtype"] or "",
                f"{o['count']:,}",
                format_us(o["cpu_time_us"]),
                fmt_count(o["flops"] / 1e9) if o["flops"] is not None else "n/a",
                fmt_count(o["gflops_per_s"]),
            ]
            for o in c["ops"]
        ]
        out += [""] + _table(
            ["Top CPU ops (by time)", "Shape", "dtype", "Calls", "CPU time", "GFLOP", "GFLOP/s"], rows, left=(0, 1, 2)
        )
        if c["ops_total"] > len(c["ops"]):
            out.append(f"({c['ops_total'] - len(c['ops'])} more ops; --top N shows more)")
    if power:
        if not with_energy:
            out += ["", f"Energy: not attributed: {power['missing']}"]
        else:
            out += _energy_lines(
                power,
                f"CPU package, {power['energy_method']}",
                f"of which outside the matrix ops {fmt_count(power['idle_j'])} J",
            )
    return out + _warning_lines(r)


# ---- `footprint kernels diff` -------------------------------------------------------------------------------
def signed(v: float | None, fmt: Any) -> str:
    if v is None:
        return "n/a"
    return ("+" if v > 0 else "-" if v < 0 else "") + fmt(abs(v))


def _rel(f: dict[str, Any]) -> str:
    r = f.get("relative")
    return "n/a" if r is None else f"{r:+.1%}"


def gflop(v: float | None) -> str:
    return "n/a" if v is None else fmt_count(v / 1e9)


def diff_cells(f: dict[str, Any], fmt: Any) -> list[str]:
    """A, B, B - A and (B - A) / A of one compared figure."""
    return [
        fmt(f["a"]) if f["a"] is not None else "n/a",
        fmt(f["b"]) if f["b"] is not None else "n/a",
        signed(f["delta"], fmt),
        _rel(f),
    ]


TOTAL_ROWS = (
    ("step_time_us", "Step time", format_us),
    ("busy_time_us", "GPU busy (CPU: matrix ops)", format_us),
    ("matrix_flops", "Matrix GFLOP", gflop),
    ("matrix_tflops_per_s", "Matrix TFLOP/s", fmt_count),
    ("mfu", "MFU", lambda v: f"{100 * v:.2f} %"),
    ("energy_j", "Energy J (attributed)", fmt_count),
)


def render_diff(d: dict[str, Any]) -> str:
    """The text of `footprint kernels diff`: totals, kernel classes, the ops that changed most, the footprint."""
    a, b = d["a"], d["b"]
    out = [
        f"A: {a['source']} ({a['device'] or 'unknown device'})",
        f"B: {b['source']} ({b['device'] or 'unknown device'})",
        f"Basis: {d['basis']}; figures are B - A" + ("; launchless GPU events counted" if d["include_unlinked"] else ""),
        "",
    ]
    rows = [[label, *diff_cells(d["totals"][k], fmt)] for k, label, fmt in TOTAL_ROWS]
    out += _table(["", "A", "B", "B - A", "change"], rows)
    rows = []
    for c, e in d["by_category"].items():
        if not (e["time_us"]["a"] or e["time_us"]["b"]):
            continue
        t, f = e["time_us"], e["flops"]
        rows.append(
            [c, *diff_cells(t, format_us), signed(f["delta"], gflop), signed(e["tflops_per_s"]["delta"], fmt_count)]
            + [signed(e["pct_of_peak"]["delta"], lambda v: f"{v:.1f}"), signed(e["energy_j"]["delta"], fmt_count)]
        )
    heads = ["Kernel class", "Time A", "Time B", "B - A", "change", "GFLOP B-A", "TFLOP/s B-A", "% peak B-A", "J B-A"]
    out += [""] + _table(heads, rows)
    if d["ops"]:
        rows = [
            [_short(o["name"], 44), _short(o["shapes"] or "", 30), o["in"], *diff_cells(o["time_us"], format_us)]
            + [signed(o["tflops_per_s"]["delta"], fmt_count)]
            for o in d["ops"]
        ]
        out += [""] + _table(
            ["Ops (largest time change)", "Shape", "in", "Time A", "Time B", "B - A", "change", "TFLOP/s B-A"],
            rows,
            left=(0, 1, 2),
        )
        if d["ops_total"] > len(d["ops"]):
            out.append(f"({d['ops_total'] - len(d['ops'])} more ops; --top N shows more)")
    out += _footprint_lines(d.get("footprint"))
    return "\n".join(out + _warning_lines(d)) + "\n"


def _footprint_lines(fp: dict[str, Any] | None) -> list[str]:
    if not fp:
        return ["", "Footprint: not computed (give --train-steps N [--gpus N --gpu NAME] or --scenario FILE)"]
    out = ["", f"Footprint of a training run ({fp['size']}, {fp['gpu']}; {fp['method']}):"]
    rows = [
        ["GPU-hours", "h", *diff_cells(fp["gpu_hours"], fmt_count)],
        ["IT energy", "kWh", *diff_cells(fp["energy_kwh"], fmt_count)],
    ]
    rows += [[c["name"], c["unit"], *diff_cells(c, fmt_count)] for c in fp["categories"].values()]
    return out + _table(["", "Unit", "A", "B", "B - A", "change"], rows, left=(0, 1))
