"""Writing files, fuzzed (issue 21, class 1): every command that writes goes through `footprint.outputs`.

Each writer is pointed at each kind of target a careless user or an attacker can give it (a directory, a named
pipe, a device, '', '/', a dangling symlink, a symlink planted out of the directory, a path under a file, a
300-character name) through the real CLI in the fuzz harness (tests/_fuzz.py: a deadline, so a pipe that would
hang fails the test). The contract: one `footprint: error:` line, exit 2, the pipe still a pipe, the file the
symlink points at untouched. A size limit (`ulimit -f`) and a full disk leave no partial or temporary file.
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _fuzz import REPO, CliServer, verdict
from _paths import SCENARIOS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(300)
FUZZ = settings(  # as tests/test_fuzz.py's `fuzz` profile: the same examples on every run
    max_examples=int(os.environ.get("FOOTPRINT_FUZZ_EXAMPLES", "12")),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
SCENARIO = SCENARIOS / "finetune-small.yaml"
SMI_LOG = REPO / "examples" / "logs" / "nvidia-smi.csv"
KINDS = ("dir", "fifo", "device", "empty", "root", "dangling", "outside", "under_file", "long")


def _target(tmp: Path, kind: str) -> tuple[str, Path]:
    """A bad `-o` of this kind, and the victim file that must stay as it was."""
    victim = tmp / "elsewhere" / "victim.txt"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("keep")
    d = tmp / "target"
    d.mkdir(exist_ok=True)
    if kind == "fifo":
        os.mkfifo(d / "pipe")
    if kind == "dangling":
        os.symlink(d / "nowhere", d / "dangling")
    if kind == "outside":
        os.symlink(victim, d / "link.out")
    if kind == "under_file":
        (d / "file.txt").write_text("a file")
    return {
        "dir": str(d),
        "fifo": str(d / "pipe"),
        "device": "/dev/null",
        "empty": "",
        "root": "/",
        "dangling": str(d / "dangling"),
        "outside": str(d / "link.out"),
        "under_file": str(d / "file.txt" / "x.out"),
        "long": str(d / ("x" * 300 + ".out")),
    }[kind], victim


def _writers(good_run: Path) -> dict[str, list[str]]:
    """Each writing command, `{}` where its output goes."""
    return {
        "assess": ["assess", str(SCENARIO), "--samples", "50", "-o", "{}"],
        "report": ["report", str(SCENARIO), "--samples", "50", "--quiet", "-o", "{}", "--format", "json"],
        "report-md": ["report", str(SCENARIO), "--samples", "50", "--quiet", "-o", "{}", "--format", "md"],
        "emissions-csv": ["export", "emissions-csv", str(good_run), "-o", "{}"],
        "prometheus": ["export", "prometheus", str(good_run), "--samples", "50", "-o", "{}"],
        "import-smi": ["import", "nvidia-smi", str(SMI_LOG), "--gpu", "A100-PCIe-40GB", "-o", "{}"],
        "disclose": ["disclose", str(SCENARIO), "--as", "sci", "-o", "{}"],
    }


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", ["assess", "report", "report-md", "emissions-csv", "prometheus", "import-smi", "disclose"])
def test_every_writer_refuses_what_is_not_a_new_or_regular_file(
    cli: CliServer, good_run: Path, tmp_path: Path, writer: str, kind: str
) -> None:
    if writer == "import-smi" and kind in ("dir",):
        pytest.skip("an empty directory is a valid run directory to import into")
    path, victim = _target(tmp_path, kind)
    argv = [a.replace("{}", path) for a in _writers(good_run)[writer]]
    o = cli.run(argv, cwd=tmp_path)
    assert verdict(o) is None, (verdict(o), argv, o.err[-400:])
    assert o.code == 2, (argv, o.err[-400:])
    assert len([x for x in o.err.splitlines() if x.startswith("footprint: error")]) == 1
    assert victim.read_text() == "keep"
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(path).st_mode)
    if kind == "outside":
        assert os.path.islink(path)
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"


@FUZZ
@given(name=st.text(min_size=1, max_size=40))
def test_fuzz_output_names_are_written_whole_or_refused_in_one_line(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    tmp = tmp_path_factory.mktemp("names")
    o = cli.run(["assess", str(SCENARIO), "--samples", "50", "-o", name], cwd=tmp)
    assert verdict(o) is None, (verdict(o), name, o.err[-300:])
    if o.code == 0:
        written = [p for p in tmp.rglob("*") if p.is_file()]
        assert len(written) == 1 and written[0].stat().st_size > 0
    assert not list(tmp.rglob("*.tmp"))


def _limited(limit_bytes: int) -> Any:
    def set_limit() -> None:  # pragma: no cover - in the child
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return set_limit


@pytest.mark.parametrize(
    "argv",
    [
        ["report", str(SCENARIO), "--samples", "50", "--quiet", "-o", "out.html"],
        ["assess", str(SCENARIO), "--samples", "50", "--format", "json", "-o", "out.json"],
    ],
)
def test_a_size_limit_leaves_no_partial_file(tmp_path: Path, argv: list[str]) -> None:
    """`ulimit -f` (RLIMIT_FSIZE) below the output's size: one line, exit 2, and nothing half-written."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited(2048),
    )
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "Traceback" not in proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("footprint: error")]
    assert len(errors) == 1 and "ulimit -f" in errors[0], proc.stderr[-300:]
    assert list(tmp_path.iterdir()) == [], [p.name for p in tmp_path.iterdir()]


def test_an_existing_file_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    from footprint.outputs import write_text

    out = tmp_path / "r.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_text(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    fresh = write_text(tmp_path / "fresh.txt", "x")
    assert stat.S_IMODE(fresh.stat().st_mode) & 0o044, "a new file is readable as `open` would make it, not 0600"


def test_no_clobber_refuses_a_file_that_appears_while_writing(tmp_path: Path) -> None:
    from footprint.errors import FootprintError
    from footprint.outputs import atomic_path

    out = tmp_path / "x.txt"
    with pytest.raises(FootprintError, match="exists"), atomic_path(out, replace=False) as tmp:
        tmp.write_text("mine")
        out.write_text("theirs")  # another writer got there first
    assert out.read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]


def test_a_full_disk_leaves_no_partial_file(tmp_path: Path) -> None:
    """A 64 KiB tmpfs (needs root): the report does not fit; one line, exit 2, nothing left on the disk."""
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "footprint.cli", "report", str(SCENARIO), "--samples", "50", "--quiet"]
            + ["-o", str(disk / "r.html")],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-400:]
        assert "No space left on device" in proc.stderr
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)
