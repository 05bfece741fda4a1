"""`--as hf`: a Hugging Face model-card fragment, and `--merge README.md` into an existing card.

The YAML front matter carries the Hub's ``co2_eq_emissions`` (huggingface.co/docs/hub/model-cards-co2): ``emissions``
in grams of CO2 eq, ``source``, ``training_type``, ``geographical_location``, ``hardware_used``. The Hub compares
models on it as the values codecarbon and the ML CO2 calculator give: the operational emissions of training. So
``emissions`` is the use phase of training (electricity x the location-based grid factor, PUE included), and the
card's text says so and gives the life-cycle total beside it, with the 16 EF 3.1 categories, water and GPU lifetimes.
A served model has no training emissions: its card fragment has no ``co2_eq_emissions`` (and says why) and shows
the serving footprint instead.

The merge reads and writes the metadata with huggingface_hub's own helpers (`metadata_load`, `metadata_save`):
only the front matter changes, the card's text is left byte for byte.
"""

from __future__ import annotations

import re
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from footprint.disclosures import TRAINING_TYPES, common
from footprint.disclosures.facts import Fact, Form, fact, full_assessment, md_cell, md_rows, missing, sig
from footprint.disclosures.target import Subject
from footprint.errors import FootprintError

TITLE = "Environmental impact"
LABELS = {
    "emissions_g": "co2_eq_emissions.emissions (use phase of training)",
    "life_cycle_kg": "Climate change, life cycle (manufacturing, transport, use, end of life)",
    "energy_mwh": "Energy (IT)",
    "facility_energy_mwh": "Energy (facility)",
    "gpu_hours": "GPU-hours",
    "hardware": "Hardware",
    "water_l": "Water consumption (on-site + off-site)",
    "gpu_lifetimes": "GPU lifetimes consumed",
    "energy_kwh": "Energy of the served window (+pue boundary)",
    "climate_kg": "Climate change of the served window (+pue boundary)",
    "per_1000_requests_g": "Climate change per 1,000 requests",
    "requests": "Requests served",
}
NO_TRAINING = "a served model's record holds no training emissions; disclose its training run or scenario for them"


class Grams(float):
    """``emissions`` in grams, written in the YAML as a plain decimal (0.00005, never 5.0e-05) by the safe dumper and
    by the one huggingface_hub's `metadata_save` uses: a plain decimal reads the same in YAML 1.1 and 1.2 parsers and
    to a person (PyYAML reads ``1e-05``, as other tools write it back, as a string)."""


def _plain(dumper: yaml.SafeDumper, value: Grams) -> yaml.ScalarNode:
    text = format(Decimal(repr(float(value))), "f")
    return dumper.represent_scalar("tag:yaml.org,2002:float", text if "." in text else f"{text}.0")


for _dumper in (yaml.SafeDumper, yaml.Dumper):
    yaml.add_representer(Grams, _plain, Dumper=_dumper)


def _where(s: Subject) -> str:
    """Where the model was trained, as the Hub asks: the grid zone charged, or, where none was given (the world
    average the assessment falls back on), that the location is not known: the world is no place."""
    from footprint.lca.electricity import WORLD

    if s.assessed.zone.code == WORLD:
        return f"not given (the world-average grid, zone {WORLD}, was assumed)"
    return common.location(s)


def metadata(s: Subject, training_type: str | None) -> dict[str, Any]:
    """The card's front matter: ``co2_eq_emissions`` as the Hub expects it, for a training target; {} when serving."""
    if not s.training:
        return {}
    co2: dict[str, Any] = {"emissions": Grams(sig(common.climate(s)["use"] * 1000, 4)), "source": "footprint"}
    if training_type:
        co2["training_type"] = training_type
    co2["geographical_location"] = _where(s)
    co2["hardware_used"] = str(common.hardware(s).value)
    return {"co2_eq_emissions": co2}


def figures(s: Subject) -> dict[str, Fact]:
    if s.training:
        a = s.assessed
        cc, (origin, how) = common.climate(s), common.energy_origin(s)
        w = a.workload
        return {
            "emissions_g": fact(
                cc["use"] * 1000, "g CO2 eq", origin, f"facility energy ({how}, x PUE) x grid factor", "use phase", digits=4
            ),
            "life_cycle_kg": fact(cc["total"], "kg CO2 eq", "modelled", "footprint LCA (EF 3.1)", "life cycle, cradle to grave"),
            "energy_mwh": common.energy_mwh(s),
            "facility_energy_mwh": common.facility_mwh(s),
            "gpu_hours": common.gpu_hours(s),
            "hardware": common.hardware(s),
            "water_l": fact(a.water_l.get("total"), "L", "modelled", "WUE on site + the grid's water intensity off site"),
            "gpu_lifetimes": fact(
                w.gpu_lifetimes, "", "modelled", f"GPU-hours / (lifetime x utilisation); {w.gpu_equivalents:,} GPU-equivalents"
            ),
        }
    sv, m = common.served(s), s.model
    req = m.get("requests")
    window = s.window
    return {
        "emissions_g": missing(NO_TRAINING, "g CO2 eq"),
        "energy_kwh": fact(
            sv["kwh"], "kWh", "measured", f"DCGM GPU energy {window}, with host share, idle reserve, x PUE", "+pue"
        ),
        "climate_kg": fact(sv["climate"], "kg CO2 eq", "modelled", "use + embodied share (footprint.serving.assess)", "+pue"),
        "per_1000_requests_g": fact(
            sv["climate"] * 1e6 / req if req else None,
            "g CO2 eq",
            "modelled",
            "climate / requests x 1,000",
            "+pue",
            reason="no requests counted",
        ),
        "requests": fact(
            int(req) if req else None, "", "measured", "counted by the serving engine", reason="no requests counted"
        ),
        "water_l": fact(
            sv["impacts"].get("water_l"),
            "L",
            "modelled",
            "WUE on site + the grid's water intensity off site",
            "+pue",
            reason="not modelled for this site",
        ),
        "gpu_lifetimes": _served_lifetimes(s),
    }


def _served_lifetimes(s: Subject) -> Fact:
    """The GPU lifetimes a served model consumed at the +pue boundary: its busy GPU time and idle reserve."""
    from footprint.serving.assess import Site, gpu_lifetimes

    m, site = s.model, Site(**{k: v for k, v in ((s.serving or {}).get("site") or {}).items() if k in Site.__dataclass_fields__})
    hours = m["gpu_hours"] + (m.get("idle_reserve_gpu_hours") or 0.0)
    n = gpu_lifetimes(m.get("gpu_model"), site, hours)
    how = f"GPU time (busy and idle reserve, {hours:.3g} GPU-hours) / (lifetime {site.lifetime} x utilisation), {s.window}"
    return fact(n, "", "modelled", how, "+pue")


def categories(s: Subject) -> list[tuple[str, str, str]]:
    """(category, unit, value) of all 16 EF 3.1 categories: the training's life cycle, or the served window's."""
    from footprint.lca import categories as cat
    from footprint.lca.units import display_unit

    out = []
    for c in cat.categories():
        if s.training:
            r = s.assessed.impacts[c.key]
            v: float | None = r.total if c.key not in r.not_available else None
        else:
            v = common.served(s)["impacts"].get(c.key)
        out.append((c.name, display_unit(c.unit), "not available" if v is None else f"{v:.3g}"))
    return out


def build(s: Subject, training_type: str | None = None) -> Form:
    if training_type is not None and training_type not in TRAINING_TYPES:
        raise FootprintError(f"--training-type is {' or '.join(TRAINING_TYPES)}, got {training_type!r}", key="--training-type")
    if training_type is not None and not s.training:
        raise FootprintError(
            f"--training-type goes into co2_eq_emissions, which a served model's card has none of: {NO_TRAINING}",
            s.target,
            "--training-type",
        )
    notes = []
    if s.training:
        notes.append(
            "co2_eq_emissions.emissions is the USE PHASE of training (grams of CO2 eq: facility electricity x the "
            "location-based grid factor), as the Hub's emissions filter compares models; the life-cycle figure "
            "(with the hardware's manufacturing, transport and end of life) is given beside it."
        )
        grams = metadata(s, training_type)["co2_eq_emissions"]["emissions"]
        if 0 < grams < 1e-4:
            shown = repr(float(grams))  # as Python prints it; huggingface_hub's filter takes its first number
            first = re.search(r"\d+\.\d+|\d+", shown).group(0)  # type: ignore[union-attr]
            notes.append(
                f"emissions is below 0.0001 g: huggingface_hub's list_models(emissions_thresholds=...) takes the first "
                f"number in {shown}, so it files this card under {first} g; the value written is right."
            )
        if training_type is None:
            notes.append("training_type is not written: the target does not say; give --training-type pre-training|fine-tuning")
    else:
        notes.append(f"No co2_eq_emissions in the metadata: {NO_TRAINING}.")
    return {
        "form": "hf",
        "title": TITLE,
        "target": {"kind": s.kind, "name": s.name, "given_as": s.target},
        "full_assessment": s.link,
        "metadata": metadata(s, training_type),
        "categories": [{"category": n, "unit": u, "value": v} for n, u, v in categories(s)],
        "sections": {"figures": figures(s)},
        "notes": notes,
    }


def section(form: Form) -> str:
    """The card's Markdown section (no front matter)."""
    t = form["target"]
    scope = "training" if t["kind"] != "served model" else "serving"
    lines = [f"## {TITLE}", "", f"Footprint of the {scope} of **{t['name']}** ({t['kind']}), by footprint.", ""]
    lines += [f"- {n}" for n in form["notes"]] + [""]
    lines += md_rows(form["sections"]["figures"], LABELS) + [""]
    head = "life cycle of training" if scope == "training" else "served window, +pue boundary"
    lines += [f"### The 16 EF 3.1 impact categories ({head})", "", "| Category | Value | Unit |", "| --- | ---: | --- |"]
    lines += [f"| {md_cell(c['category'])} | {c['value']} | {md_cell(c['unit'])} |" for c in form["categories"]]
    lines += ["", full_assessment(form), ""]
    return "\n".join(lines)


def front_matter(meta: dict[str, Any]) -> str:
    body = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) if meta else "{}\n"
    return f"---\n{body}---\n"


def markdown(data: dict[str, Any], form: Form) -> str:
    return front_matter(form["metadata"]) + "\n" + section(form)


#: An empty front matter (``---`` then ``---``), which huggingface_hub's block pattern does not match.
EMPTY_BLOCK = re.compile(rb"\A(?:\xef\xbb\xbf)?[ \t\r\n]*---[ \t]*\r?\n---[ \t]*(?:\r?\n|\Z)")


def _kept(meta: dict[str, Any], old: Any) -> dict[str, Any]:
    """The new metadata, with the card's own training_type where footprint was not told one: it says what the model
    is (pre-training or fine-tuning), which no measurement gives; the other fields describe the emissions replaced."""
    co2 = meta["co2_eq_emissions"]
    if "training_type" in co2 or not isinstance(old, dict) or not isinstance(old.get("training_type"), str):
        return meta
    first = {k: v for k, v in co2.items() if k in ("emissions", "source")}  # the order `metadata` writes
    return {**meta, "co2_eq_emissions": {**first, "training_type": old["training_type"], **co2}}


def merge(form: Form, readme: str | Path) -> Path:
    """Update an existing card's metadata with ``co2_eq_emissions`` (huggingface_hub's `metadata_load` and
    `metadata_save`), its text untouched; written atomically."""
    from footprint.inputs import read_bytes
    from footprint.outputs import write_bytes

    if not form["metadata"]:
        raise FootprintError(f"nothing to merge: {NO_TRAINING}", str(readme), "--merge")
    try:
        from huggingface_hub import metadata_load, metadata_save
    except ImportError:
        raise FootprintError("--merge needs huggingface_hub: pip install 'footprint[integrations]'", key="--merge") from None
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    from footprint.inputs import decode, load_yaml

    original = read_bytes(readme, "model card")
    block = REGEX_YAML_BLOCK.search(decode(original, str(readme), "model card").removeprefix("\ufeff"))
    if block is not None:  # read with the input contract's limits first (no alias bombs), then by huggingface_hub
        meta = load_yaml(block.group(2), str(readme), "metadata")
        if meta is not None and not isinstance(meta, dict):
            raise FootprintError(f"its metadata block is a {type(meta).__name__}, expected a mapping", str(readme), "metadata")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "README.md"
        tmp.write_bytes(EMPTY_BLOCK.sub(b"", original, count=1))  # huggingface_hub would add a block above it
        data = metadata_load(tmp) or {}
        data.update(_kept(form["metadata"], data.get("co2_eq_emissions")))
        metadata_save(tmp, data)
        updated = tmp.read_bytes()
    return write_bytes(readme, updated)
