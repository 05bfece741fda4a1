"""The shipped recording rules are valid for Prometheus' own checker, and record what they say on a real server."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import footprint.fleet

RULES = Path(footprint.fleet.__file__).parent / "rules" / "gpu-energy.rules.yml"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_checks_the_rules() -> None:
    p = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 rules found" in p.stdout


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_rules_record_job_energy_once_per_mig_gpu(tmp_path: Path) -> None:
    """promtool's rule unit test: a GPU whose counter (mJ) is repeated on two MIG instances, one running job j1:
    60 J a minute recorded once, under the job's label."""
    test = tmp_path / "t.yml"
    test.write_text(
        f"""rule_files: [{RULES}]
evaluation_interval: 1m
tests:
  - interval: 15s
    input_series:
      - series: 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{Hostname="n1",gpu="0",UUID="G",modelName="a",GPU_I_ID="1",hpc_job="j1"}}'
        values: '0+15000x40'
      - series: 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{Hostname="n1",gpu="0",UUID="G",modelName="a",GPU_I_ID="2",hpc_job="j1"}}'
        values: '0+15000x40'
    alert_rule_test: []
    promql_expr_test:
      - expr: footprint:job_gpu_energy_joules:increase1m
        eval_time: 5m
        exp_samples:
          - labels: 'footprint:job_gpu_energy_joules:increase1m{{hpc_job="j1"}}'
            value: 60
"""
    )
    p = subprocess.run(["promtool", "test", "rules", str(test)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_import_reads_the_recorded_energy(tmp_path: Path, shared: Path) -> None:
    """The rules evaluated over the real-NVML cluster's history (promtool's rule backfill, as a ruler would have
    recorded them), then `--recorded`: per-job energy from the per-minute recording within its edge bound.

    A ruler's evaluation times are offset from the minute by a hash of the group's file path and name, so the rule
    file is passed by a fixed relative path (the same phase on every machine). Each edge of a job can lose up to one
    scrape interval: the evaluation whose window holds only the job's first (or last) sample records nothing, and
    increase() extrapolates the next window back to its own start, not to the job's first sample."""
    from datetime import UTC

    import pandas as pd
    from test_fleet_prometheus import cluster as cluster_fixture
    from test_fleet_prometheus import sacct_of

    from footprint.fleet import promserver, synthetic
    from footprint.fleet.importer import ImportOptions, import_fleet
    from footprint.fleet.prometheus import PromConfig
    from footprint.fleet.slurm import parse_sacct
    from footprint.fleet.telemetry import DcgmNames

    c = cluster_fixture.__wrapped__(shared)
    synthetic.write_openmetrics(c, tmp_path / "m.om")
    tsdb = promserver.backfill(tmp_path / "m.om", tmp_path / "tsdb")
    sacct = parse_sacct(sacct_of(c), UTC, "sacct.txt")
    with promserver.serve(tsdb) as url:
        import_fleet(tmp_path / "counter", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
        cmd = ["promtool", "tsdb", "create-blocks-from", "rules", f"--start={c.start - 600:.0f}", f"--end={c.end + 600:.0f}"]
        (tmp_path / "phase").mkdir()
        shutil.copy(RULES, tmp_path / "phase" / RULES.name)
        cmd += [f"--url={url}", f"--output-dir={tmp_path / 'rules'}", f"phase/{RULES.name}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
    for block in (tmp_path / "rules").iterdir():
        shutil.move(str(block), tsdb / block.name)
    names = DcgmNames(recorded="footprint:gpu_energy_joules:increase1m")
    with promserver.serve(tsdb) as url:
        import_fleet(tmp_path / "rec", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct, names=names))
    a = pd.read_parquet(tmp_path / "counter" / "ledger").set_index("job_id")
    b = pd.read_parquet(tmp_path / "rec" / "ledger").set_index("job_id")
    labelled = a[a["nodes"].isin(["gpu-01", "gpu-02", "gpu-01,gpu-02"])].index
    err = (b.loc[labelled, "gpu_energy_j"] / a.loc[labelled, "gpu_energy_j"] - 1).abs()
    inside = [j for j in labelled if a.loc[j, "end"].timestamp() < c.end]
    edges = {j: 2 * c.scrape_s / a.loc[j, "duration_s"] for j in inside}  # one scrape interval at each edge
    assert len(inside) >= 4 and all(err[j] <= edges[j] for j in inside), (err.to_dict(), edges)
    # edges lose, never add; but 1002's GPU falls off the bus inside the job: the counter import stops at its last
    # sample (a lower bound, as the exact import), the recording's increase() extrapolates past it
    kept = [j for j in inside if j != "1002"]
    assert (b.loc[kept, "gpu_energy_j"] <= a.loc[kept, "gpu_energy_j"] * 1.001).all()
    # a job cut by the window's end: its last part is in the evaluation after the end, up to one interval (60 s)
    assert err["2001"] < 60.0 / a.loc["2001", "duration_s"], err.to_dict()
