"""Entry points that accept what users have: a Workload, a scenario path, a run directory or record, a tracker."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from footprint.builders import load_scenario
from footprint.errors import FootprintError
from footprint.lca.assessment import Assessment
from footprint.lca.engine import DEFAULT_SAMPLES
from footprint.lca.engine import assess as _assess
from footprint.lca.workload import Workload, scenario_path, shipped_scenarios
from footprint.reports import notebook as _notebook  # noqa: F401 - registers an Assessment's HTML view (Jupyter)
from footprint.tracking.to_workload import workload_from_run

if TYPE_CHECKING:  # pragma: no cover
    from footprint.reports.report import Section

Overrides = Mapping[str, Any] | Sequence[str] | None


def override_list(overrides: Overrides) -> list[str]:
    """``set=`` as the CLI's ``--set`` strings: {"training.mfu": 0.5} -> ["training.mfu=0.5"] (a non-string value
    written as JSON, which YAML reads back as the same value); a list of "key=value" strings is taken as it is."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise TypeError("set= takes a mapping such as {'training.mfu': 0.5} or a list of 'key=value' strings, not a string")
    if isinstance(overrides, Mapping):
        return [f"{k}={v if isinstance(v, str) else _as_json(k, v)}" for k, v in overrides.items()]
    if not isinstance(overrides, Sequence) or any(not isinstance(x, str) for x in overrides):
        raise FootprintError("set= takes a mapping such as {'training.mfu': 0.5} or a list of 'key=value' strings", key="set")
    return list(overrides)


def _as_json(key: Any, value: Any) -> str:
    """A `set=` value as the text `--set` would carry: numbers, booleans, None, lists and mappings of them (NaN is
    written as such and refused where it is read); anything else (an object, bytes) is one error naming the key."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        raise FootprintError(
            f"expected a number, text, a list or a mapping, got {type(value).__name__} {str(value)[:40]!r}", key=f"set: {key}"
        ) from None


def to_workload(
    target: Workload | str | Path | dict[str, Any] | Any, sets: list[str] | None = None, flag: str = "--set"
) -> Workload:
    """A Workload from a Workload, a scenario path or a shipped scenario's name, a run directory, a run record or a
    Tracker; ``sets`` are ``key=value`` overrides (``flag`` names them in errors: "--set" or "set")."""
    if isinstance(target, Workload):
        if sets:
            raise TypeError("overrides apply to a scenario or a run, not to a Workload (use Workload.with_)")
        return target
    if isinstance(target, dict):
        if "devices" not in target:  # a dict is a run record (`tracker.stop()`), never read as a scenario
            raise FootprintError(
                "a mapping given to assess() is read as a run record (tracker.stop()'s result) and this one has no "
                f"'devices' (keys: {', '.join(map(str, list(target)[:6]))}): for a scenario give its YAML path or a Workload",
                key="target",
            )
        return workload_from_run(target, sets, flag)
    if isinstance(target, (str, Path)):
        p = scenario_path(target)
        if not p.exists():
            names = ", ".join(shipped_scenarios())
            raise FootprintError(f"no such scenario file or run directory (shipped scenarios: {names})", str(target))
        return workload_from_run(p, sets, flag) if p.is_dir() or p.name == "run.json" else load_scenario(p, sets, flag)
    run = getattr(target, "run", None)  # a stopped Tracker
    if isinstance(run, dict):
        return workload_from_run(run, sets, flag)
    raise TypeError(
        f"cannot assess a {type(target).__name__}: give a Workload, a scenario path, a run directory or a stopped tracker's run"
    )


def assess(
    target: Workload | str | Path | dict[str, Any] | Any,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    *,
    set: Overrides = None,  # noqa: A002 - the CLI's --set, by name
) -> Assessment:
    """Assess a Workload, a scenario file or a shipped scenario's name (``"bloom-176b"``), a run directory, or a
    tracked run (``tracker.stop()``'s result). ``set`` overrides keys as ``footprint assess --set`` does, through
    the same code: ``set={"training.mfu": 0.5, "site.grid": "POL"}`` or ``set=["training.mfu=0.5"]``."""
    return _assess(to_workload(target, override_list(set), "set"), samples=samples, seed=seed)


def _report_item(target: Any, sets: list[str] | None, samples: int, seed: int) -> Assessment | Section:
    """What a report shows for a target: an Assessment as given; a scenario or run directory assessed, named as
    given, with the run directory its power figures come from; a run record or tracker assessed."""
    from footprint.reports.report import Section

    if isinstance(target, Assessment):
        return target
    run = target if isinstance(target, dict) else getattr(target, "run", None)
    if isinstance(run, dict) and run.get("run_dir"):
        target = str(run["run_dir"])
    if isinstance(target, (str, Path)):
        p = scenario_path(target)
        run_dir = p if p.is_dir() else (p.parent if p.name == "run.json" else None)
        return Section(_assess(to_workload(p, sets), samples=samples, seed=seed), str(target), run_dir)
    if isinstance(run, dict):
        return _assess(workload_from_run(run), samples=samples, seed=seed)
    raise TypeError(
        f"cannot report on a {type(target).__name__}: give a scenario path, a run directory, a run record, a stopped "
        "tracker or an Assessment"
    )


def build_sections(targets: list[Any], sets: list[str] | None, samples: int, trace: str | None, seed: int = 0) -> list[Section]:
    """Each target assessed and its report section drawn (`footprint.reports.report.build_sections`)."""
    from footprint.reports import report as reports

    return reports.build_sections([_report_item(t, sets, samples, seed) for t in targets], trace)


def write_report(
    targets: list[Any],
    output: str,
    fmt: str | None = None,
    sets: list[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    trace: str | None = None,
    quiet: bool = False,
    seed: int = 0,
) -> Path | None:
    """Assess each target and write the report (`footprint report`); returns the path written (None for stdout).
    The output is checked before any work."""
    from footprint.reports import report as reports

    fmt = reports.check_output(output, fmt)
    items = [_report_item(t, sets, samples, seed) for t in targets]
    return reports.write_report(items, output, fmt, trace, quiet)


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
    out = write_report([target, *compare], str(output), format, sets, samples, trace, quiet=True)
    assert out is not None  # a file was named
    return out
