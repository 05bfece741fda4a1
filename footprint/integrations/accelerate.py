"""An `accelerate` training loop, measured: this process's GPU, tokens and optimizer steps, logged with ``accelerator.log``.

    fp = FootprintAccelerate(accelerator, model, site={"grid": "FRA"}, report=True)
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        fp.step(batch)                       # an optimizer step only when accelerator.sync_gradients
        with fp.window("eval"): ...          # evaluation, checkpoints: named windows
    fp.finish()                              # run record (main process) and report

Each process measures its own GPU (accelerate launches one per device, like torchrun), and the job's
record counts every GPU once. Tokens are this process's, from the batches it was handed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from footprint.integrations.session import Session, WithSession, batch_tokens, dtype_from_flag


class FootprintAccelerate(WithSession):
    """See the module docstring; keyword arguments are ``footprint.track``'s plus ``report`` and ``log_every``."""

    def __init__(
        self,
        accelerator: Any,
        model: Any = None,
        name: str | None = None,
        output_dir: str = "runs",
        *,
        log_every: int = 10,
        **kwargs: Any,
    ) -> None:
        self.accelerator = accelerator
        self.log_every = max(int(log_every), 1)
        self.session = Session("accelerate helper", name, output_dir, **kwargs)
        dtype = dtype_from_flag(getattr(accelerator, "mixed_precision", None))
        module = accelerator.unwrap_model(model) if model is not None else None
        self.session.begin(module, dtype, f"Accelerator(mixed_precision={accelerator.mixed_precision!r})" if dtype else "")
        self.session.begin_window("train")
        self.steps = 0

    def step(self, batch: Any = None, tokens: int | None = None) -> None:
        """After each batch: counts its tokens; ends an optimizer step when gradients were synchronised."""
        self.session.count(tokens if tokens is not None else batch_tokens(batch))
        if not getattr(self.accelerator, "sync_gradients", True):
            return
        self.session.end_step()
        self.steps += 1
        if self.steps % self.log_every == 0:
            metrics = self.session.metrics()
            if metrics:
                with contextlib.suppress(Exception):
                    self.accelerator.log(metrics, step=self.steps)

    @contextlib.contextmanager
    def window(self, name: str) -> Iterator[None]:
        self.session.begin_window(name)
        try:
            yield
        finally:
            self.session.end_window(name)

    def finish(self) -> dict[str, Any] | None:
        """Close the training window, stop the tracker (if this helper opened it) and write the report if asked."""
        return self.session.end()

    def __enter__(self) -> FootprintAccelerate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
