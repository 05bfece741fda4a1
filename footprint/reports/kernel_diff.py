"""The HTML page of `footprint kernels diff --format html`: two traces compared, with figures, down to the footprint.

Takes `footprint.kernels.diff.diff_traces`' result (plain data) and writes one self-contained document:
the totals, kernel classes (with a bar chart of A's and B's time per class), the ops that changed most
(with a chart of their time change) and the footprint of the stated training run. Numbers are formatted
as the text table formats them (`footprint.kernels.render`), so the page and the CLI say the same.
"""

from __future__ import annotations

import html
from typing import Any

from footprint import __version__
from footprint.kernels.render import TOTAL_ROWS, diff_cells, fmt_count, format_us, gflop, signed
from footprint.reports import palette
from footprint.reports.figures import _plt, _svg

MAX_OPS_PLOTTED = 12
MAX_SHAPE = 60  # characters of an op's shapes in the table (a fused graph can list hundreds of tensors)


def class_times(d: dict[str, Any]) -> str | None:
    """A's and B's kernel time per class, side by side (ms)."""
    cats = [(c, e["time_us"]) for c, e in d["by_category"].items() if e["time_us"]["a"] or e["time_us"]["b"]]
    if not cats:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(cats) + 1.2))
    y = range(len(cats))
    for k, (side, label) in enumerate((("a", "A"), ("b", "B"))):
        ax.barh(
            [i + (-0.2 if k == 0 else 0.2) for i in y],  # A above B (the axis is inverted)
            [(t[side] or 0.0) / 1000 for _, t in cats],
            height=0.4,
            color=palette.series(k),
            label=f"{label}: {d[side]['source']}",
        )
    ax.set_yticks(list(y), [c for c, _ in cats])
    ax.invert_yaxis()
    ax.set_xlabel("kernel time (ms, " + ("per step" if d["basis"].startswith("per step") else "whole trace") + ")")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title("Time by kernel class")
    return _svg(fig)


def op_changes(d: dict[str, Any]) -> str | None:
    """The time change (B - A) of the ops that changed most: faster in green, slower in red."""
    ops = [o for o in d["ops"][:MAX_OPS_PLOTTED] if o["time_us"]["delta"]]
    if not ops:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(ops) + 1.2))
    deltas = [o["time_us"]["delta"] / 1000 for o in ops]
    names = [_cut(o["name"], 40) + (" " + _cut(o["shapes"], 24) if o["shapes"] else "") for o in ops]
    ax.barh(range(len(ops)), deltas, color=[palette.GREEN if v < 0 else palette.RED for v in deltas])
    ax.set_yticks(range(len(ops)), names, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color=palette.MUTED, linewidth=0.8)
    ax.set_xlabel("kernel time change, B - A (ms)")
    ax.set_title("Ops that changed most")
    return _svg(fig)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(svg: str | None) -> str:
    return f"<figure>{svg}</figure>" if svg else ""


def to_html(d: dict[str, Any]) -> str:
    """One self-contained HTML document of a trace diff."""
    from footprint.reports.report import CSS

    a, b = d["a"], d["b"]
    parts = [
        f"<p class='sub'>A: {html.escape(a['source'])} ({html.escape(a['device'] or 'unknown device')}); B: "
        f"{html.escape(b['source'])} ({html.escape(b['device'] or 'unknown device')}). Basis: {html.escape(d['basis'])}. "
        f"footprint {__version__}.</p>",
        "<h2>Totals</h2>",
        _table(["", "A", "B", "B - A", "change"], [[label, *diff_cells(d["totals"][k], fmt)] for k, label, fmt in TOTAL_ROWS]),
        "<h2>Kernel classes</h2>",
        _figure(class_times(d)),
        _table(
            [
                "Kernel class",
                "Time A",
                "Time B",
                "B - A",
                "change",
                "GFLOP B - A",
                "TFLOP/s A",
                "TFLOP/s B",
                "% peak A",
                "% peak B",
                "J B - A",
            ],
            [
                [
                    c,
                    *diff_cells(e["time_us"], format_us),
                    signed(e["flops"]["delta"], gflop),
                    fmt_count(e["tflops_per_s"]["a"]),
                    fmt_count(e["tflops_per_s"]["b"]),
                    fmt_count(e["pct_of_peak"]["a"]),
                    fmt_count(e["pct_of_peak"]["b"]),
                    signed(e["energy_j"]["delta"], fmt_count),
                ]
                for c, e in d["by_category"].items()
                if e["time_us"]["a"] or e["time_us"]["b"]
            ],
        ),
        "<h2>Ops that changed most</h2>",
        _figure(op_changes(d)),
        _table(
            ["Op", "Shape", "in", "Time A", "Time B", "B - A", "change", "TFLOP/s A", "TFLOP/s B"],
            [
                [o["name"], _cut(o["shapes"] or "", MAX_SHAPE), o["in"], *diff_cells(o["time_us"], format_us)]
                + [fmt_count(o["tflops_per_s"]["a"]), fmt_count(o["tflops_per_s"]["b"])]
                for o in d["ops"]
            ],
        ),
    ]
    parts += _footprint_html(d.get("footprint"))
    if d["warnings"]:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in d["warnings"]) + "</ul>")
    title = f"{a['source']} vs {b['source']}"
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)} — footprint kernels "
        f"diff</title><style>{CSS}</style></head><body><h1>Trace diff: {html.escape(title)}</h1>{''.join(parts)}</body></html>\n"
    )


def _footprint_html(fp: dict[str, Any] | None) -> list[str]:
    if not fp:
        return ["<h2>Footprint</h2><p>Not computed: give --train-steps N (with --gpus, --gpu) or --scenario FILE.</p>"]
    rows = [
        ["GPU-hours", "h", *diff_cells(fp["gpu_hours"], fmt_count)],
        ["IT energy", "kWh", *diff_cells(fp["energy_kwh"], fmt_count)],
    ]
    rows += [[c["name"], c["unit"], *diff_cells(c, fmt_count)] for c in fp["categories"].values()]
    return [
        f"<h2>Footprint of a training run</h2><p>{html.escape(fp['size'])} on {html.escape(fp['gpu'])}: "
        f"{html.escape(fp['method'])}.</p>",
        _table(["", "Unit", "A", "B", "B - A", "change"], rows),
    ]
