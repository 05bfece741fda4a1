"""RAPL on a fake powercap tree, and the codecarbon-style CPU/RAM estimate used when RAPL is unreadable."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

import meters.cpu_estimate as est_mod
import meters.rapl as rapl_mod
from meters.base import ESTIMATED, RAPL, UNAVAILABLE
from meters.cpu_estimate import (
    CpuEstimateMeter,
    HostEstimate,
    codecarbon_cpu_table,
    cpu_model,
    fast_estimate,
    host_meters,
    match_cpu,
)
from meters.fake_nvml import ManualClock
from meters.rapl import RaplMeter

MAX_RANGE = 262_143_328_850


def zone(root: Path, rel: str, name: str, energy: int, max_range: int | None = MAX_RANGE) -> Path:
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    if max_range is not None:
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    return d


def set_energy(d: Path, value: int) -> None:
    (d / "energy_uj").write_text(f"{value}\n")


@pytest.fixture
def server_tree(tmp_path: Path) -> dict[str, Path]:
    """Two sockets; socket 0 nests core, uncore and dram; an MMIO duplicate of package-0; psys."""
    root = tmp_path / "powercap"
    z = {
        "pkg0": zone(root, "intel-rapl:0", "package-0", 1_000_000),
        "core0": zone(root, "intel-rapl:0/intel-rapl:0:0", "core", 500_000),
        "uncore0": zone(root, "intel-rapl:0/intel-rapl:0:1", "uncore", 100_000),
        "dram0": zone(root, "intel-rapl:0/intel-rapl:0:2", "dram", 200_000),
        "pkg1": zone(root, "intel-rapl:1", "package-1", MAX_RANGE - 5_000_000),  # about to wrap
        "mmio0": zone(root, "intel-rapl-mmio:0", "package-0", 7_000_000),
        "psys": zone(root, "intel-rapl:2", "psys", 9_000_000),
    }
    z["root"] = root
    return z


def test_domains_counted_once_and_wrap_handled(server_tree: dict[str, Path]) -> None:
    clock = ManualClock()
    meter = RaplMeter(server_tree["root"], clock=clock)
    meter.start()
    names = [d.name for d in meter.devices]
    assert names == ["package-0", "package-1", "dram-0"]  # no core/uncore/psys, package-0 once
    pkg0 = meter.devices[0]
    assert pkg0.method == RAPL and pkg0.component == "cpu" and any("MMIO" in n for n in pkg0.notes)
    assert meter.devices[2].component == "dram" and meter.devices[2].power_scope == "dram"
    assert any("core" in n and "uncore" in n for n in meter.notes)
    assert any("psys" in n for n in meter.notes)

    clock.advance(1.0)
    set_energy(server_tree["mmio0"], 7_000_000 + 50_000_000)  # 50 J on the MMIO copy (preferred)
    set_energy(server_tree["pkg0"], 1_000_000 + 999_000_000)  # must be ignored: same domain via MSR
    set_energy(server_tree["core0"], 500_000 + 40_000_000)  # inside the package: ignored
    set_energy(server_tree["pkg1"], 15_000_000)  # wrapped: 5 J before + 15 J after
    set_energy(server_tree["dram0"], 200_000 + 8_000_000)
    samples = {s.uuid: s for s in meter.sample()}
    meter.stop()
    assert samples["rapl:package-0"].energy_j_cumulative == pytest.approx(50.0)
    assert samples["rapl:package-1"].energy_j_cumulative == pytest.approx(20.0)
    assert samples["rapl:dram-0"].energy_j_cumulative == pytest.approx(8.0)
    assert samples["rapl:package-0"].power_w == pytest.approx(50.0)
    assert any("wrapped 1 time" in n for n in meter.devices[1].notes)


def test_prefer_psys_and_exclude_dram(server_tree: dict[str, Path]) -> None:
    assert [d.name for d in RaplMeter(server_tree["root"], prefer_psys=True).discover()] == ["psys"]
    assert [d.name for d in RaplMeter(server_tree["root"], include_dram=False).discover()] == ["package-0", "package-1"]


def _deny_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, chmod 000 does not stop reads: make the reader honour the mode bits like a normal user."""
    real = rapl_mod._read_text

    def reader(path: str) -> str:
        if os.geteuid() == 0 and not os.stat(path).st_mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(rapl_mod, "_read_text", reader)


def test_permission_denied_is_reported_not_raised(server_tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _deny_unreadable(monkeypatch)
    (server_tree["pkg1"] / "energy_uj").chmod(0)
    meter = RaplMeter(server_tree["root"])
    meter.start()
    devs = {d.name: d for d in meter.devices}
    assert devs["package-1"].method == UNAVAILABLE
    assert any("permission denied" in n and "CVE-2020-8694" in n for n in devs["package-1"].notes)
    assert devs["package-0"].method == RAPL
    assert {s.uuid for s in meter.sample()} == {"rapl:package-0", "rapl:dram-0"}
    meter.stop()


def test_all_unreadable_falls_back_to_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _deny_unreadable(monkeypatch)
    root = tmp_path / "powercap"
    d = zone(root, "intel-rapl:0", "package-0", 1)
    (d / "energy_uj").chmod(0)
    assert not RaplMeter(root).available
    resolve = lambda need_ram: HostEstimate("Test CPU", 100.0, 10.0)  # noqa: E731
    (meter,) = host_meters(str(root), resolve=resolve)
    assert isinstance(meter, CpuEstimateMeter)
    assert any("RAPL unusable" in n and "permission denied" in n for n in meter.devices[0].notes)
    assert [d.method for d in meter.devices] == [ESTIMATED, ESTIMATED]
    # readable RAPL without DRAM: RAPL for the CPU, estimate for the RAM only
    root2 = tmp_path / "pc2"
    zone(root2, "intel-rapl:0", "package-0", 1)
    meters = host_meters(str(root2), resolve=resolve)
    assert isinstance(meters[0], RaplMeter) and [d.component for d in meters[1].devices] == ["ram"]


def test_missing_powercap_and_missing_range(tmp_path: Path) -> None:
    meter = RaplMeter(tmp_path / "nope")
    meter.start()
    assert meter.sample() == [] and any("no powercap" in n for n in meter.notes)
    clock = ManualClock()
    d = zone(tmp_path / "pc", "intel-rapl:0", "package-0", 5_000_000, max_range=None)
    meter = RaplMeter(tmp_path / "pc", clock=clock)
    meter.start()
    set_energy(d, 1_000_000)  # went backwards, range unknown: interval dropped, not negative
    clock.advance(1)
    assert meter.sample()[0].energy_j_cumulative == 0.0
    assert meter.devices[0].errors == 1 and any("cannot be corrected" in n for n in meter.devices[0].notes)


def test_cpu_estimate_constant_and_load_modes() -> None:
    clock = ManualClock()
    meter = CpuEstimateMeter(mode="constant", resolve=lambda r: HostEstimate("X", 120.0, 12.0), clock=clock)
    meter.start()
    assert meter.wait_resolved(5)
    clock.advance(10.0)
    cpu, ram = meter.sample()
    assert cpu.energy_j_cumulative == pytest.approx(120.0 * 0.5 * 10.0)
    assert ram.energy_j_cumulative == pytest.approx(12.0 * 10.0)
    assert all(not d.measured and d.method == ESTIMATED for d in meter.devices)
    assert meter.devices[0].name == "X (estimated)" and meter.devices[0].power_limit_w == 120.0

    clock = ManualClock()
    meter = CpuEstimateMeter(tdp_w=100.0, ram_power_w=5.0, clock=clock)
    meter.start()
    clock.advance(2.0)
    cpu, ram = meter.sample()
    # machine load between 0 and 100 %: factor between 0.1 and 1.0 of TDP
    assert 100.0 * 0.1 * 2.0 - 1e-9 <= cpu.energy_j_cumulative <= 100.0 * 2.0 + 1e-9
    assert any("0.9 x machine CPU load^3" in n for n in meter.devices[0].notes)


def test_cpu_estimate_start_is_fast_and_samples_wait_for_tdp() -> None:
    import threading

    gate = threading.Event()

    def slow(need_ram: bool) -> HostEstimate:
        gate.wait(5)
        return HostEstimate("Slow CPU", 80.0, 8.0)

    clock = ManualClock()
    meter = CpuEstimateMeter(mode="constant", resolve=slow, clock=clock)
    t0 = time.perf_counter()
    meter.start()
    assert time.perf_counter() - t0 < 0.05
    clock.advance(3.0)
    assert meter.sample() == []  # nothing until the TDP is known...
    gate.set()
    assert meter.wait_resolved(5)
    clock.advance(1.0)
    cpu, _ = meter.sample()
    assert cpu.energy_j_cumulative == pytest.approx(80.0 * 0.5 * 4.0)  # ...but no energy is lost


def test_cpu_estimate_with_real_codecarbon() -> None:
    """The default resolver really uses codecarbon's table and RAM heuristic (in milliseconds, in a thread)."""
    clock = ManualClock()
    meter = CpuEstimateMeter(mode="constant", clock=clock)
    meter.start()
    assert meter.wait_resolved(60)
    clock.advance(1.0)
    cpu, ram = meter.sample()
    assert cpu.power_w and cpu.power_w > 0 and ram.power_w and ram.power_w > 0
    assert any("codecarbon" in n for n in meter.devices[0].notes + meter.devices[1].notes)
    meter.stop()


MODELS = [
    "Intel(R) Xeon(R) Platinum 8480+",
    "AMD EPYC 7763 64-Core Processor",
    "Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz",
    "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz",
    "AMD EPYC 9654 96-Core Processor",
    "AMD EPYC",
    "Apple M2",
    "Neoverse-V2",
    "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz",
]


def test_fast_cpu_match_agrees_with_codecarbon() -> None:
    """`match_cpu` gives codecarbon's own `TDP._get_matching_cpu` answer (rapidfuzz), table names and variants."""
    import logging

    from codecarbon.core.cpu import TDP
    from codecarbon.input import DataSource

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    table = DataSource().get_cpu_power_data()
    names = [n for n, _ in codecarbon_cpu_table()]
    assert names == list(table["Name"])  # the same table, read without pandas
    tdp = TDP.__new__(TDP)  # its matcher only; no CPU detection
    queries = (
        MODELS
        + names[::97]
        + [n.upper() + " Processor" for n in names[5::131]]
        + [f"Intel(R) {n} CPU @ 2.00GHz" for n in names[9::151]]
    )
    for q in queries:
        assert match_cpu(q, names) == tdp._get_matching_cpu(q, table), q


def test_fast_estimate_reads_cpuinfo_and_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t: fpu\n")
    assert cpu_model(str(info)) == "AMD EPYC 7763 64-Core Processor"
    assert cpu_model(str(tmp_path / "none")) is None
    monkeypatch.setattr(est_mod, "cpu_model", lambda: "AMD EPYC 7763 64-Core Processor")
    est = fast_estimate(include_ram=False)
    assert est.tdp_w == 280.0 and "codecarbon's CPU table" in est.notes[0]
    called = []
    monkeypatch.setattr(est_mod, "cpu_model", lambda: None)  # no model: codecarbon's own (slow) path
    monkeypatch.setattr(est_mod, "codecarbon_estimate", lambda ram: called.append(ram) or HostEstimate("cc", 1.0, 2.0))
    assert fast_estimate(True).cpu_model == "cc" and called == [True]
