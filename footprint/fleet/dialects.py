"""Exporter dialects: which metric holds a GPU's energy counter and power, in what unit, under which labels.

One table, so that every query of the fleet import (`telemetry`, `aggregate`, `curves`) takes the metric
name, its unit conversion and its labels from one place, and another exporter (AMD's device-metrics-exporter
beside NVIDIA's dcgm-exporter) is one more entry, not a second set of queries. `DcgmNames` is built from an
entry (`DcgmNames.of`) and can still be given names by hand (``--energy-metric`` ...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """The names one exporter gives a GPU's energy and power series, and the factor from its counter to joules."""

    name: str
    energy_metric: str  # a monotonic energy counter ("" if the exporter has none)
    energy_unit_j: float  # joules per counter unit
    power_metric: str  # a power gauge in W, for GPUs without the counter
    host_label: str
    gpu_label: str
    uuid_label: str
    model_label: str
    job_labels: tuple[str, ...]
    source: str  # where these names are documented


DIALECTS: dict[str, Dialect] = {
    "dcgm": Dialect(
        name="dcgm",
        energy_metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        energy_unit_j=1e-3,  # mJ since the driver loaded
        power_metric="DCGM_FI_DEV_POWER_USAGE",
        host_label="Hostname",
        gpu_label="gpu",
        uuid_label="UUID",
        model_label="modelName",
        job_labels=("hpc_job",),
        source="NVIDIA dcgm-exporter default-counters.csv and --hpc-job-mapping-dir (hpc_job label)",
    ),
}


def dialect(name: str) -> Dialect:
    """The dialect called ``name`` (a KeyError names the known ones)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise KeyError(f"unknown exporter dialect {name!r}; known: {', '.join(sorted(DIALECTS))}") from None


__all__ = ["DIALECTS", "Dialect", "dialect"]
