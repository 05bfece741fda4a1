"""Lightning `Callback`: one line gives a run record, live metrics in the Trainer's loggers and a report.

    from footprint.integrations.lightning import FootprintCallback
    trainer = L.Trainer(max_steps=1000, callbacks=[FootprintCallback(site={"grid": "FRA"}, report=True)])

Works with ``lightning.pytorch`` and ``pytorch_lightning`` (the base class is taken from whichever the
program imported, ``lightning.pytorch`` first). An optimizer step ends when ``trainer.global_step``
moves, so gradient accumulation and manual optimisation count optimizer steps, not batches. Tokens
are this rank's, from each training batch (``input_ids`` of a dict, else an integer tensor; pass
``tokens=fn(batch)`` otherwise). The sanity check and validation get eval windows, every
``trainer.save_checkpoint`` a checkpoint window; live metrics go to every ``trainer.loggers`` entry
(TensorBoard, MLflow, CSV, W&B...) each ``log_every_n_steps``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from footprint.integrations.session import Session, WithSession, batch_tokens, dtype_from_flag

if "lightning.pytorch" in sys.modules or "pytorch_lightning" not in sys.modules:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
else:
    from pytorch_lightning import Callback


class FootprintCallback(WithSession, Callback):
    """Measure a Lightning run; the arguments are ``footprint.track``'s plus ``report``, ``log_metrics`` and ``tokens``."""

    def __init__(
        self,
        name: str | None = None,
        output_dir: str = "runs",
        site: Any = None,
        *,
        log_metrics: bool = True,
        tokens: Callable[[Any], int | None] = batch_tokens,
        **kwargs: Any,
    ) -> None:
        self.session = Session("lightning callback", name, output_dir, site, **kwargs)
        self.log_metrics = log_metrics
        self.tokens = tokens
        self._last_step = 0
        self._boundary = True

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        dtype = dtype_from_flag(getattr(trainer, "precision", None))
        self.session.begin(pl_module, dtype, f"Trainer(precision={trainer.precision!r})" if dtype else "")
        self._last_step = trainer.global_step
        save = trainer.save_checkpoint
        session = self.session

        def save_checkpoint(*args: Any, **kwargs: Any) -> Any:
            session.begin_window("checkpoint")
            try:
                return save(*args, **kwargs)
            finally:
                session.end_window("checkpoint")

        trainer.save_checkpoint = save_checkpoint  # instance attribute: ModelCheckpoint calls it

    def on_sanity_check_start(self, trainer: Any, pl_module: Any) -> None:
        self.session.begin_window("sanity_check")

    def on_sanity_check_end(self, trainer: Any, pl_module: Any) -> None:
        self.session.end_window("sanity_check")

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.session.begin_window("train")

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._boundary:
            self.session.begin_step()
            self._boundary = False

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        with contextlib.suppress(Exception):
            self.session.count(self.tokens(batch))
        if trainer.global_step == self._last_step:
            return  # a micro-batch of a gradient-accumulation cycle
        self._last_step = trainer.global_step
        self._boundary = True
        self.session.end_step()
        every = max(int(getattr(trainer, "log_every_n_steps", 50) or 1), 1)
        if self.log_metrics and trainer.global_step % every == 0:
            self._log(trainer)

    def _log(self, trainer: Any) -> None:
        metrics = self.session.metrics()
        if not metrics or getattr(trainer, "global_rank", 0) != 0:
            return
        for logger in getattr(trainer, "loggers", []) or []:
            if type(logger).__name__ == "MLFlowLogger":  # for mlflow.log_run after training
                self.session.tag_mlflow_run(logger.experiment, logger.run_id)
            try:
                logger.log_metrics(metrics, step=trainer.global_step)
            except Exception as exc:
                if self.tracker is not None:
                    self.tracker._note(f"live metrics not logged to {type(logger).__name__}: {exc}")

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self.session.begin_window("eval")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self.session.end_window("eval")

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.session.end_window("train")

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._finish(trainer)

    def _finish(self, trainer: Any) -> None:
        if "save_checkpoint" in vars(trainer):
            del trainer.save_checkpoint
        self.session.end()
