"""The 16 EF 3.1 impact categories, life-cycle stages and components (from lca_data/categories.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Category:
    key: str
    name: str
    unit: str
    ademe: str


@lru_cache(maxsize=1)
def _data() -> dict:
    from lca_data.loader import load_categories

    return load_categories()


def categories() -> tuple[Category, ...]:
    """The 16 categories in report order."""
    return tuple(Category(**c) for c in _data()["categories"])


def extras() -> tuple[Category, ...]:
    """Indicators reported beside the 16 (primary energy)."""
    return tuple(Category(**c) for c in _data()["extras"])


def keys() -> tuple[str, ...]:
    return tuple(c.key for c in categories())


def by_key(key: str) -> Category:
    for c in categories() + extras():
        if c.key == key:
            return c
    raise KeyError(key)


def stages() -> tuple[str, ...]:
    return tuple(_data()["stages"])


def components() -> tuple[str, ...]:
    return tuple(_data()["components"])


#: The characterisation label the EF 3.1 single score sums without calling itself partial (a factor row's
#: ``characterisation`` column, lca_data/tools/build_electricity.py, says the same words).
EF31 = "EF 3.1"

_EF31_NAME = re.compile(r"\s*EF\s*v?3\.1(\s+no\s+LT)?\s*", flags=re.I)


def method_name(text: str) -> str:
    """A characterisation method as the single score compares it: EF 3.1 however a database spells the family
    ("EF v3.1", "EF v3.1 no LT", ecoinvent's names; the long-term choice is its own column), else the text as given."""
    return EF31 if _EF31_NAME.fullmatch(text or "") else text


HEADLINE = ("climate_change", "human_toxicity_cancer", "resource_use_minerals_metals")
# Components of the use stage (the rest of by_component is embodied): grid electricity, and the site's
# own cooling water in the water-use category.
USE_COMPONENTS = ("electricity", "on_site_water")
