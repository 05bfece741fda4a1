"""The LCA engine: Workload -> Assessment (16 EF categories x stage x component, with uncertainty).

    embodied  = per-GPU embodied impacts x GPU-hours / (lifetime x utilisation)
    host      = per-GPU host share (server around the GPUs) x the same allocation
    use       = IT energy x PUE x the grid zone's per-kWh factors
    water     = IT energy x WUE (on site) + IT energy x PUE x EWIF (off site, electricity generation)

The Monte Carlo draws, vectorised, every declared range at once (embodied impacts where sources
disagree, grid intensity, power, and the scenario's own `uncertainty:` ranges) and reports the
2.5th-97.5th percentiles as low-high.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.database import IDX, N_IND, Database, Embodied, db
from footprint.lca.units import Q
from footprint.lca.workload import Workload

N_CAT = 16
DEFAULT_SAMPLES = 2000


def embodied_parts(d: Database, w: Workload) -> tuple[dict[tuple[str, str], np.ndarray], Embodied, list[str]]:
    """Per-GPU embodied parts incl. modelled distribution, with any override applied."""
    emb = d.embodied(w.gpu.id)
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
    """Relative low/high of the per-GPU embodied impacts, from sources that disagree."""
    lo, hi = np.ones(N_IND), np.ones(N_IND)
    srcs: list[str] = []
    gpu = w.gpu
    emb = d.embodied(gpu.id)
    par = d.embodied_parametric(gpu)
    with np.errstate(divide="ignore", invalid="ignore"):
        if emb.method.startswith("ADEME per-card"):
            ratio = par.total() / emb.total()
            ratios = [np.where(np.isfinite(ratio), ratio, 1.0)]
        else:
            ratios = d.card_vs_model_ratios
    for r in ratios:
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


def _tri(
    rng: np.random.Generator, lo: np.ndarray | float, mode: np.ndarray | float, hi: np.ndarray | float, size: Any
) -> np.ndarray:
    lo, mode, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(mode, float), np.asarray(hi, float))
    span = hi - lo
    safe_hi = np.where(span > 0, hi, lo + 1e-12)
    mode = np.clip(mode, lo, safe_hi)
    draw = rng.triangular(np.broadcast_to(lo, size), np.broadcast_to(mode, size), np.broadcast_to(safe_hi, size))
    return np.where(np.broadcast_to(span, size) > 0, draw, np.broadcast_to(lo, size))


def assess(w: Workload, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Assessment:
    """Compute the full life-cycle assessment of a workload."""
    d = db()
    warnings: list[str] = list(w.notes)
    sources: list[str] = ["ef-3.1", *w.sources]
    alloc = w.gpu_lifetimes
    parts, emb, override_notes = embodied_parts(d, w)
    warnings += override_notes
    sources += list(emb.sources)
    if emb.method.startswith("ADEME parametric"):
        warnings.append(f"{w.gpu.name}: embodied impacts modelled with the ADEME parametric model, not measured")
    if w.gpu.proxy_of:
        warnings.append(f"{w.gpu.name}: card geometry proxied from {w.gpu.proxy_of} (estimate)")
    warnings.append("distribution (plane 9,908 km + truck 1,000 km) modelled with the ADEME per-kg.km factors")

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

    # Use phase
    facility = w.it_energy_kwh * w.pue
    zone = electricity.zone(w.grid)
    elec = np.full(N_IND, np.nan)
    coverage_notes = []
    for c in cat.categories():
        f = zone.factors[c.key]
        if f.value is not None:
            elec[IDX[c.key]] = f.value
            sources += list(f.sources)
            if f.coverage < 0.999:
                coverage_notes.append(f"{c.name} ({f.coverage:.0%})")
    ci_lo = ci_hi = None
    if w.carbon_intensity is not None:
        elec[IDX["climate_change"]] = w.carbon_intensity
        warnings.append(f"climate change of electricity set by the scenario: {w.carbon_intensity * 1000:g} g CO2 eq/kWh")
    else:
        f = zone.factors["climate_change"]
        ci_lo, ci_hi = f.low, f.high
    use_na = [c.name for c in cat.categories() if np.isnan(elec[IDX[c.key]])]
    if use_na:
        warnings.append(
            f"use phase not available for {len(use_na)} categories (no open per-kWh electricity factor): "
            + ", ".join(use_na)
            + "; their totals cover embodied impacts only"
        )
    if coverage_notes:
        warnings.append(
            f"use phase is a lower bound where factors cover only part of the {zone.name} mix: " + ", ".join(coverage_notes)
        )
    if any(k[0] == "end_of_life" for k in parts):
        warnings.append(
            "embodied water use is dominated by the ADEME end-of-life factor (730 m3 world eq per kg of card); kept as published"
        )

    results: dict[str, CategoryResult] = {}
    stage_names = cat.stages()
    for c in cat.categories() + cat.extras():
        i = IDX[c.key]
        by_comp: dict[str, float | None] = {}
        by_stage: dict[str, float | None] = {s: 0.0 for s in stage_names}
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
        else:
            by_stage["use"] = None
        total = float(sum(v for v in by_stage.values() if v is not None))
        results[c.key] = CategoryResult(c.key, c.name, c.unit, total, by_stage, by_comp, total, total, tuple(not_available))

    # Monte Carlo
    if samples and samples > 1:
        m_lo, m_hi, rsrc = embodied_multipliers(d, w)
        sources += rsrc
        lows, highs = _monte_carlo(w, samples, seed, parts, host, elec, m_lo, m_hi, ci_lo, ci_hi, d)
        for c in cat.categories() + cat.extras():
            r = results[c.key]
            i = IDX[c.key]
            results[c.key] = r.with_range(float(lows[i]), float(highs[i]))

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
    )


def _monte_carlo(
    w: Workload,
    n: int,
    seed: int,
    parts: dict,
    host: np.ndarray,
    elec: np.ndarray,
    m_lo: np.ndarray,
    m_hi: np.ndarray,
    ci_lo: float | None,
    ci_hi: float | None,
    d: Database,
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    r = w.ranges
    emb = np.sum(list(parts.values()), axis=0)  # per GPU, incl. distribution
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
    if w.energy_method.startswith("GPU-hours"):
        it = it * gpu_hours / w.gpu_hours
    facility = it * draw("pue", w.pue)
    el = np.broadcast_to(np.nan_to_num(elec, nan=0.0), (n, N_IND)).copy()
    ci_idx = IDX["climate_change"]
    if "carbon_intensity" in r:
        el[:, ci_idx] = draw("carbon_intensity", elec[ci_idx])
    elif ci_lo is not None and ci_hi is not None and ci_hi > ci_lo:
        el[:, ci_idx] = _tri(rng, ci_lo, elec[ci_idx], ci_hi, (n,))
    per_gpu = emb * mult + np.nan_to_num(host, nan=0.0)
    totals = per_gpu * alloc[:, None] + facility[:, None] * el
    return np.percentile(totals, 2.5, axis=0), np.percentile(totals, 97.5, axis=0)


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
        "mass_consumed_kg": w.gpu_lifetimes * mass,
        "mass_gpu_equivalents_kg": w.gpu_equivalents * mass,
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
            base = comps["board_and_chips"] * w.gpu_equivalents
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
