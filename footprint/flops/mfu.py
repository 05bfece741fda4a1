"""MFU and HFU against a card's dense peak for a dtype (peaks from lca_data, never the sparse datasheet figures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from footprint.errors import FootprintError

MFU_WARN = 0.8


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
    from footprint.inputs import finite_number
    from footprint.lca.database import db

    # objects, bytes, NaN or 10**400: one error, not a traceback
    flops, gpu_hours, achieved_tflops = (
        None if v is None else finite_number(v, key)
        for key, v in (("--flops", flops), ("--gpu-hours", gpu_hours), ("--achieved-tflops", achieved_tflops))
    )
    if not isinstance(gpu, str):
        raise FootprintError(f"expected a GPU name, got {type(gpu).__name__}", key="--gpu")
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
