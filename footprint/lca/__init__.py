"""The LCA: from a Workload to an Assessment in the 16 EF 3.1 categories.

Owns: the unit registry (`units`), the impact categories (`categories`), the typed LCA database over
`lca_data/` (`database`, `parametric`, `electricity`), the Workload and scenario files (`workload`),
the engine (`engine.assess`) and its result (`assessment`), the Monte Carlo (`montecarlo`) and how each
factor is drawn and which inputs drive the variance (`uncertainty`), the caveats in groups (`notes`) and
batch assessment (`batch`).
May import: `footprint.errors`, `lca_data`, numpy, pint, yaml. Nothing else of ours: tracking,
reports, kernels and the CLI build on this package, never the other way round.

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
