"""Reports and figures: the documents a team attaches to a model card or sustainability statement.

Owns: `footprint report` (`report`: HTML, Markdown, JSON, CSV, PDF, BoAmps JSON) and the matplotlib
figures they embed (`figures`).
May import: `footprint.lca` (assessments), `footprint.tracking.runrecord` (run samples),
`footprint.kernels` (trace sections), matplotlib (lazily).
"""
