"""The linked-event rule: only GPU events whose launch call is in the recording count (TraceLens' default).

A synthetic trace has the previous iteration's kernels draining at the start of the recording (no
launch call; two start before the first recorded launch, one after it with an older correlation id)
and one launchless kernel queued later; the expected figures are computed here by TraceLens' rule
written independently (runtime event with the correlation id and a complete ac2g flow). HTA's
multi-step test trace, whose first step has 614 such events, checks the same on real data: by
default step 1 equals the whole-trace figures of the step's launched events, and with
``include_unlinked`` the figures before the rule (launchless events placed by their own start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_kernels_steps import _check_step_equals_restriction, _load, _restrict, _write

from footprint.cli import main
from footprint.kernels.intervals import length, union
from footprint.kernels.trace import analyze_trace, render_table

HTA_TEST = "traces/hta/tests/data/trace_diff/test/test.json.gz"
H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    pid = 0 if cat == "kernel" else 1
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launched(corr: int, launch_ts: float, kernel: str, ts: float, dur: float) -> list[dict[str, Any]]:
    """A launch call, its kernel and the ac2g flow between them (as Kineto writes them)."""
    return [
        _x("cuda_runtime", "cudaLaunchKernel", launch_ts, 3.0, correlation=corr),
        {"ph": "s", "cat": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": launch_ts, "name": "ac2g"},
        _x("kernel", kernel, ts, dur, tid=7, device=0, stream=7, correlation=corr),
        {"ph": "f", "cat": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": ts, "bp": "e", "name": "ac2g"},
    ]


GEMM, ELEM = "sm90_xmma_gemm_bf16bf16_bf16f32", "void at::native::vectorized_elementwise_kernel<4>"


def _trace() -> list[dict[str, Any]]:
    events = [
        _x("cpu_op", "ProfilerStep#1", 100.0, 100.0),
        _x("cpu_op", "ProfilerStep#2", 200.0, 100.0),
        # the previous iteration's queue: no launch call in the recording
        _x("kernel", GEMM, 40.0, 30.0, tid=7, device=0, stream=7, correlation=1),
        _x("kernel", ELEM, 70.0, 20.0, tid=7, device=0, stream=7, correlation=2),
        _x("kernel", GEMM, 104.0, 12.0, tid=7, device=0, stream=7, correlation=3),  # after the first launch, older id
        # a launchless kernel queued within the recording (its launch call was not recorded)
        _x("kernel", ELEM, 290.0, 5.0, tid=7, device=0, stream=7, correlation=25),
    ]
    events += _launched(10, 102.0, GEMM, 120.0, 10.0)
    events += _launched(11, 150.0, ELEM, 155.0, 8.0)
    events += _launched(20, 205.0, GEMM, 210.0, 25.0)
    events += _launched(21, 240.0, ELEM, 250.0, 6.0)
    return events


def _tracelens_linked(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GPU events TraceLens links: a runtime event with the correlation id, and an ac2g flow start and end."""
    runtime = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    starts = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    return [
        e for e in events if e.get("cat") == "kernel" and (c := e["args"]["correlation"]) in runtime and c in starts and c in ends
    ]


def _busy(events: list[dict[str, Any]]) -> float:
    return length(union((e["ts"], e["ts"] + e["dur"]) for e in events))


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    events = _trace()
    return events, _write(tmp_path / "carried.json", {"deviceProperties": H100, "traceEvents": events})


def test_linked_only_totals_are_tracelens(synthetic: tuple[list[dict[str, Any]], Path]) -> None:
    events, path = synthetic
    r = analyze_trace(path)
    linked = _tracelens_linked(events)
    assert len(linked) == 4 and r["trace"]["gpu_events_counted"] == 4 and r["trace"]["gpu_events"] == 8
    assert r["busy_time_us"] == pytest.approx(_busy(linked))
    assert r["total_time_us"] == pytest.approx(max(e["ts"] + e["dur"] for e in linked) - min(e["ts"] for e in linked))
    assert r["by_category"]["gemm"]["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in linked if e["name"] == GEMM))
    assert r["by_category"]["elementwise"]["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in linked if e["name"] == ELEM))
    # per step: the events the step launched, none of the carried-over queue
    rows = r["steps"]["per_step"]
    assert [p["gpu_events"] for p in rows] == [2, 2]
    assert rows[0]["busy_time_us"] == pytest.approx(10.0 + 8.0)
    assert rows[0]["kernel_time_by_category_us"]["gemm"] == pytest.approx(10.0)


def test_carried_over_bucket_is_reported(synthetic: tuple[list[dict[str, Any]], Path]) -> None:
    _, path = synthetic
    r = analyze_trace(path)
    lk = r["linking"]
    carried, unlinked = lk["carried_over"], lk["unlinked"]
    assert (lk["linked_events"], lk["counted_events"], lk["include_unlinked"]) == (4, 4, False)
    assert carried["events"] == 3 and not carried["counted"]
    assert carried["busy_time_us"] == pytest.approx(30.0 + 20.0 + 12.0)
    assert (carried["start_us"], carried["end_us"]) == (40.0, 116.0)
    assert carried["kernel_time_by_category_us"] == pytest.approx({"gemm": 42.0, "elementwise": 20.0})
    assert unlinked["events"] == 1 and unlinked["busy_time_us"] == pytest.approx(5.0)
    assert any("carried over from before the recording" in w and "3 of 8 GPU events" in w for w in r["warnings"])
    assert "not counted: 3 GPU events carried over from before the recording" in render_table(r)


def test_include_unlinked_restores_every_event(synthetic: tuple[list[dict[str, Any]], Path]) -> None:
    events, path = synthetic
    r = analyze_trace(path, include_unlinked=True)
    gpu = [e for e in events if e.get("cat") == "kernel"]
    assert r["trace"]["gpu_events_counted"] == 8 and r["linking"]["carried_over"]["counted"]
    assert r["busy_time_us"] == pytest.approx(_busy(gpu))
    rows = r["steps"]["per_step"]  # launchless events by their own start: the one at 104 us goes to step 1
    assert [p["gpu_events"] for p in rows] == [3, 3] and r["steps"]["gpu_events_outside_steps"] == 2
    assert rows[0]["busy_time_us"] == pytest.approx(12.0 + 10.0 + 8.0)


def test_trace_without_launch_calls_counts_everything(tmp_path: Path) -> None:
    events = [e for e in _trace() if e.get("cat") not in ("cuda_runtime", "ac2g")]
    r = analyze_trace(_write(tmp_path / "nolaunch.json", {"deviceProperties": H100, "traceEvents": events}))
    assert r["trace"]["gpu_events_counted"] == 8
    assert any("records no launch calls" in w for w in r["warnings"])


@pytest.fixture(scope="module")
def hta_test(shared: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    path = shared / HTA_TEST
    return _load(path), analyze_trace(path, top=5), analyze_trace(path, top=5, include_unlinked=True)


def _without_launchless(doc: dict[str, Any]) -> dict[str, Any]:
    launches = {(e.get("args") or {}).get("correlation") for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
    keep = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or e["args"].get("correlation") in launches
    ]
    return {**doc, "traceEvents": keep}


def test_real_trace_first_step_is_its_launched_events(hta_test: Any, tmp_path: Path) -> None:
    doc, r, _ = hta_test
    carried = r["linking"]["carried_over"]
    assert carried["events"] == 614 and r["linking"]["unlinked"]["events"] == 0  # all 614 older than the first launch
    first = r["steps"]["per_step"][0]
    whole = analyze_trace(
        _write(tmp_path / "s1.json", _restrict(_without_launchless(doc), first["start_us"], first["start_us"] + first["wall_us"]))
    )
    _check_step_equals_restriction(first, whole)
    # step 1 is now a step like the others: its busy time within 5 % of the steady-state mean
    assert first["busy_time_us"] == pytest.approx(r["steps"]["summary"]["busy_time_us"], rel=0.05)


def test_real_trace_option_restores_the_old_figures(hta_test: Any, tmp_path: Path) -> None:
    doc, r, old = hta_test
    first = old["steps"]["per_step"][0]
    whole = analyze_trace(
        _write(tmp_path / "s1.json", _restrict(doc, first["start_us"], first["start_us"] + first["wall_us"])),
        include_unlinked=True,
    )
    _check_step_equals_restriction(first, whole)
    assert first["busy_time_us"] > r["steps"]["per_step"][0]["busy_time_us"] + 20_000  # the queue charged to step 1
    carried = r["linking"]["carried_over"]
    assert old["busy_time_us"] >= r["busy_time_us"]
    assert old["by_category"]["gemm"]["kernel_time_us"] - r["by_category"]["gemm"]["kernel_time_us"] == pytest.approx(
        carried["kernel_time_by_category_us"].get("gemm", 0.0)
    )
    for later in range(1, 6):  # the other steps are unchanged
        assert old["steps"]["per_step"][later] == r["steps"]["per_step"][later]


def test_cli_option(synthetic: tuple[list[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, path = synthetic
    assert main(["kernels", "analyze", str(path), "--format", "json", "--include-unlinked"]) == 0
    out = capsys.readouterr().out
    assert '"include_unlinked": true' in out and '"gpu_events_counted": 8' in out


def test_report_says_what_was_left_out(shared: Path, tmp_path: Path) -> None:
    from _paths import SCENARIOS

    from footprint import api

    out = api.report(SCENARIOS / "finetune-small.yaml", tmp_path / "r.html", trace=str(shared / HTA_TEST), samples=0)
    page = out.read_text()
    assert "Not counted: 614 GPU events carried over from before the recording" in page


def test_energy_of_left_out_events_is_reported_apart(tmp_path: Path) -> None:
    from test_kernels_trace import _run_dir

    doc = {"deviceProperties": H100, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": _trace()}
    path = _write(tmp_path / "carried.json", doc)
    run = _run_dir(tmp_path / "run", analyze_trace(path, include_unlinked=True), period=0.00002)  # covers every event
    p = analyze_trace(path, power=run)["power"]
    assert set(p["not_counted_j"]) == {"carried_over", "unlinked"}
    assert p["not_counted_j"]["carried_over"] == pytest.approx(300 * 62e-6, rel=0.02)  # 62 us of carried-over work
    total = sum(p["by_category_j"].values()) + p["idle_j"] + sum(p["not_counted_j"].values())
    assert total == pytest.approx(p["energy_in_trace_window_j"], rel=1e-6)
    assert analyze_trace(path, power=run, include_unlinked=True)["power"]["not_counted_j"] is None
