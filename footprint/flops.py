"""FLOP accounting: analytical transformer FLOPs, measured FLOPs (torch), MFU and HFU.

Conventions (README "FLOPs and MFU"):
- 2 FLOPs per multiply-accumulate (the profiler's and FlopCounterMode's convention).
- Model FLOPs count the work the model needs (6N per token for training, PaLM appendix B, plus the
  attention term 12 x layers x hidden x seq_len per token); hardware FLOPs add what activation
  recomputation re-executes. MFU = model FLOPs / (time x dense peak); HFU = hardware FLOPs / (same).
- Peaks are dense, per dtype, from lca_data (never the 2x "with sparsity" datasheet figures).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from footprint.errors import FootprintError

RECOMPUTE = ("none", "selective", "full")
MFU_WARN = 0.8


@dataclass(frozen=True)
class TransformerFlops:
    flops: float
    flops_per_token: float
    hardware_flops: float
    hardware_flops_per_token: float
    formula: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "flops_per_token": self.flops_per_token,
            "hardware_flops": self.hardware_flops,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "formula": self.formula,
        }


def transformer_flops(
    params: float,
    tokens: float = 1.0,
    *,
    active_params: float | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
    recompute: str = "none",
    inference: bool = False,
    vocab: int | None = None,
    variant: str = "palm",
) -> TransformerFlops:
    """Transformer FLOPs for ``tokens`` tokens.

    palm (default): training 6N + 12 L H S per token (N = active parameters for MoE); inference 2N + 4 L H S.
    megatron: Narayanan et al. 2021, F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration with full
    recomputation, i.e. 72 l h^2 (1 + s/(6h) + V/(16 l h)) model FLOPs per token (needs layers, hidden,
    seq_len, vocab). Recomputation: full re-runs the forward pass (+2N + 4 L H S per token), selective
    re-runs the attention scores and values (+4 L H S per token, Korthikanti et al. 2022).
    """
    if recompute not in RECOMPUTE:
        raise FootprintError(f"unknown recompute {recompute!r}; allowed: {', '.join(RECOMPUTE)}", key="--recompute")
    for key, v in (("params", params), ("tokens", tokens)):
        if v is None or v <= 0:
            raise FootprintError(f"must be > 0, got {v!r}", key=f"--{key}")
    n = float(active_params or params)
    shape = (layers, hidden, seq_len)
    if any(x is not None for x in shape) and not all(x is not None and x > 0 for x in shape):
        raise FootprintError("the attention term needs all of --layers, --hidden and --seq-len (> 0)", key="--layers")
    attn_fwd = 4.0 * layers * hidden * seq_len if all(shape) else 0.0  # QK^T and AV, forward, per token
    n_label = "A" if active_params else "N"
    if variant == "megatron":
        if not (all(shape) and vocab):
            raise FootprintError("the Megatron-LM formula needs --layers, --hidden, --seq-len and --vocab", key="--variant")
        per_iter_token = 96.0 * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
        model = per_iter_token * 3 / 4
        fwd = per_iter_token / 4
        formula = "Megatron-LM: 72 l h^2 (1 + s/(6h) + V/(16 l h)) per token (x 4/3 with full recomputation)"
        if inference:
            model, fwd = fwd, 0.0
            formula = "Megatron-LM forward: 24 l h^2 (1 + s/(6h) + V/(16 l h)) per token"
    elif variant == "palm":
        if inference:
            model, fwd = 2 * n + attn_fwd, 0.0
            formula = f"2{n_label}" + (" + 4 L H S" if attn_fwd else "") + " per token (inference)"
        else:
            model, fwd = 6 * n + 3 * attn_fwd, 2 * n + attn_fwd
            formula = f"6{n_label}" + (" + 12 L H S" if attn_fwd else "") + " per token (PaLM appendix B)"
    else:
        raise FootprintError(f"unknown variant {variant!r}; allowed: palm, megatron", key="--variant")
    extra = 0.0
    if not inference and recompute == "full":
        extra = fwd
        formula += "; hardware FLOPs add one forward pass (full recomputation)"
    elif not inference and recompute == "selective":
        extra = attn_fwd
        formula += "; hardware FLOPs add the attention forward 4 L H S (selective recomputation)"
    return TransformerFlops(model * tokens, model, (model + extra) * tokens, model + extra, formula)


@dataclass(frozen=True)
class Mfu:
    mfu: float
    peak_tflops: float
    achieved_tflops: float
    gpu: str
    dtype: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "mfu": self.mfu,
            "peak_tflops": self.peak_tflops,
            "achieved_tflops": self.achieved_tflops,
            "gpu": self.gpu,
            "dtype": self.dtype,
            "warnings": list(self.warnings),
        }


def compute_mfu(
    gpu: str,
    dtype: str = "bf16",
    *,
    flops: float | None = None,
    gpu_hours: float | None = None,
    achieved_tflops: float | None = None,
) -> Mfu:
    """MFU from total FLOPs over GPU-hours, or from achieved TFLOP/s per GPU, against the dense peak."""
    from footprint.database import db

    card = db().find_gpu(gpu, key="--gpu")
    try:
        peak = card.peak_flops(dtype) / 1e12
    except KeyError as exc:
        raise FootprintError(str(exc.args[0]), key="--dtype") from None
    if achieved_tflops is None:
        if not flops or not gpu_hours or flops <= 0 or gpu_hours <= 0:
            raise FootprintError("give --flops and --gpu-hours (both > 0), or --achieved-tflops", key="--flops")
        achieved_tflops = flops / (gpu_hours * 3600) / 1e12
    elif achieved_tflops <= 0:
        raise FootprintError(f"must be > 0, got {achieved_tflops}", key="--achieved-tflops")
    value = achieved_tflops / peak
    if value > 1.0:
        raise FootprintError(
            f"MFU {value:.0%} is above 100 % of the dense {dtype} peak of {card.name} ({peak:g} TFLOP/s): likely a "
            "sparse peak or a sparsity-inflated FLOP count, the wrong dtype (e.g. fp8 work against a bf16 peak), "
            "GPU-hours that miss GPUs, or FLOPs counted for several ranks on one GPU",
            key="mfu",
        )
    notes = ()
    if value > MFU_WARN:
        notes = (
            f"MFU {value:.0%} is above {MFU_WARN:.0%}: plausible only for single large GEMMs; check the FLOP count and the dtype",
        )
    return Mfu(value, peak, achieved_tflops, card.name, dtype, notes)


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
