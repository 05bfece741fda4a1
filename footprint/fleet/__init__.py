"""A whole cluster: per-job footprints from the telemetry and accounting operators already run.

Owns: the Prometheus HTTP API client (`prometheus`), DCGM-exporter series read as per-GPU energy
intervals (`telemetry`), SLURM accounting (`slurm`), the join that gives every GPU-second to at most
one job (`attribution`), the per-job run records and the fleet index written by
`footprint fleet import` (`importer`, `store`), fleet reports (`report`), and the synthetic DCGM series
and local Prometheus server used by the tests, the benchmark and the README (`synthetic`, `promserver`).
May import: `footprint.tracking.runrecord` (its public writers only), `footprint.lca` (workloads, the
engine through `footprint.lca.batch`), `footprint.reports` (the HTML style), `footprint.errors`;
requests, numpy, pandas, pyarrow. Nothing in `footprint` outside the CLI and the dashboard imports it.
"""
