"""A small Brightway project for the `footprint factors brightway` tests, built in $BRIGHTWAY2_DIR.

Run as a script (Brightway reads BRIGHTWAY2_DIR on import, so each project lives in its own process):
biosphere flows, an EF-like method family of 16 methods named as ecoinvent names EF 3.1's categories (plus
sub-indicators and a "no LT" family that must not be picked), and a low-voltage market over three
technologies with a coal-mining upstream chain. Prints bw2calc's own score of 1 kWh per method as JSON,
each from a fresh LCA (not the switch_method path the command takes).
"""

from __future__ import annotations

import json
import sys
import warnings

#: (category key, ecoinvent category name, method unit as ecoinvent writes it)
METHODS = [
    ("climate_change", "climate change", "kg CO2-Eq"),
    ("ozone_depletion", "ozone depletion", "kg CFC-11-Eq"),
    ("human_toxicity_cancer", "human toxicity: carcinogenic", "CTUh"),
    ("human_toxicity_non_cancer", "human toxicity: non-carcinogenic", "CTUh"),
    ("particulate_matter", "particulate matter formation", "disease incidence"),
    ("ionising_radiation", "ionising radiation: human health", "kBq U235-Eq"),
    ("photochemical_ozone_formation", "photochemical oxidant formation: human health", "kg NMVOC-Eq"),
    ("acidification", "acidification", "mol H+-Eq"),
    ("eutrophication_terrestrial", "eutrophication: terrestrial", "mol N-Eq"),
    ("eutrophication_freshwater", "eutrophication: freshwater", "kg P-Eq"),
    ("eutrophication_marine", "eutrophication: marine", "kg N-Eq"),
    ("ecotoxicity_freshwater", "ecotoxicity: freshwater", "CTUe"),
    ("land_use", "land use", "dimensionless"),
    ("water_use", "water use", "m3 world eq. deprived"),
    ("resource_use_fossils", "energy resources: non-renewable", "MJ, net calorific value"),
    ("resource_use_minerals_metals", "material resources: metals/minerals", "kg Sb-Eq"),
]

#: biosphere flow code: (name, categories, unit)
FLOWS = {
    "co2": ("Carbon dioxide, fossil", ("air",), "kilogram"),
    "ch4": ("Methane, fossil", ("air",), "kilogram"),
    "halon": ("Methane, bromotrifluoro-, Halon 1301", ("air",), "kilogram"),
    "nox": ("Nitrogen oxides", ("air",), "kilogram"),
    "so2": ("Sulfur dioxide", ("air",), "kilogram"),
    "pm": ("Particulate Matter, < 2.5 um", ("air",), "kilogram"),
    "rn": ("Radon-222", ("air",), "kilo Becquerel"),
    "p": ("Phosphate", ("water",), "kilogram"),
    "cd": ("Cadmium II", ("water",), "kilogram"),
    "coal": ("Coal, hard", ("natural resource", "in ground"), "kilogram"),
    "u": ("Uranium", ("natural resource", "in ground"), "kilogram"),
    "cu": ("Copper", ("natural resource", "in ground"), "kilogram"),
    "occ": ("Occupation, industrial area", ("natural resource", "land"), "square meter-year"),
    "h2o": ("Water", ("air",), "cubic meter"),
}

#: method index -> {flow: CF}; chosen so every category has a non-zero score from the chain
CFS = {
    "climate_change": {"co2": 1.0, "ch4": 29.8},
    "ozone_depletion": {"halon": 15.2},
    "human_toxicity_cancer": {"cd": 2.0e-3},
    "human_toxicity_non_cancer": {"cd": 5.0e-2, "so2": 1e-7},
    "particulate_matter": {"pm": 2.38e-4, "so2": 8.0e-6, "nox": 1.6e-6},
    "ionising_radiation": {"rn": 2.4e-4},
    "photochemical_ozone_formation": {"nox": 1.0, "ch4": 0.0101},
    "acidification": {"so2": 1.31, "nox": 0.74},
    "eutrophication_terrestrial": {"nox": 4.26},
    "eutrophication_freshwater": {"p": 0.33},
    "eutrophication_marine": {"nox": 0.389},
    "ecotoxicity_freshwater": {"cd": 5.0e4},
    "land_use": {"occ": 139.1},
    "water_use": {"h2o": 42.95},
    "resource_use_fossils": {"coal": 18.01},
    "resource_use_minerals_metals": {"cu": 1.37e-3, "u": 2.0e-4},
}


def _tech(code: str, name: str, bio: dict[str, float], tech: dict[str, float] | None = None) -> tuple:
    ex = [{"input": ("grid", code), "amount": 1.0, "type": "production"}]
    ex += [{"input": ("bio", k), "amount": v, "type": "biosphere"} for k, v in bio.items()]
    ex += [{"input": ("grid", k), "amount": v, "type": "technosphere"} for k, v in (tech or {}).items()]
    return ("grid", code), {"name": name, "location": "XX", "unit": "kilowatt hour", "exchanges": ex}


def build(project: str = "tiny") -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import bw2calc as bc
        import bw2data as bd

    bd.projects.set_current(project)
    bd.Database("bio").write(
        {("bio", k): {"name": n, "categories": c, "unit": u, "type": "emission"} for k, (n, c, u) in FLOWS.items()}
    )
    acts = dict(
        [
            _tech("mining", "hard coal mining", {"ch4": 0.01, "coal": 1.0, "halon": 2e-9, "occ": 1e-3, "cu": 1e-5}),
            _tech(
                "coal",
                "electricity production, hard coal",
                {"co2": 0.95, "nox": 8e-4, "so2": 1.2e-3, "pm": 5e-5, "cd": 1e-9, "h2o": 2e-3},
                {"mining": 0.4},
            ),
            _tech("nuclear", "electricity production, nuclear", {"rn": 60.0, "u": 2.5e-6, "p": 1e-6, "h2o": 2.5e-3}),
            _tech("wind", "electricity production, wind", {"co2": 0.011, "cu": 3e-6, "occ": 2e-4}),
        ]
    )
    acts[("grid", "mix")] = {
        "name": "market for electricity, low voltage",
        "location": "XX",
        "unit": "kilowatt hour",
        "exchanges": [
            {"input": ("grid", "mix"), "amount": 1.0, "type": "production"},
            {"input": ("grid", "coal"), "amount": 0.35 * 1.05, "type": "technosphere"},  # 5 % losses
            {"input": ("grid", "nuclear"), "amount": 0.45 * 1.05, "type": "technosphere"},
            {"input": ("grid", "wind"), "amount": 0.20 * 1.05, "type": "technosphere"},
        ],
    }
    acts[("grid", "mix-mj")] = {**acts[("grid", "mix")], "name": "market for electricity, per MJ", "unit": "megajoule"}
    acts[("grid", "mix-mj")]["exchanges"] = [
        {"input": ("grid", "mix-mj"), "amount": 1.0, "type": "production"},
        {"input": ("grid", "mix"), "amount": 1 / 3.6, "type": "technosphere"},
    ]
    bd.Database("grid").write(acts)
    for family in ("EF v3.1", "EF v3.1 no LT"):
        scale = 1.0 if family == "EF v3.1" else 0.5  # the other family must never be the one used
        for key, name, unit in METHODS:
            m = bd.Method((family, name, f"{name} indicator"))
            m.register(unit=unit)
            m.write([(("bio", f), cf * scale) for f, cf in CFS[key].items()])
    sub = bd.Method(("EF v3.1", "climate change: fossil", "global warming potential (GWP100)"))
    sub.register(unit="kg CO2-Eq")
    sub.write([(("bio", "co2"), 100.0)])  # a sub-indicator: must not be taken for climate change
    mix = bd.get_activity(("grid", "mix"))
    out = {}
    for key, name, _ in METHODS:
        lca = bc.LCA({mix: 1.0}, method=("EF v3.1", name, f"{name} indicator"))
        lca.lci()
        lca.lcia()
        out[key] = float(lca.score)
    return out


if __name__ == "__main__":
    print(json.dumps(build(*sys.argv[1:])))
