"""Build the per-kWh electricity factors of the use phase, in all 16 EF 3.1 categories, from open data.

Run from the repository root:  python -m lca_data.tools.build_electricity [../shared/reference/electricity]

Reads the open tables in ``<src>/open-factors/`` (EF 3.1 characterisation factors, EMEP/EEA Tier 1
stack emission factors, net efficiencies, Macknick water consumption, WRI 2020 and AWARE per country,
EF 3.1 land-use factors), the UNECE 2022 per-technology results (``owid_unece.csv``, OWID's
transcription), Digital4Better's UNECE-Europe table (``d4b_energy_impacts.csv``), the hand-cited
values in ``lca_data/electricity_cited.csv`` and the cited stack emissions of second sources in
``lca_data/electricity_emissions_cited.csv`` (characterised here, cross-check only); writes, one value a row
with unit, source and scope:

- ``electricity_technologies.csv``: factor per technology x category, with its Monte Carlo low/high;
- ``electricity_zones.csv``: per-country off-site water (WRI EWIF) and AWARE 1.2 / 2.0 factors;
- ``electricity_crosscheck.csv``: every factor beside each independent second source, their ratio
  and whether they disagree by more than 3x ("contested");
- ``electricity_not_modelled.csv``: the technology x category pairs with no open life-cycle value (never a 0 factor);
- ``electricity_audit.csv``: every value each factor was built from or checked against (ratio, unit, year, licence).

How each category is built (``scope`` column): life cycle where UNECE (or Digital4Better's UNECE-Europe
values) covers the technology; ``direct`` where only stack emissions (EMEP/EEA Tier 1 g/GJ x 0.0036 / net
efficiency, characterised with EF 3.1 factors for high stacks) or fuel input (3.6 MJ / efficiency) are
known: no upstream fuel chain, a lower bound. A technology with no combustion (or no fuel) has zero direct
emissions and, where no open life-cycle value was found, no factor at all: it is listed as not modelled (what
it lacks, where the search went, the values quoted beside it), never shipped as 0, and no proxy fills it.
Low/high span the central value,
the technology's variants (other UNECE variants, other efficiencies, the EMEP 95 % confidence
interval) and every second source, so that disagreeing sources always sit inside the range.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from pathlib import Path

from lca_data.loader import load_sources
from lca_data.tools import write_csv
from lca_data.tools.electricity_quality import LOWER_BOUND, quality

HERE = Path(__file__).resolve().parents[1]
DEFAULT_SRC = HERE.parent.parent / "shared" / "reference" / "electricity"
HEADER = (
    "# Written by lca_data/tools/build_electricity.py from the open data in ../shared/reference/electricity "
    "(sources per row, lca_data/sources/electricity.yaml). Do not edit by hand: re-run the tool.\n"
)
CONTESTED_RATIO = 3.0

TECHS = {  # technology -> codecarbon field of the generation mix
    "coal": "coal_TWh",
    "gas": "gas_TWh",
    "oil": "oil_TWh",
    "nuclear": "nuclear_TWh",
    "hydro": "hydroelectricity_TWh",
    "wind": "wind_TWh",
    "solar": "solar_TWh",
    "bioenergy": "biofuel_TWh",
    "other_renewables": "other_renewable_exc_biofuel_TWh",
}
COMBUSTION = ("coal", "gas", "oil", "bioenergy")
UNITS = {
    "climate_change": "kg CO2 eq/kWh",
    "ozone_depletion": "kg CFC11 eq/kWh",
    "human_toxicity_cancer": "CTUh/kWh",
    "human_toxicity_non_cancer": "CTUh/kWh",
    "particulate_matter": "disease incidence/kWh",
    "ionising_radiation": "kBq U235 eq/kWh",
    "photochemical_ozone_formation": "kg NMVOC eq/kWh",
    "acidification": "mol H+ eq/kWh",
    "eutrophication_terrestrial": "mol N eq/kWh",
    "eutrophication_freshwater": "kg P eq/kWh",
    "eutrophication_marine": "kg N eq/kWh",
    "ecotoxicity_freshwater": "CTUe/kWh",
    "land_use": "Pt/kWh",
    "water_use": "m3 world eq/kWh",
    "resource_use_fossils": "MJ/kWh",
    "resource_use_minerals_metals": "kg Sb eq/kWh",
    "water_consumption": "L/kWh",  # not an EF category: operational water, for the technology-mix EWIF
}
WATER_CATEGORY = "water_consumption"
S_UNECE, S_D4B, S_CF, S_EMEP = (
    "unece-2022-lca-electricity",
    "d4b-energy-impacts",
    "ef31-characterisation-factors",
    "emep-eea-tier1-1a1a",
)
S_EFF, S_DERIVED, S_MACKNICK = "pypsa-technology-data", "footprint-electricity-derived", "macknick-2012-water"

# UNECE variants (OWID transcription rows): the first is the default, the others widen the range.
UNECE_ROWS = {
    "coal": ["Coal"],
    "gas": ["Gas"],
    "nuclear": ["Nuclear"],
    "hydro": ["Hydropower"],
    "wind": ["Onshore wind", "Offshore wind"],
    "solar": [
        "Solar PV, silicon (on-ground)",
        "Solar PV, silicon (roof)",
        "Solar PV, cadmium (on-ground)",
        "Solar PV, cadmium (roof)",
    ],
}
# OWID column -> (category, factor converting OWID's per-MWh unit to the per-kWh EF unit)
UNECE_COLUMNS = {
    "ghg_emissions": ("climate_change", 1e-3),  # kg CO2 eq/MWh
    "freshwater_eutrophication": ("eutrophication_freshwater", 1e-6),  # g P eq/MWh
    "ionising_radiation": ("ionising_radiation", 1e-3),  # labelled kg U-235 eq/MWh, read as kBq/MWh
    "metal_mineral_use": ("resource_use_minerals_metals", 1e-6),  # g Sb eq/MWh
    "noncarcinogenic_toxicity": ("human_toxicity_non_cancer", 1e-9),  # CTUh/TWh
    "carcinogenic_toxicity": ("human_toxicity_cancer", 1e-9),  # CTUh/TWh
}
D4B_ROWS = {"coal": "Coal", "gas": "Gas", "nuclear": "Nuclear", "hydro": "Hydro", "wind": "Wind", "solar": "Solar"}
D4B_COLUMNS = {
    "gwp": "climate_change",
    "ap": "acidification",
    "ctue": "ecotoxicity_freshwater",
    "ctuh-c": "human_toxicity_cancer",
    "ctuh-nc": "human_toxicity_non_cancer",
    "ir": "ionising_radiation",
    "pm": "particulate_matter",
    "adpe": "resource_use_minerals_metals",
}
D4B_CENTRAL = ("acidification", "ecotoxicity_freshwater", "particulate_matter")  # no UNECE-global value for these

# EMEP/EEA fuels and the efficiencies that turn g/GJ of fuel into g/kWh of electricity.
EMEP_FUEL = {"coal": "Hard Coal", "gas": "Natural gas", "oil": "Heavy Fuel Oil", "bioenergy": "Biomass"}
EMEP_VARIANT = {"coal": "Brown Coal", "oil": "Gas oil"}  # second fuel for the same codecarbon bin (range)
EFFICIENCY = {  # central, (alternatives) as substrings of the efficiency table items
    "coal": ("Hard coal power plant", ("Lignite power plant",)),
    "gas": ("Natural gas combined cycle", ("Natural gas open cycle",)),
    "oil": ("Oil (diesel engine farm)", ()),
    "bioenergy": ("Solid biomass CHP, wood chips", ('Biomass (electricity only, "biomass")',)),
    "nuclear": ("Nuclear (thermal-to-electric)", ()),
}
POLLUTANTS = {  # EMEP pollutant -> EF 3.1 flow name
    "NOx": "Nitrogen oxides",
    "NMVOC": "NMVOC, non-methane volatile organic compounds",
    "SOx": "Sulfur dioxide",
    "CO": "Carbon monoxide, fossil",
    "PM2.5": "Particulate Matter, < 2.5 um",
}
STACK = "air, non-urban/high stack"  # power-plant stacks
# The stack's sub-compartment is a modelling choice (EF 3.1 gives both; the particulate-matter CFs differ up to 80x):
# the unspecified-air CFs give each direct value's variant, so the range carries that uncertainty.
UNSPECIFIED = "air, unspecified"
EMEP_CATEGORIES = {  # our category -> EF 3.1 category name in the characterisation table
    "photochemical_ozone_formation": "Photochemical ozone formation",
    "eutrophication_terrestrial": "Eutrophication, terrestrial",
    "eutrophication_marine": "Eutrophication, marine",
    "acidification": "Acidification (cross-check)",
    "particulate_matter": "Particulate matter",
}
EMEP_CENTRAL = {  # which technologies take the EMEP-derived value as their factor, per category
    "photochemical_ozone_formation": COMBUSTION,
    "eutrophication_terrestrial": COMBUSTION,
    "eutrophication_marine": COMBUSTION,
    "acidification": ("oil", "bioenergy"),
    "particulate_matter": ("oil", "bioenergy"),
}
# Second sources' stack emissions (electricity_emissions_cited.csv), converted to g/kWh of electricity.
EMISSION_UNITS = {"g/kWh": 1.0, "kg/MWh": 1.0, "lb/MWh": 0.45359237}
HEAT_INPUT_UNITS = ("lb/MMBtu",)  # per heat input: accepted only as zero (no heat rate is assumed)
# Not required of a second source for a category to be computed: CO's EF 3.1 POF CF (0.0456) is 1/22 of NOx's.
MINOR_POLLUTANTS = ("CO",)
CO2_CF = 1.0  # kg CO2 eq/kg, EF 3.1 climate change, CO2 (direct emission only)
NO_COMBUSTION_ZERO = ("ozone_depletion", "photochemical_ozone_formation", "eutrophication_terrestrial", "eutrophication_marine")
NO_ODS = "no ozone-depleting substance in EMEP/EEA stack emissions and no ODP CF for N2O in EF 3.1"
SEARCHED = (  # docs/data.md "Not modelled": where the search went (lca_data/sources/electricity.yaml, open-lca-search-2026)
    "no open life-cycle value for the technology (searched: UNECE 2022 as OWID transcribes it has 8 indicators, not this "
    "one; the EC/Ricardo 2021 EF 3.0 study and the IEA PVPS fact sheet were not readable in any copy reached; NREL "
    "harmonisation and IPCC AR5 Annex III give greenhouse gases only; ecoinvent values stay cross-checks, licence): "
    "not modelled, never 0"
)
LAND_CF = ("Occupation, unspecified", ("Occupation, forest, extensive", "Occupation, urban, continuously built"))
WATER_ROWS = {  # technology -> (central Macknick row, alternatives), substrings of the table items
    "coal": ("Coal, generic, cooling tower", ("Coal, generic, once-through", "Coal, generic, cooling pond")),
    "gas": ("Natural gas CC, tower", ("Natural gas CC, once-through", "Natural gas CC, dry", "Natural gas steam, tower")),
    "oil": ("Natural gas steam, tower", ()),
    "nuclear": ("Nuclear, tower", ("Nuclear, once-through", "Nuclear, pond")),
    "hydro": ("Hydropower (reservoir evaporation", ()),
    "wind": ("Wind", ()),
    "solar": ("Solar PV (utility, panel washing)", ()),
    "bioenergy": ("Biopower steam, tower", ("Biopower steam, once-through",)),
}
# Technologies no open life-cycle study covers (UNECE has no oil, biomass or geothermal row) take, in the
# categories where they have no factor at all, a proxy: the geometric mean of a family of UNECE technologies,
# range the family's min-max. Labelled "proxy" in the scope column and in reports (an estimate).
PROXY = {
    "oil": ("coal", "gas"),
    "bioenergy": ("coal", "gas", "nuclear", "hydro", "wind", "solar"),
    "other_renewables": ("coal", "gas", "nuclear", "hydro", "wind", "solar"),
}
# Macknick rows ship only with their second copy (GCAM) beside them; geothermal has none, so
# other renewables have no water factor (their share is then outside the technology-mix EWIF).
SECOND_COPY = {"water": "cross-check GCAM"}
SINGLE_COPY = "single secondary source"  # WRI rows read in one copy only (Norway, Finland)


# ---- reading ------------------------------------------------------------------------------------


def _read(path: Path) -> list[dict[str, str]]:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(text)))


class Table:
    """One open-factors CSV (item, value, unit, source, licence, note), looked up by item."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = _read(path)

    def find(self, *parts: str) -> dict[str, str]:
        hits = [r for r in self.rows if all(p in r["item"] for p in parts)]
        if len(hits) != 1:
            raise SystemExit(f"{self.path.name}: expected one row with {parts}, found {len(hits)}")
        return hits[0]

    def value(self, *parts: str) -> float:
        return float(self.find(*parts)["value"])


def _ci(note: str) -> tuple[float, float] | None:
    m = re.search(r"95% CI ([\d.]+)-([\d.]+)", note)
    return (float(m.group(1)), float(m.group(2))) if m else None


class Inputs:
    def __init__(self, src: Path) -> None:
        of = src / "open-factors"
        self.cf = Table(of / "ef31_characterisation_factors.csv")
        self.emep = Table(of / "emep_eea_tier1_power_plant_emission_factors.csv")
        self.eff = Table(of / "net_electrical_efficiency.csv")
        self.water = Table(of / "water_consumption_by_technology.csv")
        self.wri = Table(of / "water_consumption_by_country_wri2020.csv")
        self.aware = Table(of / "aware_cf_by_country.csv")
        self.land = Table(of / "land_use_ef31.csv")
        self.unece = {r["source"]: r for r in _read(src / "owid_unece.csv")}
        self.d4b = {r["energy"]: r for r in _read(src / "d4b_energy_impacts.csv")}
        self.cited = _read(HERE / "electricity_cited.csv")
        self.emissions_cited = _read(HERE / "electricity_emissions_cited.csv")
        self.zone_emissions = _read(HERE / "electricity_zone_emissions_cited.csv")
        self.sources = load_sources()

    def efficiency(self, tech: str) -> tuple[float, list[float]]:
        central, alts = EFFICIENCY[tech]
        return self.eff.value("Net electrical efficiency", central), [
            self.eff.value("Net electrical efficiency", a) for a in alts
        ]

    def emission(self, fuel: str, pollutant: str) -> tuple[float, float, float]:
        """(central, CI low, CI high) in g/GJ of fuel."""
        item = (
            f"| {fuel} | {pollutant}" if not (fuel == "Natural gas" and pollutant == "SOx") else "| Natural gas (EU Region) | SOx"
        )
        row = self.emep.find("EMEP/EEA Tier1 1.A.1.a", item)
        v = float(row["value"])
        lo, hi = _ci(row["note"]) or (v, v)
        if fuel == "Natural gas" and pollutant == "SOx":
            us = self.emep.find("Natural gas (US Region) | SOx")
            ulo, uhi = _ci(us["note"]) or (float(us["value"]),) * 2
            lo, hi = min(lo, ulo), max(hi, uhi)
        return v, min(lo, v), max(hi, v)

    def stack_cf(self, category: str, flow: str, compartment: str = STACK) -> float:
        """EF 3.1 CF of a flow emitted from a high stack (or ``compartment``; the unspecified-air CF where the
        table has no row for it; 0 where the flow is not characterised in the category)."""
        for where in (compartment, UNSPECIFIED):
            hits = [r for r in self.cf.rows if r["item"] == f"EF3.1 {category} | {flow} | {where}"]
            if hits:
                return float(hits[0]["value"] or 0)
        return 0.0


# ---- building -----------------------------------------------------------------------------------


class Factor:
    """One technology x category: central value, its variants and the independent second sources."""

    def __init__(
        self, tech: str, category: str, value: float, source: str, scope: str, note: str, zone: str = "", year: int | None = None
    ) -> None:
        self.tech, self.category, self.value, self.source, self.scope, self.note = tech, category, value, source, scope, note
        self.zone, self.year = zone, year  # zone "" = every zone without its own row; year of the central source
        self.variants: list[float] = []
        self.seconds: list[tuple[float, str, str]] = []  # (value, source, note)
        self.members: list[Factor] = []  # a proxy's family, or a zone row's generic factor
        self.original: tuple[float, str] | None = None  # (value, source) before a consensus replaced the central value

    def bounds(self) -> tuple[float, float]:
        vals = [self.value, *self.variants, *(v for v, _, _ in self.seconds)]
        return min(vals), max(vals)


class NotModelled(Factor):
    """A technology x category with no open life-cycle value (zero by construction from direct emissions alone): no
    factor, never a 0 central value. Written to electricity_not_modelled.csv; a zone that generates with the technology
    reports the category's use stage as not modelled, its other technologies' factors as a labelled lower bound."""

    def __init__(self, tech: str, category: str, direct: str) -> None:
        super().__init__(tech, category, math.nan, S_DERIVED, "not_modelled", f"{direct}; {SEARCHED}")


# ---- characterisation method, long-term emissions and the consensus of disagreeing sources (issue 29) ----------------
# Columns ``characterisation`` and ``long_term`` of electricity_technologies.csv (and the zone rows): the engine reads the
# method per row, so a row characterised another way (e.g. EF 3.1 from an inventory) changes a category's method
# without code changes. Labels (docs/data.md "Characterisation and long-term emissions"):
EF31, ILCD, GWP_AR5 = "EF 3.1", "ILCD 2.0 (2018)", "IPCC AR5 GWP100"
SOURCE_METHOD = {  # the characterisation each cited dataset states
    S_UNECE: ILCD,  # UNECE 2022 report: ILCD 2.0 2018 midpoint (climate change: IPCC 2013 GWP100 within it)
    S_D4B: ILCD,  # the same study's Europe-region values
    "benportner-ecoinvent-ilcd": ILCD,
    "ipcc-ar5-annex3": GWP_AR5,
    "ipcc-srren-annex2": "IPCC AR4 GWP100",
    "electricitymaps-defaults": "GWP100 (UK POST 2014; IPCC version not stated)",
    "ecodynelec-ecoinvent-uiv": "IPCC 2013 GWP100 (ecoinvent)",
    "garrett-ronde-2013-vestas": "CML (ADP elements)",
    S_DERIVED: EF31,  # EF 3.1 CFs applied here to stack emissions, fuel input or UNECE's land occupation
    S_MACKNICK: "n/a (inventory flow, L/kWh)",
    "uslci-fy21-q3": EF31,  # S_INVENTORY: USLCI characterised with EF 3.1 in Brightway (build_electricity_inventory.py)
}
# Life-cycle second sources independent of the factor's own study: the ones a consensus is formed from (Digital4Better
# is UNECE's own Europe-region value; direct stack emissions are lower bounds, not life-cycle estimates)
INDEPENDENT_LIFE_CYCLE = ("benportner-ecoinvent-ilcd", "ipcc-ar5-annex3", "ipcc-srren-annex2", "ecodynelec-ecoinvent-uiv")
# Categories where long-term emissions (> 100 years: spoil heaps, tailings, landfills) carry a characterisation factor in
# EF 3.1 (the same as short-term ones; toxicity gives them 0): the ``long_term`` column says how each factor treats them.
LONG_TERM_CATEGORIES = ("eutrophication_freshwater", "eutrophication_marine", "ionising_radiation")
LONG_TERM_INCLUDED = {  # (technology, category) -> why the factor is known to include long-term emissions
    ("coal", "eutrophication_freshwater"): (
        "includes the long-term phosphate emissions of coal-mining spoil heaps: UNECE's value agrees with ecoinvent 3.5's "
        "(benportner-ecoinvent-ilcd, ILCD 2.0 2018 with long-term emissions, ratio 0.76); no open short-term value"
    ),
}


def method_of(f: Factor) -> str:
    """The characterisation method of a factor: its source's; a proxy's or consensus's from its members' methods; a
    zone row's life-cycle value keeps its generic factor's upstream method beside EF 3.1 for the fleet's direct part."""
    if isinstance(f, InventoryFactor):
        return f.characterisation
    if f.scope == "proxy" and f.members:
        return combine_methods([method_of(m) for m in f.members])
    if f.zone:  # the fleet's direct emissions x EF 3.1 CFs, plus the generic factor's upstream part where it has one
        return EF31 if f.scope == "direct" else combine_methods([method_of(f.members[0]), EF31])
    if f.original:
        return combine_methods([SOURCE_METHOD[f.original[1]], *(SOURCE_METHOD[s] for _, s, _ in _independent(f))])
    return SOURCE_METHOD.get(f.source, "not stated")


def combine_methods(methods: list[str]) -> str:
    """One method where all agree, else "mixed (A; B)": a mixed value is not EF 3.1."""
    unique = list(dict.fromkeys(methods))
    return unique[0] if len(unique) == 1 else f"mixed ({'; '.join(unique)})"


def long_term_of(f: Factor) -> str:
    """How a factor treats long-term emissions: "included", "excluded" (EF 3.1 applied here to direct emissions or
    fuel: none by construction), "not stated" (a life-cycle source that does not say), "n/a" (no long-term flows in
    the category under EF 3.1: climate, air emissions, resources, toxicity at 0)."""
    if f.category not in LONG_TERM_CATEGORIES:
        return "n/a"
    if isinstance(f, InventoryFactor):
        return f.long_term
    if (f.tech, f.category) in LONG_TERM_INCLUDED:
        return "included"
    if f.scope == "proxy" and f.members:
        kinds = {long_term_of(m) for m in f.members}
        return "included" if "included" in kinds else ("not stated" if "not stated" in kinds else "excluded")
    if f.original:
        return "not stated"  # a consensus of life-cycle sources: none separates its long-term part
    if f.scope == "direct" or f.source == S_DERIVED:
        return "excluded"
    return "not stated"


def method_columns(f: Factor) -> dict[str, str]:
    return {"characterisation": method_of(f), "long_term": long_term_of(f)}


def _independent(f: Factor) -> list[tuple[float, str, str]]:
    """The factor's independent life-cycle second sources with a positive value."""
    return [(v, sid, n) for v, sid, n in f.seconds if sid in INDEPENDENT_LIFE_CYCLE and v > 0]


def consensus(f: Factor) -> None:
    """Where the factor's source and an independent life-cycle source disagree by more than 3x, the central value
    becomes their geometric mean (all of them), unless the factor alone is EF 3.1-characterised: then it stays, the
    better-rated source (the method the single score needs), with that reason. The source's own value stays a variant
    (the range spans it and every second source) and ``original`` (the cross-check compares it)."""
    others = _independent(f)
    if f.scope not in ("life_cycle",) or f.value <= 0 or not others:
        return
    if not any(_contested(_ratio(f.value, v)) for v, _, _ in others):
        return
    if SOURCE_METHOD.get(f.source) == EF31 and any(SOURCE_METHOD[s] != EF31 for _, s, _ in others):
        f.note += (
            "; contested (sources disagree by more than 3x): kept as the better-rated value, the only EF 3.1-characterised one"
        )
        return
    vals = [f.value, *(v for v, _, _ in others)]
    centre = math.exp(sum(math.log(v) for v in vals) / len(vals))
    parts = [f"{_g(f.value)} ({f.source})", *(f"{_g(v)} ({s})" for v, s, _ in others)]
    f.original = (f.value, f.source)
    f.note = (
        f"consensus of independent sources that disagree by more than 3x: geometric mean of {', '.join(parts)}; "
        f"range spans them all. Source's own note: {f.note}"
    )
    f.variants.append(f.value)
    f.value, f.source = centre, S_DERIVED


def _source_spread(f: Factor) -> float | None:
    """The largest ratio between the factor's sources where they disagree by more than 3x (the precision rating is
    then read from it: no good precision on a contested factor), else None."""
    own = f.original[0] if f.original else f.value
    vals = [own, *(v for v, _, _ in _independent(f))]
    vals = [v for v in vals if v > 0]
    if len(vals) < 2 or max(vals) / min(vals) <= CONTESTED_RATIO:
        return None
    return max(vals) / min(vals)


def _g(x: float) -> str:
    return f"{x:.4g}"


def _emep_g_kwh(inp: Inputs, tech: str) -> tuple[dict[str, tuple[float, float, float]], list[str], float, list[float]]:
    """Stack emissions per kWh (pollutant -> central, low, high g/kWh) from EMEP/EEA Tier 1 g/GJ and efficiencies."""
    eta, alts = inp.efficiency(tech)
    fuels = [EMEP_FUEL[tech]] + ([EMEP_VARIANT[tech]] if tech in EMEP_VARIANT else [])
    etas = [eta, *alts]
    g_kwh: dict[str, tuple[float, float, float]] = {}
    for pol in POLLUTANTS:
        c, lo, hi = inp.emission(fuels[0], pol)
        lows, highs = [lo], [hi]
        for f in fuels[1:]:
            _, vlo, vhi = inp.emission(f, pol)
            lows.append(vlo)
            highs.append(vhi)
        g_kwh[pol] = (c * 0.0036 / eta, min(lows) * 0.0036 / max(etas), max(highs) * 0.0036 / min(etas))
    return g_kwh, fuels, eta, alts


def _emep_direct(inp: Inputs, tech: str) -> dict[str, tuple[float, float, float, str]]:
    """EF 3.1 category -> (central, low, high, formula note) from EMEP/EEA Tier 1 stack emissions."""
    g_kwh, fuels, eta, alts = _emep_g_kwh(inp, tech)
    out = {}
    for key, ef_name in EMEP_CATEGORIES.items():
        terms = [(pol, inp.stack_cf(ef_name, flow)) for pol, flow in POLLUTANTS.items()]
        terms = [(p, cf) for p, cf in terms if cf]
        central = sum(g_kwh[p][0] / 1000 * cf for p, cf in terms)
        low = sum(g_kwh[p][1] / 1000 * cf for p, cf in terms)
        unspecified = sum(g_kwh[p][0] / 1000 * inp.stack_cf(ef_name, POLLUTANTS[p], UNSPECIFIED) for p in POLLUTANTS)
        high = max(sum(g_kwh[p][2] / 1000 * cf for p, cf in terms), unspecified)
        formula = " + ".join(f"{p} {_g(g_kwh[p][0])} g/kWh x {cf:g}" for p, cf in terms)
        note = (
            f"direct stack emissions only (no upstream fuel chain), lower bound: EMEP/EEA Tier 1 {fuels[0]} g/GJ x 0.0036 / "
            f"efficiency {eta:g}; {formula} (EF 3.1 CFs, high stack); range: 95% CI"
            + (f", {' and '.join(fuels[1:])}" if fuels[1:] else "")
            + (", other efficiencies" if alts else "")
            + (", unspecified-air CFs" if unspecified > central * 1.001 else "")
        )
        out[key] = (central, low, high, note)
    return out


def build_factors(inp: Inputs) -> list[Factor]:
    factors: dict[tuple[str, str], Factor] = {}

    def put(f: Factor) -> Factor:
        factors[(f.tech, f.category)] = f
        return f

    # UNECE global averages (life cycle): climate, toxicity, IR, freshwater eutrophication, minerals
    for tech, rows in UNECE_ROWS.items():
        for col, (category, k) in UNECE_COLUMNS.items():
            vals = [float(inp.unece[r][col]) * k for r in rows if inp.unece[r][col]]
            note = f"UNECE 2022 global average, {rows[0]} (OWID transcription); life cycle; ILCD 2.0 2018 characterisation"
            if category == "ionising_radiation":
                note += "; OWID unit label kg U-235 eq/MWh read as kBq/MWh"
            f = put(Factor(tech, category, vals[0], S_UNECE, "life_cycle", note))
            f.variants += vals[1:]
    # Digital4Better UNECE-Europe: the factor where UNECE-global has none; a regional variant otherwise
    for tech, row in D4B_ROWS.items():
        for col, category in D4B_COLUMNS.items():
            v = float(inp.d4b[row][col])
            if category in D4B_CENTRAL:
                note = "UNECE 2021 Europe-region value via Digital4Better; life cycle; provisional (unit label of AP ambiguous)"
                put(Factor(tech, category, v, S_D4B, "life_cycle", note))
            else:
                factors[(tech, category)].variants.append(v)
    # Hand-cited factors (climate change of oil, bioenergy, other renewables) and second sources
    cited_seconds = []
    for r in inp.cited:
        if r["role"] == "factor":
            put(Factor(r["technology"], r["category"], float(r["value"]), r["source"], "life_cycle", r["note"]))
        else:
            cited_seconds.append(r)
    # EMEP/EEA stack emissions x EF 3.1 CFs: POF, eutrophication, and AC/PM where no life-cycle value exists
    for tech in COMBUSTION:
        for category, (central, low, high, note) in _emep_direct(inp, tech).items():
            if tech in EMEP_CENTRAL[category]:
                f = put(Factor(tech, category, central, S_DERIVED, "direct", note))
                f.variants += [low, high]
            elif (tech, category) in factors:
                factors[(tech, category)].seconds.append(
                    (central, S_DERIVED, "EMEP/EEA Tier 1 direct emissions x EF 3.1 " + note)
                )
    # Technologies without combustion (and ozone depletion for every technology) have no direct emissions, and no open
    # life-cycle value was found for them (SEARCHED): no factor, and no proxy; the zone's use stage is then not modelled
    for tech in TECHS:
        for category in NO_COMBUSTION_ZERO:
            if (tech, category) not in factors:
                why = NO_ODS if category == "ozone_depletion" else "no combustion at the plant"
                put(NotModelled(tech, category, f"direct emissions: none ({why})"))
    # Fossil resources: fuel input per kWh (3.6 MJ / net efficiency); uranium at EF's 560,000 MJ/kg
    for tech in TECHS:
        if tech in ("coal", "gas", "oil", "nuclear"):
            eta, alts = inp.efficiency(tech)
            what = "uranium (EF CF 560,000 MJ/kg) counted at the reactor's thermal input" if tech == "nuclear" else "fuel burned"
            note = f"fuel input only (no upstream extraction or transport), lower bound: {what} = 3.6 MJ / efficiency {eta:g}"
            f = put(Factor(tech, "resource_use_fossils", 3.6 / eta, S_DERIVED, "direct", note))
            f.variants += [3.6 / a for a in alts]
        else:
            why = "biogenic fuel, not a fossil resource" if tech == "bioenergy" else "no fuel"
            put(NotModelled(tech, "resource_use_fossils", f"fuel input: none ({why})"))
    # Land use: UNECE land occupation (m2a/kWh) x EF 3.1 occupation CF (land type not given by UNECE)
    cf = inp.land.value(f"| {LAND_CF[0]}")
    cf_alts = [inp.land.value(f"| {a}") for a in LAND_CF[1]]
    for tech, rows in UNECE_ROWS.items():
        occ = [float(inp.unece[r]["land_use_energy"]) * 1e-3 for r in rows if inp.unece[r]["land_use_energy"]]
        if not occ:
            continue
        note = (
            f"UNECE 2022 land occupation {_g(occ[0])} m2a/kWh ({rows[0]}) x EF 3.1 CF {cf:g} Pt/(m2a) ('{LAND_CF[0]}': "
            "UNECE gives no land type); occupation only, no transformation; range: other CFs "
            f"({', '.join(f'{a:g}' for a in cf_alts)}) and UNECE variants"
        )
        f = put(Factor(tech, "land_use", occ[0] * cf, S_DERIVED, "life_cycle", note))
        f.variants += [o * c for o in occ for c in [cf, *cf_alts]]
    # Operational water consumption (for the technology-mix EWIF, not an EF category)
    for tech, (central, alts) in WATER_ROWS.items():
        v = inp.water.value("Operational water consumption", central)
        _require_second_copy(inp.water.find("Operational water consumption", central), "water")
        for a in alts:
            _require_second_copy(inp.water.find("Operational water consumption", a), "water")
        proxy = " (proxy: natural gas steam turbine)" if tech == "oil" else ""
        note = f"Macknick et al. 2012 median operational consumption, {central}{proxy}"
        if tech == "hydro":
            note += "; gross reservoir evaporation fully allocated to power (contested)"
        f = put(Factor(tech, "water_consumption", v, S_MACKNICK, "operational", note))
        f.variants += [inp.water.value("Operational water consumption", a) for a in alts]
    for r in cited_seconds:
        key = (r["technology"], r["category"])
        if key in factors:
            factors[key].seconds.append((float(r["value"]), r["source"], r["note"]))
    # UNECE-Europe (same study, another region) as a second value where UNECE-global is the factor
    for tech, row in D4B_ROWS.items():
        for col, category in D4B_COLUMNS.items():
            if category not in D4B_CENTRAL:
                note = "UNECE 2021 Europe-region value via Digital4Better: same study as the factor, not independent"
                factors[(tech, category)].seconds.append((float(inp.d4b[row][col]), S_D4B, note))
    _prefer_inventory(factors)  # the open inventory (USLCI x EF 3.1) where it covers a technology x category
    for f in factors.values():
        consensus(f)  # before the proxies: a proxy's family takes its members' consensus values
    _add_proxies(factors)  # the family's ranges include its second sources
    for tech, category, value, sid, note in cited_emissions(inp):  # after the proxies: some test a proxy
        f = factors.get((tech, category))
        if f is None or (f.scope not in ("direct", "not_modelled") and value < f.value / CONTESTED_RATIO):
            continue  # a direct value is a lower bound: far below a life-cycle or proxy factor it neither agrees nor contests
        f.seconds.append((value, sid, note))
    order = {c: i for i, c in enumerate(UNITS)}
    return sorted(factors.values(), key=lambda f: (order[f.category], list(TECHS).index(f.tech)))


def _g_per_kwh(row: dict[str, str], file: str = "electricity_emissions_cited.csv") -> float:
    v, unit = float(row["value"]), row["unit"]
    if unit in EMISSION_UNITS:
        return v * EMISSION_UNITS[unit]
    if unit in HEAT_INPUT_UNITS and v == 0:
        return 0.0
    raise SystemExit(
        f"{file}: {row['technology']} {row['variant']} {row['pollutant']}: unit {unit!r} "
        f"(expected one of {', '.join(EMISSION_UNITS)}, or zero per heat input)"
    )


def cited_emissions(inp: Inputs) -> list[tuple[str, str, float, str, str]]:
    """(technology, category, value, source, note): each cited variant's stack emissions x EF 3.1 CFs (high stack),
    in every category whose non-minor pollutants the variant gives in full; CO2 gives climate change (direct only)."""
    groups: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in inp.emissions_cited:
        if r["pollutant"] not in (*POLLUTANTS, "CO2"):
            raise SystemExit(f"electricity_emissions_cited.csv: unknown pollutant {r['pollutant']!r}")
        groups.setdefault((r["technology"], r["source"], r["variant"]), {})[r["pollutant"]] = _g_per_kwh(r)
    out = []
    for (tech, sid, variant), g in groups.items():
        if "CO2" in g:
            note = f"{variant}: direct CO2 {_g(g['CO2'])} g/kWh x {CO2_CF:g} (no CH4, no life cycle): lower bound"
            out.append((tech, "climate_change", g["CO2"] / 1000 * CO2_CF, sid, note))
        for category, ef_name in EMEP_CATEGORIES.items():
            terms = [(p, inp.stack_cf(ef_name, flow)) for p, flow in POLLUTANTS.items()]
            terms = [(p, cf) for p, cf in terms if cf]
            if any(p not in g for p, _ in terms if p not in MINOR_POLLUTANTS):
                continue  # the source lacks a pollutant of this category: no comparable value
            given = [(p, cf) for p, cf in terms if p in g]
            formula = " + ".join(f"{p} {_g(g[p])} g/kWh x {cf:g}" for p, cf in given)
            lacking = [p for p, _ in terms if p not in g]
            note = f"{variant}: direct stack emissions {formula} (EF 3.1 CFs, high stack)" + (
                f"; {', '.join(lacking)} not given (minor)" if lacking else ""
            )
            out.append((tech, category, sum(g[p] / 1000 * cf for p, cf in given), sid, note))
    return out


def _require_second_copy(row: dict[str, str], kind: str) -> None:
    """SOURCES.md: a number read in a single unverified copy needs a second copy before it ships."""
    if SECOND_COPY[kind] not in row["note"]:
        raise SystemExit(f"{row['item']!r} has no second copy ({SECOND_COPY[kind]!r} missing from its note)")


def _add_proxies(factors: dict[tuple[str, str], Factor]) -> None:
    """Proxy factors (scope "proxy") for technologies without any factor in a category (see PROXY)."""
    categories = [c for c in UNITS if c not in ("water_use", WATER_CATEGORY)]
    for tech, family in PROXY.items():
        for category in categories:
            if (tech, category) in factors:
                continue
            members = [factors[(t, category)] for t in family if (t, category) in factors]
            if len(members) < 2:
                continue
            vals = [f.value for f in members]
            if min(vals) <= 0:
                continue
            centre = math.exp(sum(math.log(v) for v in vals) / len(vals))  # factors spread over decades
            note = (
                f"proxy (estimate): no open factor for {tech}; geometric mean of the {', '.join(f.tech for f in members)} "
                "factors (life cycle), range their min-max"
            )
            f = Factor(tech, category, centre, S_DERIVED, "proxy", note)
            f.variants += [m.bounds()[0] for m in members] + [m.bounds()[1] for m in members]
            f.members = members
            factors[(tech, category)] = f


# ---- the open inventory (lca_data/tools/build_electricity_inventory.py) ---------------------------------------

S_INVENTORY = "uslci-fy21-q3"
INVENTORY_FILE = "electricity_inventory_factors.csv"


def _prefer_inventory(factors: dict[tuple[str, str], Factor], path: Path | None = None) -> None:
    """The open inventory's factors (USLCI with its fuel chains, characterised with EF 3.1 in Brightway) become the
    factor of every technology x category they cover: they replace a direct (stack only, lower bound) or not-modelled
    pair, and a life-cycle value of another study, which stays as a second source (its range and cross-check). The
    inventory's other processes of the technology (lignite, diesel ...) are variants."""
    rows = _read(path or HERE / INVENTORY_FILE)
    for r in rows:
        if r["role"] != "factor" or r["technology"] not in TECHS:
            continue
        key = (r["technology"], r["category"])
        old = factors.get(key)
        note = f"{r['inventory']}, {r['characterisation']} (Brightway); long-term emissions {r['long_term']}; "
        note += f"coverage {r['coverage'] or 'n/a'}; {r['note']}"
        year = int(r["data_year"]) if r["data_year"] else None  # the data's own year (2002 ...), not the release's
        note += f"; data year {year}" if year else "; data year not stated"
        f = InventoryFactor(r["technology"], r["category"], float(r["value"]), S_INVENTORY, r["scope"], note, year=year)
        f.upstream, f.characterisation, f.long_term = float(r["upstream"]), r["characterisation"], r["long_term"]
        f.variants += [float(v["value"]) for v in rows if v["role"] == "variant" and (v["technology"], v["category"]) == key]
        if old is not None:
            if not isinstance(old, NotModelled) and old.scope == "life_cycle":  # a direct value is a bound, not a second
                f.seconds.append((old.value, old.source, f"the factor before the open inventory: {old.note}"))
            f.seconds += old.seconds  # its independent cross-checks (ecoinvent 3.5 ...) check the new factor
        factors[key] = f
    _partial_chain(factors)


PARTIAL_CHAIN = LOWER_BOUND  # the inventory's scope where it covers only part of the chain (or of its flows)


def _partial_chain(factors: dict[tuple[str, str], Factor]) -> None:
    """Where the open inventory lies more than 3x below every independent life-cycle estimate of every technology
    that has one, it covers only part of the category's chain (USLCI's ozone depletion: carbon tetrachloride only,
    10^3-10^5x below ecoinvent 3.5): each of its factors in the category is then a lower bound (issue 29: a lower
    bound is labelled a bound, never the central estimate; no consensus is formed with it, and its range runs from
    it to the highest source)."""
    inventory = [f for f in factors.values() if isinstance(f, InventoryFactor)]
    for category in dict.fromkeys(f.category for f in inventory):
        rows = [f for f in inventory if f.category == category]
        tested = [(f, _independent(f)) for f in rows if _independent(f)]
        if not tested or not all(v > CONTESTED_RATIO * f.value for f, ind in tested for v, _, _ in ind):
            continue
        ratios = [v / f.value for f, ind in tested for v, _, _ in ind]
        checked = ", ".join(f"{f.tech}" for f, _ in tested)
        why = (
            f"lower bound: inventory covers only part of the chain (more than {CONTESTED_RATIO:g}x below every "
            f"independent life-cycle estimate, {min(ratios):,.0f}-{max(ratios):,.0f}x for {checked})"
        )
        for f in rows:
            f.scope, f.note = PARTIAL_CHAIN, f"{why}; {f.note}"


class InventoryFactor(Factor):
    """A factor from the open inventory: its upstream part (total less the plant's own emissions) is kept when a
    zone's own stack emissions replace the plant's (zone_factors)."""

    upstream: float = 0.0
    characterisation: str = ""
    long_term: str = ""


def _upstream(inp: Inputs, base: Factor, category: str, ref: dict[str, float]) -> float:
    """The part of a technology factor that a zone's own stack emissions do not replace."""
    if isinstance(base, InventoryFactor):
        return base.upstream
    return 0.0 if base.scope == "direct" else base.value - _direct(inp, category, ref)


EU_ZONES = (  # EU member states: the zone "EU" of electricity_zone_emissions_cited.csv
    "AUT", "BEL", "BGR", "HRV", "CYP", "CZE", "DNK", "EST", "FIN", "FRA", "DEU", "GRC", "HUN", "IRL",
    "ITA", "LVA", "LTU", "LUX", "MLT", "NLD", "POL", "PRT", "ROU", "SVK", "SVN", "ESP", "SWE",
)  # fmt: skip
EU_REFERENCE = "EU"  # the life-cycle factors of coal and gas (UNECE Europe) embed European abatement


ZONE_EMISSIONS = "electricity_zone_emissions_cited.csv"


def _zone_groups(inp: Inputs) -> dict[tuple[str, str, str], dict]:
    """(zone, technology, variant) -> {role, source, year, g: pollutant -> g/kWh} of the cited fleet emissions."""
    groups: dict[tuple[str, str, str], dict] = {}
    for i, r in enumerate(inp.zone_emissions, start=2):
        where = f"{ZONE_EMISSIONS}: row {i} ({r['zone']} {r['technology']} {r['pollutant']})"
        if r["pollutant"] not in POLLUTANTS:
            raise SystemExit(f"{where}: unknown pollutant (expected one of {', '.join(POLLUTANTS)})")
        if r["role"] not in ("factor", "crosscheck") or r["technology"] not in EMEP_FUEL:
            raise SystemExit(f"{where}: expected role factor or crosscheck and a combustion technology")
        if r["source"] not in inp.sources:
            raise SystemExit(f"{where}: source {r['source']!r} is not registered in lca_data/sources/*.yaml")
        key = (r["zone"], r["technology"], r["variant"])
        g = groups.setdefault(key, {"role": r["role"], "source": r["source"], "year": int(r["year"]), "g": {}})
        g["g"][r["pollutant"]] = _g_per_kwh(r, f"{ZONE_EMISSIONS}: row {i}")
    return groups


def _direct(inp: Inputs, category: str, g: dict[str, float], compartment: str = STACK) -> float:
    """kg eq per kWh of a category from stack emissions in g/kWh (EF 3.1 CFs, high stack or ``compartment``)."""
    ef = EMEP_CATEGORIES[category]
    return sum(g[p] / 1000 * inp.stack_cf(ef, flow, compartment) for p, flow in POLLUTANTS.items())


def zone_factors(inp: Inputs, factors: list[Factor]) -> list[Factor]:
    """Per-zone coal and gas factors of the emission-driven categories, with the zone's own abatement level.

    The fleet's direct emissions (cited, pollutants it lacks from EMEP/EEA Tier 1) replace the generic direct part:
    a direct-scope factor becomes the zone's direct value; a life-cycle factor (UNECE Europe) keeps its upstream
    and infrastructure part (its value less the European abated plant's direct emissions) plus the zone's direct."""
    by = {(f.tech, f.category): f for f in factors}
    groups = _zone_groups(inp)
    out = []
    for (zone, tech, variant), grp in groups.items():
        if grp["role"] != "factor":
            continue
        generic = {p: v[0] for p, v in _emep_g_kwh(inp, tech)[0].items()}
        filled = {**generic, **grp["g"]}
        eu = next(v for (z, t, _), v in groups.items() if (z, t) == (EU_REFERENCE, tech) and v["role"] == "factor")
        ref = {**generic, **eu["g"]}
        others = [
            {**generic, **v["g"]} for (z, t, _), v in groups.items() if (z, t) == (zone, tech) and v["role"] == "crosscheck"
        ]
        lacking = sorted(set(POLLUTANTS) - set(grp["g"]))
        given = ", ".join(f"{p} {_g(grp['g'][p])}" for p in POLLUTANTS if p in grp["g"])
        for category in EMEP_CATEGORIES:
            base = by[(tech, category)]
            upstream = _upstream(inp, base, category, ref)
            if upstream < 0:
                raise SystemExit(f"{tech} {category}: the European direct emissions exceed the life-cycle factor")
            value = upstream + _direct(inp, category, filled)
            if zone == EU_REFERENCE and base.scope != "direct" and not isinstance(base, InventoryFactor):
                continue  # the life-cycle factor (UNECE Europe) already carries the European abatement level
            what = (
                "direct stack emissions only (no upstream fuel chain), lower bound"
                if base.scope == "direct"
                else (
                    f"life cycle: upstream and infrastructure {_g(upstream)} (UNECE Europe less the EU abated plant's direct)"
                    " + the fleet's direct emissions"
                )
                if not isinstance(base, InventoryFactor)
                else (
                    f"life cycle: upstream {_g(upstream)} (USLCI FY21 Q3 fuel chain, EF 3.1"
                    + ("" if zone == inp.sources[S_INVENTORY].get("region") else "; a U.S. inventory: a proxy here")
                    + ") + the fleet's direct emissions"
                )
            )
            note = f"{variant}: {given} g/kWh" + (f"; {', '.join(lacking)} from EMEP/EEA Tier 1" if lacking else "") + f"; {what}"
            for z in EU_ZONES if zone == EU_REFERENCE else (zone,):
                f = Factor(tech, category, value, grp["source"], base.scope, note, zone=z, year=grp["year"])
                f.variants += [upstream + _direct(inp, category, o) for o in others]
                f.variants.append(upstream + _direct(inp, category, filled, UNSPECIFIED))  # stack compartment
                f.seconds += base.seconds  # the technology's independent life-cycle estimates
                f.members = [base]
                out.append(f)
    return out


def _ratio(a: float, b: float) -> float | None:
    if a == 0 and b == 0:
        return 1.0
    if b == 0 or a == 0:
        return None  # one source says zero, the other does not: infinitely apart
    return a / b


def _contested(ratio: float | None) -> bool:
    return ratio is None or ratio > CONTESTED_RATIO or ratio < 1 / CONTESTED_RATIO


def zone_rows(inp: Inputs) -> tuple[list[dict], list[dict]]:
    """(electricity_zones rows, zone cross-check rows): WRI EWIF and AWARE 1.2 / 2.0 per country."""
    rows, checks = [], []
    for r in inp.wri.rows:
        m = re.search(r"\(([A-Z]{3})\)\s*$", r["item"].split("|", 1)[1].strip())
        if not m or not r["value"]:
            continue
        code = "WORLD" if m.group(1) == "WLD" else m.group(1)
        if SINGLE_COPY in r["note"]:
            continue  # single secondary copy (Norway, Finland): the technology-mix EWIF applies instead
        rows.append(
            {
                "zone": code,
                "quantity": "ewif",
                "value": r["value"],
                "unit": "L/kWh",
                "source": "wri-2020-water",
                "note": "grid water consumption at generation (hydro evaporation fully allocated to power; no fuel chain)",
            }
        )
    for r in inp.aware.rows:
        parts = [p.strip() for p in r["item"].split("|")]
        if not r["value"] or len(parts) < 3:
            continue
        code = "WORLD" if parts[1] == "World" else parts[1]
        version = "1.2" if "1.2" in parts[0] else "2.0"
        use = parts[2]
        if use.startswith("agricultural"):
            continue
        quantity = {
            ("1.2", True): "aware",
            ("1.2", False): "aware_non_agricultural",
            ("2.0", True): "aware_2.0",
            ("2.0", False): "aware_2.0_non_irrigation",
        }[(version, use.startswith("unknown") or use.startswith("unspecified"))]
        note = f"AWARE {version} annual, {use}"
        if quantity == "aware":
            note += ": the EF 3.1 characterisation factor of the country"
        rows.append(
            {
                "zone": code,
                "quantity": quantity,
                "value": r["value"],
                "unit": "m3 world eq/m3",
                "source": f"aware-{version}",
                "note": note,
            }
        )
    by = {(r["zone"], r["quantity"]): float(r["value"]) for r in rows}
    for (zone, q), v in by.items():
        if q != "aware" or (zone, "aware_2.0") not in by:
            continue
        second = by[(zone, "aware_2.0")]
        ratio = _ratio(v, second)
        checks.append(
            {
                "subject": zone,
                "category": "water_use",
                "quantity": "aware",
                "value": _g(v),
                "unit": "m3 world eq/m3",
                "source": "aware-1.2",
                "second_value": _g(second),
                "second_source": "aware-2.0",
                "ratio": "" if ratio is None else _g(ratio),
                "contested": str(_contested(ratio)).lower(),
                "note": "AWARE 1.2 (EF 3.1) vs AWARE 2.0 (2025 model), unspecified use, annual",
            }
        )
    return rows, checks


SAME_STUDY = {S_D4B: S_UNECE}  # Digital4Better's rows are UNECE's Europe-region values: not an independent source
DERIVED_YEAR = 2022  # rows derived here take the year of their inputs (UNECE 2022, EMEP/EEA 2023 guidebook)
QUALITY_COLUMNS = ("distribution", "dqr_ter", "dqr_ger", "dqr_tir", "dqr_p")


def _year(inp: Inputs, f: Factor) -> int | None:
    return f.year or inp.sources.get(f.source, {}).get("year") or (DERIVED_YEAR if f.source == S_DERIVED else None)


def _factor_row(inp: Inputs, f: Factor) -> dict[str, str]:
    seconds = [v for v, _, _ in f.seconds] + ([f.original[0]] if f.original else [])
    q = quality(f.value, f.scope, f.source, f.zone, _year(inp, f), f.variants, seconds, _source_spread(f))
    row = {"zone": f.zone} if f.zone else {}
    row.update(
        {
            "technology": f.tech,
            "codecarbon_field": TECHS[f.tech],
            "category": f.category,
            "value": _g(f.value),
            "low": _g(q["low"]),
            "high": _g(q["high"]),
            "unit": UNITS[f.category],
            "scope": f.scope,
            "source": f.source,
            "distribution": q["distribution"],
            **{f"dqr_{k}": str(v) for k, v in q["ratings"].items()},
            **method_columns(f),
            "note": f.note,
        }
    )
    return row


def _not_modelled_row(f: Factor) -> dict[str, str]:
    """A technology x category without a factor: what it lacks, and the values quoted beside it (cross-check only)."""
    quoted = "; ".join(f"{_g(v)} {UNITS[f.category]} ({sid})" for v, sid, _ in f.seconds)
    return {
        "technology": f.tech,
        "codecarbon_field": TECHS[f.tech],
        "category": f.category,
        "unit": UNITS[f.category],
        "scope": f.scope,
        "source": f.source,
        "note": f.note
        + (f"; quoted beside it, cross-check only (ecoinvent licence, or direct emissions): {quoted}" if quoted else ""),
    }


def _check_rows(f: Factor) -> list[dict[str, str]]:
    """Each second source beside the factor's own source (the source's value, before any consensus: the pair's
    disagreement is what the check records)."""
    out = []
    value, source = f.original or (f.value, f.source)
    for v, sid, note in f.seconds:
        ratio = _ratio(value, v)
        out.append(
            {
                "subject": f.tech,
                "category": f.category,
                "quantity": "factor",
                "value": _g(value),
                "unit": UNITS[f.category],
                "source": source,
                "second_value": _g(v),
                "second_source": sid,
                "ratio": "" if ratio is None else _g(ratio),
                "contested": str(_contested(ratio)).lower(),
                "note": note,
            }
        )
    return out


def audit_rows(inp: Inputs, factors: list[Factor]) -> list[dict[str, str]]:
    """Every factor beside each value it was built from or checked against: ratio, unit, year, licence."""
    out = []
    for f in factors:
        central = "not_modelled" if isinstance(f, NotModelled) else "central"
        entries = [(central, f.value, f.source, _year(inp, f))]
        entries += [("variant", v, f.source, _year(inp, f)) for v in f.variants]
        entries += [("second", v, sid, inp.sources.get(sid, {}).get("year")) for v, sid, _ in f.seconds]
        study = SAME_STUDY.get(f.source, f.source)
        independent = len({SAME_STUDY.get(sid, sid) for _, sid, _ in f.seconds} - {study}) + 1
        if isinstance(f, NotModelled):
            independent = 0  # no value of its own; the quoted ones are ecoinvent cross-checks
        for role, v, sid, year in entries:
            ratio = None if math.isnan(f.value) or math.isnan(v) else _ratio(f.value, v)
            out.append(
                {
                    "zone": f.zone or "any",
                    "technology": f.tech,
                    "category": f.category,
                    "unit": UNITS[f.category],
                    "role": role,
                    "value": "" if math.isnan(v) else _g(v),
                    "ratio": "" if ratio is None else _g(ratio),
                    "source": sid,
                    "year": str(year or ""),
                    "licence": inp.sources.get(sid, {}).get("licence", ""),
                    "independent_sources": str(independent),
                }
            )
    return out


def write(src: Path = DEFAULT_SRC, dest: Path = HERE) -> dict[str, int]:
    inp = Inputs(src)
    built = build_factors(inp)
    factors = [f for f in built if not isinstance(f, NotModelled)]
    zoned = zone_factors(inp, factors)
    tech_rows = [_factor_row(inp, f) for f in factors]
    zone_tech_rows = [_factor_row(inp, f) for f in zoned]
    checks = [c for f in factors for c in _check_rows(f)]
    audit = audit_rows(inp, built + zoned)
    zones, zone_checks = zone_rows(inp)
    outputs = {
        "electricity_technologies.csv": tech_rows,
        "electricity_not_modelled.csv": [_not_modelled_row(f) for f in built if isinstance(f, NotModelled)],
        "electricity_zone_technologies.csv": zone_tech_rows,
        "electricity_zones.csv": zones,
        "electricity_crosscheck.csv": checks + zone_checks,
        "electricity_audit.csv": audit,
    }
    for name, rows in outputs.items():
        _write(dest / name, list(rows[0]), rows)
    return {name: len(rows) for name, rows in outputs.items()}


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    write_csv(path, HEADER, fields, rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    src = Path(args[0]) if args else DEFAULT_SRC
    if not (src / "open-factors").is_dir():
        print(f"build_electricity: {src}/open-factors not found (give the shared electricity folder)", file=sys.stderr)
        return 2
    for name, n in write(src).items():
        print(f"wrote {n:4d} rows to lca_data/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
