"""Live metrics of a running tracker, for the frameworks' loggers and Prometheus: energy, CO2 eq, power, MFU.

Computed from the tracker's latest samples and step counters (no I/O, no sampler tick) on each rank, then
made job-wide by `job_wide`: summed over ranks (tokens, energy, power, CO2 eq, tokens/s; MFU and steps
averaged) with one all-reduce where a torch process group exists, else named per rank
(``footprint/rank1/tokens``), so a logger on rank 0 never shows rank 0's share under a job-wide name.
CO2 eq is the use phase only: energy x
PUE x the grid zone's carbon intensity (the same factors the assessment uses); the full life cycle
(embodied impacts) is in the report at the end.
"""

from __future__ import annotations

import sys
from typing import Any

PREFIX = "footprint/"
SUMMED = ("tokens", "energy_kwh", "gpu_energy_kwh", "gpu_power_w", "co2eq_kg_use_phase", "tokens_per_s")
AVERAGED = ("steps", "mfu")  # the same on every rank (steps), or a mean of equal GPUs' (MFU)
J_PER_KWH = 3.6e6


def use_phase_intensity(site: dict[str, Any] | None) -> tuple[float, float, str]:
    """(PUE, kg CO2 eq per kWh, grid zone) of a tracker's site: stated values, else the defaults the assessment uses."""
    from footprint.lca.database import db
    from footprint.lca.electricity import WORLD, intensity_override, resolve_zone, zone

    site = site or {}
    sites = db().sites
    preset = sites.get("sites", {}).get(site.get("preset") or sites.get("default"), {})
    pue = float(site.get("pue") or (preset.get("pue") or {}).get("value") or 1.0)
    code = resolve_zone(site.get("grid") or WORLD)
    if site.get("carbon_intensity") is not None:
        return pue, intensity_override(site["carbon_intensity"]), code
    return pue, float(zone(code).factors["climate_change"].value or 0.0), code


class LiveMetrics:
    """``compute()`` -> {"footprint/energy_kwh": ..., ...}; unknown values are left out (never logged as 0)."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self._intensity: tuple[float, float, str] | None = None
        self._peaks: dict[str, float | None] = {}

    def _peak(self, names: tuple[str, ...], dtype: str) -> float | None:
        key = f"{dtype}:{','.join(names)}"
        if key not in self._peaks:
            from footprint.lca.database import db

            try:
                self._peaks[key] = sum(db().find_gpu(n).peak_flops(dtype) for n in names)
            except Exception:
                self._peaks[key] = None
        return self._peaks[key]

    def compute(self) -> dict[str, float]:
        snap = self.tracker.snapshot()
        out: dict[str, float | None] = {"steps": snap["steps"] or None, "tokens": snap["tokens"] or None}
        devices = snap["devices"]
        gpus = [d for d in devices if d["component"] == "gpu"]
        if devices:
            total_j = sum(d["energy_j"] for d in devices)
            out["energy_kwh"] = total_j / J_PER_KWH
            if gpus:
                out["gpu_energy_kwh"] = sum(d["energy_j"] for d in gpus) / J_PER_KWH
                powers = [d["power_w"] for d in gpus if d["power_w"] is not None]
                out["gpu_power_w"] = sum(powers) if len(powers) == len(gpus) else None
            if self._intensity is None:
                try:
                    self._intensity = use_phase_intensity(self.tracker.site)
                except Exception:
                    self._intensity = (1.0, 0.0, "unknown")
            pue, ci, _ = self._intensity
            out["co2eq_kg_use_phase"] = total_j / J_PER_KWH * pue * ci if ci else None
        flops = snap["step_flops"]
        if gpus and len(flops) >= 2 and flops[-1][0] > flops[0][0]:
            peak = self._peak(tuple(sorted(d["name"] for d in gpus)), snap["dtype"])
            rate = sum(f for _, f, _ in flops[1:]) / (flops[-1][0] - flops[0][0])
            out["mfu"] = rate / peak if peak else None
        if snap["tokens"] and snap["elapsed_s"] > 0:
            out["tokens_per_s"] = snap["tokens"] / snap["elapsed_s"]
        return {PREFIX + k: float(v) for k, v in out.items() if v is not None}


def _process_group() -> Any:
    """torch.distributed when a process group of more than one rank is up (torch is never imported here)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist if dist.get_world_size() > 1 else None


def job_wide(values: dict[str, float], rank: int = 0, world: int = 1) -> dict[str, float]:
    """This rank's live metrics made the job's. Every rank must call it at the same point (the frameworks' logging
    steps are collective already: the Trainer gathers the loss there): one all-reduce of a fixed-size vector, so a
    rank with nothing to report still takes part. A sum is kept only if every rank had the value (never a partial
    sum under a job-wide name). Without a process group, a multi-rank job's values are named per rank."""
    dist = _process_group()
    if dist is None:
        if world <= 1:
            return values
        return {f"{PREFIX}rank{rank}/{k.removeprefix(PREFIX)}": v for k, v in values.items()}
    import torch

    keys = SUMMED + AVERAGED
    vec = torch.zeros(2 * len(keys), dtype=torch.float64)
    for i, k in enumerate(keys):
        if PREFIX + k in values:
            vec[i], vec[len(keys) + i] = values[PREFIX + k], 1.0
    backend = str(dist.get_backend())  # "gloo", "nccl", or per device: "cpu:gloo,cuda:nccl"
    if "nccl" in backend and "gloo" not in backend:  # NCCL reduces CUDA tensors only
        vec = vec.to(torch.device("cuda", torch.cuda.current_device()))
    dist.all_reduce(vec)
    got, n = vec.cpu().tolist(), dist.get_world_size()
    out = {}
    for i, k in enumerate(keys):
        total, have = got[i], got[len(keys) + i]
        if (k in SUMMED and have == n) or (k in AVERAGED and have):
            out[PREFIX + k] = total if k in SUMMED else total / have
    return out
