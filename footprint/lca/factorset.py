"""FactorSet: a practitioner's per-kWh electricity factors as plain data (read by `footprint.lca.factorfile`).

At the bottom of `footprint.lca` beside Workload and Assessment: the electricity model and the Workload refer to it,
the reader and the template (which need the electricity zones) build on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, eq=False)
class FactorSet:
    """Per-kWh factors over the 16 categories (report order), NaN where the file says n/a."""

    path: str
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    row_sources: tuple[str, ...]  # the file's own source text, one per category (report order)
    title: str = ""  # a named set that is not a file (site.electricity_factors: ademe)
    not_modelled: tuple[bool, ...] = ()  # per category: the set's source has no factor (value NaN), not merely n/a
    methods: tuple[str, ...] = ()  # the characterisation method the file states per category (column characterisation)
    lower_bound: tuple[bool, ...] = ()  # per category: the file says the value is a lower bound (column bound: lower)

    @property
    def label(self) -> str:
        if self.title:
            return self.title
        return f"practitioner-supplied factors, {Path(self.path).name}"

    @property
    def sources(self) -> tuple[str, ...]:
        return ()  # the file's sources are free text, reported with the set, not registered source ids
