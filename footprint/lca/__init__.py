"""The LCA: from a Workload to an Assessment in the 16 EF 3.1 categories.

Owns: the unit registry (`units`), the impact categories (`categories`), the typed LCA database over
`lca_data/` (`database`, `parametric`, `electricity`), the Workload and scenario files (`workload`),
the engine (`engine.assess`) and its result (`assessment`).
May import: `footprint.errors`, `lca_data`, numpy, pint, yaml. Nothing else of ours: tracking,
reports, kernels and the CLI build on this package, never the other way round.

`footprint.lca.assess` is the engine (imported lazily so that `footprint.lca.categories` stays cheap).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_SAMPLES", "assess"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from footprint.lca import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'footprint.lca' has no attribute {name!r}")
