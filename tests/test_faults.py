"""Faults that lose nothing and signals passed on faithfully (README "Promises"), one test per case of issue 12.

The file system faults are real where the machine allows them: a read-only and a full tmpfs mounted in a
private mount namespace (``unshare -m`` as root, ``unshare -rm`` otherwise), skipped with the reason where
neither works; a run directory under a regular file (NotADirectoryError) stands in-process for "cannot be
written" everywhere. Signals go through a real pseudo-terminal (Ctrl-C is the byte 0x03 typed into it) and
real ``kill``; the distributed case is a real two-rank torchrun over gloo.
"""

from __future__ import annotations

import json
import math
import os
import pty
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from _torchrun import clean_env, torchrun

import footprint
from footprint import FootprintWarning
from footprint.errors import FootprintError
from footprint.tracking import runrecord
from meters.fake_nvml import FakeNVML

PY = sys.executable
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="Linux process and file system faults"),
]


# ================================================================================================
# footprint.track() never raises for bad arguments
# ================================================================================================
BAD_ARGUMENTS = [
    {"site": 123},
    {"site": [1, 2]},
    {"output_dir": None},
    {"output_dir": 5.5},
    {"period_s": -1},
    {"period_s": math.nan},
    {"period_s": "fast"},
    {"name": "../x"},
    {"name": 5},
    {"name": ""},
    {"gpus": object()},
    {"gpus": [-1]},
    {"model": "x"},
    {"model": {"params": "abc"}},
    {"dtype": 5},
    {"host": "yes"},
    {"handle_sigterm": None},
    {"retention": "forever"},
    {"source": 3},
    {"no_such_argument": 1},
]


@pytest.mark.parametrize("bad", BAD_ARGUMENTS, ids=lambda b: f"{next(iter(b))}={next(iter(b.values()))!r}"[:40])
def test_track_never_raises_for_bad_arguments(bad: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """6 of 15 bad arguments raised into user code (`site=123`, `output_dir=None`...): now one warning, the default, a note."""
    monkeypatch.chdir(tmp_path)  # output_dir=None falls back to ./runs
    args: dict[str, Any] = {"name": "bad", "output_dir": tmp_path, "nvml": FakeNVML("1xA100-SXM4-40GB"), "host": False, **bad}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with footprint.track(**args) as t:
            t.step(tokens=10)
            time.sleep(0.05)
    ours = [w for w in caught if issubclass(w.category, FootprintWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert t.run is not None and t.run["energy"]["gpu_j"] > 0 and t.run["steps"] == 1
    assert any("argument ignored" in n for n in t.run["notes"]), t.run["notes"]
    assert Path(t.run["run_dir"]).resolve().is_relative_to(Path(tmp_path).resolve())


def test_framework_callbacks_never_raise_for_bad_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every callback (Hugging Face, Lightning, Accelerate) opens its tracker through the shared session."""
    from footprint.integrations.session import Session

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xL4")
    with pytest.warns(FootprintWarning, match="unknown argument"):
        session = Session("test", name="../x", output_dir=tmp_path, site=123, host=False, bogus=1)
        t = session.begin()
    t.step(tokens=3)
    run = t.stop()
    assert run is not None and run["tokens"] == 3 and sum("argument ignored" in n for n in run["notes"]) == 3


def test_track_methods_never_raise_for_bad_values(tmp_path: Path) -> None:
    with footprint.track(name="m", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False) as t:
        t.step(tokens="many", flops=object())  # type: ignore[arg-type]
        t.begin_window({"not": "hashable"})  # type: ignore[arg-type]
        t.end_window(None)  # type: ignore[arg-type]
        t.step(tokens=5)
    assert t.run is not None and t.run["steps"] >= 1


# ================================================================================================
# Run names: unique, and inside --output-dir
# ================================================================================================
def test_same_name_twice_gets_a_suffix_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs with the same --name overwrote each other's run.json and mixed their samples."""
    runs = []
    for _ in range(2):
        with footprint.track(name="same", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False) as t:
            time.sleep(0.05)
        runs.append(t)
    assert [t.run_dir.name for t in runs] == ["same", "same-2"]
    assert "run name 'same' is taken" in capsys.readouterr().err
    for t in runs:
        assert json.loads((t.run_dir / "run.json").read_text())["name"] == t.run_dir.name
    out = subprocess.run(
        [PY, "-m", "footprint.cli", "run", "--name", "same", "--output-dir", str(tmp_path), "--", "true"],
        capture_output=True,
        text=True,
        env=clean_env(FOOTPRINT_FAKE_NVML="1xL4"),
        timeout=60,
    )
    assert out.returncode == 0 and "recorded as 'same-3'" in out.stderr and (tmp_path / "same-3" / "run.json").is_file()


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".", ".."])
def test_name_cannot_escape_the_output_dir(tmp_path: Path, name: str) -> None:
    out = tmp_path / "runs"
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", "run", "--name", name, "--output-dir", str(out), "--", "true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(FOOTPRINT_FAKE_NVML="1xL4"),
        timeout=60,
    )
    assert proc.returncode == 2 and "footprint: error: --name" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, inside or outside


# ================================================================================================
# The run directory cannot be written
# ================================================================================================
def test_unwritable_run_directory_falls_back_to_a_temporary_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with footprint.track(name="fb", output_dir=tmp_path / "a-file" / "runs", nvml=FakeNVML("1xL4"), host=False) as t:
        for _ in range(3):
            time.sleep(0.05)
            t.step(tokens=1)
    err = capsys.readouterr().err
    assert err.count("footprint: cannot write the run directory") == 1 and "the training goes on" in err
    assert t.fallback is not None and str(t.fallback) in err
    run = json.loads((t.fallback / "run.json").read_text())
    assert run["energy"]["gpu_j"] > 0 and run["steps"] == 3
    assert any("cannot write the run directory" in n for n in run["notes"])
    shutil.rmtree(t.fallback)


def test_nothing_writable_measures_in_memory_and_prints_the_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a-file" / "tmp"))
    with footprint.track(name="mem", output_dir=tmp_path / "a-file" / "runs", nvml=FakeNVML("1xL4"), host=False) as t:
        time.sleep(0.1)
        t.step(tokens=7)
    err = capsys.readouterr().err
    assert "measuring in memory" in err and "run 'mem'" in err and "GPU energy" in err
    assert t.memory_only and t.run is not None and t.run["energy"]["gpu_j"] > 0 and t.run["tokens"] == 7
    a = footprint.assess(t.run, samples=0)  # the totals still reach the user, and an assessment
    assert a["climate_change"].total > 0


def _namespace() -> list[str] | None:
    """A command prefix giving a private mount namespace where tmpfs can be mounted, or None."""
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        if shutil.which(prefix[0]) is None:
            continue
        probe = subprocess.run(
            [*prefix, "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt && echo ok"], capture_output=True, text=True
        )
        if probe.stdout.strip() == "ok":
            return prefix
    return None


NAMESPACE = _namespace()
needs_mounts = pytest.mark.skipif(
    NAMESPACE is None, reason="no private mount namespace here (unshare -m / -rm): tmpfs faults not simulated"
)


def _run_on_tmpfs(tmp: Path, mount_opts: str, gpus: str, name: str, args: str, after: str = "") -> tuple[Any, dict[str, Any]]:
    """`footprint run --output-dir MNT/runs` on a tmpfs mounted with ``mount_opts`` in a private mount namespace, then
    the shell commands ``after`` ({run}: the run directory); (the process, the record it wrote to
    $TMPDIR/footprint-runs/NAME-*), after checking it exited 0 without a traceback."""
    assert NAMESPACE is not None
    mnt = tmp / "mnt"
    mnt.mkdir()
    run = f"{mnt}/runs/{name}"
    script = f"{PY} -m footprint.cli run --name {name} --output-dir {mnt}/runs {args}; echo rc=$?; {after.format(run=run)}"
    cmd = f"mount -t tmpfs -o {mount_opts} tmpfs {mnt} && {script}"
    env = clean_env(FOOTPRINT_FAKE_NVML=gpus, TMPDIR=str(tmp))
    proc = subprocess.run([*NAMESPACE, "sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=90)
    assert "rc=0" in proc.stdout and "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads((next((tmp / "footprint-runs").glob(f"{name}-*")) / "run.json").read_text())


@needs_mounts
def test_read_only_output_dir_loses_nothing(tmp_path: Path) -> None:
    proc, run = _run_on_tmpfs(tmp_path, "ro", "1xA100-SXM4-40GB", "r", f"-- {PY} -c 'import time; time.sleep(0.5)'")
    assert proc.stderr.count("cannot write the run directory") == 1 and "Read-only file system" in proc.stderr
    assert run["energy"]["gpu_j"] > 0 and run["duration_s"] >= 0.5


@needs_mounts
def test_disk_full_during_a_run_loses_nothing(tmp_path: Path) -> None:
    """Disk full during a run gave exit 0, no run.json, a 0-byte temp file, no message, and `recover` crashed."""
    args = f"--period 0.01 -- {PY} -c 'import time; time.sleep(3)'"
    after = f"ls -la {{run}}/ranks; {PY} -m footprint.cli recover {{run}}; echo recover=$?"
    proc, run = _run_on_tmpfs(tmp_path, "size=48k", "8xA100-SXM4-40GB", "f", args, after)
    assert proc.stderr.count("No space left on device") >= 1
    assert proc.stderr.count("footprint: writing the run directory") == 1  # said once, however many ticks failed
    assert ".tmp" not in proc.stdout  # no temporary file left behind
    assert "recover=0" in proc.stdout or ("recover=2" in proc.stdout and "cannot write" in proc.stderr)
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 8 and all(d["energy_j"] > 0 for d in gpus) and run["duration_s"] >= 3  # measured to the end


def test_write_json_leaves_no_temporary_file_when_the_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(FootprintError, match="No space left on device"):  # one line naming the path (footprint.outputs)
        runrecord.write_json(tmp_path / "run.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


# ================================================================================================
# Meters that measure nothing say why
# ================================================================================================
@pytest.mark.parametrize(
    "spec, words",
    [
        ("missing", "NVML library not found"),
        ("3xNOPE", "not a valid fake device spec"),
        ("99999xA100-SXM4-40GB", "more than 4096"),
    ],
)
def test_nvml_missing_or_a_malformed_fake_spec_is_a_note_in_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, words: str
) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", spec)
    with footprint.track(name="n", output_dir=tmp_path, host=False) as t:
        time.sleep(0.05)
    assert t.run is not None and t.run["devices"] == []
    assert any(words in n for n in t.run["notes"]), t.run["notes"]


# ================================================================================================
# footprint run: its command supervised
# ================================================================================================
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    out, mode = sys.argv[1], sys.argv[2]
    got = []
    if mode == "count":  # a training loop that saves a checkpoint when told to stop
        signal.signal(signal.SIGINT, lambda s, f: got.append(s))
        signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    open(out + ".ready", "w").write(str(os.getpid()))
    t = time.time()
    while not got and time.time() - t < 30:
        time.sleep(0.01)
    time.sleep(1.0)  # the checkpoint save a second signal would cut short
    open(out, "w").write(",".join(map(str, got)))
""")


def _supervised(tmp_path: Path, mode: str, send: str) -> tuple[int, str, str]:
    """Run `footprint run -- python CHILD` on a pseudo-terminal, deliver ``send`` (ctrl-c, or a signal name to
    footprint run's PID), and return (footprint run's exit code, what the child received, its output)."""
    (tmp_path / "child.py").write_text(CHILD)
    out = tmp_path / "got"
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.chdir(tmp_path)
        os.environ.update(clean_env(FOOTPRINT_FAKE_NVML="1xL4"))
        os.execv(PY, [PY, "-m", "footprint.cli", "run", "--output-dir", "runs", "--", PY, "child.py", str(out), mode])
    t0 = time.time()
    while not (tmp_path / "got.ready").exists() and time.time() - t0 < 60:
        time.sleep(0.02)
    time.sleep(0.2)
    if send == "ctrl-c":
        os.write(fd, b"\x03")  # the terminal turns it into SIGINT for the whole foreground process group
    else:
        os.kill(pid, getattr(signal, send))
    text = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        text += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.read_text() if out.exists() else "", text.decode(errors="replace")


def test_ctrl_c_reaches_the_command_once(tmp_path: Path) -> None:
    """Ctrl-C delivered a second SIGINT to the child and cut a checkpoint save short."""
    code, got, text = _supervised(tmp_path, "count", "ctrl-c")
    assert got == str(int(signal.SIGINT)), (got, text)  # once: from the terminal, not again from footprint run
    assert code == 0 and "Traceback" not in text and "run.json" in text


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGUSR1"])
def test_a_signal_sent_to_footprint_run_is_forwarded_once(tmp_path: Path, sig: str) -> None:
    code, got, text = _supervised(tmp_path, "count" if sig != "SIGUSR1" else "count", sig)
    if sig == "SIGUSR1":  # the child has no handler: SIGUSR1 kills it, and footprint run says so the shell's way
        assert code == 128 + signal.SIGUSR1, text
        return
    assert got == str(int(getattr(signal, sig))), (got, text)
    assert code == 0 and "Traceback" not in text
    run = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert any(f"passed on {sig}" in n for n in run["notes"])


@pytest.mark.parametrize("sig, expected", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_command_killed_by_a_signal_exits_128_plus_its_number(tmp_path: Path, sig: str, expected: int) -> None:
    """A child killed by SIGTERM made footprint run exit 241 instead of 143, by SIGINT 254 instead of 130."""
    code, _, text = _supervised(tmp_path, "die", sig)
    assert code == expected, text
    assert json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())["energy"]["gpu_j"] > 0


def test_the_command_is_not_left_unmeasured_when_footprint_run_dies(tmp_path: Path) -> None:
    """After `footprint run` was killed (-9), the training command kept running unmeasured."""
    ready = tmp_path / "pid"
    code = f"import os, time; open({str(ready)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    parent = subprocess.Popen(
        [PY, "-m", "footprint.cli", "run", "--output-dir", str(tmp_path / "runs"), "--", PY, "-c", code],
        env=clean_env(FOOTPRINT_FAKE_NVML="1xL4"),
    )
    t0 = time.time()
    while not ready.exists() and time.time() - t0 < 60:
        time.sleep(0.02)
    time.sleep(0.2)
    child = int(ready.read_text())
    parent.kill()
    parent.wait()

    def alive() -> bool:
        try:
            return "State:\tZ" not in Path(f"/proc/{child}/status").read_text()
        except FileNotFoundError:
            return False

    t0 = time.time()
    while alive() and time.time() - t0 < 10:
        time.sleep(0.02)
    gone = not alive()
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the command outlived `footprint run` (PR_SET_PDEATHSIG not set?)"
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", "recover", str(next((tmp_path / "runs").iterdir()))], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr  # what was measured until the kill is recovered


# ================================================================================================
# Distributed: the exit gather never blocks
# ================================================================================================
RAISING_RANK = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist
    import footprint
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        with footprint.track(name="ddp", output_dir=sys.argv[1], host=False) as t:
            for step in range(20):
                if rank == 1 and step == 2:
                    raise RuntimeError("rank 1 fails")
                x = torch.ones(4)
                dist.all_reduce(x)
                time.sleep(0.05)
                t.step(tokens=10)
    except RuntimeError:
        os._exit(3)
    os._exit(0)
""")


def test_a_rank_that_raises_does_not_block_the_exit_gather(tmp_path: Path) -> None:
    """A rank that raised inside `with track(...)` left the others blocked in the exit gather."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "ddp.py"
    script.write_text(RAISING_RANK)
    t0 = time.time()
    proc = torchrun(script, tmp_path, 29571, timeout=100, FOOTPRINT_GATHER_TIMEOUT_S="5")
    assert time.time() - t0 < 60, "the ranks blocked at exit"
    assert proc.returncode != 0  # the job failed, as it should
    ranks = tmp_path / "ddp" / "ranks"
    assert sorted(p.name for p in ranks.glob("rank-*.json")) == ["rank-00000.json", "rank-00001.json"]
    rank1 = json.loads((ranks / "rank-00001.json").read_text())
    assert any("left the tracked block with RuntimeError" in n for n in rank1["notes"])
    merged = subprocess.run([PY, "-m", "footprint.cli", "merge", str(tmp_path / "ddp")], capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr
    run = json.loads((tmp_path / "ddp" / "run.json").read_text())
    assert len([d for d in run["devices"] if d["component"] == "gpu"]) == 2 and run["energy"]["gpu_j"] > 0
