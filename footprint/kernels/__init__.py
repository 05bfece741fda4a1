"""Kernel-level efficiency: profiler-trace analysis, kernel benchmarks, and MFU predicted from them.

- `footprint.kernels.trace`: `analyze_trace(path, power=None)` for PyTorch profiler (Kineto) traces;
- `footprint.kernels.bench`: `run_bench(...)` GEMM/attention sweeps -> an efficiency profile (profile.yaml);
- `footprint.kernels.profile`: `predict(profile, ...)` composes a model's op mix with measured kernel
  efficiencies into step time, MFU, GPU-hours and the kernels that limit them.
"""
