"""What a disclosure is about: a scenario, a tracked run, a fleet job or a served model, resolved once.

A scenario and a run are assessed as `footprint assess` does (`footprint.api.to_workload`); a fleet job is its run
record from the ledger (`footprint.fleet.ledger.job_record`, as `footprint fleet job` writes it); a served model is
one model of a serving record (`footprint.serving.report.serving_report`, as `footprint serving report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.lca.assessment import Assessment


@dataclass(frozen=True)
class Subject:
    """The target of a form: its kind and name, and what is known of it (an Assessment for training, the run
    record for a run or fleet job, the serving report and the model's entry for a served model)."""

    kind: str
    name: str
    target: str
    link: str
    assessment: Assessment | None = None
    record: dict[str, Any] | None = None
    serving: dict[str, Any] | None = None
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def training(self) -> bool:
        return self.assessment is not None

    @property
    def window(self) -> str:
        """A served model's window: "2025-03-03T08:00:00Z to 2025-03-03T10:30:00Z"."""
        rep = self.serving or {}
        return f"{rep.get('start')} to {rep.get('end')}"

    @property
    def pue(self) -> float:
        """The serving site's PUE (the serving record's, default 1.2 as `footprint serving report`)."""
        return float(((self.serving or {}).get("site") or {}).get("pue") or 1.0)

    @property
    def assessed(self) -> Assessment:
        """The Assessment of a training target (a served model has none: callers check `training` first)."""
        if self.assessment is None:
            raise TypeError(f"a {self.kind} has no training assessment")
        return self.assessment


def _link(command: str, link: str | None) -> str:
    """Where the full assessment is: the given address, else the command that writes it."""
    return link or command


def resolve(target: Any, *, job: str | None = None, model: str | None = None, link: str | None = None) -> Subject:
    """The Subject of ``target``: a scenario file or shipped scenario's name, a run directory (or its run.json),
    a fleet directory with ``job``, a serving record directory (``model`` picks one of its models), a run record
    dict or a stopped Tracker."""
    from footprint.lca.engine import assess

    run = getattr(target, "run", None)  # a stopped Tracker
    target = run if isinstance(run, dict) else target
    if isinstance(target, dict):
        return _run(target, str(target.get("run_dir") or target.get("name") or "run record"), link)
    p = Path(str(target))
    if (p / "serving.json").is_file():
        if job is not None:
            raise FootprintError("--job is for a fleet directory; this is a serving record", str(target), "--job")
        return _served(p, model, link)
    if model is not None:
        raise FootprintError("--model is for a serving record (a directory with serving.json)", str(target), "--model")
    if (p / "fleet.json").is_file() or job is not None:
        return _fleet_job(p, job, link)
    from footprint.api import to_workload
    from footprint.lca.workload import scenario_path

    sp = scenario_path(str(target))
    w = to_workload(str(target))  # one error naming the target when it is none of these
    if sp.is_dir() or sp.name == "run.json":
        from footprint.tracking.runrecord import read_record

        record = read_record(sp / "run.json" if sp.is_dir() else sp)
        rd = str(sp if sp.is_dir() else sp.parent)
        return Subject(
            "run", w.name, str(target), _link(f"footprint report {rd} -o report.html", link), assess(w, samples=0), record
        )
    return Subject(
        "scenario", w.name, str(target), _link(f"footprint report {target} -o report.html", link), assess(w, samples=0)
    )


def _run(record: dict[str, Any], where: str, link: str | None, kind: str = "run", command: str = "") -> Subject:
    from footprint.lca.engine import assess
    from footprint.tracking.to_workload import workload_from_run

    w = workload_from_run(record)
    return Subject(
        kind, w.name, where, _link(command or f"footprint report {where} -o report.html", link), assess(w, samples=0), record
    )


def _fleet_job(fleet: Path, job: str | None, link: str | None) -> Subject:
    if job is None:
        raise FootprintError("a fleet directory: name the job with --job ID (`footprint fleet report DIR --by job`)", str(fleet))
    if not (fleet / "fleet.json").is_file():
        raise FootprintError("--job needs a fleet directory (written by `footprint fleet import`)", str(fleet), "--job")
    from footprint.fleet.ledger import job_record

    record = {**job_record(fleet, job), "run_dir": f"{fleet} job {job}"}  # errors name the job, not "run.json"
    command = f"footprint fleet job {fleet} {job} -o run-{job} && footprint report run-{job} -o report.html"
    return _run(record, f"{fleet} job {job}", link, "fleet job", command)


def _served(record: Path, model: str | None, link: str | None) -> Subject:
    from footprint.serving.report import serving_report

    rep = serving_report(record)
    names = [m["model"] for m in rep["models"]]
    if model is None and len(names) > 1:
        raise FootprintError(f"this record serves {len(names)} models: pick one with --model ({', '.join(names)})", str(record))
    chosen = model if model is not None else names[0]
    entry = next((m for m in rep["models"] if m["model"] == chosen), None)
    if entry is None:
        raise FootprintError(f"no model {chosen!r} in this record (it serves: {', '.join(names)})", str(record), "--model")
    command = f"footprint serving report {record} -o serving.html"
    return Subject("served model", chosen, str(record), _link(command, link), serving=rep, model=entry)
