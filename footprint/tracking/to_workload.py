"""A run record as a Workload: the measured energy and duration, the site, the notes on how each number was obtained.

Moved here from `footprint.lca.workload` (verbatim) so that the LCA core reads no run records: the record is
tracking's format, and the core only sees the scenario mapping the record amounts to (`run_scenario`) and the
Workload built from it. A run with several GPU models becomes one Workload per model (`Workload.parts`).

Producer layer: imports the core (`footprint.lca`) and this package's record and story.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from footprint.errors import ScenarioError
from footprint.lca.assessment import pct_sig
from footprint.lca.workload import Workload, apply_overrides, gpu_groups, run_scenario, workload_from_dict
from footprint.tracking.runrecord import against_journal, clean_record, read_record
from footprint.tracking.story import training_story

__all__ = ["energy_notes", "workload_from_run"]


def energy_notes(devices: list[dict[str, Any]]) -> list[str]:
    """How each device's energy was obtained, one note per kind and never two that contradict: measured (a real
    meter), simulated (a fake NVML reports `measured: false` with a meter's method) or estimated (a model)."""
    from collections import Counter

    def names(ds: list[dict[str, Any]]) -> str:
        counts = Counter(str(d.get("name")).removesuffix(" (estimated)") for d in ds)
        return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items())

    def methods(ds: list[dict[str, Any]]) -> str:
        return ", ".join(sorted({str(d.get("method")) for d in ds}))

    measured = [d for d in devices if d.get("measured") is not False]
    modelled = [d for d in devices if d.get("measured") is False]
    simulated = [d for d in modelled if d.get("method") not in ("estimated", "not measured", "codecarbon")]
    estimated = [d for d in modelled if d not in simulated]
    notes = []
    if measured:
        notes.append(f"energy measured ({methods(measured)}): {names(measured)}")
    if simulated:
        notes.append(f"energy simulated, not measured: {names(simulated)} (a fake NVML's {methods(simulated)})")
    if estimated:
        notes.append(f"energy estimated, not measured: {names(estimated)} ({methods(estimated)})")
    return notes


def workload_from_run(target: str | Path | dict[str, Any], sets: list[str] | None = None, flag: str = "--set") -> Workload:
    """A Workload from a run directory (or its run.json record); ``sets`` re-project it (grid, GPU, lifetime)."""
    if isinstance(target, dict):
        file = str(target.get("run_dir") or "run.json")
        record = clean_record(target, file)
    else:
        path = Path(target)
        path = path / "run.json" if path.is_dir() else path
        record, file = read_record(path), str(path)
        record.setdefault("notes", [])
        record["notes"] = [*record["notes"], *against_journal(record, path.parent)]  # the journal is the evidence
    data = apply_overrides(run_scenario(record), sets or [], file, flag)
    gpus = [d for d in record.get("devices", []) if d.get("component", "gpu") == "gpu"]
    if not data["hardware"].get("gpu"):
        total = (record.get("energy") or {}).get("total_j")
        host = f" and {total / 3.6e6:.3g} kWh on its host" if total else ""
        give = (
            "--set hardware.gpu=NAME --set hardware.count=N"
            if flag == "--set"
            else "set={'hardware.gpu': NAME, 'hardware.count': N}"
        )
        raise ScenarioError(
            f"the run recorded no GPU (a CPU-only machine?){host}; to assess it, give the GPUs it stands for with {give} "
            "(`footprint gpus` lists the names)",
            file,
            "devices",
        )
    if not data["training"].get("energy"):
        raise ScenarioError("the run has no energy reading (energy.total_j); nothing measured to assess", file, "energy")
    w = workload_from_dict(data, file)
    notes = energy_notes(record.get("devices", []))
    groups = gpu_groups(gpus)
    unnamed = len(gpus) - sum(n for _, n in groups)
    if unnamed:
        notes.append(
            f"{unnamed} GPU device(s) without a usable model name left out of the GPU count and embodied impacts; "
            "their measured energy stays in the use phase"
        )
    parts: tuple[Workload, ...] = ()
    if len(groups) > 1 and not any(s.split("=", 1)[0].strip() in ("hardware.gpu", "hardware.count") for s in sets or []):
        parts = _model_parts(record, gpus, groups, sets or [], file)
        notes.append(
            "mixed GPU models, assessed per model (each its own embodied impacts and measured energy), then summed: "
            + ", ".join(f"{p.count} x {p.gpu.name} ({p.it_energy_kwh:.4g} kWh measured)" for p in parts)
        )
    notes += [str(n) for n in record.get("notes", [])]
    story = training_story(record) or {}
    if story.get("short_windows"):
        notes.append(story["short_windows"])  # one warning, however many short windows
    if 0 < float(record.get("duration_s") or 0) < 10:
        notes.append(
            f"short measurement: {float(record['duration_s']):.1f} s; NVML energy over short windows is "
            "coarse (the sensor averages ~25 ms of every 100 ms on A100/H100)"
        )
    mfu = record.get("mfu") or {}
    extra: dict[str, Any] = {}
    if mfu.get("run_mfu"):
        extra = {
            "mfu": mfu["run_mfu"],
            "mfu_method": f"measured run MFU ({mfu.get('method')}); steady state {pct_sig(mfu.get('steady_state_mfu'))}; "
            f"dtype {mfu.get('dtype', w.dtype)}: {mfu.get('dtype_source') or 'given'}",
            "flops": record.get("flops"),
            "dtype": mfu.get("dtype", w.dtype),
        }
    return w.with_(
        energy_method="measured energy (run record)",
        gpu_hours_method="measured duration x GPUs",
        notes=tuple(notes) + w.notes,
        training=story,
        parts=parts,
        **extra,
    )


def _device_joules(d: dict[str, Any]) -> float:
    v = d.get("energy_j")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 else 0.0


def _model_parts(
    record: dict[str, Any], gpus: list[dict[str, Any]], groups: list[tuple[str, int]], sets: list[str], file: str
) -> tuple[Workload, ...]:
    """One Workload per GPU model: its own devices, GPU-hours and share of the run's measured energy (split by each
    device's measured energy; by device count where no device has one), with the run's site and ``sets``."""
    joules = {name: sum(_device_joules(d) for d in gpus if d.get("name") == name) for name, _ in groups}
    named, devices = sum(joules.values()), sum(n for _, n in groups)
    total = float(record["energy"]["total_j"])
    out = []
    for name, n in groups:
        data = run_scenario(record)
        data["hardware"] = {"gpu": name, "count": n}
        data["training"]["energy"] = f"{total * (joules[name] / named if named > 0 else n / devices)} J"
        part = workload_from_dict(apply_overrides(data, sets, file), file)
        out.append(
            part.with_(
                name=f"{part.name}: {n} x {part.gpu.name}",
                energy_method="measured energy (run record), split by each device's measured energy",
                gpu_hours_method="measured duration x GPUs",
            )
        )
    return tuple(out)
