"""footprint: the life-cycle environmental footprint of AI training, in the 16 EF 3.1 categories.

Public API (imported lazily so that ``import footprint`` costs milliseconds):

    load_scenario(path, sets=None) -> Workload  (footprint.builders: kernel profiles resolved)
    assess(workload | scenario path or name | run dir | run, samples=DEFAULT_SAMPLES (2000), seed=0, set={...})
        -> Assessment  (set= overrides keys as `footprint assess --set` does: {"training.mfu": 0.5})
    report(target, "report.html", compare=(), format=None, sets=None) -> Path   (as `footprint report`)
    assess_many(workloads) -> BatchAssessment  (central values of thousands of workloads, factor lookups shared)
    track(name=..., output_dir="runs", site=..., gpus=...) -> Tracker  (context manager, decorator, start/stop)
    read_samples(run_dir, t_range=..., uuids=..., columns=...) -> DataFrame; power_timeline(run_dir, buckets=1000)
    measure_flops(fn, *args) -> int; transformer_flops(params, tokens, ...); compute_mfu(gpu, dtype, ...)
    analyze_trace(trace, include_unlinked=False, ...) -> dict; diff_traces(a, b, train_steps=..., scenario=...) -> dict
    serving_report(record, grid=None, pue=None, boundary="+pue", training=None) -> dict  (as `footprint serving report`)
    disclose(target, "eu-ai-act" | "hf" | "sci", per=None, job=None, model=None) -> Disclosure  (as `footprint disclose`:
        .data, .text("md" | "json" | "yaml"), .merge("README.md") for the model card)
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
    "disclose",
    "load_scenario",
    "measure_flops",
    "power_timeline",
    "read_samples",
    "report",
    "serving_report",
    "track",
    "transformer_flops",
    "__version__",
]

_LAZY = {
    "load_scenario": ("footprint.builders", "load_scenario"),
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
    "compute_mfu": ("footprint.lca.catalogue", "compute_mfu"),
    "Tracker": ("footprint.tracking.tracker", "Tracker"),
    "read_samples": ("footprint.tracking.runrecord", "read_samples"),
    "power_timeline": ("footprint.tracking.runrecord", "power_timeline"),
    "analyze_trace": ("footprint.kernels.trace", "analyze_trace"),
    "diff_traces": ("footprint.kernels.diff", "diff_traces"),
    "serving_report": ("footprint.serving.report", "serving_report"),
    "disclose": ("footprint.disclosures", "disclose"),
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
