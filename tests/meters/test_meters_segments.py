"""The journal rolls into Parquet segments: tiers, retention, exact energy, lazy reads, kill -9, v1 journals,
and memory that does not grow with the run (a shortened long run)."""

from __future__ import annotations

import gc
import json
import math
import signal
import time
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pytest
from _child import kill_after, sampler_child

from meters.base import DeviceInfo, DeviceSample
from meters.fake_nvml import ManualClock
from meters.journal import read_journal
from meters.sampler import Sampler
from meters.segments import LAST, MINUTE, PENDING, RAW, SECOND, Retention, list_parts, segments_dir
from meters.store import Store, downsample

REPO = Path(__file__).resolve().parents[2]
SMALL = Retention(segment_s=5, raw_s=60, second_s=300, second_part_s=60, minute_part_s=300)


class Synthetic:
    """Devices with a known power (a spike every 97 s) integrated on a manual clock."""

    name = "synthetic"

    def __init__(self, clock: ManualClock, n: int = 2) -> None:
        self.clock, self.n = clock, n
        self.energy = [0.0] * n
        self.t = clock()

    def power(self, i: int, t: float) -> float:
        return 300.0 + 100.0 * math.sin(t / 7.0 + i) + (500.0 if int(t) % 97 == 0 else 0.0)

    def start(self) -> None:
        self.t = self.clock()

    def sample(self) -> list[DeviceSample]:
        t = self.clock()
        dt, self.t = t - self.t, t
        out = []
        for i in range(self.n):
            p = self.power(i, t)
            self.energy[i] += p * dt
            out.append(DeviceSample(f"gpu-{i}", t, self.energy[i], p))
        return out

    def stop(self) -> None:
        pass

    @property
    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(uuid=f"gpu-{i}", name="X", method="replay") for i in range(self.n)]


def run(
    path: Path, seconds: float, retention: Retention = SMALL, period: float = 0.1, n: int = 2, **kw: float
) -> tuple[Sampler, Synthetic]:
    clock = ManualClock(1000.0)
    meter = Synthetic(clock, n)
    s = Sampler(
        [meter], period_s=period, journal_path=path, clock=clock, retention=retention, background=False, meta={"t0": 1000.0}, **kw
    )
    s.start()
    for _ in range(int(seconds / period)):
        clock.advance(period)
        s.tick()
    return s, meter


def test_tiers_retention_and_exact_energy(tmp_path: Path) -> None:
    path = tmp_path / "r.journal.jsonl"
    s, meter = run(path, 1200)
    totals = s.stop()
    assert s.errors == 0, list(s.error_log)
    seg = segments_dir(path)
    raw, sec, minute = (list_parts(seg, t) for t in (RAW, SECOND, MINUTE))
    assert not list_parts(seg, PENDING)  # every rolled piece became a part
    assert 12 <= len(raw) <= 13 and raw[0][1][0] >= 1200_000 - 60_000 - 5_000  # raw kept for raw_s (60 s)
    assert 5 <= len(sec) <= 6 and sec[0][1][0] >= 1200_000 - 300_000 - 60_000  # per second kept for 300 s
    assert minute[0][1][0] == 0  # per minute for the whole run
    store = Store(path)
    plan = store.plan()
    assert plan[0].start_ms == -(2**62) or plan[0].start_ms <= 0
    for a, b in zip(plan[:-1], plan[1:], strict=True):  # the files cover the run without a gap
        assert a.end_ms == b.start_ms
    rows = pa.concat_tables(list(store.batches())).to_pylist()
    for i in range(2):
        mine = [r for r in rows if r["uuid"] == f"gpu-{i}"]
        assert [r["t_s"] for r in mine] == sorted(r["t_s"] for r in mine)
        # energy at every resolution is a real counter reading: the last one is the run's total to the millijoule
        assert mine[-1]["energy_j"] == pytest.approx(totals[f"gpu-{i}"].energy_j, abs=1e-3)
        assert store.last_readings()[f"gpu-{i}"]["energy_j"] == pytest.approx(meter.energy[i], abs=1e-3)
        # the per-minute rows keep the spikes: max power of the minute holding t = 97 s
        minute_rows = [r for r in mine if r["res_s"] == 60.0]
        spike = next(r for r in minute_rows if 97 < r["t_s"] <= 120)
        assert spike["power_max_w"] > 700 and spike["power_min_w"] < spike["power_w"] < spike["power_max_w"]
        assert sum(r["n"] for r in minute_rows if r["t_s"] <= 300) == pytest.approx(3000, abs=2)
    # full resolution where it is kept, pushdown of span, device and columns
    recent = pa.concat_tables(list(store.batches(1150, 1160, uuids=["gpu-1"], columns=["uuid", "t_s", "power_w"])))
    assert recent.column_names == ["uuid", "t_s", "power_w"] and recent.num_rows == 100
    assert set(recent["uuid"].to_pylist()) == {"gpu-1"}
    assert min(recent["t_s"].to_pylist()) >= 1150 and max(recent["t_s"].to_pylist()) < 1160


def test_downsample_keeps_peaks_and_energy(tmp_path: Path) -> None:
    path = tmp_path / "d.journal.jsonl"
    keep_all = Retention(segment_s=5, raw_s=None, second_s=None, second_part_s=60, minute_part_s=300)
    s, meter = run(path, 600, keep_all)
    s.stop()
    store = Store(path)
    raw = pa.concat_tables(list(store.batches(0, 601, uuids=["gpu-0"]))).to_pylist()
    assert {r["res_s"] for r in raw} == {0.0}  # every reading kept
    down = downsample(store.batches(0, 600.1, resolution_s=6.0), 0, 600.1, 100).to_pylist()
    mine = [r for r in down if r["uuid"] == "gpu-0"]
    assert len(mine) == 100 and sum(r["n"] for r in mine) == len(raw)
    assert max(r["power_max_w"] for r in mine) == pytest.approx(max(r["power_max_w"] for r in raw), rel=1e-6)
    assert min(r["power_min_w"] for r in mine) == pytest.approx(min(r["power_min_w"] for r in raw), rel=1e-6)
    assert mine[-1]["energy_j"] == pytest.approx(meter.energy[0], abs=1e-3)
    assert all(a["energy_j"] <= b["energy_j"] for a, b in zip(mine[:-1], mine[1:], strict=True))


def test_retention_is_validated() -> None:
    with pytest.raises(ValueError, match="segment_s"):
        Retention(segment_s=7)
    with pytest.raises(ValueError, match="unknown keys"):
        Retention.of({"raw": 1})
    assert Retention.of({"raw_s": None}).raw_s is None and Retention.of(None) == Retention()


def test_a_reused_journal_path_is_set_aside_not_mixed(tmp_path: Path) -> None:
    path = tmp_path / "again.journal.jsonl"
    run(path, 30)[0].stop()
    run(path, 20)[0].stop()
    olds = sorted(p.name for p in tmp_path.iterdir() if ".old-" in p.name)
    assert len(olds) == 2  # the first run's journal and segments, renamed
    assert max(Store(path).last_readings()["gpu-0"]["t_s"] for _ in [0]) == pytest.approx(20.0, abs=0.2)


CHILD = sampler_child(0.05, "Retention(segment_s=1, raw_s=2, second_s=60, second_part_s=60, minute_part_s=60)")


def test_kill_9_mid_roll_loses_at_most_a_second(tmp_path: Path) -> None:
    path = tmp_path / "k.journal.jsonl"
    t_started, t_kill, rc, pid = kill_after(CHILD, path, 3.7)
    assert rc == -signal.SIGKILL
    store = Store(path)
    assert list_parts(store.dir, RAW) and (store.dir / LAST).is_file()  # it rolled: parts and pending pieces
    last = store.last_readings()
    assert len(last) == 2
    t0 = store.t0
    for r in last.values():
        assert t_kill - 1.0 <= t0 + r["t_s"] <= t_kill, f"lost {t_kill - t0 - r['t_s']:.2f} s"
        assert r["energy_j"] == pytest.approx(300.0 * (t0 + r["t_s"] - t_started), rel=0.1)
    rows = pa.concat_tables(list(store.batches(uuids=[next(iter(last))]))).to_pylist()
    gaps = [b["t_s"] - a["t_s"] for a, b in zip(rows[:-1], rows[1:], strict=True)]
    assert max(gaps) < 0.5  # tail, pending pieces and parts join without a hole
    assert not read_journal(path).complete


def test_v1_journal_reads_lazily(tmp_path: Path) -> None:
    """A journal from before segments (version 1, the whole run in one file) reads through the same store."""
    path = tmp_path / "rank-00000.journal.jsonl"
    lines = [
        json.dumps({"type": "header", "format": "footprint-meters-journal", "version": 1, "t0": 100.0, "rank": 0}),
        json.dumps(
            {
                "type": "devices",
                "t": 100.0,
                "keys": ["a", "b"],
                "devices": [{"uuid": "a", "name": "A"}, {"uuid": "b", "name": "B"}],
            }
        ),
    ]
    lines += [f"[{100 + k * 0.1:.4f},{k * 10.0:.4f},100.00,{k * 20.0:.4f},200.00]" for k in range(1, 3001)]
    lines.append(json.dumps({"type": "event", "t": 400.0, "kind": "progress", "steps": 7}))
    path.write_text("\n".join(lines) + "\n")
    store = Store(path)
    assert [s.kind for s in store.plan()] == ["journal"]
    tables = list(store.batches(columns=["uuid", "t_s", "energy_j"]))
    rows = pa.concat_tables(tables)
    assert rows.num_rows == 6000
    assert store.last_readings()["b"]["energy_j"] == pytest.approx(60_000.0)
    assert read_journal(path, samples=False).progress["steps"] == 7


def _writer_memory(tmp: Path, minutes: float) -> tuple[int, int, float]:
    """(retained, peak) bytes of Python memory while the writer runs `minutes`, and the stop time.

    Retained is measured after a garbage collection: the peak depends on when Python's cyclic collector
    happens to run (seen from 0.6 to 3 MB at the same length), so growth is judged on what stays alive.
    """
    ret = Retention(segment_s=10, raw_s=60, second_s=600, second_part_s=60, minute_part_s=600)
    tracemalloc.start()
    # the sampler's in-memory history and coarse series have fixed caps; small ones here so that both runs pass them
    s, _ = run(tmp / f"m{minutes}.journal.jsonl", minutes * 60, ret, period=0.5, n=4, history_s=60, max_points=256)
    s._journal.segments.wait_idle()  # a real run rolls every few minutes: the writer is idle when stop comes
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    t0 = time.perf_counter()
    s.stop()
    return retained, peak, time.perf_counter() - t0


def _reader_peak(path: Path) -> int:
    store = Store(path)
    tracemalloc.start()
    down = downsample(store.batches(resolution_s=10), 0, 1e6, 500)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert down.num_rows > 0
    return peak


def test_long_run_memory_is_bounded(tmp_path: Path) -> None:
    """Shortened long run: 4x the run length, same writer and reader memory; stop stays O(one segment)."""
    _writer_memory(tmp_path, 1)  # first use: imports and caches are not the run's memory
    short_kept, short_peak, short_stop = _writer_memory(tmp_path, 10)
    long_kept, long_peak, long_stop = _writer_memory(tmp_path, 40)
    assert long_kept < 1.1 * short_kept + 64 * 1024, (short_kept, long_kept)
    assert max(short_peak, long_peak) < 8 * 1024 * 1024 and max(short_stop, long_stop) < 1.0
    r_short = _reader_peak(tmp_path / "m10.journal.jsonl")
    r_long = _reader_peak(tmp_path / "m40.journal.jsonl")
    assert r_long < 1.5 * r_short + 256 * 1024, (r_short, r_long)
