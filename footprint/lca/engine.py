"""The LCA engine: Workload -> Assessment (16 EF categories x stage x component, with uncertainty).

    embodied  = per-GPU embodied impacts x GPU-hours / (lifetime x utilisation)
    host      = per-GPU host share (server around the GPUs) x the same allocation
    use       = IT energy x PUE x the per-kWh factors of the electricity (electricity.use_factors)
                (+ water use: IT energy x WUE x the zone's AWARE factor, the site's own cooling water)
    water     = IT energy x WUE (on site) + IT energy x PUE x EWIF (off site, electricity generation)

The Monte Carlo (`footprint.lca.montecarlo`) draws, vectorised, every stated factor by its distribution
(`footprint.lca.uncertainty`: lognormal with the central value as its median by default) and reports
the 2.5th-97.5th percentiles as low-high, the interquartile range and the sensitivity table (which
inputs drive each category's variance), for each category and for the EF 3.1 single score.

A use stage with no open life-cycle per-kWh factor for any technology of the grid mix (ozone depletion:
lca_data/electricity_not_modelled.csv) is "not modelled": null with its name in `not_modelled`, and no stage is
then called dominant. A mix with factors for only part of its technologies is a labelled lower bound instead.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from footprint.errors import FootprintError, ScenarioError
from footprint.inputs import MAX_SAMPLES
from footprint.lca import DEFAULT_SAMPLES, electricity, mixed, montecarlo, normalisation
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.database import IDX, N_IND, Database, Embodied, db
from footprint.lca.montecarlo import Inputs
from footprint.lca.uncertainty import Block
from footprint.lca.units import Q
from footprint.lca.workload_data import HOST_ONLY, Workload

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


def embodied_multipliers(d: Database, w: Workload, emb: Embodied | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Relative low/high of the per-GPU embodied impacts, from sources that disagree: the parametric
    model vs the per-card data, the other data variant (corrected vs as published), published figures.
    ``emb`` is the workload's embodied data when the caller has it (one embodied computation per assessment)."""
    lo, hi = np.ones(N_IND), np.ones(N_IND)
    srcs: list[str] = []
    gpu = w.gpu
    emb = emb or d.embodied(gpu.id, w.embodied_variant)
    other = d.embodied(gpu.id, "published" if d.resolve_variant(w.embodied_variant) != "published" else None)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = [other.total() / emb.total()]
        if emb.method.startswith("ADEME per-card"):
            ratios.append(d.embodied_parametric(gpu, w.embodied_variant).total() / emb.total())
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


def contested_embodied(d: Database, w: Workload, emb: Embodied | None = None) -> list[dict[str, Any]]:
    """The embodied corrections in force for this card, as contested data (corrected vs published); ``emb`` is the
    assessment's own embodied data (`_inputs`), handed on rather than looked up again."""
    if w.gpu is None or d.resolve_variant(w.embodied_variant) == "published":
        return []
    emb, pub = emb or d.embodied(w.gpu.id, w.embodied_variant), d.embodied(w.gpu.id, "published")
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


def _use_vectors(w: Workload, warnings: list[str], sources: list[str]) -> tuple[electricity.UseFactors, np.ndarray]:
    """Per-kWh factors of the electricity (over INDICATORS, NaN = not available), with warnings."""
    uf = electricity.use_factors(w)
    elec = np.full(N_IND, np.nan)
    elec[: len(uf.value)] = uf.value
    sources += list(uf.sources)
    warnings += list(uf.notes)
    keys = cat.keys()
    nm = uf.not_modelled or (False,) * len(keys)
    na = [cat.by_key(k).name for i, k in enumerate(keys) if np.isnan(uf.value[i]) and not nm[i]]
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


def _inputs(d: Database, w: Workload, warnings: list[str], sources: list[str]) -> Inputs:
    """Embodied parts and their spread, host share, electricity factors of a workload (one embodied computation
    shared by the point estimate, the Monte Carlo and the variant check); warnings and sources appended."""
    if w.gpu is None:
        server = "the embodied impacts of its server" if w.host is not None else "no embodied impacts (hardware.host: none)"
        parts, emb = {}, Embodied("", f"{HOST_ONLY}: {server} (lca_data/host.yaml)", {}, ())
        warnings.append(
            f"{HOST_ONLY}: the footprint is the host's energy and the embodied impacts of its server, allocated by "
            "host-hours / (lifetime x utilisation); naming GPUs (hardware.gpu, hardware.count) is a what-if"
        )
    else:
        parts, emb, override_notes = embodied_parts(d, w)
        warnings += override_notes
        sources += list(emb.sources)
        if emb.method.startswith("ADEME parametric"):
            warnings.append(f"{w.gpu.name}: embodied impacts modelled with the ADEME parametric model, not measured")
        if w.gpu.proxy_of:
            warnings.append(f"{w.gpu.name}: card geometry proxied from {w.gpu.proxy_of} (estimate): {geometry_text(d, w.gpu)}")
        warnings.append("distribution (plane 9,908 km + truck 1,000 km) modelled with the ADEME per-kg.km factors")
        warnings += [f"{w.gpu.name}: {n}" for n in emb.notes if "correction" in n]
    host, host_block, host_dqr = _host_inputs(d, w, warnings, sources)
    uf, elec = _use_vectors(w, warnings, sources)
    not_modelled = _use_not_modelled(uf)
    if not_modelled[: len(cat.keys())].any():
        names = [cat.by_key(k).name for i, k in enumerate(cat.keys()) if not_modelled[i]]
        warnings.append(
            f"use phase not modelled for {', '.join(names)}: no open life-cycle per-kWh factor for any technology "
            f"of the mix ({uf.label}), so the use stage is reported as not modelled, never as 0, and no stage is called "
            "dominant"
        )
    site_water = electricity.site_water_factor(w)
    if site_water is not None:
        zone = electricity.zone(w.grid)
        sources += list(zone.aware.sources if zone.aware else ())
    if w.gpu is None:
        one = np.ones(N_IND)
        embodied, dqr, rsrc = Block.of(one, one, one, "lognormal", np.zeros(N_IND), shared=True), None, ()
    else:
        embodied, dqr, rsrc = _embodied_block(d, w, emb)
    return Inputs(parts, emb, host, uf, elec, not_modelled, site_water, embodied, dqr, host_block, host_dqr, rsrc)


def _host_inputs(
    d: Database, w: Workload, warnings: list[str], sources: list[str]
) -> tuple[np.ndarray, Block | None, tuple[dict[str, int] | None, ...]]:
    """The per-GPU host share (NaN: not available), its Monte Carlo block (one draw for every category: one server
    model's error) and its data-quality ratings; None and NaN when the scenario has no host."""
    if w.host is None:
        return np.full(N_IND, np.nan), None, ()
    hs = d.host_share(w.host)
    sources += hs.sources
    # without GPU the whole server is the run's (per GPU x the GPUs it holds), allocated by host_lifetimes
    k = hs.per_server if w.gpu is None else 1.0
    na = [cat.by_key(c).name for c in cat.keys() if np.isnan(hs.value[IDX[c]])]
    if na:
        warnings.append(
            f"host share (server around the GPU) not available for {len(na)} categories "
            f"({', '.join(na)}): their totals cover the GPU only"
        )
    if w.gpu is None:
        warnings.append(f"host: {hs.notes[0]}; a smaller machine (a workstation, a laptop) has less embodied in it")
    value, low, high = (np.nan_to_num(x) * k for x in (hs.value, hs.low, hs.high))
    block = Block.of(value, low, high, "lognormal", hs.sigma, shared=True)
    return hs.value * k, block, hs.dqr


def _embodied_block(d: Database, w: Workload, emb: Embodied) -> tuple[Block, dict[str, int], tuple[str, ...]]:
    """The per-GPU embodied multipliers (median 1; interval from the disagreeing sources widened by the dataset's
    data-quality rating; one draw for every category), the rating, and the sources of the interval."""
    m_lo, m_hi, rsrc = embodied_multipliers(d, w, emb)
    dqr = d.embodied_dqr(w.gpu, emb)
    sigma = np.full(N_IND, d.pedigree_sigma(dqr))
    for c in w.embodied_override:
        sigma[IDX[c]] = 0.0
    return Block.of(np.ones(N_IND), m_lo, m_hi, "lognormal", sigma, shared=True), dqr, tuple(rsrc)


def _use_not_modelled(uf: electricity.UseFactors) -> np.ndarray:
    """Categories whose per-kWh factor is missing for part of the mix (the open factors' not_modelled) or zero by
    construction (0 with a wider range or a partial scope, e.g. a practitioner's set)."""
    out = np.zeros(N_IND, bool)
    k = len(uf.value)
    zero = np.isfinite(uf.value) & (uf.value == 0)
    partial = np.array([bool(s) for s in uf.scope])
    out[:k] = zero & ((uf.high > 0) | partial)
    if uf.not_modelled:
        out[:k] |= np.array(uf.not_modelled, bool)
    out[len(cat.keys()) :] = True  # extras (primary energy): no per-kWh factor is modelled for the use phase
    return out


def assess(w: Workload, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Assessment:
    """Compute the full life-cycle assessment of a workload (one with `parts`, several GPU models: their sum)."""
    samples, seed = check_samples(samples, seed)
    if w.parts:
        return _assess_parts(w, samples, seed)
    d = db()
    warnings: list[str] = list(w.notes)
    sources: list[str] = ["ef-3.1", *w.sources]
    alloc = w.gpu_lifetimes
    inp = _inputs(d, w, warnings, sources)
    facility = w.it_energy_kwh * w.pue
    zone = electricity.zone(w.grid)

    results: dict[str, CategoryResult] = {}
    for c in cat.categories() + cat.extras():
        results[c.key] = _category(c, inp, alloc, facility, w)
    results.update(_with_long_term_sides(w, inp.uf, results, facility))
    _check_finite(w, {k: (r.total,) for k, r in results.items()})

    score_stats = None
    activity: dict[str, tuple[float, float]] = {}
    if samples and samples > 1:
        sources += inp.range_sources
        if w.host is not None:
            sources += ["ecoinvent-pedigree-v2"]
        drawn = montecarlo.draw(w, samples, seed, inp, _power_relative(d))
        summary = montecarlo.summarise(drawn)
        activity = _activity_ranges(w, drawn.activity)
        for c in cat.categories() + cat.extras():
            i = IDX[c.key]
            results[c.key] = results[c.key].with_stats(summary.q[:, i], summary.sensitivity[i], _votes(summary, i))
        _check_finite(w, {k: (r.low, r.high) for k, r in results.items()})
        score_stats = (summary.score_q, summary.score_sensitivity)
        warnings += _outside_iqr(results, summary)

    per, score = normalisation.normalise(results, score_stats)
    sources.append(normalisation.SOURCE)
    contested = [*inp.uf.contested, *contested_embodied(d, w, inp.emb)]
    water = _water(w, facility, warnings)
    materials = _materials(d, w)
    return Assessment(
        workload=w,
        impacts=results,
        facility_energy_kwh=facility,
        water_l=water,
        materials=materials,
        embodied_method=inp.emb.method,
        zone=zone,
        samples=samples,
        warnings=tuple(dict.fromkeys(warnings)),
        source_ids=tuple(dict.fromkeys(s for s in sources if s)),
        use_factors=inp.uf,
        contested=tuple(contested),
        normalised=per,
        single_score=score,
        activity_ranges=activity,
    )


def _assess_parts(w: Workload, samples: int, seed: int) -> Assessment:
    """The assessment of ``w`` as the sum of its parts' (each part a single-model Workload), with ``by_gpu_model``."""
    subs = tuple(assess(p, 0, seed) for p in w.parts)
    keys = [c.key for c in cat.categories() + cat.extras()]
    results = {k: mixed.sum_results([s.impacts[k] for s in subs]) for k in keys}
    warnings = [*w.notes, *(x for s in subs for x in s.warnings)]
    sources = [*(x for s in subs for x in s.source_ids)]
    score_stats = None
    if samples > 1:
        d = db()
        inputs = [_inputs(d, p, [], sources) for p in w.parts]
        sources += [x for inp in inputs for x in inp.range_sources] + (["ecoinvent-pedigree-v2"] if w.host else [])
        power = _power_relative(d)
        draws = [montecarlo.draw(p, samples, seed, inp, power) for p, inp in zip(w.parts, inputs, strict=True)]
        stages = np.sum([x.stages for x in draws], axis=0)
        summary = montecarlo.summarise(
            montecarlo.Draws(np.sum([x.totals for x in draws], axis=0), draws[0].inputs, stages=stages)
        )
        for k in keys:
            results[k] = results[k].with_stats(summary.q[:, IDX[k]], summary.sensitivity[IDX[k]], _votes(summary, IDX[k]))
        _check_finite(w, {k: (r.low, r.high) for k, r in results.items()})
        score_stats = (summary.score_q, summary.score_sensitivity)
        warnings += _outside_iqr(results, summary)
        warnings.append(
            "mixed GPU models: the Monte Carlo draws every model with the same random numbers and sums the draws; "
            f"the sensitivity table names the inputs as drawn for the largest group ({w.parts[0].gpu.name})"
        )
    per, score = normalisation.normalise(results, score_stats)
    sources.append(normalisation.SOURCE)
    first = subs[0]
    return replace(
        first,
        workload=w,
        impacts=results,
        facility_energy_kwh=sum(s.facility_energy_kwh for s in subs),
        water_l={k: mixed.sum_values([s.water_l[k] for s in subs]) for k in first.water_l},
        materials=mixed.sum_materials(w, subs),
        embodied_method="; ".join(dict.fromkeys(f"{s.workload.gpu.name}: {s.embodied_method}" for s in subs)),
        samples=samples,
        warnings=tuple(dict.fromkeys(warnings)),
        source_ids=tuple(dict.fromkeys(s for s in sources if s)),
        contested=tuple({repr(c): c for s in subs for c in s.contested}.values()),
        normalised=per,
        single_score=score,
        parts=subs,
    )


LONG_TERM_SHOWN = ("eutrophication_freshwater", "ionising_radiation")  # both settings side by side in reports


def _with_long_term_sides(
    w: Workload, uf: electricity.UseFactors, results: dict[str, CategoryResult], facility: float
) -> dict[str, CategoryResult]:
    """Freshwater eutrophication and ionising radiation with their use stage under both settings of
    site.long_term_emissions (the one counted, and the other), for --details and the report. Open factors only: a
    practitioner's file has its own treatment."""
    if w.electricity_factors is not None:
        return {}
    sets = {s: electricity.use_factors(w, s) for s in (electricity.LT_EXCLUDE, electricity.LT_INCLUDE)}
    keys = cat.keys()
    out = {}
    for k in LONG_TERM_SHOWN:
        i = keys.index(k)
        sides: dict[str, Any] = {"counted": w.long_term_emissions}
        for s, f in sets.items():
            v = f.value[i]
            sides[s] = None if not np.isfinite(v) or f.not_modelled[i] else float(facility * v)
            sides[f"{s}_scope"] = f.scope[i] or "complete"
            sides[f"{s}_long_term"] = f.long_term[i]
        out[k] = replace(results[k], use_long_term=sides)
    return out


def _votes(summary: montecarlo.Summary, i: int) -> dict[str, float] | None:
    """Each stage's share of the draws in which it is the largest, for one indicator."""
    if summary.stage_votes is None:
        return None
    return {s: float(summary.stage_votes[j, i]) for j, s in enumerate(cat.stages())}


def _outside_iqr(results: dict[str, CategoryResult], summary: montecarlo.Summary) -> list[str]:
    """A warning for each central value outside its own interquartile range: some input's central value is a bound."""
    out = []
    named = [(r.name, r.total, r.iqr, r.sensitivity) for r in results.values() if r.iqr is not None]
    q = summary.score_q
    central = float(normalisation.single_scores(np.array([results[k].total for k in cat.keys()])))
    named.append(("Single score", central, (float(q[1]), float(q[3])), summary.score_sensitivity))
    for name, total, iqr, sens in named:
        if not iqr[0] <= total <= iqr[1]:
            side = "below" if total < iqr[0] else "above"
            top = (sens or {}).get("inputs") or [{}]
            out.append(
                f"{name}: the central value is {side} its own interquartile range: a factor's central value is at the "
                f"{'low' if side == 'below' else 'high'} end of its range (largest driver: {top[0].get('input', 'n/a')})"
            )
    return out


def _power_relative(d: Database) -> float:
    return float(d.ranges.get("power", {}).get("relative", 0.0))


def monte_carlo_totals(w: Workload, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> np.ndarray:
    """The Monte Carlo draws behind `assess`'s low-high: totals of every indicator (samples x indicators, in
    `database.INDICATORS` order), for callers that sum workloads before taking percentiles (fleet ranges)."""
    samples, seed = check_samples(samples, seed)
    if w.parts:  # several GPU models: their draws, one seed (common random numbers), summed draw by draw
        return np.sum([monte_carlo_totals(p, samples, seed) for p in w.parts], axis=0)
    d = db()
    return montecarlo.draw(w, max(samples, 1), seed, _inputs(d, w, [], []), _power_relative(d)).totals


def _check_finite(w: Workload, values: dict[str, tuple[float, ...]]) -> None:
    """Inputs that are each finite can multiply past floating point (1e308 kg CO2 eq/kWh x 1e6 kWh): one error, never inf."""
    for key, vs in values.items():
        if any(not math.isfinite(v) for v in vs if v is not None):
            raise ScenarioError(
                f"the {key} result is beyond floating point: a stated number is far out of scale (check units and magnitudes)",
                w.source,
                key,
            )


def _category(c: cat.Category, inp: Inputs, alloc: float, facility: float, w: Workload) -> CategoryResult:
    """One category's totals by stage and component (None = not available or not modelled, never zero)."""
    i = IDX[c.key]
    by_comp: dict[str, float | None] = {}
    by_stage: dict[str, float | None] = {s: 0.0 for s in cat.stages()}
    for (comp, stage), arr in inp.parts.items():
        v = float(arr[i] * alloc)
        by_comp[comp] = by_comp.get(comp, 0.0) + v
        by_stage[stage] += v
    not_available, not_modelled = [], []
    if w.host is not None:
        if np.isnan(inp.host[i]):
            by_comp["host_share"] = None
            not_available.append("host_share")
        else:
            v = float(inp.host[i] * (w.host_lifetimes if w.gpu is None else alloc))
            by_comp["host_share"] = v
            by_stage["manufacturing"] += v
    if w.gpu is None:  # the host model gives manufacturing only: its transport and end of life are not available
        by_stage["transport"] = by_stage["end_of_life"] = None
        not_available += ["transport", "end_of_life"]
    if inp.use_not_modelled[i]:
        by_stage["use"] = None
        if c.key in cat.keys():
            by_comp["electricity"] = None
        not_modelled.append("use")
    elif np.isnan(inp.elec[i]):
        by_stage["use"] = by_comp["electricity"] = None
        not_available.append("use")
    else:
        by_stage["use"] = by_comp["electricity"] = float(facility * inp.elec[i])
    if c.key == "water_use":
        if inp.site_water is None:
            by_comp["on_site_water"] = None
            not_available.append("on_site_water")
        else:
            by_comp["on_site_water"] = float(w.it_energy_kwh * inp.site_water[0])
            by_stage["use"] = (by_stage["use"] or 0.0) + by_comp["on_site_water"]
    total = float(sum(v for v in by_stage.values() if v is not None))
    keys = cat.keys()
    method = inp.uf.characterisation[keys.index(c.key)] if c.key in keys and inp.uf.characterisation else ""
    bound = c.key in keys and bool(inp.uf.lower_bound) and inp.uf.lower_bound[keys.index(c.key)]
    return CategoryResult(
        c.key,
        c.name,
        c.unit,
        total,
        by_stage,
        by_comp,
        total,
        total,
        tuple(not_available),
        not_modelled=tuple(not_modelled),
        characterisation=method,
        lower_bound=("use",) if bound else (),
    )


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
    """Hardware mass a run consumes (GPU lifetimes x card mass), with cited composition facts; a run without GPU
    consumes server lifetimes, whose mass the host model does not state ("not available")."""
    g = w.gpu
    if g is None:
        return {
            "gpu_lifetimes": 0.0,
            "gpu_equivalents": 0,
            "host_lifetimes": w.host_lifetimes,
            "mass_consumed_kg": None,
            "geometry": None,
            "note": f"{HOST_ONLY}: server lifetimes consumed = host-hours / (lifetime x utilisation)",
        }
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
        "geometry": geometry_text(d, g),
        "geometry_proxy_of": g.proxy_of,
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


SHAPE_FIELDS = {"total_mass": "mass", "casing_mass": "casing", "heatsink_mass": "heatsink", "board_area": "board area"}


def geometry_text(d: Database, g: Any) -> str:
    """Whose shape (masses, board area) a card's embodied model uses: its own, or another card's, said as such."""
    if not g.proxy_of:
        return f"{g.name}'s own published geometry (ADEME gpus.json)"
    other = d.gpus[g.proxy_of].name if g.proxy_of in d.gpus else g.proxy_of
    p = g.raw.get("parametric") or {}
    borrowed = [v for k, v in SHAPE_FIELDS.items() if (p.get(k) or {}).get("source") == "ademe-gpu-lca"]
    own = [v for k, v in SHAPE_FIELDS.items() if k in p and v not in borrowed]
    text = f"{', '.join(borrowed)} of the {other} (not published for the {g.name}; estimate)"
    return text + f"; own {', '.join([*own, 'die', 'memory'])}"


def gpu_equivalents(flops: float, peak_flops: float, mfu: float, lifetime_h: float, utilization: float = 1.0) -> int:
    """Falk et al.'s GPU-equivalents: ceil(FLOPs / (peak x MFU x lifetime x utilisation))."""
    return math.ceil(flops / (peak_flops * mfu * lifetime_h * 3600 * utilization) - 1e-9)
