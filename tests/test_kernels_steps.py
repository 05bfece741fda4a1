"""Per-step analysis: each ProfilerStep's figures equal the whole-trace figures of the trace restricted to that step.

The restriction is written here independently of the analysis (HTA's rule: CPU events that start in
the step's span, GPU events whose launch call is one of them, or that start in the span when they have
no launch), on a trace spliced from a shared single-step H100 trace (three copies with shifted
timestamps and ids, all named ProfilerStep#6: names repeat, spans do not) and on a real multi-step
trace with NCCL kernels from HTA's test data.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from footprint.cli import main
from footprint.errors import FootprintError
from footprint.kernels.trace import CATEGORIES, analyze_trace, render_table

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "runtime")
BERT = "traces/tracelens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
NCCL = "traces/hta/tests/data/nccl_parser_config/nccl_data.json.gz"


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _splice(doc: dict[str, Any], copies: int) -> dict[str, Any]:
    """`copies` back-to-back copies of the trace's events, timestamps and ids shifted."""
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - start
    ids = [v for e in events for v in ((e.get("args") or {}).get("correlation"), (e.get("args") or {}).get("External id"))]
    step = max(v for v in ids if isinstance(v, int)) + 1
    out = []
    for k in range(copies):
        for e in events:
            e = json.loads(json.dumps(e))
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += k * (span + 100.0)
            for key in ("correlation", "External id"):
                if isinstance((e.get("args") or {}).get(key), int):
                    e["args"][key] += k * step
            out.append(e)
    return {**doc, "traceEvents": out}


def _restrict(doc: dict[str, Any], a: float, b: float) -> dict[str, Any]:
    """The trace holding only step [a, b): its CPU events, and the GPU events launched from them."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    launches = {(e.get("args") or {}).get("correlation"): e for e in events if str(e.get("cat")).lower() in RUNTIME_CATS}
    keep = []
    for e in events:
        cat = str(e.get("cat")).lower()
        if cat in GPU_CATS:
            rt = launches.get((e.get("args") or {}).get("correlation"))
            t = rt["ts"] if rt is not None else e["ts"]
        else:
            t = e["ts"]
        if a <= t < b:
            keep.append(e)
    return {**doc, "traceEvents": keep}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _check_step_equals_restriction(row: dict[str, Any], whole: dict[str, Any]) -> None:
    assert row["busy_time_us"] == pytest.approx(whole["busy_time_us"], rel=1e-9, abs=1e-6)
    assert row["total_time_us"] == pytest.approx(whole["total_time_us"], rel=1e-9, abs=1e-6)
    assert row["idle_time_us"] == pytest.approx(whole["idle_time_us"], rel=1e-9, abs=1e-6)
    for c in CATEGORIES:
        assert row["kernel_time_by_category_us"][c] == pytest.approx(whole["by_category"][c]["kernel_time_us"], abs=1e-6)
    for c in ("gemm", "attention", "convolution"):
        assert row["flops_by_category"][c] == whole["by_category"][c]["flops"]
    assert row["matrix_flops"] == whole["summary"]["matrix_flops"]
    assert row["exposed_communication_us"] == pytest.approx(whole["timeline"]["exposed_communication_us"], abs=1e-6)
    assert row["communication_us"] == pytest.approx(whole["timeline"]["total_communication_us"], abs=1e-6)
    assert row["exposed_memcpy_us"] == pytest.approx(whole["timeline"]["exposed_memcpy_us"], abs=1e-6)


@pytest.fixture(scope="module")
def spliced(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, dict[str, Any]]:
    doc = _splice(_load(shared / BERT), 3)
    path = _write(tmp_path_factory.mktemp("steps") / "three_steps.json", doc)
    return doc, path, analyze_trace(path, top=5)


def test_spliced_steps_equal_the_restricted_whole_trace(spliced: Any, tmp_path: Path) -> None:
    doc, _, r = spliced
    st = r["steps"]
    assert st["detected"] == 3 and [p["name"] for p in st["per_step"]] == ["ProfilerStep#6"] * 3  # names repeat
    for p in st["per_step"]:
        whole = analyze_trace(
            _write(tmp_path / f"step{p['index']}.json", _restrict(doc, p["start_us"], p["start_us"] + p["wall_us"]))
        )
        _check_step_equals_restriction(p, whole)
        assert p["matrix_flops"] == pytest.approx(8.199e9, rel=1e-3)  # the shared trace's one step, every copy
    # every GPU event of the copies is in a step except those launched before ProfilerStep#6 began
    assert sum(p["gpu_events"] for p in st["per_step"]) + st["gpu_events_outside_steps"] == r["trace"]["gpu_events"]


def test_steady_state_summary_and_the_choice(spliced: Any) -> None:
    _, path, r = spliced
    st = r["steps"]
    rows = st["per_step"]
    sm = st["summary"]
    assert st["choice"] == "steady" and sm["steps"] == [2, 3] and "first active step excluded" in st["selection"]
    assert sm["busy_time_us"] == pytest.approx((rows[1]["busy_time_us"] + rows[2]["busy_time_us"]) / 2)
    assert sm["kernel_time_by_category_us"]["gemm"] == pytest.approx(
        (rows[1]["kernel_time_by_category_us"]["gemm"] + rows[2]["kernel_time_by_category_us"]["gemm"]) / 2
    )
    peak = r["device"]["peak_tflops"] * 1e12
    assert rows[0]["mfu"] == pytest.approx(rows[0]["matrix_flops"] / (rows[0]["wall_us"] * 1e-6) / peak)
    # whole-trace totals stay: three steps' worth of matrix FLOPs
    assert r["summary"]["matrix_flops"] == pytest.approx(3 * rows[0]["matrix_flops"], rel=1e-9)
    assert analyze_trace(path, steps="all")["steps"]["summary"]["steps"] == [1, 2, 3]
    one = analyze_trace(path, steps=2)["steps"]
    assert one["summary"]["steps"] == [2] and one["summary"]["busy_time_us"] == pytest.approx(rows[1]["busy_time_us"])
    text = render_table(r)
    assert "summary = steady state: steps 2-3 of 3" in text and "GPU time (whole trace)" in text


def test_real_multistep_trace_with_nccl(shared: Path, tmp_path: Path) -> None:
    doc = _load(shared / NCCL)
    r = analyze_trace(shared / NCCL)
    st = r["steps"]
    assert st["detected"] == 3
    assert any(p["communication_us"] > 0 for p in st["per_step"])  # NCCL kernels, exposed or not
    for p in st["per_step"]:
        assert p["exposed_communication_us"] <= p["communication_us"] + 1e-6
        whole = analyze_trace(
            _write(tmp_path / f"s{p['index']}.json", _restrict(doc, p["start_us"], p["start_us"] + p["wall_us"]))
        )
        _check_step_equals_restriction(p, whole)


def test_bad_steps_choice(spliced: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, path, _ = spliced
    for bad in ("0", "first", "-1"):
        with pytest.raises(FootprintError, match="--steps"):
            analyze_trace(path, steps=bad)
    assert main(["kernels", "analyze", str(path), "--steps", "9"]) == 2
    err = capsys.readouterr().err
    assert "the trace has 3 steps" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
