"""Sampler: background thread, bounded memory, never raises; journal survives SIGKILL."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from _child import kill_after, sampler_child

from meters.base import DeviceInfo, DeviceSample
from meters.fake_nvml import FakeNVML, Faults
from meters.journal import JournalWriter, read_journal
from meters.nvml import NvmlMeter
from meters.sampler import Sampler, total_energy_j

REPO = Path(__file__).resolve().parents[2]


class RaisingMeter:
    """A meter whose every call fails: the sampler must carry on."""

    name = "raising"

    def start(self) -> None:
        raise RuntimeError("cannot start")

    def sample(self) -> list[DeviceSample]:
        raise RuntimeError("cannot sample")

    def stop(self) -> None:
        raise RuntimeError("cannot stop")

    @property
    def devices(self) -> list[DeviceInfo]:
        raise RuntimeError("cannot list")


class CountingMeter:
    """One device at a constant 100 W on the real monotonic clock."""

    name = "counting"

    def __init__(self, uuid: str = "dev-0") -> None:
        self.uuid = uuid
        self.t0 = 0.0

    def start(self) -> None:
        self.t0 = time.monotonic()

    def sample(self) -> list[DeviceSample]:
        t = time.monotonic()
        return [DeviceSample(self.uuid, t, 100.0 * (t - self.t0), 100.0)]

    def stop(self) -> None:
        pass

    @property
    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(uuid=self.uuid, name="counter", method="replay")]


def test_sampler_totals_journal_roundtrip_and_errors(tmp_path: Path) -> None:
    fake = FakeNVML("2xA100-SXM4-40GB,1xP100-PCIE-16GB", power=200.0)
    journal = tmp_path / "run" / "journal.jsonl"
    t0 = time.monotonic()
    sampler = Sampler([NvmlMeter(fake), RaisingMeter()], period_s=0.02, journal_path=journal).start()
    time.sleep(0.5)
    totals = sampler.stop()
    elapsed = time.monotonic() - t0
    assert set(totals) == {fake.uuid_of(i) for i in range(3)}
    for uuid, tot in totals.items():
        assert tot.energy_j == pytest.approx(200.0 * tot.duration_s, rel=0.05), uuid
        assert tot.duration_s <= elapsed and tot.samples > 10
    assert totals[fake.uuid_of(2)].method == "instant_power"
    assert total_energy_j(totals, ["gpu"]) == pytest.approx(sum(t.energy_j for t in totals.values()))
    assert sampler.errors >= sampler.ticks  # one failed sample per tick, plus start/stop/devices
    assert any("cannot sample" in e for e in sampler.error_log)
    assert sampler.stop() is totals  # idempotent

    j = read_journal(journal)
    assert j.complete and not j.torn_tail and j.bad_lines == 0
    assert j.header["format"] == "footprint-meters-journal" and j.header["meters"] == ["nvml", "raising"]
    assert set(j.devices) == set(totals) and j.devices[fake.uuid_of(2)].method == "instant_power"
    for uuid, energy in j.energy_j().items():
        assert energy == pytest.approx(totals[uuid].energy_j, abs=1e-3)
    assert set(j.totals) == set(totals)
    assert any(e["kind"] == "error" for e in j.events)
    frame = j.to_frame()
    assert len(frame) == len(j.samples)
    assert all(g["energy_j_cumulative"].is_monotonic_increasing for _, g in frame.groupby("uuid"))


FAULT_CASES = {
    "no_counter": ("1xH100-SXM5-80GB", Faults(no_energy_counter=True), "instant_power", "counter unavailable"),
    "no_counter_no_instant": (
        "1xH100-SXM5-80GB",
        Faults(no_energy_counter=True, no_instant_power=True),
        "unavailable",
        "1 s average",
    ),
    "pre_volta_no_instant": ("1xP100-PCIE-16GB", Faults(no_instant_power=True), "average_power", "fallback"),
    "nothing_at_all": ("1xK80", Faults(no_power_usage=True), "unavailable", "nvmlDeviceGetPowerUsage unavailable"),
    "reset": ("1xA100-SXM4-40GB", Faults(reset_at_s=0.1), "energy_counter", "reset"),
    "wrap": ("1xA100-SXM4-40GB", Faults(wrap_at_mj=2**32, initial_energy_mj=2**32 - 20_000), "energy_counter", "wrapped"),
    "lost": ("1xA100-SXM4-40GB", Faults(lost_after_s=0.1), "energy_counter", "GPU lost"),
    "flaky": ("1xA100-SXM4-40GB", Faults(error_rate=0.3), "energy_counter", "failed readings"),
    "mig": ("1xA100-SXM4-40GB", Faults(mig_instances=2), "energy_counter", "MIG mode"),
}


@pytest.mark.parametrize("case", FAULT_CASES)
def test_every_fault_completes_a_run_and_is_recorded(case: str, tmp_path: Path) -> None:
    spec, faults, method, note = FAULT_CASES[case]
    fake = FakeNVML(spec, power=300.0, faults=faults)
    sampler = Sampler(NvmlMeter(fake, poll_period_s=0.01), period_s=0.01, journal_path=tmp_path / "j.jsonl")
    sampler.start()
    time.sleep(0.25)
    totals = sampler.stop()
    (dev,) = sampler.devices
    assert dev.method == method and any(note in n for n in dev.notes), dev.notes
    (total,) = totals.values()
    assert (total.energy_j is None) == (method == "unavailable")
    assert read_journal(tmp_path / "j.jsonl").devices[dev.uuid].notes == dev.notes


def test_memory_is_bounded() -> None:
    sampler = Sampler(CountingMeter(), period_s=0.001, history_s=0.05, max_points=16).start()
    time.sleep(0.4)
    sampler.stop()
    assert sampler.ticks > 100
    assert len(sampler.recent()) == 50
    series = sampler.series()
    assert 8 <= len(series) <= 17
    assert series[0][0] <= series[-1][0]
    # the coarse series still spans the run: its last point is the final reading
    assert series[-1][1]["dev-0"] == pytest.approx(sampler.latest()["dev-0"].energy_j_cumulative)


def test_start_is_cheap_and_unwritable_journal_is_an_error_not_an_exception(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t0 = time.perf_counter()
    sampler = Sampler(NvmlMeter(FakeNVML("8xH100-SXM5-80GB")), journal_path=blocker / "journal.jsonl").start()
    started = time.perf_counter() - t0
    time.sleep(0.15)
    totals = sampler.stop()
    assert started < 0.1  # milliseconds in practice; generous bound for slow CI
    assert len(totals) == 8 and sampler.errors >= 1 and "journal" in sampler.error_log[0]


def test_new_devices_appear_and_are_journaled(tmp_path: Path) -> None:
    class LateMeter(CountingMeter):
        def __init__(self) -> None:
            super().__init__("late")
            self.calls = 0

        def sample(self) -> list[DeviceSample]:
            self.calls += 1
            return super().sample() if self.calls > 3 else []

    path = tmp_path / "j.jsonl"
    sampler = Sampler([CountingMeter(), LateMeter()], period_s=0.01, journal_path=path).start()
    time.sleep(0.2)
    totals = sampler.stop()
    assert totals["late"].samples > 0
    j = read_journal(path)
    assert {"dev-0", "late"} <= set(j.energy_j())


def test_journal_tolerates_torn_and_garbage_lines(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    w = JournalWriter(path)
    w.set_devices(1.0, [DeviceInfo(uuid="a", name="A"), DeviceInfo(uuid="b", name="B")])
    w.write_samples(1.0, [DeviceSample("a", 1.0, 1.5, 10.0), DeviceSample("b", 1.0, 2.5, None)])
    w.write_samples(2.0, [DeviceSample("b", 2.0, 3.5, 20.0)])
    w.write_samples(3.0, [DeviceSample("c", 3.0, 9.0, 1.0)])  # undeclared device: declared on the fly
    w.flush()
    with open(path, "a") as fh:
        fh.write("{not json\n")
        fh.write("[4.0, 2.0, 1.0, 4.0, 2")  # torn: the writer died mid-line
    j = read_journal(path)
    assert j.torn_tail and j.bad_lines == 1 and not j.complete
    assert [(s.uuid, s.t_monotonic, s.energy_j_cumulative, s.power_w) for s in j.samples] == [
        ("a", 1.0, 1.5, 10.0),
        ("b", 1.0, 2.5, None),
        ("b", 2.0, 3.5, 20.0),
        ("c", 3.0, 9.0, 1.0),
    ]
    assert j.energy_j() == {"a": 1.5, "b": 3.5, "c": 9.0}


CHILD = sampler_child(0.1)


def test_journal_survives_sigkill(tmp_path: Path) -> None:
    """kill -9 a process mid-run: the journal holds samples up to ~1 s before the kill."""
    path = tmp_path / "journal.jsonl"
    t_started, t_kill, rc, pid = kill_after(CHILD, path, 1.5)
    assert rc == -signal.SIGKILL
    j = read_journal(path)
    assert not j.complete and len(j.devices) == 2
    assert j.last_t is not None and j.last_t >= t_kill - 1.0  # at most ~1 s lost
    assert j.last_t <= t_kill
    for uuid, energy in j.energy_j().items():
        assert energy == pytest.approx(300.0 * (j.last_t - t_started), rel=0.1), uuid
    header = json.loads(path.read_text().splitlines()[0])
    assert header["type"] == "header" and header["pid"] == pid
