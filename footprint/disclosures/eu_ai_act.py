"""`--as eu-ai-act`: the energy and compute fields of the EU AI Act's documentation of general-purpose AI models.

Regulation (EU) 2024/1689, Annex XI, Section 1, point 2(d) (computational resources used to train the model: FLOPs,
training time) and 2(e) (known or estimated energy consumption of the model), as the Model Documentation Form of the
General-Purpose AI Code of Practice (Transparency chapter, July 2025) lays them out: training compute in FLOP to two
significant figures with its method, training energy in MWh with its method and boundary, training time (wall-clock
days and GPU-hours), hardware; for inference, the computation per token and, where serving telemetry exists, the
measured energy per request. Figures are the assessment's, rounded: compute to 2 significant figures, the rest to 3.
"""

from __future__ import annotations

from footprint.disclosures import common
from footprint.disclosures.facts import Fact, Form, fact, full_assessment, md_rows, missing
from footprint.disclosures.target import Subject
from footprint.errors import FootprintError

TITLE = "EU AI Act: model documentation, energy and computation (Annex XI, Section 1, 2(d)-(e))"
LABELS = {
    "compute_flop": "Training compute (FLOP)",
    "compute_method": "Compute: method",
    "energy_mwh": "Training energy consumption (MWh)",
    "energy_method": "Energy: method",
    "energy_boundary": "Energy: boundary",
    "facility_energy_mwh": "Training energy at the facility (MWh)",
    "time_days": "Training time (wall clock, days)",
    "gpu_hours": "Training time (GPU-hours)",
    "hardware": "Hardware used",
    "flop_per_token": "Inference computation (FLOP per token)",
    "energy_per_request_wh": "Inference energy per request (Wh)",
    "energy_per_request_facility_wh": "Inference energy per request at the facility (Wh)",
    "energy_per_output_token_j": "Inference energy per output token (J)",
}
NO_SERVING = "no serving telemetry for this target: import it with footprint serving import and disclose the serving record"
NO_TRAINING = "a serving record holds no training; disclose the training run or scenario for this section"


def training(s: Subject) -> dict[str, Fact]:
    if not s.training:
        keys = ("compute_flop", "energy_mwh", "facility_energy_mwh", "time_days", "gpu_hours", "hardware")
        return {k: missing(NO_TRAINING) for k in keys}
    c, e = common.compute(s), common.energy_mwh(s)
    return {
        "compute_flop": c,
        "compute_method": _about(c, c.method),
        "energy_mwh": e,
        "energy_method": _about(e, f"{e.origin}: {e.method}"),
        "energy_boundary": _about(e, "IT" if e.available else ""),
        "facility_energy_mwh": common.facility_mwh(s),
        "time_days": common.time_days(s),
        "gpu_hours": common.gpu_hours(s),
        "hardware": common.hardware(s),
    }


def _about(f: Fact, text: str) -> Fact:
    """A figure's method or boundary as its own field, with the figure's origin (or its reason when it is missing)."""
    if not f.available:
        return missing(f.reason)
    return fact(text, "", f.origin, "", f.boundary, digits=None)


def inference(s: Subject, stated: dict[str, float] | None = None) -> dict[str, Fact]:
    out = {"flop_per_token": _flop_per_token(s, stated or {})}
    if s.serving is None:
        for k in ("energy_per_request_wh", "energy_per_request_facility_wh", "energy_per_output_token_j"):
            out[k] = missing(NO_SERVING)
        return out
    m, pue = s.model, s.pue
    gpu = m.get("gpu_model")
    out["hardware"] = (
        fact(str(gpu), "", "measured", "GPU model of the serving GPUs (the exporter's modelName label)", digits=None)
        if isinstance(gpu, str) and gpu
        else missing("the serving telemetry names no GPU model")
    )
    req = m.get("requests")
    if not req:
        why = "the serving record counted no requests for this model"
        out["energy_per_request_wh"] = out["energy_per_request_facility_wh"] = missing(why, "Wh")
    else:
        out["energy_per_request_wh"] = fact(
            m["gpu_j"] / req / 3600,
            "Wh",
            "measured",
            f"the model's active GPU energy (DCGM counter, idle power removed) / requests served, {s.window}",
            "accelerators: the model's busy GPU time; no host, no idle reserve, no facility overhead",
        )
        facility = common.served(s, "+pue")["kwh"] * 1000 / req
        out["energy_per_request_facility_wh"] = fact(
            facility, "Wh", "modelled", f"measured energy with the host share and idle reserve, x PUE {pue:g}", "facility"
        )
    j = m.get("j_per_output_token")
    out["energy_per_output_token_j"] = (
        fact(j, "J", "measured", "decode share of the active GPU energy / output tokens", "accelerators")
        if j is not None
        else missing("the engine exported no prefill/decode time split (see the serving report's flags)", "J")
    )
    return out


def _flop_per_token(s: Subject, stated: dict[str, float]) -> Fact:
    """Forward-pass FLOP per token, 2N (N: active parameters), as `footprint flops transformer --inference` counts;
    N from the scenario, else as stated with --parameters (a serving record or a run record holds none)."""
    model = s.assessment.workload.model if s.assessment is not None else {}
    n, origin = model.get("parameters"), "the scenario's model.parameters"
    if n and stated:
        raise FootprintError(
            f"the {s.kind} states model.parameters ({n:g}); --parameters is for a target that records none: leave it out",
            s.target,
            "--parameters",
        )
    if not n and stated:
        model, n, origin = stated, stated["parameters"], "the parameter count stated with --parameters"
    if not n:
        what = "serving record" if s.serving else s.kind + " record" if s.record else "scenario"
        return missing(f"the {what} states no parameter count; give it with --parameters N", "FLOP")
    from footprint.flops import transformer_flops

    f = transformer_flops(n, 1.0, active_params=model.get("active_parameters"), inference=True)
    how = f"{f.formula} from {origin}, as footprint flops transformer --inference counts"
    return fact(f.flops_per_token, "FLOP", "modelled", how, digits=2)


def build(s: Subject, stated: dict[str, float] | None = None) -> Form:
    return {
        "form": "eu-ai-act",
        "title": TITLE,
        "target": {"kind": s.kind, "name": s.name, "given_as": s.target},
        "full_assessment": s.link,
        "sections": {"training": training(s), "inference": inference(s, stated)},
        "notes": [
            "Figures are footprint's assessment of the target, rounded: training compute to 2 significant figures, the "
            "rest to 3. Origin: measured (a meter or telemetry), stated (given in the scenario or by the training loop) "
            "or modelled (computed from other figures; the method says how).",
            "Energy is given at the IT boundary (what the meters or the power model cover) and, separately, at the "
            "facility (x PUE).",
        ],
    }


def markdown(data: dict, form: Form) -> str:
    lines = [f"# {TITLE}", "", f"Target: {form['target']['kind']} **{form['target']['name']}**.", ""]
    lines += ["## Training", "", *md_rows(form["sections"]["training"], LABELS), ""]
    lines += ["## Inference", "", *md_rows(form["sections"]["inference"], LABELS), ""]
    lines += [full_assessment(form), ""] + [f"- {n}" for n in form["notes"]]
    return "\n".join(lines) + "\n"
