"""A run with several GPU models, assessed per model and summed (`Workload.parts`, built by `workload_from_run`):
how the parts' results add up. The engine (`footprint.lca.engine.assess`) assesses each part and draws the Monte
Carlo, then sums with these functions; this module does not import the engine (no circle).

Each part is one GPU model's devices: its own card's embodied impacts allocated by its own GPU-hours, its own
share of the measured energy. The central result is the sum of the parts' own assessments. The Monte Carlo draws
every part with one seed: the parts share one factor set's structure (the run's site), so they share their random
numbers (one grid, one embodied-model error, one meter error move every part at once) and the totals are summed
draw by draw before the percentiles are taken, as `footprint.lca.batch` sums the jobs of a fleet.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.workload_data import Workload


def sum_values(values: list[float | None]) -> float | None:
    """The sum, or None (not available) where any part's value is not available: a partial sum is never a total."""
    return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def sum_results(rs: list[CategoryResult]) -> CategoryResult:
    by_stage = {s: sum_values([r.by_stage.get(s) for r in rs]) for s in dict.fromkeys(s for r in rs for s in r.by_stage)}
    by_comp = {c: sum_values([r.by_component.get(c) for r in rs]) for c in dict.fromkeys(c for r in rs for c in r.by_component)}
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
        use_long_term=_sum_long_term([r.use_long_term for r in rs]),
    )


def _sum_long_term(sides: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The use stage both ways of long-term emissions, summed over the parts (one site: the same factors, the same
    scope); None where a part has none."""
    if not sides or any(s is None for s in sides):
        return None
    out = dict(sides[0])  # type: ignore[arg-type]
    for k in ("exclude", "include"):
        out[k] = sum_values([s[k] for s in sides])  # type: ignore[index]
    return out


def sum_materials(w: Workload, subs: tuple[Assessment, ...]) -> dict[str, Any]:
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
