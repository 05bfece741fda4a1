from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO
from hypothesis import given
from hypothesis import strategies as st

from footprint.lca.units import Q, UnitParseError, display_unit, fmt

EF_UNITS = [
    "kg CO2 eq",
    "kg CFC11 eq",
    "CTUh",
    "CTUe",
    "disease incidence",
    "kBq U235 eq",
    "kg NMVOC eq",
    "mol H+ eq",
    "mol N eq",
    "kg P eq",
    "kg N eq",
    "Pt",
    "m3 world eq",
    "MJ",
    "kg Sb eq",
]


@pytest.mark.parametrize(
    "text, unit, expected",
    [
        ("400 W", "kW", 0.4),
        ("3 years", "day", 3 * 365.25),
        ("57 g/kWh", "kg/MWh", 57.0),
        ("1.8 L/kWh", "L/MWh", 1800.0),
        ("113.5 kg CO2 eq", "t CO2 eq", 0.1135),
        ("57 g CO2 eq/kWh", "kg CO2 eq/kWh", 0.057),
        ("826 mm2", "cm**2", 8.26),
        ("312 TFLOP/s", "FLOP/s", 312e12),
    ],
)
def test_parses_user_strings(text: str, unit: str, expected: float) -> None:
    assert Q(text, unit).magnitude == pytest.approx(expected)


@pytest.mark.parametrize("unit", EF_UNITS)
def test_every_ef_unit_round_trips_through_its_display_name(unit: str) -> None:
    q = Q(f"2.5 {unit}")
    assert display_unit(str(q.units)) == unit
    assert Q(fmt(q)).magnitude == pytest.approx(2.5)


def test_ef_units_have_distinct_dimensions() -> None:
    dims = {str(Q(f"1 {u}").dimensionality) for u in EF_UNITS if u not in ("CTUh",)}
    assert len(dims) == len(EF_UNITS) - 1 - 0  # CTUh appears once; MJ is energy
    with pytest.raises(UnitParseError):
        Q("1 kg CO2 eq", "kg Sb eq")


def test_wrong_dimension_names_value_and_expected_unit() -> None:
    with pytest.raises(UnitParseError, match=r"'400 kg'.*W"):
        Q("400 kg", "W")
    with pytest.raises(UnitParseError):
        Q("four hundred watts")


@given(st.floats(min_value=1e-12, max_value=1e12, allow_nan=False), st.sampled_from(EF_UNITS))
def test_quantity_string_round_trip(x: float, unit: str) -> None:
    q = Q(f"{x!r} {unit}")
    back = Q(f"{q.magnitude!r} {display_unit(str(q.units))}")
    assert math.isclose(back.magnitude, x, rel_tol=1e-12)


def test_registry_disk_cache_is_used_and_never_breaks(tmp_path: Path) -> None:
    """pint's cache of parsed definitions (FOOTPRINT_CACHE_DIR) is written, reused, and a damaged one is ignored."""
    code = "from footprint.lca.units import Q; print(Q('3 kg CO2 eq', 'g CO2 eq').magnitude)"
    cache = tmp_path / "cache"

    def run(folder: str) -> str:
        env = {**os.environ, "FOOTPRINT_CACHE_DIR": folder}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run(str(cache)) == "3000.0"
    files = [p for p in (cache / "pint").rglob("*") if p.is_file()]
    assert files  # parsed definitions cached
    assert run(str(cache)) == "3000.0"
    for p in files:
        p.write_bytes(b"not a pickle")
    assert run(str(cache)) == "3000.0"
    assert run("") == "3000.0"  # empty: no cache at all


def test_yaml_uses_the_c_loader_where_built() -> None:
    import yaml

    from lca_data.loader import SAFE_LOADER, safe_load

    if yaml.__with_libyaml__:  # libyaml's parser under the project's YAML 1.2 rules (lca_data.loader.StrictLoader)
        assert issubclass(SAFE_LOADER, yaml.CSafeLoader)
    assert safe_load("a: [1, 2.5e+3, x]\nb: {c: null}") == {"a": [1, 2500.0, "x"], "b": {"c": None}}
    with pytest.raises(yaml.YAMLError):
        safe_load("a: !!python/object:os.system ls")


@given(
    st.one_of(st.integers(-(10**6), 10**6).map(str), st.floats(-1e9, 1e9, allow_nan=False).map(repr)),
    st.sampled_from(["W", "g", "GB/s", "mm**2", "kg CO2 eq/kWh", "years", "L/kWh", "1/s", "kWh", "degC", "CTUh", "kg*m/s**2"]),
)
def test_number_unit_fast_path_equals_pints_parser(number: str, unit: str) -> None:
    """`Q("400 W")` skips pint's expression parser: same units, magnitude and type, or pint's own error."""
    from footprint.lca.units import _number_and_unit, normalise, ureg

    text = normalise(f"{number} {unit}")
    fast = _number_and_unit(text)
    try:
        slow = ureg.Quantity(text)
    except Exception:
        slow = None
    if fast is not None:
        assert slow is not None and fast.units == slow.units and fast.magnitude == slow.magnitude
        assert type(fast.magnitude) is type(slow.magnitude)
    elif slow is not None:
        assert "degC" in unit or "e" in number.lower() or "inf" in number  # only what the fast path leaves to pint


def test_small_numbers_read_in_the_prefix_that_fits_them() -> None:
    """'2.10e-04 kg CO2 eq' reads '0.210 g CO2 eq': the unit steps down while the value is under 0.1 of it; a row's
    low and high follow its total; big values, n/a and units without prefixes stay as they are."""
    from footprint.lca.assessment import amount, qty
    from footprint.lca.units import Q, compact

    assert amount(2.1e-4, "kg CO2 eq") == "0.210 g CO2 eq"
    assert amount(6.05e-6, "kgCO2eq") == "6.05 mg CO2 eq" and amount(1.14e-3, "kWh") == "1.14 Wh"
    assert amount(5.89e-3, "L") == "5.89 mL" and amount(2.4e-6, "m3 world eq") == "2.40 mL world eq"
    assert amount(52_900, "kg CO2 eq") == "52,900 kg CO2 eq" and amount(0.1, "kg CO2 eq") == "0.100 kg CO2 eq"
    assert amount(1.66e-3, "CTUh") == "1.66e-03 CTUh" and amount(None, "kg") == "n/a" and amount(0, "kg") == "0 kg"
    assert qty(9.46e-3, "kg CFC11 eq", 3.4e-3, 0.0423) == ("9.46", "3.40", "42.3", "g CFC11 eq")
    for value, unit in ((3.3e-8, "kg Sb eq"), (4.2e-5, "mol H+ eq"), (7e-4, "MJ"), (2e-5, "kBq U235 eq"), (3e-3, "Pt")):
        factor, shown = compact(value, unit)
        assert 0.1 <= value * factor < 100 or shown.startswith(("µ", "m")), (value, unit)
        # the same quantity, as pint converts it (Pt and the EF units are their own dimensions: checked on the mass
        # and energy part of the spelling)
        head = unit.split()[0]
        if head in ("kg", "mol", "MJ", "kBq"):
            assert Q(value, head).to(shown.split()[0]).magnitude == pytest.approx(value * factor)
