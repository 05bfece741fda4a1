"""The LCA: from a Workload to an Assessment in the 16 EF 3.1 categories.

Owns, roughly bottom to top (no import circle among them: tests/test_layers.py checks it): the
unit registry (`units`), the impact categories (`categories`), the typed LCA database over `lca_data/`
(`database`, `parametric`), the plain data types (`factorset`: a practitioner's factor set, `workload_data`: the
Workload, `assessment`: the Assessment, its number formatting and facts), the electricity model (`electricity`),
factor files (`factorfile`), how each factor is drawn and which inputs drive the variance (`uncertainty`), the
Monte Carlo (`montecarlo`), the scenario parser (`workload`: one parser per section; it re-exports Workload), how
a run of several GPU models adds up (`mixed`), the engine (`engine.assess`) and batch assessment (`batch`), the
caveats in groups (`notes`), the text renderings (`render`) and the factor audit of docs/validation.md
(`factor_audit`).
May import: the core beside it (`footprint.errors`, `inputs`, `bounds`, `escaping`, `flops`), `lca_data`,
`scenarios` (the shipped scenario files, package data), numpy, pint, yaml. Nothing above: tracking, kernels,
reports, the API and the CLI build on this package, never the other way round (a scenario's
`training.kernel_profile` is resolved by a function the caller passes in: `footprint.builders`).

`footprint.lca.assess` is the engine (imported lazily so that `footprint.lca.categories` stays cheap).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_SAMPLES", "assess"]

#: Monte Carlo samples of the low-high ranges, for every front end (CLI, reports, dashboard, Python API, exports),
#: so that the same scenario shows the same range everywhere. Defined here so the CLI can read it without the engine.
DEFAULT_SAMPLES = 2000


def __getattr__(name: str) -> Any:
    if name == "assess":
        from footprint.lca import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'footprint.lca' has no attribute {name!r}")
