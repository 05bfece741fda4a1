"""Shared fixtures: the third-party data in ../shared/data is read in place, never copied."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _paths import SHARED


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return SHARED / "data"


@pytest.fixture(scope="session")
def ademe_dir(shared: Path) -> Path:
    return shared / "lca" / "ademe-gpu-lca"


@pytest.fixture(scope="module")
def cli() -> Iterator[Any]:
    """The fuzz harness's warm fork server running the real CLI (tests/_fuzz.py), one per test module."""
    from _fuzz import CliServer

    server = CliServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real run directory (recorded through the fake NVML) for the fuzz suites to damage copies of."""
    from _fuzz import make_run

    return make_run(tmp_path_factory.mktemp("good"))
