"""A practitioner's own per-kWh electricity factors (``site.electricity_factors: FILE.csv``).

A practitioner with a licensed database (ecoinvent, EF secondary data) can replace the open factors of
the use phase by their grid's factors in all 16 EF 3.1 categories. The file is validated like every
other input: one line naming the file, the row and the column, nothing computed with a bad file.

Format (a template: lca_data/templates/electricity_factors.csv; comment lines start with '#')::

    category,value,unit,low,high,source,note
    climate_change,0.0569,kg CO2 eq/kWh,0.05,0.07,ecoinvent 3.10 market for electricity FR (EF 3.1),
    ozone_depletion,n/a,kg CFC11 eq/kWh,,,no factor in my database,

Every one of the 16 categories appears exactly once; ``value`` is a number or ``n/a`` (not available);
``unit`` is any unit convertible to the category's unit per kWh (g CO2 eq/kWh, kg CO2 eq/MWh ...);
``low``/``high`` (optional, in the same unit) bound the Monte Carlo range; ``source`` is required;
``characterisation`` (optional) names the method behind the value ("EF 3.1", "ILCD 2.0 (2018)" ...): only a row
saying "EF 3.1" counts as EF 3.1 in the single score, an empty one is "not stated (user's factor file)";
``bound`` (optional) "lower" marks a value that is a lower bound (drawn uniform from it up to ``high``, its stage share
shown "≥"), as the open factors' ozone depletion (an inventory covering only part of the chain). Values
are finite and not negative (a negative per-kWh factor would turn the use phase into a credit: no
electricity dataset we know has one, and a sign error is far likelier).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from footprint.errors import FootprintError, ScenarioError
from footprint.inputs import read_text
from footprint.lca import categories as cat
from footprint.lca.factorset import FactorSet
from footprint.lca.units import Q, UnitParseError

MAX_BYTES = 1_000_000
REQUIRED = ("category", "value", "unit", "source")
NOT_AVAILABLE = ("n/a", "na", "")
METHOD_NOT_STATED = "not stated (user's factor file)"


def _err(path: str, key: str, msg: str) -> ScenarioError:
    return ScenarioError(msg, path, key)


def _number(path: str, key: str, text: str, scale: float = 1.0) -> float:
    """A finite number >= 0 (times ``scale``, the unit's factor to the category's unit per kWh)."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise _err(path, key, f"expected a number or n/a, got {text!r}") from None
    if not math.isfinite(v) or not math.isfinite(v * scale):
        raise _err(path, key, f"expected a finite number, got {text!r}")
    if v < 0:
        raise _err(path, key, f"expected a factor >= 0 (electricity has no negative impact per kWh), got {text!r}")
    return v * scale


def load(path: str | Path, scenario: str | None = None) -> FactorSet:
    """Read and validate a factor file; errors name the file, row and column."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"no such electricity factor file {str(p)!r}", scenario, "site.electricity_factors")
    name = str(p)
    try:
        text = read_text(p, "CSV of electricity factors", MAX_BYTES)
    except FootprintError as exc:
        raise _err(name, "-", exc.detail) from None
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    reader = csv.DictReader(io.StringIO(body))
    try:  # a field over csv's size limit (131,072 characters) or a broken quote: one line, not a traceback
        header = [h.strip() for h in (reader.fieldnames or [])]
        raw_rows = list(reader)
    except csv.Error as exc:
        raise _err(name, "-", f"not a CSV this reader takes ({exc})") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise _err(name, "header", f"missing column(s) {', '.join(missing)}; expected {','.join(REQUIRED)} (+ low, high, note)")
    keys = cat.keys()
    n = len(keys)
    val, lo, hi = (np.full(n, np.nan) for _ in range(3))
    srcs = [""] * n
    methods = [METHOD_NOT_STATED] * n
    bound = [False] * n
    seen: dict[str, int] = {}
    line_of_row = _data_lines(text)
    for i, raw in enumerate(raw_rows):
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        where = f"row {line_of_row[i] if i < len(line_of_row) else i + 2}"
        key = row.get("category", "")
        if key not in keys:
            raise _err(name, f"{where}, column 'category'", f"unknown category {key!r}; expected one of {', '.join(keys)}")
        if key in seen:
            raise _err(name, f"{where}, column 'category'", f"{key} is given twice (first in row {seen[key]})")
        seen[key] = line_of_row[i] if i < len(line_of_row) else i + 2
        j = keys.index(key)
        if not row.get("source"):
            raise _err(name, f"{where}, column 'source'", "empty: say where the factor comes from")
        srcs[j] = row["source"]
        methods[j] = cat.method_name(row.get("characterisation") or "") or METHOD_NOT_STATED
        if row.get("bound", "").lower() not in ("", "lower"):
            raise _err(name, f"{where}, column 'bound'", f"expected 'lower' or empty, got {row['bound']!r}")
        bound[j] = row.get("bound", "").lower() == "lower"
        if row.get("value", "").lower() in NOT_AVAILABLE:
            continue
        target = f"{cat.by_key(key).unit}/kWh"
        unit = row.get("unit", "")
        try:
            scale = float(Q(f"1 {unit}", target).magnitude)
        except UnitParseError as exc:
            why = str(exc).split(" (", 1)[1].rstrip(")") if " (" in str(exc) else "unknown unit"
            raise _err(name, f"{where}, column 'unit'", f"{unit!r} is not convertible to {target} ({why})") from None
        v = _number(name, f"{where}, column 'value'", row["value"], scale)
        low = _number(name, f"{where}, column 'low'", row["low"], scale) if row.get("low") else v
        high = _number(name, f"{where}, column 'high'", row["high"], scale) if row.get("high") else v
        if not low <= v <= high:
            raise _err(
                name,
                f"{where}, columns 'low'/'high'",
                f"expected low <= value <= high, got {row.get('low')} / {row['value']} / {row.get('high')}",
            )
        val[j], lo[j], hi[j] = v, low, high
    absent = [k for k in keys if k not in seen]
    if absent:
        raise _err(name, "category", f"no row for {', '.join(absent)}: give all 16 categories (value n/a where you have none)")
    return FactorSet(str(p), val, lo, hi, tuple(srcs), methods=tuple(methods), lower_bound=tuple(bound))


def _data_lines(text: str) -> list[int]:
    """1-based file line of each data row (comment lines and the header skipped), for error messages."""
    lines = [i for i, line in enumerate(text.splitlines(), start=1) if line.strip() and not line.lstrip().startswith("#")]
    return lines[1:]


def template(zone: str = "FRA") -> str:
    """A filled-in factor file: the open factors of ``zone`` in the file format, to replace row by row
    with licensed data (``python -m footprint.lca.factorfile FRA > my_grid.csv``)."""
    from footprint.lca.electricity import PARTIAL_CHAIN_TEXT
    from footprint.lca.electricity import zone as zone_of
    from footprint.lca.units import display_unit

    z = zone_of(zone)
    buf = io.StringIO()
    buf.write(
        header_lines(
            f"Filled in with footprint's open factors for {z.code} ({z.name}): replace each row with your own data and source."
        )
    )
    rows = []
    for c in cat.categories():
        f = z.factors[c.key]
        unit = f"{display_unit(c.unit)}/kWh"
        if f.value is None:
            rows.append([c.key, "n/a", unit, "", "", "footprint open factors: none", f.characterisation, f.note, ""])
            continue
        src = f"footprint open factors for {z.code}: " + ", ".join(f.sources)
        bound = "lower" if PARTIAL_CHAIN_TEXT in (f.scope or "") else ""
        row = [c.key, f"{f.value:.6g}", unit, f"{f.low:.6g}", f"{f.high:.6g}", src, f.characterisation, f.scope or f.note]
        rows.append([*row, bound])
    write_rows(buf, rows, ("bound",))
    return buf.getvalue()


def header_lines(origin: str) -> str:
    """The comment block every written factor file starts with; ``origin`` (lines) says where its values come from."""
    return (
        "# footprint electricity factors: per-kWh impacts of the electricity a site draws, one row per EF 3.1 category.\n"
        "# Use it with `site.electricity_factors: this_file.csv` (paths relative to the current directory or the scenario).\n"
        "# Columns: category (EF 3.1 key, all 16 once), value (a number per kWh, or n/a), unit (any unit convertible to the\n"
        "# category's unit per kWh), low and high (optional, same unit: the Monte Carlo range), source (required),\n"
        "# characterisation (optional: the method behind the value, e.g. EF 3.1), note, bound (optional: lower).\n"
        + "".join(f"# {line}\n" for line in origin.splitlines())
    )


def write_rows(buf: io.StringIO, rows: list[list[str]], extra: tuple[str, ...] = ()) -> None:
    """The header row (the format's columns, then ``extra`` ones the reader passes over) and the rows."""
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["category", "value", "unit", "low", "high", "source", "characterisation", "note", *extra])
    w.writerows(rows)


if __name__ == "__main__":  # pragma: no cover - exercised by tests through template()
    import sys

    sys.stdout.write(template(sys.argv[1] if len(sys.argv) > 1 else "FRA"))
