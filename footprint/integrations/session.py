"""What every framework callback does, in one place: the tracker, this rank's tokens, steps, windows, the end.

A callback opens a tracker when training begins, or joins the one already running in the process
(``footprint.track`` around ``trainer.fit``, or a tracker attached to ``footprint run``), and then
only the owner stops it. Tokens are this rank's, counted from the batches this process feeds its
model (never a framework's count summed over ranks); FLOPs come from ``track(model={...})``
(analytical), else ``Tracker.watch`` on one optimizer step. Nothing here raises into training.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

from footprint.tracking.tracker import Tracker, current, track

log = logging.getLogger("footprint.integrations")

TOKEN_KEYS = ("input_ids", "inputs_embeds", "input_values", "pixel_values")


def batch_tokens(batch: Any) -> int | None:
    """Tokens in a batch: ``input_ids`` (or embeddings' leading dims) of a dict, else an integer tensor's numel.

    Padding included: that is the work the model does, and what 6N x tokens counts.
    """
    try:
        if isinstance(batch, dict):
            for k in TOKEN_KEYS[:2]:
                x = batch.get(k)
                if x is not None and hasattr(x, "shape"):
                    return int(x.shape[:-1].numel()) if k == "inputs_embeds" else int(x.numel())
            return None
        if isinstance(batch, (list, tuple)) and batch:
            return batch_tokens(batch[0])
        if hasattr(batch, "dtype") and hasattr(batch, "numel") and not batch.is_floating_point():
            return int(batch.numel())
    except Exception:
        return None
    return None


def dtype_from_flag(value: Any) -> str | None:
    """Our dtype key from a framework's precision setting ("bf16-mixed", "16-mixed", "fp16", "bf16", "32-true")."""
    text = str(value or "").lower()
    if "bf16" in text:
        return "bf16"
    if text.startswith("16") or "fp16" in text:
        return "fp16"
    if "fp8" in text:
        return "fp8"
    if text.startswith("64"):
        return "fp64"
    return None


class Session:
    """One training run seen by a callback; see the module docstring."""

    def __init__(
        self,
        source: str,
        name: str | None = None,
        output_dir: str | Path = "runs",
        site: Any = None,
        *,
        model: dict[str, Any] | None = None,
        dtype: str | None = None,
        watch: bool = True,
        report: bool | str | Path | None = None,
        prometheus_port: int | None = None,
        prometheus_textfile: str | Path | None = None,
        **track_kwargs: Any,
    ) -> None:
        self.source = source
        self.track_args = {"name": name, "output_dir": output_dir, "site": site, "model": model, "dtype": dtype, **track_kwargs}
        self.watch = watch
        self.report = report
        self.prometheus = (prometheus_port, prometheus_textfile)
        self.tracker: Tracker | None = None
        self.owned = False
        self.tokens = 0
        self.report_path: Path | None = None
        self.dashboard_link: str | None = None  # `footprint dashboard RUN_DIR`, once the run is recorded
        self.run: dict[str, Any] | None = None
        self._exporter: Any = None
        self._live: Any = None
        self._tagged = False

    def begin(self, module: Any = None, framework_dtype: str | None = None, dtype_origin: str = "") -> Tracker:
        """Open (or join) the tracker; watch ``module`` for FLOPs unless analytical FLOPs were given."""
        t = current()
        if t is None:
            t = track(source=self.source, **self.track_args)  # a bad argument is a warning and a note, never an exception
            t.start()
            self.owned = True
        else:
            t._note(f"{self.source}: joined the tracker already running in this process")
        self.tracker = t
        try:
            if framework_dtype:
                t.set_dtype(framework_dtype, dtype_origin)
            if self.watch and module is not None and t._per_token is None:
                t.watch(module)
            port, textfile = self.prometheus
            if port is not None or textfile is not None:
                from footprint.integrations.prometheus import PrometheusExporter

                self._exporter = PrometheusExporter(t, port=port, textfile=textfile).start()
        except Exception as exc:
            t._note(f"{self.source}: {type(exc).__name__}: {exc}")
        return t

    def count(self, tokens: int | None) -> None:
        if tokens:
            self.tokens += tokens

    def begin_step(self) -> None:
        if self.tracker is not None:
            self.tracker.begin_step()

    def end_step(self) -> None:
        """One optimizer step done: this rank's tokens since the last one go to the tracker."""
        if self.tracker is not None:
            self.tracker.step(tokens=self.tokens or None)
        self.tokens = 0

    def begin_window(self, name: str) -> None:
        if self.tracker is not None:
            self.tracker.begin_window(name)

    def end_window(self, name: str) -> None:
        if self.tracker is not None:
            self.tracker.end_window(name)

    def metrics(self) -> dict[str, float]:
        """Live metrics of the job (``footprint/...``, see `footprint.integrations.live.job_wide`), {} on any failure.
        Call it on every rank at the same point: a rank whose own metrics failed still joins the all-reduce."""
        t = self.tracker
        if t is None:
            return {}
        self.tag_mlflow_run()
        from footprint.integrations.live import LiveMetrics, job_wide

        try:
            self._live = self._live or LiveMetrics(t)
            local = self._live.compute()
        except Exception as exc:
            t._note(f"live metrics: {type(exc).__name__}: {exc}")
            local = {}
        try:
            return job_wide(local, t.dist.rank, t.dist.world_size)
        except Exception as exc:
            t._note(f"live metrics not made job-wide: {type(exc).__name__}: {exc}")
            return {}

    def tag_mlflow_run(self, client: Any = None, run_id: str | None = None) -> None:
        """Tag the MLflow run this process logs to (the fluent active run: the Trainer's, accelerate's; or ``run_id``
        through ``client``: Lightning's MLFlowLogger) with this run's directory, so that
        `footprint.integrations.mlflow.log_run` finds it after training, when the framework has ended it."""
        t = self.tracker
        if self._tagged or t is None or t.memory_only or (client is None and "mlflow" not in sys.modules):
            return
        try:
            if client is None:
                import mlflow

                active = mlflow.active_run()
                if active is None:
                    return
                client, run_id = mlflow.MlflowClient(), active.info.run_id
            from footprint.integrations.mlflow import RUN_TAG

            client.set_tag(run_id, RUN_TAG, str(Path(t.run_dir).resolve()))
            self._tagged = True
        except Exception as exc:
            self._tagged = True  # once: a tracker that refuses tags will refuse them again
            t._note(f"{self.source}: MLflow run not tagged: {type(exc).__name__}: {exc}")

    def end(self) -> dict[str, Any] | None:
        """Close the windows; the owner stops the tracker (run record) and writes the report if asked."""
        t, self.tracker = self.tracker, None
        if t is None:
            return self.run
        for name in ("eval", "checkpoint", "sanity_check", "train"):
            if t.window_open(name):
                t.end_window(name)
        if self._exporter is not None:
            self._exporter.stop()
        if not self.owned:
            return None
        self.run = t.stop()
        if self.run and self.report:
            out = Path(self.report) if isinstance(self.report, (str, Path)) else t.run_dir / "report.html"
            try:
                from footprint.api import report

                self.report_path = report(t.run_dir, out)
            except Exception as exc:  # the run record is written; a report failure must not fail training
                log.warning("footprint: report not written: %s", exc)
        if self.run and t.run_dir is not None:
            self.dashboard_link = dashboard_link(t.run_dir)
            report = f"; report {self.report_path}" if self.report_path else ""
            with contextlib.suppress(Exception):  # a closed stderr must not fail training
                print(f"footprint: run recorded in {t.run_dir}{report}; open it: {self.dashboard_link}", file=sys.stderr)
        return self.run


def dashboard_link(run_dir: Path) -> str:
    """The command that opens the dashboard on this run (`footprint dashboard RUN_DIR`), quoted for a shell."""
    import shlex

    return f"footprint dashboard {shlex.quote(str(run_dir))}"


class WithSession:
    """What each callback exposes: its tracker while training runs, the run record once it has ended."""

    session: Session

    @property
    def tracker(self) -> Tracker | None:
        return self.session.tracker

    @property
    def run(self) -> dict[str, Any] | None:
        """The run record, once training has ended (on rank 0 of a distributed job)."""
        return self.session.run
