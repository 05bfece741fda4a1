"""How the Monte Carlo draws a factor, and which inputs drive a result's variance.

Every uncertain factor is stated as a central value, a 95 % interval (low, high) and a distribution:

- ``lognormal`` (the default when a factor states none): a two-piece lognormal with its median at the
  central value, its 2.5th percentile at ``low`` and its 97.5th at ``high`` (one sigma below the central
  value, another above; it is the ordinary lognormal when the central value is the geometric mean of low
  and high). The central value is therefore the median of every factor, never the end of its range.
  Where a log is impossible (a zero central value or a zero low bound) the same two-piece shape is
  drawn in linear space (a two-piece normal, cut at ``low``);
- ``triangular``: mode at the central value, between low and high;
- ``uniform``: between low and high.

A factor with an EF data-quality rating (DQR: technological, geographical, time representativeness,
precision, each 1 = very good to 5 = very poor) adds the ecoinvent pedigree spread of those scores
(`pedigree_sigma`) to both sides of its lognormal: sigma**2 = sigma_interval**2 + sigma_pedigree**2.
That is how the embodied and host factors are built (`footprint.lca.engine`); the electricity factors
state their 95 % interval whole, so their DQR widens a factor only where the interval is a single value.

The random numbers come in a fixed order and shape for a given set of factors (a standard normal and a
uniform matrix per block, whatever the distributions), so that two workloads of one factor set drawn with
one seed share them (footprint.lca.batch relies on it).

Sensitivity (`sensitivity`): for each category, the squared Pearson correlation of every input's draws
with the category's total over the same draws, normalised to sum to 1 (the "contribution to variance"
of Crystal Ball and SimaPro, exact for a linear model of independent inputs); ``explained`` is the sum
before normalising (near 1 when the model is close to linear in its inputs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DISTRIBUTIONS = ("lognormal", "triangular", "uniform")
DEFAULT = "lognormal"
Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
DQR_KEYS = ("ter", "ger", "tir", "p")


def pedigree_sigma(dqr: Mapping[str, int] | None, factors: Mapping[str, Sequence[float]]) -> float:
    """Sigma (of ln) of an EF data-quality rating: sqrt(sum ln(U_k)**2) / 2, U_k the pedigree factor
    (a 95 % interval factor, ecoinvent v2 convention) of the rating's score on criterion k."""
    if not dqr:
        return 0.0
    total = 0.0
    for k in DQR_KEYS:
        score = dqr.get(k)
        if score is not None:
            total += math.log(float(factors[k][int(score) - 1])) ** 2
    return math.sqrt(total) / 2


@dataclass(frozen=True)
class Block:
    """A block of factors drawn together: central values, 95 % intervals, one distribution per factor."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    kinds: tuple[str, ...]
    extra_sigma: np.ndarray | None = None  # pedigree sigma (of ln) added to both sides of a lognormal
    shared: bool = False  # one draw moves every factor of the block to the same quantile (one model's error)

    @classmethod
    def of(
        cls,
        value: Any,
        low: Any,
        high: Any,
        kinds: Sequence[str] | str | None = None,
        extra_sigma: Any = None,
        shared: bool = False,
    ) -> Block:
        v = np.atleast_1d(np.asarray(value, float))
        lo = np.broadcast_to(np.asarray(low, float), v.shape).copy()
        hi = np.broadcast_to(np.asarray(high, float), v.shape).copy()
        if kinds is None or isinstance(kinds, str):
            kinds = (kinds or DEFAULT,) * v.size
        kinds = tuple(k or DEFAULT for k in kinds)
        bad = [k for k in kinds if k not in DISTRIBUTIONS]
        if bad:
            raise ValueError(f"unknown distribution {bad[0]!r}; expected one of {', '.join(DISTRIBUTIONS)}")
        extra = None if extra_sigma is None else np.broadcast_to(np.asarray(extra_sigma, float), v.shape).copy()
        return cls(v, np.minimum(lo, v), np.maximum(hi, v), kinds, extra, shared)

    def interval(self) -> tuple[np.ndarray, np.ndarray]:
        """The 95 % interval drawn (the stated one, widened by any pedigree sigma)."""
        if self.extra_sigma is None:
            return self.low, self.high
        s_lo, s_hi, logs = self._sigmas()
        with np.errstate(over="ignore"):
            lo = np.where(logs, self.value * np.exp(-Z95 * s_lo), self.low)
            hi = np.where(logs, self.value * np.exp(Z95 * s_hi), self.high)
        return lo, hi

    def _sigmas(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        v, lo, hi = self.value, self.low, self.high
        logs = np.array([k == "lognormal" for k in self.kinds]) & (v > 0) & (lo > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s_lo = np.where(logs, np.log(np.where(logs, v / lo, 1.0)) / Z95, 0.0)
            s_hi = np.where(logs, np.log(np.where(logs, hi / v, 1.0)) / Z95, 0.0)
        if self.extra_sigma is not None:
            s_lo = np.where(logs, np.hypot(s_lo, self.extra_sigma), s_lo)
            s_hi = np.where(logs, np.hypot(s_hi, self.extra_sigma), s_hi)
        return s_lo, s_hi, logs

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, factors) draws. The random numbers drawn depend only on n, the block's size, whether it is shared
        and whether it has a triangular or uniform factor: one standard normal matrix, then (if so) one uniform
        matrix; a shared block draws one column of each (every factor at the same quantile)."""
        k = self.value.size
        kinds = np.array(self.kinds)
        ln = kinds == "lognormal"
        cols = 1 if self.shared else k
        z = rng.standard_normal((n, cols))
        u = rng.random((n, cols)) if not ln.all() else None
        v, lo, hi = self.value, self.low, self.high
        s_lo, s_hi, logs = self._sigmas()
        with np.errstate(over="ignore"):  # an overflow becomes inf, which the engine reports as one clear error
            out = v * np.exp(z * np.where(z < 0, s_lo, s_hi))  # every positive lognormal (others: v, replaced below)
        if logs.all():
            return out
        z = np.broadcast_to(z, (n, k))
        u = None if u is None else np.broadcast_to(u, (n, k))
        idx = np.flatnonzero(ln & ~logs)
        if idx.size:  # two-piece normal in linear space, cut at low
            zz = z[:, idx]
            sd = np.where(zz < 0, (v[idx] - lo[idx]) / Z95, (hi[idx] - v[idx]) / Z95)
            out[:, idx] = np.maximum(v[idx] + zz * sd, lo[idx])
        idx = np.flatnonzero(kinds == "triangular")
        if idx.size:
            uu, a, m, b = u[:, idx], lo[idx], v[idx], hi[idx]
            span = b - a
            with np.errstate(divide="ignore", invalid="ignore"):
                c = np.where(span > 0, (m - a) / span, 0.0)
                left = a + np.sqrt(uu * span * (m - a))
                right = b - np.sqrt((1 - uu) * span * (b - m))
            out[:, idx] = np.where(uu < c, left, right)
        idx = np.flatnonzero(kinds == "uniform")
        if idx.size:
            out[:, idx] = lo[idx] + u[:, idx] * (hi[idx] - lo[idx])
        return out


@dataclass(frozen=True)
class Input:
    """One uncertain input of the Monte Carlo, for the sensitivity table: its draws and how it is drawn."""

    name: str
    draws: np.ndarray  # (n,) shared by every category, or (n, indicators): one column per category
    distribution: str
    low: np.ndarray | float  # 95 % interval, per category or one
    high: np.ndarray | float
    unit: str | Sequence[str] = ""
    dqr: Mapping[str, int] | None = None
    categories: frozenset[int] | None = None  # the indicators a shared input moves (None: all)
    kinds: Sequence[str] | None = None  # per category, where the distribution differs by category
    shared: bool = False  # one draw for every category (a Block drawn shared): one row in the single score's table

    def column(self, i: int) -> np.ndarray | None:
        if self.draws.ndim == 2:
            return self.draws[:, i]
        return self.draws if self.categories is None or i in self.categories else None

    def describe(self, i: int) -> dict[str, Any]:
        per = self.draws.ndim == 2
        lo = float(self.low[i]) if per and np.ndim(self.low) else float(np.asarray(self.low).ravel()[0])
        hi = float(self.high[i]) if per and np.ndim(self.high) else float(np.asarray(self.high).ravel()[0])
        unit = self.unit[i] if not isinstance(self.unit, str) else self.unit
        dist = (self.kinds[i] or DEFAULT) if self.kinds is not None else self.distribution
        return {"distribution": dist, "interval_95": [lo, hi], "unit": unit, "dqr": dict(self.dqr) if self.dqr else None}


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations without a centred copy (E[x**2] - E[x]**2); a column whose variance
    is below 1e-10 of its squared mean counts as constant (sd 0): no correlation is read from rounding noise."""
    n = len(x)
    m = x.mean(axis=0)
    var = np.einsum("ij,ij->j", x, x) / n - m * m if x.ndim == 2 else float(x @ x) / n - m * m
    var = np.where(var > 1e-10 * m * m, var, 0.0)
    return m, np.sqrt(var)


def _corr(cross: np.ndarray, mx: np.ndarray, sx: np.ndarray, my: Any, sy: Any) -> np.ndarray:
    """Pearson correlations from E[xy], the means and the standard deviations (0 where either is constant)."""
    den = sx * sy
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(den > 0, (cross - mx * my) / den, 0.0)
    return np.clip(r, -1.0, 1.0)


def sensitivity(
    totals: np.ndarray, scores: np.ndarray, inputs: Sequence[Input], n_cat: int, min_share: float = 0.001
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per indicator and for the single score: the inputs that drive the variance, largest first.

    Returns ([{"method", "explained", "inputs": [{"input", "share", "correlation", ...}]} per indicator], the score's)."""
    n, n_ind = totals.shape
    mt, st = _moments(totals)
    ms, ss = _moments(scores)
    shared = [x for x in inputs if x.draws.ndim == 1]
    per_cat = [x for x in inputs if x.draws.ndim == 2]
    xs = np.column_stack([x.draws for x in shared]) if shared else np.zeros((n, 0))
    mx, sx = _moments(xs)
    r_shared = _corr((xs.T @ totals) / n, mx[:, None], sx[:, None], mt, st)
    r_score_shared = _corr(xs.T @ scores / n, mx, sx, ms, ss)
    out = []
    r_cat, r_score_cat = [], []
    for x in per_cat:
        m, sd = _moments(x.draws)
        r_cat.append(_corr(np.einsum("ij,ij->j", x.draws, totals) / n, m, sd, mt, st))
        r_score_cat.append(_corr(x.draws[:, :n_cat].T @ scores / n, m[:n_cat], sd[:n_cat], ms, ss))
    for i in range(n_ind):
        rows = [(x, float(r_shared[j, i])) for j, x in enumerate(shared) if x.categories is None or i in x.categories]
        rows += [(x, float(r[i])) for x, r in zip(per_cat, r_cat, strict=True)]
        out.append(_table(rows, i, min_share))
    # the single score: every input, per-category ones once per category (once in all where drawn shared)
    rows_s: list[tuple[Input, float, int | None]] = [(x, float(r), None) for x, r in zip(shared, r_score_shared, strict=True)]
    for x, r in zip(per_cat, r_score_cat, strict=True):
        if x.shared:  # one draw moves every category: one row, the category that correlates most
            i = int(np.argmax(np.abs(r)))
            rows_s.append((x, float(r[i]), None))
        else:
            rows_s += [(x, float(r[i]), i) for i in range(n_cat)]
    return out, _score_table(rows_s, min_share)


def _table(rows: list[tuple[Input, float]], i: int, min_share: float = 0.001) -> dict[str, Any]:
    sq = np.array([r * r for _, r in rows]) if rows else np.zeros(0)
    total = float(sq.sum())
    items = []
    for (x, r), s in sorted(zip(rows, sq, strict=True), key=lambda t: -t[1]):
        share = float(s / total) if total > 0 else 0.0
        if share >= min_share:
            items.append({"input": x.name, "share": share, "correlation": r, **x.describe(i)})
    return {"method": METHOD, "explained": total, "inputs": items}


def _score_table(rows: list[tuple[Input, float, int | None]], min_share: float) -> dict[str, Any]:
    from footprint.lca import categories as cat

    keys = cat.keys()
    sq = np.array([r * r for _, r, _ in rows]) if rows else np.zeros(0)
    total = float(sq.sum())
    items = []
    for (x, r, i), s in sorted(zip(rows, sq, strict=True), key=lambda t: -t[1]):
        share = float(s / total) if total > 0 else 0.0
        if share >= min_share:
            name = x.name if i is None else f"{x.name}: {cat.by_key(keys[i]).name.lower()}"
            dist = x.distribution if i is None else x.describe(i)["distribution"]
            items.append({"input": name, "share": share, "correlation": r, "distribution": dist})
    return {"method": METHOD, "explained": total, "inputs": items[:12]}


METHOD = "squared Pearson correlation of each input's draws with the total over the same draws, normalised to sum to 1"
