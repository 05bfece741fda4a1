"""Reports and figures: the documents a team attaches to a model card or sustainability statement.

Owns: `footprint report` (`report`: HTML, Markdown, JSON, CSV, PDF, BoAmps JSON), the matplotlib figures they
embed (`figures`), the HTML page of `footprint kernels diff` (`kernel_diff`), the one colour palette of every
figure, the dashboard's and the fleet report's included (`palette`), and headless Chromium (`browser`: the
PDF printer, and a DevTools session for screenshots and layout checks).
Reports render the Assessments they are given (`footprint.api` assesses scenario files and runs first); they never
import `footprint.api`.
May import: `footprint.lca` (assessments), `footprint.tracking.runrecord` (run samples, device labels),
`footprint.kernels` (trace sections), matplotlib (lazily), websockets (lazily, `browser.Browser` only).
"""
