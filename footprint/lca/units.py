"""The project's one pint registry, with the EF 3.1 impact units.

Every physical number that crosses a boundary is a pint quantity or a string this module parses
("400 W", "3 years", "57 g/kWh", "1.8 L/kWh", "113.5 kg CO2 eq"). Each EF characterisation unit gets
its own dimension so that a kg Sb eq can never be added to a kg CO2 eq by mistake.

The registry is built lazily on first use, and ``import footprint`` stays cheap for the training-job
tracker. Parsing pint's definition files costs ~0.3-0.4 s per process; pint's own disk cache of the
parsed definitions (in ``$FOOTPRINT_CACHE_DIR``, default the user cache folder, e.g.
``~/.cache/footprint``) brings that to ~0.03 s from the second command on. An unwritable or damaged
cache is skipped, never an error.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pint

# Canonical pint names of the EF units, each on its own dimension.
_EF_DEFINITIONS = """
kgCO2eq = [climate_change]
gCO2eq = 1e-3 * kgCO2eq
tCO2eq = 1e3 * kgCO2eq
kgCFC11eq = [ozone_depletion]
CTUh = [human_toxicity]
CTUe = [ecotoxicity]
disease_incidence = [particulate_matter]
kBqU235eq = [ionising_radiation]
kgNMVOCeq = [photochemical_ozone]
molHeq = [acidification]
molNeq = [eutrophication_terrestrial]
kgPeq = [eutrophication_freshwater]
kgNeq = [eutrophication_marine]
Pt_land = [land_use]
m3_world_eq = [water_deprivation]
kgSbeq = [mineral_resources]
FLOP = [computation] = flop
"""

# User-facing spellings (longest first) -> canonical pint names. Applied before pint parses.
_PHRASES: list[tuple[str, str]] = [
    (r"(?P<p>[kgt])\s*CO2[\s_-]*(?:e|eq|eq\.|equivalent|-eq)(?![A-Za-z])", r"\g<p>CO2eq"),
    (r"kg\s*CFC[\s_-]*11[\s_-]*(?:eq\.?|equivalent)", "kgCFC11eq"),
    (r"kBq\s*U[\s_-]*235[\s_-]*(?:eq\.?|equivalent)", "kBqU235eq"),
    (r"kg\s*NMVOC[\s_-]*(?:eq\.?|equivalent)", "kgNMVOCeq"),
    (r"mol\s*H\+?[\s_-]*(?:eq\.?|equivalent)", "molHeq"),
    (r"mol\s*N[\s_-]*(?:eq\.?|equivalent)", "molNeq"),
    (r"kg\s*P[\s_-]*(?:eq\.?|equivalent)", "kgPeq"),
    (r"kg\s*N[\s_-]*(?:eq\.?|equivalent)", "kgNeq"),
    (r"kg\s*Sb[\s_-]*(?:eq\.?|equivalent)", "kgSbeq"),
    (r"m(?:3|³|\*\*3|\^3)\s*world[\s_-]*eq\.?(?:\s*deprived)?", "m3_world_eq"),
    (r"disease[\s_]+incidence", "disease_incidence"),
    (r"(?<![A-Za-z])m³", "m**3"),
    (r"(?<![A-Za-z_])m3(?![A-Za-z_])", "m**3"),
    (r"(?<![A-Za-z_])(cm|mm)2(?![A-Za-z_])", r"\1**2"),
    (r"(?<![A-Za-z_])(cm|mm)²", r"\1**2"),
    (r"(?<![A-Za-z_])Pt(?![A-Za-z_])", "Pt_land"),  # EF points (land use), never pint's petatonne
]
_COMPILED = [(re.compile(p), r) for p, r in _PHRASES]
_PT_ALONE = re.compile(r"^\s*(?P<num>[-+0-9.eE]*)\s*Pt\s*$")

# Display spellings of canonical names (for reports).
_DISPLAY = {
    "kgCO2eq": "kg CO2 eq",
    "gCO2eq": "g CO2 eq",
    "tCO2eq": "t CO2 eq",
    "kgCFC11eq": "kg CFC11 eq",
    "kBqU235eq": "kBq U235 eq",
    "kgNMVOCeq": "kg NMVOC eq",
    "molHeq": "mol H+ eq",
    "molNeq": "mol N eq",
    "kgPeq": "kg P eq",
    "kgNeq": "kg N eq",
    "kgSbeq": "kg Sb eq",
    "m3_world_eq": "m3 world eq",
    "disease_incidence": "disease incidence",
    "Pt_land": "Pt",
}


def cache_dir() -> Path | None:
    """Where pint caches its parsed definitions (None: no cache)."""
    from footprint.lca.diskcache import cache_root

    root = cache_root()
    return root / "pint" if root is not None else None


@lru_cache(maxsize=1)
def _registry() -> pint.UnitRegistry:
    import pint

    folder = cache_dir()
    try:
        if folder is None:
            raise OSError("no cache folder")
        folder.mkdir(parents=True, exist_ok=True)
        reg = pint.UnitRegistry(cache_folder=folder)
    except Exception:  # unwritable folder, a cache half-written by a concurrent process...: parse afresh
        reg = pint.UnitRegistry(cache_folder=None)
    for line in _EF_DEFINITIONS.strip().splitlines():
        reg.define(line)
    reg.formatter.default_format = "~P" if hasattr(reg, "formatter") else ""
    pint.set_application_registry(reg)
    return reg


def __getattr__(name: str) -> Any:  # lazy module attribute: footprint.lca.units.ureg
    if name == "ureg":
        return _registry()
    raise AttributeError(name)


def normalise(text: str) -> str:
    """Rewrite the EF spellings users type ("kg CO2 eq", "m3 world eq") into pint names."""
    m = _PT_ALONE.match(text)
    if m:
        return f"{m.group('num')} Pt_land" if m.group("num") else "Pt_land"
    out = text.strip()
    for pattern, repl in _COMPILED:
        out = pattern.sub(repl, out)
    return out


class UnitParseError(ValueError):
    """A string that is not a quantity, or not of the expected dimension."""


# What a quantity string may hold before pint sees it: numbers, unit names, `*`, `/`, parentheses around units,
# and small integer powers of units (`m**3`, `kg/(m**2*yr)`, `3 * 24 h`). pint evaluates what it is given as
# an expression, so `9**9**9 years` would compute a 370-million-digit integer and `(2+1)*years` would be
# arithmetic: neither is a quantity anyone writes, both are refused here in microseconds.
MAX_QUANTITY_CHARS = 200
_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)|(?P<pow>\*\*|\^)|(?P<op>[*/()])"
    r"|(?P<name>[^\W\d][\w°]*|°[\w]*|%)|(?P<sign>[-+]))"
)


def check_expression(text: str, original: Any = None) -> None:
    """Raise UnitParseError unless ``text`` (normalised) is numbers, units and simple products only."""
    shown = original if original is not None else text
    if len(text) > MAX_QUANTITY_CHARS:
        raise UnitParseError(f"{str(shown)[:40]!r}...: longer than {MAX_QUANTITY_CHARS} characters, not a quantity")
    pos, depth, prev = 0, 0, ""  # prev: kind of the previous token
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise UnitParseError(f"cannot read {shown!r} as a quantity (unexpected {text[pos:].strip()[:10]!r})")
        kind = m.lastgroup or ""
        pos = m.end()
        if kind == "pow":
            e = re.match(r"\s*[-+]?\d{1,2}(?![\d.eE])", text[pos:])
            if prev not in ("name", ")") or e is None:
                raise UnitParseError(f"cannot read {shown!r} as a quantity (powers: a unit to a small whole number, e.g. m**3)")
            pos += e.end()
            if re.match(r"\s*(\*\*|\^)", text[pos:]):
                raise UnitParseError(f"cannot read {shown!r} as a quantity (a power of a power)")
            prev = "exp"
            continue
        if kind == "sign" and prev != "":
            raise UnitParseError(f"cannot read {shown!r} as a quantity (+ and - are not units; write one number)")
        if kind == "num" and prev == "num":  # `3.5.1 years` would be read as 3.5 x .1 = 0.35 years
            raise UnitParseError(f"cannot read {shown!r} as a quantity (two numbers in a row: write one number)")
        if kind == "num" and depth:
            raise UnitParseError(f"cannot read {shown!r} as a quantity (numbers go before the unit, not inside parentheses)")
        if kind == "op":
            op = m.group("op")
            depth += {"(": 1, ")": -1}.get(op, 0)
            if depth < 0 or depth > 4:
                raise UnitParseError(f"cannot read {shown!r} as a quantity (unbalanced or deep parentheses)")
            prev = op if op in "()" else "op"
            continue
        prev = kind


def _finite(q: pint.Quantity, original: Any) -> pint.Quantity:
    m = q.magnitude
    if isinstance(m, (int, float)) and not math.isfinite(m):
        raise UnitParseError(f"{original!r} is not a finite quantity")
    return q


def Q(value: Any, unit: str | None = None) -> pint.Quantity:  # noqa: N802 - short, like pint's Q_
    """Make a quantity from "400 W", (400, "W"), a number with ``unit``, or a quantity. Strings are numbers, units
    and simple products only (`check_expression`); nan and infinities are refused."""
    reg = _registry()
    if isinstance(value, reg.Quantity):
        return value if unit is None else value.to(parse_unit(unit))
    if isinstance(value, str):
        text = normalise(value)
        q = _number_and_unit(text)
        if q is None:
            check_expression(text, value)
            try:
                q = reg.Quantity(text)
            except Exception as exc:  # pint raises many kinds; users get one
                raise UnitParseError(f"cannot read {value!r} as a quantity ({exc})") from None
        if not isinstance(q, reg.Quantity):
            q = reg.Quantity(q)
        _finite(q, value)
        if unit is not None:
            return _finite(to(q, unit, original=value), value)
        return q
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            raise UnitParseError(f"{value!r} is not a finite quantity") from None
        return _finite(reg.Quantity(number, parse_unit(unit) if unit else "dimensionless"), value)
    raise UnitParseError(f"cannot read {value!r} as a quantity")


_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s+(\S.*?)\s*$")


@lru_cache(maxsize=1024)
def _unit(text: str) -> pint.Unit:
    check_expression(text)
    return _registry().Unit(text)


def _number_and_unit(text: str) -> pint.Quantity | None:
    """Read "400 W" as 400 x a cached unit: the same quantity pint's expression parser gives, at a fraction of its
    cost (the database alone parses ~450 such strings per process). Anything else (expressions, no space,
    unknown or offset units) returns None for the full parser."""
    m = _NUMBER_UNIT.match(text)
    if m is None:
        return None
    number, unit = m.group(1), m.group(2)
    try:
        # pint evaluates "57 g/kWh" as 57 * g / kWh: an int stays int only without a division
        integer = number.lstrip("+-").isdigit() and "/" not in unit
        q = _registry().Quantity(int(number) if integer else float(number), _unit(unit))
    except Exception:
        return None
    return q if q._is_multiplicative else None  # "20 degC": pint's own parser and its error


def parse_unit(unit: str) -> pint.Unit:
    reg = _registry()
    try:
        text = normalise(unit)
        check_expression(text, unit)
        return reg.Unit(text)
    except UnitParseError:
        raise
    except Exception as exc:
        raise UnitParseError(f"unknown unit {unit!r} ({exc})") from None


def to(q: pint.Quantity, unit: str, original: Any = None) -> pint.Quantity:
    """Convert, with an error that says what was given and what was expected."""
    target = parse_unit(unit)
    try:
        return q.to(target)
    except Exception:
        shown = original if original is not None else f"{q:~}"
        raise UnitParseError(
            f"{shown!r} is not a {display_unit(unit)} quantity (expected something convertible to {display_unit(unit)})"
        ) from None


def magnitude(value: Any, unit: str) -> float:
    """The magnitude of ``value`` in ``unit`` (strings, numbers in ``unit``, or quantities)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(Q(value, unit).magnitude)


def display_unit(unit: str | Any) -> str:
    """Human spelling of a unit ("kgCO2eq" -> "kg CO2 eq")."""
    text = normalise(unit) if isinstance(unit, str) else f"{unit:~}"
    for canon, shown in _DISPLAY.items():
        text = re.sub(rf"(?<![A-Za-z_]){canon}(?![A-Za-z_])", shown, text)
    return text.replace("**", "^")


# Smaller units a display unit steps down to (factor to the unit, spelling), as pint's `to_compact` picks an SI
# prefix per magnitude: kept to the prefixes these units are written with (no "mCTUh"; a toxic unit stays CTU).
_SMALLER: dict[str, tuple[tuple[float, str], ...]] = {
    "kg": ((1e-3, "g"), (1e-6, "mg"), (1e-9, "µg")),
    "mol": ((1e-3, "mmol"), (1e-6, "µmol")),
    "kBq": ((1e-3, "Bq"), (1e-6, "mBq")),
    "MJ": ((1e-3, "kJ"), (1e-6, "J")),
    "kWh": ((1e-3, "Wh"), (1e-6, "mWh")),
    "L": ((1e-3, "mL"),),
    "m3": ((1e-3, "L"), (1e-6, "mL")),
    "Pt": ((1e-3, "mPt"), (1e-6, "µPt")),
}
COMPACT_BELOW = 0.1  # a value under 0.1 of its unit steps down a prefix: 2.1e-4 kg CO2 eq reads 0.21 g CO2 eq


def compact(value: float | None, unit: str) -> tuple[float, str]:
    """(factor, unit) that write ``value`` (in the display unit ``unit``) readably: the largest smaller unit in which
    it is at least 0.1, or ``unit`` itself (a value of 0.1 and above, zero, n/a, or a unit without smaller units).
    Multiply every number of the row (total, low, high) by the factor: they share the unit."""
    head, sep, rest = unit.partition(" ")
    steps = _SMALLER.get(head, ())
    if value is None or not steps or not math.isfinite(value) or value == 0 or abs(value) >= COMPACT_BELOW:
        return 1.0, unit
    factor, name = steps[-1]
    for f, n in steps:
        factor, name = f, n
        if abs(value) / f >= COMPACT_BELOW:
            break
    return 1.0 / factor, name + sep + rest


def fmt(q: pint.Quantity, digits: int = 4) -> str:
    """A unit-bearing string for reports and JSON ("113.5 kg CO2 eq")."""
    return f"{q.magnitude:.{digits}g} {display_unit(str(q.units))}"
