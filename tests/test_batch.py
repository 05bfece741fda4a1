"""Batch assessment (footprint.lca.batch): equal to footprint.lca.assess workload by workload, group sums exact."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _paths import SCENARIOS
from hypothesis import given, settings
from hypothesis import strategies as st

from footprint.lca import categories as cat
from footprint.lca.batch import assess_arrays, assess_many, factor_key
from footprint.lca.engine import assess
from footprint.lca.workload import load_scenario, workload_from_dict


def same(a: Any, b: Any, path: str = "") -> None:
    """Deep equality; floats to 1e-12 relative (the batch sums the same terms in another order)."""
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _workloads() -> list[Any]:
    """Scenarios of every kind, what-ifs on them, and runs, so that many factor sets and every method appear."""
    out = [load_scenario(p) for p in sorted(SCENARIOS.glob("*.yaml"))]
    bloom = SCENARIOS / "bloom-176b.yaml"
    for sets in (
        ["site.grid=POL"],
        ["hardware.host=none"],
        ["site.carbon_intensity=400 g/kWh"],
        ["hardware.lifetime=5 years", "hardware.utilization=0.6"],
        ["hardware.embodied={climate_change: 164 kg CO2 eq}"],
        ["hardware.gpu=H100-SXM5-80GB", "site.grid=USA", "site.pue=1.5"],
        ["site.wue=0", "site.ewif=2.1 L/kWh"],
    ):
        out.append(load_scenario(bloom, sets))
    run = {
        "name": "a run",
        "hardware": {"gpu": "A100-PCIE-40GB", "count": 3},
        "training": {"duration": "5400 s", "energy": "2.5e7 J"},
        "site": {"grid": "FRA", "pue": 1.1},
    }
    out.append(workload_from_dict(run, "run.json"))
    cpu = {"name": "cpu", "hardware": {"gpu": "none"}, "training": {"duration": "2 h", "energy": "0.5 kWh"}}
    host = workload_from_dict(cpu, "cpu.yaml")  # no GPU: embodied by host-hours, the batch's hours for this row
    out += [host, host.with_(name="cpu x3", host_hours=6.0, it_energy_kwh=0.2)]
    # per-workload fields change nothing but the drivers: same factor set, other GPU-hours and energy
    out += [
        w.with_(name=f"{w.name} x{k}", gpu_hours=w.gpu_hours * k, it_energy_kwh=w.it_energy_kwh / k)
        for k, w in enumerate(out[:4], 2)
    ]
    return out


def test_assess_many_equals_assess_workload_by_workload() -> None:
    ws = _workloads()
    batch = assess_many(ws)
    assert len(batch.bases) < len(ws)  # factor lookups shared
    for i, w in enumerate(ws):
        same(batch.assessment(i).to_dict(), assess(w, samples=0).to_dict(), w.name)
        ref = assess(w, samples=0)
        for c in cat.categories() + cat.extras():
            assert batch.total(c.key)[i] == pytest.approx(ref[c.key].total, rel=1e-12)
        assert batch.gpu_lifetimes[i] == pytest.approx(w.gpu_lifetimes, rel=1e-12)
        assert batch.single_score()[i] == pytest.approx(ref.single_score["value"], rel=1e-12)
        assert batch.facility_energy_kwh[i] == pytest.approx(ref.facility_energy_kwh, rel=1e-12)


def test_factor_key_ignores_names_and_drivers_but_not_the_site() -> None:
    w = load_scenario(SCENARIOS / "bloom-176b.yaml")
    assert factor_key(w) == factor_key(w.with_(name="other", gpu_hours=1.0, it_energy_kwh=2.0, notes=("x",)))
    assert factor_key(w) != factor_key(w.with_(pue=w.pue + 0.1))
    assert factor_key(w) != factor_key(w.with_(grid="POL"))


def test_group_sums_equal_the_sums_of_rows() -> None:
    ws = _workloads()
    batch = assess_many(ws)
    codes = np.arange(len(ws)) % 3
    sums = batch.group_sums(codes, 3)
    for g in range(3):
        m = codes == g
        for c in cat.categories():
            assert sums.total(c.key)[g] == pytest.approx(batch.total(c.key)[m].sum(), rel=1e-12)
        use = batch.column("impacts", "climate_change", "by_stage", "use")[m].sum()
        assert sums.value("impacts", "climate_change", "by_stage", "use")[0][g] == pytest.approx(use, rel=1e-12)
        assert sums.gpu_hours[g] == pytest.approx(sum(w.gpu_hours for w, k in zip(ws, m, strict=True) if k), rel=1e-12)
        assert sums.gpu_equivalents[g] == math.ceil(sum(w.gpu_lifetimes for w, k in zip(ws, m, strict=True) if k) - 1e-9)
        assert sums.single_score()[g] == pytest.approx(batch.single_score()[m].sum(), rel=1e-12)


def test_a_one_workload_group_has_the_range_of_its_own_assessment() -> None:
    """Group ranges sum the Monte Carlo draws of one GPU-hour and one kWh: a group of one workload gets exactly
    the low-high of `assess` on that workload (same seed, same draws), for every factor set and category."""
    ws = [w.with_(ranges={}) for w in _workloads()]
    batch = assess_many(ws)
    ranges = batch.group_sums(np.arange(len(ws)), len(ws)).ranges(400, seed=7)
    for i, w in enumerate(ws):
        ref = assess(w, samples=400, seed=7)
        for c in cat.categories() + cat.extras():
            lo, hi = ranges[c.key][i]
            if ref[c.key].total is None or np.isnan(batch.total(c.key)[i]):
                assert np.isnan(lo) and np.isnan(hi), (w.name, c.key)
                continue
            assert (lo, hi) == pytest.approx((ref[c.key].low, ref[c.key].high), rel=1e-9), (w.name, c.key)
        assert tuple(ranges["single_score"][i]) == pytest.approx((ref.single_score["low"], ref.single_score["high"]), rel=1e-9), (
            w.name
        )


def test_group_ranges_move_jobs_together_and_bracket_the_sum() -> None:
    """Jobs of one factor set share their draws: the sum of k copies of a job has k times its range (no
    narrowing by false independence); every group's range holds its central sum."""
    w = load_scenario(SCENARIOS / "bloom-176b.yaml")
    ws = [w.with_(name=f"job {k}") for k in range(5)]
    batch = assess_many(ws)
    one = batch.group_sums(np.array([0, 1, 1, 1, 1]), 2).ranges(500)
    for c in cat.categories():
        assert one[c.key][1] == pytest.approx(4 * one[c.key][0], rel=1e-9), c.key
    mixed = _workloads()
    batch = assess_many(mixed)
    sums = batch.group_sums(np.arange(len(mixed)) % 4, 4)
    ranges = sums.ranges(300)
    for c in cat.categories():
        total = sums.total(c.key)
        ok = ~np.isnan(total)
        assert np.all(ranges[c.key][ok, 0] <= total[ok] * (1 + 1e-12)), c.key
        assert np.all(ranges[c.key][ok, 1] >= total[ok] * (1 - 1e-12)), c.key
    assert np.all(ranges["single_score"][:, 0] < ranges["single_score"][:, 1])


def test_not_available_stays_not_available() -> None:
    """A stage with no factor is NaN in columns (None in the Assessment), never zero."""
    w = load_scenario(SCENARIOS / "bloom-176b.yaml")
    batch = assess_many([w])
    ref = assess(w, samples=0)
    for c in cat.categories():
        col = batch.column("impacts", c.key, "by_stage", "use")[0]
        assert (ref[c.key].by_stage["use"] is None) == bool(np.isnan(col))


def test_columnar_form_and_empty_input() -> None:
    w = load_scenario(SCENARIOS / "llama-2-70b.yaml")
    gh = np.array([10.0, 2e5, 0.5])
    en = np.array([4.0, 8e4, 0.1])
    batch = assess_arrays([w], np.zeros(3, np.int64), gh, en)
    for i in range(3):
        ref = assess(w.with_(gpu_hours=float(gh[i]), it_energy_kwh=float(en[i])), samples=0)
        assert batch.total("climate_change")[i] == pytest.approx(ref["climate_change"].total, rel=1e-12)
    empty = assess_many([])
    assert len(empty) == 0 and empty.total("climate_change").shape == (0,)
    with pytest.raises(ValueError, match="same length"):
        assess_arrays([w], np.zeros(2, np.int64), gh, en)


@settings(max_examples=25, deadline=None)
@given(
    gh=st.floats(min_value=1e-6, max_value=1e9, allow_nan=False),
    kwh=st.floats(min_value=0.0, max_value=1e9, allow_nan=False),
)
def test_any_gpu_hours_and_energy_match_assess(gh: float, kwh: float) -> None:
    w = load_scenario(SCENARIOS / "gpt-3-v100.yaml").with_(gpu_hours=gh, it_energy_kwh=kwh)
    same(assess_many([w]).assessment(0).to_dict(), assess(w, samples=0).to_dict())
