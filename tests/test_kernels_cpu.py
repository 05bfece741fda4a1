"""CPU operators of a CPU-only trace: the example trace made by examples/cpu_training_trace.py.

Each profiler step's FLOPs (biases left out) equal torch's FlopCounterMode count of the same training
step; the CPU operator table, the steps, RAPL energy attribution from a run directory, the one line
that says what is missing when the run has no RAPL samples, and the example script itself.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from footprint.cli import main
from footprint.kernels.trace import analyze_trace, render_table, to_json

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "traces" / "cpu_training.json.gz"


def _example_module() -> Any:
    spec = importlib.util.spec_from_file_location("cpu_training_trace", REPO / "examples" / "cpu_training_trace.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cpu_training_trace", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return analyze_trace(EXAMPLE, top=50)


def test_cpu_flops_match_flopcountermode(example: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    reference = _example_module().model_flops_per_step()
    st = example["steps"]
    assert st["detected"] == 5
    for p in st["per_step"]:
        assert p["matrix_flops_without_bias"] == reference  # FlopCounterMode leaves biases out, as matmul_flops does
        assert p["matrix_flops"] > reference  # the TraceLens convention adds the biases' M N
    assert st["summary"]["matrix_flops_without_bias"] == reference


def test_cpu_operator_table(example: dict[str, Any]) -> None:
    c = example["cpu"]
    names = {o["name"] for o in c["ops"]}
    assert {"aten::mm", "aten::addmm", "aten::_scaled_dot_product_flash_attention_for_cpu"} <= names
    assert "aten::linear" not in names  # counted once, as the addmm it runs
    mm = next(o for o in c["ops"] if o["name"] == "aten::addmm" and o["params"]["N"] == 1000)  # the LM head
    assert (mm["params"]["M"], mm["params"]["K"], mm["dtype"]) == (512, 128, "fp32")
    assert mm["matmul_flops"] == mm["count"] * 2 * 512 * 1000 * 128
    assert mm["gflops_per_s"] == pytest.approx(mm["flops"] / mm["cpu_time_us"] / 1e3)
    attn = c["by_category"]["attention"]
    assert attn["flops"] > 0 and attn["gflops_per_s"] > 0
    assert example["busy_time_us"] == 0 and example["ops"] == []  # no GPU: whole-trace GPU figures are empty
    text = render_table(example)
    assert "CPU operators (no GPU events in the trace)" in text and "GFLOP/s over wall" in text
    json.loads(to_json(example))


def _cpu_run(tmp: Path, r: dict[str, Any], method: str = "rapl", watts: float = 40.0) -> Path:
    """A run directory whose CPU package samples (1 ms apart, constant power) cover the trace."""
    base = r["trace"]["base_time_ns"] / 1e9
    first, last = r["steps"]["per_step"][0], r["steps"]["per_step"][-1]
    w0 = base + first["start_us"] / 1e6 - 0.01
    w1 = base + (last["start_us"] + last["wall_us"]) / 1e6 + 0.01
    n = int((w1 - w0) / 1e-3) + 1
    uuid = "rapl:package-0" if method == "rapl" else "estimate:cpu"
    rows = [
        {"rank": 0, "host": "h", "uuid": uuid, "component": "cpu", "t_s": i * 1e-3, "energy_j": i * 1e-3 * watts}
        for i in range(n)
    ]
    (tmp / "ranks").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(tmp / "samples.parquet", index=False)
    (tmp / "ranks" / "rank-00000.json").write_text(json.dumps({"rank": 0, "start_unix": w0}))
    (tmp / "run.json").write_text(
        json.dumps({"devices": [{"uuid": uuid, "component": "cpu", "name": "package-0", "method": method}]})
    )
    return tmp


def test_cpu_energy_from_rapl(example: dict[str, Any], tmp_path: Path) -> None:
    run = _cpu_run(tmp_path / "run", example)
    r = analyze_trace(EXAMPLE, power=run)
    p = r["power"]
    assert p["component"] == "cpu" and p["energy_method"] == "energy counter differences"
    cats = r["cpu"]["by_category"]
    span_s = p["trace_window_unix"][1] - p["trace_window_unix"][0]
    assert p["energy_in_trace_window_j"] == pytest.approx(40.0 * span_s, rel=0.02)
    assert sum(p["by_category_j"].values()) + p["idle_j"] == pytest.approx(p["energy_in_trace_window_j"])
    assert cats["gemm"]["energy_j"] > cats["attention"]["energy_j"] > 0  # by time overlap: GEMMs take most of it
    assert cats["gemm"]["gflops_per_j"] == pytest.approx(cats["gemm"]["flops"] / cats["gemm"]["energy_j"] / 1e9)
    assert "Energy J" in render_table(r)


def test_cpu_energy_missing_is_one_line(example: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _cpu_run(tmp_path / "run", example, method="estimated")
    assert main(["kernels", "analyze", str(EXAMPLE), "--power", str(run)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("Energy: not attributed")]
    assert len(lines) == 1 and "no RAPL CPU package samples" in lines[0] and "estimated" in lines[0]


def test_example_script_records_a_trace(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = _example_module().record(tmp_path / "t.json.gz", steps=2)
    r = analyze_trace(out)
    assert r["steps"]["detected"] == 2 and r["cpu"]["matrix_flops"] > 0
