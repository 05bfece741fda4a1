"""Per-technology kWh factors from an open inventory with its upstream chains (USLCI), characterised with EF 3.1 in Brightway.

Run from the repository root (needs the extra ``lca``: bw2data, bw2calc):

    python -m lca_data.tools.build_electricity_inventory PATH/TO/uslci-content [--cf CSV] [--release ZIP]

``PATH`` is a checkout (or bare mirror) of github:FLCAC-admin/uslci-content; the release (default: USLCI FY21 Q3,
``downloads/uslci_fy21_q3_01_olca_10_3_ecospold2.zip``, EcoSpold 1 XML with FEDEFL flow names, the newest release
there with its processes as a file) is read from the working tree or with ``git show``. Nothing of USLCI is copied
into the repository: only the factors computed from it.

What it does:

1. reads every process (reference product, technosphere inputs, elementary flows with their FEDEFL context);
2. writes them into a throw-away Brightway project (a temporary BRIGHTWAY2_DIR): technosphere inputs linked to the
   process whose reference product has the input's name (and location, where several have the name); inputs USLCI
   marks CUTOFF, or with no provider, are cut off and counted;
3. writes one Brightway method per EF 3.1 category that ``ef31_characterisation_factors.csv`` covers (ozone depletion,
   photochemical ozone formation, acidification, terrestrial and marine eutrophication, particulate matter), with
   the FEDEFL flows mapped to the EF flows by ``FLOW_MAP`` and ``COMPARTMENTS`` (documented below, tested);
4. runs Brightway's LCIA of 1 kWh of each technology's USLCI process (``TECHNOLOGIES``) and, from the life-cycle
   inventory, the *coverage*: per category, the share (by mass) of the inventory's flows of the substances the
   category characterises (the CF file's substances under their FEDEFL names, in any compartment, plus for ozone
   depletion every Montreal-Protocol substance the inventory reports) that found a factor;
5. writes ``lca_data/electricity_inventory_factors.csv`` (technology x category: value, unit, coverage, scope,
   source, inventory version, method, long-term-emission convention).

Categories the CF file does not hold (climate change, toxicity, ionising radiation, freshwater eutrophication,
land use, water use, minerals and metals) are not computed here; fossil resources are not either: FEDEFL reports
fuels in MJ (higher heating value), EF 3.1 characterises kg or m3 at net calorific value, and no sourced
conversion is at hand. Hydro, wind and solar are CUTOFF flows in USLCI (no process): not covered.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from lca_data.loader import LOWER_BOUND_SCOPE
from lca_data.tools import write_csv

HERE = Path(__file__).resolve().parents[1]
DEFAULT_CF = HERE.parent.parent / "shared" / "reference" / "electricity" / "open-factors" / "ef31_characterisation_factors.csv"
OUT = HERE / "electricity_inventory_factors.csv"
RELEASE = "downloads/uslci_fy21_q3_01_olca_10_3_ecospold2.zip"
#: USLCI's own flow properties (mass, volume, energy per flow), which the EcoSpold 1 export leaves out: an input given
#: in m3 of a product made in kg (natural gas) is converted with them (openLCA does the same with the flow's factors)
FLOW_PROPERTIES = "downloads/uslci_fy22_q2_01_olca1_10_3_json_ld/flows"
#: unit -> (flow property, amount of the property's reference unit: kg, m3, MJ, t*km)
UNIT_PROPERTY = {
    "kg": ("Mass", 1.0),
    "t": ("Mass", 1000.0),
    "m3": ("Volume", 1.0),
    "l": ("Volume", 1e-3),
    "MJ": ("Energy", 1.0),
    "kWh": ("Energy", 3.6),
}
INVENTORY = "USLCI FY21 Q3 (uslci_fy21_q3_01, EcoSpold 1 export of openLCA 1.10.3; FEDEFL flows)"
SOURCE = "uslci-fy21-q3"
METHOD = "EF 3.1"
METHOD_SOURCE = "ef31-characterisation-factors"
#: USLCI processes have no long-term (beyond 100 years) emission flows of their own: what the inventory reports is
#: what is characterised; EF 3.1 itself characterises long-term emissions like any other (issue 27's convention).
LONG_TERM = "as inventoried (USLCI has no separate long-term emission flows)"
NS = "{http://www.EcoInvent.org/EcoSpold01}"

#: technology (electricity_technologies.csv key) -> its USLCI processes (reference product, location RNA: North
#: America): the first is the technology's factor, the others its variants (they widen its range)
TECHNOLOGIES = {
    "coal": ("Electricity, bituminous coal, at power plant", "Electricity, lignite coal, at power plant",
             "Electricity, anthracite coal, at power plant"),
    "gas": ("Electricity, natural gas, at power plant",),
    "nuclear": ("Electricity, nuclear, at power plant",),
    "oil": ("Electricity, residual fuel oil, at power plant", "Electricity, diesel, at power plant"),
    "bioenergy": ("Electricity, biomass, at power plant",),
}  # fmt: skip

#: EF flow name in the CF file -> FEDEFL flow names (USLCI FY21) that are that substance. Documented choices:
#: "Volatile organic compounds" is NMVOC (the US EPA VOC definition excludes methane and ethane); "Sulfur oxides"
#: is characterised as sulfur dioxide (SOx reported as SO2, as EPA and EF do); FEDEFL's "Carbon monoxide" and
#: "Methane" (no fossil/biogenic split) take the fossil factors, equal to the biogenic ones in the categories here.
FLOW_MAP: dict[str, tuple[str, ...]] = {
    "Nitrogen oxides": ("Nitrogen oxides",),
    "NMVOC, non-methane volatile organic compounds": ("Volatile organic compounds", "Non-methane volatile organic compounds"),
    "Sulfur dioxide": ("Sulfur dioxide", "Sulfur oxides"),
    "Ammonia": ("Ammonia",),
    "Carbon monoxide, fossil": ("Carbon monoxide", "Carbon monoxide, fossil"),
    "Methane, fossil": ("Methane", "Methane, fossil"),
    "Particulate Matter, < 2.5 um": ("Particulate matter, ≤ 2.5μm",),
    "CFC-11 (Trichlorofluoromethane)": ("CFC-11",),
    "Halon 1301 (Bromotrifluoromethane)": ("Halon 1301",),
    "Halon 1211 (Bromochlorodifluoromethane)": ("Halon 1211",),
    "HCFC-22 (Chlorodifluoromethane)": ("HCFC-22",),
    "CFC-12 (Dichlorodifluoromethane)": ("CFC-12",),
    "CFC-114 (1,2-Dichloro-1,1,2,2-tetrafluoroethane)": ("CFC-114",),
    "CCl4 (Carbon tetrachloride)": ("Carbon tetrachloride",),
    "N2O (Dinitrogen monoxide)": ("Nitrous oxide",),
}
#: FEDEFL air contexts (as USLCI's EcoSpold 1 export writes them: category, subcategory) -> EF air sub-compartment.
#: A context not listed (the stratosphere, water, soil) gets no factor: it counts against the coverage.
COMPARTMENTS = {
    ("emission", "air"): "air, unspecified",
    ("air", "troposphere"): "air, unspecified",
    ("troposphere", "rural"): "air, non-urban/high stack",
    ("troposphere", "high"): "air, non-urban/high stack",
    ("troposphere", "very high"): "air, non-urban/high stack",
    ("rural", "low"): "air, non-urban/high stack",
    ("troposphere", "urban"): "air, urban close to ground",
    ("urban", "low"): "air, urban close to ground",
    ("urban", "ground-level"): "air, urban close to ground",
    ("troposphere", "low"): "air, unspecified",
}
#: Montreal-Protocol ozone-depleting substances by FEDEFL name (CFCs, HCFCs, halons, CCl4, methyl chloroform, methyl
#: bromide, bromochloromethane): all count in ozone depletion's coverage, whether the CF file has them or not.
ODS = re.compile(
    r"^(CFC-|HCFC-|HBFC-|Halon )|^Carbon tetrachloride$|^Methyl (bromide|chloroform)$|trichloroethane|^Bromochloromethane$"
)
#: CF file category -> our key
CATEGORIES = {
    "Ozone depletion": "ozone_depletion",
    "Photochemical ozone formation": "photochemical_ozone_formation",
    "Acidification (cross-check)": "acidification",
    "Eutrophication, terrestrial": "eutrophication_terrestrial",
    "Eutrophication, marine": "eutrophication_marine",
    "Particulate matter": "particulate_matter",
}
UNITS = {  # our key -> unit per kWh
    "ozone_depletion": "kg CFC11 eq/kWh",
    "photochemical_ozone_formation": "kg NMVOC eq/kWh",
    "acidification": "mol H+ eq/kWh",
    "eutrophication_terrestrial": "mol N eq/kWh",
    "eutrophication_marine": "kg N eq/kWh",
    "particulate_matter": "disease incidence/kWh",
}
FIELDS = [
    "technology",
    "role",
    "category",
    "value",
    "direct",
    "upstream",
    "unit",
    "coverage",
    "scope",
    "source",
    "inventory",
    "characterisation",
    "long_term",
    "process",
    "data_year",
    "note",
]


@dataclass
class Process:
    name: str
    location: str
    unit: str
    year: int | None = None  # end of the data's time period (EcoSpold timePeriod; 9998 there means not stated)
    inputs: list[tuple[str, str | None, str, float, bool]] = field(default_factory=list)  # name, loc, unit, amount, cutoff
    flows: list[tuple[str, str, str, str, float, bool]] = field(default_factory=list)  # name, cat, sub, unit, amount, in


def read_release(path: Path, release: str = RELEASE) -> tuple[bytes, str]:
    """The release zip's bytes and the checkout's commit (read with git where the file is not in a work tree)."""
    f = path / release
    commit = _git(path, "rev-parse", "HEAD").decode().strip()
    if f.is_file():
        return f.read_bytes(), commit
    return _git(path, "show", f"HEAD:{release}"), commit


def _git(path: Path, *args: str) -> bytes:
    git_dir = path / "repo" if (path / "repo").is_dir() and not (path / ".git").exists() else path
    return subprocess.run(["git", "-C", str(git_dir), *args], capture_output=True, check=True).stdout


def read_flow_properties(path: Path, folder: str = FLOW_PROPERTIES) -> dict[str, dict[str, float]]:
    """{flow name: {property: amount per reference unit}} from a JSON-LD release's flows (git archive of the folder)."""
    import json
    import tarfile

    out: dict[str, dict[str, float]] = {}
    with tarfile.open(fileobj=io.BytesIO(_git(path, "archive", "HEAD", folder))) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".json"):
                d = json.load(tar.extractfile(m))
                props = {fp["flowProperty"]["name"]: float(fp.get("conversionFactor", 1.0)) for fp in d.get("flowProperties", [])}
                out.setdefault(d.get("name", "").strip(), props)
    return out


def convert(amount: float, unit: str, to: str, props: dict[str, float] | None) -> float | None:
    """``amount`` of a product in ``unit`` expressed in ``to`` (its provider's unit), with the flow's own properties
    where the two measure different things (m3 of gas -> kg); None where nothing relates them."""
    if unit == to:
        return amount
    a, b = UNIT_PROPERTY.get(unit), UNIT_PROPERTY.get(to)
    if a is None or b is None:
        return None
    if a[0] == b[0]:
        return amount * a[1] / b[1]
    if not props or a[0] not in props or b[0] not in props:
        return None
    return amount * a[1] / props[a[0]] * props[b[0]] / b[1]


def parse(zip_bytes: bytes) -> list[Process]:
    """Every dataset of the EcoSpold 1 file in the zip."""
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as z:
        name = next(n for n in z.namelist() if n.endswith(".xml") and "processes" in n)
        root = ET.fromstring(z.read(name))
    out = []
    for ds in root.findall(NS + "dataset"):
        info = ds.find(f"{NS}metaInformation/{NS}processInformation")
        rf, geo = info.find(NS + "referenceFunction"), info.find(NS + "geography")
        end = info.findtext(f"{NS}timePeriod/{NS}endDate") or ""
        year = int(end[:4]) if end[:4].isdigit() and int(end[:4]) < 9000 else None
        p = Process(rf.get("name").strip(), geo.get("location"), rf.get("unit"), year)
        for e in ds.findall(f"{NS}flowData/{NS}exchange"):
            ig, og = e.find(NS + "inputGroup"), e.find(NS + "outputGroup")
            group = (ig if ig is not None else og).text
            amount = float(e.get("meanValue"))
            if group == "4":  # from or to nature
                p.flows.append(
                    (e.get("name").strip(), e.get("category"), e.get("subCategory"), e.get("unit"), amount, ig is not None)
                )
            elif group == "5":  # from technosphere
                cutoff = "CUTOFF" in (e.get("subCategory") or "")
                p.inputs.append((e.get("name").strip(), e.get("location"), e.get("unit"), amount, cutoff))
        out.append(p)
    return out


def read_cfs(path: Path) -> dict[str, dict[tuple[str, str], float]]:
    """{our category key: {(EF flow name, EF compartment): CF}} from the CF file (resources and water left out)."""
    out: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for r in csv.DictReader(path.open(encoding="utf-8")):
        parts = [s.strip() for s in r["item"].split("|")]
        cat = parts[0].removeprefix("EF3.1 ").strip()
        if cat in CATEGORIES and len(parts) == 3:
            out[CATEGORIES[cat]][(parts[1], parts[2])] = float(r["value"])
    return dict(out)


def characterise(name: str, context: tuple[str, str], cfs: dict[tuple[str, str], float]) -> float | None:
    """The CF of a FEDEFL flow in one category, or None (no EF flow, or a context without a factor). A context the
    CF file lists only as 'air, unspecified' for the substance takes that factor (EF 3.1 gives one value per air
    sub-compartment for these substances, except particulate matter, whose file lists all three)."""
    comp = COMPARTMENTS.get(context)
    if comp is None:
        return None
    for ef, fedefl in FLOW_MAP.items():
        if name in fedefl:
            cf = cfs.get((ef, comp))
            return cfs.get((ef, "air, unspecified")) if cf is None else cf
    return None


def candidate(key: str, name: str, cfs: dict[tuple[str, str], float]) -> bool:
    """Whether a FEDEFL flow is one the category characterises (counted in its coverage), whatever its context."""
    efs = {ef for ef, _ in cfs}
    if any(name in FLOW_MAP.get(ef, ()) for ef in efs):
        return True
    return key == "ozone_depletion" and bool(ODS.search(name))


def _providers(procs: list[Process]) -> dict[tuple[str, str | None], int]:
    """(reference product, location) -> process index; (name, None) where the name has one provider."""
    by_name: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(procs):
        by_name[p.name].append(i)
    out: dict[tuple[str, str | None], int] = {}
    for n, idx in by_name.items():
        if len(idx) == 1:
            out[(n, None)] = idx[0]
        for i in idx:
            out.setdefault((n, procs[i].location), i)
    return out


def build(
    procs: list[Process], cf_path: Path, bw_dir: str, props: dict[str, dict[str, float]]
) -> tuple[list[dict], dict[str, int]]:
    """The Brightway project, the LCIA and the coverage; returns the rows and the linking counts."""
    os.environ["BRIGHTWAY2_DIR"] = bw_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import bw2calc as bc
        import bw2data as bd
    cfs = read_cfs(cf_path)
    bd.projects.set_current("uslci")
    flows = sorted({(f[0], f[1], f[2], f[3]) for p in procs for f in p.flows})
    fcode = {f: f"f{i}" for i, f in enumerate(flows)}
    bd.Database("fedefl").write(
        {("fedefl", fcode[f]): {"name": f[0], "categories": (f[1], f[2]), "unit": f[3], "type": "emission"} for f in flows}
    )
    prov = _providers(procs)
    counts = {"linked": 0, "converted": 0, "cutoff": 0, "no provider": 0, "unit mismatch": 0}
    data = {}
    for i, p in enumerate(procs):
        ex = [{"input": ("uslci", f"p{i}"), "amount": 1.0, "type": "production"}]
        for j, amount, why in links(procs, prov, p, props):
            counts[why] += 1
            if j is not None:
                ex.append({"input": ("uslci", f"p{j}"), "amount": amount, "type": "technosphere"})
        for name, c, s, unit, amount, _ in p.flows:
            ex.append({"input": ("fedefl", fcode[(name, c, s, unit)]), "amount": amount, "type": "biosphere"})
        data[("uslci", f"p{i}")] = {"name": p.name, "location": p.location, "unit": p.unit, "exchanges": ex}
    bd.Database("uslci").write(data)
    methods = {}
    for key, table in cfs.items():
        m = bd.Method((METHOD, key))
        m.register(unit=UNITS[key])
        pairs = [(("fedefl", fcode[f]), cf) for f in flows if (cf := characterise(f[0], (f[1], f[2]), table))]
        m.write(pairs)
        methods[key] = m.name
    rows = []
    for tech, processes in TECHNOLOGIES.items():
        for k, pname in enumerate(processes):
            i = next(i for i, p in enumerate(procs) if p.name == pname and p.unit == "kWh")
            chain = chain_cutoffs(procs, prov, i, props)
            lca = bc.LCA({bd.get_activity(("uslci", f"p{i}")): 1.0}, method=methods[next(iter(methods))])
            lca.lci()
            inv = dict(zip(lca.dicts.biosphere.reversed.values(), lca.inventory.sum(axis=1).A1, strict=False))
            amounts = {f: inv.get(bd.get_node(database="fedefl", code=fcode[f]).id, 0.0) for f in flows}
            for key, m in methods.items():
                lca.switch_method(m)
                lca.lcia()
                direct = _direct(procs[i], cfs[key])
                cov = _coverage(key, amounts, cfs[key])
                row = _row(tech, pname, key, float(lca.score), direct, cov, chain)
                row["data_year"] = str(procs[i].year or "")
                row["note"] = f"main flows: {_contributors(amounts, cfs[key], float(lca.score))}; {row['note']}"
                rows.append({**row, "role": "factor" if k == 0 else "variant"})
    return rows, counts


def links(
    procs: list[Process], prov: dict[tuple[str, str | None], int], p: Process, props: dict[str, dict[str, float]]
) -> list[tuple[int | None, float, str]]:
    """Each technosphere input of ``p``: (provider index or None, amount in the provider's unit, why)."""
    out = []
    for name, loc, unit, amount, cutoff in p.inputs:
        j = prov.get((name, loc), prov.get((name, None)))
        if cutoff or j is None:
            out.append((None, 0.0, "cutoff" if cutoff else "no provider"))
            continue
        a = convert(amount, unit, procs[j].unit, props.get(name))
        why = "unit mismatch" if a is None else "linked" if unit == procs[j].unit else "converted"
        out.append((None if a is None else j, a or 0.0, why))
    return out


def chain_cutoffs(
    procs: list[Process], prov: dict[tuple[str, str | None], int], start: int, props: dict[str, dict[str, float]]
) -> tuple[int, int, list[str]]:
    """(processes in the supply chain, inputs cut off in it, names of the cut inputs that are not waste disposal)."""
    seen, stack, cut, names = {start}, [start], 0, set()
    while stack:
        p = procs[stack.pop()]
        for (j, _, why), inp in zip(links(procs, prov, p, props), p.inputs, strict=True):
            if j is None:
                cut += 1
                if not inp[0].startswith(("Disposal", "Transformation")):
                    names.add(f"{inp[0]} ({why})")
            elif j not in seen:
                seen.add(j)
                stack.append(j)
    return len(seen), cut, sorted(names)


def _contributors(amounts: dict[tuple, float], table: dict[tuple[str, str], float], score: float, n: int = 3) -> str:
    """The flows that make most of a score (summed over compartments), with their shares: what a reader checks first."""
    by: dict[str, float] = defaultdict(float)
    for (name, c, sub, _), a in amounts.items():
        cf = characterise(name, (c, sub), table)
        if cf and a:
            by[name] += a * cf
    top = sorted(by.items(), key=lambda kv: -abs(kv[1]))[:n]
    return ", ".join(f"{name} {v / score:.0%}" for name, v in top) if score else "none"


def _direct(p: Process, table: dict[tuple[str, str], float]) -> float:
    """The plant's own emissions (the technology process's elementary flows), characterised: the part a country's
    own stack emissions replace (build_electricity.py keeps the rest, upstream, as USLCI gives it)."""
    return sum(a * cf for name, c, sub, _, a, is_in in p.flows if not is_in and (cf := characterise(name, (c, sub), table)))


def _coverage(key: str, amounts: dict[tuple, float], table: dict[tuple[str, str], float]) -> float | None:
    """Share by mass of the category's candidate flows in the inventory that got a factor (None: no such flow)."""
    total = found = 0.0
    for (name, c, s, unit), a in amounts.items():
        if unit != "kg" or a == 0 or not candidate(key, name, table):
            continue
        total += abs(a)
        if characterise(name, (c, s), table) is not None:
            found += abs(a)
    return found / total if total else None


def _row(
    tech: str, process: str, key: str, score: float, direct: float, coverage: float | None, chain: tuple[int, int, list[str]]
) -> dict:
    lower = coverage is not None and coverage < 0.995
    scope = LOWER_BOUND_SCOPE if lower else "life_cycle"
    n, cut, names = chain
    note = f"USLCI life cycle over a {n}-process supply chain; {cut} inputs cut off (USLCI CUTOFF or no USLCI provider"
    note += f": {'; '.join(names[:6])}{' ...' if len(names) > 6 else ''})" if names else ")"
    if coverage is None:
        note += "; no flow of the category's substances in the inventory"
    elif lower:
        note += f"; {coverage:.1%} of the category's inventory (by mass) found an EF 3.1 factor: a lower bound"
    return {
        "technology": tech,
        "category": key,
        "value": f"{score:.6g}",
        "direct": f"{direct:.6g}",
        "upstream": f"{score - direct:.6g}",
        "unit": UNITS[key],
        "coverage": "" if coverage is None else f"{coverage:.4f}",
        "scope": scope,
        "source": f"{SOURCE}; {METHOD_SOURCE}",
        "inventory": INVENTORY,
        "characterisation": METHOD,
        "long_term": LONG_TERM,
        "process": process,
        "note": note,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uslci", type=Path, help="checkout or bare mirror of github:FLCAC-admin/uslci-content")
    ap.add_argument("--release", default=RELEASE, help=f"release zip in it (default {RELEASE})")
    ap.add_argument("--cf", type=Path, default=DEFAULT_CF, help="EF 3.1 characterisation factors CSV")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    raw, commit = read_release(args.uslci, args.release)
    procs = parse(raw)
    props = read_flow_properties(args.uslci)
    with tempfile.TemporaryDirectory(prefix="footprint-uslci-bw-") as tmp:
        rows, counts = build(procs, args.cf, tmp, props)
    header = (
        "# Written by lca_data/tools/build_electricity_inventory.py: Brightway LCIA of 1 kWh of each technology's USLCI "
        f"process, characterised with EF 3.1. Inventory: {INVENTORY}, github:FLCAC-admin/uslci-content @ {commit}, "
        f"{args.release} (unit conversions: USLCI flow properties of {FLOW_PROPERTIES}). Linking: {counts['linked']} inputs "
        f"linked, {counts['converted']} linked through a unit conversion, {counts['cutoff']} CUTOFF, {counts['no provider']} "
        f"without a provider, {counts['unit mismatch']} in an unrelated unit (cut off). Do not edit by hand: re-run the tool.\n"
    )
    write_csv(args.output, header, FIELDS, rows)
    print(f"wrote {args.output} ({len(rows)} rows, {len(procs)} processes; links: {counts})", file=sys.stderr)
    for key in UNITS:
        cov = {r["technology"]: r["coverage"] or "n/a" for r in rows if r["category"] == key}
        print(f"coverage {key}: " + ", ".join(f"{t} {c}" for t, c in cov.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
