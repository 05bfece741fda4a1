"""footprint: the life-cycle environmental footprint of AI training, in the 16 EF 3.1 categories.

Public API (imported lazily so that ``import footprint`` costs milliseconds):

    load_scenario(path, sets=None) -> Workload
    assess(workload | scenario path | run dir | run, samples=DEFAULT_SAMPLES (2000), seed=0) -> Assessment
    report(target, "report.html", compare=(), format=None, sets=None) -> Path   (as `footprint report`)
    assess_many(workloads) -> BatchAssessment  (central values of thousands of workloads, factor lookups shared)
    track(name=..., output_dir="runs", site=..., gpus=...) -> Tracker  (context manager, decorator, start/stop)
    read_samples(run_dir, t_range=..., uuids=..., columns=...) -> DataFrame; power_timeline(run_dir, buckets=1000)
    measure_flops(fn, *args) -> int; transformer_flops(params, tokens, ...); compute_mfu(gpu, dtype, ...)
    analyze_trace(trace, include_unlinked=False, ...) -> dict; diff_traces(a, b, train_steps=..., scenario=...) -> dict
    Workload, Assessment, FootprintError, FootprintWarning (a bad track() argument, worked around)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = [
    "Assessment",
    "FootprintError",
    "FootprintWarning",
    "Tracker",
    "Workload",
    "analyze_trace",
    "assess",
    "assess_many",
    "compute_mfu",
    "diff_traces",
    "load_scenario",
    "measure_flops",
    "power_timeline",
    "read_samples",
    "report",
    "track",
    "transformer_flops",
    "__version__",
]

_LAZY = {
    "load_scenario": ("footprint.lca.workload", "load_scenario"),
    "Workload": ("footprint.lca.workload", "Workload"),
    "assess": ("footprint.api", "assess"),
    "assess_many": ("footprint.lca.batch", "assess_many"),
    "report": ("footprint.api", "report"),
    "Assessment": ("footprint.lca.assessment", "Assessment"),
    "FootprintError": ("footprint.errors", "FootprintError"),
    "FootprintWarning": ("footprint.errors", "FootprintWarning"),
    "track": ("footprint.tracking.tracker", "track"),
    "measure_flops": ("footprint.flops", "measure_flops"),
    "transformer_flops": ("footprint.flops", "transformer_flops"),
    "compute_mfu": ("footprint.flops", "compute_mfu"),
    "Tracker": ("footprint.tracking.tracker", "Tracker"),
    "read_samples": ("footprint.tracking.runrecord", "read_samples"),
    "power_timeline": ("footprint.tracking.runrecord", "power_timeline"),
    "analyze_trace": ("footprint.kernels.trace", "analyze_trace"),
    "diff_traces": ("footprint.kernels.diff", "diff_traces"),
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
