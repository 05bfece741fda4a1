"""nvidia-smi / codecarbon / PMD readers, integration caveats, and validation against an external meter."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from meters.importers import (
    integrate_energy,
    read_codecarbon_csv,
    read_nvidia_smi_csv,
    read_pmd_log,
)
from meters.replay import ReplayMeter

UNITS_LOG = """timestamp, name, index, uuid, power.draw [W], power.draw.instant [W], temperature.gpu
2024/01/02 10:00:00.000, NVIDIA H100 80GB HBM3, 0, GPU-aaa, 100.00 W, 100.00 W, 40
2024/01/02 10:00:00.000, NVIDIA H100 80GB HBM3, 1, GPU-bbb, 200.00 W, [N/A], 41
2024/01/02 10:00:01.000, NVIDIA H100 80GB HBM3, 0, GPU-aaa, 300.00 W, 300.00 W, 40
2024/01/02 10:00:01.000, NVIDIA H100 80GB HBM3, 1, GPU-bbb, 200.00 W, 200.00 W, 41
timestamp, name, index, uuid, power.draw [W], power.draw.instant [W], temperature.gpu
2024/01/02 10:00:02.000, NVIDIA H100 80GB HBM3, 0, GPU-aaa, 300.00 W, 300.00 W, 40
2024/01/02 10:00:02.000, NVIDIA H100 80GB HBM3, 1, GPU-bbb, 200.00 W, 200.00 W, 41
2024/01/02 10:00:03.000, NVIDIA H100 80GB HB"""

NOUNITS_LOG = """timestamp, index, power.draw [W], clocks.current.sm [MHz], utilization.gpu [%]
2024/01/02 10:00:00.000, 0, 50.5, 1410, 10
2024/01/02 10:00:00.500, 0, 50.5, [Unknown Error], 20
2024/01/02 10:00:00.800, 0, 60.5, 1410, [N/A]
"""

LOCAL_DATA = Path(__file__).resolve().parent / "data"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "smi.csv"
    p.write_text(text)
    return p


def test_units_na_repeated_header_torn_line_and_multi_gpu(tmp_path: Path) -> None:
    df = read_nvidia_smi_csv(write(tmp_path, UNITS_LOG))
    assert len(df) == 6 and df.attrs["dropped"] == {"wrong width": 1}  # the torn last line (a repeated header is no loss)
    assert df.attrs["power_column"] == "power_draw_instant_w"
    assert list(df["device"].unique()) == ["GPU-aaa", "GPU-bbb"]
    assert df["index"].tolist() == [0, 1, 0, 1, 0, 1]
    assert math.isnan(df["power_draw_instant_w"][1]) and df["power_draw_w"][1] == 200.0
    assert df["timestamp"][0] == pd.Timestamp("2024-01-02 10:00:00")  # naive local time by default
    assert df["temperature_gpu"].tolist() == [40, 41, 40, 41, 40, 41]
    res = integrate_energy(df)
    a, b = res["GPU-aaa"], res["GPU-bbb"]
    assert a["energy_j"] == pytest.approx(200.0 + 300.0) and a["method"] == "instant_power"
    assert b["energy_j"] == pytest.approx(200.0) and b["duration_s"] == pytest.approx(1.0)
    assert any("without a power value" in n for n in b["notes"])
    draw = integrate_energy(df, power_column="power_draw_w")
    assert draw["GPU-bbb"]["energy_j"] == pytest.approx(400.0) and draw["GPU-bbb"]["method"] == "power_draw"
    assert any("1 s average" in n for n in draw["GPU-bbb"]["notes"])


def test_nounits_unknown_values_utc_offset_and_windows(tmp_path: Path) -> None:
    df = read_nvidia_smi_csv(write(tmp_path, NOUNITS_LOG), utc_offset="+01:00")
    assert list(df.columns[:5]) == ["timestamp", "index", "power_draw_w", "clocks_current_sm_mhz", "utilization_gpu_pct"]
    assert math.isnan(df["clocks_current_sm_mhz"][1]) and math.isnan(df["utilization_gpu_pct"][2])
    assert df["timestamp"][0] == pd.Timestamp("2024-01-02 09:00:00", tz="UTC")
    assert df["t_s"][0] == pd.Timestamp("2024-01-02 09:00:00", tz="UTC").timestamp()
    assert (df["device"] == "0").all()
    res = integrate_energy(df)["0"]
    assert res["energy_j"] == pytest.approx(0.5 * 50.5 + 0.3 * 55.5)
    assert not res["reliable"] and any("shorter than" in n for n in res["notes"])
    t0 = df["t_s"][0]
    part = integrate_energy(df, start=t0 + 0.25, end=pd.Timestamp("2024-01-02 09:00:00.750", tz="UTC"))["0"]
    ramp = 0.5 * (10.0 / 0.3) * 0.25**2  # 50.5 W, then rising 10 W over 0.3 s from 0.5 s
    assert part["duration_s"] == pytest.approx(0.5)
    assert part["energy_j"] == pytest.approx(0.5 * 50.5 + ramp, rel=1e-6)
    clipped = integrate_energy(df, start=t0 - 5)["0"]
    assert any("clipped" in n for n in clipped["notes"])
    with pytest.raises(ValueError, match="utc_offset"):
        read_nvidia_smi_csv(write(tmp_path, NOUNITS_LOG), utc_offset="soon")


def test_codecarbon_csv_in_joules() -> None:
    df = read_codecarbon_csv(LOCAL_DATA / "codecarbon_emissions.csv")
    row = df.iloc[0]
    assert row["energy_j"] == pytest.approx(1.7957187500659355e-05 * 3.6e6)
    assert row["cpu_energy_j"] + row["gpu_energy_j"] + row["ram_energy_j"] == pytest.approx(row["energy_j"])
    assert row["duration_s"] == pytest.approx(3.018, abs=1e-3) and row["ram_power_w"] == 20.0
    assert "energy_consumed" not in df and row["tracking_mode"] == "machine"


# SC'24 recordings with an external PMD meter: (folder, workload window from timestamps.csv)
PAIRED_RUNS = ["5050/A100", "5050/3090", "Transient_Response/A100_TR", "Transient_Response/3090_TR"]


@pytest.mark.parametrize("run", PAIRED_RUNS)
def test_nvidia_smi_energy_matches_external_meter(power_data: Path, run: str) -> None:
    """VALIDATION.md: nvidia-smi energy / meter energy over the same window is within 0.94-1.03."""
    folder = power_data / "gpu-power-benchmark" / "plotting" / "data" / run
    smi = read_nvidia_smi_csv(folder / "gpudata.csv", utc_offset=1)  # logs are local time, UTC+1
    pmd = read_pmd_log(folder)
    window = pd.read_csv(folder / "timestamps.csv")["timestamp"] / 1e6  # load toggles, epoch us (UTC)
    start, end = float(window.min()), float(window.max())
    assert smi["t_s"].iloc[0] < start and pmd["t_s"].iloc[0] < start  # both cover the window
    gpu = integrate_energy(smi, start=start, end=end)["0"]
    meter = integrate_energy(pmd, start=start, end=end)["pmd"]
    ratio = gpu["energy_j"] / meter["energy_j"]
    print(
        f"{run}: nvidia-smi {gpu['energy_j']:.1f} J / PMD {meter['energy_j']:.1f} J = {ratio:.4f} "
        f"over {gpu['duration_s']:.2f} s ({gpu['method']})"
    )
    assert gpu["method"] == "instant_power" and gpu["reliable"]
    assert 0.94 <= ratio <= 1.03


def test_mlperf_stuck_sensor_detected(power_data: Path) -> None:
    df = read_nvidia_smi_csv(power_data / "gpu-power-benchmark" / "tests" / "MLPerf" / "data.csv")
    assert df["power_draw_w"].iloc[0] == 46.19 and df["clocks_current_sm_mhz"].isna().all()
    res = integrate_energy(df)["0"]
    assert not res["reliable"] and res["stuck_s"] == pytest.approx(700, abs=5)
    assert any("stuck" in n and "46.19 W" in n for n in res["notes"])


def test_replay_of_a_real_log_gives_the_integrated_energy(power_data: Path) -> None:
    from meters.fake_nvml import ManualClock

    path = power_data / "gpu-power-benchmark" / "plotting" / "data" / "5050" / "A100" / "gpudata.csv"
    clock = ManualClock()
    meter = ReplayMeter.from_nvidia_smi(path, speed=10.0, clock=clock)
    meter.start()
    clock.advance(meter.duration_s / 10.0 + 1.0)
    (sample,) = meter.sample()
    expected = integrate_energy(read_nvidia_smi_csv(path))["0"]["energy_j"]
    assert sample.energy_j_cumulative == pytest.approx(expected, rel=1e-9)
    assert meter.finished and sample.power_w is None
