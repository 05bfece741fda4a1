"""Embodied corrections (lca_data/embodied_corrections.yaml): their evidence, their effect, the published data kept."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _paths import SCENARIOS

from footprint.lca import categories as cat
from footprint.lca.database import IDX, db
from footprint.lca.engine import assess, embodied_multipliers
from footprint.lca.workload import load_scenario

PER_CARD = ["a100-sxm4-40gb", "a100-pcie-40gb", "gh200", "l4", "rtx-a4500", "titan-rtx", "p100-pcie-16gb", "gtx-1080-ti"]


def test_end_of_life_water_evidence_is_what_the_data_say() -> None:
    """Per MJ of fossil energy, end-of-life water use is ~1,000x manufacturing's on all eight ADEME cards,
    while end-of-life climate change per MJ matches manufacturing's: the numbers in the data file."""
    d = db()
    ratios = []
    for g in PER_CARD:
        st = d.embodied(g, "published").by_stage()
        man, eol = st["manufacturing"], st["end_of_life"]
        w_man = man[IDX["water_use"]] / man[IDX["resource_use_fossils"]]
        w_eol = eol[IDX["water_use"]] / eol[IDX["resource_use_fossils"]]
        assert 0.021 <= w_man <= 0.039 and 25 <= w_eol <= 55.1, g
        ratios.append(w_eol / w_man)
    assert min(ratios) >= 820 and max(ratios) <= 2600 and 900 <= float(np.median(ratios)) <= 1200
    a100 = d.embodied("a100-sxm4-40gb", "published").by_stage()
    cc_eol = a100["end_of_life"][IDX["climate_change"]] / a100["end_of_life"][IDX["resource_use_fossils"]]
    cc_man = a100["manufacturing"][IDX["climate_change"]] / a100["manufacturing"][IDX["resource_use_fossils"]]
    assert cc_eol == pytest.approx(0.071, abs=0.001) and cc_man == pytest.approx(0.076, abs=0.001)


def test_memory_convention_is_consistent_across_cards() -> None:
    d = db()
    pub, cor = d.embodied("a100-sxm4-40gb", "published"), d.embodied("a100-sxm4-40gb")
    i = IDX["climate_change"]
    assert pub.total()[i] == pytest.approx(113.5, rel=0.005)
    assert pub.by_component()["memory"][i] == pytest.approx(19.3, rel=0.005)
    assert cor.by_component()["memory"][i] == pytest.approx(6 * 19.3, rel=0.005)
    assert cor.total()[i] == pytest.approx(210.0, rel=0.005)


def test_die_factor_is_the_one_ademe_s_measured_dies_imply() -> None:
    """One per-mm2 die factor for every modelled card: sum of the 8 ADEME dies / sum of their areas with losses; the
    A100's own measured die (85.8 kg CO2 eq, 826 mm2) is within 10 % of what the factor gives it, the calculator's
    average factor 45 % above; the published variant keeps the calculator's factor."""
    from lca_data.die_yield import die_area_with_losses

    d = db()
    i = IDX["climate_change"]
    rows = [r for r in d._ademe_rows.values() for r in r if r["component"] == "gpu_die" and r["category"] == "climate_change"]
    areas = {g.name: g.parametric["gpu_die_area_mm2"] for g in d.gpus.values() if g.name in d._ademe_rows}
    expected = sum(float(r["value"]) for r in rows) / sum(die_area_with_losses(areas[r["card"]]) for r in rows)
    assert len(rows) == 8 and d.measured_die_factor[i] == pytest.approx(expected, rel=1e-9)
    a100 = die_area_with_losses(826)
    assert d.measured_die_factor[i] * a100 == pytest.approx(85.8, rel=0.10)
    assert d.parametric_factors["gpu_die"][i] * a100 / 85.8 == pytest.approx(1.45, abs=0.01)
    h100 = d.embodied("h100-sxm5-80gb")
    die = h100.parts[("gpu_die", "manufacturing")][i]
    assert die == pytest.approx(d.measured_die_factor[i] * die_area_with_losses(814))
    pub = d.embodied("h100-sxm5-80gb", "published").parts[("gpu_die", "manufacturing")][i]
    assert pub == pytest.approx(d.parametric_factors["gpu_die"][i] * die_area_with_losses(814))
    # six dies, as before; the GPU die from ADEME's measured dies (79.1 kg, not the calculator's 124.5: die_factor_...)
    assert d.embodied("a100-sxm4-80gb").total()[i] == pytest.approx(223.2 - 124.5 + 79.1, rel=0.005)
    # every card counts all its dies now: memory per GB of a documented-die card is the per-die area x dies
    gh = d.gpus["gh200"]
    ratio = d.embodied("gh200").by_component()["memory"][i] / d.embodied("gh200", "published").by_component()["memory"][i]
    assert ratio == pytest.approx(gh.parametric["vram_dies"])


def test_published_variant_is_selectable_and_bounds_the_range() -> None:
    w = load_scenario(SCENARIOS / "gpt-4-falk.yaml", ["hardware.host=none"])
    pub = load_scenario(SCENARIOS / "gpt-4-falk.yaml", ["hardware.host=none", "hardware.embodied_data=published"])
    a, b = assess(w, samples=2000), assess(pub, samples=0)
    assert b.embodied_method.endswith("as published") and a.embodied_method == "ADEME per-card LCA (full, primary data)"
    eol_a = a["water_use"].by_stage["end_of_life"]
    eol_b = b["water_use"].by_stage["end_of_life"]
    assert eol_b == pytest.approx(eol_a * 1000)
    # the Monte Carlo range of the corrected run spans the published embodied water use
    lo, hi, _ = embodied_multipliers(db(), w)
    emb = db().embodied(w.gpu.id)
    published = db().embodied(w.gpu.id, "published")
    k = IDX["water_use"]
    assert hi[k] * emb.total()[k] >= published.total()[k] * (1 - 1e-9)
    assert lo[IDX["climate_change"]] * emb.total()[IDX["climate_change"]] <= published.total()[IDX["climate_change"]] * (1 + 1e-9)
    d = json.loads(a.to_json())
    assert {"memory_all_dies", "end_of_life_water_litres"} <= {
        c["factor"].split("(")[-1].rstrip(")") for c in d["contested_data"]
    }
    assert d["hardware"]["embodied_data"] == "default"


def test_end_of_life_no_longer_dominates_any_category_for_the_paper_runs() -> None:
    for s in ("bloom-176b.yaml", "gpt-4-falk.yaml"):
        a = assess(load_scenario(SCENARIOS / s, ["hardware.gpu=A100-SXM4-40GB", "hardware.host=none"]), samples=0)
        assert all(a[k].dominant_stage != "end_of_life" for k in cat.keys()), s


def test_unknown_variant_is_a_scenario_error() -> None:
    from footprint.errors import ScenarioError

    with pytest.raises(ScenarioError, match="hardware.embodied_data: unknown 'raw'; allowed: corrected, published"):
        load_scenario(SCENARIOS / "gpt-4-falk.yaml", ["hardware.embodied_data=raw"])
