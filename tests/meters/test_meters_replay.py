"""ReplayMeter: a recorded trace as a live meter."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from meters.base import REPLAY
from meters.fake_nvml import ManualClock
from meters.importers import integrate_energy
from meters.replay import ReplayMeter

TRACE = pd.DataFrame(
    {
        "timestamp": [0.0, 1.0, 2.0, 0.0, 2.0, 2.0],
        "device": ["a", "a", "a", "b", "b", "b"],
        "power_w": [100.0, 300.0, 100.0, 50.0, 50.0, 70.0],  # b: repeated timestamp, the last reading wins
    }
)


def test_exact_energy_mid_segment_and_at_end() -> None:
    clock = ManualClock()
    meter = ReplayMeter(TRACE, clock=clock)
    meter.start()
    clock.advance(0.5)
    a, b = meter.sample()
    # a: power 100 -> 300 over [0, 1]: at 0.5 s power is 200 W, energy 0.5 * (100 + 200) / 2
    assert a.energy_j_cumulative == pytest.approx(75.0) and a.power_w == pytest.approx(200.0)
    assert b.energy_j_cumulative == pytest.approx(0.5 * (50 + 55) / 2)
    clock.advance(10.0)
    a, b = meter.sample()
    assert a.energy_j_cumulative == pytest.approx(400.0) and a.power_w is None
    assert meter.finished and meter.total_energy_j() == {"a": pytest.approx(400.0), "b": pytest.approx(120.0)}
    assert [d.method for d in meter.devices] == [REPLAY, REPLAY]
    assert meter.devices[0].notes == ["replayed from DataFrame at 1x"]


def test_speed_loop_and_csv_input(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    TRACE.to_csv(path, index=False)
    clock = ManualClock()
    meter = ReplayMeter(path, speed=2.0, loop=True, clock=clock)
    meter.start()
    clock.advance(2.5)  # 5 log seconds: two full laps of 2 s plus 1 s
    a, _ = meter.sample()
    assert a.energy_j_cumulative == pytest.approx(2 * 400.0 + 200.0)
    assert not meter.finished


def test_replay_agrees_with_integrate_energy_on_timestamps() -> None:
    ts = pd.date_range("2024-01-01 00:00:00", periods=50, freq="100ms")
    df = pd.DataFrame({"timestamp": ts, "device": "g", "power_w": [100 + (i % 7) * 10 for i in range(50)]})
    clock = ManualClock()
    meter = ReplayMeter(df, clock=clock)
    meter.start()
    clock.advance(100)
    (s,) = meter.sample()
    df["t_s"] = (ts - ts[0]).total_seconds()
    assert s.energy_j_cumulative == pytest.approx(integrate_energy(df)["g"]["energy_j"])


def test_bad_input_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match="power_w"):
        ReplayMeter(pd.DataFrame({"timestamp": [0, 1]}))
    with pytest.raises(ValueError, match="two or more"):
        ReplayMeter(pd.DataFrame({"timestamp": [0], "power_w": [1.0]}))
