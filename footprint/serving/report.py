"""`footprint serving report`: the serving record as a table, CSV, JSON and an HTML page with plots.

The numbers come from `assess` on the record's attribution tables; the closure line (metered = models +
unattributed) and the counter-health table are shown with every format.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from typing import Any

import numpy as np
import pandas as pd

from footprint.escaping import csv_cell
from footprint.lca import categories as cat
from footprint.serving.assess import BOUNDARIES, Site, assess
from footprint.serving.attribution import Attribution


def build(meta: dict[str, Any], a: Attribution, site: Site, boundary: str = "+pue") -> dict[str, Any]:
    """The report's numbers: every model with its 16 categories at ``boundary`` (and all boundaries), the residual."""
    from footprint.serving.store import window_origin

    r = assess(a, site, origin_s=window_origin(meta))
    for m in r["models"]:
        m["categories"] = {c.key: m["impacts"][boundary][c.key] for c in cat.categories()}
        m["water_l"] = m["impacts"][boundary]["water_l"]
    metered = float(a.gpus["energy_j"].sum())
    models_j = sum(m["gpu_j"] for m in r["models"])
    un = r["unattributed"]
    return {
        "source": meta.get("source"),
        "start": meta.get("start"),
        "end": meta.get("end"),
        "days": (float(meta.get("end_s", 0)) - float(meta.get("start_s", 0))) / 86400,
        "window_s": meta.get("window_s"),
        "partial_windows": meta.get("partial_windows", {}),  # window -> its real seconds (a watch's first one)
        "boundary": boundary,
        "boundaries": list(BOUNDARIES),
        "site": site.__dict__,
        "metered_gpu_j": metered,
        "closure": {
            "models_gpu_j": models_j,
            "unattributed_gpu_j": un["gpu_j"],
            "difference_j": metered - models_j - un["gpu_j"],
        },
        "models": r["models"],
        "unattributed": un,
        "health": a.health.to_dict("records"),
        "notes": list(a.notes) + list(meta.get("notes_extra", [])) + ([r["hourly_note"]] if r.get("hourly_note") else []),
        "method": {
            "energy": "GPU energy per window from the DCGM counter (PromQL increase(), or the power gauge's mean x the window); "
            "repeated series of one GPU (MIG instances, pods sharing it) reduced by max",
            "attribution": "active energy = energy - idle power x idle time, split between a GPU's models by their engines' busy "
            "seconds, and within a model between prefill and decode by their seconds; the rest is the unattributed residual",
            "impacts": "footprint.lca engine per GPU model and boundary (footprint.lca.batch); embodied = GPU time / lifetime",
        },
    }


def load(
    record: Any,
    grid: str | None = None,
    pue: float | None = None,
    lifetime: str | None = None,
    boundary: str = "+pue",
    training: Any = None,
    model: str | None = None,
    horizon_days: float = 365.0,
    hourly: str | None = None,
) -> tuple[dict[str, Any], Attribution]:
    """A record's report (with ``training``: a model's life too) and its attribution tables (for the plots);
    ``hourly``: an hourly carbon-intensity CSV matched to each model's windows (climate change only)."""
    from footprint.serving import store

    meta, a = store.read(record)
    rep = build(meta, a, store.site_of(meta, grid, pue, lifetime, hourly), boundary)
    if training is not None:
        from footprint.serving.life import life, training_workload

        rep["life"] = life(rep, training_workload(training), model, horizon_days)
    return finite(rep), a


def serving_report(
    record: Any,
    grid: str | None = None,
    pue: float | None = None,
    boundary: str = "+pue",
    training: Any = None,
    model: str | None = None,
    hourly: str | None = None,
) -> dict[str, Any]:
    """The numbers of `footprint serving report RECORD --format json` (with ``training``: a model's life too;
    ``hourly``: an hourly carbon-intensity CSV, as --carbon-intensity-hourly): a dict, whose repr in a notebook is the
    headline and whose HTML view is the models' table."""
    return ServingReport(load(record, grid, pue, None, boundary, training, model, hourly=hourly)[0])


class ServingReport(dict):
    """`serving_report`'s dict, with a short `repr` and a notebook view (it is the JSON's dict in every other way)."""

    def __repr__(self) -> str:
        from footprint.lca.notebook import short

        return short([*summary_lines(self), "  Every number: dict(report), or footprint serving report -o serving.html"])

    def _repr_html_(self) -> str:
        from footprint.lca.notebook import html_table, text_html

        return text_html("\n".join(summary_lines(self))) + html_table(*model_rows(self), "Per model")


def _f(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:,.0f}"


def _n(x: Any) -> str:
    """A count as the counters give it: whole, with thousands separators."""
    return _f(x) if not isinstance(x, int) else f"{x:,}"


def _cc(m: dict[str, Any], b: str, unit: str) -> Any:
    pu = m["per_unit"][b]
    v = pu.get(unit) if pu else None
    return v["climate_change"] * 1000 if v else None


def summary_lines(rep: dict[str, Any]) -> list[str]:
    """The window, the metered GPU energy and where it went, the site: the table's top and the notebook `repr`."""
    un, site = rep["unattributed"], rep["site"]
    return [
        f"Serving {rep['source']}: {rep['start']} - {rep['end']} ({rep['days']:.2f} days, {rep['window_s']:g} s windows)",
        f"  GPU energy metered: {rep['metered_gpu_j'] / 3.6e6:,.2f} kWh = models {rep['closure']['models_gpu_j'] / 3.6e6:,.2f} + "
        f"unattributed {un['gpu_j'] / 3.6e6:,.2f} (idle {un['gpu_idle_j'] / 3.6e6:,.2f}, "
        f"no model {un['gpu_unused_j'] / 3.6e6:,.2f})",
        f"  Site: grid {site['grid'] or 'world average'}, PUE {site['pue']:g}, GPU lifetime {site['lifetime']}",
    ]


def model_rows(rep: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): one row per model, the climate figure per 1,000 requests at every boundary side by side."""
    short = {"accelerators": "accel", "+host": "+host", "+idle": "+idle", "+pue": "+PUE"}
    head = ["model", "engine", "GPU kWh", "tok in", "tok out", "requests", "J/tok out", "J/tok in"]
    head += [short[b] for b in BOUNDARIES] + ["g/Mtok out"]
    rows = []
    for m in rep["models"]:
        rows.append(
            [
                m["model"].split("/")[-1][:32],
                m["engine"] or "",
                _f(m["gpu_j"] / 3.6e6),
                _n(m["tokens_in"]),
                _n(m["tokens_out"]),
                _n(m["requests"]),
                _f(m["j_per_output_token"]),
                _f(m["j_per_input_token"]),
            ]
            + [_f(_cc(m, b, "per_1000_requests")) for b in BOUNDARIES]
            + [_f(_cc(m, rep["boundary"], "per_million_output_tokens"))]
        )
    return head, rows


def table(rep: dict[str, Any]) -> str:
    """The terminal view: one row per model, the climate figure at every boundary side by side."""
    un = rep["unattributed"]
    lines = [*summary_lines(rep), ""]
    head, rows = model_rows(rep)
    ucc = (un["impacts"] or {}).get("climate_change")
    rows.append(["(unattributed)", "", _f(un["gpu_j"] / 3.6e6), "", "", "", "", ""] + [""] * len(BOUNDARIES) + [""])
    lines.append(f"g CO2 eq per 1,000 requests at each boundary; g/Mtok out: per million output tokens at {rep['boundary']}")
    lines += _grid(head, rows)
    lines.append("")
    total = ", ".join(f"{m['model'].split('/')[-1]} {_f(m['categories']['climate_change'])}" for m in rep["models"])
    lines.append(f"Climate change at {rep['boundary']} (kg CO2 eq): {total}; unattributed {_f(ucc)}")
    h = [r for r in rep["health"] if r["gaps"] or r["resets"]]
    if h:
        lines.append("Counter health (gaps and resets widen the energy range; lost energy is estimated, not added):")
        lines += _grid(
            ["counter", "where", "which", "windows", "gaps", "resets", "lost kWh (est.)", "at most kWh"],
            [
                [
                    r["counter"],
                    r["where"],
                    str(r["which"])[:40],
                    str(r["windows"]),
                    str(r["gaps"]),
                    str(r["resets"]),
                    _f(r["lost_j"] / 3.6e6),
                    _f((r.get("lost_hi_j") if r.get("lost_hi_j") is not None else r["lost_j"]) / 3.6e6),
                ]
                for r in h
            ],
        )
    for m in rep["models"]:
        for fl in m["flags"]:
            lines.append(f"note: {m['model']}: {fl}")
    lines += [f"note: {n}" for n in rep["notes"]]
    if rep.get("life"):
        lines += life_lines(rep["life"])
    return "\n".join(lines) + "\n"


def life_lines(lf: dict[str, Any]) -> list[str]:
    t = lf["training"]["impacts"]["climate_change"]
    pr = (lf["marginal_per_request"] or {}).get("climate_change")
    share = lf["inference_share_of_life"]["climate_change"]
    return [
        "",
        f"A model's life: {lf['model']} (training: {lf['training']['name']}, {lf['training']['method']})",
        f"  training: {_f(t)} kg CO2 eq  |  serving: {_f(lf['serving_per_day']['climate_change'])} kg CO2 eq/day "
        "at the measured traffic"
        f"  |  marginal per request: {_f(pr * 1000 if pr is not None else None)} g CO2 eq",
        f"  inference share of the life cycle over {lf['horizon_days']:g} days of serving: "
        f"{_f(share * 100 if share is not None else None)} %"
        f"  |  serving overtakes training after {_f(lf['overtakes_after_days'])} days ({lf['overtakes_on'] or 'n/a'}, projected)",
    ]


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = lambda r: "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r))  # noqa: E731
    return [fmt(head), fmt(["-" * x for x in w]), *(fmt(r) for r in rows)]


def to_json(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=1, default=_clean, allow_nan=False) + "\n"


def _clean(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def finite(obj: Any) -> Any:
    """NaN and inf become None (JSON null: "not available"), everywhere in a structure."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def to_csv(rep: dict[str, Any]) -> str:
    """One row per model and boundary: energy, tokens, every category total, per request and per million tokens."""
    keys = [c.key for c in cat.categories()] + ["primary_energy", "water_l"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "model",
            "engine",
            "boundary",
            "gpu_j",
            "host_j",
            "idle_reserve_j",
            "tokens_in",
            "tokens_out",
            "requests",
            *keys,
            "climate_per_request",
            "climate_per_million_input_tokens",
            "climate_per_million_output_tokens",
        ]
    )
    for m in rep["models"]:
        for b in BOUNDARIES:
            v = m["impacts"][b]
            per = m["per_unit"][b]
            w.writerow(
                [
                    csv_cell(m["model"]),  # names come from the servers' labels: never a spreadsheet formula
                    csv_cell(m["engine"]),
                    b,
                    m["gpu_j"],
                    m["host_j"],
                    m["idle_reserve_j"],
                    m["tokens_in"],
                    m["tokens_out"],
                    m["requests"],
                    *(v.get(k) for k in keys),
                ]
                + [
                    (per[u] or {}).get("climate_change") if per[u] else None
                    for u in ("per_request", "per_million_input_tokens", "per_million_output_tokens")
                ]
            )
    un = rep["unattributed"]
    w.writerow(
        ["(unattributed)", "", "+pue", un["gpu_j"], un["host_j"], "", "", "", "", *((un["impacts"] or {}).get(k) for k in keys)]
    )
    return buf.getvalue().replace("None", "")


# ---- HTML ------------------------------------------------------------------------------------------------


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    s = buf.getvalue()
    return s[s.index("<svg") :]


def series(models_w: pd.DataFrame, window_s: float) -> pd.DataFrame:
    """Per model and window: hours from the start, J per output token (decode energy; all tokens' where the engine
    has no time split) and output tokens per second over the window's real length (a watch's first is partial)."""
    split = models_w["decode_j"].notna()
    e = models_w["decode_j"].where(split, models_w["active_j"])
    tok = models_w["tokens_out"].where(split, models_w["tokens_out"] + models_w["tokens_in"].fillna(0))
    return pd.DataFrame(
        {
            "model": models_w["model"].astype(str),
            "hours": models_w["window"].to_numpy(float) * window_s / 3600,
            "j_per_token": e / tok.where(tok > 0),
            "tokens_per_s": models_w["tokens_out"] / models_w["seconds"],
        }
    )


def plots(a: Attribution, window_s: float, lf: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(title, svg): energy per output token over time, traffic, and cumulative training vs serving."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    fig, ax = plt.subplots(figsize=(8, 3))
    fig2, ax2 = plt.subplots(figsize=(8, 3))
    for model, d in series(a.models_w, window_s).groupby("model"):
        ax.plot(d["hours"], d["j_per_token"].to_numpy(float), lw=1, label=model.split("/")[-1])
        ax2.plot(d["hours"], d["tokens_per_s"].to_numpy(float), lw=1, label=model.split("/")[-1])
    ax.set(xlabel="hours from the start", ylabel="J per output token")
    ax2.set(xlabel="hours from the start", ylabel="output tokens / s")
    for x in (ax, ax2):
        x.legend(fontsize=7, loc="upper right")
    out += [
        ("Energy per output token over time (decode energy; all tokens where the engine has no time split)", _svg(fig)),
        ("Traffic", _svg(fig2)),
    ]
    if lf:
        from footprint.serving.life import cumulative

        xs, ys, train = cumulative(lf)
        fig3, ax3 = plt.subplots(figsize=(8, 3))
        ax3.plot(xs, ys, label="serving (cumulative, measured rate)")
        ax3.axhline(train, color="k", ls="--", label="training")
        ax3.set(xlabel="days of serving", ylabel="kg CO2 eq")
        ax3.legend(fontsize=7)
        out.append(("Cumulative training vs serving (climate change)", _svg(fig3)))
    return out


def to_html(rep: dict[str, Any], a: Attribution) -> str:
    e = html.escape
    cats = cat.categories()
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>footprint serving report</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}"
        "</style></head><body>",
        f"<h1>Serving footprint</h1><p>{e(str(rep['source']))}: {e(rep['start'])} - {e(rep['end'])}; boundary shown in the "
        f"category table: <b>{e(rep['boundary'])}</b>; grid {e(str(rep['site']['grid'] or 'world average'))}, "
        f"PUE {rep['site']['pue']:g}</p>",
        f"<pre>{e(table(rep))}</pre>",
        "<h2>All 16 categories per model</h2><table><tr><th>category</th>"
        + "".join(f"<th>{e(m['model'])}</th>" for m in rep["models"])
        + "<th>(unattributed)</th></tr>",
    ]
    un = rep["unattributed"]["impacts"] or {}
    for c in cats:
        parts.append(
            f"<tr><td>{e(c.name)} [{e(c.unit)}]</td>"
            + "".join(f"<td>{_f(m['categories'][c.key])}</td>" for m in rep["models"])
            + f"<td>{_f(un.get(c.key))}</td></tr>"
        )
    parts.append(
        "<tr><td>water [L]</td>"
        + "".join(f"<td>{_f(m['water_l'])}</td>" for m in rep["models"])
        + f"<td>{_f(un.get('water_l'))}</td></tr></table>"
    )
    for title, svg in plots(a, float(rep["window_s"]), rep.get("life")):
        parts.append(f"<h2>{e(title)}</h2>{svg}")
    parts.append("<h2>Method</h2><ul>" + "".join(f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in rep["method"].items()) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
