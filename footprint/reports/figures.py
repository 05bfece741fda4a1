"""Report figures as SVG text (matplotlib, Agg backend): inline in HTML, files beside Markdown.

Each function takes plain data from an Assessment (or a run directory) and returns one SVG string,
so a report is one self-contained file with no network needed to view it.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.assessment import Assessment

STAGE_COLORS = {"manufacturing": "#4C72B0", "transport": "#DD8452", "use": "#55A868", "end_of_life": "#8172B3"}
COMPONENT_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]


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
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", color="#bbbbbb"))
                ax.text(j, i, "n/a", ha="center", va="center", color="#777777")
            else:
                ax.add_patch(
                    plt.Rectangle(
                        (j - 0.5, i - 0.5), 1, 1, color=STAGE_COLORS[stages[j]], alpha=0.15 + 0.85 * max(min(v, 1.0), 0.0)
                    )
                )
                ax.text(j, i, f"{v:.0%}", ha="center", va="center", color="black" if v < 0.6 else "white")
    ax.set_xlim(-0.5, len(stages) - 0.5)
    ax.set_ylim(len(cats) - 0.5, -0.5)
    ax.set_xticks(range(len(stages)), [s.replace("_", " ") for s in stages])
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
    for n, comp in enumerate(comps):
        vals = []
        for c in cats:
            bc = a.impacts[c.key].by_component
            emb = sum(v for k, v in bc.items() if k not in cat.USE_COMPONENTS and v is not None and v > 0)
            vals.append((bc.get(comp) or 0) / emb if emb else 0)
        ax.barh(
            range(len(cats)), vals, left=left, color=COMPONENT_COLORS[n % len(COMPONENT_COLORS)], label=comp.replace("_", " ")
        )
        left = [x + v for x, v in zip(left, vals, strict=True)]
    ax.set_yticks(range(len(cats)), [c.name for c in cats])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x:.0%}"))
    ax.legend(ncol=3, fontsize=8, loc="upper center", bbox_to_anchor=(0.4, -0.06), frameon=False)
    ax.set_title("Embodied impacts by component (share of the embodied total)")
    return _svg(fig)


def materials(a: Assessment) -> str:
    """Hardware mass consumed by component, and element ranges where a composition is cited."""
    plt = _plt()
    m = a.materials
    comps = {k: v * m["gpu_equivalents"] for k, v in m["components_kg"].items() if v}
    elements = (m.get("elements_estimate") or {}).get("elements", {})
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), gridspec_kw={"width_ratios": [1, 1.4]})
    axes[0].bar(list(comps), list(comps.values()), color=COMPONENT_COLORS[: len(comps)])
    axes[0].set_ylabel("kg")
    axes[0].set_title(f"Hardware mass, {m['gpu_equivalents']} GPU-equivalents")
    axes[0].tick_params(axis="x", labelrotation=20)
    if elements:
        names = list(elements)
        lows = [elements[e]["low_kg"] for e in names]
        highs = [elements[e]["high_kg"] for e in names]
        axes[1].bar(names, [h - lo for lo, h in zip(lows, highs, strict=True)], bottom=lows, color="#937860")
        axes[1].set_yscale("log")
        axes[1].set_title("Elements in board and chips: estimated range (generic PCB)")
        axes[1].set_ylabel("kg (log)")
    else:
        axes[1].axis("off")
        axes[1].text(0.5, 0.5, "no cited composition", ha="center")
    return _svg(fig)


def power_timeline(timeline: Any) -> str | None:
    """Power per device over the run: the min-max band of each time bucket and its mean
    (an Arrow table from ``runrecord.power_timeline``: downsampled in bounded memory, peaks kept)."""
    import numpy as np

    if timeline is None or timeline.num_rows == 0:
        return None
    cols = {c: timeline[c].to_numpy(zero_copy_only=False) for c in ("t_s", "power_w", "power_min_w", "power_max_w")}
    mean, lo, hi = (np.asarray(cols[c], dtype=float) for c in ("power_w", "power_min_w", "power_max_w"))
    if not np.isfinite(mean).any():
        return None
    devices = list(zip(timeline["component"].to_pylist(), timeline["uuid"].to_pylist(), strict=True))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3))
    t = np.asarray(cols["t_s"], dtype=float)
    span = float(np.nanmax(t))
    scale, unit = (3600.0, "h") if span > 3 * 3600 else (60.0, "min") if span > 3 * 60 else (1.0, "s")
    for n, key in enumerate(sorted(set(devices), key=lambda k: (str(k[0]), str(k[1])))):
        sel = np.array([d == key for d in devices])
        if not np.isfinite(mean[sel]).any():
            continue
        colour = COMPONENT_COLORS[n % len(COMPONENT_COLORS)]
        x = t[sel] / scale
        if np.nanmax(hi[sel] - lo[sel]) > 0:
            ax.fill_between(x, lo[sel], hi[sel], color=colour, alpha=0.2, lw=0, step="mid")
        ax.plot(x, mean[sel], lw=1, color=colour, label=f"{key[0]} {str(key[1])[:12]}")
    ax.set_xlabel(f"time since start ({unit})")
    ax.set_ylabel("W")
    ax.set_title("Power per device (line: mean; band: min to max of each time bucket)")
    ax.legend(fontsize=7, ncol=2, frameon=False)
    return _svg(fig)


def mfu_over_steps(values: list[float]) -> str | None:
    if not values:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.plot(range(1, len(values) + 1), [v * 100 for v in values], lw=1, color="#C44E52")
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
    ax.bar(names, [cats[k]["kernel_time_us"] / 1000 for k in names], color="#4C72B0")
    for i, k in enumerate(names):
        pct = cats[k].get("pct_of_peak")
        if pct is not None:
            ax.text(i, cats[k]["kernel_time_us"] / 1000, f"{pct:.0f}% of peak", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("kernel time (ms)")
    ax.set_title("GPU time by kernel category")
    return _svg(fig)


def compare_headline(assessments: list[Assessment]) -> str:
    from footprint.lca.categories import HEADLINE, by_key

    plt = _plt()
    fig, axes = plt.subplots(1, len(HEADLINE), figsize=(9, 3))
    for ax, key in zip(axes, HEADLINE, strict=True):
        names = [x.workload.name[:18] for x in assessments]
        vals = [x.impacts[key].total for x in assessments]
        err = [
            [v - x.impacts[key].low for v, x in zip(vals, assessments, strict=True)],
            [x.impacts[key].high - v for v, x in zip(vals, assessments, strict=True)],
        ]
        ax.bar(names, vals, yerr=err, color=COMPONENT_COLORS[: len(names)], capsize=3)
        ax.set_title(by_key(key).name, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    return _svg(fig)


def single_score(a: Assessment) -> str | None:
    """Which categories weigh most: each category's share of the EF 3.1 single score, largest first."""
    if not a.normalised:
        return None
    plt = _plt()
    keys = sorted(a.normalised, key=lambda k: a.normalised[k]["points"], reverse=True)
    shares = [100 * a.normalised[k]["share_of_single_score"] for k in keys]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ax.barh(range(len(keys)), shares, color="#4C72B0")
    for i, k in enumerate(keys):
        ax.text(shares[i], i, f" {a.normalised[k]['person_equivalents']:.3g} person-eq.", va="center", fontsize=8)
    ax.set_yticks(range(len(keys)), [a.impacts[k].name for k in keys])
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_xlabel("share of the EF 3.1 single score (%)")
    ax.set_title(f"Single score {a.single_score['value']:.3g} Pt: which categories matter (weighting is a value choice)")
    return _svg(fig)
