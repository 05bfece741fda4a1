"""A run with several GPU models, assessed per model and summed (`Workload.parts`, built by `workload_from_run`).

Each part is one GPU model's devices: its own card's embodied impacts allocated by its own GPU-hours, its own
share of the measured energy. The central result is the sum of the parts' own assessments. The Monte Carlo draws
every part with one seed: the parts share one factor set's structure (the run's site), so they share their random
numbers (one grid, one embodied-model error, one meter error move every part at once) and the totals are summed
draw by draw before the percentiles are taken, as `footprint.lca.batch` sums the jobs of a fleet.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from footprint.lca import categories as cat
from footprint.lca import engine, montecarlo, normalisation
from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.database import IDX, db
from footprint.lca.workload import Workload


def assess_parts(w: Workload, samples: int, seed: int) -> Assessment:
    """The assessment of ``w`` as the sum of its parts' (each part a single-model Workload), with ``by_gpu_model``."""
    subs = tuple(engine.assess(p, 0, seed) for p in w.parts)
    keys = [c.key for c in cat.categories() + cat.extras()]
    results = {k: _sum_results([s.impacts[k] for s in subs]) for k in keys}
    warnings = [*w.notes, *(x for s in subs for x in s.warnings)]
    sources = [*(x for s in subs for x in s.source_ids)]
    score_stats = None
    if samples > 1:
        d = db()
        inputs = [engine._inputs(d, p, [], sources) for p in w.parts]
        sources += [x for inp in inputs for x in inp.range_sources] + (["ecoinvent-pedigree-v2"] if w.host else [])
        power = engine._power_relative(d)
        draws = [montecarlo.draw(p, samples, seed, inp, power) for p, inp in zip(w.parts, inputs, strict=True)]
        summary = montecarlo.summarise(montecarlo.Draws(np.sum([x.totals for x in draws], axis=0), draws[0].inputs))
        for k in keys:
            results[k] = results[k].with_stats(summary.q[:, IDX[k]], summary.sensitivity[IDX[k]])
        engine._check_finite(w, {k: (r.low, r.high) for k, r in results.items()})
        score_stats = (summary.score_q, summary.score_sensitivity)
        warnings += engine._outside_iqr(results, summary)
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
        water_l={k: _sum([s.water_l[k] for s in subs]) for k in first.water_l},
        materials=_sum_materials(w, subs),
        embodied_method="; ".join(dict.fromkeys(f"{s.workload.gpu.name}: {s.embodied_method}" for s in subs)),
        samples=samples,
        warnings=tuple(dict.fromkeys(warnings)),
        source_ids=tuple(dict.fromkeys(s for s in sources if s)),
        contested=tuple({repr(c): c for s in subs for c in s.contested}.values()),
        normalised=per,
        single_score=score,
        parts=subs,
    )


def _sum(values: list[float | None]) -> float | None:
    """The sum, or None (not available) where any part's value is not available: a partial sum is never a total."""
    return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def _sum_results(rs: list[CategoryResult]) -> CategoryResult:
    by_stage = {s: _sum([r.by_stage.get(s) for r in rs]) for s in dict.fromkeys(s for r in rs for s in r.by_stage)}
    by_comp = {c: _sum([r.by_component.get(c) for r in rs]) for c in dict.fromkeys(c for r in rs for c in r.by_component)}
    total = float(sum(r.total for r in rs))
    return replace(
        rs[0],
        total=total,
        by_stage=by_stage,
        by_component=by_comp,
        low=total,
        high=total,
        not_available=tuple(dict.fromkeys(x for r in rs for x in r.not_available)),
        not_modelled=tuple(dict.fromkeys(x for r in rs for x in r.not_modelled)),
    )


def _sum_materials(w: Workload, subs: tuple[Assessment, ...]) -> dict[str, Any]:
    """Hardware consumed summed over the models; card and part masses are their means weighted by GPU lifetimes, so
    that mass x lifetimes stays the hardware consumed for every front end."""
    ms = [s.materials for s in subs]
    life = sum(m["gpu_lifetimes"] for m in ms)

    def mean(get: Any) -> float:
        return sum(get(m) * m["gpu_lifetimes"] for m in ms) / life if life > 0 else get(ms[0])

    out = dict(ms[0])
    out.update(
        card_mass_kg=mean(lambda m: m["card_mass_kg"]),
        components_kg={k: mean(lambda m, k=k: m["components_kg"].get(k) or 0.0) for k in ms[0]["components_kg"]},
        gpu_lifetimes=life,
        gpu_equivalents=w.gpu_equivalents,
        mass_consumed_kg=sum(m["mass_consumed_kg"] for m in ms),
        mass_gpu_equivalents_kg=sum(m["mass_gpu_equivalents_kg"] for m in ms),
        estimate=any(m["estimate"] for m in ms),
        geometry="; ".join(m["geometry"] for m in ms),
        geometry_proxy_of=next((m["geometry_proxy_of"] for m in ms if m["geometry_proxy_of"]), None),
        note=ms[0]["note"] + "; several GPU models: card and part masses are their means weighted by GPU lifetimes",
    )
    est = [m.get("elements_estimate") for m in ms]
    if all(est):
        els = {e: {b: sum(x["elements"][e][b] for x in est) for b in ("low_kg", "high_kg")} for e in est[0]["elements"]}
        out["elements_estimate"] = {**est[0], "elements": els}
    else:
        out.pop("elements_estimate", None)
    return out
