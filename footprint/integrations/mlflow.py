"""Log a run's footprint to MLflow: parameters, the 16 EF categories and the training story as metrics, files as artifacts.

    footprint.integrations.mlflow.log_run("runs/llama-ft")        # or a run record, a tracker, an Assessment

Logs into the active MLflow run (``mlflow.start_run()``), else into ``run_id``, else the run named
``run_name`` in the current experiment, else the run the framework callbacks logged this run's live metrics
to (the Trainer's, accelerate's, Lightning's MLFlowLogger's, which they end when training ends: found by its
``footprint.run_dir`` tag); a new run (ended here) only where there is none: the 16 categories land beside
the loss, never in a second run, at their own step (one past the last optimizer step: the live values keep
theirs, so no metric has two values at one step). The tracking URI is
MLflow's own setting (``MLFLOW_TRACKING_URI``, ``mlflow.set_tracking_uri``; ``sqlite:///mlflow.db`` is the
local store MLflow 3 accepts): nothing goes over the network unless it points there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from footprint.integrations import metrics as m
from footprint.lca import DEFAULT_SAMPLES

RUN_TAG = "footprint.run_dir"  # set by the framework callbacks on the run they log live metrics to


def _run_to_log_into(mlflow: Any, run_id: str | None, run_name: str | None, run_dir: Path | None) -> str | None:
    """The id of the run `log_run` logs into (see the module docstring); None: a new one."""
    if run_id:
        return run_id
    if run_name:
        found = mlflow.search_runs(filter_string=f"attributes.run_name = '{run_name}'", max_results=1, output_format="list")
        if not found:
            from footprint.errors import FootprintError

            raise FootprintError(f"no MLflow run named {run_name!r} in the current experiment", "mlflow", "run_name")
        return found[0].info.run_id
    tag = str(run_dir.resolve()) if run_dir is not None else ""
    if not tag or "'" in tag:
        return None
    found = mlflow.search_runs(
        filter_string=f"tags.`{RUN_TAG}` = '{tag}'", search_all_experiments=True, max_results=1, output_format="list"
    )
    return found[0].info.run_id if found else None


def final_step(a: Any) -> int:
    """The MLflow step of the final record: one past the run's last optimizer step (1 for a run without steps)."""
    return int((a.workload.training or {}).get("steps") or 0) + 1


def log_run(
    target: Any,
    *,
    run_id: str | None = None,
    run_name: str | None = None,
    report: bool = True,
    samples: int = DEFAULT_SAMPLES,
) -> str:
    """Log ``target``'s assessment into the active, given, named or training run; returns its id."""
    import mlflow
    from mlflow.entities import Metric, Param

    a, run_dir = m.resolve(target, samples)
    active = mlflow.active_run()
    rid = active.info.run_id if active is not None else _run_to_log_into(mlflow, run_id, run_name, run_dir)
    started = rid is None
    if started:
        rid = mlflow.start_run(run_name=a.workload.name).info.run_id
    client = mlflow.MlflowClient()  # by the run's id: the fluent calls follow MLflow's active-run state, which another
    try:  # library's callback can leave pointing elsewhere, and refuse a run of another experiment
        now = int(time.time() * 1000)
        # the final record at its own step, the one after the last optimizer step: the live values (logged by the
        # callbacks at steps 1..N) keep theirs, and no metric ever gets two different values at one step
        step = final_step(a)
        client.log_batch(
            rid,
            metrics=[Metric(k, v, now, step) for k, v in m.metrics(a).items()],
            params=[Param(k, v) for k, v in m.params(a).items()],
        )
        files, tmp = m.artifacts(a, run_dir, report)
        with tmp:
            for f in files:
                client.log_artifact(rid, str(f), artifact_path="footprint")
        return rid
    finally:
        if started:
            mlflow.end_run()
