"""MFU and HFU against a dense peak for a dtype (the caller passes the card's peak: never the sparse datasheet figure)."""

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


def mfu_against_peak(
    peak_tflops: float,
    gpu: str,
    dtype: str = "bf16",
    *,
    flops: float | None = None,
    gpu_hours: float | None = None,
    achieved_tflops: float | None = None,
) -> Mfu:
    """MFU from total FLOPs over GPU-hours, or from achieved TFLOP/s per GPU, against a dense peak.

    The peak is the caller's (the catalogue's card, `footprint.lca.catalogue.compute_mfu`): FLOP
    arithmetic stays below the LCA core and never looks a card up itself.
    """
    from footprint.inputs import finite_number

    # objects, bytes, NaN or 10**400: one error, not a traceback
    flops, gpu_hours, achieved_tflops = (
        None if v is None else finite_number(v, key)
        for key, v in (("--flops", flops), ("--gpu-hours", gpu_hours), ("--achieved-tflops", achieved_tflops))
    )
    if achieved_tflops is None:
        if not flops or not gpu_hours or flops <= 0 or gpu_hours <= 0:
            raise FootprintError("give --flops and --gpu-hours (both > 0), or --achieved-tflops", key="--flops")
        achieved_tflops = flops / (gpu_hours * 3600) / 1e12
    elif achieved_tflops <= 0:
        raise FootprintError(f"must be > 0, got {achieved_tflops}", key="--achieved-tflops")
    value = achieved_tflops / peak_tflops
    if value > 1.0:
        raise FootprintError(
            f"MFU {value:.0%} is above 100 % of the dense {dtype} peak of {gpu} ({peak_tflops:g} TFLOP/s): likely a "
            "sparse peak or a sparsity-inflated FLOP count, the wrong dtype (e.g. fp8 work against a bf16 peak), "
            "GPU-hours that miss GPUs, or FLOPs counted for several ranks on one GPU",
            key="mfu",
        )
    notes = ()
    if value > MFU_WARN:
        notes = (
            f"MFU {value:.0%} is above {MFU_WARN:.0%}: plausible only for single large GEMMs; check the FLOP count and the dtype",
        )
    return Mfu(value, peak_tflops, achieved_tflops, gpu, dtype, notes)
