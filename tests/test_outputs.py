"""The one safe writer (footprint.outputs): whole files or nothing, refusals before anything is opened."""

from __future__ import annotations

import os
import threading

import pytest

from footprint.errors import FootprintError
from footprint.outputs import atomic_dir, atomic_path, check_file_target, claim_dir, shown, write_text


def test_writes_whole_file_and_replaces_a_regular_one(tmp_path):
    out = tmp_path / "sub" / "report.md"
    write_text(out, "one")
    write_text(out, "two")
    assert out.read_text() == "two"
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.md"]  # no temporary left


@pytest.mark.parametrize("make", ["dir", "fifo", "empty", "root", "dangling", "outside", "under_file"])
def test_refuses_what_is_not_a_new_or_regular_file(tmp_path, make):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep")
    d = tmp_path / "target"
    d.mkdir()
    path = {
        "dir": d,
        "fifo": d / "pipe",
        "empty": "",
        "root": "/",
        "dangling": d / "dangling",
        "outside": d / "link",
        "under_file": d / "file.txt" / "x.md",
    }[make]
    if make == "fifo":
        os.mkfifo(path)
    if make == "dangling":
        os.symlink(d / "nowhere", path)
    if make == "outside":
        os.symlink(outside / "victim.txt", path)
    if make == "under_file":
        (d / "file.txt").write_text("a file")
    with pytest.raises(FootprintError) as e:
        write_text(path, "data")
    assert str(e.value).startswith("cannot write")
    assert "\n" not in str(e.value)
    assert (outside / "victim.txt").read_text() == "keep"


def test_symlink_to_a_regular_file_in_its_own_directory_is_written_through(tmp_path):
    (tmp_path / "real.txt").write_text("old")
    os.symlink("real.txt", tmp_path / "alias.txt")
    write_text(tmp_path / "alias.txt", "new")
    assert (tmp_path / "real.txt").read_text() == "new" and (tmp_path / "alias.txt").is_symlink()


def test_failure_inside_the_block_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "data.parquet"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer crashed")
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.parquet"]


def test_no_replace_refuses_an_existing_file(tmp_path):
    out = tmp_path / "a.txt"
    out.write_text("keep")
    with pytest.raises(FootprintError, match="exists"):
        write_text(out, "x", replace=False)
    assert check_file_target(tmp_path / "new.txt", replace=False) == tmp_path / "new.txt"


def test_claim_dir_gives_each_thread_its_own_directory(tmp_path):
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(claim_dir(tmp_path, "run").name)) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 16 and "run" in got


def test_atomic_dir_appears_whole_or_not_at_all(tmp_path):
    target = tmp_path / "ledger"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "part.parquet").write_text("x")
        raise RuntimeError("import failed")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_dir(target) as tmp:
        (tmp / "index.parquet").write_text("x")
    assert [p.name for p in target.iterdir()] == ["index.parquet"]
    with pytest.raises(FootprintError, match="exists"), atomic_dir(target):
        pass
    with atomic_dir(target, replace=True) as tmp:
        (tmp / "new.parquet").write_text("y")
    assert [p.name for p in target.iterdir()] == ["new.parquet"]


def test_shown_escapes_terminal_control_characters():
    assert shown("run\x1b[31mred") == "run\\x1b[31mred"
    assert shown("plain/name.md") == "plain/name.md"


def test_claim_dir_takes_an_empty_directory_made_beforehand_once_and_never_a_symlink(tmp_path):
    (tmp_path / "pre").mkdir()  # `mkdir -p runs/pre` in a job script
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "planted").symlink_to(outside, target_is_directory=True)
    assert claim_dir(tmp_path, "pre") == tmp_path / "pre"
    assert claim_dir(tmp_path, "pre") == tmp_path / "pre-2"  # claimed: its mark is there
    assert claim_dir(tmp_path, "planted") == tmp_path / "planted-2"  # the link counts as taken
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name", ["a/b", "..", "", "x\x1b[2J", "\u202eevil", "x" * 201])
def test_claim_dir_refuses_what_is_not_one_plain_name(tmp_path, name):
    with pytest.raises(FootprintError) as e:
        claim_dir(tmp_path, name)
    assert "\x1b" not in str(e.value) and "\u202e" not in str(e.value)
    assert list(tmp_path.iterdir()) == []
