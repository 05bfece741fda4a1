"""Report figures as SVG text (matplotlib, Agg backend): inline in HTML, files beside Markdown.

Each function takes plain data from an Assessment (or a run directory) and returns one SVG string,
so a report is one self-contained file with no network needed to view it. Colours come from
`footprint.reports.palette`, the dashboard's too: a stage or a component has one colour everywhere.
"""

from __future__ import annotations

import io
import textwrap
from typing import TYPE_CHECKING, Any

from footprint.reports import palette

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.assessment import Assessment

MAX_DEVICE_PANELS = 16  # power panels in one figure; a bigger run shows its first 16 devices and says so


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "svg.fonttype": "none", "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _plt().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog so it can be inlined


def stage_matrix(a: Assessment) -> str:
    """Share of each life-cycle stage per category ("which stage dominates"), n/a hatched."""
    from footprint.lca import categories as cat

    plt = _plt()
    stages = cat.stages()
    cats = list(cat.categories())
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    data = [[a.impacts[c.key].share(s) for s in stages] for c in cats]
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v is None:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", color=palette.NOT_AVAILABLE))
                label = "not\nmodelled" if stages[j] in a.impacts[cats[i].key].not_modelled else "n/a"
                ax.text(j, i, label, ha="center", va="center", color=palette.MUTED, fontsize=7 if "\n" in label else None)
            else:
                alpha = 0.15 + 0.85 * max(min(v, 1.0), 0.0)
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=palette.stage(stages[j]), alpha=alpha))
                ax.text(j, i, f"{v:.0%}", ha="center", va="center", color="black" if v < 0.6 else "white")
    ax.set_xlim(-0.5, len(stages) - 0.5)
    ax.set_ylim(len(cats) - 0.5, -0.5)
    ax.set_xticks(range(len(stages)), [palette.label(s) for s in stages])
    ax.set_yticks(range(len(cats)), [c.name for c in cats])
    ax.tick_params(length=0)
    ax.set_title("Share of each life-cycle stage per impact category")
    return _svg(fig)


def components(a: Assessment) -> str:
    """Embodied impacts by component (use phase excluded), normalised per category."""
    from footprint.lca import categories as cat

    plt = _plt()
    cats = list(cat.categories())
    comps = [c for c in cat.components() if any((a.impacts[k.key].by_component.get(c) or 0) > 0 for k in cats)]
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    left = [0.0] * len(cats)
    for comp in comps:
        vals = []
        for c in cats:
            bc = a.impacts[c.key].by_component
            emb = sum(v for k, v in bc.items() if k not in cat.USE_COMPONENTS and v is not None and v > 0)
            vals.append((bc.get(comp) or 0) / emb if emb else 0)
        ax.barh(range(len(cats)), vals, left=left, color=palette.component(comp), label=palette.label(comp))
        left = [x + v for x, v in zip(left, vals, strict=True)]
    ax.set_yticks(range(len(cats)), [c.name for c in cats])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x:.0%}"))
    ax.legend(ncol=3, fontsize=8, loc="upper center", bbox_to_anchor=(0.4, -0.06), frameon=False)
    ax.set_title("Embodied impacts by component (share of the embodied total)")
    return _svg(fig)


def materials(a: Assessment) -> str:
    """Hardware the run uses up (GPU lifetimes x each part's mass), and the elements of its board and chips where
    a composition is cited: a bar from low to high where sources give a range, a diamond where they give one value."""
    from footprint.lca.assessment import lifetimes as fmt_lifetimes
    from footprint.lca.assessment import plain

    plt = _plt()
    m = a.materials
    life = m["gpu_lifetimes"]
    parts = {k: v * life for k, v in m["components_kg"].items() if v}
    elements = {k: v for k, v in ((m.get("elements_estimate") or {}).get("elements") or {}).items() if v.get("high_kg")}
    fig, axes = plt.subplots(
        1, 2, figsize=(9, 3.6), width_ratios=[1, 1.3] if elements else [1, 0.01], layout="constrained", squeeze=True
    )
    ax = axes[0]
    names = list(parts)
    ax.barh(range(len(names)), [parts[k] for k in names], color=[palette.component(k) for k in names])
    ax.set_yticks(range(len(names)), [palette.label(k) for k in names])
    ax.invert_yaxis()
    ax.set_xlabel("kg")
    title = f"Hardware consumed: {plain(m['mass_consumed_kg'])} kg\n({fmt_lifetimes(life)} GPU lifetimes x card parts)"
    ax.set_title(title, loc="left", fontsize=9)
    ax = axes[1]
    if not elements:
        ax.axis("off")
        return _svg(fig)
    order = sorted(elements, key=lambda e: -elements[e]["high_kg"])
    lows = [elements[e]["low_kg"] for e in order]
    highs = [elements[e]["high_kg"] for e in order]
    spans = [i for i, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if hi > lo]
    points = [i for i, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if hi <= lo]
    ax.hlines(
        spans, [lows[i] for i in spans], [highs[i] for i in spans], color=palette.MATERIAL, lw=6, label="range across sources"
    )
    if points:
        ax.plot([lows[i] for i in points], points, "D", color=palette.MATERIAL, ms=5, label="one source value")
    ax.set_xscale("log")
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlabel("kg in the hardware consumed, log scale")
    ax.set_title("Elements in board and chips (estimate, generic PCB)", loc="left", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return _svg(fig)


def power_timeline(timeline: Any, labels: dict[tuple[Any, str], str] | None = None) -> str | None:
    """Power per device over the run, one panel per device (two GPUs drawing the same power stay two lines):
    the min-max band of each time bucket and its mean. ``timeline`` is an Arrow table from
    ``runrecord.power_timeline`` (downsampled in bounded memory, peaks kept); ``labels`` maps (host, uuid) to a
    readable name (``runrecord.device_labels``)."""
    import numpy as np

    from footprint.tracking.runrecord import DEVICE_ORDER, device_label

    if timeline is None or timeline.num_rows == 0:
        return None
    cols = {c: timeline[c].to_numpy(zero_copy_only=False) for c in ("t_s", "power_w", "power_min_w", "power_max_w")}
    mean, lo, hi = (np.asarray(cols[c], dtype=float) for c in ("power_w", "power_min_w", "power_max_w"))
    if not np.isfinite(mean).any():
        return None
    comps, uuids = timeline["component"].to_pylist(), timeline["uuid"].to_pylist()
    hosts = timeline["host"].to_pylist() if "host" in timeline.column_names else [None] * len(uuids)
    keys = list(zip(hosts, uuids, comps, strict=True))
    devices = sorted(set(keys), key=lambda k: (DEVICE_ORDER.get(str(k[2]), 9), str(k[0]), _label(k, labels, device_label)))
    devices = [d for d in devices if np.isfinite(mean[np.array([k == d for k in keys])]).any()]
    shown = devices[:MAX_DEVICE_PANELS]
    plt = _plt()
    t = np.asarray(cols["t_s"], dtype=float)
    span = float(np.nanmax(t))
    scale, unit = (3600.0, "h") if span > 3 * 3600 else (60.0, "min") if span > 3 * 60 else (1.0, "s")
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 0.4 + 1.05 * len(shown)), sharex=True, squeeze=False)
    top = float(np.nanmax(hi)) if np.isfinite(hi).any() else float(np.nanmax(mean))
    for n, (key, ax) in enumerate(zip(shown, axes[:, 0], strict=True)):
        sel = np.array([k == key for k in keys])
        colour = palette.series(n)
        x = t[sel] / scale
        if np.nanmax(hi[sel] - lo[sel]) > 0:
            ax.fill_between(x, lo[sel], hi[sel], color=colour, alpha=0.2, lw=0, step="mid")
        ax.plot(x, mean[sel], lw=1, color=colour)
        ax.set_ylim(0, top * 1.1 if top > 0 else 1)
        ax.set_ylabel("W", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.set_title(_label(key, labels, device_label), loc="left", fontsize=8, pad=2)
    axes[-1, 0].set_xlabel(f"time since start ({unit})")
    more = f"; first {len(shown)} of {len(devices)} devices" if len(devices) > len(shown) else ""
    fig.suptitle(f"Power per device (line: mean; band: min to max of each time bucket{more})", fontsize=9, x=0.02, ha="left")
    fig.tight_layout()
    return _svg(fig)


def _label(key: tuple[Any, str, Any], labels: dict[tuple[Any, str], str] | None, fallback: Any) -> str:
    host, uuid, comp = key
    return (labels or {}).get((host, uuid)) or fallback({"component": comp, "uuid": uuid, "host": host})


def mfu_over_steps(values: list[float]) -> str | None:
    if not values:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.plot(range(1, len(values) + 1), [v * 100 for v in values], lw=1, color=palette.series(0))
    ax.set_xlabel("step (last 200)")
    ax.set_ylabel("MFU (%)")
    ax.set_title("MFU per step (steady state)")
    return _svg(fig)


def kernel_categories(analysis: dict[str, Any]) -> str | None:
    cats = {k: v for k, v in (analysis.get("by_category") or {}).items() if v and v.get("kernel_time_us")}
    if not cats:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    names = sorted(cats, key=lambda k: -cats[k]["kernel_time_us"])
    ax.bar(names, [cats[k]["kernel_time_us"] / 1000 for k in names], color=palette.series(0))
    for i, k in enumerate(names):
        pct = cats[k].get("pct_of_peak")
        if pct is not None:
            ax.text(i, cats[k]["kernel_time_us"] / 1000, f"{pct:.0f}% of peak", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("kernel time (ms)")
    ax.set_title("GPU time by kernel category")
    return _svg(fig)


def compare_headline(assessments: list[Assessment]) -> str:
    """The headline categories side by side on a log scale (a 176B run stays visible beside GPT-4), with each
    total written at the end of its bar and the Monte Carlo low-high as the whisker; full names, wrapped."""
    from footprint.lca.assessment import num
    from footprint.lca.categories import HEADLINE, by_key
    from footprint.lca.units import display_unit

    plt = _plt()
    names = ["\n".join(textwrap.wrap(x.workload.name, 26)) for x in assessments]
    n = len(assessments)
    fig, axes = plt.subplots(1, len(HEADLINE), figsize=(10, 0.9 + 0.55 * n * max(1, max(s.count("\n") + 1 for s in names) / 1.6)))
    for j, (ax, key) in enumerate(zip(axes, HEADLINE, strict=True)):
        vals = [x.impacts[key].total for x in assessments]
        los = [x.impacts[key].low for x in assessments]
        his = [x.impacts[key].high for x in assessments]
        positive = [v for v in [*vals, *los] if v and v > 0]
        floor = min(positive) / 3 if positive else 1e-12
        err = [[max(v - lo, 0) for v, lo in zip(vals, los, strict=True)], [max(h - v, 0) for v, h in zip(vals, his, strict=True)]]
        ax.barh(range(n), vals, xerr=err, left=0, color=[palette.series(i) for i in range(n)], capsize=3, ecolor=palette.WHISKER)
        ax.set_xscale("log")
        ax.set_xlim(left=floor, right=max(his + vals) * 8)
        for i, v in enumerate(vals):
            ax.text(max(his[i], v) * 1.15, i, num(v), va="center", fontsize=7)
        ax.set_yticks(range(n), names if j == 0 else [""] * n)
        ax.invert_yaxis()
        unit = display_unit(by_key(key).unit)
        ax.set_title(f"{by_key(key).name}\n({unit}, log scale)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    return _svg(fig)


def single_score(a: Assessment) -> str | None:
    """Which categories weigh most: each category's share of the EF 3.1 single score, largest first."""
    if not a.normalised:
        return None
    plt = _plt()
    keys = sorted(a.normalised, key=lambda k: a.normalised[k]["points"], reverse=True)
    shares = [100 * a.normalised[k]["share_of_single_score"] for k in keys]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ax.barh(range(len(keys)), shares, color=palette.series(0))
    for i, k in enumerate(keys):
        ax.text(shares[i], i, f" {a.normalised[k]['person_equivalents']:.3g} person-eq.", va="center", fontsize=8)
    ax.set_yticks(range(len(keys)), [a.impacts[k].name for k in keys])
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_xlabel("share of the EF 3.1 single score (%)")
    ax.set_title(f"Single score {a.single_score['value']:.3g} Pt: which categories matter (weighting is a value choice)")
    return _svg(fig)
