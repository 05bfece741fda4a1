"""The pass over a big trace split across processes (footprint/kernels/parallel.py) equals the sequential one.

The size threshold is lowered so that real shared traces of a few MB take the parallel path; every case
compares the whole analysis (not only the parse) with the sequential reader's on the same file.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from _paths import SHARED

from footprint.kernels import parallel
from footprint.kernels.analysis import analyze_trace

TIMESFORMER = SHARED / "data/traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
HTA_NCCL = SHARED / "data/traces/hta/tests/data/nccl_parser_config/nccl_data.json.gz"


def _plain(src: Path, tmp: Path, indent: int | None = None) -> Path:
    out = tmp / (src.name.removesuffix(".gz"))
    with gzip.open(src, "rb") as f:
        raw = f.read()
    out.write_bytes(raw if indent is None else json.dumps(json.loads(raw), indent=indent).encode())
    return out


def _without_timing(result: dict[str, Any]) -> dict[str, Any]:
    trace = {k: v for k, v in result["trace"].items() if k not in ("parse_seconds", "parse_mb_per_s")}
    return {**result, "trace": trace}


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> tuple[dict[str, Any], dict[str, Any]]:
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "1")
    seq = analyze_trace(path)
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", str(workers))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    return seq, analyze_trace(path)


@pytest.mark.parametrize("source", [TIMESFORMER, HTA_NCCL], ids=["tracelens-h100", "hta-nccl"])
@pytest.mark.parametrize("workers", [2, 5])
def test_parallel_pass_equals_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: Path, workers: int) -> None:
    if not source.is_file():
        pytest.skip(f"{source} not in this checkout")
    path = _plain(source, tmp_path)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", str(workers))
    assert parallel.scan_parallel(path, str(path)) is not None  # the parallel path is really taken
    seq, par = _both(path, monkeypatch, workers)
    assert _without_timing(par) == _without_timing(seq)
    assert par["trace"]["events"] > 10_000


def test_a_cut_inside_a_nested_value_falls_back_to_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries whose args hold lists of objects, one per line: most line-broken '},{' are not between events."""
    nested = {"device": 0, "l": [{"i": i} for i in range(60)]}
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "dur": 5, "args": nested}
    events = [{**kernel, "name": f"k{i}", "ts": 10 * i} for i in range(400)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "7")
    assert parallel.scan_parallel(path, str(path)) is None
    seq, par = _both(path, monkeypatch, 7)
    assert _without_timing(par) == _without_timing(seq) and seq["busy_time_us"] == 2000


def test_a_damaged_big_trace_is_reported_as_the_one_pass_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not TIMESFORMER.is_file():
        pytest.skip(f"{TIMESFORMER} not in this checkout")
    path = _plain(TIMESFORMER, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    seq, par = _both(path, monkeypatch, 3)
    assert _without_timing(par) == _without_timing(seq)
    assert any("ends early or is damaged" in w for w in par["warnings"])


def test_workers_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "3")
    assert parallel.workers() == 3
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "x")
    assert 1 <= parallel.workers() <= 8
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "1")
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    path = _plain(HTA_NCCL, tmp_path)
    assert parallel.workers() == 1 and parallel.scan_parallel(path, str(path)) is None
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "2")
    assert parallel.scan_parallel(path, str(path)) is not None
