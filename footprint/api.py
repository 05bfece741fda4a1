"""Entry points that accept what users have: a Workload, a scenario path, or (later) a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.lca.assessment import Assessment
from footprint.lca.engine import DEFAULT_SAMPLES
from footprint.lca.engine import assess as _assess
from footprint.lca.workload import Workload, load_scenario, workload_from_run


def to_workload(target: Workload | str | Path | dict[str, Any] | Any, sets: list[str] | None = None) -> Workload:
    """A Workload from a Workload, a scenario path, a run directory, a run record or a Tracker."""
    if isinstance(target, Workload):
        return target
    if isinstance(target, dict):
        return workload_from_run(target, sets)
    if isinstance(target, (str, Path)):
        p = Path(target)
        return workload_from_run(p, sets) if p.is_dir() or p.name == "run.json" else load_scenario(p, sets)
    run = getattr(target, "run", None)  # a stopped Tracker
    if isinstance(run, dict):
        return workload_from_run(run, sets)
    raise TypeError(
        f"cannot assess a {type(target).__name__}: give a Workload, a scenario path, a run directory or a stopped tracker's run"
    )


def assess(target: Workload | str | Path | dict[str, Any] | Any, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Assessment:
    """Assess a Workload, a scenario file, a run directory, or a tracked run (``tracker.stop()``'s result)."""
    return _assess(to_workload(target), samples=samples, seed=seed)
