"""The open inventory behind the use phase: USLCI characterised with EF 3.1 in Brightway
(lca_data/tools/build_electricity_inventory.py) — its flow mapping, its coverage, its Brightway arithmetic and the
table it wrote, and how build_electricity.py prefers it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO, SCENARIOS, SHARED

from footprint.lca import electricity
from lca_data import loader
from lca_data.tools import build_electricity_inventory as inv

CF = SHARED / "reference" / "electricity" / "open-factors" / "ef31_characterisation_factors.csv"
needs_cf = pytest.mark.skipif(not CF.is_file(), reason="../shared/reference/electricity is not beside the repository")


@pytest.fixture(scope="module")
def cfs() -> dict:
    return inv.read_cfs(CF)


@needs_cf
def test_fedefl_flows_map_to_ef_factors_by_name_and_compartment(cfs: dict) -> None:
    pof, pm, odp, ac = (
        cfs[k] for k in ("photochemical_ozone_formation", "particulate_matter", "ozone_depletion", "acidification")
    )
    assert inv.characterise("Nitrogen oxides", ("troposphere", "urban"), pof) == 1.0
    assert inv.characterise("Volatile organic compounds", ("emission", "air"), pof) == 1.0  # US VOC = NMVOC
    assert inv.characterise("Methane", ("emission", "air"), pof) == pytest.approx(0.0101)
    # particulate matter's factor depends on the compartment (EF 3.1: 80x between high stacks and unspecified air)
    assert inv.characterise("Particulate matter, ≤ 2.5μm", ("troposphere", "rural"), pm) == pytest.approx(3.02e-6)
    assert inv.characterise("Particulate matter, ≤ 2.5μm", ("emission", "air"), pm) == pytest.approx(2.38497e-4)
    assert inv.characterise("Particulate matter, ≤ 10μm", ("emission", "air"), pm) is None  # EF characterises PM2.5 only
    # ozone depletion: one factor per substance whatever the air sub-compartment
    assert inv.characterise("Halon 1301", ("troposphere", "rural"), odp) == pytest.approx(15.2)
    assert inv.characterise("Carbon tetrachloride", ("emission", "air"), odp) == pytest.approx(0.72)
    assert inv.characterise("Sulfur oxides", ("emission", "air"), ac) == pytest.approx(1.31)  # SOx as SO2
    assert inv.characterise("Ammonia", ("emission", "water"), ac) is None  # no air compartment: no factor here
    assert inv.characterise("Nitrogen oxides", ("air", "stratosphere"), ac) is None
    # every EF flow the mapping names is in the CF file (no mapping to a flow without a factor)
    names = {ef for table in cfs.values() for ef, _ in table}
    assert set(inv.FLOW_MAP) <= names


@needs_cf
def test_coverage_counts_what_found_no_factor(cfs: dict) -> None:
    """Coverage = the share by mass of the category's substances in the inventory that got a factor: CFC-113 is an
    ozone-depleting substance the reference file has no factor for, ammonia to water has no factor in acidification."""
    odp, ac = cfs["ozone_depletion"], cfs["acidification"]
    amounts = {
        ("Halon 1301", "emission", "air", "kg"): 3e-9,
        ("CFC-113", "emission", "air", "kg"): 1e-9,
        ("Carbon dioxide", "emission", "air", "kg"): 0.9,
    }
    assert inv._coverage("ozone_depletion", amounts, odp) == pytest.approx(0.75)
    amounts = {("Ammonia", "emission", "air", "kg"): 2e-6, ("Ammonia", "emission", "water", "kg"): 2e-6}
    assert inv._coverage("acidification", amounts, ac) == pytest.approx(0.5)
    assert inv._coverage("acidification", {("Water", "emission", "air", "kg"): 1.0}, ac) is None  # nothing to cover


def test_unit_conversion_uses_the_flows_own_properties() -> None:
    gas = {"Mass": 1.0, "Volume": 1.357}  # USLCI: 1 kg of natural gas = 1.357 m3
    assert inv.convert(1.357, "m3", "kg", gas) == pytest.approx(1.0)
    assert inv.convert(3.6, "MJ", "kWh", None) == pytest.approx(1.0)
    assert inv.convert(1.0, "m3", "kg", None) is None  # nothing relates them: cut off, and counted


SCRIPT = """
import json, sys
from pathlib import Path
from lca_data.tools import build_electricity_inventory as inv
P = inv.Process
plant = P("Electricity, test coal", "RNA", "kWh",
          inputs=[("Coal, at mine", "RNA", "kg", 0.5, False), ("Disposal, ash", None, "kg", 0.1, True),
                  ("Natural gas, at well", None, "m3", 0.1357, False)],
          flows=[("Nitrogen oxides", "emission", "air", "kg", 1e-3, False),
                 ("Particulate matter, ≤ 2.5μm", "troposphere", "rural", "kg", 1e-4, False)])
mine = P("Coal, at mine", "RNA", "kg", flows=[("Halon 1301", "emission", "air", "kg", 2e-9, False),
                                              ("CFC-113", "emission", "air", "kg", 2e-9, False),
                                              ("Methane", "emission", "air", "kg", 1e-2, False)])
well = P("Natural gas, at well", None, "kg", flows=[("Nitrogen oxides", "troposphere", "urban", "kg", 1e-3, False)])
inv.TECHNOLOGIES = {"coal": ("Electricity, test coal",)}
props = {"Natural gas, at well": {"Mass": 1.0, "Volume": 1.357}}
rows, counts = inv.build([plant, mine, well], Path(sys.argv[1]), sys.argv[2], props)
print(json.dumps({"rows": rows, "counts": counts}))
"""


@needs_cf
def test_brightway_lcia_of_a_small_chain_is_the_hand_sum(tmp_path: Path) -> None:
    """A plant burning 0.5 kg of mined coal and 0.1357 m3 (0.1 kg) of gas: Brightway's LCIA through the chain equals
    the hand sum of amount x EF 3.1 factor, the cut-off disposal is counted, and the plant's own part is 'direct'."""
    pytest.importorskip("bw2data")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(CF), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["counts"] == {"linked": 1, "converted": 1, "cutoff": 1, "no provider": 0, "unit mismatch": 0}
    rows = {r["category"]: r for r in got["rows"]}
    pof = 1e-3 * 1.0 + 0.5 * 1e-2 * 0.0101 + 0.1 * 1e-3 * 1.0  # plant NOx, mine methane, gas NOx (urban)
    assert float(rows["photochemical_ozone_formation"]["value"]) == pytest.approx(pof, rel=1e-5)
    assert float(rows["photochemical_ozone_formation"]["direct"]) == pytest.approx(1e-3, rel=1e-6)
    assert float(rows["ozone_depletion"]["value"]) == pytest.approx(0.5 * 2e-9 * 15.2, rel=1e-5)
    assert float(rows["ozone_depletion"]["coverage"]) == pytest.approx(0.5, abs=1e-4)  # CFC-113: no factor in the file
    assert rows["ozone_depletion"]["scope"] == "life_cycle_lower_bound"
    assert float(rows["particulate_matter"]["value"]) == pytest.approx(1e-4 * 3.02e-6 + 1e-3 * 1.6e-6 + 0.1e-3 * 1.6e-6, rel=1e-5)
    assert {r["characterisation"] for r in rows.values()} == {"EF 3.1"}


def test_the_shipped_table_says_inventory_method_coverage_and_long_term() -> None:
    rows = loader.read_csv("electricity_inventory_factors.csv")
    sources = loader.load_sources()
    assert sources["uslci-fy21-q3"]["region"] == "USA"
    techs = {r["technology"] for r in rows}
    assert techs == {"coal", "gas", "nuclear", "oil", "bioenergy"}
    for r in rows:
        assert all(s.strip() in sources for s in r["source"].split(";")), r
        assert r["characterisation"] == "EF 3.1" and r["long_term"] and r["inventory"].startswith("USLCI FY21 Q3")
        value = float(r["value"])
        assert value > 0 and value == pytest.approx(float(r["direct"]) + float(r["upstream"]), rel=1e-4)
        assert r["coverage"] == "" or 0 <= float(r["coverage"]) <= 1
    header = (loader.DATA_DIR / "electricity_inventory_factors.csv").read_text().splitlines()[0]
    assert "github:FLCAC-admin/uslci-content @ " in header and "Linking:" in header


def test_build_electricity_prefers_the_inventory_where_it_covers() -> None:
    """The technology factors of the categories USLCI covers are USLCI's (life cycle, EF 3.1), its other processes of
    the technology are variants inside the range, and ozone depletion of the fuels is modelled."""
    inventory = {(r["technology"], r["category"]): r for r in loader.read_csv("electricity_inventory_factors.csv")}
    tech = {(r["technology"], r["category"]): r for r in loader.load_electricity_technologies()}
    for (t, k), r in inventory.items():
        if r["role"] != "factor":
            continue
        f = tech[(t, k)]
        bound = f["scope"] == "life_cycle_lower_bound"  # ozone depletion: the inventory covers part of the chain
        assert (
            f["source"] == "uslci-fy21-q3"
            and (f["scope"] == "life_cycle" or (bound and k == "ozone_depletion"))
            and float(f["value"]) == pytest.approx(float(r["value"]), rel=1e-3)
        )
        if bound:  # no draw below a bound
            assert float(f["low"]) == float(f["value"]) <= float(f["high"]) and f["distribution"] == "uniform"
        else:
            assert float(f["low"]) < float(f["value"]) < float(f["high"])
    for t in ("coal", "gas", "oil", "nuclear", "bioenergy"):
        assert float(tech[(t, "ozone_depletion")]["value"]) > 0
    missing = {(r["technology"], r["category"]) for r in loader.read_csv("electricity_not_modelled.csv")}
    assert ("hydro", "ozone_depletion") in missing and ("coal", "ozone_depletion") not in missing


@pytest.mark.skipif(not os.environ.get("FOOTPRINT_USLCI"), reason="set FOOTPRINT_USLCI to a uslci-content checkout")
def test_the_generator_reproduces_the_shipped_table(tmp_path: Path) -> None:
    pytest.importorskip("bw2data")
    out = tmp_path / "t.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "lca_data.tools.build_electricity_inventory", os.environ["FOOTPRINT_USLCI"], "-o", str(out)]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600, cwd=REPO)
    assert out.read_text() == (loader.DATA_DIR / "electricity_inventory_factors.csv").read_text()


def test_an_inventory_far_below_every_independent_source_is_a_labelled_lower_bound() -> None:
    """USLCI's ozone depletion (carbon tetrachloride only) lies 10^3-10^5x below ecoinvent 3.5 for every technology
    ecoinvent gives: a lower bound of the chain, labelled so, drawn from the bound up to the highest source, never a
    consensus centre; a category where the inventory agrees with its second source stays a life-cycle value."""
    from lca_data.tools import build_electricity as build

    def inv(tech: str, category: str, value: float, second: float | None) -> build.InventoryFactor:
        f = build.InventoryFactor(tech, category, value, build.S_INVENTORY, "life_cycle", "n")
        if second is not None:
            f.seconds.append((second, "benportner-ecoinvent-ilcd", "ecoinvent 3.5"))
        return f

    factors = {
        ("gas", "ozone_depletion"): inv("gas", "ozone_depletion", 1e-12, 5e-8),
        ("oil", "ozone_depletion"): inv("oil", "ozone_depletion", 1e-13, None),
        ("gas", "acidification"): inv("gas", "acidification", 1e-4, 2e-4),
    }
    build._partial_chain(factors)
    for t in ("gas", "oil"):
        f = factors[(t, "ozone_depletion")]
        assert f.scope == "life_cycle_lower_bound" and f.note.startswith("lower bound: inventory covers only part")
    assert factors[("gas", "acidification")].scope == "life_cycle"
    build.consensus(factors[("gas", "ozone_depletion")])  # a bound forms no geometric mean with an estimate
    assert factors[("gas", "ozone_depletion")].value == 1e-12
    tech = {(r["technology"], r["category"]): r for r in loader.load_electricity_technologies()}
    assert {tech[(t, "ozone_depletion")]["scope"] for t in ("coal", "gas", "nuclear", "oil", "bioenergy")} == {
        "life_cycle_lower_bound"
    }
    usa = electricity.zone("USA").factors["ozone_depletion"]
    assert usa.value and usa.value > 0 and usa.distribution == "uniform" and usa.low == pytest.approx(usa.value)
    assert electricity.PARTIAL_CHAIN_TEXT in usa.scope


def test_a_lower_bound_use_stage_is_shown_as_a_bound_on_every_face() -> None:
    """Bloom on France: the use stage of ozone depletion is a bound, its share '≥...' (never a bare 0 %), in the JSON
    (lower_bound_stages), the table and the Markdown."""
    from footprint.lca.engine import assess
    from footprint.lca.render import render
    from footprint.lca.workload import load_scenario

    a = assess(load_scenario(SCENARIOS / "bloom-176b.yaml"), samples=500)
    r = a["ozone_depletion"]
    assert r.lower_bound == ("use",) and a.to_dict()["impacts"]["ozone_depletion"]["lower_bound_stages"] == ["use"]
    assert r.stage_text("use").startswith("≥") and r.stage_text("use") != "≥0%"
    assert a["land_use"].lower_bound == ()
    for fmt in ("table", "md"):
        line = next(x for x in render(a, fmt).splitlines() if x.lstrip("| ").startswith("Ozone depletion"))
        assert "≥" in line, fmt
