"""The Python API as the CLI: `footprint.assess(target, set=...)` is `footprint assess --set` through the same code;
shipped scenarios resolve by name from any folder; a CPU-only tracked run says in one line what to set."""

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


def test_a_cpu_only_tracked_run_says_in_one_line_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `footprint.track` example on a laptop: no GPU recorded, so one line names what `set=` takes;
    given the GPUs it stands for, the host's measured energy is assessed."""
    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    with footprint.track(name="laptop", output_dir=tmp_path, site={"grid": "FRA", "pue": 1.2}, gpus=[]) as t:
        t.step(tokens=10)
    assert not [d for d in t.run["devices"] if d.get("component") == "gpu"]
    with pytest.raises(footprint.FootprintError) as err:
        footprint.assess(t.run)
    line = str(err.value)
    assert "\n" not in line and "set={'hardware.gpu': NAME, 'hardware.count': N}" in line and "--set" not in line
    a = footprint.assess(t.run, set={"hardware.gpu": "A100-SXM4-40GB", "hardware.count": 1}, samples=0)
    assert a.workload.it_energy_kwh == pytest.approx(t.run["energy"]["total_j"] / 3.6e6)
