"""Issue 20, item 7: over every bundled scenario and six national grids, the central value of every category and of
the single score lies inside its own Monte Carlo interquartile range, and the use stage of a category whose per-kWh
factor is missing for part of the mix is not modelled (null, its lower bound labelled), never a 0 or a bound shown as
the central value."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.engine import assess
from footprint.lca.workload import load_scenario
from lca_data import loader

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))
ZONES = ("FRA", "DEU", "USA", "CHN", "IND", "POL")
SAMPLES = 2000  # the engine's default; the whole grid (42 assessments) runs in about a second


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_central_values_inside_their_own_interquartile_range(path: Path) -> None:
    for zone in ZONES:
        a = assess(load_scenario(path, [f"site.grid={zone}"]), samples=SAMPLES)
        outside = [
            (r.name, r.total, r.iqr) for r in a.impacts.values() if r.iqr is not None and not r.iqr[0] <= r.total <= r.iqr[1]
        ]
        s = a.single_score
        if not s["iqr"][0] <= s["value"] <= s["iqr"][1]:
            outside.append(("single score", s["value"], s["iqr"]))
        assert not outside, f"{path.stem} {zone}: {outside}"
        assert not [w for w in a.warnings if "interquartile" in w]


def test_no_electricity_factor_is_zero_by_construction() -> None:
    """No technology factor of the EF categories has a 0 central value at its own range bound; what has no open
    life-cycle value is listed as not modelled, with what it lacks and where the search went."""
    rows = [r for r in loader.load_electricity_technologies() if r["category"] != "water_consumption"]
    assert rows and all(float(r["low"]) < float(r["value"]) < float(r["high"]) for r in rows)
    assert {r["distribution"] for r in rows} == {"lognormal"}
    missing = loader.read_csv("electricity_not_modelled.csv")
    assert {r["category"] for r in missing} == {
        "ozone_depletion",
        "photochemical_ozone_formation",
        "eutrophication_terrestrial",
        "eutrophication_marine",
        "resource_use_fossils",
    }
    assert all(r["scope"] == "not_modelled" and "searched" in r["note"] for r in missing)
    have = {(r["technology"], r["category"]) for r in rows}
    assert not have & {(r["technology"], r["category"]) for r in missing}


@pytest.mark.parametrize("zone", ZONES)
def test_not_modelled_use_stage_is_null_with_its_bound_labelled(zone: str) -> None:
    z = electricity.zone(zone)
    f = z.factors["photochemical_ozone_formation"]
    assert f.not_modelled and f.value is None
    assert f.bound is not None and f.bound > 0 and f"lower bound of {f.bound:.3g}" in f.scope
    a = assess(load_scenario(SCENARIOS[0], [f"site.grid={zone}"]), samples=200)
    r = a.impacts["photochemical_ozone_formation"]
    assert r.not_modelled == ("use",) and r.by_stage["use"] is None and r.share("use") is None
    others = sum(v for s, v in r.by_stage.items() if s != "use" and v is not None)
    assert r.use_bound == pytest.approx(a.facility_energy_kwh * f.bound)
    assert r.dominant_stage == ("use" if r.use_bound > others else None)  # decided by the bound alone, or not at all
    j = a.to_dict()["impacts"]["photochemical_ozone_formation"]
    assert j["not_modelled"] == ["use"] and "lower bound" in j["use_scope"]
    i = cat.keys().index("photochemical_ozone_formation")
    assert math.isnan(a.use_factors.value[i]) and a.use_factors.not_modelled[i]
