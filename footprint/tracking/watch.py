"""Measured FLOPs of exactly one training step, for ``Tracker.watch(model)``.

Counting uses the same FlopCounterMode set-up as ``footprint.measure_flops`` (CPU attention included)
and covers one optimizer step: it starts at the step's first forward in train mode with grad enabled
(or at ``Tracker.begin_step()``, which callbacks call at the framework's step boundary) and ends at
the next ``Tracker.step()``, so forward, backward (every micro-batch of a gradient-accumulation cycle)
and the optimizer are inside it. Forwards in eval mode or under no_grad (evaluation before training,
Lightning's sanity check) never start it. The hooks sit on every submodule that owns parameters, so a
wrapper whose own ``forward`` is never called (a LightningModule run through ``training_step``, DDP,
FSDP) is still counted. The dtype of the step (autocast, else the parameters) is read on its first
forward, for the MFU peak.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel", "DataParallel")


def torch_dtype_name(dtype: Any, on_cuda: bool = False) -> str | None:
    """Our dtype key (lca_data peaks) for a torch floating dtype; fp32 matmuls on CUDA with TF32 on count as tf32."""
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}
    if dtype in names:
        return names[dtype]
    if dtype == torch.float32:
        tf32 = on_cuda and (torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest")
        return "tf32" if tf32 else "fp32"
    return None


def step_dtype(module: Any) -> tuple[str, str] | None:
    """(dtype, where it came from) of a forward now running: autocast if on, else the module's first float parameter."""
    import torch

    for device in ("cuda", "cpu"):
        with contextlib.suppress(Exception):
            if torch.is_autocast_enabled(device):
                name = torch_dtype_name(torch.get_autocast_dtype(device))
                if name:
                    return name, f"autocast ({device})"
    for p in module.parameters():
        if p.is_floating_point():
            name = torch_dtype_name(p.dtype, p.is_cuda)
            return (name, "model parameters") if name else None
    return None


def wrapper_note(model: Any) -> str | None:
    """A note when ``model`` is a wrapper whose own forward a framework may never call."""
    kind = type(model).__name__
    if kind in WRAPPERS:
        return f"watch(): {kind} is a wrapper; its wrapped module's forwards are counted (this rank's FLOPs)"
    if callable(getattr(model, "training_step", None)):
        return (
            f"watch(): {kind} is a LightningModule (Lightning calls training_step, not forward); "
            "its submodules' forwards are counted"
        )
    return None


class StepWatch:
    """Counts one training step of ``model``; ``result`` holds (FLOPs, tokens of that step) once done."""

    def __init__(self, model: Any, note: Callable[[str], None]) -> None:
        self.note = note
        self.mode: Any = None
        self.fired = False
        self.result: tuple[float, int | None] | None = None
        self.dtype: tuple[str, str] | None = None
        self._handles: list[Any] = []
        mods = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))] or [model]
        for m in mods:
            self._handles.append(m.register_forward_pre_hook(self._pre_hook))
        msg = wrapper_note(model)
        if msg:
            note(msg)

    @property
    def pending(self) -> bool:
        return self.result is None and bool(self._handles)

    def _pre_hook(self, module: Any, args: Any) -> None:
        try:
            import torch

            if not (module.training and torch.is_grad_enabled()):
                return  # evaluation, sanity check, inference: never part of the counted step
            self.fired = True
            if self.dtype is None:
                self.dtype = step_dtype(module)
            if self.mode is None and self.result is None:
                self.begin()
        except Exception as exc:
            self.note(f"watch hook: {type(exc).__name__}: {exc}")

    def begin(self) -> None:
        """Start counting now (the framework's step boundary)."""
        if self.mode is not None or self.result is not None:
            return
        from torch.utils.flop_counter import FlopCounterMode

        from footprint.flops.counting import cpu_attention_formulas

        mode = FlopCounterMode(display=False, custom_mapping=cpu_attention_formulas())
        mode.__enter__()
        self.mode = mode

    def end(self, tokens: int | None) -> float | None:
        """Stop counting at the end of the step; the hooks go (only one step is ever counted)."""
        if self.mode is None:
            return None
        mode, self.mode = self.mode, None
        mode.__exit__(None, None, None)
        self.remove()
        total = float(mode.get_total_flops())
        if total == 0 or not self.fired:
            self.note("watch(): FlopCounterMode counted 0 FLOPs over the first training step (no matmul torch could see)")
            return None
        self.result = (total, int(tokens) if tokens else None)
        return total

    def remove(self) -> None:
        for h in self._handles:
            with contextlib.suppress(Exception):
                h.remove()
        self._handles = []

    def close(self) -> None:
        """At stop: drop the hooks; say so if no training forward ever ran."""
        if self.mode is not None:
            with contextlib.suppress(Exception):
                self.mode.__exit__(None, None, None)
            self.mode = None
        if self.result is None:
            self.note(
                "watch(): no training step of the watched model was counted (no forward in train mode with grad "
                "enabled before a step()): FLOPs not measured; give step(flops=...) or track(model={...})"
            )
        self.remove()
