"""`footprint import nvidia-smi` writes the log's readings as a run's samples, so reports and the Runs page draw it
(the Runs page's check is in test_dashboard.py, with the other Streamlit AppTest tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO

import footprint
from footprint.tracking import runrecord

LOG = REPO / "examples" / "logs" / "nvidia-smi.csv"


def _import(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "footprint.cli", "import", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def smi_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("smi") / "smi"
    proc = _import("nvidia-smi", str(LOG), "-o", str(out), "--utc-offset", "+1", "--grid", "FRA")
    assert proc.returncode == 0, proc.stderr
    assert "482 power readings" in proc.stdout
    return out


def test_the_samples_hold_every_reading_and_the_records_energy(smi_run: Path) -> None:
    rec = json.loads((smi_run / "run.json").read_text())
    df = footprint.read_samples(smi_run)
    assert len(df) == 482 and set(df["uuid"]) == {d["uuid"] for d in rec["devices"]}
    for d in rec["devices"]:
        mine = df[df["uuid"] == d["uuid"]].sort_values("t_s")
        assert mine["energy_j"].iloc[-1] == pytest.approx(d["energy_j"], rel=1e-6)  # cumulative trapezoid = the record's
        assert mine["t_s"].iloc[0] == 0 and mine["t_s"].iloc[-1] == pytest.approx(120.0)
        assert mine["power_w"].max() > 600 and mine["power_w"].min() < 120  # the dips of the log are there
    assert rec["samples"]["readings"] == 482 and rec["samples"]["retention"]["raw_s"] is None


def test_a_report_of_the_import_draws_its_power(smi_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "smi.html"
    footprint.report(smi_run, out)
    text = out.read_text()
    assert "Measured run" in text and "GPU 0 · NVIDIA H100 80GB HBM3 · nvidia-smi.csv" in text
    assert "GPU 1 · NVIDIA H100 80GB HBM3 · nvidia-smi.csv" in text


def test_a_long_log_rolls_into_parquet_segments(shared: Path, tmp_path: Path) -> None:
    """The MLPerf log of the SC'24 artifact: 700 s at ~18 Hz, more than two 5-minute segments."""
    log = shared / "power" / "gpu-power-benchmark" / "tests" / "MLPerf" / "data.csv"
    if not log.is_file():
        pytest.skip("the SC'24 MLPerf log is not beside the repository")
    out = tmp_path / "mlperf"
    proc = _import("nvidia-smi", str(log), "-o", str(out), "--gpu", "A100-PCIe-40GB")
    assert proc.returncode == 0, proc.stderr
    seg = out / "ranks" / "rank-00000.segments"
    assert len(list((seg / "raw").glob("*.parquet"))) >= 2 and list((seg / "60s").glob("*.parquet"))
    rec = json.loads((out / "run.json").read_text())
    tl = runrecord.power_timeline(out, buckets=100)
    assert tl.num_rows == 100 and max(tl["energy_j"].to_pylist()) == pytest.approx(rec["energy"]["gpu_j"], rel=1e-6)


def test_an_existing_run_directory_is_left_alone(smi_run: Path) -> None:
    before = (smi_run / "run.json").read_bytes()
    proc = _import("nvidia-smi", str(LOG), "-o", str(smi_run))
    assert proc.returncode == 2 and "already holds a run record" in proc.stderr and "Traceback" not in proc.stderr
    assert (smi_run / "run.json").read_bytes() == before
