"""Per-kWh impacts of a grid zone's electricity, for the use phase, in all 16 EF 3.1 categories.

Climate change: the zone's carbon intensity from the country data that the installed codecarbon
package ships (OWID/Ember, read from the package's data file; codecarbon itself is never imported,
which would cost a second). Water use: off-site water consumed per kWh (EWIF: WRI 2020 for the
country, else the technology mix x Macknick et al.) x the zone's AWARE 1.2 factor (the EF 3.1 one).
The other 14 categories: per-technology factors (lca_data/electricity_technologies.csv, built by
lca_data/tools/build_electricity.py) x the zone's generation mix from the same codecarbon file.

Each factor carries a low-high range that spans its independent second sources
(lca_data/electricity_crosscheck.csv), its scope ("direct emissions only, lower bound" where only
stack emissions are known) and its coverage: where part of the mix has no factor the value covers
the rest (a lower bound) and says so. A category with no factor at all is "not available" (None),
never zero. :func:`use_factors` gives a workload's per-kWh vector over the 16 categories with its
low/high: the one lookup the engine and the vectorised batch code share.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import math
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from footprint.errors import FootprintError
from footprint.lca import categories as cat
from footprint.lca.database import db
from footprint.lca.units import Q, UnitParseError
from lca_data.loader import LOWER_BOUND_SCOPE

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.factorset import FactorSet
    from footprint.lca.workload_data import Workload

WORLD = "WORLD"
CODECARBON_SOURCE = "codecarbon-energy-mix"
WATER = "water_consumption"  # per-technology operational water (L/kWh), not an EF category
MIN_SHARE = 0.01  # a contested factor is listed for a zone when its technology makes >= 1 % of generation
DQR_KEYS = ("ter", "ger", "tir", "p")
LT_EXCLUDE, LT_INCLUDE = "exclude", "include"  # site.long_term_emissions
EF31 = cat.EF31
CLIMATE_METHOD = "IPCC AR5 GWP100 (Ember's life-cycle factors, via OWID)"
WATER_METHOD = EF31  # AWARE 1.2 is the EF 3.1 water-use model
NOT_MODELLED = "not modelled"
PARTIAL_CHAIN = LOWER_BOUND_SCOPE  # a technology row whose inventory covers only part of the chain
PARTIAL_CHAIN_TEXT = "lower bound: inventory covers only part of the chain"
FILE_BOUND_TEXT = "lower bound (the factor file's column bound: lower)"
AWARE_BOUNDS = (0.1, 100.0)  # AWARE's own bounds (Boulay et al. 2018): the range where a country has no factor


@dataclass(frozen=True)
class ZoneFactor:
    """One category's per-kWh factor for a zone (None = not available)."""

    value: float | None
    unit: str
    coverage: float  # share of the zone's generation that has a factor (1.0 = complete)
    sources: tuple[str, ...]
    low: float | None = None
    high: float | None = None
    note: str = ""
    scope: str = ""  # what the value covers ("" = life cycle of the whole mix)
    distribution: str = ""  # Monte Carlo distribution of the value in [low, high] ("" = lognormal)
    dqr: dict[str, int] | None = None  # EF data-quality ratings (ter, ger, tir, p), contribution-weighted
    not_modelled: bool = False  # no technology of the mix has an open life-cycle factor: value None, never 0
    characterisation: str = ""  # the characterisation method of the value ("EF 3.1", "ILCD 2.0 (2018)", "mixed (...)")
    long_term: str = "n/a"  # how the value treats long-term emissions: included, excluded, not stated, n/a
    own_range: tuple[float, float] | None = None  # low-high from the factor's own sources, before national values widened it


@dataclass(frozen=True)
class ZoneQuantity:
    """A per-zone quantity (EWIF in L/kWh, AWARE in m3 world eq/m3) with its range and origin."""

    value: float
    low: float
    high: float
    unit: str
    method: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Zone:
    code: str
    name: str
    year: int | None
    mix: dict[str, float]  # codecarbon field -> share of generation
    factors: dict[str, ZoneFactor] = field(default_factory=dict)
    ewif: ZoneQuantity | None = None
    aware: ZoneQuantity | None = None
    contested: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class UseFactors:
    """Per-kWh factors of the electricity a workload draws: vectors over the 16 categories (report
    order, :func:`footprint.lca.categories.keys`), NaN where not available."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    label: str  # the set used, for reports: "open factors for FRA (France, 2023)" or the practitioner's file
    sources: tuple[str, ...]
    scope: tuple[str, ...]  # per category: what the value covers ("" = complete)
    coverage: np.ndarray  # per category: share of the mix with a factor (1.0 for a practitioner set)
    contested: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    distribution: tuple[str, ...] = ()  # per category ("" = lognormal); low/high are the 95 % interval
    dqr: tuple[dict[str, int] | None, ...] = ()  # per category: EF data-quality ratings, None = not rated
    not_modelled: tuple[bool, ...] = ()  # per category: no technology of the mix has an open factor (value NaN)
    characterisation: tuple[str, ...] = ()  # per category: the characterisation method of the factor
    long_term: tuple[str, ...] = ()  # per category: how the factor treats long-term emissions
    long_term_setting: str = LT_EXCLUDE  # site.long_term_emissions the factors were built for
    lower_bound: tuple[bool, ...] = ()  # per category: the value is a labelled lower bound (drawn from it up to high)


def _codecarbon_file() -> Path:
    spec = importlib.util.find_spec("codecarbon")
    if spec is None or not spec.submodule_search_locations:
        raise FootprintError("the codecarbon package is not installed; it provides the grid data (pip install codecarbon)")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "private_infra" / "global_energy_mix.json"


@lru_cache(maxsize=1)
def _energy_mix() -> dict[str, dict]:
    return json.loads(_codecarbon_file().read_text())


def _row(r: dict[str, str]) -> dict[str, Any]:
    return {
        "technology": r["technology"],
        "value": float(r["value"]),
        "low": float(r["low"]),
        "high": float(r["high"]),
        "source": r["source"],
        "scope": r["scope"],
        "distribution": r.get("distribution", ""),
        "dqr": {k: int(r[f"dqr_{k}"]) for k in DQR_KEYS if r.get(f"dqr_{k}")} or None,
        "characterisation": r.get("characterisation") or "not stated",
        "long_term": r.get("long_term") or "not stated",
    }


def combine_methods(methods: list[str]) -> str:
    """One characterisation method where all rows agree, else "mixed (A; B)" (a mixed value is not EF 3.1)."""
    flat = [p for m in methods for p in (m[len("mixed (") : -1].split("; ") if m.startswith("mixed (") else [m])]
    unique = list(dict.fromkeys(flat))
    if not unique:
        return ""
    return unique[0] if len(unique) == 1 else f"mixed ({'; '.join(unique)})"


def _counted(per: dict[str, dict[str, Any]], long_term: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The technology rows a category counts under ``site.long_term_emissions``: with ``exclude`` a factor that
    includes long-term emissions (and has no short-term value beside it) is left out, its technology then uncovered
    (the rest of the mix a labelled lower bound); returns the rows and the left-out codecarbon field -> technology."""
    if long_term == LT_INCLUDE:
        return per, {}
    out = {f: r for f, r in per.items() if r["long_term"] != "included"}
    return out, {f: r["technology"] for f, r in per.items() if f not in out}


def _long_term_of(per: dict[str, dict[str, Any]], shares: dict[str, float]) -> str:
    """How a mixed value treats long-term emissions: its rows' common treatment, else "mixed"."""
    kinds = list(dict.fromkeys(r["long_term"] for f, r in per.items() if shares.get(f, 0) > 0))
    return kinds[0] if len(kinds) == 1 else ("mixed (" + "; ".join(kinds) + ")" if kinds else "n/a")


@lru_cache(maxsize=1)
def _tech_rows() -> dict[str, dict[str, dict[str, Any]]]:
    """category -> codecarbon field -> {value, low, high, source, scope, technology}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in db().electricity_rows:
        out.setdefault(r["category"], {})[r["codecarbon_field"]] = _row(r)
    return out


@lru_cache(maxsize=1)
def _not_modelled_rows() -> dict[str, dict[str, str]]:
    """category -> codecarbon field -> technology, where no open life-cycle factor exists (zero by construction)."""
    out: dict[str, dict[str, str]] = {}
    for r in db().electricity_not_modelled_rows:
        out.setdefault(r["category"], {})[r["codecarbon_field"]] = r["technology"]
    return out


def _not_modelled(c: cat.Category, shares: dict[str, float]) -> ZoneFactor | None:
    """The factor of a category none of whose technologies in the mix has a factor, where some of them are listed as
    having no open life-cycle value (ozone depletion): not modelled, never 0. (Where the rest of the mix has factors,
    their sum is the value, labelled a lower bound by ``_scope_note``: dropping it would put 0 in the total for a
    stage a known bound shows to be large; a grid's fuel burned is most of its fossil resource use.)"""
    lacking = {f: t for f, t in _not_modelled_rows().get(c.key, {}).items() if shares.get(f, 0) > 0}
    if not lacking:
        return None
    share = _share(sum(shares[f] for f in lacking))
    scope = f"use phase not modelled: no open life-cycle factor for {', '.join(sorted(lacking.values()))} ({share} of generation)"
    return ZoneFactor(None, f"{c.unit}/kWh", 0.0, (), note=scope, scope=scope, not_modelled=True)


@lru_cache(maxsize=1)
def _zone_tech_rows() -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """zone -> category -> codecarbon field -> row: a fleet's own factor, in place of the generic one in that zone."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for r in db().electricity_zone_technology_rows:
        out.setdefault(r["zone"], {}).setdefault(r["category"], {})[r["codecarbon_field"]] = _row(r)
    return out


@cache
def _rows_of(code: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The technology factors that apply in a zone: the generic ones, with the zone's own rows in their place.
    WORLD: each technology's factor weighted by its generation in every zone (so each fleet counts once)."""
    generic = _tech_rows()
    if code == WORLD:
        return _world_rows()
    own = _zone_tech_rows().get(code, {})
    return {c: {**per, **own.get(c, {})} for c, per in generic.items()}


def _world_rows() -> dict[str, dict[str, dict[str, Any]]]:
    data = _energy_mix()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for c, per in _tech_rows().items():
        out[c] = {}
        for f, r in per.items():
            own = [
                (data[z].get(f, 0.0), rows[c][f]) for z, rows in _zone_tech_rows().items() if z in data and f in rows.get(c, {})
            ]
            total = sum(v.get(f, 0.0) for v in data.values())
            if not own or total <= 0:
                out[c][f] = r
                continue
            rest = total - sum(t for t, _ in own)
            mixed = {k: (rest * r[k] + sum(t * o[k] for t, o in own)) / total for k in ("value", "low", "high")}
            out[c][f] = {**r, **mixed, "source": r["source"]}
    return out


@lru_cache(maxsize=1)
def _zone_table() -> dict[str, dict[str, dict[str, str]]]:
    """zone -> quantity (ewif, aware, aware_non_agricultural, aware_2.0, ...) -> row."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for r in db().electricity_zone_rows:
        out.setdefault(r["zone"], {})[r["quantity"]] = r
    return out


def zone_codes() -> list[str]:
    return sorted(_energy_mix()) + [WORLD]


def zone_names() -> dict[str, str]:
    """Zone code -> country name, read from the energy mix alone (no factor computed: a picker's options, cheap)."""
    data = _energy_mix()
    return {**{c: str(data[c].get("country_name") or c) for c in sorted(data)}, WORLD: "World"}


def resolve_zone(name: str, file: str | None = None, key: str | None = "site.grid") -> str:
    """ISO3 code of a zone given as ISO3 code or country name (case-insensitive), or WORLD."""
    if isinstance(name, bool) or not isinstance(name, (str, int, float)) or len(str(name)) > 200:
        raise FootprintError(f"expected a grid zone such as FRA, got {str(name)[:60]!r}", file, key)
    data = _energy_mix()
    text = str(name).strip()
    if text.upper() in data or text.upper() == WORLD:
        return text.upper()
    names = {v.get("country_name", "").lower(): k for k, v in data.items()}
    if text.lower() in names:
        return names[text.lower()]
    if text.lower() in ("world", "global", "wor"):
        return WORLD
    close = difflib.get_close_matches(text.lower(), list(names), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(names[c] + ' (' + c.title() + ')' for c in close)}?" if close else ""
    raise FootprintError(
        f"unknown grid zone {name!r}: expected an ISO3 country code from codecarbon's energy mix "
        f"(e.g. FRA, USA, POL) or WORLD{hint}",
        file,
        key,
    )


def _mix_of(code: str) -> tuple[dict[str, float], str, int | None, float]:
    """(generation shares, name, year, carbon intensity kg/kWh) of a zone."""
    data = _energy_mix()
    fields = {f for per in _tech_rows().values() for f in per}
    if code == WORLD:
        rows = list(data.values())
        total = sum(r.get("total_TWh", 0.0) for r in rows)
        twh = {f: sum(r.get(f, 0.0) for r in rows) for f in fields}
        ci = sum(r.get("carbon_intensity", 0.0) * r.get("total_TWh", 0.0) for r in rows) / total
        return {f: v / total for f, v in twh.items()}, "World (generation-weighted sum of codecarbon zones)", None, ci / 1000
    r = data[code]
    total = r.get("total_TWh") or 0.0
    shares = {f: (r.get(f, 0.0) / total if total else 0.0) for f in fields}
    return shares, r.get("country_name", code), r.get("year"), r["carbon_intensity"] / 1000


def _mix_sum(per: dict[str, dict[str, Any]], shares: dict[str, float]) -> tuple[float, float, float, float]:
    """(value, low, high, coverage) of share-weighted technology factors."""
    cov = sum(shares[f] for f in per)
    return (
        sum(shares[f] * r["value"] for f, r in per.items()),
        sum(shares[f] * r["low"] for f, r in per.items()),
        sum(shares[f] * r["high"] for f, r in per.items()),
        cov,
    )


def _mix_quality(per: dict[str, dict[str, Any]], shares: dict[str, float], value: float) -> tuple[str, dict[str, int] | None]:
    """Distribution and data-quality ratings of a mixed value: lognormal when positive (uniform from 0 when it is
    zero by construction); each rating the contribution-weighted mean of the technologies' ratings (EF practice)."""
    bound = any(r["scope"] == PARTIAL_CHAIN for f, r in per.items() if shares.get(f, 0) > 0)
    dist = "lognormal" if value > 0 and not bound else "uniform"  # a lower bound: no draw below it
    weights = {f: shares[f] * r["value"] for f, r in per.items() if r.get("dqr") and shares.get(f, 0) > 0}
    total = sum(weights.values())
    if total <= 0:
        return dist, None
    return dist, {k: round(sum(w * per[f]["dqr"][k] for f, w in weights.items()) / total) for k in DQR_KEYS}


def _around(central: float, lo: float, hi: float) -> tuple[float, float]:
    """A 95 % range around a central value from another source than the range's: where the central value falls on
    or outside the range, the range is mirrored around it in log space (lognormal), so it spans the range's
    sources and the central value stays strictly inside."""
    if central <= 0 or lo <= 0:
        return min(central, lo), max(central, hi)
    if central <= lo:
        return central * central / hi, hi
    if central >= hi:
        return lo, central * central / lo
    return lo, hi


def _scope_note(
    category: str,
    per: dict[str, dict[str, Any]],
    shares: dict[str, float],
    left_out: dict[str, str] | None = None,
    code: str = "",
) -> str:
    """What a mixed value covers, in words, for reports (per category); ``left_out``: technologies whose factor includes
    long-term emissions, left out under site.long_term_emissions=exclude; ``code``: the zone (an inventory of another
    country is named a proxy there)."""
    left_out = {f: t for f, t in (left_out or {}).items() if shares.get(f, 0) > 0}
    present = {f: r for f, r in per.items() if shares.get(f, 0) > 0}
    foreign = _foreign_inventory(present, code)
    direct = sorted(r["technology"] for r in present.values() if r["scope"] == "direct")
    proxy = sorted(r["technology"] for r in present.values() if r["scope"] == "proxy")
    what = (
        "fuel burned at the plant only (no upstream extraction or transport)"
        if category == "resource_use_fossils"
        else ("direct stack emissions only (no upstream fuel chain, no construction)")
    )
    parts = []
    bound = sorted(r["technology"] for r in present.values() if r["scope"] == PARTIAL_CHAIN)
    if bound:
        parts.append(f"{PARTIAL_CHAIN_TEXT} for {', '.join(bound)} (far below every independent life-cycle estimate)")
    if direct and len(direct) == len(present):
        parts.append(f"{what}: lower bound")
    elif direct:
        parts.append(f"{what} for {', '.join(direct)}: lower bound")
    if proxy:
        share = sum(shares[f] for f, r in present.items() if r["scope"] == "proxy")
        parts.append(f"proxy estimate for {', '.join(proxy)} ({_share(share)} of generation; no open factor)")
    if foreign:
        parts.append(foreign)
    names = {f: r["technology"] for rows in _tech_rows().values() for f, r in rows.items()}
    missing = sorted({names[f] for f, s in shares.items() if s > 0 and f not in per and f not in left_out})
    cov = sum(shares[f] for f in per)
    if left_out:
        share = _share(sum(shares[f] for f in left_out))
        parts.append(
            f"{', '.join(sorted(left_out.values()))} ({share} of generation) left out: their open factors include long-term "
            "emissions and no open short-term value exists (site.long_term_emissions: exclude): lower bound"
        )
    if cov < 0.999 and missing:
        parts.append(f"no open life-cycle factor for {', '.join(missing)} ({_share(1 - cov)} of generation): lower bound")
    return "; ".join(parts)


def _foreign_inventory(present: dict[str, dict[str, Any]], code: str) -> str:
    """Technologies whose factor is another country's inventory (a source with ``region``, e.g. USLCI: USA) used
    as a proxy for this zone's plants and fuel chains."""
    sources = db().sources
    by: dict[str, list[str]] = {}
    for r in present.values():
        region = (sources.get(r["source"]) or {}).get("region")
        if region and region != code:
            by.setdefault(f"{region} inventory ({r['source']})", []).append(r["technology"])
    return "; ".join(f"{what} as a proxy for {', '.join(sorted(t))}" for what, t in by.items())


def _share(x: float) -> str:
    return f"{x:.0%}" if 0.01 <= x <= 0.99 else f"{x:.1%}"


def _quantity(row: dict[str, str] | None) -> float | None:
    return float(row["value"]) if row else None


def _aware(code: str) -> ZoneQuantity:
    """The zone's AWARE factor: AWARE 1.2 'unknown use' (EF 3.1), range over AWARE 1.2 / 2.0 variants."""
    table = _zone_table()
    rows = table.get(code) or {}
    central = _quantity(rows.get("aware"))
    if central is None:
        world = float(table[WORLD]["aware"]["value"])
        lo, hi = AWARE_BOUNDS
        return ZoneQuantity(
            world,
            lo,
            hi,
            "m3 world eq/m3",
            f"no AWARE factor for {code}: the EF 3.1 world default, range the AWARE bounds",
            ("aware-1.2", "boulay-2018-aware"),
        )
    alts = [_quantity(r) for q, r in rows.items() if q.startswith("aware")]
    vals = [v for v in [central, *alts] if v is not None]
    srcs = tuple(dict.fromkeys(r["source"] for q, r in rows.items() if q.startswith("aware")))
    lo, hi = _around(central, min(vals), max(vals))  # the EF 3.1 factor strictly inside, within AWARE's own bounds
    lo, hi = max(lo, AWARE_BOUNDS[0]), min(hi, AWARE_BOUNDS[1])
    return ZoneQuantity(central, lo, hi, "m3 world eq/m3", f"AWARE 1.2 annual factor of {code} (EF 3.1)", srcs)


def _ewif(code: str, shares: dict[str, float]) -> tuple[ZoneQuantity | None, dict[str, Any] | None]:
    """Off-site water per kWh: WRI 2020 for the country, else the technology mix; and their cross-check."""
    per = _tech_rows().get(WATER, {})
    mix, mlo, mhi, cov = _mix_sum(per, shares)
    wri = _quantity((_zone_table().get(code) or {}).get("ewif"))
    if wri is None and cov <= 0:
        return None, None
    mix_note = f"technology mix x Macknick et al. 2012 ({cov:.0%} of generation covered)"
    if wri is None:
        return ZoneQuantity(mix, mlo, mhi, "L/kWh", mix_note, ("macknick-2012-water", CODECARBON_SOURCE)), None
    check = None
    if cov > 0:
        ratio = wri / mix if mix else None
        check = {
            "subject": code,
            "category": "water_use",
            "factor": "off-site water per kWh (EWIF)",
            "value": wri,
            "source": "wri-2020-water",
            "second_value": mix,
            "second_source": "macknick-2012-water",
            "ratio": ratio,
            "contested": ratio is None or not 1 / 3 <= ratio <= 3,
        }
    vals = [wri, mix, mlo, mhi] if cov > 0 else [wri]
    lo, hi = _around(wri, min(vals), max(vals))  # WRI strictly inside where the technology mix is all on one side
    q = ZoneQuantity(wri, lo, hi, "L/kWh", f"WRI 2020 factor of {code}; range with the {mix_note}", ("wri-2020-water",))
    return q, check


@lru_cache(maxsize=1)
def _crosscheck() -> list[dict[str, Any]]:
    return db().electricity_crosscheck_rows


def _pair(r: dict[str, str], subject: str, factor: str) -> dict[str, Any]:
    """A cross-check row as a contested-data entry (the factor, its value and the disagreeing source; a technology
    factor's range spans its second sources by construction: in_range)."""
    return {
        "in_range": True,
        "subject": subject,
        "category": r["category"],
        "factor": factor,
        "value": float(r["value"]),
        "source": r["source"],
        "second_value": float(r["second_value"]),
        "second_source": r["second_source"],
        "ratio": float(r["ratio"]) if r["ratio"] else None,
        "unit": r["unit"],
    }


def _contested(code: str, shares: dict[str, float], techs: dict[str, str]) -> list[dict[str, Any]]:
    """Contested technology factors that matter for a zone (technology share >= MIN_SHARE), and the
    zone's own contested factors (AWARE 1.2 vs 2.0)."""
    out = []
    for r in _crosscheck():
        if r["contested"] != "true":
            continue
        if r["quantity"] == "factor":
            share = shares.get(techs.get(r["subject"], ""), 0.0)
            if share >= MIN_SHARE:
                name = f"{r['subject']} electricity, {cat.by_key(r['category']).name.lower()}"
                out.append({**_pair(r, r["subject"], name), "share": share})
        elif r["subject"] == code:
            out.append(_pair(r, code, f"AWARE water scarcity factor of {code}"))
    return out


@lru_cache(maxsize=256)
def zone(code: str, long_term: str = LT_EXCLUDE) -> Zone:
    """All per-kWh factors of a zone, with their ranges, scope, coverage, characterisation method and contested
    factors; ``long_term``: site.long_term_emissions (exclude: factors that include long-term emissions are left out)."""
    shares, name, year, ci = _mix_of(code)
    rows = _rows_of(code)
    techs = {r["technology"]: f for per in rows.values() for f, r in per.items()}
    ewif, ewif_check = _ewif(code, shares)
    aware = _aware(code)
    factors: dict[str, ZoneFactor] = {}
    has_mix = sum(shares.values()) > 0
    for c in cat.categories():
        unit = f"{c.unit}/kWh"
        per, left_out = _counted(rows.get(c.key, {}), long_term)
        if c.key == "climate_change":
            # codecarbon's zone value is the central figure; the technology factors bound it.
            _, lo, hi, cov = _mix_sum(per, shares)
            lo, hi = _around(ci, lo, hi) if cov > 0.999 else (ci, ci)
            srcs = (CODECARBON_SOURCE, *dict.fromkeys(r["source"] for r in per.values()))
            note = "zone carbon intensity from codecarbon (OWID/Ember)"
            dist = "lognormal" if lo < ci < hi else ""
            factors[c.key] = ZoneFactor(ci, unit, 1.0, srcs, lo, hi, note, distribution=dist, characterisation=CLIMATE_METHOD)
        elif c.key == "water_use":
            if ewif is None or not has_mix:
                factors[c.key] = ZoneFactor(None, unit, 0.0, (), note="no off-site water factor for the zone")
                continue
            v, lo, hi = (ewif.value * aware.value / 1000, ewif.low * aware.low / 1000, ewif.high * aware.high / 1000)
            scope = "off-site water of generation only (no fuel chain); " + ewif.method + "; " + aware.method
            srcs = (*ewif.sources, *aware.sources)
            dist = "lognormal" if lo < v < hi else ""
            factors[c.key] = ZoneFactor(v, unit, 1.0, srcs, lo, hi, "EWIF x AWARE", scope, dist, characterisation=WATER_METHOD)
        else:
            factors[c.key] = _mixed_factor(c, per, shares, left_out, code)
    contested = _contested(code, shares, techs)
    if ewif_check and ewif_check["contested"]:
        contested.append(ewif_check)
    factors, national = _national_values(code, factors)
    contested += national
    return Zone(code, name, year, shares, factors, ewif, aware, tuple(contested))


def _mixed_factor(
    c: cat.Category, per: dict[str, dict[str, Any]], shares: dict[str, float], left_out: dict[str, str], code: str = ""
) -> ZoneFactor:
    """A category's factor from the technology rows counted, weighted by the mix."""
    unit = f"{c.unit}/kWh"
    value, lo, hi, cov = _mix_sum(per, shares)
    if not per or cov <= 0:
        missing = ZoneFactor(None, unit, 0.0, (), note="no open per-technology factor", characterisation=NOT_MODELLED)
        lt = _scope_note(c.key, {}, shares, left_out) if any(shares.get(f, 0) > 0 for f in left_out) else ""
        if lt:  # every technology of the mix with a factor has one that includes long-term emissions, left out
            return ZoneFactor(None, unit, 0.0, (), note=lt, scope=f"use phase not modelled: {lt}", not_modelled=True)
        return _not_modelled(c, shares) or missing
    srcs = (CODECARBON_SOURCE, *dict.fromkeys(r["source"] for f, r in per.items() if shares[f] > 0))
    note = "" if cov > 0.999 else f"factors cover {_share(cov)} of generation: lower bound"
    dist, dqr = _mix_quality(per, shares, value)
    scope = _scope_note(c.key, per, shares, left_out, code)
    method = combine_methods([r["characterisation"] for f, r in per.items() if shares.get(f, 0) > 0])
    lt = _long_term_of(per, shares)
    return ZoneFactor(value, unit, cov, srcs, lo, hi, note, scope, dist, dqr, characterisation=method, long_term=lt)


# National per-kWh values the open factors are compared with but that cannot test them: (source, category) -> why.
FLAT_EUTROPHICATION = (
    "ill-posed comparison: ADEME Base IMPACTS' freshwater eutrophication is flat across mixes (2.4e-9 to 4.6e-8 kg P "
    "eq/kWh in the zones quoted, POL with 61 % coal at 1.9e-8): EF-compliant datasets without long-term emissions, "
    "no technology signal"
)
ILL_POSED = {
    (s, "eutrophication_freshwater"): FLAT_EUTROPHICATION for s in ("boaviztapi-ademe-base-impacts", "boaviztapi-electrical-mix")
}
NATIONAL_REASON = (
    "central value kept: the open factors are the better-rated source (the zone's 2023 generation mix x per-technology "
    "factors, against a 2011 national mix whose data are licence-restricted, cross-check only); the range spans the "
    "national value"
)

BOUND_REASON = (
    "central value a labelled lower bound (the open inventory covers only part of the chain), not an estimate the "
    "national value contests; the range spans the national value"
)


def ill_posed(source: str, category: str, value: float) -> str:
    """Why a national value cannot test a factor ("" where it can): a zero, or a value flat across mixes."""
    return ILL_POSED.get((source, category)) or (
        "ill-posed comparison: a zero national value is not an estimate of the category" if value <= 0 else ""
    )


def _national_values(code: str, factors: dict[str, ZoneFactor]) -> tuple[dict[str, ZoneFactor], list[dict[str, Any]]]:
    """Compare the zone's factors with per-country values of other datasets (lca_data/electricity_zone_cited.csv).
    Every comparable national value widens the factor's Monte Carlo range to contain it (the range spans every
    source); the pairs more than 3x apart are listed as contested, with why the central value stays (the better-rated
    source). Ill-posed comparisons (a zero value; ADEME's flat freshwater eutrophication) are listed, never used."""
    out = []
    factors = dict(factors)
    for r in db().electricity_zone_cited_rows:
        f = factors.get(r["category"])
        if r["zone"] != code or f is None or f.value is None:
            continue
        other = float(Q(f"{r['value']} {r['unit']}", f.unit).magnitude)
        why = ill_posed(r["source"], r["category"], other)
        if not why and f.low is not None and f.high is not None and not f.low <= other <= f.high:
            lo, hi = min(f.low, other), max(f.high, other)
            own = f.own_range or (f.low, f.high)
            factors[r["category"]] = replace(f, low=lo, high=hi, distribution=f.distribution or "lognormal", own_range=own)
            f = factors[r["category"]]
        ratio = f.value / other if other and f.value else None
        if ratio is not None and 1 / 3 <= ratio <= 3:
            continue
        out.append(
            {
                "subject": code,
                "category": r["category"],
                "factor": f"{code} grid mix, {cat.by_key(r['category']).name.lower()}",
                "value": f.value,
                "source": "footprint open factors",
                "second_value": other,
                "second_source": r["source"],
                "ratio": ratio,
                "unit": f.unit,
                "in_range": f.low is not None and f.high is not None and f.low <= other <= f.high,
                "note": why or (BOUND_REASON if PARTIAL_CHAIN_TEXT in f.scope else NATIONAL_REASON),
            }
        )
    return factors, out


def use_factors(w: Workload, long_term: str | None = None) -> UseFactors:
    """The per-kWh use-phase factors of a workload's electricity: its zone's open factors, or the
    practitioner's set (site.electricity_factors), with the scenario's climate and EWIF overrides; ``long_term``:
    the site.long_term_emissions setting to build them for (default: the workload's own)."""
    lt = long_term or w.long_term_emissions
    fs = w.electricity_factors
    if fs is not None:
        return _from_set(fs, lt)
    return _open_factors(w.grid, w.carbon_intensity, w.ewif_l_per_kwh if w.ewif_stated else None, lt)


def _from_set(fs: FactorSet, long_term: str) -> UseFactors:
    """A practitioner's set: its own values and the characterisation its file states (else "not stated"); its
    long-term treatment is the file's, whatever site.long_term_emissions says (stated as such)."""
    n = len(cat.keys())
    nm = fs.not_modelled or (False,) * n
    bound = fs.lower_bound or (False,) * n
    scope = tuple(
        src if off else (FILE_BOUND_TEXT if b else "") for src, off, b in zip(fs.row_sources, nm, bound, strict=True)
    )  # why, for the report
    return UseFactors(
        fs.value.copy(),
        fs.low.copy(),
        fs.high.copy(),
        fs.label,
        fs.sources,
        scope,
        np.ones(n),
        not_modelled=nm,
        characterisation=fs.methods or ("not stated",) * n,
        long_term=("as in the user's file",) * n,
        long_term_setting=long_term,
        distribution=tuple("uniform" if b else "" for b in bound),  # a bound: no draw below it
        lower_bound=bound,
    )


@lru_cache(maxsize=64)
def _open_factors(grid: str, ci: float | None, ewif: float | None, long_term: str = LT_EXCLUDE) -> UseFactors:
    keys = cat.keys()
    z = zone(grid, long_term)
    val, lo, hi = (np.full(len(keys), np.nan) for _ in range(3))
    cov = np.zeros(len(keys))
    scope, notes, srcs, dists, dqrs = [], [], [], [], []
    for i, k in enumerate(keys):
        f = z.factors[k]
        scope.append(f.scope)
        dists.append(f.distribution)
        dqrs.append(f.dqr)
        if f.value is None:
            continue
        val[i], lo[i], hi[i], cov[i] = f.value, f.low, f.high, f.coverage
        srcs += list(f.sources)
    i_cc, i_wu = keys.index("climate_change"), keys.index("water_use")
    if ci is not None:
        val[i_cc] = lo[i_cc] = hi[i_cc] = ci
        notes.append(f"climate change of electricity set by the scenario: {ci * 1000:g} g CO2 eq/kWh")
    if ewif is not None and z.aware is not None:
        val[i_wu], lo[i_wu], hi[i_wu] = (ewif * a / 1000 for a in (z.aware.value, z.aware.low, z.aware.high))
        cov[i_wu] = 1.0
        scope[i_wu] = f"off-site water set by the scenario (EWIF {ewif:g} L/kWh) x {z.aware.method}"
    label = f"open factors for {z.code} ({z.name}{', ' + str(z.year) if z.year else ''})"
    contested = tuple(c for c in z.contested if ci is None or c["category"] != "climate_change")
    for arr in (val, lo, hi, cov):
        arr.setflags(write=False)  # cached and shared: callers copy before changing
    nm = tuple(z.factors[k].not_modelled for k in keys)
    srcs = tuple(dict.fromkeys(srcs))
    methods = [z.factors[k].characterisation or NOT_MODELLED for k in keys]
    if ci is not None:
        methods[i_cc] = "stated by the scenario (site.carbon_intensity)"
    lt = tuple(z.factors[k].long_term for k in keys)
    return UseFactors(
        val,
        lo,
        hi,
        label,
        srcs,
        tuple(scope),
        cov,
        contested,
        tuple(notes),
        tuple(dists),
        tuple(dqrs),
        nm,
        tuple(methods),
        lt,
        long_term,
        tuple(PARTIAL_CHAIN_TEXT in (z.factors[k].scope or "") and not (k == "climate_change" and ci is not None) for k in keys),
    )


def site_water_factor(w: Workload) -> tuple[float, float, float] | None:
    """EF water use of the site's own cooling water, m3 world eq per kWh of IT energy (value, low, high):
    WUE x the zone's AWARE factor; None when the WUE is not known."""
    if w.wue_l_per_kwh is None:
        return None
    a = zone(w.grid).aware
    if a is None:
        return None
    return tuple(w.wue_l_per_kwh * x / 1000 for x in (a.value, a.low, a.high))  # type: ignore[return-value]


def zone_ewif(code: str) -> ZoneQuantity | None:
    """Off-site water consumed per kWh of the zone's electricity (L/kWh), with its range and method."""
    return zone(code).ewif


def intensity_override(value: str | float, file: str | None = None, key: str = "site.carbon_intensity") -> float:
    """A user's carbon intensity ("57 g/kWh", "57 g CO2 eq/kWh") in kg CO2 eq per kWh: finite, not negative."""
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FootprintError(f"expected a carbon intensity such as '57 g/kWh', got {value!r}", file, key)
    try:
        q = Q(value) if isinstance(value, str) else Q(value, "g/kWh")
    except UnitParseError as exc:
        raise FootprintError(str(exc), file, key) from None
    try:
        v = float(q.to("kgCO2eq/kWh").magnitude)
    except Exception:
        try:
            v = float(q.to("kg/kWh").magnitude)  # mass per energy: read as CO2 eq
        except Exception:
            raise FootprintError(
                f"{value!r} is not a carbon intensity (expected e.g. '57 g/kWh' or '0.057 kg CO2 eq/kWh')", file, key
            ) from None
    if not math.isfinite(v) or v < 0:
        raise FootprintError(f"must be a finite carbon intensity >= 0, got {value!r}", file, key)
    return v
