"""The GPU catalogue as plain data: one row per card, and one card's specs with its embodied impacts.

Shared by `footprint gpus` and the dashboard's Hardware page, so both show the same numbers.
"""

from __future__ import annotations

from typing import Any

from footprint.errors import FootprintError
from footprint.flops.mfu import Mfu, mfu_against_peak
from footprint.lca import categories as cat
from footprint.lca.database import IDX, db


def gpu_rows() -> list[dict[str, Any]]:
    """One row per card of the catalogue: specs and embodied climate change per card."""
    d = db()
    rows = []
    for g in d.gpus.values():
        emb = d.embodied(g.id)
        rows.append(
            {
                "id": g.id,
                "name": g.name,
                "vendor": g.vendor,
                "tdp_w": g.tdp_w,
                "bf16_tflops": g.peak_tflops.get("bf16") or g.peak_tflops.get("fp16"),
                "memory_gb": g.memory_gb,
                "embodied_method": emb.method,
                "climate_change_kg": float(emb.total()[0]),
            }
        )
    return rows


def gpu_card(name: str, variant: str | None = None) -> dict[str, Any]:
    """One card as JSON: specs, and embodied impacts (no distribution, no use) in the default data variant
    (corrected, lca_data/embodied_corrections.yaml) with the ADEME data as published beside each total."""
    d = db()
    g = d.find_gpu(name)
    emb = d.embodied(g.id, variant)
    published = d.embodied(g.id, "published").total()
    by_stage, by_comp = emb.by_stage(), emb.by_component()
    impacts = {}
    for c in cat.categories() + cat.extras():
        i = IDX[c.key]
        impacts[c.key] = {
            "name": c.name,
            "unit": c.unit,
            "total": float(emb.total()[i]),
            "published_total": float(published[i]),
            "by_stage": {s: float(v[i]) for s, v in by_stage.items()},
            "by_component": {k: float(v[i]) for k, v in by_comp.items()},
        }
    return {
        "id": g.id,
        "name": g.name,
        "vendor": g.vendor,
        "aliases": list(g.aliases),
        "tdp_w": g.tdp_w,
        "memory_gb": g.memory_gb,
        "die_area_mm2": g.die_area_mm2,
        "process_node": g.process_node,
        "peak_tflops_dense": g.peak_tflops,
        "parametric_inputs": g.parametric,
        "proxy_of": g.proxy_of,
        "embodied_method": emb.method,
        "embodied_data": d.resolve_variant(variant),
        "scope": "manufacturing + upstream transport + end of life, per card; no distribution, no use",
        "impacts": impacts,
        "notes": list(g.notes) + list(emb.notes),
        "sources": d.cite((*emb.sources, *g.sources)),
    }


def compute_mfu(
    gpu: str,
    dtype: str = "bf16",
    *,
    flops: float | None = None,
    gpu_hours: float | None = None,
    achieved_tflops: float | None = None,
) -> Mfu:
    """MFU of a catalogue card: its dense peak for `dtype` (lca_data, the one source of peaks) against FLOPs over
    GPU-hours or achieved TFLOP/s per GPU."""
    if not isinstance(gpu, str):  # an object or bytes from the Python API: one error, not a traceback
        raise FootprintError(f"expected a GPU name, got {type(gpu).__name__}", key="--gpu")
    card = db().find_gpu(gpu, key="--gpu")
    try:
        peak = card.peak_flops(dtype) / 1e12
    except KeyError as exc:
        raise FootprintError(str(exc.args[0]), key="--dtype") from None
    return mfu_against_peak(peak, card.name, dtype, flops=flops, gpu_hours=gpu_hours, achieved_tflops=achieved_tflops)
