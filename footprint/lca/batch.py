"""Batch assessment: thousands of workloads that share factor lookups, assessed as arrays.

A fleet has thousands of jobs but a handful of distinct *factor sets*: the same GPU model, site,
lifetime and host model. For a fixed factor set the engine's central result is linear in the two
things a job changes, its GPU-hours (host-hours for a run without GPU) and its IT energy (embodied = per-GPU impacts x GPU-hours /
(lifetime x utilisation); use = IT energy x PUE x per-kWh factors; water likewise). So instead of
re-implementing any formula, `assess_many` runs the engine itself (`engine.assess`, no Monte Carlo)
twice per factor set, on one GPU-hour without energy and on one kWh without GPU time, and every
workload's result is ``gpu_hours x the first + it_energy_kwh x the second``. The engine's factor
functions stay the one source of truth: whatever they become, the batch follows, and
`BatchAssessment.assessment(i)` rebuilds the full `Assessment` of workload ``i`` so that tests can
check it equals `assess(w, samples=0)` workload by workload.

Uncertainty ranges of *sums* (a group of jobs, the whole fleet) use the same linearity on the Monte Carlo
draws: `Basis.draws` runs the engine's Monte Carlo (`engine.monte_carlo_totals`) on the two unit workloads
with one seed, so a workload's draws are ``gpu_hours x A + it_energy_kwh x B`` exactly, and a group's
draws are the sum of its workloads' before the percentiles are taken (`GroupSums.ranges`). Every factor
set is drawn with the same random numbers: a shared factor (a zone's grid, the embodied model) moves
every job at once, as it does in reality, and the group's range is not narrowed by pretending the jobs'
factors are independent. A workload's own ``ranges`` (a stated GPU-hours or PUE interval) are not part
of it: assess that workload alone for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, CategoryResult
from footprint.lca.workload_data import Workload

#: Workload fields that do not change the central result of the engine for given GPU-hours and
#: IT energy (names, methods, model shape, Monte Carlo ranges, notes): everything else defines a
#: factor set. Listing what is *excluded* keeps a new site or hardware field in the key by default.
PER_WORKLOAD_FIELDS = frozenset(
    {
        "name",
        "count",
        "gpu_hours",
        "host_hours",  # a host-only workload's hours: its "GPU-hours" column here (`hours_of`)
        "gpu_hours_method",
        "it_energy_kwh",
        "energy_method",
        "power_per_gpu_w",
        "flops",
        "mfu",
        "mfu_method",
        "dtype",
        "model",
        "ranges",
        "source",
        "description",
        "notes",
        "sources",
    }
)
WATER_KEYS = ("on_site", "off_site", "total")


def hours_of(w: Workload) -> float:
    """The hours a workload's embodied impacts scale with: GPU-hours, or host-hours for a run without GPU."""
    return w.host_hours if w.host_only else w.gpu_hours


def with_hours(w: Workload, hours: float, it_energy_kwh: float) -> Workload:
    """``w`` with these hours (GPU-hours, or host-hours for a run without GPU) and this IT energy."""
    if w.host_only:
        return w.with_(host_hours=hours, it_energy_kwh=it_energy_kwh)
    return w.with_(gpu_hours=hours, it_energy_kwh=it_energy_kwh)


def factor_key(w: Workload) -> tuple[Any, ...]:
    """What identifies a workload's factor set (hashable)."""

    def frozen(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted((k, frozen(x)) for k, x in v.items()))
        if isinstance(v, (list, tuple)):
            return tuple(frozen(x) for x in v)
        return getattr(v, "id", v)

    return tuple(frozen(getattr(w, f.name)) for f in fields(w) if f.name not in PER_WORKLOAD_FIELDS)


@dataclass(frozen=True)
class Basis:
    """One factor set: the engine's result for one GPU-hour (one host-hour for a run without GPU; no energy) and for
    one kWh (no GPU time)."""

    template: Workload
    per_gpu_hour: Assessment
    per_kwh: Assessment
    _draws: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, compare=False, repr=False)

    def draws(self, samples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Monte Carlo totals (samples x indicators) of one GPU-hour and of one kWh, drawn with one seed (cached)."""
        from footprint.lca.engine import monte_carlo_totals

        key = (samples, seed)
        cache = self._draws
        if key not in cache:
            clean = self.template.with_(notes=(), sources=(), ranges={})
            cache[key] = (
                monte_carlo_totals(with_hours(clean, 1.0, 0.0), samples, seed),
                monte_carlo_totals(with_hours(clean, 0.0, 1.0), samples, seed),
            )
        return cache[key]

    @staticmethod
    def of(template: Workload) -> Basis:
        from footprint.lca.engine import assess

        clean = template.with_(notes=(), sources=())
        return Basis(
            template,
            assess(with_hours(clean, 1.0, 0.0), samples=0),
            assess(with_hours(clean, 0.0, 1.0), samples=0),
        )


def _linear(a: float | None, b: float | None, what: str) -> tuple[float, float] | None:
    if a is None and b is None:
        return None
    if a is None or b is None:  # pragma: no cover - guards the linearity assumption against engine changes
        raise ValueError(f"{what}: available per GPU-hour but not per kWh (or the reverse); the engine is no longer linear")
    return float(a), float(b)


@dataclass(frozen=True)
class Entry:
    """Where one number of an Assessment lives, and its (per GPU-hour, per kWh) coefficients."""

    path: tuple[str, ...]  # ("impacts", key, "total") | ("impacts", key, "by_stage", s) | ...
    coef: tuple[float, float] | None  # None: not available for this factor set


def _entries(basis: Basis) -> dict[tuple[str, ...], tuple[float, float] | None]:
    a, b = basis.per_gpu_hour, basis.per_kwh
    out: dict[tuple[str, ...], tuple[float, float] | None] = {}
    for key, ra in a.impacts.items():
        rb = b.impacts[key]
        out[("impacts", key, "total")] = _linear(ra.total, rb.total, key)
        for s in ra.by_stage:
            out[("impacts", key, "by_stage", s)] = _linear(ra.by_stage[s], rb.by_stage.get(s), f"{key}.{s}")
        for c in ra.by_component:
            out[("impacts", key, "by_component", c)] = _linear(ra.by_component[c], rb.by_component.get(c), f"{key}.{c}")
    out[("facility_energy_kwh",)] = _linear(a.facility_energy_kwh, b.facility_energy_kwh, "facility energy")
    for k in WATER_KEYS:
        out[("water_l", k)] = _linear(a.water_l.get(k), b.water_l.get(k), f"water {k}")
    return out


class BatchAssessment:
    """Central results of many workloads: per-row drivers plus per-factor-set coefficients.

    Rows are never expanded into Assessment objects unless asked (`assessment(i)`): totals, any
    stage or component, and sums over groups of rows are array operations.
    """

    def __init__(
        self,
        bases: Sequence[Basis],
        template_index: np.ndarray,
        gpu_hours: np.ndarray,
        it_energy_kwh: np.ndarray,
        workloads: Sequence[Workload] | None = None,
    ) -> None:
        self.bases = list(bases)
        self.template_index = np.asarray(template_index, dtype=np.int64)
        self.gpu_hours = np.asarray(gpu_hours, dtype=float)
        self.it_energy_kwh = np.asarray(it_energy_kwh, dtype=float)
        n = len(self.template_index)
        if not (len(self.gpu_hours) == len(self.it_energy_kwh) == n):
            raise ValueError("template_index, gpu_hours and it_energy_kwh must have the same length")
        if n and (self.template_index.min() < 0 or self.template_index.max() >= len(self.bases)):
            raise ValueError("template_index out of range")
        self._workloads = list(workloads) if workloads is not None else None
        self._entries = [_entries(b) for b in self.bases]
        paths: dict[tuple[str, ...], None] = {}
        for e in self._entries:
            paths.update(dict.fromkeys(e))
        self.paths = list(paths)
        self._col = {p: i for i, p in enumerate(self.paths)}
        t, m = len(self.bases), len(self.paths)
        self._a = np.full((t, m), np.nan)  # per GPU-hour
        self._b = np.full((t, m), np.nan)  # per kWh IT
        for ti, e in enumerate(self._entries):
            for p, coef in e.items():
                if coef is not None:
                    self._a[ti, self._col[p]], self._b[ti, self._col[p]] = coef

    def __len__(self) -> int:
        return len(self.template_index)

    # ---- per row ----------------------------------------------------------------------------------
    def column(self, *path: str) -> np.ndarray:
        """One number for every row, e.g. ``column("impacts", "climate_change", "by_stage", "use")``; NaN = n/a."""
        if tuple(path) not in self._col:
            if not self.bases:
                return np.zeros(0)
            raise KeyError(f"no number at {'.'.join(path)} (known: impacts.<category>.total|by_stage.<s>|by_component.<c>, ...)")
        j = self._col[tuple(path)]
        idx = self.template_index
        return self.gpu_hours * self._a[idx, j] + self.it_energy_kwh * self._b[idx, j]

    def total(self, key: str) -> np.ndarray:
        """A category's (or extra's) total for every row."""
        return self.column("impacts", key, "total")

    def totals(self) -> dict[str, np.ndarray]:
        return {c.key: self.total(c.key) for c in cat.categories() + cat.extras()}

    def single_score(self) -> np.ndarray:
        """EF 3.1 single score (Pt) of every row, by `footprint.lca.normalisation.single_scores`."""
        from footprint.lca import normalisation

        if not len(self):
            return np.zeros(0)
        return normalisation.single_scores(np.column_stack([self.total(k) for k in cat.keys()]))

    @property
    def facility_energy_kwh(self) -> np.ndarray:
        return self.column("facility_energy_kwh")

    @property
    def gpu_lifetimes(self) -> np.ndarray:
        """GPU-hours / (lifetime x utilisation), Workload.gpu_lifetimes for every row (0 for a run without GPU)."""
        return self.gpu_hours / self._gpu_life()[self.template_index]

    def _gpu_life(self) -> np.ndarray:
        """Hours of one GPU lifetime per factor set (infinite for a run without GPU, whose hours are the host's)."""
        ts = [b.template for b in self.bases]
        return np.array([math.inf if t.host_only else t.lifetime_h * t.utilization for t in ts])

    # ---- groups -----------------------------------------------------------------------------------
    def group_sums(self, codes: np.ndarray, n_groups: int | None = None, mask: np.ndarray | None = None) -> GroupSums:
        """Sums over groups of rows (``codes[i]`` = group of row i; rows with code < 0 or masked out are left out).

        Exact and cheap: per group and factor set, sum GPU-hours and energy, then apply the coefficients.
        """
        codes = np.asarray(codes, dtype=np.int64)
        keep = codes >= 0
        if mask is not None:
            keep &= np.asarray(mask, dtype=bool)
        g = int(n_groups if n_groups is not None else (codes.max() + 1 if keep.any() else 0))
        t = len(self.bases)
        flat = codes[keep] * t + self.template_index[keep]
        gh = np.bincount(flat, weights=self.gpu_hours[keep], minlength=g * t).reshape(g, t)
        en = np.bincount(flat, weights=self.it_energy_kwh[keep], minlength=g * t).reshape(g, t)
        rows = np.bincount(flat, minlength=g * t).reshape(g, t)
        return GroupSums(self, gh, en, rows, (gh / self._gpu_life()).sum(axis=1))

    # ---- one row as a full Assessment --------------------------------------------------------------
    def workload(self, i: int) -> Workload:
        if self._workloads is not None:
            return self._workloads[i]
        t = self.bases[self.template_index[i]].template
        return with_hours(t, float(self.gpu_hours[i]), float(self.it_energy_kwh[i]))

    def assessment(self, i: int, workload: Workload | None = None) -> Assessment:
        """Row i as the engine's `Assessment` (what `assess(w, samples=0)` returns for it)."""
        from footprint.lca.database import db
        from footprint.lca.engine import _materials

        w = workload or self.workload(i)
        basis = self.bases[self.template_index[i]]
        gh, e = float(self.gpu_hours[i]), float(self.it_energy_kwh[i])
        entries = self._entries[self.template_index[i]]

        def val(*path: str) -> float | None:
            coef = entries[path]
            return None if coef is None else gh * coef[0] + e * coef[1]

        impacts = {}
        for key, r in basis.per_gpu_hour.impacts.items():
            total = val("impacts", key, "total")
            assert total is not None
            impacts[key] = CategoryResult(
                key,
                r.name,
                r.unit,
                total,
                {s: val("impacts", key, "by_stage", s) for s in r.by_stage},
                {c: val("impacts", key, "by_component", c) for c in r.by_component},
                total,
                total,
                r.not_available,
                r.not_modelled,
                characterisation=r.characterisation,
                lower_bound=r.lower_bound,
                use_long_term=_scaled_long_term(basis.per_kwh.impacts[key].use_long_term, e),
            )
        ref = basis.per_gpu_hour
        from footprint.lca import normalisation

        per, score = normalisation.normalise(impacts)  # the engine's own normalisation of these results
        return Assessment(
            workload=w,
            impacts=impacts,
            facility_energy_kwh=float(val("facility_energy_kwh") or 0.0),
            water_l={k: val("water_l", k) for k in WATER_KEYS},
            materials=_materials(db(), w),
            embodied_method=ref.embodied_method,
            zone=ref.zone,
            samples=0,
            warnings=tuple(dict.fromkeys([*w.notes, *ref.warnings])),
            source_ids=tuple(dict.fromkeys([ref.source_ids[0], *w.sources, *ref.source_ids[1:]])),
            use_factors=ref.use_factors,  # per factor set: the same for every row
            contested=ref.contested,
            normalised=per,
            single_score=score,
        )


def _scaled_long_term(per_kwh: dict[str, Any] | None, kwh: float) -> dict[str, Any] | None:
    """The use stage both ways of long-term emissions for ``kwh`` of IT energy (linear in energy, like the use stage)."""
    if per_kwh is None:
        return None
    return {k: (v * kwh if k in ("exclude", "include") and v is not None else v) for k, v in per_kwh.items()}


@dataclass(frozen=True)
class GroupSums:
    """Per-group sums of a BatchAssessment: GPU-hours and energy per (group, factor set), and any result."""

    batch: BatchAssessment
    gpu_hours_by_template: np.ndarray  # (groups, factor sets)
    energy_kwh_by_template: np.ndarray
    rows_by_template: np.ndarray
    gpu_lifetimes: np.ndarray  # (groups,)

    @property
    def gpu_hours(self) -> np.ndarray:
        """GPU-hours per group (the host-hours of runs without GPU are not GPU-hours)."""
        gpu = np.isfinite(self.batch._gpu_life()).astype(float)  # factor sets with a GPU
        return self.gpu_hours_by_template @ gpu if len(gpu) else self.gpu_hours_by_template.sum(axis=1)

    @property
    def it_energy_kwh(self) -> np.ndarray:
        return self.energy_kwh_by_template.sum(axis=1)

    @property
    def rows(self) -> np.ndarray:
        return self.rows_by_template.sum(axis=1)

    @property
    def gpu_equivalents(self) -> np.ndarray:
        """ceil of the GPU lifetimes the group consumes (Workload.gpu_equivalents, on the group's sum)."""
        return np.ceil(self.gpu_lifetimes - 1e-9).astype(np.int64)

    def value(self, *path: str) -> tuple[np.ndarray, np.ndarray]:
        """(sum per group, partial) for one number; a group's sum covers the factor sets where it is
        available (NaN where none of the group's factor sets has it); ``partial`` marks groups where
        some factor set lacks it."""
        g = len(self.gpu_lifetimes)
        if tuple(path) not in self.batch._col and not self.batch.bases:
            return np.full(g, np.nan), np.zeros(g, bool)
        j = self.batch._col[tuple(path)]
        a, b = self.batch._a[:, j], self.batch._b[:, j]
        avail = ~np.isnan(a)
        used = (self.gpu_hours_by_template + self.energy_kwh_by_template) > 0
        s = self.gpu_hours_by_template @ np.where(avail, a, 0.0) + self.energy_kwh_by_template @ np.where(avail, b, 0.0)
        any_avail = (used & avail).any(axis=1)
        partial = (used & ~avail).any(axis=1) & any_avail
        return np.where(any_avail | ~used.any(axis=1), s, np.nan), partial

    def total(self, key: str) -> np.ndarray:
        return self.value("impacts", key, "total")[0]

    def not_modelled(self, key: str) -> list[tuple[str, ...]]:
        """Per group, the stages of ``key`` that some factor set of the group does not model (the engine's
        `CategoryResult.not_modelled`, e.g. use with no open factor for the grid): the group's total leaves them out
        for those sets, as a run's total does."""
        used = (self.gpu_hours_by_template + self.energy_kwh_by_template) > 0
        per_set = [
            set(b.per_gpu_hour.impacts[key].not_modelled) | set(b.per_kwh.impacts[key].not_modelled) for b in self.batch.bases
        ]
        order = cat.stages()
        return [tuple(s for s in order if any(s in per_set[t] for t in np.flatnonzero(row))) for row in used]

    def ranges(self, samples: int, seed: int = 0, max_cells: int = 20_000_000) -> dict[str, np.ndarray]:
        """Low-high of each group's sums: {indicator key or "single_score": (groups, 2)}, the 2.5th and 97.5th
        percentiles of the group's summed Monte Carlo draws (see the module docstring), widened to include
        the central value as `engine.assess` does. Groups are done in chunks of at most ``max_cells``
        numbers in memory."""
        from footprint.lca import normalisation
        from footprint.lca.database import INDICATORS

        g, k = len(self.gpu_lifetimes), len(INDICATORS)
        out = np.full((g, k + 1, 2), np.nan)
        if not self.batch.bases or not g:
            return {key: out[:, i] for i, key in enumerate([*INDICATORS, "single_score"])}
        draws = [b.draws(samples, seed) for b in self.batch.bases]
        a = np.stack([x[0] for x in draws])  # (factor sets, samples, indicators)
        b = np.stack([x[1] for x in draws])
        step = max(1, max_cells // (a.shape[1] * k))
        for lo in range(0, g, step):
            hi = min(g, lo + step)
            tot = np.einsum("gs,snk->gnk", self.gpu_hours_by_template[lo:hi], a)
            tot += np.einsum("gs,snk->gnk", self.energy_kwh_by_template[lo:hi], b)
            scores = normalisation.single_scores(tot)[..., None]
            q = np.percentile(np.concatenate([tot, scores], axis=2), (2.5, 97.5), axis=1)  # (2, groups, k + 1)
            out[lo:hi] = np.moveaxis(q, 0, -1)
        central = np.column_stack([self.total(key) for key in INDICATORS] + [self.single_score()])
        out[..., 0] = np.fmin(out[..., 0], central)
        out[..., 1] = np.fmax(out[..., 1], central)
        out[np.isnan(central)] = np.nan  # not available for the group: no range either
        return {key: out[:, i] for i, key in enumerate([*INDICATORS, "single_score"])}

    def single_score(self) -> np.ndarray:
        """EF 3.1 single score (Pt) of each group's summed impacts (`normalisation.single_scores`, linear)."""
        from footprint.lca import normalisation

        return normalisation.single_scores(np.column_stack([self.total(k) for k in cat.keys()]).reshape(-1, len(cat.keys())))


def assess_many(workloads: Sequence[Workload], progress: Callable[[int], None] | None = None) -> BatchAssessment:
    """Central results of many workloads; factor lookups run once per distinct factor set (see module doc)."""
    keys: dict[tuple[Any, ...], int] = {}
    templates: list[Workload] = []
    idx = np.empty(len(workloads), dtype=np.int64)
    for i, w in enumerate(workloads):
        k = factor_key(w)
        if k not in keys:
            keys[k] = len(templates)
            templates.append(w)
        idx[i] = keys[k]
    bases = []
    for t in templates:
        bases.append(Basis.of(t))
        if progress is not None:
            progress(1)
    gh = np.fromiter((hours_of(w) for w in workloads), float, len(workloads))
    en = np.fromiter((w.it_energy_kwh for w in workloads), float, len(workloads))
    return BatchAssessment(bases, idx, gh, en, workloads)


def assess_arrays(
    templates: Sequence[Workload], template_index: np.ndarray, gpu_hours: np.ndarray, it_energy_kwh: np.ndarray
) -> BatchAssessment:
    """Columnar form: row i is ``templates[template_index[i]]`` with its own GPU-hours and IT energy (kWh)."""
    return BatchAssessment([Basis.of(t) for t in templates], template_index, gpu_hours, it_energy_kwh)


#: Relative spacing of the nodes (kWh of IT energy per GPU-hour) at which `row_ranges` takes percentiles.
RATIO_STEP = 0.01


def row_ranges(
    batch: BatchAssessment, samples: int, seed: int = 0, nodes: dict[int, Any] | None = None, block: int = 25_000
) -> np.ndarray:
    """Low-high of each row's own result: (rows, indicators in `database.INDICATORS` order, 2), the 2.5th and
    97.5th percentiles of its Monte Carlo draws, widened to include the central value as `engine.assess` does;
    NaN where the row has no GPU-hours or the indicator is not available.

    Why it is cheap: a row's draws are ``gpu_hours x (A + r B)`` in its factor set's common draws (A per
    GPU-hour, B per kWh, r its kWh per GPU-hour), so its percentiles are ``gpu_hours`` x those of ``A + r B``.
    These are taken at nodes 1 % apart in r (`RATIO_STEP`, log-spaced) and interpolated linearly between the two
    around each row (exact at the nodes); ``nodes`` keeps them from call to call (a ledger read chunk by chunk)."""
    from footprint.lca.database import INDICATORS

    k = len(INDICATORS)
    out = np.full((len(batch), k, 2), np.nan)
    done = np.zeros(len(batch), bool)
    cache: dict[int, Any] = {} if nodes is None else nodes
    gh, en = batch.gpu_hours, batch.it_energy_kwh
    central = np.column_stack([batch.total(key) for key in INDICATORS]) if len(batch) else np.empty((0, k))
    for t, basis in enumerate(batch.bases):
        rows = np.nonzero((batch.template_index == t) & (gh > 0) & np.isfinite(en) & (en > 0))[0]
        if not len(rows):
            continue
        _, table = cache.setdefault(id(basis), (basis, {}))  # the basis kept with its nodes: its id stays its own
        a, b = basis.draws(samples, seed)
        ratio = en[rows] / gh[rows]
        lo = np.floor(np.log(ratio) / RATIO_STEP).astype(np.int64)
        need = np.unique(np.concatenate([lo, lo + 1]))
        todo = [x for x in need.tolist() if (samples, seed, x) not in table]
        for c0 in range(0, len(todo), 16):  # 16 nodes x samples x indicators in memory at once
            xs = todo[c0 : c0 + 16]
            d = a[None] + np.exp(np.array(xs, float) * RATIO_STEP)[:, None, None] * b[None]
            q = np.percentile(d, (2.5, 97.5), axis=1)  # (2, nodes, indicators)
            for i, x in enumerate(xs):
                table[(samples, seed, x)] = q[:, i, :].T
        qs = np.stack([table[(samples, seed, x)] for x in need.tolist()])  # (nodes, indicators, 2)
        for s0 in range(0, len(rows), block):
            r, x, lo_b = rows[s0 : s0 + block], ratio[s0 : s0 + block], lo[s0 : s0 + block]
            i0, i1 = np.searchsorted(need, lo_b), np.searchsorted(need, lo_b + 1)
            r0, r1 = np.exp(lo_b * RATIO_STEP), np.exp((lo_b + 1) * RATIO_STEP)
            f = ((x - r0) / (r1 - r0))[:, None, None]
            out[r] = gh[r][:, None, None] * (qs[i0] + f * (qs[i1] - qs[i0]))
            done[r] = True
    out[..., 0] = np.fmin(out[..., 0], central)
    out[..., 1] = np.fmax(out[..., 1], central)
    out[np.isnan(central) | ~done[:, None]] = np.nan
    return out
