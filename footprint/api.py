"""Entry points that accept what users have: a Workload, a scenario path, a run directory or record, a tracker."""

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


def _report_target(target: Any) -> str | Assessment:
    if isinstance(target, Assessment):
        return target
    if isinstance(target, (str, Path)):
        return str(target)
    run = target if isinstance(target, dict) else getattr(target, "run", None)
    if isinstance(run, dict) and run.get("run_dir"):
        return str(run["run_dir"])
    if isinstance(run, dict):
        return _assess(workload_from_run(run))
    raise TypeError(
        f"cannot report on a {type(target).__name__}: give a scenario path, a run directory, a run record, a stopped "
        "tracker or an Assessment"
    )


def report(
    target: Any,
    output: str | Path = "report.html",
    *,
    compare: tuple[Any, ...] | list[Any] = (),
    format: str | None = None,
    sets: list[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    trace: str | None = None,
) -> Path:
    """Write a report (as `footprint report`) on a scenario, run directory, run record, tracker or Assessment.

    The format follows ``output``'s extension (.html, .md, .json, .csv, .pdf, .boamps.json) or ``format``;
    ``compare`` adds more targets side by side. Returns the path written.
    """
    from footprint.reports.report import write_report

    targets = [_report_target(t) for t in (target, *compare)]
    return write_report(targets, str(output), format, sets, samples, trace, quiet=True)
