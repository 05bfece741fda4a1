"""What an experiment tracker gets from a run or an assessment: parameters, flat metrics, artifact files.

One source for MLflow and W&B. Metric keys are ``footprint/<category>`` (the 16 EF 3.1 totals, plus
``_low`` / ``_high``), ``footprint/energy_kwh``, ``footprint/mfu`` and the training story; a value
that is not available is left out, never logged as 0.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from footprint.lca import DEFAULT_SAMPLES
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, training_numbers
from footprint.lca.workload_data import HOST_ONLY
from footprint.outputs import write_text

PREFIX = "footprint/"


def resolve(target: Any, samples: int = DEFAULT_SAMPLES) -> tuple[Assessment, Path | None]:
    """(assessment, run directory or None) of a run directory, run record, stopped tracker, scenario or Assessment."""
    from footprint.api import assess

    if isinstance(target, Assessment):
        src = target.workload.source
        return target, (Path(src).parent if src and Path(src).name == "run.json" else None)
    run = target if isinstance(target, dict) else getattr(target, "run", None)
    if isinstance(run, dict):
        run_dir = Path(run["run_dir"]) if run.get("run_dir") else None
        return assess(run_dir if run_dir and (run_dir / "run.json").is_file() else run, samples=samples), run_dir
    p = Path(target)
    run_dir = p if p.is_dir() else (p.parent if p.name == "run.json" else None)
    return assess(p, samples=samples), run_dir


def params(a: Assessment) -> dict[str, str]:
    w = a.workload
    out = {
        "footprint.name": w.name,
        "footprint.gpu": w.gpu.name if w.gpu else HOST_ONLY,
        "footprint.gpu_count": str(w.count),
        "footprint.grid": w.grid,
        "footprint.pue": f"{w.pue:g}",
        "footprint.lifetime_years": f"{w.lifetime_years:.3g}",
        "footprint.utilization": f"{w.utilization:g}",
        "footprint.dtype": w.dtype,
        "footprint.energy_method": w.energy_method,
        "footprint.embodied_method": a.embodied_method,
    }
    if w.mfu_method:
        out["footprint.mfu_method"] = w.mfu_method
    return {k: v[:500] for k, v in out.items()}


def metrics(a: Assessment) -> dict[str, float]:
    w = a.workload
    out: dict[str, float | None] = {
        "energy_kwh": w.it_energy_kwh,
        "facility_energy_kwh": a.facility_energy_kwh,
        "gpu_hours": w.gpu_hours,
        "host_hours": w.host_hours if w.host_only else None,
        "gpu_lifetimes": w.gpu_lifetimes,  # the hardware a run uses up, never rounded up
        "hardware_consumed_kg": a.materials.get("mass_consumed_kg"),
        "gpu_equivalents": float(w.gpu_equivalents),  # Falk et al.'s count: gpu_lifetimes rounded up
        "water_l": a.water_l.get("total"),
        "mfu": w.mfu,
    }
    for c in cat.categories():
        r = a.impacts[c.key]
        out[c.key] = r.total
        out[f"{c.key}_low"] = r.low
        out[f"{c.key}_high"] = r.high
    story = training_numbers(a) or {}
    for k in (
        "steps",
        "tokens",
        "tokens_per_s",
        "median_step_s",
        "kwh_per_million_tokens",
        "kwh_per_step",
        "kg_co2eq_per_million_tokens",
        "kg_co2eq_per_step",
    ):
        out[k] = story.get(k)
    for kind, share in (story.get("gpu_energy_share") or {}).items():
        out[f"gpu_energy_share_{kind}"] = share
    return {PREFIX + k: float(v) for k, v in out.items() if v is not None}


def artifacts(a: Assessment, run_dir: Path | None, report: bool = True) -> tuple[list[Path], tempfile.TemporaryDirectory]:
    """Files to upload: run.json, the Assessment JSON and the HTML report, in a temporary folder the caller cleans."""
    tmp = tempfile.TemporaryDirectory(prefix="footprint-")
    out = Path(tmp.name)
    files = []
    if run_dir is not None and (run_dir / "run.json").is_file():
        files.append(run_dir / "run.json")
    write_text(out / "assessment.json", json.dumps(a.to_dict(), indent=2, default=str))
    files.append(out / "assessment.json")
    if report:
        from footprint.reports.report import write_report

        files.append(write_report([a], str(out / "footprint-report.html"), quiet=True))
    return files, tmp
