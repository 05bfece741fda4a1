"""Workload: what a training run used, as plain data in canonical units; the input of the engine.

At the bottom of `footprint.lca` (it imports only the GPU records, units and the FactorSet type), so the
electricity model, the engine and the Assessment can name it without importing the scenario parser
(`footprint.lca.workload`, which re-exports it under its public name `footprint.lca.workload.Workload`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from footprint.lca.database import Gpu
from footprint.lca.units import Q

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.factorset import FactorSet
    from footprint.lca.hourly import HourlyIntensity, HourlyMatch

HOST_ONLY = "no GPU: host only"  # what every face says of a run without GPU (`Workload.host_only`)


@dataclass(frozen=True)
class Workload:
    """Everything the LCA needs, in canonical units (hours, kWh, W, L/kWh, kg CO2 eq/kWh)."""

    name: str
    gpu: Gpu | None  # None: no GPU, the host only (a CPU-only run; `host_hours` allocates the server)
    count: int
    lifetime_h: float
    utilization: float
    gpu_hours: float
    gpu_hours_method: str
    it_energy_kwh: float
    energy_method: str
    power_per_gpu_w: float | None
    pue: float
    grid: str
    wue_l_per_kwh: float | None = None
    ewif_l_per_kwh: float | None = None
    carbon_intensity: float | None = None  # kg CO2 eq / kWh override
    ewif_stated: bool = False  # True when site.ewif (or a preset) gave the EWIF, False for the zone's
    ewif_method: str = ""
    pue_method: str = (
        ""  # "stated", "preset NAME", or "default: ..." when the scenario gave neither (footprint.lca.assessment.pue_text)
    )
    electricity_factors: FactorSet | None = None  # site.electricity_factors: a practitioner's per-kWh set
    hourly_intensity: HourlyIntensity | None = None  # site.carbon_intensity_hourly, read and validated
    hourly: HourlyMatch | None = None  # the energy per hour matched to it (footprint.lca.hourly): climate change only
    long_term_emissions: str = "exclude"  # site.long_term_emissions: exclude (EF datasets' practice) or include
    embodied_variant: str | None = None  # hardware.embodied_data: corrected (default) or published
    host: str | None = "default"
    embodied_override: dict[str, float] = field(default_factory=dict)
    flops: float | None = None
    mfu: float | None = None
    mfu_method: str | None = None
    dtype: str = "bf16"
    model: dict[str, float] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    site_preset: str | None = None
    source: str | None = None
    description: str = ""
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    training: dict[str, Any] = field(default_factory=dict)  # a measured run's story (footprint.tracking.story)
    parts: tuple[Workload, ...] = ()  # a run with several GPU models: one Workload per model, assessed and summed
    # a run's devices: device, component, energy_kwh, kind (measured, simulated, estimated), method (tracking's)
    energy_devices: tuple[dict[str, Any], ...] = ()
    host_hours: float = 0.0  # hours of the whole host server: a run without GPU (gpu None) allocates it by these

    @property
    def host_only(self) -> bool:
        """No GPU: the host's energy and its embodied share are the whole footprint (a CPU-only run)."""
        return self.gpu is None

    @property
    def host_lifetimes(self) -> float:
        """Server lifetimes a run without GPU consumes: host-hours / (lifetime x utilisation); 0 with GPUs, whose
        host share is allocated per GPU by `gpu_lifetimes`."""
        return self.host_hours / (self.lifetime_h * self.utilization) if self.host_only else 0.0

    @property
    def lifetime_years(self) -> float:
        """Hardware lifetime in the registry's years (365.25 days), the unit of "N years" in scenarios."""
        return float(Q(self.lifetime_h, "hour").to("year").magnitude)

    @property
    def gpu_lifetimes(self) -> float:
        """Lifetimes of hardware the run consumes: GPU-hours / (lifetime x utilisation)."""
        return self.gpu_hours / (self.lifetime_h * self.utilization)

    @property
    def gpu_equivalents(self) -> int:
        """ceil of gpu_lifetimes (Falk et al.'s GPU-equivalents); float noise below 1e-9 ignored."""
        return math.ceil(self.gpu_lifetimes - 1e-9)

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes)
