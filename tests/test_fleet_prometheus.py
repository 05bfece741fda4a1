"""The fleet import against a real Prometheus (Debian's package) on 127.0.0.1, over a TSDB backfilled by
promtool from DCGM-format series generated from real NVML power logs (../shared/data/power):
3 nodes, 10 GPUs, 9 jobs, a counter reset, a GPU that disappears, a node without the job label, a GPU
with only the power gauge, node-exporter RAPL on two nodes, a job known from its label only."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.request
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from footprint.errors import FootprintError
from footprint.fleet import promserver, synthetic
from footprint.fleet.importer import ImportOptions, import_fleet
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.fleet.slurm import parse_sacct
from footprint.fleet.synthetic import Cluster, Gpu, JobSpec, Profile

T0 = datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp()
MIN = 60.0
A100, V100 = "NVIDIA A100-PCIE-40GB", "Tesla V100-SXM2-32GB"

pytestmark = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))


def profile(path: Path) -> Profile:
    """A job's power from a real nvidia-smi log (looped), idle = the log's 1st percentile."""
    from meters.importers import read_nvidia_smi_csv

    df = read_nvidia_smi_csv(path)
    t = df["t_s"].to_numpy(float)
    w = df["power_w"].to_numpy(float)
    return Profile(t - t[0], w, float(np.percentile(w, 1)), str(path))


@pytest.fixture(scope="session")
def cluster(shared: Path) -> Cluster:
    logs = shared / "power" / "gpu-power-benchmark" / "plotting" / "data"
    a = profile(logs / "pwr_update_freq" / "A100_gpudata.csv")  # SC'24 study, A100, 14 ms sampling
    b = profile(logs / "5050" / "A100" / "gpudata.csv")  # the same card under a 50/50 square load
    v = profile(logs / "pwr_update_freq" / "V100_gpudata.csv")
    gpus = [Gpu("gpu-01", i, A100, a, uuid=f"GPU-0001-000{i}") for i in range(4)]
    gpus += [Gpu("gpu-02", i, A100, b, uuid=f"GPU-0002-000{i}") for i in range(4)]
    gpus += [Gpu("gpu-03", i, V100, v, uuid=f"GPU-0003-000{i}") for i in range(2)]
    gpus[3].gone_at = T0 + 80 * MIN  # gpu-01:3 falls off the bus during job 1002
    gpus[5].reset_at = T0 + 30 * MIN + 7  # gpu-02:1 driver reload during array task 1003_1
    gpus[9].counter = False  # gpu-03:1 exports only DCGM_FI_DEV_POWER_USAGE
    at = lambda m: T0 + m * MIN  # noqa: E731
    jobs = [
        JobSpec("1001", at(10), at(50), [("gpu-01", i) for i in range(4)], user="alice", account="proj-a", gres_type="a100"),
        JobSpec("1002", at(60), at(100), [(h, i) for h in ("gpu-01", "gpu-02") for i in range(4)], user="bob", account="proj-b"),
        JobSpec("1003_1", at(5), at(45), [("gpu-02", 0), ("gpu-02", 1)], user="carol", account="proj-c", raw_id="1010"),
        JobSpec(
            "1003_2", at(5), at(45), [("gpu-02", 2), ("gpu-02", 3)], user="carol", account="proj-c", raw_id="1011", state="FAILED"
        ),
        JobSpec("1004", at(20), at(70), [("gpu-03", 0), ("gpu-03", 1)], user="dave", account="proj-d", partition="v100"),
        JobSpec("1005", at(80), None, [("gpu-03", 1)], user="erin", account="proj-e", partition="v100"),
        JobSpec("2001", at(105), None, [("gpu-02", 2), ("gpu-02", 3)], user="?", account="?"),  # not in sacct
    ]
    c = Cluster(
        T0, T0 + 120 * MIN, gpus, jobs, scrape_s=15.0, fine_s=0.1, unlabelled_hosts={"gpu-03"}, cpu_hosts={"gpu-01", "gpu-02"}
    )
    c.extra_sacct_lines = [
        "1006|1006|queued|erin|proj-e|gpu|None|2025-03-03T08:30:00|00:00:00||None assigned|CANCELLED by 1000|",
        "1007|1007|prep|frank|proj-f|cpu|2025-03-03T08:00:00|2025-03-03T08:30:00|00:30:00|billing=4,cpu=4,mem=16G,node=1|cpu-01|COMPLETED|",
    ]
    return c


def sacct_of(c: Cluster) -> str:
    text = synthetic.sacct_text(c)
    return "\n".join(line for line in text.splitlines() if not line.startswith("2001")) + "\n"


@pytest.fixture(scope="session")
def blocks(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's series as TSDB blocks (promtool), copied for each server that serves them."""
    d = tmp_path_factory.mktemp("blocks")
    synthetic.write_openmetrics(cluster, d / "metrics.om")
    return promserver.backfill(d / "metrics.om", d / "tsdb")


def _tsdb_copy(blocks: Path, to: Path) -> Path:
    import shutil

    return Path(shutil.copytree(blocks, to))


@pytest.fixture(scope="session")
def prom(blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with promserver.serve(_tsdb_copy(blocks, tmp_path_factory.mktemp("prom") / "tsdb")) as url:
        yield url


@pytest.fixture(scope="session")
def fleet(cluster: Cluster, prom: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet") / "fleet"
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    import_fleet(
        out,
        ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site={"grid": "FRA", "pue": 1.2}, exact=True),
    )
    return out


def _index(fleet: Path) -> pd.DataFrame:
    return pd.read_parquet(fleet / "ledger").set_index("job_id")


def _series(fleet: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted((fleet / "series").glob("*.parquet"))], ignore_index=True)


def _record(fleet: Path, job: str) -> dict[str, Any]:
    return json.loads((fleet / "jobs" / job / "run.json").read_text())


# ---- what the import found ---------------------------------------------------------------------------


def test_one_record_per_job_with_slurm_metadata(fleet: Path) -> None:
    idx = _index(fleet)
    assert set(idx.index) == {"1001", "1002", "1003_1", "1003_2", "1004", "1005", "2001"}
    assert idx.loc["1001", "user"] == "alice" and idx.loc["1003_2", "state"] == "FAILED"
    assert idx.loc["2001", "source"] == "label" and "label only" in idx.loc["2001", "notes"]
    assert idx.loc["1001", "gpu_model"] == "a100-pcie-40gb" and idx.loc["1004", "gpu_model"] == "v100-sxm2-32gb"
    assert idx.loc["1005", "duration_s"] == pytest.approx(40 * MIN)  # running: cut at the window's end
    meta = json.loads((fleet / "fleet.json").read_text())
    assert meta["telemetry"]["labelled_nodes"] == ["gpu-01", "gpu-02"] and meta["telemetry"]["unlabelled_nodes"] == ["gpu-03"]
    assert any("1006" in s and "never started" in s for s in meta["skipped"])
    assert any("CPU-only" in s for s in meta["skipped"])


def test_job_energy_is_the_sum_of_its_series(fleet: Path) -> None:
    s = _series(fleet)
    idx = _index(fleet)
    per_job = s[s["job"] >= 0].groupby("job_id", observed=True)["energy_j"].sum()
    for job, row in idx.iterrows():
        rec = _record(fleet, job)
        gpu = sum(d["energy_j"] for d in rec["devices"] if d["component"] == "gpu" and d["energy_j"] is not None)
        cpu = sum(d["energy_j"] for d in rec["devices"] if d["component"] in ("cpu", "ram"))
        assert rec["energy"]["gpu_j"] == pytest.approx(gpu, rel=1e-12) == pytest.approx(row.gpu_energy_j, rel=1e-12)
        assert per_job[job] == pytest.approx(gpu + cpu, rel=1e-9)


def test_each_gpu_second_counted_once_and_nothing_lost(fleet: Path, cluster: Cluster) -> None:
    s = _series(fleet)
    gpus = pd.read_parquet(fleet / "gpus.parquet")
    # per device: allocated + unallocated + gap = what the meter measured in the window
    by_dev = s.groupby("dev")["energy_j"].sum()
    for _, g in gpus.iterrows():
        assert by_dev.get(g.device, 0.0) == pytest.approx(g.energy_j, rel=1e-9, abs=1e-6)
    # no interval gives more than its own length or energy to jobs
    alloc = s[s["job"] >= 0].groupby(["dev", "t0", "t1"])[["seconds"]].sum().reset_index()
    assert (alloc["seconds"] <= (alloc["t1"] - alloc["t0"]) + 1e-6).all()
    whole = s.groupby(["dev", "t0", "t1"])["seconds"].sum().reset_index()
    span = np.minimum(whole["t1"], cluster.end) - np.maximum(whole["t0"], cluster.start)
    assert np.allclose(whole["seconds"], span, atol=1e-6)
    # the window's GPU energy, as the counters saw it, against the true integral of the real power logs
    lost = sum(cluster.lost_to_resets_j(g) for g in cluster.gpus)
    counters = gpus[(gpus.component == "gpu") & (gpus.kind == "dcgm_energy_counter")]
    truth = sum(cluster.energy_j(g, cluster.start, min(cluster.end, g.gone_at or cluster.end)) for g in cluster.gpus if g.counter)
    assert counters.energy_j.sum() == pytest.approx(truth - lost, rel=2e-3)


def test_job_energy_matches_the_real_power_logs(fleet: Path, cluster: Cluster) -> None:
    idx = _index(fleet)
    truth = cluster.truth()
    g = {x.key: x for x in cluster.gpus}
    gone = g[("gpu-01", 3)]
    expected = dict(truth)
    expected["1003_1"] -= cluster.lost_to_resets_j(g[("gpu-02", 1)])
    expected["1002"] -= cluster.energy_j(gone, gone.gone_at, cluster.jobs[1].end)  # not measured after it vanished
    for job in ("1001", "1002", "1003_1", "1003_2", "1004"):  # energy counters: edges within one scrape interval
        assert idx.loc[job, "gpu_energy_j"] == pytest.approx(expected[job], rel=5e-3), job
    # 1005 holds the GPU with only the power gauge: 15 s samples of a fast-moving V100 trace, trapezoid
    assert idx.loc["1005", "gpu_energy_j"] == pytest.approx(expected["1005"], rel=0.02)


def test_counter_reset_is_handled_like_increase(fleet: Path, cluster: Cluster) -> None:
    rec = _record(fleet, "1003_1")
    assert any("counter reset 1 time" in n for n in rec["notes"])
    dev = next(d for d in rec["devices"] if d["index"] == 1)
    reset_gpu = next(x for x in cluster.gpus if x.key == ("gpu-02", 1))
    job = cluster.jobs[2]
    true = cluster.energy_j(reset_gpu, job.start, job.end)
    assert 0 < true - dev["energy_j"] <= cluster.lost_to_resets_j(reset_gpu) * 1.05 + 0.005 * true


def test_gpu_that_disappears_lowers_coverage_and_says_so(fleet: Path) -> None:
    rec = _record(fleet, "1002")
    assert any("gpu-01:gpu3 stopped reporting" in n for n in rec["notes"])
    cov = rec["telemetry"]["coverage"]
    assert cov == pytest.approx(1 - (20 / 40) / 8, abs=0.01)
    assert any("lower bound" in n for n in rec["notes"])


def test_node_without_job_label_falls_back_to_slurm(fleet: Path) -> None:
    r4, r5 = _record(fleet, "1004"), _record(fleet, "1005")
    assert any("held all its 2 GPUs" in n for n in r4["notes"])
    assert any("inferred as the busiest free ones" in n and "gpu-03:gpu1" in n for n in r5["notes"])
    assert [d["index"] for d in r5["devices"] if d["component"] == "gpu"] == [1]
    methods = {d["index"]: d["method"] for d in r4["devices"] if d["component"] == "gpu"}
    assert methods == {0: "dcgm_energy_counter", 1: "dcgm_power_gauge"}
    assert any("host CPU/RAM energy not measured" in n for n in r4["notes"])


def test_host_cpu_from_rapl_is_shared_by_gpu_share(fleet: Path) -> None:
    r = _record(fleet, "1002")
    cpu = {d["host"]: d["energy_j"] for d in r["devices"] if d["component"] == "cpu"}
    assert set(cpu) == {"gpu-01", "gpu-02"} and all(v > 0 for v in cpu.values())
    # 40 min of a node at 95 W + 22 W per busy GPU, the whole node held: ~ (95 + 4 x 22) W x 2400 s
    assert cpu["gpu-02"] == pytest.approx((95 + 4 * 22) * 2400, rel=0.05)


def test_prometheus_increase_agrees_with_the_import(fleet: Path, prom: str, cluster: Cluster) -> None:
    """PromQL's own increase() over the job's labelled series (what jobstats-style tools do) agrees within its
    edge extrapolation; query_range answers the same server."""
    client = PrometheusClient(PromConfig(prom))
    end = cluster.jobs[0].end
    data = client.query('sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{hpc_job="1001"}[40m]))', at=end + 15)
    promql_j = float(data["result"][0]["value"][1]) / 1000
    assert promql_j == pytest.approx(_index(fleet).loc["1001", "gpu_energy_j"], rel=0.02)
    rng = client.query_range('sum(DCGM_FI_DEV_POWER_USAGE{Hostname="gpu-01"})', cluster.start, cluster.start + 600, 60)
    assert rng["resultType"] == "matrix" and len(rng["result"][0]["values"]) == 11


# ---- assessing every job -----------------------------------------------------------------------------


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=cwd)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in this process (cheaper than a subprocess): exit code, stdout, stderr."""
    from footprint.cli.app import main

    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_record_assesses_and_the_report_sums_them(fleet: Path, tmp_path: Path) -> None:
    import footprint
    from footprint.fleet.report import build_report

    idx = _index(fleet)
    per_job = {job: footprint.assess(fleet / "jobs" / job, samples=0) for job in idx.index}
    rep = build_report(fleet, by="user")
    assert rep.totals.jobs == len(idx)
    for k in ("climate_change", "human_toxicity_cancer", "resource_use_minerals_metals", "water_use"):
        assert rep.totals.impacts[k] == pytest.approx(sum(a[k].total for a in per_job.values()), rel=1e-9)
    carol = next(g for g in rep.groups if g.label == "carol")
    assert carol.impacts["climate_change"] == pytest.approx(
        per_job["1003_1"]["climate_change"].total + per_job["1003_2"]["climate_change"].total, rel=1e-9
    )
    assert carol.gpu_hours == pytest.approx(per_job["1003_1"].workload.gpu_hours + per_job["1003_2"].workload.gpu_hours)
    assert rep.unallocated is not None and 0 < rep.unallocated_share["gpu_time"] < 1
    assert rep.top_jobs[0]["job_id"] == max(per_job, key=lambda j: per_job[j]["climate_change"].total)


def test_cli_import_and_report_end_to_end(
    prom: str, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sacct.txt").write_text(sacct_of(cluster))
    window = ["--start", "2025-03-03T08:00:00Z", "--end", "2025-03-03T10:00:00Z"]
    site = ["--sacct", "sacct.txt", "--tz", "UTC", "--grid", "FRA", "--pue", "1.2"]
    p = _cli(
        "fleet",
        "import",
        "prometheus",
        "--url",
        prom,
        *window,
        *site,
        "--chunk",
        "45m",
        "--exact",
        "-o",
        "fleet",
        "--quiet",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert "wrote fleet: 7 jobs" in p.stdout and "unallocated" in p.stdout
    monkeypatch.chdir(tmp_path)
    for by, out in (("user", "f.html"), ("gpu", "f.json"), ("month", "f.csv")):
        code, _, err = _main(capsys, "fleet", "report", "fleet", "--by", by, "-o", out)
        assert code == 0 and err == f"wrote {out}\n", err
    doc = json.loads((tmp_path / "f.json").read_text())
    assert {g["group"] for g in doc["groups"]} == {A100, V100}
    assert len(doc["totals"]["impacts"]) == 17 and doc["totals"]["impacts"]["climate_change"]["total"] > 0
    a = json.loads(_main(capsys, "assess", "fleet/jobs/1001", "--format", "json", "--samples", "0")[1])
    top = next(j for j in doc["top_jobs"] if j["job_id"] == "1001")
    assert top["climate_change_kg"] == pytest.approx(a["impacts"]["climate_change"]["total"], rel=1e-9)
    csv = (tmp_path / "f.csv").read_text().splitlines()
    assert csv[0].startswith("row,month,jobs,gpu_hours") and csv[1].startswith("group,2025-03,7,")
    html = (tmp_path / "f.html").read_text()
    assert "All 16 EF 3.1 categories" in html and "(unallocated)" in html and "carol" in html
    # a chunk of 45 min gives the same jobs and energies as the default 6 h
    ref = _index_from(tmp_path / "fleet")
    assert set(ref.index) == {"1001", "1002", "1003_1", "1003_2", "1004", "1005", "2001"}


def _index_from(p: Path) -> pd.DataFrame:
    return pd.read_parquet(p / "ledger").set_index("job_id")


def test_chunk_size_does_not_change_the_result(fleet: Path, prom: str, cluster: Cluster, tmp_path: Path) -> None:
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    opts = ImportOptions(
        cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site={"grid": "FRA", "pue": 1.2}, chunk_s=17 * MIN, exact=True
    )
    seen: dict[str, list[tuple[int | None, int]]] = {}
    import_fleet(tmp_path / "f2", opts, progress=lambda phase, total, k: seen.setdefault(phase, []).append((total, k)))
    a, b = _index(fleet), _index_from(tmp_path / "f2")
    assert np.allclose(a.loc[b.index, "gpu_energy_j"], b["gpu_energy_j"], rtol=1e-9)
    # the progress bar: one step per chunk fetched, then per chunk attributed
    n = len(range(0, int(cluster.end - cluster.start + 600), 17 * 60))
    assert seen["fetching"][0] == (n, 0) and sum(k for _, k in seen["fetching"]) == n
    assert sum(k for _, k in seen["attributing"]) == n


def test_power_gauge_alone_when_no_gpu_has_the_counter(prom: str, cluster: Cluster, tmp_path: Path) -> None:
    """An exporter configured without DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: every GPU from the gauge, and said so."""
    from footprint.fleet.telemetry import DcgmNames

    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    names = DcgmNames(energy_metric="DCGM_FI_DEV_NOT_EXPORTED")
    import_fleet(
        tmp_path / "g", ImportOptions(cluster.start, cluster.end, PromConfig(prom), names=names, sacct=sacct, exact=True)
    )
    idx = _index_from(tmp_path / "g")
    assert set(idx["energy_method"]) == {"dcgm_power_gauge"}
    truth = cluster.truth()
    assert idx.loc["1001", "gpu_energy_j"] == pytest.approx(truth["1001"], rel=0.02)
    meta = json.loads((tmp_path / "g" / "fleet.json").read_text())
    assert any("DCGM_FI_DEV_NOT_EXPORTED missing for GPUs on gpu-01, gpu-02, gpu-03" in n for n in meta["notes"])


# ---- bad input: one clear error, nothing written -------------------------------------------------------


def _fails(args: list[str], tmp_path: Path, pattern: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, *args, "-o", str(tmp_path / "out"), "--quiet")
    assert code == 2, (out, err)
    assert pattern in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not [x for x in tmp_path.iterdir() if x.name.startswith(".out")]


def test_unknown_metric_and_empty_window_are_clear_errors(prom: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["fleet", "import", "prometheus", "--url", prom]
    window = ["--start", "2025-03-03T08:00:00Z", "--end", "2025-03-03T10:00:00Z"]
    _fails(
        base + window + ["--energy-metric", "DCGM_NOPE", "--power-metric", "DCGM_NOPE_W"],
        tmp_path,
        "no series of DCGM_NOPE",
        capsys,
    )
    _fails(base + ["--start", "2019-01-01T00:00:00Z", "--end", "2019-01-02T00:00:00Z"], tmp_path, "no series of", capsys)
    _fails(base + window + ["--selector", 'Hostname=~"("'], tmp_path, "bad_data", capsys)  # a bad regex: the server's


def test_the_sacct_file_is_read_while_the_server_lists_its_series(
    cluster: Cluster, prom: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI reads --sacct in a thread while discovery asks the server for its series: a reading that waits for
    discovery to begin finishes (read first, as it was, it waits 20 s and fails). The ledger is the one an import
    given the parsed file writes."""
    from footprint.fleet import aggregate, slurm

    listing = threading.Event()
    discover, read = aggregate.discover, slurm.read_sacct

    def discovering(*a: Any, **k: Any) -> Any:
        listing.set()
        return discover(*a, **k)

    def reading(*a: Any, **k: Any) -> Any:
        assert listing.wait(20), "the sacct file was read before the server was asked anything"
        return read(*a, **k)

    monkeypatch.setattr(aggregate, "discover", discovering)
    monkeypatch.setattr(slurm, "read_sacct", reading)
    path = tmp_path / "sacct.txt"
    path.write_text(sacct_of(cluster))
    window = [f"{cluster.start:.0f}", f"{cluster.end:.0f}"]
    args = ["fleet", "import", "prometheus", "--url", prom, "--start", window[0], "--end", window[1], "--sacct", str(path)]
    code, _, err = _main(capsys, *args, "--tz", "UTC", "-o", str(tmp_path / "cli"), "--quiet")
    assert code == 0 and listing.is_set(), err
    sacct = read(path, UTC)
    import_fleet(tmp_path / "api", ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct))
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        a, b = (pd.read_parquet(tmp_path / d / name) for d in ("cli", "api"))
        pd.testing.assert_frame_equal(a, b)


def test_a_bad_sacct_file_is_one_clear_error_before_or_after_the_server_is_asked(
    prom: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file is refused before anything is asked (a server that is not there is never reached); one that
    does not parse, once the server has listed its series: the same one-line error naming the file, nothing written."""
    window = ["--start", "2025-03-03T08:00:00Z", "--end", "2025-03-03T10:00:00Z"]
    nowhere = ["fleet", "import", "prometheus", "--url", "http://127.0.0.1:9", "--retries", "0"]
    _fails(nowhere + window + ["--sacct", str(tmp_path / "missing.txt")], tmp_path, "missing.txt", capsys)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00 not sacct output\n")
    _fails(["fleet", "import", "prometheus", "--url", prom, *window, "--sacct", str(bad)], tmp_path, "bad.txt", capsys)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    _fails(["fleet", "import", "prometheus", "--url", prom, *window, "--sacct", str(empty)], tmp_path, "empty.txt", capsys)


INJECTIONS = [
    'a="b"} or vector(1) or {c="d"',  # closes our braces, adds a series to every answer
    'a="b"} or vector(1)',
    'a="b" or vector(1)',
    '{{a="b"}}',
    'a="b"}',
    '{a="b"',
    'a="b"\nc="d"',
    'a="b\nc"',
    "a=b",
    "a='b'",
    '1a="b"',
    'a=="b"',
    'a="b" c="d"',
    'a="b",,c="d"',
    'a="b\\"',  # the closing quote escaped: the value never ends
]


@pytest.mark.parametrize("selector", INJECTIONS)
@pytest.mark.parametrize("cmd", [["fleet", "import", "prometheus"], ["serving", "import", "prometheus"]])
def test_a_selector_that_is_not_matchers_is_refused_before_any_request(
    cmd: list[str], selector: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--selector goes inside the braces of every query: anything but ``label op "value"`` matchers is refused
    (nothing listens on port 9: a request would fail as 'cannot reach')."""
    window = ["--start", "now-1h", "--end", "now", "-o", str(tmp_path / "out")]
    code, _, err = _main(capsys, *cmd, "--url", "http://127.0.0.1:9", "--retries", "0", *window, "--selector", selector)
    assert code == 2 and "--selector: expected label matchers" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("selector", "matchers"),
    [
        ("", ""),
        ("{}", ""),
        ('cluster="a"', 'cluster="a"'),
        ('{ cluster = "a" , ns!~"test|dev", }', 'cluster="a",ns!~"test|dev"'),
        ('a="x\\"} or vector(1)"', 'a="x\\"} or vector(1)"'),  # an escaped quote: still one value
        ('_x=~"\\\\d+"', '_x=~"\\\\d+"'),
    ],
)
def test_selector_matchers_keep_what_promql_accepts(selector: str, matchers: str) -> None:
    from footprint.fleet.promql import selector_matchers
    from footprint.fleet.telemetry import DcgmNames

    assert selector_matchers(selector) == matchers
    assert DcgmNames(selector=selector).matchers() == ("{" + matchers + "}" if matchers else "")


def test_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = promserver.free_port()
    args = [
        "fleet",
        "import",
        "prometheus",
        "--url",
        f"http://127.0.0.1:{port}",
        "--start",
        "now-1h",
        "--end",
        "now",
        "--retries",
        "1",
    ]
    _fails(args, tmp_path, "cannot reach http://127.0.0.1", capsys)


GARBAGE = {  # answers no Prometheus gives (a proxy, a damaged cache): one clear error or what is usable, never a traceback
    "list": b"[1, 2, 3]",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "junk-series": json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [1, "x", {"metric": 5}, {"metric": {"Hostname": "n"}, "values": [[1, "abc"], ["x", None], [2], 7]}],
            },
        }
    ).encode(),
}


class Stub(http.server.BaseHTTPRequestHandler):
    """Answers with a fixed status (or forwards to the real server after `fail` failures); records headers."""

    mode: str = "500"
    fail: int = 0
    upstream: str = ""
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802
        Stub.seen.append(dict(self.headers))
        if Stub.mode == "forward" and Stub.fail <= 0:
            with urllib.request.urlopen(Stub.upstream + self.path) as r:
                body, code = r.read(), r.status
        elif Stub.mode == "forward":
            Stub.fail -= 1
            body, code = b"upstream busy", 503
        elif Stub.mode == "html":
            body, code = b"<html>login</html>", 200
        elif Stub.mode in GARBAGE:
            body, code = GARBAGE[Stub.mode], 200
        else:
            code = int(Stub.mode)
            body = json.dumps({"status": "error", "errorType": "x", "error": f"stub {code}"}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def stub(prom: str) -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    Stub.upstream, Stub.seen, Stub.fail = prom, [], 0
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.mark.parametrize(
    "mode,pattern",
    [
        ("500", "answered HTTP 500: stub 500 (after 2 attempts)"),
        ("404", "not a Prometheus API here"),
        ("401", "HTTP 401"),
        ("html", "not a JSON answer"),
        ("list", "not a JSON answer"),
        ("deep", "not a JSON answer"),
    ],
)
def test_http_errors(stub: str, tmp_path: Path, mode: str, pattern: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stub.mode = mode
    args = ["fleet", "import", "prometheus", "--url", stub, "--start", "now-1h", "--end", "now", "--retries", "1"]
    _fails(args, tmp_path, pattern, capsys)


def test_a_foreign_answer_is_never_a_traceback(stub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Stub.mode = "junk-series"
    args = ["fleet", "import", "prometheus", "--url", stub, "--start", "now-1h", "--end", "now", "--retries", "1"]
    code, _, err = _main(capsys, *args, "-o", str(tmp_path / "out"), "--quiet")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def test_retries_on_5xx_then_succeeds_and_sends_credentials(stub: str, cluster: Cluster, tmp_path: Path) -> None:
    Stub.mode, Stub.fail = "forward", 2
    (tmp_path / "token").write_text("s3cret\n")
    cfg = PromConfig(stub, retries=3, bearer_token_file=str(tmp_path / "token"), headers={"X-Scope-OrgID": "team-a"})
    s = import_fleet(
        tmp_path / "f", ImportOptions(cluster.start, cluster.end, cfg, sacct=parse_sacct(sacct_of(cluster), UTC, "s"), exact=True)
    )
    assert s.jobs == 7
    assert all(h.get("Authorization") == "Bearer s3cret" and h.get("X-Scope-OrgID") == "team-a" for h in Stub.seen)
    Stub.seen = []
    (tmp_path / "pw").write_text("pa55")
    PrometheusClient(PromConfig(stub, basic_auth_user="ops", basic_auth_password_file=str(tmp_path / "pw"))).buildinfo()
    assert Stub.seen[-1]["Authorization"] == "Basic b3BzOnBhNTU="  # base64("ops:pa55")


def test_secrets_files_must_exist(tmp_path: Path) -> None:
    with pytest.raises(FootprintError, match="cannot read the bearer token file"):
        PrometheusClient(PromConfig("http://127.0.0.1:1", bearer_token_file=str(tmp_path / "none")))
    with pytest.raises(FootprintError, match="expected an http"):
        PrometheusClient(PromConfig("127.0.0.1:9090"))


def test_existing_output_is_kept_unless_overwrite(fleet: Path, prom: str, cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "f"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FootprintError, match="not empty"):
        import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom)))
    assert (out / "keep.txt").read_text() == "mine"
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), overwrite=True))
    assert not (out / "keep.txt").exists() and (out / "ledger").is_dir()
    # without sacct, jobs come from the labels alone; the unlabelled node's energy stays unallocated
    idx = _index_from(out)
    assert set(idx["source"]) == {"label"} and "1004" not in idx.index
    assert {"1010", "1011"} <= set(idx.index)  # array tasks known by their raw ids
    assert os.listdir(tmp_path) == ["f"]


# ---- a deployment's Prometheus: TLS and basic auth ------------------------------------------------------


def _certificates(d: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def builder(subject: str, issuer: x509.Name, public_key: Any, serial: int) -> x509.CertificateBuilder:
        return x509.CertificateBuilder(
            issuer_name=issuer,
            subject_name=name(subject),
            public_key=public_key,
            serial_number=serial,
            not_valid_before=now - dt.timedelta(minutes=5),
            not_valid_after=now + dt.timedelta(days=1),
        )

    ca = (
        builder("footprint test CA", name("footprint test CA"), ca_key.public_key(), 1)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        builder("127.0.0.1", ca.subject, key.public_key(), 2)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "server.pem").write_bytes(cert.public_bytes(pem))
    (d / "server.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return d / "ca.pem", d / "server.pem", d / "server.key"


@pytest.fixture(scope="module")
def secured(blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Prometheus behind TLS (a private CA) and basic auth (user fleet, a bcrypt-hashed password), as a
    deployment runs it with --web.config.file."""
    bcrypt = pytest.importorskip("bcrypt", reason="bcrypt hashes the test server's password: pip install -e '.[dev]'")
    d = tmp_path_factory.mktemp("secured")
    ca, cert, key = _certificates(d)
    (d / "password").write_text("s3cret-pass\n")
    (d / "wrong").write_text("guess\n")
    users = {"fleet": bcrypt.hashpw(b"s3cret-pass", bcrypt.gensalt(rounds=4)).decode()}
    with promserver.serve(_tsdb_copy(blocks, d / "tsdb"), tls=(str(cert), str(key)), users=users) as url:
        yield url, d


def test_import_over_tls_with_basic_auth_matches_plain_http(
    secured: tuple[str, Path], fleet: Path, cluster: Cluster, tmp_path: Path
) -> None:
    url, d = secured
    assert url.startswith("https://")
    cfg = PromConfig(url, ca_file=str(d / "ca.pem"), basic_auth_user="fleet", basic_auth_password_file=str(d / "password"))
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    out = tmp_path / "tls"
    import_fleet(out, ImportOptions(cluster.start, cluster.end, cfg, sacct=sacct, site={"grid": "FRA", "pue": 1.2}, exact=True))
    over_tls, plain = _index(out), _index(fleet)
    assert list(over_tls.index) == list(plain.index)
    assert np.allclose(over_tls["gpu_energy_j"], plain["gpu_energy_j"], rtol=1e-12)


def test_tls_and_auth_failures_are_one_clear_error(secured: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    url, d = secured
    auth = {"basic_auth_user": "fleet", "basic_auth_password_file": str(d / "password")}
    with pytest.raises(FootprintError, match=r"TLS error talking to https://\S+: certificate verify failed: .* --ca-file"):
        PrometheusClient(PromConfig(url, retries=0, **auth)).buildinfo()  # the private CA is not trusted by default
    wrong = {"basic_auth_user": "fleet", "basic_auth_password_file": str(d / "wrong")}
    with pytest.raises(FootprintError, match="HTTP 401.*--basic-auth-user"):
        PrometheusClient(PromConfig(url, ca_file=str(d / "ca.pem"), retries=0, **wrong)).buildinfo()
    with pytest.raises(FootprintError, match="HTTP 401"):
        PrometheusClient(PromConfig(url, ca_file=str(d / "ca.pem"), retries=0)).buildinfo()  # no credentials
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once on stderr, not by urllib3 on every request
        info = PrometheusClient(PromConfig(url, insecure_skip_verify=True, **auth)).buildinfo()  # opted out
    assert info.get("version") and "is not verified" in capsys.readouterr().err
