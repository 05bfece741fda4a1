"""The figures every form draws on, each with its origin: training compute, energy, time and hardware from an
Assessment (and the run record where there is one), and a served model's energy and traffic from its serving report.

One function per figure, so the EU AI Act form, the model card and the SCI say the same thing the same way.
"""

from __future__ import annotations

from typing import Any

from footprint.disclosures.facts import Fact, fact, missing
from footprint.disclosures.target import Subject

USE_BOUNDARY = "+pue"  # the serving boundary the forms use: model's GPU energy, host share, idle reserve, PUE


def energy_origin(s: Subject) -> tuple[str, str]:
    """(origin, method) of the IT energy: measured by a meter, simulated (a fake meter: modelled), stated, modelled."""
    w = s.assessed.workload
    if s.record is not None:
        gpus = [d for d in s.record.get("devices", []) if d.get("component", "gpu") == "gpu"]
        fake = [d for d in gpus if d.get("measured") is False]
        methods = ", ".join(sorted({str(d.get("method")) for d in gpus})) or "not recorded"
        if s.kind == "fleet job":
            tel = s.record.get("telemetry") or {}
            return "measured", f"cluster telemetry ({tel.get('method') or s.record.get('imported_from')})"
        if fake and len(fake) == len(gpus):
            return "modelled", f"simulated by a fake meter ({methods}), not measured"
        return "measured", f"meter per device ({methods})"
    if w.energy_method == "stated/measured energy":
        return "stated", "stated in the scenario (training.energy)"
    power = f"{w.power_per_gpu_w:g} W" if w.power_per_gpu_w else "the power"
    return "modelled", f"GPU-hours x {power} per GPU"


def it_boundary(s: Subject) -> str:
    w = s.assessed.workload
    if s.record is not None:
        return "IT equipment as metered (GPUs, and host CPU/RAM where the record has them); no facility overhead"
    if w.energy_method == "stated/measured energy":
        return "IT equipment, as stated; no facility overhead"
    return "GPUs (power per GPU x GPU-hours); no host CPU/RAM, no facility overhead"


def compute(s: Subject) -> Fact:
    """Training compute in FLOP, 2 significant figures: counted, stated or modelled (6ND and its variants)."""
    w = s.assessed.workload
    if w.flops is None:
        return _model_compute(s)
    how = (s.record or {}).get("flops_method") or ""
    if s.record is not None and how.startswith("measured"):
        origin, method = "measured", f"counted by the tracker ({how})"
    elif s.record is not None and how == "given to step()":
        origin, method = "stated", "FLOPs per step given by the training loop (footprint.track step(flops=...))"
    elif s.record is not None:
        origin, method = "modelled", "6N per token x tokens counted by the tracker (analytical)"
    elif (w.mfu_method or "").startswith("stated"):
        origin, method = "stated", "stated in the scenario (training.flops)"
    else:
        formula = (w.mfu_method or "").removeprefix("derived: ").split(" over ")[0]
        origin, method = "modelled", f"6ND from the model's parameters and tokens ({formula})"
    return fact(w.flops, "FLOP", origin, method, "model FLOPs of the training run (no recomputation)", digits=2)


def _model_compute(s: Subject) -> Fact:
    """6ND from a scenario's model section where the assessment holds no FLOPs: it derives them only with an MFU,
    so a GPU without a dense peak for the dtype (a V100 in bf16) leaves them out; the compute does not depend on it."""
    from footprint.lca.workload import model_flops

    w = s.assessed.workload
    f = model_flops(w.model) if s.kind == "scenario" else None
    if f is None:
        given = [k for k in ("parameters", "tokens") if w.model.get(k)]
        why = {
            "run": "the run record counted no FLOPs (give footprint.track a model= parameter count, or step(flops=...))",
            "fleet job": "a scheduler's record holds no FLOP count",
        }.get(s.kind, f"the scenario states no training.flops, and {_lacks(given)}")
        return missing(why, "FLOP")
    try:
        mfu = f.flops / (w.gpu_hours * 3600 * w.gpu.peak_flops(w.dtype)) if w.gpu_hours else None
    except KeyError:
        mfu = None
    if mfu is not None and not 0 < mfu <= 1:  # the assessment's note: the model section and the GPU time disagree
        return missing(f"{f.formula} would take an MFU of {mfu:.0%} on the scenario's GPU-hours: check them", "FLOP")
    method = f"6ND from the model's parameters and tokens ({f.formula}); the assessment derives no MFU from it"
    return fact(f.flops, "FLOP", "modelled", method, "model FLOPs of the training run (no recomputation)", digits=2)


def flop_count(s: Subject) -> float | None:
    """The training FLOPs unrounded (SCI's R per PFLOP), where `compute` gives them (it rounds to 2 figures)."""
    from footprint.lca.workload import model_flops

    w = s.assessed.workload
    if w.flops is not None:
        return w.flops
    f = model_flops(w.model) if compute(s).available else None
    return f.flops if f is not None else None


def _lacks(given: list[str]) -> str:
    if not given:
        return "neither model.parameters nor model.tokens"
    return f"model.{given[0]} without model.{'tokens' if given[0] == 'parameters' else 'parameters'}"


def energy_mwh(s: Subject) -> Fact:
    origin, method = energy_origin(s)
    kwh = s.assessed.workload.it_energy_kwh
    return fact(kwh / 1000, "MWh", origin, method, it_boundary(s))


def facility_mwh(s: Subject) -> Fact:
    from footprint.lca.assessment import pue_text

    a = s.assessed
    return fact(
        a.facility_energy_kwh / 1000,
        "MWh",
        "modelled",
        f"IT energy x {pue_text(a.workload)}",
        "facility (IT energy and the data centre's overhead: cooling, power conversion)",
    )


def gpu_hours(s: Subject) -> Fact:
    w = s.assessed.workload
    m = w.gpu_hours_method
    origin = "measured" if m.startswith("measured") else "stated" if m.startswith("stated") else "modelled"
    return fact(w.gpu_hours, "GPU-hours", origin, m, "the run's GPUs")


def time_days(s: Subject) -> Fact:
    w = s.assessed.workload
    duration = (s.record or {}).get("duration_s")
    if s.record is not None:
        if not duration:
            return missing("the record has no duration", "days")
        return fact(float(duration) / 86400, "days", "measured", "wall clock from the record's start to its end")
    from footprint.lca.workload import DURATION_METHOD

    if w.gpu_hours_method == DURATION_METHOD:  # the one wall-clock time a scenario can state
        return fact(w.gpu_hours / max(w.count, 1) / 24, "days", "stated", "stated in the scenario (training.duration)")
    return fact(
        w.gpu_hours / max(w.count, 1) / 24,
        "days",
        "modelled",
        f"GPU-hours / {w.count:,} GPUs (all GPUs busy throughout; the scenario states no wall-clock time)",
    )


def hardware(s: Subject) -> Fact:
    from footprint.lca.assessment import gpus_text

    a = s.assessed
    origin = "measured" if s.record is not None else "stated"
    how = "device names read from the meters (NVML) or telemetry" if s.record is not None else "stated in the scenario"
    return fact(gpus_text(a), "", origin, how, digits=None)


def location(s: Subject) -> str:
    """The grid the use phase was charged to: "France (grid zone FRA)"."""
    if s.assessment is not None:
        z = s.assessment.zone
        return f"{z.name} (grid zone {z.code})" if z.name and z.name != z.code else f"grid zone {z.code}"
    grid = (s.serving or {}).get("site", {}).get("grid")
    return f"grid zone {grid}" if grid else "world average grid (no zone given)"


def climate(s: Subject) -> dict[str, float]:
    """Climate change (kg CO2 eq): life cycle, use phase and embodied, of a training target."""
    cc = s.assessed.impacts["climate_change"]
    use = cc.by_stage.get("use") or 0.0
    return {"total": cc.total, "use": use, "embodied": cc.total - use}


def served(s: Subject, boundary: str = USE_BOUNDARY) -> dict[str, Any]:
    """A served model's figures at ``boundary``: its energy (kWh), climate change (kg: use and embodied) and traffic."""
    m = s.model
    joules = {
        "accelerators": m["gpu_j"],
        "+host": m["gpu_j"] + (m["host_j"] or 0.0),
        "+idle": m["gpu_j"] + (m["host_j"] or 0.0) + m["idle_reserve_j"],
    }
    joules["+pue"] = joules["+idle"] * s.pue
    imp = m["impacts"][boundary]
    cc = imp["climate_change"] or 0.0
    embodied = cc * (imp.get("embodied_share_climate") or 0.0)
    return {
        "kwh": joules[boundary] / 3.6e6,
        "climate": cc,
        "use": cc - embodied,
        "embodied": embodied,
        "requests": m.get("requests"),
        "tokens_in": m.get("tokens_in"),
        "tokens_out": m.get("tokens_out"),
        "impacts": imp,
    }
