"""The LCA engine: Workload -> Assessment (16 EF categories x stage x component, with uncertainty).

    embodied  = per-GPU embodied impacts x GPU-hours / (lifetime x utilisation)
    host      = per-GPU host share (server around the GPUs) x the same allocation
    use       = IT energy x PUE x the per-kWh factors of the electricity (electricity.use_factors)
                (+ water use: IT energy x WUE x the zone's AWARE factor, the site's own cooling water)
    water     = IT energy x WUE (on site) + IT energy x PUE x EWIF (off site, electricity generation)

The Monte Carlo draws, vectorised, every declared range at once (embodied impacts where sources
disagree, every per-kWh electricity factor between its disagreeing sources, power, and the
scenario's own `uncertainty:` ranges) and reports the 2.5th-97.5th percentiles as low-high, for
each category and for the EF 3.1 single score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from footprint.errors import FootprintError, ScenarioError
from footprint.inputs import MAX_SAMPLES
from footprint.lca import DEFAULT_SAMPLES, electricity, normalisation
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.database import IDX, N_IND, Database, Embodied, db
from footprint.lca.units import Q
from footprint.lca.workload import Workload

N_CAT = 16


def embodied_parts(d: Database, w: Workload) -> tuple[dict[tuple[str, str], np.ndarray], Embodied, list[str]]:
    """Per-GPU embodied parts incl. modelled distribution, with any override applied."""
    emb = d.embodied(w.gpu.id, w.embodied_variant)
    parts = {k: v.copy() for k, v in emb.parts.items()}
    parts[("distribution", "transport")] = d.distribution(w.gpu)
    notes: list[str] = []
    if w.embodied_override:
        total = np.sum(list(parts.values()), axis=0)
        for c, value in w.embodied_override.items():
            i = IDX[c]
            if total[i] > 0:
                for arr in parts.values():
                    arr[i] *= value / total[i]
            notes.append(
                f"{cat.by_key(c).name}: embodied per GPU set to {value:g} {cat.by_key(c).unit} by the "
                "scenario (hardware.embodied); component and stage shares kept from the dataset"
            )
    return parts, emb, notes


def embodied_multipliers(d: Database, w: Workload) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Relative low/high of the per-GPU embodied impacts, from sources that disagree: the parametric
    model vs the per-card data, the other data variant (corrected vs as published), published figures."""
    lo, hi = np.ones(N_IND), np.ones(N_IND)
    srcs: list[str] = []
    gpu = w.gpu
    emb = d.embodied(gpu.id, w.embodied_variant)
    par = d.embodied_parametric(gpu, w.embodied_variant)
    other = d.embodied(gpu.id, "published" if d.resolve_variant(w.embodied_variant) != "published" else None)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = [other.total() / emb.total()]
        if emb.method.startswith("ADEME per-card"):
            ratios.append(par.total() / emb.total())
        else:
            ratios += d.card_vs_model_ratios
    for r in ratios:
        r = np.where(np.isfinite(r) & (r > 0), r, 1.0)
        lo, hi = np.minimum(lo, r), np.maximum(hi, r)
    srcs.append("ademe-gpu-lca")
    base = emb.total()
    for pub in d.ranges.get("published", []):
        if gpu.id in pub.get("gpus", []):
            i = IDX[pub["category"]]
            v = float(Q(pub["value"], cat.by_key(pub["category"]).unit).magnitude)
            if base[i] > 0:
                lo[i], hi[i] = min(lo[i], v / base[i]), max(hi[i], v / base[i])
                srcs.append(pub["source"])
    for c in w.embodied_override:
        lo[IDX[c]] = hi[IDX[c]] = 1.0
    return lo, hi, srcs


def contested_embodied(d: Database, w: Workload) -> list[dict[str, Any]]:
    """The embodied corrections in force for this card, as contested data (corrected vs published)."""
    if d.resolve_variant(w.embodied_variant) == "published":
        return []
    emb, pub = d.embodied(w.gpu.id, w.embodied_variant), d.embodied(w.gpu.id, "published")
    out = []
    for cid, c in d.corrections["corrections"].items():
        key = (c["component"], c["stage"])
        if key not in emb.parts or key not in pub.parts:
            continue
        k = c.get("category", "climate_change")
        a, b = float(emb.parts[key][IDX[k]]), float(pub.parts[key][IDX[k]])
        if a == b:
            continue
        out.append(
            {
                "subject": w.gpu.id,
                "category": k,
                "factor": f"{w.gpu.name} {c['component'].replace('_', ' ')}, {cat.by_key(k).name.lower()} ({cid})",
                "value": a,
                "source": c["source"],
                "second_value": b,
                "second_source": "ademe-gpu-lca",
                "ratio": a / b if b else None,
                "unit": f"{cat.by_key(k).unit} per card",
                "note": c["change"],
            }
        )
    return out


def _tri(
    rng: np.random.Generator, lo: np.ndarray | float, mode: np.ndarray | float, hi: np.ndarray | float, size: Any
) -> np.ndarray:
    lo, mode, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(mode, float), np.asarray(hi, float))
    span = hi - lo
    safe_hi = np.where(span > 0, hi, np.nextafter(lo, np.inf))  # numpy refuses left == right; lo + 1e-12 == lo past ~1e4
    mode = np.clip(mode, lo, safe_hi)
    draw = rng.triangular(np.broadcast_to(lo, size), np.broadcast_to(mode, size), np.broadcast_to(safe_hi, size))
    return np.where(np.broadcast_to(span, size) > 0, draw, np.broadcast_to(lo, size))


def _use_vectors(w: Workload, warnings: list[str], sources: list[str]) -> tuple[electricity.UseFactors, np.ndarray]:
    """Per-kWh factors of the electricity (over INDICATORS, NaN = not available), with warnings."""
    uf = electricity.use_factors(w)
    elec = np.full(N_IND, np.nan)
    elec[: len(uf.value)] = uf.value
    sources += list(uf.sources)
    warnings += list(uf.notes)
    keys = cat.keys()
    na = [cat.by_key(k).name for i, k in enumerate(keys) if np.isnan(uf.value[i])]
    if na:
        warnings.append(
            f"use phase not available for {len(na)} categories (no per-kWh factor in {uf.label}): "
            + ", ".join(na)
            + "; their totals cover embodied impacts only"
        )
    partial = [f"{cat.by_key(k).name} ({uf.coverage[i]:.1%})" for i, k in enumerate(keys) if 0 < uf.coverage[i] < 0.999]
    if partial:
        warnings.append("use phase is a lower bound where factors cover only part of the grid mix: " + ", ".join(partial))
    return uf, elec


def check_samples(samples: Any, seed: Any = 0) -> tuple[int, int]:
    """Monte Carlo samples in [0, MAX_SAMPLES] and a seed in [0, 2**63): one clear error otherwise."""
    for key, v, hi in (("--samples", samples, MAX_SAMPLES), ("--seed", seed, 2**63 - 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
            raise FootprintError(f"must be a whole number from 0 to {hi:,}, got {v!r}", key=key)
    return int(samples), int(seed)


@dataclass(frozen=True)
class _Inputs:
    """What the central result and the Monte Carlo of one workload are computed from."""

    parts: dict[tuple[str, str], np.ndarray]  # (component, stage) -> per-GPU embodied impacts
    emb: Embodied
    host: np.ndarray  # per-GPU host share (NaN: not available)
    uf: electricity.UseFactors
    elec: np.ndarray  # per-kWh factors over INDICATORS
    site_water: tuple[float, float, float] | None


def _inputs(d: Database, w: Workload, warnings: list[str], sources: list[str]) -> _Inputs:
    """Embodied parts, host share and electricity factors of a workload; their warnings and sources appended."""
    parts, emb, override_notes = embodied_parts(d, w)
    warnings += override_notes
    sources += list(emb.sources)
    if emb.method.startswith("ADEME parametric"):
        warnings.append(f"{w.gpu.name}: embodied impacts modelled with the ADEME parametric model, not measured")
    if w.gpu.proxy_of:
        warnings.append(f"{w.gpu.name}: card geometry proxied from {w.gpu.proxy_of} (estimate)")
    warnings.append("distribution (plane 9,908 km + truck 1,000 km) modelled with the ADEME per-kg.km factors")
    warnings += [f"{w.gpu.name}: {n}" for n in emb.notes if "correction" in n]

    host = np.full(N_IND, np.nan)
    if w.host is not None:
        host, hsrc, _ = d.host_share(w.host)
        sources += hsrc
        na = [cat.by_key(k).name for k in cat.keys() if np.isnan(host[IDX[k]])]
        if na:
            warnings.append(
                f"host share (server around the GPU) not available for {len(na)} categories "
                f"({', '.join(na)}): their totals cover the GPU only"
            )
    uf, elec = _use_vectors(w, warnings, sources)
    site_water = electricity.site_water_factor(w)
    if site_water is not None:
        zone = electricity.zone(w.grid)
        sources += list(zone.aware.sources if zone.aware else ())
    return _Inputs(parts, emb, host, uf, elec, site_water)


def assess(w: Workload, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Assessment:
    """Compute the full life-cycle assessment of a workload."""
    samples, seed = check_samples(samples, seed)
    d = db()
    warnings: list[str] = list(w.notes)
    sources: list[str] = ["ef-3.1", *w.sources]
    alloc = w.gpu_lifetimes
    inp = _inputs(d, w, warnings, sources)
    parts, emb, host, uf, elec, site_water = inp.parts, inp.emb, inp.host, inp.uf, inp.elec, inp.site_water
    facility = w.it_energy_kwh * w.pue
    zone = electricity.zone(w.grid)

    results: dict[str, CategoryResult] = {}
    for c in cat.categories() + cat.extras():
        results[c.key] = _category(c, parts, host, elec, alloc, facility, w, site_water)
    _check_finite(w, {k: (r.total,) for k, r in results.items()})

    # Monte Carlo
    score_range = None
    activity: dict[str, tuple[float, float]] = {}
    if samples and samples > 1:
        m_lo, m_hi, rsrc = embodied_multipliers(d, w)
        sources += rsrc
        draws: dict[str, np.ndarray] = {}
        lows, highs, score_range = _percentiles(_mc_totals(w, samples, seed, inp, m_lo, m_hi, d, draws))
        activity = _activity_ranges(w, draws)
        for c in cat.categories() + cat.extras():
            r = results[c.key]
            i = IDX[c.key]
            results[c.key] = r.with_range(float(lows[i]), float(highs[i]))
        _check_finite(w, {k: (r.low, r.high) for k, r in results.items()})

    per, score = normalisation.normalise(results, score_range)
    sources.append(normalisation.SOURCE)
    contested = [*uf.contested, *contested_embodied(d, w)]
    water = _water(w, facility, warnings)
    materials = _materials(d, w)
    return Assessment(
        workload=w,
        impacts=results,
        facility_energy_kwh=facility,
        water_l=water,
        materials=materials,
        embodied_method=emb.method,
        zone=zone,
        samples=samples,
        warnings=tuple(dict.fromkeys(warnings)),
        source_ids=tuple(dict.fromkeys(s for s in sources if s)),
        use_factors=uf,
        contested=tuple(contested),
        normalised=per,
        single_score=score,
        activity_ranges=activity,
    )


def monte_carlo_totals(w: Workload, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> np.ndarray:
    """The Monte Carlo draws behind `assess`'s low-high: totals of every indicator (samples x indicators, in
    `database.INDICATORS` order), for callers that sum workloads before taking percentiles (fleet ranges)."""
    samples, seed = check_samples(samples, seed)
    d = db()
    m_lo, m_hi, _ = embodied_multipliers(d, w)
    return _mc_totals(w, max(samples, 1), seed, _inputs(d, w, [], []), m_lo, m_hi, d)


def _check_finite(w: Workload, values: dict[str, tuple[float, ...]]) -> None:
    """Inputs that are each finite can multiply past floating point (1e308 kg CO2 eq/kWh x 1e6 kWh): one error, never inf."""
    for key, vs in values.items():
        if any(not math.isfinite(v) for v in vs if v is not None):
            raise ScenarioError(
                f"the {key} result is beyond floating point: a stated number is far out of scale (check units and magnitudes)",
                w.source,
                key,
            )


def _category(
    c: cat.Category,
    parts: dict[tuple[str, str], np.ndarray],
    host: np.ndarray,
    elec: np.ndarray,
    alloc: float,
    facility: float,
    w: Workload,
    site_water: tuple[float, float, float] | None,
) -> CategoryResult:
    """One category's totals by stage and component (None = not available, never zero)."""
    i = IDX[c.key]
    by_comp: dict[str, float | None] = {}
    by_stage: dict[str, float | None] = {s: 0.0 for s in cat.stages()}
    for (comp, stage), arr in parts.items():
        v = float(arr[i] * alloc)
        by_comp[comp] = by_comp.get(comp, 0.0) + v
        by_stage[stage] += v
    not_available = []
    if w.host is not None:
        if np.isnan(host[i]):
            by_comp["host_share"] = None
            not_available.append("host_share")
        else:
            v = float(host[i] * alloc)
            by_comp["host_share"] = v
            by_stage["manufacturing"] += v
    if c.key in cat.keys():
        if np.isnan(elec[i]):
            by_stage["use"] = None
            by_comp["electricity"] = None
            not_available.append("use")
        else:
            by_stage["use"] = by_comp["electricity"] = float(facility * elec[i])
        if c.key == "water_use":
            if site_water is None:
                by_comp["on_site_water"] = None
                not_available.append("on_site_water")
            else:
                by_comp["on_site_water"] = float(w.it_energy_kwh * site_water[0])
                by_stage["use"] = (by_stage["use"] or 0.0) + by_comp["on_site_water"]
    else:
        by_stage["use"] = None
    total = float(sum(v for v in by_stage.values() if v is not None))
    return CategoryResult(c.key, c.name, c.unit, total, by_stage, by_comp, total, total, tuple(not_available))


def _mc_totals(
    w: Workload,
    n: int,
    seed: int,
    inp: _Inputs,
    m_lo: np.ndarray,
    m_hi: np.ndarray,
    d: Database,
    draws: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Totals (samples x indicators) of ``n`` draws. The draws come in a fixed order and shape for a given
    workload's ranges (embodied multipliers, then the workload's own ranges, power, PUE, the per-kWh
    factors, site water), so two workloads of one factor set drawn with one seed share their random
    numbers: `monte_carlo_totals` of a workload equals gpu_hours x that of one GPU-hour plus energy x
    that of one kWh (footprint.lca.batch relies on it). ``draws``, when given, receives the activity draws
    (GPU-hours, IT and facility energy) behind the headline's ranges."""
    rng = np.random.default_rng(seed)
    r = w.ranges
    host, uf, elec, site_water = inp.host, inp.uf, inp.elec, inp.site_water
    emb = np.sum(list(inp.parts.values()), axis=0)  # per GPU, incl. distribution
    mult = _tri(rng, m_lo, 1.0, m_hi, (n, N_IND))

    def draw(key: str, central: float) -> np.ndarray:
        if key in r:
            lo, hi = r[key]
            return _tri(rng, lo, central, hi, (n,))
        return np.full(n, central)

    gpu_hours = draw("gpu_hours", w.gpu_hours)
    if w.mfu is not None and "mfu" in r:
        gpu_hours = gpu_hours * w.mfu / draw("mfu", w.mfu)
    lifetime = draw("lifetime", w.lifetime_h)
    util = draw("utilization", w.utilization)
    alloc = gpu_hours / (lifetime * util)
    rel = float(d.ranges.get("power", {}).get("relative", 0.0))
    if w.power_per_gpu_w is not None and "power_per_gpu" in r:
        power_mult = draw("power_per_gpu", w.power_per_gpu_w) / w.power_per_gpu_w
    else:
        power_mult = _tri(rng, 1 - rel, 1.0, 1 + rel, (n,))
    it = w.it_energy_kwh * power_mult
    if w.energy_method.startswith("GPU-hours") and w.gpu_hours:
        it = it * gpu_hours / w.gpu_hours
    facility = it * draw("pue", w.pue)
    if draws is not None:
        draws.update(gpu_hours=gpu_hours, it_energy_kwh=it, facility_energy_kwh=facility)
    # every per-kWh factor between its disagreeing sources (triangular, mode at the central value)
    k = len(uf.value)
    ok = np.isfinite(uf.value)
    el = np.zeros((n, N_IND))
    el[:, :k][:, ok] = _tri(rng, uf.low[ok], uf.value[ok], uf.high[ok], (n, int(ok.sum())))
    ci_idx = IDX["climate_change"]
    if "carbon_intensity" in r:
        el[:, ci_idx] = draw("carbon_intensity", elec[ci_idx])
    per_gpu = emb * mult + np.nan_to_num(host, nan=0.0)
    totals = per_gpu * alloc[:, None] + facility[:, None] * el
    if site_water is not None:
        totals[:, IDX["water_use"]] += it * _tri(rng, site_water[1], site_water[0], site_water[2], (n,))
    return totals


def _percentiles(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """(low, high) per indicator and the single score's, the 2.5th and 97.5th percentiles of the draws."""
    scores = normalisation.single_scores(totals)
    q = np.percentile(np.column_stack([totals, scores]), (2.5, 97.5), axis=0)
    return q[0, :-1], q[1, :-1], (float(q[0, -1]), float(q[1, -1]))


def _activity_ranges(w: Workload, draws: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """2.5-97.5 percentiles of GPU-hours, IT and facility energy and water (L) over the same draws as the impacts:
    the headline's ranges. Water is on-site (IT x WUE) plus off-site (facility x EWIF), where either is known."""
    out = dict(draws)
    if w.wue_l_per_kwh is not None or w.ewif_l_per_kwh is not None:
        out["water_l"] = draws["it_energy_kwh"] * (w.wue_l_per_kwh or 0.0) + draws["facility_energy_kwh"] * (
            w.ewif_l_per_kwh or 0.0
        )
    return {k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for k, v in out.items()}


def _water(w: Workload, facility: float, warnings: list[str]) -> dict[str, float | None]:
    on = w.it_energy_kwh * w.wue_l_per_kwh if w.wue_l_per_kwh is not None else None
    off = facility * w.ewif_l_per_kwh if w.ewif_l_per_kwh is not None else None
    if on is None:
        warnings.append("on-site water not available: no WUE given and none in the site preset")
    if off is None:
        warnings.append("off-site water not available: no EWIF given and none in the site preset")
    total = None if on is None and off is None else (on or 0.0) + (off or 0.0)
    return {"on_site": on, "off_site": off, "total": total}


def _materials(d: Database, w: Workload) -> dict[str, Any]:
    """Hardware mass a run consumes (GPU lifetimes x card mass), with cited composition facts."""
    g = w.gpu
    p = g.parametric
    mass = p["total_mass_kg"]
    comps = {"casing": p.get("casing_mass_kg"), "heatsink": p.get("heatsink_mass_kg")}
    known = sum(v for v in comps.values() if v)
    comps["board_and_chips"] = max(mass - known, 0.0)
    out: dict[str, Any] = {
        "card_mass_kg": mass,
        "components_kg": comps,
        "gpu_lifetimes": w.gpu_lifetimes,
        "gpu_equivalents": w.gpu_equivalents,
        "mass_consumed_kg": w.gpu_lifetimes * mass,  # the hardware mass every front end shows
        "mass_gpu_equivalents_kg": w.gpu_equivalents * mass,  # Falk et al.'s rounded-up count x card mass (JSON only)
        "estimate": bool(g.proxy_of),
        "note": "board_and_chips = card mass - casing - heatsink (board, GPU package, memory, other parts)",
    }
    try:
        mat = d.materials
    except Exception:  # materials data is optional for the assessment
        return out
    comp = (mat.get("compositions") or {}).get("board")
    if comp:
        elements = {}
        for el, rng in (comp.get("elements") or {}).items():
            lo = float(Q(rng["low"], "percent").to("dimensionless").magnitude)
            hi = float(Q(rng["high"], "percent").to("dimensionless").magnitude)
            base = comps["board_and_chips"] * w.gpu_lifetimes  # the hardware consumed, as mass_consumed_kg
            elements[el] = {"low_kg": lo * base, "high_kg": hi * base}
        out["elements_estimate"] = {
            "component": "board_and_chips",
            "estimate": True,
            "basis": comp.get("basis"),
            "source": comp.get("source"),
            "elements": elements,
        }
    out["facts"] = mat.get("facts", {})
    return out


def gpu_equivalents(flops: float, peak_flops: float, mfu: float, lifetime_h: float, utilization: float = 1.0) -> int:
    """Falk et al.'s GPU-equivalents: ceil(FLOPs / (peak x MFU x lifetime x utilisation))."""
    return math.ceil(flops / (peak_flops * mfu * lifetime_h * 3600 * utilization) - 1e-9)
