"""Builders: a Workload from what users have that the LCA core must not read itself.

The core (`footprint.lca`) knows Workloads and scenario mappings, never runs or traces. Building a Workload
from a scenario with a kernel efficiency profile (`training.kernel_profile`, read by `footprint.kernels`) or from
a run record (`footprint.tracking`) joins two producers with the core, so it lives here, one layer up beside
`footprint.api`, and the API, the CLI and the dashboard all build through it.

Consumer layer: imports the core and the producers (tracking, kernels); nothing imports it from below.
"""

from __future__ import annotations

from pathlib import Path

from footprint.lca import workload as scenario
from footprint.lca.workload import Workload

__all__ = ["load_scenario", "workload_from_dict"]


def _predict(profile: Path, model: dict[str, float], gpu: object, dtype: str) -> object:
    """`training.kernel_profile` as the kernels package predicts it (imported only when a scenario names one)."""
    from footprint.kernels.profile import predict_for_scenario

    return predict_for_scenario(profile, model, gpu, dtype)


def workload_from_dict(data: dict, file: str | None = None) -> Workload:
    """`footprint.lca.workload.workload_from_dict`, with kernel profiles resolved."""
    return scenario.workload_from_dict(data, file, kernel_profile=_predict)


def load_scenario(path: str | Path, sets: list[str] | None = None, flag: str = "--set") -> Workload:
    """Read, validate and resolve a scenario YAML (a path, or a shipped scenario's name) into a Workload, kernel
    profiles included (the public `footprint.load_scenario`)."""
    return scenario.load_scenario(path, sets, flag, kernel_profile=_predict)
