"""Paths the tests share (importable because pytest puts tests/ on sys.path)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SCENARIOS = REPO / "scenarios"
