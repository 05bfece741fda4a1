"""`footprint kernels diff A B`: two traces compared per kernel class and op, down to a training run's footprint.

Real traces: HTA's own trace-diff pair (control and test, multi-step), TraceLens' single-step H100
traces, and the repository's example CPU trace. A trace "stretched" here (every timestamp and
duration x k, nothing else changed) is the same work run k times slower: each time figure of the
diff must grow by k, FLOPs stay, achieved TFLOP/s and % of peak divide by k, and a run's GPU-hours
and every footprint category grow by k (they are linear in GPU-hours at a fixed power).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO
from test_kernels_trace import _run_dir

from footprint import api
from footprint.cli import main
from footprint.errors import FootprintError
from footprint.kernels.diff import diff_traces
from footprint.kernels.trace import CATEGORIES, analyze_trace

HTA = "traces/hta/tests/data/trace_diff"
BERT = "traces/tracelens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
TIMESFORMER = "traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
EXAMPLE = REPO / "examples" / "traces" / "cpu_training.json.gz"


def _stretch(src: Path, dst: Path, k: float) -> Path:
    """The trace with every timestamp (from the first) and duration multiplied by k."""
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    for e in events:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = t0 + (e["ts"] - t0) * k
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * k
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


def _same(f: dict[str, Any], a: float | None, b: float | None) -> None:
    assert f["a"] == pytest.approx(a) and f["b"] == pytest.approx(b)
    if a is None or b is None:
        assert f["delta"] is None
    else:
        assert f["delta"] == pytest.approx(b - a)


def test_real_multistep_pair_equals_each_traces_analysis(shared: Path) -> None:
    a, b = shared / HTA / "control" / "control.json.gz", shared / HTA / "test" / "test.json.gz"
    d = diff_traces(a, b, top=1_000_000)
    ra, rb = analyze_trace(a), analyze_trace(b)
    sa, sb = ra["steps"]["summary"], rb["steps"]["summary"]
    assert d["basis"].startswith("per step") and d["a"]["steps"] == [2, 3, 4, 5, 6]
    _same(d["totals"]["step_time_us"], sa["wall_us"], sb["wall_us"])
    _same(d["totals"]["busy_time_us"], sa["busy_time_us"], sb["busy_time_us"])
    _same(d["totals"]["matrix_flops"], sa["matrix_flops"], sb["matrix_flops"])
    for c in CATEGORIES:
        e = d["by_category"][c]
        _same(e["time_us"], sa["kernel_time_by_category_us"][c], sb["kernel_time_by_category_us"][c])
        if c in sa["flops_by_category"]:
            _same(e["flops"], sa["flops_by_category"][c], sb["flops_by_category"][c])
    # the ops account for every kernel (an op's time is the union of its kernels', so at most their sum)
    for side, sm in (("a", sa), ("b", sb)):
        ops, kernels = sum(o["time_us"][side] for o in d["ops"]), sum(sm["kernel_time_by_category_us"].values())
        assert 0.999 * kernels <= ops <= kernels + 1e-6
    assert any(o["in"] == "a" for o in d["ops"]) and any(o["in"] == "both" for o in d["ops"])
    assert d["b"]["carried_over_events"] == 614 and any("carried over" in w for w in d["warnings"])
    assert any("different devices" in w for w in d["warnings"])  # HTA's pair: an A100 and a V100
    assert d["footprint"] is None


def test_stretched_trace_scales_every_figure(shared: Path, tmp_path: Path) -> None:
    a = shared / BERT
    b = _stretch(a, tmp_path / "slow.json.gz", 2.0)
    d = diff_traces(a, b, train_steps=10_000, gpus=8)
    t = d["totals"]
    assert t["step_time_us"]["relative"] == pytest.approx(1.0, rel=1e-4)
    assert t["busy_time_us"]["relative"] == pytest.approx(1.0, rel=1e-4)
    assert t["matrix_flops"]["delta"] == pytest.approx(0.0, abs=1.0)
    assert t["mfu"]["b"] == pytest.approx(t["mfu"]["a"] / 2)
    gemm = d["by_category"]["gemm"]
    assert gemm["time_us"]["relative"] == pytest.approx(1.0, rel=1e-4)
    assert gemm["tflops_per_s"]["b"] == pytest.approx(gemm["tflops_per_s"]["a"] / 2)
    assert gemm["pct_of_peak"]["b"] == pytest.approx(gemm["pct_of_peak"]["a"] / 2)
    ops = d["ops"]  # timestamps rounded to the microsecond's fractions: 1e-3
    assert all(o["in"] == "both" and o["time_us"]["relative"] == pytest.approx(1.0, rel=1e-3) for o in ops)
    fp = d["footprint"]
    step_s = t["step_time_us"]["a"] / 1e6
    assert fp["gpu_hours"]["a"] == pytest.approx(10_000 * step_s * 8 / 3600)
    assert fp["gpu"] == "NVIDIA H100 SXM5 80GB" and fp["gpus"] == 8  # trace A's device
    assert len(fp["categories"]) >= 16
    for c in fp["categories"].values():
        assert c["relative"] == pytest.approx(1.0, rel=1e-4), c["name"]


def test_scenario_alone_scales_its_gpu_hours(shared: Path, tmp_path: Path) -> None:
    a = shared / BERT
    b = _stretch(a, tmp_path / "slow.json.gz", 1.5)
    scenario = REPO / "scenarios" / "finetune-small.yaml"
    d = diff_traces(a, b, scenario=scenario)
    fp = d["footprint"]
    stated = api.assess(scenario, samples=0)
    assert fp["gpu_hours"]["a"] == pytest.approx(stated.workload.gpu_hours)
    assert fp["gpu_hours"]["b"] == pytest.approx(1.5 * stated.workload.gpu_hours)
    cc = fp["categories"]["climate_change"]
    assert cc["a"] == pytest.approx(stated["climate_change"].total) and cc["relative"] == pytest.approx(0.5)
    assert fp["gpu"] == stated.workload.gpu.name and fp["scenario"] == str(scenario)


def test_energy_attributed_per_class(shared: Path, tmp_path: Path) -> None:
    a = shared / TIMESFORMER
    b = _stretch(a, tmp_path / "slow.json.gz", 2.0)
    runs = [_run_dir(tmp_path / name, analyze_trace(p), period=0.001) for name, p in (("ra", a), ("rb", b))]
    d = diff_traces(a, b, power_a=runs[0], power_b=runs[1])
    for c in CATEGORIES:  # 300 W throughout: energy follows kernel time on each side
        e = d["by_category"][c]
        assert e["energy_j"]["a"] == pytest.approx(300 * e["time_us"]["a"] / 1e6, rel=1e-3, abs=1e-4)
        assert e["energy_j"]["b"] == pytest.approx(300 * e["time_us"]["b"] / 1e6, rel=1e-3, abs=1e-4)
    assert d["totals"]["energy_j"]["relative"] == pytest.approx(1.0, rel=1e-3)


def test_example_cpu_trace(tmp_path: Path) -> None:
    b = _stretch(EXAMPLE, tmp_path / "slow.json.gz", 1.25)
    d = diff_traces(EXAMPLE, b, steps="all")
    r = analyze_trace(EXAMPLE, steps="all")
    assert d["a"]["kind"] == "cpu" and d["basis"].startswith("per step")
    _same(d["totals"]["step_time_us"], r["steps"]["summary"]["wall_us"], 1.25 * r["steps"]["summary"]["wall_us"])
    gemm = d["by_category"]["gemm"]
    assert gemm["time_us"]["relative"] == pytest.approx(0.25, rel=1e-4)
    assert gemm["flops"]["delta"] == pytest.approx(0.0, abs=1.0)
    assert gemm["tflops_per_s"]["b"] == pytest.approx(gemm["tflops_per_s"]["a"] / 1.25)
    assert d["ops"] and all(o["time_us"]["relative"] == pytest.approx(0.25, rel=1e-4) for o in d["ops"])
    with pytest.raises(FootprintError, match="--gpu NAME"):  # a CPU trace has no GPU to scale a run on
        diff_traces(EXAMPLE, b, train_steps=100)


def test_cli_formats(shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = shared / BERT
    b = _stretch(a, tmp_path / "slow.json.gz", 2.0)
    assert main(["kernels", "diff", str(a), str(b), "--format", "json", "--train-steps", "1000"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["totals"]["step_time_us"]) == {"a", "b", "delta", "relative"}
    assert d["footprint"]["categories"]["climate_change"]["delta"] > 0
    assert main(["kernels", "diff", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "Step time" in text and "+100.0%" in text and "Footprint: not computed" in text
    out = tmp_path / "diff.html"
    assert main(["kernels", "diff", str(a), str(b), "--train-steps", "1000", "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count("<svg") == 2 and "Climate change" in page and "Time by kernel class" in page
    capsys.readouterr()
    assert main(["kernels", "diff", str(a), str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.json" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nhardware: {gpu: H100-SXM5-80GB, count: many}\ntraining: {gpu_hours: 5, power_per_gpu: 500 W}\n")
    assert main(["kernels", "diff", str(a), str(b), "--scenario", str(bad)]) == 2
    assert "hardware.count" in capsys.readouterr().err
    control = shared / HTA / "control" / "control.json.gz"  # an A100-PG509-200: not in the catalogue
    assert main(["kernels", "diff", str(control), str(control), "--train-steps", "10"]) == 2
    assert "--gpu NAME" in capsys.readouterr().err
