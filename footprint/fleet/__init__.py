"""A whole cluster: per-job footprints from the telemetry and accounting operators already run.

Owns: the Prometheus HTTP API client (`prometheus`), energy per window evaluated by the server
(`promql`: increase() terms, MIG repeats counted once, batches under the sample limit; reusable by any
producer), the default import (`aggregate`: each GPU's energy curve from grouped per-hour summaries,
`summaries` and `curves`, joined with the jobs client-side; the edges of jobs known from their labels alone
placed inside their scrape intervals by `edges`), exporter names in one table (`dialects`),
DCGM-exporter series read as per-GPU energy intervals for `--exact` (`telemetry`), SLURM accounting (`slurm`,
read in batches as columns by `sacct_batch` with the per-line rules in `sacct_rules`, its jobs held in columns
by `sacct_jobs`), the join that gives every GPU-second to at most one job (`attribution`, its job
table in columns in `jobtable`, the aggregated import's per job x GPU spans in `spans`), the job ledger and the
fleet directory written by `footprint fleet import` (`importer`, its rows built as columns by `job_rows`,
`store`, `ledger`: Parquet read with DuckDB;
`records`: a job's run record), the
recording rules shipped for Prometheus/Thanos/Mimir rulers (`rules/`), fleet reports (`report`), and the
synthetic DCGM series and local Prometheus server used by the tests, the benchmark and the README
(`synthetic`, `promserver`).
May import: `footprint.tracking.runrecord` (its public writers only), `footprint.lca` (workloads, the
engine through `footprint.lca.batch`), `footprint.reports` (the HTML style), `footprint.outputs`,
`footprint.errors`, `footprint.inputs`; requests, numpy, pandas, pyarrow, duckdb. Nothing in `footprint`
outside the CLI and the dashboard imports it.
"""
