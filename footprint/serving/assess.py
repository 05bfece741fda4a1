"""Serving footprints in the 16 EF 3.1 categories: per model, per request, per 1,000 requests, per million tokens.

Each model's GPU time and energy become Workloads (one per GPU model it ran on and boundary) assessed by
the engine through `footprint.lca.batch` (exactly linear in GPU-hours and kWh, so one call covers every
model and boundary): the embodied share is the model's GPU time over the GPU's lifetime, as for
training. The boundary is a switch, every level shown side by side (Google's 2025 Gemini method argues
for the widest):

- ``accelerators``: active GPU energy and busy GPU time, no host, no PUE;
- ``+host``: and its share of the host's CPU+RAM energy (node RAPL, where measured) and of the host server's
  embodied impacts;
- ``+idle``: and the idle reserve of its GPUs (their idle energy and time, pro rata its use of them);
- ``+pue``: and the site's PUE (facility overhead).

Per-token figures use only the tokens whose GPUs were metered; input and output tokens are charged the
prefill and decode shares of the model's energy (time-based split, see `attribution`); an engine without
both time histograms gives a per-token figure over all tokens and none per input or output token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from footprint.errors import FootprintError
from footprint.lca import categories as cat
from footprint.serving.attribution import Attribution

BOUNDARIES = ("accelerators", "+host", "+idle", "+pue")
EMBODIED = ("manufacturing", "transport", "end_of_life")


@dataclass(frozen=True)
class Site:
    grid: str | None = None
    pue: float = 1.2
    lifetime: str = "3 years"
    hourly: str | None = None  # an hourly carbon-intensity CSV (footprint.lca.hourly), matched to each model's windows


def template(gpu: str, site: Site, host: bool, pue: float, g_per_kwh: float | None = None) -> Any:
    """A one-GPU-hour, one-kWh Workload of this GPU and site (the batch scales it); ``g_per_kwh``: a model's
    energy-weighted hourly intensity in place of the zone's annual climate factor."""
    from footprint.lca.workload import workload_from_dict

    ci = {"carbon_intensity": f"{g_per_kwh} g/kWh"} if g_per_kwh is not None else {}
    data: dict[str, Any] = {
        "name": "serving",
        "hardware": {"gpu": gpu, "count": 1, "lifetime": site.lifetime, "host": "default" if host else "none"},
        "training": {"gpu_hours": 1.0, "energy": "1 kWh"},
        "site": {"pue": pue, **({"grid": site.grid} if site.grid else {}), **ci},
    }
    return workload_from_dict(data, "serving site")


def hourly_matches(a: Attribution, site: Site, origin_s: float | None) -> tuple[dict[str, Any], Any]:
    """Per model, its active energy's windows matched hour by hour to ``site.hourly`` (and the residual's idle and
    unused energy likewise): HourlyMatch objects, empty without an hourly file. ``origin_s``: the window grid's start
    (window w ends at origin + (w + 1) x window)."""
    if not site.hourly:
        return {}, None
    from footprint.lca import hourly

    if origin_s is None:
        raise FootprintError("the record does not say when its windows began: no hours to match", site.hourly, hourly.KEY)
    ci = hourly.read_intensity(site.hourly)

    def matched(windows: Any, seconds: Any, joules: Any) -> Any:
        end = origin_s + (np.asarray(windows, float) + 1) * a.window_s
        prof = hourly.intervals_by_hour(end - np.asarray(seconds, float), end, np.asarray(joules, float))
        return hourly.match(prof, ci, sum(prof.values()) / 3.6e6) if prof else None

    mw = a.models_w
    seconds = mw["seconds"] if "seconds" in mw else np.full(len(mw), a.window_s)
    per = {}
    for model, idx in mw.groupby("model").indices.items():
        m = matched(mw["window"].to_numpy()[idx], np.asarray(seconds)[idx], mw["active_j"].fillna(0.0).to_numpy()[idx])
        if m is not None:
            per[model] = m
    r = a.residual_w
    res = matched(r["window"], np.full(len(r), a.window_s), (r["idle_j"] + r["unused_j"]).to_numpy()) if len(r) else None
    return per, res


def gpu_lifetimes(gpu_model: Any, site: Site, gpu_hours: float, default_gpu: str = "H100-SXM5-80GB") -> float:
    """GPU lifetimes ``gpu_hours`` of this GPU consume: GPU-hours / (lifetime x utilisation), as `assess` charges its
    embodied impacts and as for training (`Workload.gpu_lifetimes`)."""
    w = template(_gpu(gpu_model, default_gpu), site, True, site.pue)
    return float(w.with_(gpu_hours=gpu_hours).gpu_lifetimes)


def model_totals(a: Attribution) -> pd.DataFrame:
    """One row per model: energy (J), GPU seconds, tokens and requests, metered and not."""
    m = a.models_w.groupby("model")[
        ["active_j", "prefill_j", "decode_j", "host_j", "gpu_s", "tokens_in", "tokens_out", "requests", "prefill_s", "decode_s"]
    ].sum(min_count=1)
    split = a.models_w.groupby("model")["prefill_j"].apply(lambda s: bool(s.notna().any()))
    m["split"] = split
    un = a.unmetered.groupby("model")[["tokens_in", "tokens_out", "requests"]].sum(min_count=1).add_suffix("_unmetered")
    out = m.join(un, how="outer").join(a.reserve.set_index("model"), how="left").reset_index()
    out = out.merge(a.models, on="model", how="left")
    for c in ("idle_j", "idle_s", "host_j", "active_j", "gpu_s"):
        out[c] = out[c].fillna(0.0)
    return out


def lost_j(a: Attribution) -> tuple[dict[str, float], dict[str, float]]:
    """Per model: (the energy its GPUs' resets and gaps may hide, by its share of each GPU: the health table's estimate;
    the most they may hide: each GPU's bound whole, since its share inside a gap is not measured)."""
    h = a.health[a.health["counter"] == "gpu"].rename(columns={"where": "host", "which": "gpu"})
    if not len(h) or not len(a.usage):
        return {}, {}
    if "lost_hi_j" not in h:  # records written before the bound: the estimate is all they have
        h = h.assign(lost_hi_j=h["lost_j"])
    u = a.usage.merge(h[["host", "gpu", "lost_j", "lost_hi_j"]], on=["host", "gpu"])
    tot = u.groupby(["host", "gpu"])["active_j"].transform("sum")
    u["lost"] = u["lost_j"] * u["active_j"] / tot.where(tot > 0)
    return u.groupby("model")["lost"].sum().fillna(0.0).to_dict(), u.groupby("model")["lost_hi_j"].sum().fillna(0.0).to_dict()


def _rows(t: pd.DataFrame) -> list[tuple[int, str, float, float]]:
    """(model index, boundary, GPU-hours, kWh): one row per model and boundary, each boundary adding to the last."""
    rows = []
    for i, r in t.iterrows():
        host = float(r["host_j"] or 0.0)
        gh, ghi = r["gpu_s"] / 3600, (r["gpu_s"] + r["idle_s"]) / 3600
        e = [r["active_j"], r["active_j"] + host, r["active_j"] + host + r["idle_j"], r["active_j"] + host + r["idle_j"]]
        for b, h, j in zip(BOUNDARIES, (gh, gh, ghi, ghi), e, strict=True):
            rows.append((int(i), b, float(h), float(j) / 3.6e6))
    return rows


def assess(a: Attribution, site: Site, default_gpu: str = "H100-SXM5-80GB", origin_s: float | None = None) -> dict[str, Any]:
    """Every model's footprint at every boundary, its per-unit figures, and the unattributed residual; with an hourly
    intensity file (``site.hourly``), each model's climate change from its own windows' hours."""
    from footprint.lca.batch import assess_arrays

    t = model_totals(a)
    if not len(t):
        raise FootprintError("no model served tokens on a metered GPU in this window", "serving")
    rows = _rows(t)
    res_gpu = a.gpus.groupby("gpu_model")[["idle_j", "unused_j"]].sum().sum(axis=1)
    res_time = _residual_hours(a)
    hourly, res_hourly = hourly_matches(a, site, origin_s)
    keys: dict[tuple[str, str, float | None], int] = {}
    templates: list[Any] = []

    def tindex(gpu: str, boundary: str, match: Any = None) -> int:
        ci = match.weighted_g_per_kwh if match is not None else None
        k = (gpu, boundary, ci)
        if k not in keys:
            keys[k] = len(templates)
            templates.append(template(gpu, site, boundary != "accelerators", site.pue if boundary == "+pue" else 1.0, ci))
        return keys[k]

    idx, gh, kwh = [], [], []
    for i, b, h, e in rows:
        idx.append(tindex(_gpu(t.loc[i, "gpu_model"], default_gpu), b, hourly.get(t.loc[i, "model"])))
        gh.append(h)
        kwh.append(e)
    resid = []
    for g, j in res_gpu.items():
        idx.append(tindex(_gpu(g, default_gpu), "+pue", res_hourly))
        gh.append(res_time.get(g, 0.0))
        kwh.append(float(j) / 3.6e6)
        resid.append(len(gh) - 1)
    batch = assess_arrays(templates, np.asarray(idx), np.asarray(gh), np.asarray(kwh))
    lost = lost_j(a)
    models = [_model_result(t.loc[i], batch, [k for k, r in enumerate(rows) if r[0] == i], lost) for i in t.index]
    for m in models:
        m["carbon_intensity_hourly"] = hourly[m["model"]].to_dict() if m["model"] in hourly else None
    out = {"models": models, "unattributed": _residual(a, batch, resid), "site": site.__dict__, "boundaries": list(BOUNDARIES)}
    if site.hourly:
        out["unattributed"]["carbon_intensity_hourly"] = res_hourly.to_dict() if res_hourly is not None else None
        out["hourly_note"] = (
            f"hourly: climate change of electricity matched hour by hour to {site.hourly}, each model over the windows "
            "of its active energy (its host and idle energy take the same hours), the unattributed residual over its own "
            "windows; the other 15 categories use the zone's annual mix"
        )
    return out


def _gpu(name: Any, default: str) -> str:
    return name if isinstance(name, str) and name else default


def _residual_hours(a: Attribution) -> dict[str, float]:
    """GPU-hours no model was busy on (idle time of used GPUs, all the time of unused ones), per GPU model."""
    g = a.gpus
    h = (g["seconds"] - g["busy_s"]).clip(lower=0.0) / 3600
    return h.groupby(g["gpu_model"]).sum().to_dict()


def _impacts(batch: Any, rows: list[int]) -> dict[str, float | None]:
    codes = np.full(len(batch), -1)
    codes[rows] = 0
    s = batch.group_sums(codes, 1)
    out: dict[str, float | None] = {}
    for c in cat.categories() + cat.extras():
        v = float(s.total(c.key)[0])
        out[c.key] = v if np.isfinite(v) else None
    w = float(s.value("water_l", "total")[0][0])
    out["water_l"] = w if np.isfinite(w) else None
    emb = sum(float(np.nan_to_num(s.value("impacts", "climate_change", "by_stage", st)[0][0])) for st in EMBODIED)
    cc = out["climate_change"]
    out["embodied_share_climate"] = emb / cc if cc else None
    return out


def _per(
    v: dict[str, float | None], n: float | None, scale: float = 1.0, share: float | None = 1.0
) -> dict[str, float | None] | None:
    if not n or n <= 0 or share is None or not np.isfinite(share):
        return None
    return {k: (x * share * scale / n if x is not None and k != "embodied_share_climate" else x) for k, x in v.items()}


def _num(x: Any) -> float | None:
    return float(x) if x is not None and x == x else None


def _count(x: Any) -> int | float | None:
    """A count (tokens, requests): an integer where the counters' differences are whole, as the engines' are."""
    v = _num(x)
    return int(v) if v is not None and v.is_integer() else v


def _model_result(
    r: pd.Series, batch: Any, rows: list[int], lost_pair: tuple[dict[str, float], dict[str, float]]
) -> dict[str, Any]:
    lost, bound = lost_pair
    b = {BOUNDARIES[k]: _impacts(batch, [rows[k]]) for k in range(len(BOUNDARIES))}
    active = float(r["active_j"])
    pre = _num(r["prefill_j"])
    share_in = pre / active if pre is not None and active > 0 else None
    share_out = 1 - share_in if share_in is not None else None
    toks = (_num(r["tokens_in"]) or 0.0) + (_num(r["tokens_out"]) or 0.0)
    per = {
        name: {
            "per_request": _per(v, _num(r["requests"])),
            "per_1000_requests": _per(v, _num(r["requests"]), 1000.0),
            "per_million_input_tokens": _per(v, _num(r["tokens_in"]), 1e6, share_in),
            "per_million_output_tokens": _per(v, _num(r["tokens_out"]), 1e6, share_out),
            "per_million_tokens": _per(v, toks, 1e6),
        }
        for name, v in b.items()
    }
    flags = [f for f in [r.get("flag")] if isinstance(f, str) and f]
    if not r["split"]:
        flags.append("no prefill/decode time histograms: tokens split the GPU, no separate input/output figures")
    if bound.get(r["model"], 0.0) > 0:
        flags.append(
            f"counter resets or gaps on its GPUs may hide about {lost.get(r['model'], 0.0) / 3.6e6:.3g} kWh (at the power "
            f"around them), at most {bound[r['model']] / 3.6e6:.3g} kWh (at the GPU's limit): gpu_j_range"
        )
    if _num(r.get("tokens_out_unmetered")):
        flags.append(f"{r['tokens_out_unmetered']:,.0f} output tokens without an energy reading, left out of per-token figures")
    return {
        "model": r["model"],
        "engine": r.get("engine"),
        "gpu_model": r.get("gpu_model"),
        "gpu_j": active,
        "gpu_j_range": [active, active + bound.get(r["model"], 0.0)],  # what resets and gaps may hide, at most
        "prefill_j": pre,
        "decode_j": _num(r["decode_j"]),
        "host_j": _num(r["host_j"]),
        "idle_reserve_j": float(r["idle_j"]),
        "gpu_hours": float(r["gpu_s"]) / 3600,
        "idle_reserve_gpu_hours": float(r["idle_s"]) / 3600,
        "tokens_in": _count(r["tokens_in"]),
        "tokens_out": _count(r["tokens_out"]),
        "requests": _count(r["requests"]),
        "tokens_out_unmetered": _count(r.get("tokens_out_unmetered")),
        "j_per_output_token": (_num(r["decode_j"]) / r["tokens_out"])
        if _num(r["decode_j"]) is not None and _num(r["tokens_out"])
        else None,
        "j_per_input_token": (pre / r["tokens_in"]) if pre is not None and _num(r["tokens_in"]) else None,
        "j_per_token": active / toks if toks else None,
        "impacts": b,
        "per_unit": per,
        "flags": flags,
    }


def _residual(a: Attribution, batch: Any, rows: list[int]) -> dict[str, Any]:
    r = a.residual_w
    return {
        "gpu_j": float(r["idle_j"].sum() + r["unused_j"].sum()),
        "gpu_idle_j": float(r["idle_j"].sum()),
        "gpu_unused_j": float(r["unused_j"].sum()),
        "gpu_hours": float(sum(_residual_hours(a).values())),  # GPU time no model was busy on (embodied share)
        "host_j": float(r["host_j"].sum()) if "host_j" in r else None,
        "impacts": _impacts(batch, rows) if rows else None,
        "what": "idle energy of used GPUs (handed to their models only in the +idle boundary) and all the energy of GPUs "
        "no model was mapped to, or busy without engine activity; assessed with the site's PUE",
    }
