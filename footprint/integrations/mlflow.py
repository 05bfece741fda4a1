"""Log a run's footprint to MLflow: parameters, the 16 EF categories and the training story as metrics, files as artifacts.

    footprint.integrations.mlflow.log_run("runs/llama-ft")        # or a run record, a tracker, an Assessment

Logs into the active MLflow run (``mlflow.start_run()``), else into ``run_id``, else the run named
``run_name`` in the current experiment, else this process's last run if it ran while the run was tracked
(``mlflow.last_active_run()``: the Trainer's or Lightning's, which they end when training ends); a new run
(ended here) only where there is none: the 16 categories land beside the loss, never in a second run. The tracking URI is
MLflow's own setting (``MLFLOW_TRACKING_URI``, ``mlflow.set_tracking_uri``; ``sqlite:///mlflow.db`` is the
local store MLflow 3 accepts): nothing goes over the network unless it points there.
"""

from __future__ import annotations

from typing import Any

from footprint.integrations import metrics as m
from footprint.lca import DEFAULT_SAMPLES


def _run_to_log_into(mlflow: Any, run_id: str | None, run_name: str | None, window: tuple[float, float] | None) -> str | None:
    """The id of the run `log_run` reopens (see the module docstring); None: a new one."""
    if run_id:
        return run_id
    if run_name:
        found = mlflow.search_runs(filter_string=f"attributes.run_name = '{run_name}'", max_results=1, output_format="list")
        if not found:
            from footprint.errors import FootprintError

            raise FootprintError(f"no MLflow run named {run_name!r} in the current experiment", "mlflow", "run_name")
        return found[0].info.run_id
    last = mlflow.last_active_run()
    if last is None or window is None:
        return None
    start, end = last.info.start_time / 1000, (last.info.end_time or 2**62) / 1000  # ms; a running run has no end
    return last.info.run_id if start <= window[1] and end >= window[0] else None  # it ran while the run was tracked


def _window(target: Any, run_dir: Any) -> tuple[float, float] | None:
    """(start, end) in Unix seconds of the tracked run behind ``target``, if it is one."""
    record = target if isinstance(target, dict) else getattr(target, "run", None)
    if not isinstance(record, dict) and run_dir is not None and (run_dir / "run.json").is_file():
        from footprint.tracking.runrecord import read_record

        record = read_record(run_dir / "run.json")
    if not isinstance(record, dict):
        return None
    from datetime import datetime

    try:  # the job record's times are UTC to the second: a second of slack either side
        start, end = (datetime.fromisoformat(str(record[k])).timestamp() for k in ("start_utc", "end_utc"))
    except (KeyError, ValueError):
        return None
    return start - 1, end + 1


def log_run(
    target: Any,
    *,
    run_id: str | None = None,
    run_name: str | None = None,
    report: bool = True,
    samples: int = DEFAULT_SAMPLES,
) -> str:
    """Log ``target``'s assessment into the active, given, named or last run of this process; returns its id."""
    import mlflow

    a, run_dir = m.resolve(target, samples)
    started = mlflow.active_run() is None
    reopen = _run_to_log_into(mlflow, run_id, run_name, _window(target, run_dir)) if started else None
    run = mlflow.start_run(run_id=reopen) if started else mlflow.active_run()
    try:
        mlflow.log_params(m.params(a))
        steps = (a.workload.training or {}).get("steps")
        mlflow.log_metrics(m.metrics(a), step=int(steps or 0))  # at the run's last step: after the live values
        files, tmp = m.artifacts(a, run_dir, report)
        client = mlflow.MlflowClient()  # to this run by its id: the fluent call follows MLflow's active-run state,
        with tmp:  # which another library's callback can leave pointing elsewhere (the files then land in a new run)
            for f in files:
                client.log_artifact(run.info.run_id, str(f), artifact_path="footprint")
        return run.info.run_id
    finally:
        if started:
            mlflow.end_run()
