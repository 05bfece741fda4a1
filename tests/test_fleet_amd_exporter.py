"""The fleet import reads AMD's device-metrics-exporter series (gpu_energy_consumed in µJ, gpu_power_usage in W,
labels hostname / gpu_id / job_id / card_model) from a real Prometheus (Debian's package, TSDB backfilled by
promtool), beside DCGM's: per-job energy equals the generated truth, whatever the exporter. The power shapes are
the real A100 nvidia-smi logs of ../shared/data/power (no open MI300X trace was found), played on MI300X nodes."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _paths import REPO

from footprint.fleet import promserver, synthetic
from footprint.fleet.synthetic import Cluster, Gpu, JobSpec, Profile
from footprint.fleet.telemetry import EXPORTERS

T0 = datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp()
MIN = 60.0
MI300X = "AMD Instinct MI300X"

pytestmark = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))


def _profile(path: Path) -> Profile:
    from meters.importers import read_nvidia_smi_csv

    df = read_nvidia_smi_csv(path)
    t, w = df["t_s"].to_numpy(float), df["power_w"].to_numpy(float)
    return Profile(t - t[0], w, float(np.percentile(w, 1)), str(path))


@pytest.fixture(scope="module")
def cluster(shared: Path) -> Cluster:
    logs = shared / "power" / "gpu-power-benchmark" / "plotting" / "data"
    a = _profile(logs / "pwr_update_freq" / "A100_gpudata.csv")
    b = _profile(logs / "5050" / "A100" / "gpudata.csv")
    gpus = [Gpu("mi-01", i, MI300X, a, uuid=f"00ff74a1-0000-1000-8000-00000000000{i}") for i in range(4)]
    gpus += [Gpu("mi-02", i, MI300X, b, uuid=f"00ff74a1-0000-1000-8001-00000000000{i}") for i in range(2)]
    gpus[5].counter = False  # mi-02:1 exports only gpu_power_usage
    at = lambda m: T0 + m * MIN  # noqa: E731
    jobs = [
        JobSpec("501", at(5), at(45), [("mi-01", i) for i in range(4)], user="ana", account="p1", gres_type="mi300x"),
        JobSpec("502", at(50), at(80), [("mi-01", 0), ("mi-01", 1), ("mi-02", 0), ("mi-02", 1)], user="ben", account="p2"),
    ]
    return Cluster(T0, T0 + 90 * MIN, gpus, jobs, scrape_s=15.0, fine_s=0.1)


@pytest.fixture(scope="module")
def prom(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("amdprom")
    synthetic.write_openmetrics(cluster, d / "metrics.om", names=EXPORTERS["amd"])
    text = (d / "metrics.om").read_text()
    assert "gpu_energy_consumed{" in text and "DCGM_" not in text and 'job_id="501"' in text
    with promserver.serve(promserver.backfill(d / "metrics.om", d / "tsdb")) as url:
        yield url, d


def _import(url: str, d: Path, c: Cluster, out: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (d / "sacct.txt").write_text(synthetic.sacct_text(c))
    args = ["fleet", "import", "prometheus", "--url", url, "--sacct", str(d / "sacct.txt"), "--tz", "UTC", "-o", str(d / out)]
    args += [
        "--start",
        datetime.fromtimestamp(T0, UTC).isoformat(),
        "--end",
        datetime.fromtimestamp(T0 + 90 * MIN, UTC).isoformat(),
    ]
    return subprocess.run(
        [sys.executable, "-m", "footprint.cli", *args, *extra, "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=600
    )


@pytest.mark.parametrize("mode", ["aggregate", "exact"])
def test_amd_series_give_each_jobs_energy(prom: tuple[str, Path], cluster: Cluster, mode: str) -> None:
    url, d = prom
    proc = _import(url, d, cluster, f"fleet-{mode}", "--exporter", "amd", *(["--exact"] if mode == "exact" else []))
    assert proc.returncode == 0, proc.stderr
    idx = pd.read_parquet(d / f"fleet-{mode}" / "ledger").set_index("job_id")
    truth = cluster.truth()
    # 501 is on counters only: within a scrape interval's edges; 502 has a GPU with the power gauge alone
    assert idx.loc["501", "gpu_energy_j"] == pytest.approx(truth["501"], rel=5e-3)
    assert idx.loc["502", "gpu_energy_j"] == pytest.approx(truth["502"], rel=0.02)
    assert set(idx["gpu_model"]) == {"mi300x"}  # card_model/the sacct GPUs mapped to the catalogue's MI300X
    assert idx.loc["501", "gpu_energy_j"] > 0.5 * 4 * 40 * MIN * 100  # µJ read as J would be a million times less
    per = pd.read_parquet(d / f"fleet-{mode}" / "job_gpus.parquet")
    methods = set(per.loc[per["component"] == "gpu", "method"])  # named for AMD's exporter, not DCGM's
    assert methods == {"amd_energy_counter", "amd_power_gauge"}, methods
    assert not idx["energy_method"].astype(str).str.contains("dcgm").any()


def test_the_dcgm_names_find_nothing_and_say_which_exporter_to_use(prom: tuple[str, Path], cluster: Cluster) -> None:
    url, d = prom
    proc = _import(url, d, cluster, "fleet-dcgm")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "gpu_energy_consumed, gpu_power_usage (--exporter amd)" in proc.stderr


def test_a_fleet_job_of_an_exact_import_is_matched_hour_by_hour(prom: tuple[str, Path], cluster: Cluster) -> None:
    """`footprint fleet job` keeps the job's energy per UTC hour (from series/); `footprint assess` matches it to an
    hourly intensity file. Job 502 runs 08:50-09:20: a sixth of its energy in the 100 g hour, the rest in the 500 g one."""
    url, d = prom
    if not (d / "fleet-exact").is_dir():
        assert _import(url, d, cluster, "fleet-exact", "--exporter", "amd", "--exact").returncode == 0
    env_run = [sys.executable, "-m", "footprint.cli"]
    proc = subprocess.run(
        [*env_run, "fleet", "job", str(d / "fleet-exact"), "502", "-o", str(d / "job502")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    (d / "ci.csv").write_text("datetime_utc,g_per_kwh\n2025-03-03T08:00Z,100\n2025-03-03T09:00Z,500\n")
    args = ["assess", str(d / "job502"), "--set", f"site.carbon_intensity_hourly={d / 'ci.csv'}", "--set", "site.pue=1"]
    out = subprocess.run([*env_run, *args, "--samples", "0", "--format", "json"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    a = __import__("json").loads(out.stdout)
    job = next(j for j in cluster.jobs if j.job_id == "502")
    split = T0 + 60 * MIN
    by_hour = [
        sum(cluster.energy_j(g, a_, b_) for g in cluster.gpus if (g.host, g.index) in job.gpus)
        for a_, b_ in ((job.start, split), (split, job.end))
    ]
    weighted = (by_hour[0] * 100 + by_hour[1] * 500) / sum(by_hour)
    shown = a["site"]["carbon_intensity_hourly"]["energy_weighted_g_per_kwh"]
    assert shown == pytest.approx(weighted, rel=1e-3)  # the series' hours against the generated truth's
    assert a["impacts"]["climate_change"]["by_stage"]["use"] == pytest.approx(a["energy_kwh"] * shown / 1000, rel=1e-9)
