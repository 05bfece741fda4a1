"""Per-kWh impacts of a grid zone's electricity, for the use phase.

Climate change: the zone's carbon intensity from the country data that the installed codecarbon
package ships (OWID/Ember, read from the package's data file; codecarbon itself is never imported,
which would cost a second). Other categories: per-technology factors (lca_data/electricity_technologies.csv)
times the zone's generation mix from the same codecarbon file. A category with no factor is "not
available" (None), never zero; where only part of the mix has a factor, the value covers that part
(a lower bound) and the coverage is reported.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from footprint.errors import FootprintError
from footprint.lca import categories as cat
from footprint.lca.database import db
from footprint.lca.units import Q

WORLD = "WORLD"
CODECARBON_SOURCE = "codecarbon-energy-mix"


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


@dataclass(frozen=True)
class Zone:
    code: str
    name: str
    year: int | None
    mix: dict[str, float]  # codecarbon field -> share of generation
    factors: dict[str, ZoneFactor] = field(default_factory=dict)


def _codecarbon_file() -> Path:
    spec = importlib.util.find_spec("codecarbon")
    if spec is None or not spec.submodule_search_locations:
        raise FootprintError("the codecarbon package is not installed; it provides the grid data (pip install codecarbon)")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "private_infra" / "global_energy_mix.json"


@lru_cache(maxsize=1)
def _energy_mix() -> dict[str, dict]:
    return json.loads(_codecarbon_file().read_text())


def _tech_factors() -> dict[str, dict[str, tuple[float, str]]]:
    """category -> codecarbon field -> (factor, source)."""
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for r in db().electricity_rows:
        out.setdefault(r["category"], {})[r["codecarbon_field"]] = (float(r["value"]), r["source"])
    return out


def zone_codes() -> list[str]:
    return sorted(_energy_mix()) + [WORLD]


def resolve_zone(name: str, file: str | None = None, key: str | None = "site.grid") -> str:
    """ISO3 code of a zone given as ISO3 code or country name (case-insensitive), or WORLD."""
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
    fields = {f for per in _tech_factors().values() for f in per}
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


@lru_cache(maxsize=256)
def zone(code: str) -> Zone:
    """All per-kWh factors of a zone (climate change from codecarbon, the rest from technologies)."""
    shares, name, year, ci = _mix_of(code)
    techs = _tech_factors()
    factors: dict[str, ZoneFactor] = {}
    for c in cat.categories():
        per = techs.get(c.key, {})
        covered = sum(shares[f] for f in per)
        value = sum(shares[f] * v for f, (v, _) in per.items()) if per else None
        srcs = tuple(dict.fromkeys(s for _, s in per.values()))
        unit = f"{c.unit}/kWh"
        if c.key == "climate_change":
            # codecarbon's zone value is the central figure; the technology mix gives a second estimate.
            tech = value if covered > 0.999 else None
            lo, hi = (min(ci, tech), max(ci, tech)) if tech is not None else (ci, ci)
            factors[c.key] = ZoneFactor(
                ci, unit, 1.0, (CODECARBON_SOURCE, *srcs), lo, hi, "zone carbon intensity from codecarbon (OWID/Ember)"
            )
        elif not per or covered <= 0:
            factors[c.key] = ZoneFactor(None, unit, 0.0, (), note="no open per-technology factor")
        else:
            note = (
                ""
                if covered > 0.999
                else (f"factors cover {covered:.0%} of generation (no factor for oil, bioenergy, other renewables): lower bound")
            )
            factors[c.key] = ZoneFactor(value, unit, covered, (CODECARBON_SOURCE, *srcs), note=note)
    return Zone(code, name, year, shares, factors)


def intensity_override(value: str | float, file: str | None = None) -> float:
    """A user's carbon intensity ("57 g/kWh", "57 g CO2 eq/kWh") in kg CO2 eq per kWh."""
    q = Q(value) if isinstance(value, str) else Q(float(value), "g/kWh")
    try:
        return float(q.to("kgCO2eq/kWh").magnitude)
    except Exception:
        try:
            return float(q.to("kg/kWh").magnitude)  # mass per energy: read as CO2 eq
        except Exception:
            raise FootprintError(
                f"{value!r} is not a carbon intensity (expected e.g. '57 g/kWh' or '0.057 kg CO2 eq/kWh')",
                file,
                "site.carbon_intensity",
            ) from None
