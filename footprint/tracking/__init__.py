"""Measuring a training job: the tracker, the run record on disk, and `footprint run` / `footprint import`.

Owns: `footprint.track` and `Tracker` (`tracker`), the measured FLOPs of one training step (`watch`),
the run directory format, its recovery and merging (`runrecord`), run names claimed once and agreed by
every rank of a distributed run (`runname`), the training story of a run record
(`story`), a run record as a Workload (`to_workload`), wrapping a command and importing existing power logs
(`runcmd`; its live-metrics exporter is handed in by the CLI), and the zero-code step counter a wrapped command
loads (`stepcount`, through `childhook/sitecustomize.py`).
May import: `meters` (power and energy meters, sampler, journal), `footprint.errors`, `footprint.outputs`,
`footprint.bounds` (the plausibility table),
`footprint.flops` (FLOPs per token, MFU), `footprint.lca` (lazily for site validation; `to_workload`). Nothing
above it (reports, integrations, the API, the CLI). Starting
a tracker must stay cheap: nothing heavy (pandas, pint, torch) at import time.
"""
