"""`--as sci`: the Software Carbon Intensity (ISO/IEC 21031:2024, the Green Software Foundation's SCI).

SCI = (E x I + M) per R, every term shown with its origin:

- E (kWh): the energy of the software boundary: the training's IT energy x PUE (footprint's facility energy), or a
  served model's energy at the ``+pue`` boundary (its GPU energy, host share and idle reserve, x PUE);
- I (g CO2 eq/kWh): location-based grid intensity, the factor the assessment charged the use phase with
  (use-phase climate change / E, so E x I is exactly the assessment's use phase);
- M (g CO2 eq): embodied emissions (manufacturing, transport, end of life) allocated as the SCI does,
  M = TE x TS x RS: TE the embodied emissions of the GPUs (with their host share), TS the time share (time reserved /
  expected lifespan: GPU-hours per GPU / lifetime), RS the resource share (whole GPUs reserved; the host counts by
  its per-GPU share). Where a scenario states a utilisation below 1, the assessment charges the idle part of the
  hardware's life to its users too (embodied / utilisation); SCI does not, and M says so;
- R: the functional unit, ``--per`` token, m-tokens, step, pflop or run for training; request, 1k-requests, token,
  m-tokens or run (the served window) for a served model.
"""

from __future__ import annotations

from typing import Any

from footprint.disclosures import PER, common
from footprint.disclosures.facts import Fact, Form, fact, full_assessment, md_rows, missing
from footprint.disclosures.target import Subject
from footprint.errors import FootprintError

TITLE = "Software Carbon Intensity (ISO/IEC 21031:2024)"
UNITS = {
    "token": "token",
    "m-tokens": "million tokens",
    "step": "optimizer step",
    "pflop": "PFLOP of training compute",
    "run": "run",
    "request": "request",
    "1k-requests": "1,000 requests",
}
assert set(UNITS) == set(PER)
TRAINING_PER = ("token", "m-tokens", "step", "pflop", "run")
SERVING_PER = ("request", "1k-requests", "token", "m-tokens", "run")
LABELS = {
    "sci": "SCI",
    "E_kwh": "E: energy",
    "I_g_per_kwh": "I: grid intensity (location-based)",
    "M_g": "M: embodied emissions (allocated)",
    "R": "R: functional units",
    "functional_unit": "Functional unit",
    "TE_g": "TE: embodied emissions of the hardware reserved",
    "TS": "TS: time share",
    "RS": "RS: resource share",
}


def check_per(s: Subject, per: str | None) -> str:
    """The functional unit; without one, per request when serving, per million tokens for training that counted
    tokens, else per run (a scheduler's job, a scenario without model.tokens)."""
    allowed = TRAINING_PER if s.training else SERVING_PER
    if per is None:
        return "request" if not s.training else "m-tokens" if _r(s, "m-tokens").available else "run"
    if per not in allowed:
        what = "training target" if s.training else "served model"
        raise FootprintError(f"--per {per} does not apply to a {what} (choose from {', '.join(allowed)})", key="--per")
    return per


def _r(s: Subject, per: str) -> Fact:
    """R, the number of functional units, with where the count came from."""
    scale = {"m-tokens": 1e6, "1k-requests": 1e3, "pflop": 1e15}.get(per, 1.0)
    if per == "run":
        what = "the training run" if s.training else f"the served window {s.window}"
        return fact(1.0, UNITS[per], "stated", what, digits=None)
    if s.training:
        w = s.assessed.workload
        rec = s.record
        if per in ("token", "m-tokens"):
            n = (rec or {}).get("tokens") or (w.model.get("tokens") if rec is None else None)
            origin, how = ("measured", "tokens counted by the tracker") if rec else ("stated", "model.tokens of the scenario")
        elif per == "step":
            n, origin, how = (rec or {}).get("steps"), "measured", "optimizer steps counted by the tracker"
        else:
            c = common.compute(s)  # its method and origin; the count unrounded (the EU form rounds it to 2 figures)
            if not c.available:
                return missing(c.reason, UNITS[per])
            n, origin, how = common.flop_count(s), c.origin, f"training compute ({c.method})"
        if not n:
            return missing(f"the {s.kind} records no {UNITS[per].split(' ')[-1]}s", UNITS[per])
        counted = per != "pflop"  # a count is given whole (46,355 requests, not 46,360); modelled compute to 4 figures
        return fact(float(n) / scale, _r_unit(per, scale), origin, how, digits=None if counted else 4)
    m = s.model
    if per in ("request", "1k-requests"):
        n, how = m.get("requests"), "requests counted by the serving engine"
    else:
        n = (m.get("tokens_in") or 0.0) + (m.get("tokens_out") or 0.0)
        how = "input + output tokens counted by the serving engine on metered GPUs"
    if not n:
        return missing(f"the serving record counted no {UNITS[per].split(' ')[-1]} for this model", UNITS[per])
    return fact(float(n) / scale, _r_unit(per, scale), "measured", how, digits=None)


def _r_unit(per: str, scale: float) -> str:
    """R's unit: "token", or "x 1,000 requests" where a unit counts many (R = 46.35 x 1,000 requests)."""
    return f"x {UNITS[per]}" if scale != 1.0 else UNITS[per]


def terms(s: Subject) -> dict[str, Fact]:
    """E, I and M of the whole target (training run or served window) with their origins."""
    if s.training:
        a = s.assessed
        w, cc = a.workload, common.climate(s)
        origin, how = common.energy_origin(s)
        e_kwh = a.facility_energy_kwh
        e = fact(e_kwh, "kWh", origin, f"IT energy ({how}) x PUE {w.pue:g}", "facility", digits=4)
        stated = w.carbon_intensity is not None or w.electricity_factors is not None
        i_how = (
            f"stated carbon intensity (site.carbon_intensity {w.carbon_intensity * 1000:g} g/kWh)"
            if w.carbon_intensity is not None
            else f"grid mix of {common.location(s)}: {a.zone.factors['climate_change'].note or 'lca_data factor'}"
        )
        i = fact(cc["use"] * 1000 / e_kwh if e_kwh else None, "g CO2 eq/kWh", "stated" if stated else "modelled", i_how, digits=4)
        m = fact(sci_embodied(a) * 1000, "g CO2 eq", "modelled", _m_method(a), digits=4)
        return {"E_kwh": e, "I_g_per_kwh": i, "M_g": m, **_allocation(s)}
    sv = common.served(s)
    pue = s.pue
    e = fact(
        sv["kwh"],
        "kWh",
        "measured",
        f"the model's GPU energy (DCGM), host share and idle reserve x PUE {pue:g} (modelled)",
        "+pue: the model's GPUs, its share of the host and of its GPUs' idle time, facility overhead",
        digits=4,
    )
    grid = common.location(s)
    i = fact(sv["use"] * 1000 / sv["kwh"] if sv["kwh"] else None, "g CO2 eq/kWh", "modelled", f"location-based: {grid}", digits=4)
    m = fact(
        sv["embodied"] * 1000,
        "g CO2 eq",
        "modelled",
        "embodied of the GPUs x the model's GPU time (busy and idle reserve) / GPU lifetime (footprint.serving.assess)",
        digits=4,
    )
    return {"E_kwh": e, "I_g_per_kwh": i, "M_g": m}


def sci_embodied(a: Any) -> float:
    """M in kg: the embodied stages with SCI's time share, time reserved / expected lifespan. The assessment spreads
    a GPU's embodied impacts over its busy share of life (lifetime x utilisation), so M = its embodied x utilisation
    (per GPU model, for a run with several)."""
    parts = a.parts or (a,)
    return sum(
        (p.impacts["climate_change"].total - (p.impacts["climate_change"].by_stage.get("use") or 0.0)) * p.workload.utilization
        for p in parts
    )


def _m_method(a: Any) -> str:
    w = a.workload
    text = "manufacturing + transport + end of life, M = TE x TS x RS"
    if w.utilization != 1.0 or any(p.workload.utilization != 1.0 for p in a.parts):
        whole = (a.impacts["climate_change"].total - (a.impacts["climate_change"].by_stage.get("use") or 0.0)) * 1000
        text += (
            f"; the assessment's embodied figure ({whole:.4g} g) spreads the hardware over its busy share of life "
            f"(utilisation {w.utilization:g}), SCI's time share over the whole expected lifespan"
        )
    return text


def _allocation(s: Subject) -> dict[str, Fact]:
    """TE, TS and RS of a training target: TE assessed by the engine for one whole life of every GPU."""
    from footprint.lca.engine import assess

    a = s.assessed
    w = a.workload
    if w.parts:
        why = "several GPU models, each with its own lifetime: M is the sum of theirs (see the full assessment)"
        return {"TE_g": missing(why, "g CO2 eq"), "TS": missing(why), "RS": missing(why)}
    whole = assess(w.with_(gpu_hours=w.count * w.lifetime_h * w.utilization), samples=0)  # the engine's L = 1 per GPU
    te = sum(v or 0.0 for st, v in whole.impacts["climate_change"].by_stage.items() if st != "use") * 1000
    return {
        "TE_g": fact(te, "g CO2 eq", "modelled", f"{w.count:,} x {w.gpu.name} with their host share, one whole life", digits=4),
        "TS": fact(
            w.gpu_hours / w.count / w.lifetime_h,
            "",
            "modelled",
            f"time reserved / expected lifespan: GPU-hours per GPU / lifetime {w.lifetime_years:.3g} years",
            digits=4,
        ),
        "RS": fact(1.0, "", "modelled", "whole GPUs reserved; the host by its per-GPU share (lca_data host_share)", digits=None),
    }


def build(s: Subject, per: str | None = None) -> Form:
    per = check_per(s, per)
    t, r = terms(s), _r(s, per)
    e, i, m = t["E_kwh"], t["I_g_per_kwh"], t["M_g"]
    parts = [e, i, m, r]
    if all(f.available for f in parts):
        value = (e.value * i.value + m.value) / r.value
        sci = fact(value, f"g CO2 eq per {UNITS[per]}", "modelled", "(E x I + M) / R", digits=4)
    else:
        sci = missing("; ".join(f.reason for f in parts if not f.available), f"g CO2 eq per {UNITS[per]}")
    unit = fact(UNITS[per], "", "stated", f"--per {per}", digits=None)
    top = {"sci": sci, "E_kwh": e, "I_g_per_kwh": i, "M_g": m, "R": r, "functional_unit": unit}
    alloc = {k: v for k, v in t.items() if k in ("TE_g", "TS", "RS")}
    return {
        "form": "sci",
        "title": TITLE,
        "target": {"kind": s.kind, "name": s.name, "given_as": s.target},
        "full_assessment": s.link,
        "formula": "SCI = (E x I + M) per R",
        "sections": {"_": top, **({"M_allocation": alloc} if alloc else {})},
        "notes": [
            "E x I is the use phase of the assessment's climate change; M its embodied stages with SCI's time share "
            "(time reserved / expected lifespan); I is location-based (the grid zone's average, or the stated factor).",
            "SCI is a rate, not a total: compare it only between targets with the same functional unit and boundary.",
        ],
    }


def markdown(data: dict[str, Any], form: Form) -> str:
    top = form["sections"]["_"]
    lines = [f"# {TITLE}", "", f"Target: {form['target']['kind']} **{form['target']['name']}**.", ""]
    lines += [f"**SCI = (E x I + M) per R = {top['sci'].text()}**", ""]
    lines += md_rows(top, LABELS) + [""]
    if "M_allocation" in form["sections"]:
        lines += ["## M = TE x TS x RS", "", *md_rows(form["sections"]["M_allocation"], LABELS), ""]
    lines += [full_assessment(form), ""] + [f"- {n}" for n in form["notes"]]
    return "\n".join(lines) + "\n"
