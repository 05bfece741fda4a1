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
