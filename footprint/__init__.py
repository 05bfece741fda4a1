"""footprint: the life-cycle environmental footprint of AI training, in the 16 EF 3.1 categories.

Public API (imported lazily so that ``import footprint`` costs milliseconds):

    load_scenario(path, sets=None) -> Workload
    assess(workload, samples=2000, seed=0) -> Assessment
    Workload, Assessment, FootprintError
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Assessment", "FootprintError", "Workload", "assess", "load_scenario", "__version__"]

_LAZY = {
    "load_scenario": ("footprint.workload", "load_scenario"),
    "Workload": ("footprint.workload", "Workload"),
    "assess": ("footprint.api", "assess"),
    "Assessment": ("footprint.assessment", "Assessment"),
    "FootprintError": ("footprint.errors", "FootprintError"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'footprint' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
