"""Serving: what running a model in production costs, per model, request and million tokens, beside its training.

Owns: the engines' metric-name table (`engines`), serving telemetry reduced to windows from Prometheus
(`promsource`, server-side ``increase()`` of the energy; `counts`: exact counts from counter differences at
the window edges), recorded /metrics files (`scrape`) or the live watcher (`watch`: NVML + one server's
/metrics), the attribution that closes the energy books (`attribution`; `grouping`: which engine pod each
GPU's pod belongs to, in either pod-label layout and across a deployment's pods; `costmodel`: the one unit a
GPU shared by engines is split in),
the 16-category footprints per unit and boundary (`assess`), a model's whole life (`life`), the record
directory (`store`, `importer`), the reports (`report`) and the synthetic fleet used by the tests, the
benchmark and the examples (`synthetic`).
Layer: producers. May import footprint.lca, footprint.inputs, footprint.outputs, footprint.errors,
footprint.fleet.prometheus (the HTTP client), footprint.fleet.promql (the one builder of window
queries, shared with the fleet import) and meters; numpy, pandas, matplotlib. Nothing above it
(reports, api, cli, dashboard) is imported here.
"""
