"""The Python API as the CLI: `footprint.assess(target, set=...)` is `footprint assess --set` through the same code;
shipped scenarios resolve by name from any folder; a CPU-only tracked run is assessed as its host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from _paths import REPO

import footprint
from footprint.lca import categories as cat

SETS = {"training.mfu": 0.5, "hardware.lifetime": "5 years", "site.grid": "POL", "uncertainty.pue": [1.1, 1.3]}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "footprint.cli", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_assess_set_is_the_clis_set(tmp_path: Path) -> None:
    argv = [x for k, v in SETS.items() for x in ("--set", f"{k}={v if isinstance(v, str) else json.dumps(v)}")]
    proc = _cli("assess", "gpt-4-falk", "--format", "json", "--samples", "200", *argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    for given in (SETS, [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in SETS.items()]):
        a = footprint.assess("gpt-4-falk", samples=200, set=given)
        assert a.workload.mfu == 0.5 and a.workload.grid == "POL" and a.workload.lifetime_years == 5
        for k in cat.keys():
            got = a[k]
            assert [got.total, got.low, got.high] == [cli["impacts"][k][x] for x in ("total", "low", "high")], k


def test_assess_set_errors_name_set_not_the_cli_option() -> None:
    with pytest.raises(footprint.FootprintError) as err:
        footprint.assess("gpt-4-falk", set=["training.mfu"])
    assert "set 'training.mfu': expected key=value" in str(err.value) and "--set" not in str(err.value)
    with pytest.raises(TypeError, match="mapping"):
        footprint.assess("gpt-4-falk", set="training.mfu=0.5")


def test_shipped_scenarios_resolve_by_name_from_any_folder(tmp_path: Path) -> None:
    by_name = _cli("assess", "bloom-176b", "--samples", "0", cwd=tmp_path)
    readme_spelling = _cli("assess", "scenarios/bloom-176b.yaml", "--samples", "0", cwd=tmp_path)
    assert by_name.returncode == readme_spelling.returncode == 0, by_name.stderr + readme_spelling.stderr
    assert by_name.stdout == readme_spelling.stdout and by_name.stdout.startswith("BLOOM-176B final training")
    report = _cli("report", "olmo-2-7b", "-o", "olmo.json", "--quiet", cwd=tmp_path)
    assert report.returncode == 0 and json.loads((tmp_path / "olmo.json").read_text())["name"], report.stderr
    missing = _cli("assess", "bloom-17b", cwd=tmp_path)
    assert missing.returncode == 2 and "shipped scenarios: bloom-176b," in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    # in an installed footprint too: the YAML files are package data of the `scenarios` package
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "scenarios" in project["packages"]["find"]["include"] and project["package-data"]["scenarios"] == ["*.yaml"]
    assert (REPO / "scenarios" / "__init__.py").is_file()


def _server(category: str) -> float:
    """One server's embodied impact (GPUs excluded) as lca_data/host_impacts.csv states it."""
    import csv

    rows = (REPO / "lca_data" / "host_impacts.csv").read_text().splitlines()
    table = csv.DictReader(r for r in rows if not r.startswith("#"))
    return next(float(r["value"]) for r in table if r["host"] == "boavizta_p5" and r["category"] == category)


def test_a_cpu_only_tracked_run_is_assessed_as_its_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `footprint.track` example on a laptop: no GPU recorded, so the host's energy and its server's
    embodied share make the footprint, in all 16 categories, said as "no GPU: host only"; naming GPUs is a what-if."""
    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    with footprint.track(name="laptop", output_dir=tmp_path, site={"grid": "FRA", "pue": 1.2}, gpus=[]) as t:
        for _ in range(5):
            sum(i * i for i in range(20_000))  # a CPU loop
            t.step(tokens=10)
    assert not [d for d in t.run["devices"] if d.get("component") == "gpu"]
    a = footprint.assess(t.run, samples=200)
    w = a.workload
    assert w.host_only and w.gpu is None and w.gpu_hours == 0 and w.host_hours == pytest.approx(t.run["duration_s"] / 3600)
    assert w.it_energy_kwh == pytest.approx(t.run["energy"]["total_j"] / 3.6e6)
    for k in cat.keys():  # all 16: host embodied (manufacturing) + use, finite and positive
        r = a[k]
        assert r.total > 0 and r.by_component["host_share"] > 0 and r.low <= r.total <= r.high, k
        assert r.by_stage["transport"] is None and r.by_stage["end_of_life"] is None  # not in the host model: n/a
    # the whole server allocated by host-hours / lifetime (3 years), from the data file, not from the code
    cc = a["climate_change"]
    assert cc.by_component["host_share"] == pytest.approx(_server("climate_change") * w.host_hours / (3 * 8766))
    assert cc.by_stage["use"] == pytest.approx(w.it_energy_kwh * 1.2 * a.use_factors.value[0])
    # estimated CPU/RAM energy is never called measured
    assert w.energy_method.startswith("estimated") and "not measured" in w.energy_method
    assert {d["kind"] for d in a.to_dict()["energy_by_device"]} == {"estimated"}
    from footprint.lca.render import to_table

    text = to_table(a)
    assert "no GPU: host only" in text and "Host-hours" in text
    d = a.to_dict()
    assert d["hardware"]["gpu"] is None and d["hardware"]["gpu_name"] == "no GPU: host only"
    # the CLI and the report the same way; naming the GPUs it stands for stays a what-if
    run = str(tmp_path / "laptop")
    out = _cli("assess", run, "--samples", "0", cwd=tmp_path)
    assert out.returncode == 0 and "no GPU: host only" in out.stdout, out.stderr
    rep = _cli("report", run, "-o", "r.html", cwd=tmp_path)
    page = (tmp_path / "r.html").read_text()
    assert rep.returncode == 0 and "no GPU: host only" in page, rep.stderr
    assert "Embodied impacts by GPU component" not in page  # no GPU components to draw
    b = footprint.assess(t.run, set={"hardware.gpu": "A100-SXM4-40GB", "hardware.count": 1}, samples=0)
    assert not b.workload.host_only and b.workload.it_energy_kwh == pytest.approx(w.it_energy_kwh)
    with pytest.raises(footprint.FootprintError, match="hardware.count"):
        footprint.assess(t.run, set={"hardware.count": 2})  # a count without a GPU: one clear error


def test_no_face_calls_simulated_or_estimated_energy_measured(tmp_path: Path) -> None:
    """examples/runs/two-gpus was recorded on two fake A100s (`measured: false`): the table, the JSON (in total and per
    device), the report and the CSV-free faces say "simulated", never "measured energy"; a scenario's energy is stated
    or estimated."""
    from footprint.lca.render import to_table

    run = REPO / "examples" / "runs" / "two-gpus"
    a = footprint.assess(run, samples=0)
    assert a.workload.energy_method == "simulated energy (run record), not measured"
    d = a.to_dict()
    assert d["method"]["energy"] == a.workload.energy_method
    assert [x["kind"] for x in d["energy_by_device"]] == ["simulated", "simulated"]
    assert sum(x["energy_kwh"] for x in d["energy_by_device"]) == pytest.approx(a.workload.it_energy_kwh)
    assert "Energy obtained: simulated energy (run record), not measured" in to_table(a)
    html = (footprint.report(a, tmp_path / "r.html")).read_text()
    assert "simulated energy (run record), not measured" in html and "measured energy (run record)" not in html
    assert footprint.assess("bloom-176b", samples=0).workload.energy_method == "estimated (GPU-hours x power per GPU)"
    stated = footprint.assess("olmo-2-7b", samples=0)
    assert stated.workload.energy_method == "stated energy (training.energy)"
    from footprint.tracking.to_workload import energy_method

    mixed = [
        {"measured": True, "method": "energy_counter", "energy_j": 5.0},
        {"measured": False, "method": "estimated", "energy_j": 2.0},
    ]
    assert energy_method(mixed).startswith("partly measured energy")


def test_a_scenario_without_gpu_states_duration_and_energy(tmp_path: Path) -> None:
    """`hardware: {gpu: none}`: a host-only scenario from its duration and energy; GPU-only keys are one clear error."""
    p = tmp_path / "cpu.yaml"
    p.write_text("name: cpu\nhardware: {gpu: none}\ntraining: {duration: 2 h, energy: 0.5 kWh}\nsite: {grid: FRA, pue: 1.1}\n")
    a = footprint.assess(p, samples=0)
    assert a.workload.host_only and a.workload.host_hours == 2 and a.workload.energy_method.startswith("stated")
    assert a["climate_change"].by_stage["use"] == pytest.approx(0.5 * 1.1 * a.use_factors.value[0])
    for bad, key in (("mfu: 0.5", "training.mfu"), ("gpu_hours: 3", "training.gpu_hours")):
        p.write_text(f"hardware: {{gpu: none}}\ntraining: {{duration: 2 h, energy: 0.5 kWh, {bad}}}\n")
        with pytest.raises(footprint.FootprintError, match=key):
            footprint.assess(p, samples=0)
    p.write_text("hardware: {gpu: none}\ntraining: {duration: 2 h}\n")
    with pytest.raises(footprint.FootprintError, match="training.energy"):
        footprint.assess(p, samples=0)
