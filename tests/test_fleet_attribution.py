"""The join rules on hand-made intervals: shared GPUs, label changes, gaps, SLURM claims, host meters."""

from __future__ import annotations

import numpy as np
import pytest

from footprint.fleet.attribution import GAP, UNALLOCATED, Activity, Job, LabelStats, Plan, Totals, attribute
from footprint.fleet.telemetry import CPU, GPU_COUNTER, Chunk, Device, Telemetry, _merge, short_host


def _tel(labels: list[str], devices: list[Device]) -> Telemetry:
    t = Telemetry(devices=devices, labels=["", *labels])
    return t


def _chunk(
    dev: list[int], t0: list[float], t1: list[float], e: list[float], lab0: list[int], lab1: list[int], gap: list[bool]
) -> Chunk:
    return Chunk(
        np.array(dev, np.int32),
        np.array(t0, float),
        np.array(t1, float),
        np.array(e, float),
        np.array(lab0, np.int32),
        np.array(lab1, np.int32),
        np.array(gap, bool),
    )


def _run(tel: Telemetry, c: Chunk, window: tuple[float, float], jobs: list | None = None) -> tuple[Plan, dict, Totals]:  # noqa: ANN001
    stats, act = LabelStats(), Activity(*window)
    gpu = np.array([d.kind == GPU_COUNTER for d in tel.devices])
    stats.add(c, gpu)
    act.add(c, gpu)
    plan = Plan(tel, window)
    plan.build(jobs, stats, act, now=window[1])
    totals = Totals(len(tel.devices))
    rows = attribute(c, plan, totals)
    return plan, rows, totals


def _by_job(plan: Plan, rows: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for j, e in zip(rows["job"].tolist(), rows["energy_j"].tolist(), strict=True):
        key = plan.jobs[j].key if j >= 0 else ("gap" if j == GAP else "unallocated")
        out[key] = out.get(key, 0.0) + e
    return out


def test_a_gpu_shared_by_two_jobs_is_split_evenly_and_counted_once() -> None:
    """dcgm-exporter repeats a shared GPU's metric once per job in the mapping file: one sample, two labels."""
    tel = _tel([], [Device(0, GPU_COUNTER, "n1", "n1/gpu0", 0, labelled=True)])
    a, b = tel.label_id("7"), tel.label_id("8")
    t = np.array([0.0, 10.0, 20.0])
    merged_t, v, lab = _merge([(t, np.array([0.0, 5.0, 9.0]), a), (t, np.array([0.0, 5.0, 9.0]), b)], tel)
    assert merged_t.tolist() == [0.0, 10.0, 20.0] and v.tolist() == [0.0, 5.0, 9.0]
    assert {tel.labels[x] for x in lab} == {"7,8"}
    c = _chunk([0, 0], [0, 10], [10, 20], [5, 4], list(lab[:2]), list(lab[1:]), [False, False])
    plan, rows, totals = _run(tel, c, (0, 20))
    got = _by_job(plan, rows)
    assert got == pytest.approx({"7": 4.5, "8": 4.5})
    assert totals.dev_alloc_energy[0] == pytest.approx(9.0) == totals.dev_energy[0]


def test_label_change_split_and_gap() -> None:
    tel = _tel(["1", "2"], [Device(0, GPU_COUNTER, "n1", "n1/gpu0", 0, labelled=True)])
    # (0,10] job 1; (10,20] changes 1 -> 2 (no SLURM window: half each); (20,30] unlabelled -> unallocated;
    # (30,400] long gap 0 -> 2: energy counted, given to nobody; (400,410] job 2
    c = _chunk(
        [0] * 5,
        [0, 10, 20, 30, 400],
        [10, 20, 30, 400, 410],
        [10, 10, 10, 50, 10],
        [1, 1, 2, 0, 2],
        [1, 2, 0, 2, 2],
        [0, 0, 0, 1, 0],
    )
    plan, rows, totals = _run(tel, c, (0, 410))
    got = _by_job(plan, rows)
    assert got == pytest.approx({"1": 15.0, "2": 5.0 + 5.0 + 10.0, "unallocated": 5.0 + 0.0, "gap": 50.0})
    assert sum(got.values()) == pytest.approx(90.0)
    assert totals.dev_gap_energy[0] == 50.0


def test_slurm_window_splits_label_changes_by_time() -> None:
    from footprint.fleet.slurm import Allocation, SlurmJob

    tel = _tel(["5"], [Device(0, GPU_COUNTER, "n1", "n1/gpu0", 0, labelled=True)])
    sj = SlurmJob("5", None, "x", "u", "a", "p", "COMPLETED", 14.0, 30.0, 16.0, [Allocation(("n1",), (1,), None)])
    # the job starts at 14 s inside (10, 20]: it gets 60 % of that interval
    c = _chunk([0, 0, 0], [0, 10, 20], [10, 20, 30], [10, 10, 10], [0, 0, 1], [0, 1, 1], [0, 0, 0])
    plan, rows, _ = _run(tel, c, (0, 30), [sj])
    got = _by_job(plan, rows)
    assert got["5"] == pytest.approx(6.0 + 10.0) and got["unallocated"] == pytest.approx(14.0)


def test_unlabelled_node_claims_busiest_gpus_and_host_meter_shares() -> None:
    from footprint.fleet.slurm import Allocation, SlurmJob

    devs = [Device(i, GPU_COUNTER, "n2", f"n2/gpu{i}", i) for i in range(4)] + [Device(4, CPU, "n2", "n2/rapl")]
    tel = _tel([], devs)
    sj = SlurmJob("9", None, "x", "u", "a", "p", "COMPLETED", 100.0, 200.0, 100.0, [Allocation(("n2",), (2,), None)])
    energy = [1.0, 30.0, 2.0, 25.0]  # GPUs 1 and 3 are busy during the job
    n = 10
    dev, t0, t1, e = [], [], [], []
    for d in range(4):
        for k in range(n):
            dev.append(d)
            t0.append(100.0 + 10 * k)
            t1.append(110.0 + 10 * k)
            e.append(energy[d])
    for k in range(n):  # the node's CPU counter
        dev.append(4)
        t0.append(100.0 + 10 * k)
        t1.append(110.0 + 10 * k)
        e.append(8.0)
    z = [0] * len(dev)
    plan, rows, _ = _run(tel, _chunk(dev, t0, t1, e, z, z, [False] * len(dev)), (100, 200), [sj])
    assert sorted(c.job for d in (1, 3) for c in plan.claims[d]) == [0, 0]
    assert 0 not in plan.claims and 2 not in plan.claims
    job = rows["job"] == 0
    gpu = job & (rows["dev"] < 4)
    assert rows["energy_j"][gpu].sum() == pytest.approx(10 * (30 + 25))
    cpu = job & (rows["dev"] == 4)
    assert rows["energy_j"][cpu].sum() == pytest.approx(10 * 8.0 * 2 / 4)  # half the node's GPUs
    assert rows["energy_j"][(rows["dev"] == 4) & (rows["job"] == UNALLOCATED)].sum() == pytest.approx(40.0)
    assert any("inferred as the busiest free ones" in n for n in plan.jobs[0].notes)


def test_window_edges_clip_intervals() -> None:
    tel = _tel(["1"], [Device(0, GPU_COUNTER, "n1", "n1/gpu0", 0, labelled=True)])
    c = _chunk([0, 0], [-10, 90], [10, 110], [20, 20], [1, 1], [1, 1], [0, 0])
    plan, rows, totals = _run(tel, c, (0, 100))
    assert _by_job(plan, rows) == pytest.approx({"1": 20.0})
    assert totals.dev_seconds[0] == pytest.approx(20.0)


@pytest.mark.parametrize(
    "label,host",
    [("gpu-01.cluster.local", "gpu-01"), ("gpu-01:9100", "gpu-01"), ("10.0.0.5:9100", "10.0.0.5"), ("[fe80::1]:9100", "fe80::1")],
)
def test_short_host(label: str, host: str) -> None:
    assert short_host(label) == host


def test_job_label_only_jobs_get_their_gpus() -> None:
    tel = _tel(["ns/pod-a"], [Device(i, GPU_COUNTER, "n1", f"n1/gpu{i}", i, labelled=True) for i in range(2)])
    c = _chunk([0, 1], [0, 0], [10, 10], [3, 4], [1, 1], [1, 1], [0, 0])
    plan, rows, _ = _run(tel, c, (0, 10))
    job: Job = plan.jobs[0]
    assert (job.key, job.source, job.gpus_by_host) == ("ns/pod-a", "label", {"n1": 2})
