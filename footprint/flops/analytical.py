"""Analytical transformer FLOPs: PaLM (6N + 12 L H S per token) and Megatron-LM formulas, with recomputation.

Conventions: 2 FLOPs per multiply-accumulate; model FLOPs count the work the model needs, hardware FLOPs add
what activation recomputation re-executes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from footprint.errors import FootprintError

RECOMPUTE = ("none", "selective", "full")


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
    from footprint.inputs import finite_number

    def number(v: Any, key: str, required: bool = False) -> Any:  # objects, bytes, NaN, 10**400: one error
        if v is None and required:
            raise FootprintError(f"must be > 0, got {v!r}", key=f"--{key}")
        return None if v is None else finite_number(v, f"--{key}", lo=0, lo_open=required)

    params, tokens = number(params, "params", True), number(tokens, "tokens", True)
    active_params, vocab = number(active_params, "active-params"), number(vocab, "vocab")
    layers, hidden, seq_len = number(layers, "layers"), number(hidden, "hidden"), number(seq_len, "seq-len")
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
