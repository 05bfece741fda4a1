"""`transformers.Trainer` callback: one line gives a run record, live metrics in the Trainer's loggers and a report.

    from footprint.integrations.huggingface import FootprintCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[FootprintCallback(site={"grid": "FRA"}, report=True)])

Steps are optimizer steps (``on_step_begin`` .. ``on_step_end`` spans every micro-batch of a
gradient-accumulation cycle, the FLOPs of one such step are counted once). Tokens are this rank's:
the ``input_ids`` its model is fed in train mode, never ``state.num_input_tokens_seen``, which the
Trainer gathers over ranks. Evaluation and checkpoint saving get their own windows: the Trainer decides
both in ``on_step_end`` (``control.should_evaluate`` / ``should_save``), runs them, then calls
``on_evaluate`` / ``on_save``. At each logging step the live metrics, job-wide (summed over ranks with one
all-reduce, on every rank, where the Trainer gathers the loss too), go through ``Trainer.log``, so every
``report_to`` integration (TensorBoard, MLflow, W&B...) records them beside the loss.
"""

from __future__ import annotations

import inspect
from typing import Any

from transformers import TrainerCallback

from footprint.integrations.session import Session, WithSession, batch_tokens


def _find_trainer(callback: Any) -> Any:
    """The Trainer whose callback handler is calling us (callbacks are not given the Trainer itself)."""
    frame = inspect.currentframe()
    for _ in range(16):
        frame = frame.f_back if frame is not None else None
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        handler = getattr(obj, "callback_handler", None)
        if handler is not None and callback in getattr(handler, "callbacks", ()):
            return obj
    return None


class FootprintCallback(WithSession, TrainerCallback):
    """Measure a `transformers.Trainer` run; the arguments are ``footprint.track``'s plus ``report`` and
    ``log_metrics`` (see ``footprint.integrations.session.Session``)."""

    def __init__(
        self, name: str | None = None, output_dir: str = "runs", site: Any = None, *, log_metrics: bool = True, **kwargs: Any
    ):
        self.session = Session("huggingface callback", name, output_dir, site, **kwargs)
        self.log_metrics = log_metrics
        self._trainer: Any = None
        self._hook: Any = None
        self._logging = False

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._trainer = _find_trainer(self)
        dtype = "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else None
        self.session.begin(model, dtype, f"TrainingArguments.{dtype}" if dtype else "")
        if model is not None:
            self._hook = model.register_forward_pre_hook(self._count_tokens, with_kwargs=True)
        self.session.begin_window("train")

    def _count_tokens(self, module: Any, args: Any, kwargs: Any) -> None:
        import torch

        if module.training and torch.is_grad_enabled():
            self.session.count(batch_tokens(kwargs) if kwargs else batch_tokens(args))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        t = self.tracker
        if t is not None and t.window_open("checkpoint"):
            t.cancel_window("checkpoint")  # a save the Trainer decided against (save_strategy="best")
        self.session.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.end_step()
        self._open_next(control)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._open_next(control)

    def _open_next(self, control: Any) -> None:
        """The Trainer evaluates, then saves, right after this event when its flow callback says so."""
        t = self.tracker
        if t is None:
            return
        if control.should_evaluate and not t.window_open("eval"):
            t.begin_window("eval")
        elif control.should_save and not control.should_evaluate and not t.window_open("checkpoint"):
            t.begin_window("checkpoint")

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        t = self.tracker
        if t is not None and not t.window_open("eval"):
            t.begin_window("eval")  # an evaluate() the flow did not announce: from its first batch on
            t._note("an evaluation window opened at its first batch (evaluate() called outside the Trainer's flow)")

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        t = self.tracker
        if t is None:
            return
        t.end_window("eval")
        if control.should_save:
            t.begin_window("checkpoint")

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.end_window("checkpoint")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """After the Trainer's training logs, log ours through Trainer.log (every report_to integration sees them)."""
        if self._logging or not self.log_metrics or not logs or self.tracker is None:
            return
        if any(k.startswith(("eval_", "test_", "footprint/")) for k in logs) or "loss" not in logs:
            return
        metrics = self.session.metrics()
        if not metrics:
            return
        if self._trainer is None:
            logs.update(metrics)  # integrations after us in the callback list still see them
            return
        self._logging = True
        try:
            self._trainer.log(metrics)
        except Exception as exc:
            self.tracker._note(f"live metrics not logged: {type(exc).__name__}: {exc}")
        finally:
            self._logging = False

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self.session.end()
