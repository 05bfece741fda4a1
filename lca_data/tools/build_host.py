"""Write lca_data/host_impacts.csv: the embodied impacts of each host model of lca_data/host.yaml, per server.

Run from the repository root:  python -m lca_data.tools.build_host

Boavizta's parametric server model, component by component (factors and bill of materials in host.yaml):
    CPU    = units x (die area x die factor + unit factor)
    RAM    = units x (capacity / density x die factor + unit factor);  SSD likewise
    power supply = units x mass x per-kg factor;  motherboard, case, assembly = units x unit factor
gives climate change, minerals and metals and primary energy. Every other category c of a component is
its climate change x (ADEME factor_c / ADEME factor_climate) of the ADEME/Hubblo GPU component named in
`profile_of` (lca_data/ademe_parametric_factors.csv): the category profile of the nearest component the
open GPU LCA covers. The same transfer applied to minerals and primary energy, where Boavizta has its own
figure, measures how far the transfer strays (`transfer_error`): the 95 % interval of every transferred
category is the central value divided and multiplied by that factor. Minerals and primary energy keep
Boavizta's value, their interval spanning the transfer's estimate and any published figure; climate change
spans the published figures. tests/test_lca_data.py re-runs this and checks the shipped file is its output.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lca_data import loader
from lca_data.tools import write_csv

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "host_impacts.csv"
OWN = ("climate_change", "resource_use_minerals_metals", "primary_energy")  # Boavizta's own criteria
FIELDS = ["host", "category", "value", "low", "high", "unit", "method", "source", "distribution"] + [
    f"dqr_{k}" for k in ("ter", "ger", "tir", "p")
]
PROFILE_METHOD = "profile of the ADEME GPU components x Boavizta climate change"


def _num(entry: Any, unit: str | None, where: str) -> float:
    """A `{value, source}` entry's number; a string must be '<number> <unit>' in the expected unit."""
    v = entry["value"] if isinstance(entry, dict) else entry
    if isinstance(v, (int, float)):
        return float(v)
    number, _, got = str(v).partition(" ")
    if unit is not None and got.strip() != unit:
        raise SystemExit(f"lca_data/host.yaml: {where}: expected a value in {unit}, got {v!r}")
    return float(number)


def quantities(bom: dict[str, Any], comp: str) -> dict[str, float]:
    """How many of each factor basis a component uses: die (mm2 or cm2), unit, kg."""
    b = bom[comp]
    units = _num(b["units"], None, f"{comp}.units")
    if comp == "cpu":
        return {"die": units * _num(b["die_area"], "mm**2", "cpu.die_area"), "unit": units}
    if comp in ("ram", "ssd"):
        area = _num(b["capacity"], "GB", f"{comp}.capacity") / _num(b["density"], "GB/cm**2", f"{comp}.density")
        return {"die": units * area, "unit": units}
    if comp == "power_supply":
        return {"kg": units * _num(b["mass"], "kg", "power_supply.mass")}
    return {"unit": units}


def component_impacts(h: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per component, Boavizta's climate change, minerals and primary energy (per server)."""
    out = {}
    for comp, bases in h["factors"].items():
        q = quantities(h["bill_of_materials"], comp)
        out[comp] = {
            crit: sum(q[basis] * _num(f[crit], None, f"factors.{comp}.{basis}.{crit}") for basis, f in bases.items())
            for crit in OWN
        }
    return out


def profiles() -> dict[str, dict[str, float]]:
    """ADEME component -> category -> factor / climate-change factor."""
    by: dict[str, dict[str, float]] = {}
    for r in loader.load_parametric_factors():
        by.setdefault(r["component"], {})[r["category"]] = float(r["value"])
    return {c: {k: v / f["climate_change"] for k, v in f.items()} for c, f in by.items()}


def host_rows(key: str, h: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    comps = component_impacts(h)
    prof = profiles()
    cats = loader.load_categories()["categories"]
    units = {c["key"]: c["unit"] for c in cats} | {"primary_energy": "MJ"}
    transfer = {k: sum(comps[c]["climate_change"] * prof[h["profile_of"][c]][k] for c in comps) for k in [*units]}
    own = {k: sum(c[k] for c in comps.values()) for k in OWN}
    error = max(abs(math.log(transfer[k] / own[k])) for k in OWN if k != "climate_change")
    published: dict[str, list[tuple[float, str]]] = {}
    for p in h.get("published", []):
        published.setdefault(p["category"], []).append((_num(p, units[p["category"]], p["category"]), p["source"]))
    q = h["data_quality"]
    rows = []
    for k, unit in units.items():
        if k in OWN:
            value = own[k]
            alts = [transfer[k]] if k != "climate_change" else []
            alts += [v for v, _ in published.get(k, [])]
            lo, hi = min([value, *alts]), max([value, *alts])
            method, src = "Boavizta server model", ";".join(["boavizta-factors", *(s for _, s in published.get(k, []))])
            dqr = q["boavizta"]
        else:
            value = transfer[k]
            lo, hi = value / math.exp(error), value * math.exp(error)
            method, src, dqr = (
                "profile of the ADEME GPU components x Boavizta climate change",
                "boavizta-factors;ademe-gpu-lca",
                q["profile"],
            )
        rows.append(
            {
                "host": key,
                "category": k,
                "value": f"{value:.6g}",
                "low": f"{lo:.6g}",
                "high": f"{hi:.6g}",
                "unit": f"{unit} per server",
                "method": method,
                "source": src,
                "distribution": "lognormal",
                **{f"dqr_{c}": dqr[c] for c in ("ter", "ger", "tir", "p")},
            }
        )
    return rows, math.exp(error)


def main() -> None:
    data = loader.load_yaml_checked("host.yaml")
    rows, notes = [], []
    for key, h in data["hosts"].items():
        r, err = host_rows(key, h)
        rows += r
        notes.append(f"{key}: transfer error factor {err:.3g} (ADEME profile vs Boavizta's own minerals and primary energy)")
    header = (
        "# Written by lca_data/tools/build_host.py from lca_data/host.yaml (Boavizta server model, AGPL-3.0 data,\n"
        "# cited) and lca_data/ademe_parametric_factors.csv (ADEME/Hubblo, CC BY-SA 4.0). Per server, GPUs excluded.\n"
        "# Do not edit by hand.\n"
        f"# {'; '.join(notes)}\n"
    )
    write_csv(OUT, header, FIELDS, rows)
    print(f"wrote {OUT} ({len(rows)} rows); {'; '.join(notes)}")


if __name__ == "__main__":
    main()
