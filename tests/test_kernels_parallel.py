"""The pass over a big trace split across processes (footprint/kernels/parallel.py) equals the sequential one.

The size threshold is lowered so that real shared traces of a few MB take the parallel path; every case
compares the whole analysis (not only the parse) with the sequential reader's on the same file. Each comparison
runs in a new interpreter, single-threaded as the CLI is: the parallel pass never forks from a threaded process,
and this test runner keeps threads from earlier tests (a dashboard's, a server's), so in-process it would always
take the sequential path and compare it with itself.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO, SHARED

from footprint.kernels import parallel

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


CHILD = """
import json, os, sys
from pathlib import Path
from footprint.kernels import parallel
from footprint.kernels.analysis import analyze_trace

path, workers = sys.argv[1], sys.argv[2]
parallel.MIN_BYTES = 0
os.environ["FOOTPRINT_TRACE_WORKERS"] = "1"
seq = analyze_trace(path)
os.environ["FOOTPRINT_TRACE_WORKERS"] = workers
taken = parallel.scan_parallel(Path(path), path) is not None
json.dump({"taken": taken, "seq": seq, "par": analyze_trace(path)}, sys.stdout, default=str)
"""


def _both(path: Path, workers: int) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """(whether the parallel path was taken, the sequential analysis, the analysis with `workers` processes)."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(workers)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return out["taken"], out["seq"], out["par"]


@pytest.mark.parametrize("source", [TIMESFORMER, HTA_NCCL], ids=["tracelens-h100", "hta-nccl"])
@pytest.mark.parametrize("workers", [2, 5])
def test_parallel_pass_equals_sequential(tmp_path: Path, source: Path, workers: int) -> None:
    if not source.is_file():
        pytest.skip(f"{source} not in this checkout")
    taken, seq, par = _both(_plain(source, tmp_path), workers)
    assert taken  # the parallel path is really taken
    assert _without_timing(par) == _without_timing(seq)
    assert par["trace"]["events"] > 10_000


def test_a_cut_inside_a_nested_value_falls_back_to_one_pass(tmp_path: Path) -> None:
    """Entries whose args hold lists of objects, one per line: most line-broken '},{' are not between events."""
    nested = {"device": 0, "l": [{"i": i} for i in range(60)]}
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "dur": 5, "args": nested}
    events = [{**kernel, "name": f"k{i}", "ts": 10 * i} for i in range(400)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    taken, seq, par = _both(path, 7)
    assert not taken
    assert _without_timing(par) == _without_timing(seq) and seq["busy_time_us"] == 2000


def test_a_damaged_big_trace_is_reported_as_the_one_pass_reports_it(tmp_path: Path) -> None:
    if not TIMESFORMER.is_file():
        pytest.skip(f"{TIMESFORMER} not in this checkout")
    path = _plain(TIMESFORMER, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    _, seq, par = _both(path, 3)
    assert _without_timing(par) == _without_timing(seq)
    assert any("ends early or is damaged" in w for w in par["warnings"])


def test_workers_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "3")
    assert parallel.workers() == 3
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "x")
    assert 1 <= parallel.workers() <= 8
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "1")
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    if not HTA_NCCL.is_file():
        pytest.skip(f"{HTA_NCCL} not in this checkout")
    path = _plain(HTA_NCCL, tmp_path)
    assert parallel.workers() == 1 and parallel.scan_parallel(path, str(path)) is None
    assert _both(path, 2)[0]  # two workers in a single-threaded process: the parallel path
