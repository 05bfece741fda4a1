"""The on-disk cache of validated lca_data (footprint.lca.diskcache) and the GPU catalogue read through it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO

from footprint.lca import diskcache
from footprint.lca.database import Database
from lca_data import loader


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("FOOTPRINT_CACHE_DIR", str(folder))
    return folder


def counting(value: object) -> tuple[list[int], object]:
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        return value

    return calls, build


def test_value_is_reused_until_an_input_changes(cache: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.yaml"
    data.write_text("a: 1\n")
    calls, build = counting({"a": 1})
    assert diskcache.cached("t", [data], build) == {"a": 1}
    assert diskcache.cached("t", [data], build) == {"a": 1}
    assert len(calls) == 1  # the second read came from disk
    data.write_text("a: 22\n")  # stale: another size (and mtime)
    calls2, build2 = counting({"a": 22})
    assert diskcache.cached("t", [data], build2) == {"a": 22}
    assert calls2 == [1]
    os.utime(data, ns=(1, 1))  # same size, another mtime: rebuilt too
    assert diskcache.cached("t", [data], build2) == {"a": 22}
    assert calls2 == [1, 1]


def test_damaged_foreign_or_unwritable_cache_is_never_an_error(cache: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.yaml"
    data.write_text("x\n")
    calls, build = counting([1, 2])
    diskcache.cached("t", [data], build)
    stored = cache / "t.pickle"
    for damage in (b"", b"not a pickle", stored.read_bytes()[:20]):
        stored.write_bytes(damage)
        assert diskcache.cached("t", [data], build) == [1, 2]
    assert len(calls) == 4  # each damaged file was rebuilt (and rewritten: the last read below is a hit)
    assert diskcache.cached("t", [data], build) == [1, 2] and len(calls) == 4
    stored.chmod(0o666)  # writable by others: not trusted
    assert diskcache.cached("t", [data], build) == [1, 2] and len(calls) == 5
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    os.environ["FOOTPRINT_CACHE_DIR"] = str(blocker / "sub")  # cannot be created: runs without a cache
    assert diskcache.cached("t", [data], build) == [1, 2] and len(calls) == 6
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no temporary file left behind
    os.environ["FOOTPRINT_CACHE_DIR"] = ""  # empty: caching off
    assert diskcache.cached("t", [data], build) == [1, 2] and len(calls) == 7
    assert diskcache.cached("t", [tmp_path / "missing"], build) == [1, 2] and len(calls) == 8


def test_cached_catalogue_equals_a_fresh_build_and_follows_edits(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "lca_data"
    shutil.copytree(loader.DATA_DIR / "sources", data / "sources")
    shutil.copy(loader.DATA_DIR / "gpus.yaml", data / "gpus.yaml")
    monkeypatch.setattr(loader, "DATA_DIR", data)
    fresh = Database()._build_gpus()
    first, second = Database().gpus, Database().gpus  # built and stored, then read back
    assert list(cache.glob("gpu-catalogue.pickle"))
    for cards in (first, second):
        assert cards == fresh and all(cards[k].raw == fresh[k].raw for k in fresh)
    h100 = Database().find_gpu("H100 SXM5 80GB")
    assert h100.tdp_w == 700 and h100.memory_bandwidth_bps == pytest.approx(3.35e12)
    text = (data / "gpus.yaml").read_text()
    (data / "gpus.yaml").write_text(text.replace('tdp: {value: "700 W"', 'tdp: {value: "710 W"', 1))
    assert Database().find_gpu("H100 SXM5 80GB").tdp_w == 710  # the edited file, not the stale cache
    (data / "gpus.yaml").write_text(text.replace('"3.35 TB/s"', '"3.35 zorks"', 1))  # a unit error is still caught
    with pytest.raises(loader.LcaDataError):
        Database().find_gpu("H100 SXM5 80GB")


def test_catalogue_from_the_cache_needs_neither_pint_nor_numpy(tmp_path: Path) -> None:
    """What `kernels analyze` gains: from the second process on, the catalogue loads without pint or numpy."""
    code = (
        "import sys; from footprint.lca.database import db; g = db().find_gpu('H100 SXM5 80GB'); "
        "print(g.tdp_w, g.memory_bandwidth_bps, 'pint' in sys.modules, 'numpy' in sys.modules)"
    )
    env = {**os.environ, "FOOTPRINT_CACHE_DIR": str(tmp_path / "c"), "PYTHONPATH": str(REPO)}

    def run() -> str:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run().startswith("700.0 3350000000000.0 True")  # first process: built and checked with pint
    assert run() == "700.0 3350000000000.0 False False"
