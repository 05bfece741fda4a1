"""Data quality and Monte Carlo distribution of each per-kWh electricity factor (used by build_electricity.py).

Every factor gets the four EF data-quality ratings (1 best .. 5 worst) and a stated distribution whose
spread comes from its sources:

- TeR (technological representativeness): 2 for a life-cycle value of the technology, 3 for a value that
  covers part of the life cycle (direct stack emissions, fuel burned), 4 for a proxy of other technologies;
  1 is never given (no source models the fleet plant by plant).
- GeR (geographical): 2 for a zone row (its direct emissions from the zone's own inventory, the
  upstream part regional), 3 for a regional or global average (UNECE global or Europe, IPCC, land use
  and water derived from them), 4 for European defaults applied worldwide (EMEP/EEA Tier 1 direct rows)
  and proxies.
- TiR (time): from the central source's year against the reference year of the generation mix (2023):
  within 3 years 1, 6 years 2, 10 years 3, 15 years 4, older 5.
- P (precision): from the spread of the independent second sources, k_src = the largest ratio between the
  central value and any of them: <= 1.5 -> 1, <= 2 -> 2, <= 3 -> 3, <= 10 -> 4, more 5; no second source 4. Where
  independent sources disagree by more than 3x (a consensus value), k_src is the largest ratio between the sources
  themselves: a contested factor never rates 1-3.

Distribution (column ``distribution``): ``lognormal`` with the central value c as its median when c > 0,
two-piece (each side its own spread, as the sources fall), with

    ln k95_side = sqrt( ln(k_src_side)^2 + sum_i ln(U_i)^2 + ln(U_b)^2 ),   low = c / k95_low,  high = c * k95_high,

where k_src_low (k_src_high) is the largest ratio between c and a source or variant below (above) it,
U_i the uncertainty factors of the ratings (ecoinvent v2 pedigree matrix, Frischknecht et al. 2007:
further technological, geographical and temporal correlation, reliability) and U_b = 1.05 the basic
uncertainty. Each side's geometric standard deviation is exp(ln k95_side / 1.96). The interval therefore
spans every source and variant (k95_side >= k_src_side), and the central value is never at its own bound
(k95 > 1). build_electricity.py ships no factor that is zero by construction (no combustion, no fuel): those
pairs are not modelled. The ``uniform`` branch remains for a quantity that is physically zero with a known
ceiling (operational water of wind, 0 L/kWh, not an EF category).
"""

from __future__ import annotations

import math

from lca_data import loader

REFERENCE_YEAR = 2023  # year of codecarbon's generation mix
# ecoinvent v2 pedigree uncertainty factors (95 % interval factors) by rating 1..5: lca_data/data_quality.yaml,
# the one table the engine's embodied and host factors read too
U = {k: tuple(float(x) for x in v) for k, v in loader.load_data_quality()["pedigree"].items() if k != "source"}
U_BASIC = 1.05
LOWER_BOUND = loader.LOWER_BOUND_SCOPE  # an inventory covering only part of the chain: its value is a lower bound
Z95 = 1.959964


def ter(scope: str) -> int:
    return {"life_cycle": 2, "operational": 2, "direct": 3, "proxy": 4}.get(scope, 3)


def ger(source: str, zone: str, scope: str) -> int:
    if zone:
        return 2  # the direct part is the zone's own; upstream and infrastructure stay regional
    if scope == "proxy" or (scope == "direct" and source == "footprint-electricity-derived"):
        return 4  # another technology's factors, or European Tier 1 defaults applied worldwide
    return 3


def tir(year: int | None) -> int:
    if year is None:
        return 4
    age = abs(REFERENCE_YEAR - year)
    return next((r for r, limit in ((1, 3), (2, 6), (3, 10), (4, 15)) if age <= limit), 5)


def spread(central: float, others: list[float], side: int = 0) -> float:
    """k_src: the largest ratio (>= 1) between a positive central value and a positive other value, on one side
    (side -1: the values below it, +1: above it, 0: either)."""
    logs = [side * math.log(v / central) if side else abs(math.log(v / central)) for v in others if v > 0 and central > 0]
    return math.exp(max([0.0, *logs]))


def precision(k_src: float, n_seconds: int) -> int:
    if n_seconds == 0:
        return 4
    return next((r for r, limit in ((1, 1.5), (2, 2.0), (3, 3.0), (4, 10.0)) if k_src <= limit), 5)


def k95(k_src: float, ratings: dict[str, int]) -> float:
    s2 = math.log(k_src) ** 2 + math.log(U_BASIC) ** 2 + sum(math.log(U[k][r - 1]) ** 2 for k, r in ratings.items())
    return math.exp(math.sqrt(s2))


def quality(
    central: float,
    scope: str,
    source: str,
    zone: str,
    year: int | None,
    variants: list[float],
    seconds: list[float],
    sources_spread: float | None = None,
) -> dict:
    """Ratings, distribution and 95 % interval of one factor (see the module docstring). ``sources_spread``: the
    largest ratio between the factor's independent sources where they disagree by more than 3x; the precision is
    then read from it (a contested factor never rates better than 4, however its consensus value sits between them)."""
    p = precision(spread(central, seconds), len(seconds))
    if sources_spread is not None:
        p = max(p, precision(sources_spread, len(seconds)))
    ratings = {"ter": ter(scope), "ger": ger(source, zone, scope), "tir": tir(year), "p": p}
    if scope == LOWER_BOUND and central > 0:  # a bound: nothing below it, any value up to the highest source
        low, high, dist, gsd = central, max([central, *variants, *seconds]), "uniform", None
    elif central > 0:
        k_lo, k_hi = (k95(spread(central, [*variants, *seconds], side), ratings) for side in (-1, 1))
        low, high, dist, gsd = central / k_lo, central * k_hi, "lognormal", math.exp(math.log(max(k_lo, k_hi)) / Z95)
    else:
        low, high, dist, gsd = 0.0, max([0.0, *variants, *seconds]), "uniform", None
    return {"ratings": ratings, "low": low, "high": high, "distribution": dist, "gsd": gsd}
