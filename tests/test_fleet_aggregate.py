# ruff: noqa: F811
"""The default import (the server aggregates per job) against the exact import, on a real Prometheus.

The cluster of test_fleet_prometheus (real NVML power logs; a counter reset, a GPU that disappears, a node
without the job label, a GPU with only the power gauge, RAPL, a label-only job; jobs start and end between
scrapes), plus a MIG GPU whose whole-GPU energy counter is repeated on each instance (dcgm-exporter#317),
and a server whose --query.max-samples forces the requests to be split."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pandas as pd
import pytest
from test_fleet_prometheus import MIN, T0, _tsdb_copy, blocks, cluster, fleet, profile, prom, sacct_of  # noqa: F401

from footprint.errors import FootprintError
from footprint.fleet import promql, promserver, synthetic
from footprint.fleet.importer import ImportOptions, import_fleet
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.fleet.slurm import parse_sacct
from footprint.fleet.synthetic import Cluster, Gpu, JobSpec

pytestmark = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))
SITE = {"grid": "FRA", "pue": 1.2}


@pytest.fixture(scope="module")
def agg(cluster: Cluster, prom: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agg") / "fleet"
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site=SITE))
    return out


def _idx(p: Path) -> pd.DataFrame:
    return pd.read_parquet(p / "ledger").set_index("job_id")


def test_aggregated_matches_exact_within_half_a_percent(agg: Path, fleet: Path, cluster: Cluster) -> None:
    a, e = _idx(agg), _idx(fleet)
    assert set(a.index) == set(e.index)
    long = e[e["duration_s"] >= 10 * MIN].index
    assert len(long) == len(e)  # every job here runs 10 min or more
    err = (a.loc[long, "gpu_energy_j"] / e.loc[long, "gpu_energy_j"] - 1).abs()
    assert err.max() < 0.005, err.to_dict()
    # the counter reset (1003_1), the GPU that vanished (1002), the gauge-only GPU (1005), the unlabelled node (1004)
    assert a.loc["1002", "coverage"] == pytest.approx(e.loc["1002", "coverage"], abs=0.01)
    cpu = (a["cpu_energy_j"] / e["cpu_energy_j"] - 1).abs().dropna()
    assert len(cpu) >= 4 and cpu.drop("2001").max() < 0.005
    # 2001 is known from its label only: it began between its first labelled sample and the one before, which the
    # exact import takes as its start; the default import places it inside that interval from the interval's energy
    # (a step from the power before to the job's): within a second of the true start here, so its CPU share differs
    # from the exact one by the exact window's seconds before the true start, and no more
    true = next(j for j in cluster.jobs if j.job_id == "2001")
    assert abs(a.loc["2001", "start"].timestamp() - true.start) < 1.0
    early = (true.start - e.loc["2001", "start"].timestamp()) / e.loc["2001", "duration_s"]
    assert 0 <= early <= cluster.scrape_s / e.loc["2001", "duration_s"] and cpu["2001"] < early + 0.002
    truth = cluster.truth()
    assert all(abs(a.loc[j, "gpu_energy_j"] / truth[j] - 1) < 0.01 for j in ("1001", "1003_2", "1004", "1005"))


def test_jobs_evaluated_in_chunks_give_the_same_ledger(
    agg: Path, cluster: Cluster, prom: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from footprint.fleet import aggregate

    monkeypatch.setattr(aggregate, "CHUNK_JOBS", 2)  # every two jobs evaluated, written and dropped
    out = tmp_path / "fleet"
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site=SITE))
    a, b = _idx(agg), _idx(out)
    assert len(a) >= 6 and list(a.index) == list(b.index)
    pd.testing.assert_series_equal(a["energy_j"], b["energy_j"], rtol=1e-9)
    pd.testing.assert_series_equal(a["coverage"], b["coverage"], rtol=1e-9)
    ga, gb = pd.read_parquet(agg / "gpus.parquet"), pd.read_parquet(out / "gpus.parquet")
    pd.testing.assert_series_equal(ga["allocated_energy_j"], gb["allocated_energy_j"], rtol=1e-9)


def test_no_records_no_series_and_the_ledger_closes_to_the_metered_total(agg: Path, fleet: Path) -> None:
    assert not (agg / "jobs").exists() and not (agg / "series").exists()
    assert _idx(agg)["run_dir"].isna().all()
    per = pd.read_parquet(agg / "job_gpus.parquet")
    idx = _idx(agg)
    gpu = per[per["component"] == "gpu"].groupby("job_id")["energy_j"].sum()
    assert gpu.to_dict() == pytest.approx(idx["gpu_energy_j"].dropna().to_dict(), rel=1e-12)
    g = pd.read_parquet(agg / "gpus.parquet")
    g = g[g["component"] == "gpu"]
    # jobs + unattributed = metered, GPU by GPU
    assert (g["allocated_energy_j"] + g["unallocated_energy_j"]).to_numpy() == pytest.approx(g["energy_j"].to_numpy())
    ex = pd.read_parquet(fleet / "gpus.parquet")
    ex = ex[ex["component"] == "gpu"]
    assert g["energy_j"].sum() == pytest.approx(ex["energy_j"].sum(), rel=0.002)
    meta = json.loads((agg / "fleet.json").read_text())
    assert meta["method"] == "aggregated" and meta["sources"]["prometheus"]["aggregation"]["requests"] >= 1


def test_short_jobs_come_from_raw_samples(cluster: Cluster, prom: str, fleet: Path, tmp_path: Path) -> None:
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    out = tmp_path / "f"
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, exact_below_s=2700))
    a, e = _idx(out), _idx(fleet)
    assert "raw samples" in a.loc["1001", "notes"] and "raw samples" not in (a.loc["1004", "notes"] or "")
    assert a.loc["1001", "gpu_energy_j"] == pytest.approx(e.loc["1001", "gpu_energy_j"], rel=0.002)


def test_split_under_the_servers_sample_limit(
    cluster: Cluster,
    blocks: Path,
    fleet: Path,
    tmp_path: Path,
) -> None:
    """A server that refuses any query holding over 300 samples at once: requests are split until they pass, and
    the result is the same."""
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    with promserver.serve(_tsdb_copy(blocks, tmp_path / "tsdb"), extra=["--query.max-samples=300"]) as url:
        c = PrometheusClient(PromConfig(url, retries=0))
        with pytest.raises(promql.PrometheusLimitError):
            c.query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[2h]", at=cluster.end)
        out = tmp_path / "f"
        import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(url), sacct=sacct, max_samples=1e9))
    meta = json.loads((out / "fleet.json").read_text())
    assert meta["sources"]["prometheus"]["aggregation"]["splits"] > 0
    a, e = _idx(out), _idx(fleet)
    assert (a["gpu_energy_j"] / e["gpu_energy_j"] - 1).abs().max() < 0.005


@pytest.mark.parametrize("activity", [None, (0.6, 0.2)])
def test_mig_counter_repeated_on_every_instance_is_counted_once(
    shared: Path, tmp_path: Path, activity: tuple[float, float] | None
) -> None:
    """dcgm-exporter#317: each MIG instance's series carries the whole GPU's energy counter. Two jobs on two
    instances of one GPU: their sum is the GPU's energy (not twice it), split between them: evenly, or by
    the instances' DCGM_FI_PROF_GR_ENGINE_ACTIVE where the exporter gives it."""
    logs = shared / "power" / "gpu-power-benchmark" / "plotting" / "data"
    a = profile(logs / "pwr_update_freq" / "A100_gpudata.csv")
    gpu = Gpu("mig-01", 0, "NVIDIA A100-SXM4-80GB", a, uuid="GPU-MIG-0")
    jobs = [JobSpec("7001", T0 + 5 * MIN, T0 + 55 * MIN, [("mig-01", 0)]), JobSpec("7002", T0 + 20 * MIN, T0 + 50 * MIN, [])]
    c = Cluster(T0, T0 + 60 * MIN, [gpu], jobs[:1], scrape_s=15.0, fine_s=0.5)
    om = synthetic.openmetrics(c)
    text = "".join(om)
    # the same counter on instances 1 and 2; instance 2 labelled with job 7002 during its window
    lines, out = text.splitlines(), []
    for line in lines:
        if not line.startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{"):
            out.append(line)
            continue
        head, value, ts = line.rsplit(" ", 2)
        base = head.replace(',hpc_job="7001"', "")
        for inst in ("1", "2"):
            lab = base[:-1] + f',GPU_I_ID="{inst}"'
            t = float(ts)
            if inst == "1" and ',hpc_job="7001"' in head:
                lab += ',hpc_job="7001"'
            if inst == "2" and jobs[1].start <= t < jobs[1].end:
                lab += ',hpc_job="7002"'
            out.append(f"{lab}}} {value} {ts}")
            if activity:
                act = activity[int(inst) - 1]
                out.append(f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{Hostname="mig-01",gpu="0",GPU_I_ID="{inst}"}} {act} {ts}')
    om_path = tmp_path / "mig.om"
    om_path.write_text(_sorted_families(out) + "\n")
    tsdb = promserver.backfill(om_path, tmp_path / "tsdb")
    with promserver.serve(tsdb) as url:
        f = tmp_path / "f"
        import_fleet(f, ImportOptions(c.start, c.end, PromConfig(url), names=_no_gauge()))
    idx = _idx(f)
    g = pd.read_parquet(f / "gpus.parquet")
    g = g[g["component"] == "gpu"]
    assert len(g) == 1
    total = c.energy_j(gpu, c.start, c.end)
    assert g["energy_j"].iloc[0] == pytest.approx(total, rel=0.005)  # once, not twice
    both = c.energy_j(gpu, jobs[1].start, jobs[1].end)
    share = 0.5 if activity is None else activity[1] / sum(activity)
    e7001 = c.energy_j(gpu, jobs[0].start, jobs[0].end) - both * share
    assert idx.loc["7002", "gpu_energy_j"] == pytest.approx(both * share, rel=0.01)
    assert idx.loc["7001", "gpu_energy_j"] == pytest.approx(e7001, rel=0.01)
    assert idx["gpu_energy_j"].sum() <= total
    notes = json.loads((f / "fleet.json").read_text())["notes"]
    assert any("split by the instances' activity" in x for x in notes) == (activity is not None)


def _no_gauge() -> object:
    from footprint.fleet.telemetry import DcgmNames

    return DcgmNames(power_metric="", cpu_source="none")


def _sorted_families(lines: list[str]) -> str:
    """OpenMetrics wants each series' samples together and in time order."""
    body = [x for x in lines if x and not x.startswith("#")]
    series: dict[str, list[str]] = {}
    for x in body:
        head = x.rsplit(" ", 2)[0]
        series.setdefault(head, []).append(x)
    families: dict[str, list[str]] = {}
    for head, xs in series.items():
        families.setdefault(head.split("{")[0], []).extend(sorted(xs, key=lambda s: float(s.rsplit(" ", 1)[1])))
    out = []
    for name, xs in families.items():
        out.append(f"# TYPE {name} {'gauge' if 'POWER' in name or 'ACTIVE' in name else 'unknown'}")
        out += xs
    return "\n".join(out) + "\n# EOF"


def test_ledger_rows_equal_the_records_path(agg: Path, cluster: Cluster, prom: str, tmp_path: Path) -> None:
    """The ledger row written without a record (`job_rows.JobRows`, in columns) is the row `--records` derives from
    the record (`importer._finish`): the two ways of writing a job must not drift apart."""
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    out = tmp_path / "r"
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site=SITE, records=True))
    a, b = _idx(agg), _idx(out)
    assert (out / "jobs" / "1001" / "run.json").is_file()
    cols = ["gpu_count", "gpu_hours", "gpu_energy_j", "cpu_energy_j", "energy_j", "coverage", "gpu_name", "gpu_model", "user"]
    pd.testing.assert_frame_equal(a[cols].sort_index(), b[cols].sort_index(), rtol=1e-12)
    assert (a["energy_method"] == b["energy_method"]).all()


def test_fleet_job_writes_a_record_that_assesses_like_the_exact_import(
    agg: Path, fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from footprint.cli.app import main

    assert main(["fleet", "job", str(agg), "1002", "-o", str(tmp_path / "run")]) == 0
    rec = json.loads((tmp_path / "run" / "run.json").read_text())
    assert len([d for d in rec["devices"] if d["component"] == "gpu"]) == 8 and rec["site"] == {"grid": "FRA", "pue": 1.2}
    capsys.readouterr()
    assert main(["assess", str(tmp_path / "run"), "--format", "json", "--samples", "0"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert main(["assess", str(fleet / "jobs" / "1002"), "--format", "json", "--samples", "0"]) == 0
    exact = json.loads(capsys.readouterr().out)
    cc = lambda r: r["impacts"]["climate_change"]["total"]  # noqa: E731
    assert cc(mine) == pytest.approx(cc(exact), rel=0.005)
    # an unknown job, an existing output: one line, exit 2
    assert main(["fleet", "job", str(agg), "nope", "-o", str(tmp_path / "x")]) == 2
    assert main(["fleet", "job", str(agg), "1002", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "no job 'nope'" in err and "exists" in err


def test_report_by_job_lists_every_job_with_the_per_job_engine_numbers(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from footprint.cli.app import main

    for fmt in ("csv", "json"):
        assert main(["fleet", "report", str(fleet), "--by", "job", "-o", str(tmp_path / f"jobs.{fmt}")]) == 0
    t = pd.read_csv(tmp_path / "jobs.csv", dtype={"job_id": str}).set_index("job_id")
    assert set(t.index.astype(str)) == set(_idx(fleet).index)
    js = json.loads((tmp_path / "jobs.json").read_text())["jobs"]
    assert len(js) == len(t)
    capsys.readouterr()
    assert main(["assess", str(fleet / "jobs" / "1001"), "--format", "json", "--samples", "0"]) == 0
    one = json.loads(capsys.readouterr().out)
    col = next(c for c in t.columns if c.startswith("climate_change ["))
    assert t.loc["1001", col] == pytest.approx(one["impacts"]["climate_change"]["total"], rel=1e-9)
    # each job's own low-high: the per-job engine's Monte Carlo (same draws), within the interpolation between nodes
    capsys.readouterr()
    assert main(["assess", str(fleet / "jobs" / "1001"), "--format", "json"]) == 0
    mc = json.loads(capsys.readouterr().out)["impacts"]
    for key in ("climate_change", "water_use", "resource_use_minerals_metals"):
        lo, hi = (next(c for c in t.columns if c.startswith(f"{key} {side} [")) for side in ("low", "high"))
        assert t.loc["1001", lo] == pytest.approx(mc[key]["low"], rel=1e-3)
        assert t.loc["1001", hi] == pytest.approx(mc[key]["high"], rel=1e-3)
        assert t.loc["1001", lo] < t.loc["1001", next(c for c in t.columns if c.startswith(f"{key} ["))] < t.loc["1001", hi]
    assert main(["fleet", "report", str(fleet), "--by", "job"]) == 0
    assert "1001" in capsys.readouterr().out


def test_job_table_in_chunks_equals_one_pass(fleet: Path) -> None:
    from footprint.fleet import ledger

    a, b = ledger.job_table(fleet), ledger.job_table(fleet, chunk=3)
    pd.testing.assert_frame_equal(a, b)
    assert a["single_score_pt"].notna().sum() >= 6


def test_job_table_streamed_in_chunks_writes_what_one_pass_writes(fleet: Path, tmp_path: Path) -> None:
    from footprint.fleet import ledger

    for fmt in ("csv", "json", "table"):
        one, many = tmp_path / f"one.{fmt}", tmp_path / f"many.{fmt}"
        ledger.write_jobs(fleet, str(one), fmt)
        ledger.write_jobs(fleet, str(many), fmt, chunk=2)  # the ledger read and written two rows at a time
        if fmt == "json":
            a, b = json.loads(one.read_text())["jobs"], json.loads(many.read_text())["jobs"]
            assert len(a) == len(b) == len(ledger.job_table(fleet))
            pd.testing.assert_frame_equal(pd.DataFrame(a), pd.DataFrame(b), rtol=1e-12)
        elif fmt == "csv":
            a, b = pd.read_csv(one, dtype={"job_id": str}), pd.read_csv(many, dtype={"job_id": str})
            pd.testing.assert_frame_equal(a, b, rtol=1e-12)  # the batch's sums differ in the last bits by chunk
            assert one.read_text().count("job_id") == many.read_text().count("job_id") == 1
        else:
            lines = many.read_text().splitlines()
            assert lines[0].split()[0] == "job_id" and sum(x.split()[0] == "job_id" for x in lines) == 1
            assert {len(x) for x in lines} == {len(lines[0])}  # chunks line up under one head
            assert len(lines) == len(ledger.job_table(fleet)) + 1


class _Proxy:
    """A proxy in front of the real Prometheus that fails every query after the first ``fail_after`` (503), or adds
    a ``warnings`` entry to every answer (a Thanos/Mimir partial response)."""

    def __init__(self, target: str, fail_after: int | None = None, warn: bool = False) -> None:
        import http.server
        import threading
        import urllib.request

        proxy = self
        self.queries = 0

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def _go(self, body: bytes | None) -> None:
                if self.path.startswith("/api/v1/query?") or self.path == "/api/v1/query":
                    proxy.queries += 1
                    if fail_after is not None and proxy.queries > fail_after:
                        self.send_response(503)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                req = urllib.request.Request(target + self.path, data=body, method=self.command)
                if body is not None:
                    req.add_header("Content-Type", "application/x-www-form-urlencoded")
                with urllib.request.urlopen(req) as r:
                    data = r.read()
                if warn:
                    doc = json.loads(data)
                    doc["warnings"] = ["partial response: store gateway 3 unavailable"]
                    data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._go(None)

            def do_POST(self) -> None:  # noqa: N802
                self._go(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()


def test_a_failed_import_writes_nothing_and_its_rerun_resumes(agg: Path, cluster: Cluster, prom: str, tmp_path: Path) -> None:
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    out = tmp_path / "f"
    proxy = _Proxy(prom, fail_after=3)
    try:
        with pytest.raises(FootprintError, match="the same command resumes") as err:
            import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(proxy.url, retries=0), sacct=sacct, site=SITE))
    finally:
        proxy.close()
    assert "503" in str(err.value) and "\n" not in str(err.value)
    assert not out.exists() and not list(tmp_path.glob(".f.import-*"))  # nothing written half
    assert len(list((tmp_path / ".f.resume").glob("*.json"))) >= 1
    import_fleet(out, ImportOptions(cluster.start, cluster.end, PromConfig(prom), sacct=sacct, site=SITE))
    meta = json.loads((out / "fleet.json").read_text())
    assert meta["sources"]["prometheus"]["aggregation"]["reused"] >= 1 and not (tmp_path / ".f.resume").exists()
    pd.testing.assert_series_equal(_idx(out)["gpu_energy_j"].sort_index(), _idx(agg)["gpu_energy_j"].sort_index())


def test_partial_answers_flag_the_ledger(cluster: Cluster, prom: str, tmp_path: Path) -> None:
    sacct = parse_sacct(sacct_of(cluster), UTC, "sacct.txt")
    proxy = _Proxy(prom, warn=True)
    try:
        import_fleet(tmp_path / "f", ImportOptions(cluster.start, cluster.end, PromConfig(proxy.url), sacct=sacct))
    finally:
        proxy.close()
    meta = json.loads((tmp_path / "f" / "fleet.json").read_text())
    assert meta["partial"] is True
    assert any("partial data?" in n and "store gateway 3 unavailable" in n for n in meta["notes"])


def test_fleet_page_reads_a_ledger_without_records(agg: Path) -> None:
    """The dashboard's Fleet page on a default import (no jobs/ directory): the ledger's numbers, the unallocated
    share, and each top job's record named by the command that writes it."""
    pytest.importorskip("streamlit")
    from _paths import REPO
    from streamlit.testing.v1 import AppTest

    from footprint.fleet.report import build_report
    from footprint.lca.assessment import num

    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.sidebar.radio(key="page").set_value("Fleet").run()
    at.text_input(key="fleet_dir").set_value(str(agg)).run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    rep = build_report(agg, "user")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Climate change (kg CO2 eq)"] == num(rep.totals.impacts["climate_change"])
    assert metrics["Unallocated GPU time"] != "n/a"
    records = [str(x) for df in at.dataframe for x in df.value.get("Record", [])]
    assert records and all(r.startswith("footprint fleet job ") for r in records)
