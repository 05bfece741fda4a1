"""Log a run's footprint to MLflow: parameters, the 16 EF categories and the training story as metrics, files as artifacts.

    footprint.integrations.mlflow.log_run("runs/llama-ft")        # or a run record, a tracker, an Assessment

Logs into the active MLflow run (``mlflow.start_run()`` or the Trainer's), else into ``run_id``, else
a new run it ends itself. The tracking URI is MLflow's own setting (``MLFLOW_TRACKING_URI``,
``mlflow.set_tracking_uri``): nothing goes over the network unless it points there.
"""

from __future__ import annotations

from typing import Any

from footprint.integrations import metrics as m
from footprint.lca import DEFAULT_SAMPLES


def log_run(target: Any, *, run_id: str | None = None, report: bool = True, samples: int = DEFAULT_SAMPLES) -> str:
    """Log ``target``'s assessment; returns the MLflow run id."""
    import mlflow

    a, run_dir = m.resolve(target, samples)
    started = mlflow.active_run() is None
    run = mlflow.start_run(run_id=run_id) if started else mlflow.active_run()
    try:
        mlflow.log_params(m.params(a))
        mlflow.log_metrics(m.metrics(a))
        files, tmp = m.artifacts(a, run_dir, report)
        client = mlflow.MlflowClient()  # to this run by its id: the fluent call follows MLflow's active-run state,
        with tmp:  # which another library's callback can leave pointing elsewhere (the files then land in a new run)
            for f in files:
                client.log_artifact(run.info.run_id, str(f), artifact_path="footprint")
        return run.info.run_id
    finally:
        if started:
            mlflow.end_run()
