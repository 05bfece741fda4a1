"""Shared fixtures for the meters tests: the repo on sys.path and the shared data folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Real recordings live beside the repository and are read in place, never copied.
SHARED_DATA = REPO.parent / "shared" / "data"
POWER_DATA = SHARED_DATA / "power"
LOCAL_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def power_data() -> Path:
    """../shared/data/power, or skip when the shared folder is absent."""
    if not POWER_DATA.is_dir():
        pytest.skip(f"shared power data not found at {POWER_DATA}")
    return POWER_DATA


@pytest.fixture(autouse=True)
def _no_fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests opt in to FOOTPRINT_FAKE_NVML explicitly; a value in the caller's shell must not leak in."""
    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    monkeypatch.delenv("FOOTPRINT_FAKE_AMDSMI", raising=False)
