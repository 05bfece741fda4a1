"""The Monte Carlo's honesty: stated distributions, central values inside their own IQR, the sensitivity table,
the host share in 16 categories, and stages that are not modelled."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from footprint.lca import categories as cat
from footprint.lca.database import IDX, db
from footprint.lca.engine import assess
from footprint.lca.render import to_csv, to_markdown, to_table
from footprint.lca.uncertainty import Block, pedigree_sigma
from footprint.lca.workload import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))
VARIANTS = ("corrected", "published")


def test_two_piece_lognormal_has_its_median_and_interval_where_stated() -> None:
    b = Block.of([10.0, 10.0, 5.0], [2.0, 10.0, 1.0], [20.0, 40.0, 6.0])  # asymmetric, at its low bound, skewed
    x = b.draw(np.random.default_rng(3), 200_000)
    q = np.percentile(x, (2.5, 50, 97.5), axis=0)
    np.testing.assert_allclose(q[1], b.value, rtol=0.01)  # the central value is the median
    np.testing.assert_allclose(q[0], b.low, rtol=0.02)
    np.testing.assert_allclose(q[2], b.high, rtol=0.02)


def test_triangular_uniform_and_zero_central_value() -> None:
    b = Block.of([2.0, 2.0, 0.0], [1.0, 1.0, 0.0], [4.0, 4.0, 3.0], ["triangular", "uniform", "lognormal"])
    x = b.draw(np.random.default_rng(0), 100_000)
    assert x[:, 0].min() >= 1.0 and x[:, 0].max() <= 4.0
    assert np.mean(x[:, 0]) == pytest.approx((1 + 2 + 4) / 3, rel=0.01)
    assert np.mean(x[:, 1]) == pytest.approx(2.5, rel=0.01)
    assert x[:, 2].min() >= 0.0 and np.percentile(x[:, 2], 97.5) == pytest.approx(3.0, rel=0.03)
    with pytest.raises(ValueError, match="unknown distribution 'beta'"):
        Block.of([1.0], [0.5], [2.0], ["beta"])


def test_pedigree_widens_both_sides_by_the_ef_rating() -> None:
    factors = db().pedigree_factors
    assert pedigree_sigma({"ter": 1, "ger": 1, "tir": 1, "p": 1}, factors) == 0.0
    s = pedigree_sigma({"ter": 4, "ger": 3, "tir": 2, "p": 4}, factors)
    assert s == pytest.approx(math.sqrt(math.log(1.5) ** 2 + math.log(1.02) ** 2 + math.log(1.03) ** 2 + math.log(1.2) ** 2) / 2)
    lo, hi = Block.of([1.0], [1.0], [1.0], None, s).interval()
    assert lo[0] < 1.0 < hi[0] and lo[0] * hi[0] == pytest.approx(1.0)


def _inside(total: float, iqr: list[float] | tuple[float, float]) -> bool:
    return iqr[0] <= total <= iqr[1]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_central_inside_its_iqr_or_said(path: Path, variant: str) -> None:
    """Every category: the central value lies inside its own interquartile range, or the assessment says which is
    outside (an electricity factor whose central value is a bound of its own range); the single score: inside."""
    a = assess(load_scenario(path, [f"hardware.embodied_data={variant}"]), samples=4000)
    said = " ".join(a.warnings)
    for k in cat.keys():
        r = a[k]
        assert r.low <= r.median <= r.high
        assert _inside(r.total, r.iqr) or f"{r.name}: the central value is" in said, (k, r.total, r.iqr)
    # the embodied and host draws are comonotonic across categories, but the electricity factors whose sources disagree
    # have skewed ranges (a consensus centre, a range spanning every source): the sum of their medians can fall just
    # outside the score's own interquartile range, and the assessment then says so
    s = a.single_score
    assert _inside(s["value"], s["iqr"]) or "Single score: the central value is" in said, (s["value"], s["iqr"])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_embodied_and_host_central_inside_iqr(path: Path, variant: str) -> None:
    """Without the use phase (the factors this engine states itself: GPU embodied and host share), every category's
    central value and the single score's lie inside their own interquartile range."""
    w = load_scenario(path, [f"hardware.embodied_data={variant}"]).with_(it_energy_kwh=0.0)
    a = assess(w, samples=4000)
    for k in cat.keys():
        assert _inside(a[k].total, a[k].iqr), (k, a[k].total, a[k].iqr)
    assert _inside(a.single_score["value"], a.single_score["iqr"])


def test_sensitivity_table_in_the_json_sums_to_one() -> None:
    a = assess(load_scenario(SCENARIOS[0]), samples=4000)
    d = json.loads(a.to_json())
    for k in cat.keys():
        sens = d["impacts"][k]["sensitivity"]
        shares = [x["share"] for x in sens["inputs"]]
        assert shares == sorted(shares, reverse=True) and 0.99 <= sum(shares) <= 1.0 + 1e-9, k
        assert 0.5 < sens["explained"] < 1.2, k  # the model is near linear in its inputs
        for x in sens["inputs"]:
            assert x["distribution"] in ("lognormal", "triangular", "uniform", "triangular (scenario range)")
            assert x["interval_95"][0] <= x["interval_95"][1]
    gpu = d["impacts"]["human_toxicity_cancer"]["sensitivity"]["inputs"]
    assert {"GPU embodied impacts", "host share (server around the GPU)"} <= {x["input"] for x in gpu}
    rating = db().embodied_dqr(a.workload.gpu, db().embodied(a.workload.gpu.id))
    assert next(x for x in gpu if x["input"] == "GPU embodied impacts")["dqr"] == rating
    score = d["single_score"]["sensitivity"]["inputs"]
    assert score and sum(x["share"] for x in score) <= 1.0 + 1e-9
    assert d["single_score"]["iqr"][0] <= d["single_score"]["median"] <= d["single_score"]["iqr"][1]


def test_sensitivity_finds_the_input_that_moves() -> None:
    """A wide scenario range on GPU-hours (10x either way, wider than the embodied data's own spread, whose per-card
    against model ratios reach 2.3x): the embodied-only categories' variance is then mostly GPU-hours."""
    w = load_scenario(SCENARIOS[0]).with_(it_energy_kwh=0.0, host=None)
    w = w.with_(ranges={"gpu_hours": (w.gpu_hours * 0.1, w.gpu_hours * 10.0)})
    top = assess(w, samples=4000)["climate_change"].sensitivity["inputs"][0]
    assert top["input"] == "GPU-hours" and top["share"] > 0.5


def test_host_share_in_all_16_categories_per_gpu() -> None:
    h = db().host_share(None)
    assert np.isfinite(h.value[: len(cat.keys())]).all() and (h.value[: len(cat.keys())] > 0).all()
    assert (h.low <= h.value).all() and (h.value <= h.high).all()
    rows = [r for r in db().host_rows["boavizta_p5"] if r["category"] == "climate_change"]
    assert float(rows[0]["value"]) / 8 == pytest.approx(h.value[IDX["climate_change"]])
    # Boavizta's p5 model reproduces EcoLogits' published server figures (5,700 kg CO2 eq, 0.37 kg Sb eq) within 2 %
    assert h.value[IDX["climate_change"]] * 8 == pytest.approx(5700, rel=0.02)
    assert h.value[IDX["resource_use_minerals_metals"]] * 8 == pytest.approx(0.37, rel=0.02)


def test_host_impacts_file_is_the_tools_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lca_data.tools import build_host

    shipped = build_host.OUT.read_text()
    monkeypatch.setattr(build_host, "OUT", tmp_path / "host_impacts.csv")
    build_host.main()
    assert (tmp_path / "host_impacts.csv").read_text() == shipped


def test_not_modelled_use_phase_everywhere() -> None:
    a = assess(load_scenario(SCENARIOS[0], ["site.grid=PRY"]), samples=500)  # hydro only: no open ozone-depletion factor
    oz = a["ozone_depletion"]
    assert oz.not_modelled == ("use",) and oz.by_stage["use"] is None
    assert oz.dominant_stage is None and oz.share("manufacturing") is None  # never "manufacturing 100 %"
    d = json.loads(a.to_json())["impacts"]["ozone_depletion"]
    assert d["not_modelled"] == ["use"] and d["by_stage"]["use"] is None and d["dominant_stage"] is None
    line = next(x for x in to_table(a).splitlines() if x.startswith("Ozone depletion"))
    assert "not modelled" in line and "100%" not in line
    md = next(x for x in to_markdown(a).splitlines() if x.startswith("| Ozone depletion"))
    assert "not modelled" in md
    rows = list(csv.DictReader(io.StringIO(to_csv(a))))
    use = next(r for r in rows if r["category"] == "ozone_depletion" and r["stage"] == "use")
    assert use["value"] == "" and use["status"] == "not modelled"
    assert "Ozone depletion" in a.single_score["partial_categories"]
