"""A run with several GPU models (issue 21, finding 3): assessed per model and summed, whatever the hash seed.

Runs are recorded by `footprint.track` over the fake NVML with two models; each model's own single-model
assessment (its devices only, its devices' measured energy) is the reference the mixed total must equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _fuzz import REPO

import footprint
from footprint.lca import categories as cat
from footprint.lca.engine import monte_carlo_totals
from footprint.lca.montecarlo import percentiles
from footprint.tracking.to_workload import workload_from_run

SITE = {"grid": "DEU", "pue": 1.2}


def _tracked(out: Path, spec: str, monkeypatch: pytest.MonkeyPatch, name: str = "mixed") -> Path:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", spec)
    with footprint.track(name=name, output_dir=out, site=SITE, host=False, period_s=0.05) as t:
        for _ in range(4):
            time.sleep(0.05)
            t.step(tokens=256)
    return out / name


def _single_model_runs(run: Path, out: Path) -> dict[str, Path]:
    """Each model's devices alone, as a run of its own: energy.total_j = that model's share of the measured energy."""
    rec = json.loads((run / "run.json").read_text())
    gpus = [d for d in rec["devices"] if d["component"] == "gpu"]
    total, named = rec["energy"]["total_j"], sum(d["energy_j"] for d in gpus)
    runs = {}
    for name in sorted({d["name"] for d in gpus}):
        mine = [d for d in gpus if d["name"] == name]
        one = {**rec, "devices": mine, "energy": {**rec["energy"], "total_j": total * sum(d["energy_j"] for d in mine) / named}}
        path = out / name.replace(" ", "_")
        path.mkdir(parents=True)
        (path / "run.json").write_text(json.dumps(one))
        runs[name] = path
    return runs


@pytest.mark.parametrize("spec", ["1xH100-SXM5-80GB,1xA100-SXM4-40GB", "4xH100-SXM5-80GB,2xA100-SXM4-40GB"])
def test_the_total_is_the_sum_of_each_models_own_assessment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    run = _tracked(tmp_path / "runs", spec, monkeypatch)
    mixed = footprint.assess(run, samples=0)
    singles = {name: footprint.assess(p, samples=0) for name, p in _single_model_runs(run, tmp_path / "single").items()}
    assert len(mixed.parts) == 2 and all(not s.parts for s in singles.values())
    for c in cat.categories():
        expect = sum(s[c.key].total for s in singles.values())
        assert mixed[c.key].total == pytest.approx(expect, rel=1e-9), c.key
        for stage, v in mixed[c.key].by_stage.items():
            parts = [s[c.key].by_stage[stage] for s in singles.values()]
            assert v == (None if None in parts else pytest.approx(sum(parts), rel=1e-9, abs=1e-300)), (c.key, stage)
    assert mixed.workload.it_energy_kwh == pytest.approx(sum(s.workload.it_energy_kwh for s in singles.values()), rel=1e-12)
    assert mixed.workload.gpu_hours == pytest.approx(sum(s.workload.gpu_hours for s in singles.values()), rel=1e-12)
    assert mixed.materials["mass_consumed_kg"] == pytest.approx(
        sum(s.materials["mass_consumed_kg"] for s in singles.values()), rel=1e-12
    )
    # each model its own card: the per-model parts in the JSON are the single-model assessments
    by_model = mixed.to_dict()["by_gpu_model"]
    assert {p["gpu"] for p in by_model} == {"h100-sxm5-80gb", "a100-sxm4-40gb"}
    for p in by_model:
        s = next(s for s in singles.values() if s.workload.gpu.id == p["gpu"])
        assert p["count"] == s.workload.count and p["energy_kwh"] == pytest.approx(s.workload.it_energy_kwh, rel=1e-12)
        assert p["impacts"]["climate_change"] == pytest.approx(s["climate_change"].total, rel=1e-12)
    emb = [s["climate_change"].by_stage["manufacturing"] / s.workload.gpu_hours for s in singles.values()]
    assert emb[0] != pytest.approx(emb[1], rel=1e-3)  # two cards' embodied impacts per GPU-hour, not one card's twice


def test_the_monte_carlo_sums_each_models_draws_with_common_random_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _tracked(tmp_path, "4xH100-SXM5-80GB,2xA100-SXM4-40GB", monkeypatch)
    a = footprint.assess(run, samples=2000, seed=7)
    w = workload_from_run(run)
    summed = sum(monte_carlo_totals(p, 2000, 7) for p in w.parts)
    assert np.array_equal(monte_carlo_totals(w, 2000, 7), summed)
    q = percentiles(summed)
    for c in cat.categories():
        r, i = a[c.key], cat.keys().index(c.key)
        assert (r.low, r.high) == pytest.approx((q[0, i], q[4, i]), rel=1e-12), c.key
        assert r.iqr is not None and r.iqr[0] <= r.total <= r.iqr[1], (c.key, r.iqr, r.total)
    # common random numbers: the parts' draws move together (an independent draw would give correlations near 0)
    h100, a100 = (monte_carlo_totals(p, 2000, 7)[:, cat.keys().index("climate_change")] for p in w.parts)
    assert np.corrcoef(h100, a100)[0, 1] > 0.9


def _assess_json(run: Path, seed: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "assess", str(run), "--samples", "200", "--format", "json"],
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    return json.loads(proc.stdout)


def test_a_mixed_run_gives_the_same_parts_whatever_the_hash_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _tracked(tmp_path, "1xA100-SXM4-40GB,2xH100-SXM5-80GB,1xA100-SXM4-40GB", monkeypatch)
    seen = {json.dumps([o["by_gpu_model"], o["impacts"]], sort_keys=True) for o in (_assess_json(run, s) for s in "012")}
    assert len(seen) == 1
    parts = json.loads(next(iter(seen)))[0]
    assert [(p["gpu"], p["count"]) for p in parts] == [("a100-sxm4-40gb", 2), ("h100-sxm5-80gb", 2)]  # a tie: name order


def test_an_unnamed_device_stays_out_with_a_note_and_a_single_model_run_has_no_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _tracked(tmp_path, "3xA100-SXM4-40GB", monkeypatch)
    plain = footprint.assess(run, samples=0)
    assert plain.parts == () and plain.to_dict()["by_gpu_model"] is None and plain.workload.count == 3
    rec = json.loads((run / "run.json").read_text())
    rec["devices"][0]["name"] = float("nan")
    (run / "run.json").write_text(json.dumps(rec))
    a = footprint.assess(run, samples=0)
    assert a.workload.count == 2 and a.parts == ()
    assert a.workload.it_energy_kwh == plain.workload.it_energy_kwh  # the measured energy is kept
    assert any("1 GPU device(s) without a usable model name left out" in x for x in a.warnings)


def test_a_stated_gpu_reprojects_a_mixed_run_as_one_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _tracked(tmp_path, "1xH100-SXM5-80GB,1xA100-SXM4-40GB", monkeypatch)
    w = workload_from_run(run, ["hardware.gpu=L4"])
    assert w.parts == () and w.gpu.id == "l4" and w.count == 2
    lifetime = workload_from_run(run, ["hardware.lifetime=5 years"])
    assert len(lifetime.parts) == 2 and all(p.lifetime_years == pytest.approx(5) for p in lifetime.parts)


def test_the_report_and_the_dashboard_show_each_models_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    run = _tracked(tmp_path, "2xH100-SXM5-80GB,1xA100-SXM4-40GB", monkeypatch)
    out = tmp_path / "r.html"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "report", str(run), "--samples", "100", "-o", str(out), "--quiet"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    html = out.read_text()
    assert "2 x NVIDIA H100 SXM5 80GB + 1 x NVIDIA A100 SXM4 40GB" in html and "By GPU model" in html
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.sidebar.radio(key="page").set_value("Runs").run()
    at.text_input(key="run_root").set_value(str(tmp_path)).run()
    assert not at.exception, [e.value for e in at.exception]
    cells = [str(v) for df in at.dataframe for v in df.value.to_numpy().ravel()]
    assert any(c.startswith("2 x NVIDIA H100 SXM5 80GB: ") and "1 x NVIDIA A100 SXM4 40GB: " in c for c in cells)
