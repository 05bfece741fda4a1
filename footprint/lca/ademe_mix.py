"""``site.electricity_factors: ademe``: ADEME's national electricity mixes as boaviztapi ships them.

BoaviztAPI (AGPL-3.0: never shipped or vendored here, only imported when a user installed it) carries per-kWh
factors of national mixes from ADEME's Base IMPACTS (reference year 2011) in its data file
``boaviztapi/data/factors.yml`` (section ``electricity``, built by boaviztapi from
``data/crowdsourcing/electrical_mix.csv``), read through ``boaviztapi.data.factor_provider``. ADEME has no
toxicity, ecotoxicity or water use factor there, and writes 0 where it has nothing (land use everywhere, ozone
depletion of most zones, the biogenic and land-use parts of climate change): those are "not modelled", never 0.

Climate change is ADEME's own (fossil + biogenic + land use, 2011) so the set stays one source; boaviztapi's API
prefers a newer climate factor for many zones, named in the row's source for comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from footprint.errors import ScenarioError
from footprint.lca import categories as cat
from footprint.lca.factorset import FactorSet

KEY = "site.electricity_factors"
ADEME = "ADEME Base IMPACTS"
#: category key -> boaviztapi criterion names (summed); categories absent here ADEME does not cover
CRITERIA: dict[str, tuple[str, ...]] = {
    "climate_change": ("gwpf", "gwpb", "gwplu"),
    "ozone_depletion": ("odp",),
    "particulate_matter": ("pm",),
    "ionising_radiation": ("ir",),
    "photochemical_ozone_formation": ("pocp",),
    "acidification": ("ap",),
    "eutrophication_terrestrial": ("ept",),
    "eutrophication_freshwater": ("epf",),
    "eutrophication_marine": ("epm",),
    "land_use": ("lu",),
    "resource_use_fossils": ("adpf",),
    "resource_use_minerals_metals": ("adpe",),
}
#: boaviztapi's zone code for ours where they differ
ZONE_CODES = {"WORLD": "WOR"}


def _boavizta(file: str | None) -> tuple[dict[str, Any], str]:
    """boaviztapi's electricity factors and its version, or one line saying how to install it."""
    try:
        from importlib.metadata import version

        from boaviztapi.data.factor_provider import impact_factors
    except ImportError:
        raise ScenarioError(
            "'ademe' reads ADEME's national mixes from BoaviztAPI, which is not installed (AGPL, not shipped with "
            "footprint): pip install boaviztapi",
            file,
            KEY,
        ) from None
    return impact_factors["electricity"], version("boaviztapi")


def load(zone: str, file: str | None = None) -> FactorSet:
    """The 16-category set of ``zone`` (our ISO3 code or WORLD) from boaviztapi's ADEME factors; NaN = not modelled."""
    mixes, ver = _boavizta(file)
    code = ZONE_CODES.get(zone, zone)
    mix = mixes.get(code)
    if not isinstance(mix, dict) or code == "min-max":
        raise ScenarioError(f"boaviztapi {ver} has no ADEME electricity mix for zone {zone!r}", file, KEY)
    keys = cat.keys()
    val = np.full(len(keys), np.nan)
    where = f"boaviztapi {ver} data/factors.yml electricity.{code}"
    srcs = []
    for i, k in enumerate(keys):
        names = CRITERIA.get(k)
        if names is None:
            srcs.append(f"not modelled: {ADEME} (via boaviztapi {ver}) has no {k} factor for electricity")
            continue
        entries = [mix.get(n) for n in names]
        ademe = [e for e in entries if isinstance(e, dict) and str(e.get("source", "")).startswith(ADEME)]
        total = sum(float(e["value"]) for e in ademe)
        if len(ademe) != len(names) or not total > 0:
            srcs.append(f"not modelled: {ADEME} (via {where}) carries 0 for {'+'.join(names)}, which means no data")
            continue
        val[i] = total
        year = ademe[0].get("reference_year", "?")
        srcs.append(f"{ADEME} {year}, {'+'.join(names)} of {mix.get('country', code)} ({where})" + _api_gwp(k, mix))
    title = f"{ADEME} national mix of {zone} via boaviztapi {ver} (ademe)"
    # water use stays "not available" (n/a), not "not modelled": the use stage still holds the site's own
    # cooling water (site.wue), which a not-modelled stage would hide
    off = tuple(bool(np.isnan(v)) and k != "water_use" for k, v in zip(keys, val, strict=True))
    method = "not stated (ADEME Base IMPACTS 2011 via boaviztapi)"  # boaviztapi gives no characterisation method
    return FactorSet("ademe", val, val.copy(), val.copy(), tuple(srcs), title, off, methods=(method,) * len(srcs))


def _api_gwp(key: str, mix: dict[str, Any]) -> str:
    gwp = mix.get("gwp")
    if key != "climate_change" or not isinstance(gwp, dict) or str(gwp.get("source", "")).startswith(ADEME):
        return ""
    return f"; boaviztapi's API uses {gwp.get('value')} kg CO2 eq/kWh from {gwp.get('source')} ({gwp.get('reference_year')})"
