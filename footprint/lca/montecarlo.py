"""The engine's Monte Carlo: what is drawn, in which order, and what the draws give back.

Inputs drawn (each stated with its distribution, `footprint.lca.uncertainty`):
- the GPU's embodied impacts, one multiplier per category: two-piece lognormal, median 1, its 95 %
  interval spanning the sources that disagree (`engine.embodied_multipliers`) widened by the pedigree
  spread of the dataset's EF data-quality rating (lca_data/embodied_ranges.yaml, data_quality);
- the host share per category: two-piece lognormal between its model's low and high (lca_data/host_impacts.csv)
  widened by its rating's pedigree spread.
  Each of these two is one model's error (one card dataset against its alternatives, one server model): a
  single draw puts every category at the same quantile of its own interval (comonotonic), so sums across
  categories, the single score, keep their central value at their median as far as these inputs go;
- every per-kWh electricity factor: its stated distribution (default lognormal) over its 95 % interval;
- power (NVML accuracy, triangular) and the scenario's own `uncertainty:` ranges (triangular, mode at
  the stated value); the site's cooling water (WUE x AWARE, triangular).

The draws come in a fixed order and shape for a given factor set, so two workloads of one factor set drawn
with one seed share their random numbers: totals are linear in GPU-hours and energy draw by draw
(footprint.lca.batch relies on it). `summarise` gives each indicator's 2.5/25/50/75/97.5 percentiles and,
from the same draws, the sensitivity table and each stage's share of the draws in which it is the largest (a stage is
called dominant only where at least 90 % of the draws agree: `assessment.DOMINANCE_SHARE`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from footprint.lca import categories as cat
from footprint.lca import electricity, normalisation
from footprint.lca.database import IDX, N_IND, Embodied, db
from footprint.lca.uncertainty import Block, Input, pedigree_sigma, sensitivity
from footprint.lca.workload_data import Workload

PERCENTILES = (2.5, 25.0, 50.0, 75.0, 97.5)


@dataclass(frozen=True)
class Inputs:
    """What the central result and the Monte Carlo of one workload are computed from (built once)."""

    parts: dict[tuple[str, str], np.ndarray]  # (component, stage) -> per-GPU embodied impacts
    emb: Embodied
    host: np.ndarray  # per-GPU host share (NaN: not available)
    uf: electricity.UseFactors
    elec: np.ndarray  # per-kWh factors over INDICATORS (NaN: not available)
    use_not_modelled: np.ndarray  # bool per indicator: the use phase is not modelled (never drawn)
    site_water: tuple[float, float, float] | None
    embodied: Block  # per-indicator multiplier of the per-GPU embodied impacts (central 1)
    embodied_dqr: dict[str, int] | None
    host_block: Block | None  # per-GPU host share per indicator
    host_dqr: tuple[dict[str, int] | None, ...]
    range_sources: tuple[str, ...]


@dataclass(frozen=True)
class Draws:
    totals: np.ndarray  # (samples, indicators)
    inputs: tuple[Input, ...]
    activity: dict[str, np.ndarray] = field(default_factory=dict)  # GPU-hours, IT and facility kWh per draw (headline)
    stages: np.ndarray | None = None  # (stages, samples, indicators): each stage's total per draw, cat.stages() order


@dataclass(frozen=True)
class Summary:
    """Per indicator the percentiles (PERCENTILES x indicators), the single score's, and the sensitivity tables."""

    q: np.ndarray
    score_q: np.ndarray
    sensitivity: list[dict[str, Any]]
    score_sensitivity: dict[str, Any]
    stage_votes: np.ndarray | None = None  # (stages, indicators): share of the draws in which each stage is largest


def _tri(rng: np.random.Generator, lo: float, mode: float, hi: float, n: int) -> np.ndarray:
    """Triangular draws; a degenerate range gives its one value (numpy refuses left == right)."""
    if hi <= lo:
        return np.full(n, float(lo))
    return rng.triangular(lo, min(max(mode, lo), hi), hi, n)


def _use_block(inp: Inputs) -> tuple[Block, tuple[str, ...]]:
    """The per-kWh factors as one block over the 16 categories (a not-available or not-modelled one: 0, fixed)."""
    uf = inp.uf
    k = len(uf.value)
    ok = np.isfinite(uf.value) & ~inp.use_not_modelled[:k]
    value = np.where(ok, uf.value, 0.0)
    low = np.where(ok, uf.low, 0.0)
    high = np.where(ok, uf.high, 0.0)
    kinds = tuple(uf.distribution or ("",) * k)
    kinds = tuple((kd or "lognormal") if good else "lognormal" for kd, good in zip(kinds, ok, strict=True))
    return Block.of(value, low, high, kinds, _use_pedigree(uf, value, low, high)), kinds


def _use_pedigree(uf: electricity.UseFactors, value: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray | None:
    """Pedigree sigma of the electricity factors that state a DQR but no spread (low == value == high)."""
    dqrs = uf.dqr
    if not dqrs:
        return None
    factors = db().pedigree_factors
    single = (low == value) & (value == high)
    return np.array([pedigree_sigma(q, factors) if s and q else 0.0 for q, s in zip(dqrs, single, strict=True)])


def draw(w: Workload, n: int, seed: int, inp: Inputs, power_relative: float) -> Draws:
    """``n`` draws of every indicator's total, and the inputs drawn (for the sensitivity table)."""
    rng = np.random.default_rng(seed)
    r = w.ranges
    emb = np.sum(list(inp.parts.values()), axis=0)  # per GPU, incl. distribution
    mult = inp.embodied.draw(rng, n)
    host = inp.host_block.draw(rng, n) if inp.host_block is not None else np.zeros((n, N_IND))
    shared: list[Input] = []

    def ranged(key: str, label: str, central: float) -> np.ndarray:
        if key in r:
            lo, hi = r[key]
            x = _tri(rng, lo, central, hi, n)
            shared.append(Input(label, x, "triangular (scenario range)", lo, hi))
            return x
        return np.full(n, central)

    gpu_hours = ranged("gpu_hours", "GPU-hours", w.gpu_hours)
    if w.mfu is not None and "mfu" in r:
        gpu_hours = gpu_hours * w.mfu / ranged("mfu", "MFU", w.mfu)
    life = ranged("lifetime", "lifetime", w.lifetime_h) * ranged("utilization", "utilisation", w.utilization)
    alloc = gpu_hours / life
    host_alloc = alloc if w.gpu is not None else w.host_hours / life  # without GPU: the whole server by host-hours
    if w.power_per_gpu_w is not None and "power_per_gpu" in r:
        power_mult = ranged("power_per_gpu", "power per GPU", w.power_per_gpu_w) / w.power_per_gpu_w
    else:
        power_mult = _tri(rng, 1 - power_relative, 1.0, 1 + power_relative, n)
        if power_relative > 0:
            shared.append(
                Input("power (meter accuracy)", power_mult, "triangular", 1 - power_relative, 1 + power_relative, "x stated")
            )
    it = w.it_energy_kwh * power_mult
    if "GPU-hours x power" in w.energy_method and w.gpu_hours:
        it = it * gpu_hours / w.gpu_hours
    facility = it * ranged("pue", "PUE", w.pue)
    block, kinds = _use_block(inp)
    k = block.value.size
    el = np.zeros((n, N_IND))
    el[:, :k] = block.draw(rng, n)
    ci = IDX["climate_change"]
    if "carbon_intensity" in r:
        lo, hi = r["carbon_intensity"]
        el[:, ci] = _tri(rng, lo, inp.elec[ci], hi, n)
    use = facility[:, None] * el
    if inp.site_water is not None:
        sw = inp.site_water
        water = _tri(rng, sw[1], sw[0], sw[2], n)
        use[:, IDX["water_use"]] += it * water
        shared.append(
            Input(
                "site cooling water (WUE x AWARE)",
                water,
                "triangular",
                sw[1],
                sw[2],
                "m3 world eq per kWh IT",
                categories=frozenset({IDX["water_use"]}),
            )
        )
    activity = {"gpu_hours": gpu_hours, "it_energy_kwh": it, "facility_energy_kwh": facility}
    stages = _stage_draws(inp, mult, host, alloc, host_alloc, use)
    totals = stages.sum(axis=0)  # the stages add up to the total, draw by draw: one formula for both
    drawn = _per_category_inputs(inp, emb, mult, host, el, kinds, block)
    if w.gpu is None:  # no GPU: no embodied GPU impacts to rank among the drivers
        drawn = drawn[1:]
    return Draws(totals, (*drawn, *shared), activity, stages)


def _stage_draws(
    inp: Inputs, mult: np.ndarray, host: np.ndarray, alloc: np.ndarray, host_alloc: np.ndarray, use: np.ndarray
) -> np.ndarray:
    """Each life-cycle stage's total per draw (stages x samples x indicators), as the engine's ``_category`` splits
    the central values: the embodied parts by their stage, the host share in manufacturing, electricity in use."""
    names = cat.stages()
    per_stage = np.zeros((len(names), N_IND))
    for (_, stage), arr in inp.parts.items():
        per_stage[names.index(stage)] += arr
    out = per_stage[:, None, :] * mult[None, :, :] * alloc[None, :, None]
    out[names.index("manufacturing")] += host * host_alloc[:, None]
    out[names.index("use")] += use
    return out


def stage_votes(stages: np.ndarray) -> np.ndarray:
    """Share of the draws in which each stage is the largest (by magnitude), per indicator (stages x indicators)."""
    size = np.abs(stages)
    best, winner = size[0].copy(), np.zeros(size.shape[1:], np.int8)  # samples x indicators; ties: the first stage
    for s in range(1, size.shape[0]):
        winner[size[s] > best] = s
        np.maximum(best, size[s], out=best)
    return np.stack([(winner == s).mean(axis=0) for s in range(size.shape[0])])


def _per_category_inputs(
    inp: Inputs, emb: np.ndarray, mult: np.ndarray, host: np.ndarray, el: np.ndarray, kinds: tuple[str, ...], block: Block
) -> list[Input]:
    units = [c.unit for c in cat.categories() + cat.extras()]
    lo95, hi95 = inp.embodied.interval()
    out = [
        Input(
            "GPU embodied impacts",
            mult,
            "lognormal",
            emb * lo95,
            emb * hi95,
            [f"{u} per GPU" for u in units],
            inp.embodied_dqr,
            shared=inp.embodied.shared,
        )
    ]
    if inp.host_block is not None:
        hlo, hhi = inp.host_block.interval()
        out.append(
            Input(
                "host share (server around the GPU)",
                host,
                "lognormal",
                hlo,
                hhi,
                [f"{u} per GPU" for u in units],
                _first(inp.host_dqr),
                shared=inp.host_block.shared,
            )
        )
    k = block.value.size
    lo, hi = block.interval()
    pad = N_IND - k
    out.append(
        Input(
            "electricity factor (per kWh)",
            el,
            "per factor",
            np.concatenate([lo, np.zeros(pad)]),
            np.concatenate([hi, np.zeros(pad)]),
            [f"{u}/kWh" for u in units],
            None,
            kinds=(*kinds, *("",) * pad),
        )
    )
    return out


def _first(dqrs: tuple[dict[str, int] | None, ...]) -> dict[str, int] | None:
    return next((q for q in dqrs if q), None)


def percentiles(x: np.ndarray) -> np.ndarray:
    """PERCENTILES of each column (numpy's default linear interpolation), from one sort."""
    s = np.sort(x, axis=0)
    pos = np.array(PERCENTILES) / 100 * (len(s) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(s) - 1)
    frac = (pos - lo)[:, None]
    return s[lo] * (1 - frac) + s[hi] * frac


def summarise(d: Draws) -> Summary:
    """Percentiles of every indicator and of the single score, and the sensitivity tables, from one set of draws."""
    scores = normalisation.single_scores(d.totals)
    q = percentiles(np.column_stack([d.totals, scores]))
    per, score = sensitivity(d.totals, scores, d.inputs, len(cat.keys()))
    votes = stage_votes(d.stages) if d.stages is not None else None
    return Summary(q[:, :-1], q[:, -1], per, score, votes)
