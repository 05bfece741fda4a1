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
    activity_metric: str  # per partition (MIG instance, AMD compute partition): splits a shared GPU by activity
    instance_label: str  # the partition's label
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
        activity_metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        instance_label="GPU_I_ID",
        source="NVIDIA dcgm-exporter default-counters.csv and --hpc-job-mapping-dir (hpc_job label)",
    ),
    "amd": Dialect(
        name="amd",
        energy_metric="gpu_energy_consumed",
        energy_unit_j=1e-6,  # "accumulated energy consumed by the GPU in micro Joules"
        power_metric="gpu_power_usage",  # W
        host_label="hostname",
        gpu_label="gpu_id",
        uuid_label="gpu_uuid",
        model_label="card_model",
        job_labels=("job_id",),  # from its SLURM prolog/epilog integration
        activity_metric="gpu_gfx_activity",  # %: relative, so it splits a partitioned GPU as DCGM's ratio does
        instance_label="gpu_partition_id",
        source=(
            "ROCm/device-metrics-exporter docs/configuration/metricslist.md (GPU_ENERGY_CONSUMED, GPU_POWER_USAGE, "
            "GPU_GFX_ACTIVITY) and docs/integrations/slurm-integration.md (job_id)"
        ),
    ),
}


def dialect(name: str) -> Dialect:
    """The dialect called ``name`` (a KeyError names the known ones)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise KeyError(f"unknown exporter dialect {name!r}; known: {', '.join(sorted(DIALECTS))}") from None


__all__ = ["DIALECTS", "Dialect", "dialect"]
