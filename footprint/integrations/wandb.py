"""Log a run's footprint to Weights & Biases (offline unless you say otherwise): config, summary metrics, files.

    footprint.integrations.wandb.log_run("runs/llama-ft")         # offline run under ./wandb, `wandb sync` later

Logs into the active ``wandb.run``, else a new run in ``mode="offline"`` (no network) that it
finishes itself. Parameters go to the run's config, the 16 EF categories and the training story to
its summary, run.json / the Assessment JSON / the HTML report as files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.integrations import metrics as m
from footprint.lca import DEFAULT_SAMPLES
from footprint.outputs import write_bytes


def log_run(
    target: Any,
    *,
    project: str = "footprint",
    mode: str = "offline",
    report: bool = True,
    samples: int = DEFAULT_SAMPLES,
    **init: Any,
) -> str:
    """Log ``target``'s assessment; returns the W&B run id."""
    import wandb

    a, run_dir = m.resolve(target, samples)
    run = wandb.run
    owned = run is None
    if owned:
        run = wandb.init(project=project, mode=mode, name=a.workload.name, **init)
    try:
        run.config.update(m.params(a), allow_val_change=True)
        values = m.metrics(a)
        run.log(values)
        run.summary.update(values)
        files, tmp = m.artifacts(a, run_dir, report)
        dest = Path(run.dir) / "footprint"  # files in the run's folder are saved with it (synced later if offline)
        with tmp:
            for f in files:
                write_bytes(dest / f.name, f.read_bytes())
        return run.id
    finally:
        if owned:
            run.finish()
