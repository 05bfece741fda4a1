"""Entry points that accept what users have: a Workload, a scenario path, or (later) a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.assessment import Assessment
from footprint.lca import DEFAULT_SAMPLES
from footprint.lca import assess as _assess
from footprint.workload import Workload, load_scenario


def assess(target: Workload | str | Path | Any, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Assessment:
    """Assess a Workload, or a scenario file path."""
    if isinstance(target, Workload):
        return _assess(target, samples=samples, seed=seed)
    if isinstance(target, (str, Path)):
        return _assess(load_scenario(target), samples=samples, seed=seed)
    raise TypeError(f"cannot assess a {type(target).__name__}: give a Workload or a scenario path")
