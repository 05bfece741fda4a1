"""Runs lost or mixed (issue 21, class 2): one run directory per run, whatever runs at the same moment.

N processes (`footprint run --name same`) and N threads (`track(name=...)`) asking for one name each get their own
directory, each holding its whole record; the ranks of one torchrun launch (CPU gloo, as the other torchrun tests)
share one directory and a rerun under the same name gets a new suffix instead of overwriting; ranks without a
process group (SLURM-style) agree through the launch-keyed file; a failing rank's recovered record says which
totals are partial and from which ranks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from _torchrun import clean_env, torchrun

import footprint

pytestmark = pytest.mark.timeout(300)
PY = sys.executable
N = 4


def _runs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_n_processes_on_one_name_each_get_a_directory(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [PY, "-m", "footprint.cli", "run", "--name", "same", "--output-dir", str(tmp_path), "--", PY, "-c", "pass"],
            env=clean_env(FOOTPRINT_FAKE_NVML="1xA100-SXM4-40GB"),
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(N)
    ]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    runs = _runs(tmp_path)
    assert sorted(r.name for r in runs) == sorted(["same", *(f"same-{i}" for i in range(2, N + 1))])
    for r in runs:  # each directory holds one whole run: its own record, one rank
        rec = json.loads((r / "run.json").read_text())
        assert rec["name"] == r.name and len(rec["ranks"]) == 1
    assert sum("is taken" in e for e in errs) == N - 1  # the chosen name is said on stderr


def test_n_threads_on_one_name_each_get_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")
    barrier = threading.Barrier(N)
    dirs: list[Path] = []

    def work() -> None:
        t = footprint.track(name="th", output_dir=tmp_path, host=False, handle_sigterm=False)
        barrier.wait()
        t.start()
        t.step(tokens=10)
        t.stop()
        dirs.append(t.run_dir)

    threads = [threading.Thread(target=work) for _ in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(set(dirs)) == N and sorted(d.name for d in _runs(tmp_path)) == sorted(d.name for d in dirs)
    for d in dirs:
        assert json.loads((d / "run.json").read_text())["tokens"] == 10


def test_a_run_name_with_terminal_escapes_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", "run", "--name", "bad\x1b[31mred", "--output-dir", str(tmp_path), "--", PY, "-c", "pass"],
        env=clean_env(FOOTPRINT_FAKE_NVML="1xA100-SXM4-40GB"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "\x1b" not in proc.stderr and "control characters" in proc.stderr
    assert not any(tmp_path.iterdir())


TORCHRUN = textwrap.dedent("""
    import sys, time
    import torch.distributed as dist
    import footprint
    dist.init_process_group("gloo")
    t = footprint.track(name="ddp", output_dir=sys.argv[1], host=False).start()
    for _ in range(3):
        time.sleep(0.05)
        t.step(tokens=10)
    t.stop()
    dist.destroy_process_group()
""")


def test_a_torchrun_rerun_under_the_same_name_gets_a_new_suffix(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN)
    out = tmp_path / "runs"
    first = torchrun(script, out, 29581)
    assert first.returncode == 0, first.stderr[-2000:]
    before = (out / "ddp" / "run.json").read_bytes()
    second = torchrun(script, out, 29582)
    assert second.returncode == 0, second.stderr[-2000:]
    assert [r.name for r in _runs(out)] == ["ddp", "ddp-2"]
    assert (out / "ddp" / "run.json").read_bytes() == before  # the first run is untouched
    for r in _runs(out):  # both ranks of each launch in one directory, nothing mixed
        rec = json.loads((r / "run.json").read_text())
        assert sorted(x["rank"] for x in rec["ranks"]) == [0, 1] and rec["tokens"] == 60
    assert "'ddp' is taken" in second.stderr


RANK = textwrap.dedent("""
    import sys, time
    import footprint
    t = footprint.track(name="sl", output_dir=sys.argv[1], host=False).start()
    for _ in range(3):
        time.sleep(0.05)
        t.step(tokens=10)
    t.stop()
""")


def _slurm_launch(out: Path, step: str) -> None:
    procs = [
        subprocess.Popen(
            [PY, "-c", RANK, str(out)],
            env=clean_env(
                FOOTPRINT_FAKE_NVML="2xA100-SXM4-40GB",
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE="2",
                LOCAL_WORLD_SIZE="2",
                SLURM_JOB_ID="77",
                SLURM_STEP_ID=step,
                FOOTPRINT_GATHER_TIMEOUT_S="20",
            ),
        )
        for r in (1, 0)  # rank 1 first: it must wait for rank 0's claim
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)


def test_ranks_without_a_process_group_agree_on_one_suffix(tmp_path: Path) -> None:
    _slurm_launch(tmp_path, "0")
    _slurm_launch(tmp_path, "1")  # a second step under the same name: its own directory
    runs = _runs(tmp_path)
    assert [r.name for r in runs] == ["sl", "sl-2"]
    for r in runs:
        assert sorted(p.name for p in (r / "ranks").glob("rank-*.json")) == ["rank-00000.json", "rank-00001.json"]


FAILING = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist
    import footprint
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = footprint.track(name="fail", output_dir=sys.argv[1], host=False).start()
    for step in range(20):
        if rank == 1 and step == 3:
            os._exit(3)  # killed: no record, only its journal
        t.step(tokens=10)
        x = torch.ones(2)
        dist.all_reduce(x)
        time.sleep(0.3)
    t.stop()
""")


def test_a_failing_rank_is_recovered_and_its_partial_counts_are_said(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    script = tmp_path / "fail.py"
    script.write_text(FAILING)
    out = tmp_path / "runs"
    proc = torchrun(script, out, 29583, FOOTPRINT_GATHER_TIMEOUT_S="5")
    assert proc.returncode != 0
    run_dir = out / "fail"
    rec = subprocess.run([PY, "-m", "footprint.cli", "recover", str(run_dir)], capture_output=True, text=True, env=clean_env())
    assert rec.returncode == 0, rec.stderr[-800:]
    run = json.loads((run_dir / "run.json").read_text())
    assert sorted(r["rank"] for r in run["ranks"]) == [0, 1]  # no rank lost
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2 and all(d["energy_j"] > 0 for d in gpus)  # both ranks' energy kept
    partial = run["partial"]
    assert partial["energy"]["recovered_ranks"]  # a rebuilt rank: its energy is up to its last flush
    tokens = partial["tokens"]  # rank 1 died: its tokens are missing or only up to its last progress event
    assert tokens["bound"] == "lower" and 1 in tokens["without_ranks"] + tokens["recovered_ranks"]
    assert any(n.startswith("tokens: partial") for n in run["notes"])
    assert any(n.startswith("energy: partial") for n in run["notes"])
