"""The use phase in all 16 EF 3.1 categories: open per-kWh factors, their cross-checks and ranges, per-zone water."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from _paths import SCENARIOS, SHARED

from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.engine import assess
from footprint.lca.workload import load_scenario, workload_from_dict
from lca_data import loader

ZONES = ["FRA", "USA", "DEU", "POL", "CHN"]
OPEN = SHARED / "reference" / "electricity" / "open-factors"
BASE = {
    "name": "grid",
    "hardware": {"gpu": "A100-SXM4-40GB", "count": 8, "host": "none"},
    "training": {"gpu_hours": 10000, "power_per_gpu": "400 W"},
    "site": {"pue": 1.2, "wue": "1.8 L/kWh"},
}


def _assess(grid: str, **site):
    return assess(workload_from_dict({**BASE, "site": {**BASE["site"], "grid": grid, **site}}, "grid.yaml"), samples=300)


@pytest.mark.parametrize("grid", ZONES)
def test_use_phase_in_all_16_categories_with_a_range(grid: str) -> None:
    a = _assess(grid)
    for k in cat.keys():
        r = a[k]
        assert r.by_stage["use"] is not None or "use" in r.not_modelled, (grid, k)  # zero by construction: said
        assert r.low <= r.total <= r.high
    uf = electricity.use_factors(a.workload)
    ok = ~np.array(uf.not_modelled)  # not modelled: NaN, never 0 (part of the mix has no open life-cycle factor)
    assert np.all(np.isnan(uf.value[~ok]))
    assert np.all(np.isfinite(uf.value[ok])) and np.all(uf.low[ok] <= uf.value[ok]) and np.all(uf.value[ok] <= uf.high[ok])


def test_no_zone_with_a_mix_has_a_missing_category() -> None:
    for code in electricity.zone_codes():
        z = electricity.zone(code)
        if sum(z.mix.values()) <= 0:
            continue
        missing = [k for k, f in z.factors.items() if f.value is None and not f.not_modelled]
        assert not missing, (code, missing)


def test_zone_factor_is_the_share_weighted_technology_factors() -> None:
    """A hand computation for Poland's marine eutrophication: sum over technologies of share x factor, Poland's
    own (EU-abated) coal and gas rows in place of the generic ones. Wind, solar and hydro have no open life-cycle
    factor: they are missing (never 0), and the sum over the rest is the value, labelled a lower bound."""
    z = electricity.zone("POL")
    rows = {r["codecarbon_field"]: r for r in loader.load_electricity_technologies() if r["category"] == "eutrophication_marine"}
    own = [
        r for r in loader.load_electricity_zone_technologies() if (r["zone"], r["category"]) == ("POL", "eutrophication_marine")
    ]
    assert {r["technology"] for r in own} == {"coal", "gas"}
    rows.update({r["codecarbon_field"]: r for r in own})
    expected = sum(z.mix[f] * float(r["value"]) for f, r in rows.items())
    f = z.factors["eutrophication_marine"]
    assert not f.not_modelled and f.value == pytest.approx(expected) and f.coverage < 1
    assert expected > 0 and "lower bound" in f.scope and "wind" in f.scope  # coal, gas, oil, bioenergy burn fuel
    assert "no open life-cycle factor for" in f.scope
    o = z.factors["ozone_depletion"]  # the open inventory (USLCI, American) covers the fuels: a proxy, a lower bound
    assert o.value > 0 and not o.not_modelled and "USA inventory (uslci-fy21-q3) as a proxy" in o.scope
    assert "lower bound" in o.scope
    o = electricity.zone("ISL").factors["ozone_depletion"]  # hydro and geothermal only: no open factor, never 0
    assert o.value is None and o.not_modelled and "use phase not modelled" in o.scope


def test_coal_carries_its_own_abatement_level_in_china_india_and_the_usa() -> None:
    """The fleet's own direct emissions (CEMS, plant inventory, eGRID, the EU abated plant) replace the inventory
    plant's: acidification of coal = USLCI's upstream part (its total less its power plant's own emissions) + the
    fleet's SO2 x 1.31 + NOx x 0.74 (EF 3.1, g/kWh -> kg)."""
    generic = {(r["technology"], r["category"]): r for r in loader.load_electricity_technologies()}
    own = {(r["zone"], r["technology"], r["category"]): r for r in loader.load_electricity_zone_technologies()}
    inventory = {
        (r["technology"], r["category"]): r for r in loader.read_csv("electricity_inventory_factors.csv") if r["role"] == "factor"
    }
    upstream = float(inventory[("coal", "acidification")]["upstream"])
    assert generic[("coal", "acidification")]["source"] == "uslci-fy21-q3"
    for zone, so2, nox in [("CHN", 0.1728, 0.2828), ("IND", 2.937, 2.797), ("USA", 0.965, 0.658), ("FRA", 0.057, 0.415)]:
        row = own[(zone, "coal", "acidification")]
        assert float(row["value"]) == pytest.approx(upstream + (so2 * 1.31 + nox * 0.74) / 1000, rel=2e-3), zone
        assert row["scope"] == "life_cycle" and row["source"] != generic[("coal", "acidification")]["source"]
    assert float(own[("IND", "coal", "acidification")]["value"]) > 3 * float(own[("CHN", "coal", "acidification")]["value"])
    assert "USLCI FY21 Q3 fuel chain" in own[("FRA", "coal", "acidification")]["note"]  # EU zones: the abated plant


def test_world_weights_each_fleet_by_its_generation() -> None:
    """WORLD's coal factor: the generic factor for the zones without their own row, each own row weighted by its coal."""
    data = electricity._energy_mix()
    generic = electricity._tech_rows()["acidification"]["coal_TWh"]["value"]
    own = electricity._zone_tech_rows()
    total = sum(v.get("coal_TWh", 0.0) for v in data.values())
    parts = [(data[z]["coal_TWh"], r["acidification"]["coal_TWh"]["value"]) for z, r in own.items() if "acidification" in r]
    expected = (sum(t * v for t, v in parts) + (total - sum(t for t, _ in parts)) * generic) / total
    assert electricity._rows_of(electricity.WORLD)["acidification"]["coal_TWh"]["value"] == pytest.approx(expected)


def test_use_factors_is_the_one_lookup_the_engine_uses() -> None:
    a = _assess("CHN")
    uf = electricity.use_factors(a.workload)
    for i, k in enumerate(cat.keys()):
        use = a[k].by_component["electricity"]
        if "use" in a[k].not_modelled:  # no open factor for part of the mix: not modelled, never 0
            assert use is None and np.isnan(uf.value[i]) and uf.not_modelled[i]
            continue
        assert use == pytest.approx(a.facility_energy_kwh * uf.value[i])


def test_off_site_water_and_aware_differ_by_grid() -> None:
    got = {g: _assess(g) for g in ZONES}
    ewif = {g: a.water_l["off_site"] / a.facility_energy_kwh for g, a in got.items()}
    assert ewif["FRA"] == pytest.approx(3.67) and ewif["DEU"] == pytest.approx(1.95) and ewif["CHN"] == pytest.approx(6.01)
    assert len({round(v, 3) for v in ewif.values()}) == len(ZONES)
    water = {g: a["water_use"].by_component["electricity"] / a.facility_energy_kwh for g, a in got.items()}
    # EWIF (L/kWh) x AWARE 1.2 (m3 world eq/m3), e.g. China 6.01 x 42.43 / 1000
    assert water["CHN"] == pytest.approx(6.01 * 42.43 / 1000) and water["DEU"] == pytest.approx(1.95 * 1.364 / 1000)
    on_site = got["USA"]["water_use"].by_component["on_site_water"]
    assert on_site == pytest.approx(got["USA"].workload.it_energy_kwh * 1.8 * 33.84 / 1000)


def test_site_ewif_still_overrides() -> None:
    a = _assess("CHN", ewif="1 L/kWh")
    assert a.water_l["off_site"] == pytest.approx(a.facility_energy_kwh * 1.0)
    assert a["water_use"].by_component["electricity"] == pytest.approx(a.facility_energy_kwh * 42.43 / 1000)
    assert a.workload.ewif_method.startswith("stated")


def test_zone_without_wri_factor_uses_the_technology_mix() -> None:
    z = electricity.zone("NOR")  # WRI's Norway value exists in a single copy only: not shipped
    assert "technology mix" in z.ewif.method
    shares = z.mix
    rows = [r for r in loader.load_electricity_technologies() if r["category"] == "water_consumption"]
    assert z.ewif.value == pytest.approx(sum(shares[r["codecarbon_field"]] * float(r["value"]) for r in rows))


# ---- cross-check table ------------------------------------------------------------------------


def _checks() -> list[dict[str, str]]:
    return loader.load_electricity_crosscheck()


def test_crosscheck_ratio_and_contested_flag_are_consistent() -> None:
    for r in _checks():
        a, b = float(r["value"]), float(r["second_value"])
        if a and b:
            assert float(r["ratio"]) == pytest.approx(a / b, rel=2e-3)
            assert (r["contested"] == "true") == (not 1 / 3 <= a / b <= 3)
        else:
            assert r["contested"] == ("false" if a == b else "true")


def test_every_contested_factor_range_spans_its_sources() -> None:
    """Where sources differ by more than 3x, the Monte Carlo range of the factor spans both."""
    tech = {(r["technology"], r["category"]): r for r in loader.load_electricity_technologies()}
    contested = [r for r in _checks() if r["contested"] == "true" and r["quantity"] == "factor"]
    assert len(contested) >= 10
    for r in _checks():
        if r["quantity"] != "factor":
            continue
        t = tech[(r["subject"], r["category"])]
        lo, hi = float(t["low"]), float(t["high"])
        for v in (float(r["value"]), float(r["second_value"])):
            assert lo <= v * (1 + 1e-3) and v <= hi * (1 + 1e-3), (r["subject"], r["category"], v, lo, hi)


def test_the_three_suspects_are_settled() -> None:
    """Nuclear ionising radiation, coal freshwater eutrophication, minerals and metals of electricity."""
    by = {(r["subject"], r["category"], r["second_source"]): r for r in _checks()}
    ir = by[("nuclear", "ionising_radiation", "benportner-ecoinvent-ilcd")]
    assert ir["contested"] == "true" and float(ir["second_value"]) == pytest.approx(1.185)
    coal_fwe = by[("coal", "eutrophication_freshwater", "benportner-ecoinvent-ilcd")]
    assert coal_fwe["contested"] == "false"  # UNECE and ecoinvent agree per technology (0.76)
    assert by[("nuclear", "resource_use_minerals_metals", "benportner-ecoinvent-ilcd")]["contested"] == "true"
    # per technology, sources more than 3x apart meet at their geometric mean (UNECE 0.014 and ecoinvent 1.185)
    nuclear = {(r["technology"], r["category"]): r for r in loader.load_electricity_technologies()}
    row = nuclear[("nuclear", "ionising_radiation")]
    assert float(row["value"]) == pytest.approx((0.014 * 1.185) ** 0.5, rel=1e-3)
    assert float(row["low"]) < 0.014 and float(row["high"]) > 1.185 and int(row["dqr_p"]) >= 4  # no good precision
    # at zone level the ADEME Base IMPACTS values disagree: the pair is contested, the range spans the national value
    # and the central value stays (the better-rated source, with its reason); ADEME's flat freshwater eutrophication
    # is an ill-posed comparison: listed, never used
    for code, category, inside in [
        ("FRA", "ionising_radiation", True),
        ("FRA", "resource_use_minerals_metals", True),
        ("POL", "eutrophication_freshwater", False),
    ]:
        z = electricity.zone(code)
        pair = next(c for c in z.contested if c["category"] == category and c["second_source"] == "boaviztapi-ademe-base-impacts")
        f = z.factors[category]
        assert (f.low <= pair["second_value"] <= f.high) is inside, (code, category)
        assert pair["in_range"] is inside and ("ill-posed" in pair["note"]) is (not inside)


def test_every_factor_states_its_distribution_and_data_quality() -> None:
    """lognormal with the central value as median (never at its own bound), each side's k95 from the sources on that
    side and the DQR;
    a zero-by-construction factor is uniform from 0; the four EF ratings are 1-5."""
    from lca_data.tools import electricity_quality as q

    rows = loader.load_electricity_technologies() + loader.load_electricity_zone_technologies()
    for r in rows:
        v, lo, hi = float(r["value"]), float(r["low"]), float(r["high"])
        ratings = {k: int(r[f"dqr_{k}"]) for k in ("ter", "ger", "tir", "p")}
        assert all(1 <= x <= 5 for x in ratings.values())
        if r["distribution"] == "lognormal":
            assert lo < v < hi
            assert min(hi / v, v / lo) >= q.k95(1.0, ratings) * (1 - 2e-3)  # at least the data-quality spread
        elif r["scope"] == loader.LOWER_BOUND_SCOPE:  # a labelled lower bound: from the bound up to the highest source
            assert r["distribution"] == "uniform" and 0 < v == lo <= hi
        else:
            assert r["distribution"] == "uniform" and v == lo == 0
    # the spread formula by hand: ln k95 = sqrt(ln(k_src)^2 + ln(1.05)^2 + sum ln(U_i)^2), ter 2 -> 1.00, ger 3 -> 1.02,
    # tir 2 -> 1.03, p 4 -> 1.20 (ecoinvent v2 pedigree factors)
    k = q.k95(4.0, {"ter": 2, "ger": 3, "tir": 2, "p": 4})
    expected = np.sqrt(np.log(4) ** 2 + np.log(1.05) ** 2 + np.log(1.02) ** 2 + np.log(1.03) ** 2 + np.log(1.2) ** 2)
    assert np.log(k) == pytest.approx(expected)


def test_contested_factors_reach_the_assessment_json_and_table() -> None:
    a = _assess("FRA")
    d = json.loads(a.to_json())
    factors = [c["factor"] for c in d["contested_data"]]
    assert "nuclear electricity, ionising radiation" in factors
    from footprint.lca.render import to_table

    assert "Contested data (" in to_table(a)  # one line by default (footprint assess), every factor with --details
    text = to_table(a, details=True)
    assert "Contested data" in text and "nuclear electricity, ionising radiation" in text


def test_scope_notes_say_direct_emissions_lower_bound() -> None:
    d = json.loads(_assess("POL").to_json())
    pof = d["impacts"]["photochemical_ozone_formation"]["use_scope"]  # USLCI life cycle for oil and bioenergy
    assert "USA inventory (uslci-fy21-q3) as a proxy for bioenergy, oil" in pof and "lower bound" in pof
    assert "lower bound" in d["impacts"]["resource_use_fossils"]["use_scope"]
    assert "fuel burned at the plant" in d["impacts"]["resource_use_fossils"]["use_scope"]
    assert d["electricity_factors"]["set"].startswith("open factors for POL")


# ---- derivations checked against independent arithmetic ----------------------------------------


@pytest.mark.skipif(not OPEN.is_dir(), reason="../shared/reference/electricity/open-factors is not beside the repository")
def test_emep_derivation_matches_the_reference_arithmetic() -> None:
    """Our fossil factors equal the reference's own DERIVED rows (3 s.f.); POF and eutrophication of the fuels now come
    from the open inventory (USLCI life cycle), which replaced these stack-only lower bounds."""
    derived = {}
    with (OPEN / "derived_direct_emissions_per_kwh.csv").open() as fh:
        for r in csv.DictReader(fh):
            parts = [p.strip() for p in r["item"].split("|")]
            if parts[0] == "DERIVED EF3.1 direct":
                derived[(parts[1], parts[2])] = float(r["value"])
    tech = {(r["technology"], r["category"]): float(r["value"]) for r in loader.load_electricity_technologies()}
    sources = {(r["technology"], r["category"]): r["source"] for r in loader.load_electricity_technologies()}
    names = {"coal": "Hard Coal", "gas": "Natural gas", "oil": "Heavy Fuel Oil", "bioenergy": "Biomass"}
    cats = {
        "photochemical_ozone_formation": "Photochemical ozone formation",
        "eutrophication_terrestrial": "Eutrophication, terrestrial",
        "eutrophication_marine": "Eutrophication, marine",
        "resource_use_fossils": "Resource use, fossils (fuel input)",
    }
    missing = {(r["technology"], r["category"]) for r in loader.read_csv("electricity_not_modelled.csv")}
    n = 0
    for t, fuel in names.items():
        for k, label in cats.items():
            ref = derived[(fuel, label)]
            if ref == 0:  # biomass burns no fossil fuel: no open life-cycle value, not modelled (never 0)
                assert (t, k) in missing and (t, k) not in tech
                continue
            if k != "resource_use_fossils":
                assert sources[(t, k)] == "uslci-fy21-q3", (t, k)  # (US plants: below or above EMEP's defaults)
                continue
            assert tech[(t, k)] == pytest.approx(ref, rel=0.02, abs=1e-12), (t, k)
            n += 1
    assert n == 3


def test_nuclear_fuel_and_fossil_heat_rates() -> None:
    tech = {(r["technology"], r["category"]): float(r["value"]) for r in loader.load_electricity_technologies()}
    assert tech[("coal", "resource_use_fossils")] == pytest.approx(3.6 / 0.356, rel=1e-3)
    assert tech[("gas", "resource_use_fossils")] == pytest.approx(3.6 / 0.57, rel=1e-3)
    assert tech[("nuclear", "resource_use_fossils")] == pytest.approx(3.6 / 0.326, rel=1e-3)
    missing = {(r["technology"], r["category"]) for r in loader.read_csv("electricity_not_modelled.csv")}
    assert ("wind", "resource_use_fossils") in missing and ("wind", "resource_use_fossils") not in tech


def test_shipped_scenarios_have_a_use_phase_everywhere() -> None:
    for path in sorted(Path(SCENARIOS).glob("*.yaml")):
        a = assess(load_scenario(path), samples=0)
        assert all(a[k].by_stage["use"] is not None or "use" in a[k].not_modelled for k in cat.keys()), path.name


def test_cited_stack_emissions_are_characterised_by_hand_arithmetic() -> None:
    """eGRID's oil-fleet NOx/SO2 and geothermal CO2, characterised with the EF 3.1 high-stack CFs (0.74 and 1.31
    mol H+ eq/kg for acidification); a category whose pollutants the source lacks (oil POF: no NMVOC) is absent."""
    by = {(r["subject"], r["category"], r["second_source"], r["second_value"]): r for r in _checks()}
    oil_ac = [r for (t, c, s, _), r in by.items() if (t, c, s) == ("oil", "acidification", "egrid-2018-us-fuel-rates")]
    assert len(oil_ac) == 1 and float(oil_ac[0]["second_value"]) == pytest.approx((1.537 * 0.74 + 2.189 * 1.31) / 1000, rel=1e-3)
    geo_cc = sorted(
        float(r["second_value"])
        for (t, c, s, _), r in by.items()
        if (t, c, s) == ("other_renewables", "climate_change", "egrid-geothermal-factors")
    )
    assert geo_cc == pytest.approx([60 * 0.45359237 / 1000, 88.8 * 0.45359237 / 1000], rel=1e-3)  # flash, dry steam
    assert not any(t == "oil" and s == "egrid-2018-us-fuel-rates" and c == "photochemical_ozone_formation" for t, c, s, _ in by)


def test_cited_emission_per_heat_input_must_be_zero() -> None:
    from lca_data.tools import build_electricity as build

    row = {"technology": "oil", "variant": "v", "pollutant": "PM2.5", "value": "0.31", "unit": "lb/MMBtu"}
    with pytest.raises(SystemExit, match="zero per heat input"):
        build._g_per_kwh(row)
    assert build._g_per_kwh({**row, "value": "0"}) == 0.0
    assert build._g_per_kwh({**row, "value": "2", "unit": "lb/MWh"}) == pytest.approx(0.90718474)


def test_validation_factor_audit_section_is_the_tools_output() -> None:
    """docs/validation.md's factor-audit table is what footprint/lca/factor_audit.py computes now."""
    from footprint.lca import factor_audit as comparison

    doc = comparison.DOC.read_text()
    assert comparison.updated(doc) == doc
    cells = [c for c in comparison.cells() if c["counted"]]
    assert len(cells) == 24  # 6 zones x 4 categories, every reference present (India from boaviztapi's mix table)
    for c in cells:
        assert c["ratio"] == pytest.approx(c["value"] / c["reference"])
        assert c["inside"] == (c["low"] <= c["reference"] <= c["high"])


def test_a_quoted_national_value_widens_a_range_and_never_moves_a_central_value() -> None:
    """A zone's national values (ADEME Base IMPACTS) widen its Monte Carlo range to contain them; the central value
    is the open factors' (the better-rated source); ill-posed comparisons (zeros, ADEME's flat eutrophication) widen
    nothing."""
    for code in ("FRA", "DEU", "POL", "USA"):
        z = electricity.zone(code)
        rows = {k: f for k, f in z.factors.items()}
        quoted = [r for r in electricity.db().electricity_zone_cited_rows if r["zone"] == code]
        assert quoted, code
        mixed = {
            k: electricity._mixed_factor(cat.by_key(k), *_per(code, k)) for k in rows if k not in ("climate_change", "water_use")
        }
        for r in quoted:
            f, own = rows[r["category"]], mixed.get(r["category"])
            if f.value is None or own is None:
                continue
            assert f.value == own.value  # the central value never moves
            other = float(electricity.Q(f"{r['value']} {r['unit']}", f.unit).magnitude)
            ill = (r["source"], r["category"]) in electricity.ILL_POSED or other <= 0
            assert (f.low <= other <= f.high) or ill, (code, r["category"])
            if ill:
                assert (f.low, f.high) == (own.low, own.high)


def _per(code: str, key: str):
    shares = electricity._mix_of(code)[0]
    per, left_out = electricity._counted(electricity._rows_of(code).get(key, {}), electricity.LT_EXCLUDE)
    return per, shares, left_out, code


@pytest.mark.skipif(not OPEN.is_dir(), reason="../shared/reference/electricity/open-factors is not beside the repository")
def test_a_bad_fleet_emission_row_names_the_file_row_and_expected_unit() -> None:
    from lca_data.tools import build_electricity as build

    inp = build.Inputs(SHARED / "reference" / "electricity")
    inp.zone_emissions = [dict(r) for r in inp.zone_emissions]
    inp.zone_emissions[3]["unit"] = "g/GJ"
    with pytest.raises(SystemExit, match=r"electricity_zone_emissions_cited.csv: row 5: .*unit 'g/GJ' \(expected one of g/kWh"):
        build._zone_groups(inp)
    inp.zone_emissions[3]["unit"] = "kg/MWh"
    inp.zone_emissions[3]["source"] = "nowhere"
    with pytest.raises(SystemExit, match=r"row 5 .*source 'nowhere' is not registered"):
        build._zone_groups(inp)


def test_no_unit_slip_in_any_category_nuclear_radiation_is_a_scope_gap() -> None:
    """Per technology against ecoinvent 3.5: every category's median ratio is within 10x (a per-MWh/per-kWh or
    Bq/kBq slip would move all technologies 1,000x); in ionising radiation only nuclear is far off."""
    from footprint.lca import factor_audit as comparison

    checks = {c["category"]: c for c in comparison.unit_check()}
    assert len(checks) >= 12 and all(c["consistent"] for c in checks.values())
    od = checks["ozone_depletion"]  # USLCI's chains carry few ozone-depleting flows: far below, and not uniformly
    assert od["scope_gap"] and all(v < 0.01 for v in od["ratios"].values())
    ir = checks["ionising_radiation"]["ratios"]
    assert ir["nuclear"] < 0.1 and all(1 / 3 <= v <= 3 for t, v in ir.items() if t != "nuclear")


def test_climate_change_stays_codecarbons_value_strictly_inside_its_range() -> None:
    """Where codecarbon's carbon intensity falls outside the technology-based range, the range is mirrored around it
    in log space: the value stays codecarbon's, strictly inside, and the technology bounds stay spanned."""
    data = electricity._energy_mix()
    for code in electricity.zone_codes():
        z = electricity.zone(code)
        if sum(z.mix.values()) <= 0 or code == electricity.WORLD:
            continue
        f = z.factors["climate_change"]
        assert f.value == pytest.approx(data[code]["carbon_intensity"] / 1000)
        if f.high > f.low and f.value > 0:  # (codecarbon gives a few zones 0 g/kWh: kept, at the low end)
            assert f.low < f.value < f.high, code
    assert electricity._around(1.0, 2.0, 4.0) == (0.25, 4.0) and electricity._around(8.0, 2.0, 4.0) == (2.0, 32.0)


def test_audit_lists_every_factor_with_ratio_year_and_licence() -> None:
    """electricity_audit.csv: one central row per factor (generic and zone), every other value with its ratio to the
    central value, and the year and licence of a registered source; Digital4Better does not count as independent."""
    text = (loader.DATA_DIR / "electricity_audit.csv").read_text()
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    factors = loader.load_electricity_technologies() + loader.load_electricity_zone_technologies()
    central = {(r["zone"], r["technology"], r["category"]): r for r in rows if r["role"] == "central"}
    assert len(central) == len(factors)
    missing = loader.read_csv("electricity_not_modelled.csv")
    nm = {("any", r["technology"], r["category"]): r for r in rows if r["role"] == "not_modelled"}
    assert len(nm) == len(missing) and all(r["value"] == "" and r["independent_sources"] == "0" for r in nm.values())
    central.update(nm)
    for r in factors:
        c = central[(r.get("zone") or "any", r["technology"], r["category"])]
        assert c["value"] == r["value"] and c["unit"] == r["unit"] and c["licence"]
    sources = loader.load_sources()
    for r in rows:
        c = central[(r["zone"], r["technology"], r["category"])]
        if r["ratio"] and r["value"] and float(r["value"]):
            assert float(r["ratio"]) == pytest.approx(float(c["value"]) / float(r["value"]), rel=2e-3)
        assert r["licence"] == sources[r["source"]]["licence"]
    hydro_tox = [r for r in rows if (r["zone"], r["technology"], r["category"]) == ("any", "hydro", "human_toxicity_cancer")]
    assert {r["source"] for r in hydro_tox} == {"unece-2022-lca-electricity", "d4b-energy-impacts"}
    assert all(r["independent_sources"] == "1" for r in hydro_tox)  # UNECE global and UNECE Europe: one study


@pytest.mark.parametrize("grid", ["PRY", "NOR"])  # 100 % hydro; 88 % hydro with some fossil and bioenergy
def test_a_mix_without_an_open_factor_is_not_modelled_or_a_lower_bound_in_every_face(grid: str) -> None:
    """Paraguay generates only with hydro, which has no open factor for five categories: its use stage there is
    "not modelled" (null, never 0) in every output, and every output says what that means; Norway's use stage in
    all five is the rest of its mix (its fuels have the open inventory's factors), a stated lower bound. The batch gives
    the engine's numbers."""
    from footprint.lca.batch import assess_many
    from footprint.lca.render import NOT_MODELLED, SHARES_NOTE, render
    from footprint.reports.report import methods_text

    w = load_scenario(SCENARIOS / "bloom-176b.yaml", [f"site.grid={grid}"])
    a = assess(w, samples=200)
    lacking = ["ozone_depletion", "photochemical_ozone_formation", "eutrophication_terrestrial", "eutrophication_marine"]
    lacking += ["resource_use_fossils"]
    for k in lacking:
        r = a[k]
        if grid == "PRY":  # no technology of the mix has an open factor
            assert r.by_stage["use"] is None and list(r.not_modelled) == ["use"], k
        else:
            assert r.by_stage["use"] > 0 and not r.not_modelled, k
            assert "lower bound" in electricity.zone(grid).factors[k].scope, k
        assert np.isfinite([r.total, r.low, r.high]).all(), k
    js = render(a, "json")
    assert np.isfinite(a.single_score["value"]) and "NaN" not in js and "Infinity" not in js
    table, md = render(a, "table"), render(a, "md")
    if grid == "PRY":  # (Norway's fuels have the open inventory's factors: nothing is not modelled there)
        assert "not modelled  " in table and "| not modelled |" in md
        assert f"Not modelled means {NOT_MODELLED}." in methods_text(a)[-1]  # the report said "covers part of it"
    assert SHARES_NOTE in table and SHARES_NOTE in md  # the Markdown table showed the cells without their meaning
    batch = assess_many([w]).assessment(0)
    for k in lacking:
        use = a[k].by_stage["use"]
        assert batch[k].by_stage["use"] == (None if use is None else pytest.approx(use, rel=1e-12)), k
        assert batch[k].total == pytest.approx(a[k].total, rel=1e-12), k
    assert batch.single_score["value"] == pytest.approx(a.single_score["value"], rel=1e-12)
