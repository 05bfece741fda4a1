"""Kernel-level efficiency: profiler-trace analysis, kernel benchmarks, and MFU predicted from them.

- `footprint.kernels.trace`: `analyze_trace(path, power=None)` for PyTorch profiler (Kineto) traces;
- `footprint.kernels.diff`: `diff_traces(a, b, ...)` two traces compared per kernel class and op, down to
  a training run's footprint (through `footprint.lca`'s scenario path);
- `footprint.kernels.bench`: `run_bench(...)` GEMM/attention sweeps -> an efficiency profile (profile.yaml);
- `footprint.kernels.profile`: `predict(profile, ...)` composes a model's op mix with measured kernel
  efficiencies into step time, MFU, GPU-hours and the kernels that limit them.

May import: `footprint.lca`, `footprint.flops`, `footprint.errors`, `footprint.inputs`, `footprint.outputs`
(and `footprint.tracking.runrecord` for a run's power samples).
"""
