"""Per-kWh factors from a practitioner's own Brightway project (``footprint factors brightway``).

A practitioner holds ecoinvent or the EF secondary data under licence in a Brightway project; this runs
Brightway's own LCIA (bw2calc) of one kWh of the named activity for each of the 16 EF 3.1 categories and
writes the factor file ``site.electricity_factors`` reads (`footprint.lca.factorfile`). Brightway
(bw2data, bw2calc: the optional extra ``lca``) is imported only here, inside `compute`, so the core and its
cold start never load it. ``BRIGHTWAY2_DIR`` is left to Brightway, which reads it on import.

Methods are found by family (``method[0]``, "EF v3.1"; an exact family first, else one family that starts
with the text) and category (``method[1]``, matched against ecoinvent's EF 3.1 category names and the EF
names), e.g. ``("EF v3.1", "climate change", "global warming potential (GWP100)")``. Sub-indicators
("climate change: fossil", "human toxicity: carcinogenic, inorganics") are not the category and never match.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass
from typing import Any

from footprint.errors import FootprintError
from footprint.lca import categories as cat

#: method[1] spellings per category: ecoinvent's EF 3.1 implementation first, then the EF method's own names.
CATEGORY_NAMES: dict[str, tuple[str, ...]] = {
    "climate_change": ("climate change", "climate change, total"),
    "ozone_depletion": ("ozone depletion",),
    "human_toxicity_cancer": ("human toxicity: carcinogenic", "human toxicity, cancer"),
    "human_toxicity_non_cancer": ("human toxicity: non-carcinogenic", "human toxicity, non-cancer"),
    "particulate_matter": ("particulate matter formation", "particulate matter"),
    "ionising_radiation": ("ionising radiation: human health", "ionising radiation", "ionising radiation, human health"),
    "photochemical_ozone_formation": (
        "photochemical oxidant formation: human health",
        "photochemical ozone formation",
        "photochemical ozone formation, human health",
    ),
    "acidification": ("acidification",),
    "eutrophication_terrestrial": ("eutrophication: terrestrial", "eutrophication, terrestrial"),
    "eutrophication_freshwater": ("eutrophication: freshwater", "eutrophication, freshwater"),
    "eutrophication_marine": ("eutrophication: marine", "eutrophication, marine"),
    "ecotoxicity_freshwater": ("ecotoxicity: freshwater", "ecotoxicity, freshwater"),
    "land_use": ("land use",),
    "water_use": ("water use",),
    "resource_use_fossils": ("energy resources: non-renewable", "resource use, fossils"),
    "resource_use_minerals_metals": ("material resources: metals/minerals", "resource use, minerals and metals"),
}

#: Method units (normalised: lower case, no spaces, '-', '.', 'eq') each category accepts beside its own unit:
#: ecoinvent writes land use as dimensionless points, water use as "m3 world eq. deprived", fossils as
#: "MJ, net calorific value".
UNIT_ALIASES: dict[str, tuple[str, ...]] = {
    "land_use": ("dimensionless", "pt", "points"),
    "water_use": ("m3worlddeprived", "m3deprived", "m3world"),
    "resource_use_fossils": ("mj", "mj,netcalorificvalue"),
    "particulate_matter": ("diseaseincidence", "diseaseinc"),
}

#: One kWh in an activity's unit (Brightway's unit names, and the short ones).
KWH_IN: dict[str, float] = {
    "kilowatt hour": 1.0,
    "kwh": 1.0,
    "megawatt hour": 1e-3,
    "mwh": 1e-3,
    "megajoule": 3.6,
    "mj": 3.6,
}


class BrightwayError(FootprintError):
    """A project, database, activity or method family Brightway does not have (or Brightway absent)."""


@dataclass(frozen=True)
class Row:
    """One category's result: the score per kWh in the category's unit, or None with the reason."""

    key: str
    value: float | None
    method: tuple[str, ...] | None
    note: str


@dataclass(frozen=True)
class Result:
    project: str
    database: str
    activity: str  # name [location] (code)
    family: str
    long_term: str
    versions: str
    rows: tuple[Row, ...]


def _norm_unit(u: str) -> str:
    return re.sub(r"[\s\-.]", "", u.lower()).replace("eq", "")


def unit_matches(key: str, method_unit: str) -> bool:
    """Whether a method's unit is the category's (spelt the Brightway way: 'kg CO2-Eq' is 'kg CO2 eq')."""
    got = _norm_unit(method_unit)
    return got == _norm_unit(cat.by_key(key).unit) or got in UNIT_ALIASES.get(key, ())


def find_methods(methods: list[tuple[str, ...]], family: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    """The family actually used and its method per category (absent: no method of that category)."""
    families = sorted({m[0] for m in methods if m})
    chosen = [f for f in families if f.lower() == family.lower()]
    if not chosen:
        chosen = [f for f in families if f.lower().startswith(family.lower())]
    if not chosen:
        near = ", ".join(repr(f) for f in families[:8]) or "none"
        raise BrightwayError(f"no LCIA method family {family!r} in this project (families: {near})", None, "--method-family")
    if len(chosen) > 1:
        raise BrightwayError(
            f"method family {family!r} matches {', '.join(repr(f) for f in chosen)}: give one exactly", None, "--method-family"
        )
    fam = chosen[0]
    found: dict[str, tuple[str, ...]] = {}
    for key, names in CATEGORY_NAMES.items():
        hits = [m for m in methods if m and m[0] == fam and len(m) > 1 and m[1].strip().lower() in names]
        if len(hits) > 1:
            raise BrightwayError(
                f"family {fam!r} has {len(hits)} methods for {key}: {', '.join(map(str, hits))}", None, "--method-family"
            )
        if hits:
            found[key] = hits[0]
    return fam, found


def long_term_of(family: str) -> str:
    """ecoinvent's convention: 'EF v3.1' includes long-term emissions (landfill, tailings beyond 100 years),
    'EF v3.1 no LT' excludes them."""
    return "excluded (no LT)" if re.search(r"\bno\s*lt\b", family, re.I) else "included"


def compute(project: str, database: str, activity: str, location: str | None = None, family: str = "EF v3.1") -> Result:
    """Brightway's LCIA of 1 kWh of ``activity`` for each category's method of ``family``. Brightway's own log
    lines (it prints which data directory it uses, in colour) are dropped: stdout may be the factor file, and an
    error is one line on stderr."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _compute(project, database, activity, location, family)


def _compute(project: str, database: str, activity: str, location: str | None, family: str) -> Result:
    bd, bc = _brightway()
    if project not in bd.projects:
        names = ", ".join(sorted(p.name for p in bd.projects)[:8])
        raise BrightwayError(
            f"no Brightway project {project!r} in {bd.projects.dir.parent} (projects: {names})", None, "--project"
        )
    bd.projects.set_current(project)
    if database not in bd.databases:
        names = ", ".join(sorted(bd.databases)[:8]) or "none"
        raise BrightwayError(f"no database {database!r} in project {project!r} (databases: {names})", None, "--database")
    act = _activity(bd, database, activity, location)
    unit = str(act.get("unit", "")).strip()
    amount = KWH_IN.get(unit.lower())
    if amount is None:
        raise BrightwayError(f"activity {_label(act)} is in {unit!r}, not in an energy unit (kWh, MWh, MJ)", None, "--activity")
    fam, found = find_methods([tuple(m) for m in bd.methods], family)
    rows, lca = [], None
    for key in cat.keys():
        m = found.get(key)
        if m is None:
            rows.append(Row(key, None, None, f"no method of this category in family {fam!r}: not available"))
            continue
        munit = str(bd.methods[m].get("unit", ""))
        if not unit_matches(key, munit):
            raise BrightwayError(
                f"method {m} is in {munit!r}, expected {cat.by_key(key).unit} (the EF 3.1 unit of {key})", None, "--method-family"
            )
        if lca is None:
            lca = bc.LCA({act: amount}, method=m)
            lca.lci()
        else:
            lca.switch_method(m)
        lca.lcia()
        rows.append(_row(key, float(lca.score), m))
    versions = f"bw2data {bd.__version__}, bw2calc {bc.__version__}"
    return Result(project, database, _label(act), fam, long_term_of(fam), versions, tuple(rows))


def _row(key: str, score: float, m: tuple[str, ...]) -> Row:
    if score != score or score in (float("inf"), float("-inf")):
        return Row(key, None, m, f"Brightway gave {score}: not available")
    if score < 0:  # a credit: the factor file takes no negative per-kWh factor, and n/a is not zero
        return Row(key, None, m, f"Brightway gives {score:.6g} (a net credit); the factor file takes no negative factor")
    note = "no flow of the inventory has a factor in this method (Brightway's score is 0)" if score == 0 else ""
    return Row(key, score, m, note)


def _label(act: Any) -> str:
    return f"{act['name']!r} [{act.get('location', '?')}] ({act['database']}, {act['code']})"


def _activity(bd: Any, database: str, name: str, location: str | None) -> Any:
    from bw2data.backends import ActivityDataset as AD

    q = AD.select().where((AD.database == database) & (AD.name == name))
    hits = [bd.get_activity((r.database, r.code)) for r in q]
    if hits and location is not None:
        here = [a for a in hits if a.get("location") == location]
        if not here:
            locs = ", ".join(sorted({str(a.get("location")) for a in hits})[:12])
            raise BrightwayError(
                f"activity {name!r} has no location {location!r} in {database!r} (it has: {locs})", None, "--location"
            )
        hits = here
    if not hits:
        import difflib

        names = [r.name for r in AD.select(AD.name).where(AD.database == database).distinct()]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise BrightwayError(f"no activity {name!r} in database {database!r}{hint}", None, "--activity")
    if len(hits) > 1:
        locs = ", ".join(sorted({str(a.get("location")) for a in hits})[:12])
        raise BrightwayError(
            f"{len(hits)} activities named {name!r} in {database!r} (locations {locs}): give --location (and a unique name)",
            None,
            "--activity",
        )
    return hits[0]


def _brightway() -> tuple[Any, Any]:
    """bw2data and bw2calc, or one line saying how to install them (or what is wrong with BRIGHTWAY2_DIR)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bw2calc warns once that pypardiso is absent: the solver still works
            import bw2calc as bc
            import bw2data as bd
    except ImportError:
        raise BrightwayError('Brightway is not installed: pip install "footprint[lca]" (bw2data, bw2calc)') from None
    except OSError as exc:  # BRIGHTWAY2_DIR that is not a writable directory: Brightway refuses on import
        raise BrightwayError(f"Brightway cannot start: {exc}", None, "BRIGHTWAY2_DIR") from None
    return bd, bc


def factor_file(r: Result) -> str:
    """The result as a factor file (`footprint.lca.factorfile` format, with characterisation and long_term)."""
    from footprint.lca.factorfile import header_lines, write_rows
    from footprint.lca.units import display_unit

    buf = io.StringIO()
    buf.write(
        header_lines(
            f"Computed by `footprint factors brightway`: Brightway LCIA ({r.versions}) of 1 kWh of {r.activity},\n"
            f"project {r.project!r}, method family {r.family!r} (long-term emissions {r.long_term})."
        )
    )
    rows = []
    for row in r.rows:
        unit = f"{display_unit(cat.by_key(row.key).unit)}/kWh"
        src = f"Brightway project {r.project}, database {r.database}, activity {r.activity}"
        src += f", method {row.method}" if row.method else ""
        value = "n/a" if row.value is None else f"{row.value:.9g}"
        rows.append([row.key, value, unit, "", "", src, cat.method_name(r.family), row.note, r.long_term])
    write_rows(buf, rows, extra=("long_term",))
    return buf.getvalue()
