"""Measured FLOPs: what torch executes, counted with FlopCounterMode plus torch's SDPA formulas for CPU attention."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any


def cpu_attention_formulas() -> dict[Any, Callable[..., int]]:
    """FLOP formulas for torch's CPU flash-attention kernels, which FlopCounterMode does not count by itself.

    Uses torch's own SDPA formulas (4 b h s_q s_k d forward, 2x that backward); without them a GPT block on
    CPU loses its 12 L H S attention term.
    """
    import torch
    from torch.utils import flop_counter as fc

    aten = torch.ops.aten
    out: dict[Any, Callable[..., int]] = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):

        def fwd(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
            return fc.sdpa_flop_count(query, key, value)

        def bwd(grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
            return fc.sdpa_backward_flop_count(grad_out, query, key, value)

        out[aten._scaled_dot_product_flash_attention_for_cpu] = fwd
        if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
            out[aten._scaled_dot_product_flash_attention_for_cpu_backward] = bwd
    return out


def measure_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """FLOPs torch executes in ``fn(*args, **kwargs)`` (FlopCounterMode: 2 per MAC, mm/conv/attention).

    Warns when the count is likely low: grad disabled (no backward, and no_grad/eval fast paths of
    nn.TransformerEncoder run fused kernels the counter cannot see), or a module argument in eval mode.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    mods = [a for a in (*args, *kwargs.values(), getattr(fn, "__self__", None), fn) if isinstance(a, torch.nn.Module)]
    if not torch.is_grad_enabled():
        warnings.warn(
            "measure_flops under no_grad: only the forward pass is counted, and transformer fast paths "
            "(nn.TransformerEncoderLayer in eval/no_grad) are invisible to FlopCounterMode",
            stacklevel=2,
        )
    for m in mods:
        if not m.training and any(
            isinstance(x, (torch.nn.TransformerEncoderLayer, torch.nn.MultiheadAttention)) for x in m.modules()
        ):
            warnings.warn(
                f"{type(m).__name__} is in eval mode: its fused fast path is not counted; call model.train() to measure",
                stacklevel=2,
            )
    counter = FlopCounterMode(display=False, custom_mapping=cpu_attention_formulas())
    with counter:
        fn(*args, **kwargs)
    total = int(counter.get_total_flops())
    if total == 0:
        warnings.warn("FlopCounterMode counted 0 FLOPs: the function ran no matmul/conv torch can see", stacklevel=2)
    return total
