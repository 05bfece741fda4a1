"""Several ranks' traces analysed together (footprint/kernels/multirank.py), checked against HTA's definitions.

The reference set is PARAM's 8-rank DLRM archive (V100s, NCCL all-to-all). HTA's temporal breakdown
and comm/comp overlap are re-implemented here from HTA 0.5.0's code (hta/analyzers/breakdown_analysis.py,
communication_analysis.py: merged kernel intervals, its kernel-name rules) on the raw JSON. Every rank's
figures must equal them with one stated difference: footprint's computation counts memsets (and
``*Sync`` kernels) as computation, HTA does not; the test measures that difference exactly (it is what
separates the two compute figures) and docs/kernels.md holds HTA's own output on the same set.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO, SHARED

from footprint.errors import FootprintError
from footprint.kernels.analysis import analyze_trace
from footprint.kernels.multirank import analyze_ranks, render_ranks

DLRM = SHARED / "data/traces/param/et_replay/tests/inputs/dlrm_kineto.tar.gz"
TIMESFORMER = SHARED / "data/traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
# HTA counts every GPU event; where the linked-event rule is available, count them all as HTA does.
ALL_EVENTS = {"include_unlinked": True} if "include_unlinked" in inspect.signature(analyze_trace).parameters else {}

pytestmark = pytest.mark.skipif(not DLRM.is_file(), reason="the shared DLRM traces are not in this checkout")

# ---- HTA's definitions, from its code ---------------------------------------------------------------------
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def _merge(ivs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(ivs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(ivs: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in ivs)


def _overlap(x: list[tuple[float, float]], y: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in x for c, d in y)


def hta_figures(doc: dict[str, Any], memsets_compute: bool) -> dict[str, Any]:
    """HTA's temporal breakdown (percentages rounded as HTA does) and comm/comp overlap of one rank; with
    `memsets_compute`, memsets and Sync kernels count as computation (footprint's rule)."""
    gpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    iv = [(e["ts"], e["ts"] + e["dur"]) for e in gpu]
    merged = _merge(iv)
    span = merged[-1][1] - merged[0][0]
    idle = span - _length(merged)

    def computes(e: dict[str, Any]) -> bool:
        if memsets_compute:
            return e["cat"] != "gpu_memcpy" and not _HTA_COMM.match(e["name"])
        return not _HTA_NOT_COMPUTE.match(e["name"])

    comp = _merge([v for e, v in zip(gpu, iv, strict=True) if computes(e)])
    comm = _merge([v for e, v in zip(gpu, iv, strict=True) if _HTA_COMM.match(e["name"])])
    return {
        "rank": doc["distributedInfo"]["rank"],
        "idle_pct": round(100 * idle / span, 2),
        "compute_pct": round(100 * _length(comp) / span, 2),
        "non_compute_pct": round(100 * (span - idle - _length(comp)) / span, 2),
        "overlap": _overlap(comm, comp) / _length(comm),
        "communication_us": _length(comm),
    }


@pytest.fixture(scope="module")
def dlrm() -> dict[str, Any]:
    return analyze_ranks(DLRM, **ALL_EVENTS)


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    with tarfile.open(DLRM) as tf:
        return [json.load(tf.extractfile(m)) for m in tf.getmembers() if m.isfile() and m.name.endswith(".json")]  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def hta(docs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {f["rank"]: f for f in (hta_figures(d, memsets_compute=True) for d in docs)}


def test_every_rank_matches_htas_temporal_breakdown_and_overlap(dlrm: dict[str, Any], hta: dict[int, dict[str, Any]]) -> None:
    assert [x["rank"] for x in dlrm["ranks"]] == list(range(8)) and dlrm["warnings"] == []
    for x in dlrm["ranks"]:
        ref = hta[x["rank"]]
        for key in ("idle_pct", "compute_pct", "non_compute_pct"):
            assert x["temporal_breakdown"][key] == pytest.approx(ref[key], abs=0.011), (x["rank"], key)
        assert x["comm_comp_overlap"] == pytest.approx(ref["overlap"], abs=1e-9)
        assert x["communication_us"] == pytest.approx(ref["communication_us"])
        assert x["steps"] == 1 and x["step_time_us"] > x["gpu_busy_us"] > 0


def test_the_one_difference_from_hta_is_memsets_counted_as_computation(dlrm: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """HTA's own rule differs only where a rank has memsets (or Sync kernels) outside communication."""
    strict = {f["rank"]: f for f in (hta_figures(d, memsets_compute=False) for d in docs)}
    differs = set()
    for x in dlrm["ranks"]:
        ref = strict[x["rank"]]
        assert x["temporal_breakdown"]["idle_pct"] == pytest.approx(ref["idle_pct"], abs=0.011)
        assert x["temporal_breakdown"]["compute_pct"] >= ref["compute_pct"] - 0.011
        if abs(x["temporal_breakdown"]["compute_pct"] - ref["compute_pct"]) > 0.011:
            differs.add(x["rank"])
    memset_ranks = {d["distributedInfo"]["rank"] for d in docs if any(e.get("cat") == "gpu_memset" for e in d["traceEvents"])}
    assert differs <= memset_ranks and len(differs) < 8


def test_the_straggler_is_the_rank_others_wait_for(dlrm: dict[str, Any], hta: dict[int, dict[str, Any]]) -> None:
    st = dlrm["straggler"]
    least = sorted(hta.values(), key=lambda f: f["communication_us"])
    assert st["rank"] == least[0]["rank"] == 7
    assert st["candidates"] == [least[0]["rank"], least[1]["rank"]]  # HTA 0.5.0 names ranks 2 and 7 on this set
    slow = max(dlrm["ranks"], key=lambda x: x["step_time_us"])
    assert st["slowest_step_rank"] == slow["rank"] and st["slowest_step_over_median_pct"] > 0
    s = dlrm["summary"]
    assert s["ranks"] == 8 and s["step_time_us"]["min"] <= s["step_time_us"]["median"] <= s["step_time_us"]["max"]
    assert s["energy_j"] is None and "--power" in s["energy_note"]


def test_a_directory_is_the_same_as_the_archive(dlrm: dict[str, Any], tmp_path: Path) -> None:
    with tarfile.open(DLRM) as tf:
        tf.extractall(tmp_path, filter="data")
    d = analyze_ranks(tmp_path / "dlrm_kineto", **ALL_EVENTS)
    strip = ("source", "path")
    assert [{k: v for k, v in x.items() if k not in strip} for x in d["ranks"]] == [
        {k: v for k, v in x.items() if k not in strip} for x in dlrm["ranks"]
    ]


def test_cli_json_and_table(tmp_path: Path) -> None:
    with tarfile.open(DLRM) as tf:
        tf.extractall(tmp_path, filter="data")
    env_cmd = [sys.executable, "-m", "footprint.cli", "kernels", "analyze"]
    out = subprocess.run([*env_cmd, str(tmp_path / "dlrm_kineto"), "--format", "json"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert len(d["ranks"]) == 8 and d["straggler"]["rank"] == 7
    table = subprocess.run([*env_cmd, "--ranks", str(DLRM)], capture_output=True, text=True, cwd=REPO)
    assert table.returncode == 0, table.stderr
    assert "Straggler: rank 7" in table.stdout and table.stdout.count("\n") > 10
    bad = subprocess.run([*env_cmd, "--ranks", str(TIMESFORMER)], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and bad.stderr.startswith("footprint: error:") and "Traceback" not in bad.stderr


def test_ranks_without_numbers_are_numbered_in_file_order(tmp_path: Path) -> None:
    with tarfile.open(DLRM) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith(".json"))
        doc = json.load(tf.extractfile(member))  # type: ignore[arg-type]
    doc.pop("distributedInfo")
    for name in ("b.json", "a.json"):
        (tmp_path / name).write_text(json.dumps(doc))
    d = analyze_ranks(tmp_path)
    assert [x["rank"] for x in d["ranks"]] == [0, 1] and [x["source"] for x in d["ranks"]] == ["a.json", "b.json"]
    assert any("file order" in w for w in d["warnings"])
    assert d["straggler"]["basis"].startswith("least communication")
    assert "Straggler: rank" in render_ranks(d)


def test_energy_per_rank_is_each_ranks_attributed_energy(tmp_path: Path) -> None:
    if not TIMESFORMER.is_file():
        pytest.skip("the TraceLens H100 trace is not in this checkout")
    import gzip

    from test_kernels_trace import _run_dir

    ranks = tmp_path / "ranks"
    ranks.mkdir()
    raw = gzip.decompress(TIMESFORMER.read_bytes())
    for r in (0, 1):
        (ranks / f"rank-{r}.json").write_bytes(raw)
    single = analyze_trace(ranks / "rank-0.json")
    run = _run_dir(tmp_path / "run", single, period=0.01)
    d = analyze_ranks(ranks, power=run)
    expected = analyze_trace(ranks / "rank-0.json", power=run)["power"]["energy_in_trace_window_j"]
    assert [x["energy_j"] for x in d["ranks"]] == pytest.approx([expected, expected])
    assert d["summary"]["energy_j"] == pytest.approx(2 * expected) and d["summary"]["energy_note"] is None
    assert d["straggler"]["basis"].startswith("longest step")  # no communication kernels in this trace


@pytest.mark.parametrize("what", ["empty", "missing", "single file"])
def test_bad_targets_are_one_line_errors(tmp_path: Path, what: str) -> None:
    target = {"empty": tmp_path, "missing": tmp_path / "nope", "single file": TIMESFORMER}[what]
    with pytest.raises(FootprintError):
        analyze_ranks(target)


def test_an_unreadable_rank_is_left_out_and_said(tmp_path: Path) -> None:
    with tarfile.open(DLRM) as tf:
        tf.extractall(tmp_path, filter="data")
    ranks = tmp_path / "dlrm_kineto"
    victim = sorted(ranks.iterdir())[0]
    victim.write_bytes(b"\x1f\x8b garbage")
    d = analyze_ranks(ranks)
    assert len(d["ranks"]) == 7 and any("left out, unreadable" in w and victim.name in w for w in d["warnings"])
    for p in ranks.iterdir():
        p.write_text("not json")
    with pytest.raises(FootprintError, match="not valid JSON"):
        analyze_ranks(ranks)


def test_ranks_in_worker_processes_equal_ranks_one_by_one(dlrm: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from footprint.kernels import multirank

    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "3")
    assert multirank.workers() == 3
    assert analyze_ranks(DLRM, **ALL_EVENTS) == dlrm
    monkeypatch.setenv("FOOTPRINT_TRACE_WORKERS", "1")
    assert analyze_ranks(DLRM, **ALL_EVENTS) == dlrm
