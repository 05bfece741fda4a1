"""Shared fixtures: the third-party data in ../shared/data is read in place, never copied."""

from __future__ import annotations

from pathlib import Path

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
