"""AMD Instinct GPUs end to end on the fake amdsmi (FOOTPRINT_FAKE_AMDSMI): `footprint doctor` finds them,
`footprint run` and `track()` measure them with the real AMD meter, and the run is assessed on the MI300X's
catalogue card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _paths import REPO

import footprint

PY = sys.executable


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FOOTPRINT_FAKE_NVML", "FOOTPRINT_FAKE_AMDSMI")}
    return {**env, **extra}


def _cli(*args: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_doctor_finds_the_amd_gpus_and_their_catalogue_card() -> None:
    proc = _cli("doctor", "--format", "json", env=_env(FOOTPRINT_FAKE_AMDSMI="2xMI300X"))
    assert proc.returncode == 0, proc.stderr
    amd = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "GPU energy (AMD SMI)")
    assert amd["status"] == "ok" and "2 GPU(s), 2 with the energy accumulator" in amd["summary"]
    assert sum("AMD Instinct MI300X (catalogue: AMD Instinct MI300X): energy_counter" in d for d in amd["details"]) == 2


def test_doctor_says_nothing_of_amd_on_a_machine_without_it() -> None:
    proc = _cli("doctor", "--format", "json", env=_env(FOOTPRINT_FAKE_NVML="1xA100-SXM4-40GB"))
    assert proc.returncode == 0 and "AMD SMI" not in proc.stdout


def test_footprint_run_measures_the_amd_gpus_and_assesses_them_as_mi300x(tmp_path: Path) -> None:
    env = _env(FOOTPRINT_FAKE_AMDSMI="2xMI300X")
    run = _cli(
        "run",
        "--name",
        "amd",
        "--output-dir",
        str(tmp_path),
        "--grid",
        "FRA",
        "--",
        PY,
        "-c",
        "import time; time.sleep(1.5)",
        env=env,
    )
    assert run.returncode == 0, run.stderr
    record = json.loads((tmp_path / "amd" / "run.json").read_text())
    gpus = [d for d in record["devices"] if d["component"] == "gpu"]
    assert [d["name"] for d in gpus] == ["AMD Instinct MI300X"] * 2
    assert all(d["method"] == "energy_counter" and d["measured"] is False and d["energy_j"] > 0 for d in gpus)
    assert not any("nvml" in n.lower() for n in record["notes"])  # no NVIDIA meter on an AMD machine
    proc = _cli("assess", str(tmp_path / "amd"), "--format", "json", "--samples", "0", env=env)
    assert proc.returncode == 0, proc.stderr
    a = json.loads(proc.stdout)
    assert a["hardware"]["gpu"] == "mi300x" and a["hardware"]["count"] == 2  # the catalogue card
    w = footprint.assess(tmp_path / "amd", samples=0).workload
    assert w.gpu.id == "mi300x" and w.it_energy_kwh == pytest.approx(record["energy"]["total_j"] / 3.6e6)
    assert "energy simulated, not measured: 2 x AMD Instinct MI300X (a fake amdsmi's energy_counter)" in w.notes


def test_track_picks_up_the_amd_meter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    monkeypatch.setenv("FOOTPRINT_FAKE_AMDSMI", "1xMI300X:CPX")
    with footprint.track(name="t", output_dir=tmp_path, host=False, period_s=0.05) as t:
        time.sleep(0.5)
    gpus = [d for d in t.run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 1 and gpus[0]["name"] == "AMD Instinct MI300X" and gpus[0]["energy_j"] > 0
    assert any("compute partition CPX" in n for n in gpus[0]["notes"])


@pytest.mark.parametrize(("gcds", "modules"), [(4, 2), (3, 2)])
def test_mi250x_gcds_are_assessed_as_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gcds: int, modules: int) -> None:
    """amdsmi lists an MI250X as two GPUs (one per GCD); its catalogue card is the module: four GCDs carry two modules'
    embodied impacts, not four; an odd GCD's module is counted whole and said to be an upper bound."""
    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    monkeypatch.setenv("FOOTPRINT_FAKE_AMDSMI", f"{gcds}xMI250X")
    with footprint.track(name="t", output_dir=tmp_path, host=False, period_s=0.05, site="FRA") as t:
        time.sleep(0.3)
    assert sum(d["component"] == "gpu" for d in t.run["devices"]) == gcds
    a = footprint.assess(tmp_path / "t", samples=0)
    one = footprint.assess(tmp_path / "t", samples=0, set=["hardware.count=1"])
    assert a.workload.gpu.id == "mi250x" and a.workload.count == modules
    module = a.workload.gpu.name
    assert any(n.startswith(f"{gcds} x AMD Instinct MI250X are {gcds / 2:g} x {module}") for n in a.workload.notes)
    assert any("upper bound" in n for n in a.workload.notes) is bool(gcds % 2)
    cc = "climate_change"
    assert a.impacts[cc].by_stage["manufacturing"] == pytest.approx(modules * one.impacts[cc].by_stage["manufacturing"], rel=1e-9)
