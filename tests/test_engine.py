"""Property tests on the LCA engine: linearity, allocation sums, ranges."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from footprint.lca import categories as cat
from footprint.lca.engine import assess
from footprint.lca.render import to_table
from footprint.lca.workload import workload_from_dict

BASE = {
    "name": "prop",
    "hardware": {"gpu": "A100-SXM4-40GB", "count": 8, "lifetime": "3 years", "utilization": 0.9},
    "training": {"gpu_hours": 1000, "power_per_gpu": "400 W"},
    "site": {"grid": "DEU", "pue": 1.2, "wue": "1.8 L/kWh", "ewif": "3.67 L/kWh"},
}


def _w(**training):
    data = {**BASE, "training": {**BASE["training"], **training}}
    return workload_from_dict(data, "prop.yaml")


@settings(max_examples=25, deadline=None)
# at most 8 GPUs x 20 years (the plausibility table's longest life) even after the factor: more is refused
@given(st.floats(min_value=1, max_value=7e4), st.floats(min_value=1.5, max_value=20))
def test_linear_in_gpu_hours(hours: float, factor: float) -> None:
    a1 = assess(_w(gpu_hours=hours), samples=0)
    a2 = assess(_w(gpu_hours=hours * factor), samples=0)
    for k in cat.keys():
        assert a2[k].total == pytest.approx(a1[k].total * factor, rel=1e-9, abs=1e-300)
    assert a2.water_l["total"] == pytest.approx(a1.water_l["total"] * factor, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=1, max_value=1.4e6), st.sampled_from(["A100-SXM4-40GB", "H100-SXM5-80GB", "L4", "MI300X"]))
def test_stages_and_components_sum_to_total(hours: float, gpu: str) -> None:
    w = workload_from_dict(
        {**BASE, "hardware": {**BASE["hardware"], "gpu": gpu}, "training": {"gpu_hours": hours, "power_per_gpu": "300 W"}}
    )
    a = assess(w, samples=0)
    for k in cat.keys():
        r = a[k]
        stages = sum(v for v in r.by_stage.values() if v is not None)
        comps = sum(v for v in r.by_component.values() if v is not None)
        assert stages == pytest.approx(r.total, rel=1e-9)
        assert comps == pytest.approx(r.total, rel=1e-9)


def test_embodied_allocation_is_gpu_hours_over_lifetime_times_utilization() -> None:
    w = _w(gpu_hours=26298 * 0.9)  # exactly one lifetime: 3 years x 0.9
    assert w.gpu_lifetimes == pytest.approx(1.0)
    assert w.gpu_equivalents == 1
    a = assess(w.with_(host=None), samples=0)
    from footprint.lca.database import db

    d = db()
    per_card = d.embodied(w.gpu.id).total()[0] + d.distribution(w.gpu)[0]
    emb = sum(v for s, v in a["climate_change"].by_stage.items() if s != "use")
    assert emb == pytest.approx(per_card)


def test_use_phase_is_facility_energy_times_grid() -> None:
    a = assess(_w(), samples=0)
    it = 1000 * 0.4
    assert a.workload.it_energy_kwh == pytest.approx(it)
    assert a.facility_energy_kwh == pytest.approx(it * 1.2)
    from footprint.lca.electricity import zone

    assert a["climate_change"].by_stage["use"] == pytest.approx(it * 1.2 * zone("DEU").factors["climate_change"].value)
    assert a.water_l["on_site"] == pytest.approx(it * 1.8)
    assert a.water_l["off_site"] == pytest.approx(it * 1.2 * 3.67)  # site.ewif stated in BASE


def test_not_available_is_none_never_zero(tmp_path) -> None:
    """A practitioner's factor set with n/a for ozone depletion: that use phase is None, never 0."""
    from footprint.lca.factorfile import template

    path = tmp_path / "factors.csv"
    path.write_text(re.sub(r"\nozone_depletion,[^,]*,", "\nozone_depletion,n/a,", template("DEU"), count=1))
    w = workload_from_dict({**BASE, "site": {**BASE["site"], "electricity_factors": str(path)}})
    a = assess(w, samples=0)
    r = a["ozone_depletion"]
    assert r.by_stage["use"] is None and "use" in r.not_available
    assert r.total > 0  # embodied part is known
    d = a.to_dict()
    assert d["impacts"]["ozone_depletion"]["by_stage"]["use"] is None
    assert any("use phase not available" in w for w in d["warnings"])


def test_monte_carlo_brackets_total_and_is_reproducible() -> None:
    w = _w()
    a = assess(w, samples=4000, seed=1)
    b = assess(w, samples=4000, seed=1)
    for k in cat.keys():
        r = a[k]
        assert r.low <= r.total <= r.high
        assert b[k].low == r.low and b[k].high == r.high
    cc = a["climate_change"]
    assert cc.high > cc.low  # grid and A100 embodied ranges are declared


def test_host_share_on_by_default_and_off_with_none() -> None:
    on = assess(_w(), samples=0)
    off = assess(_w().with_(host=None), samples=0)
    assert on["climate_change"].by_component["host_share"] > 0
    assert "host_share" not in off["climate_change"].by_component
    # the host share is modelled in every category (Boavizta server model, lca_data/host_impacts.csv)
    for k in cat.keys():
        assert on[k].by_component["host_share"] > 0, k
        assert "host_share" not in on[k].not_available


def test_flops_and_mfu_give_gpu_hours_from_dense_peak() -> None:
    w = workload_from_dict({**BASE, "training": {"flops": 3.14e23, "mfu": 0.5, "power_per_gpu": "400 W"}})
    assert w.gpu_hours == pytest.approx(3.14e23 / (312e12 * 0.5) / 3600)
    assert math.isclose(w.it_energy_kwh, w.gpu_hours * 0.4)


def test_embodied_override_sets_per_gpu_total() -> None:
    data = {**BASE, "hardware": {**BASE["hardware"], "embodied": {"climate_change": "164 kg CO2 eq"}, "host": "none"}}
    w = workload_from_dict(data)
    a = assess(w, samples=0)
    emb = sum(v for s, v in a["climate_change"].by_stage.items() if s != "use")
    assert emb == pytest.approx(164 * w.gpu_lifetimes)


@pytest.mark.parametrize("gpu", ["H100-SXM5-80GB", "H100-PCIe-80GB", "H200", "B200", "L40S", "MI300X"])
def test_each_card_says_whose_shape_it_uses(gpu: str) -> None:
    """No card borrows another's masses or board area without saying so in its output (JSON, table, warnings)."""
    data = {**BASE, "hardware": {**BASE["hardware"], "gpu": gpu}}
    a = assess(workload_from_dict(data, "prop.yaml"), samples=0)
    g, m = a.workload.gpu, a.materials
    if g.proxy_of:
        assert m["estimate"] and m["geometry_proxy_of"] == g.proxy_of
        assert "not published for the" in m["geometry"] and "estimate" in m["geometry"]
        assert any(w.startswith(f"{g.name}: card geometry proxied from {g.proxy_of}") for w in a.warnings)
    else:
        assert m["geometry"].endswith("own published geometry (ADEME gpus.json)") and not m["estimate"]
    assert m["geometry"] in to_table(a)


def test_oam_cards_use_the_published_module_outline() -> None:
    from footprint.lca.database import db

    for gid in ("mi300x", "mi250x"):
        g = db().gpus[gid]
        assert g.parametric["board_area_cm2"] == pytest.approx(10.2 * 16.5)
        assert (
            "own board area"
            in assess(workload_from_dict({**BASE, "hardware": {**BASE["hardware"], "gpu": gid}}), samples=0).materials["geometry"]
        )
