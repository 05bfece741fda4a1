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
from footprint.lca.hourly import hours_from_record
from footprint.lca.workload import NO_GPU, Workload, apply_overrides, cards, gpu_groups, run_scenario, workload_from_dict
from footprint.lca.workload_data import HOST_ONLY
from footprint.tracking.runrecord import against_journal, clean_record, read_record
from footprint.tracking.runview import ENERGY_KINDS, device_kwh, energy_kind
from footprint.tracking.story import training_story

__all__ = ["energy_method", "energy_notes", "workload_from_run"]


def energy_notes(devices: list[dict[str, Any]]) -> list[str]:
    """How each device's energy was obtained, one note per kind and never two that contradict: measured (a real
    meter), simulated (a fake NVML reports `measured: false` with a meter's method) or estimated (a model)."""
    from collections import Counter

    def names(ds: list[dict[str, Any]]) -> str:
        counts = Counter(str(d.get("name")).removesuffix(" (estimated)") for d in ds)
        return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items())

    def methods(ds: list[dict[str, Any]]) -> str:
        return ", ".join(sorted({str(d.get("method")) for d in ds}))

    measured, simulated, estimated = ([d for d in devices if energy_kind(d) == k] for k in ENERGY_KINDS)
    notes = []
    if measured:
        notes.append(f"energy measured ({methods(measured)}): {names(measured)}")
    if simulated:
        fakes = " and ".join(sorted({_fake_library(d) for d in simulated}))
        notes.append(f"energy simulated, not measured: {names(simulated)} ({fakes}'s {methods(simulated)})")
    if estimated:
        notes.append(f"energy estimated, not measured: {names(estimated)} ({methods(estimated)})")
    return notes


def energy_method(devices: list[dict[str, Any]], split: str = "") -> str:
    """The run's energy in one label that never calls an estimate measured: "measured energy", "estimated energy,
    not measured", "simulated energy (fake NVML), not measured", or "partly measured energy" with each kind's
    devices counted; ``split`` appends how a mixed run's energy was divided."""
    kinds = [energy_kind(d) for d in devices if _device_joules(d) > 0] or [energy_kind(d) for d in devices]
    counts = {k: kinds.count(k) for k in ENERGY_KINDS if k in kinds}
    if not counts:
        head = "energy of the run record (no device says how it was obtained)"
    elif list(counts) == ["measured"]:
        head = "measured energy (run record)"
    elif "measured" not in counts:
        head = " and ".join(counts) + " energy (run record), not measured"
    else:
        head = "partly measured energy (run record: " + ", ".join(f"{n} device(s) {k}" for k, n in counts.items()) + ")"
    return head + (f", {split}" if split else "")


def energy_devices(devices: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Each device's energy and how it was obtained, for the Assessment JSON (`energy_by_device`) and the reports."""
    return tuple(
        {
            "device": str(d.get("name") or d.get("uuid") or "device"),
            "component": str(d.get("component", "gpu")),
            "energy_kwh": device_kwh(d),
            "kind": energy_kind(d),
            "method": str(d.get("method") or "n/a"),
        }
        for d in devices
    )


def _fake_library(device: dict[str, Any]) -> str:
    """Which fake a simulated GPU came from: the AMD meter alone reports ``power_scope: socket`` (amdsmi's socket
    power), every NVML device ``board`` or ``module``."""
    return "a fake amdsmi" if device.get("power_scope") == "socket" else "a fake NVML"


def workload_from_run(target: str | Path | dict[str, Any], sets: list[str] | None = None, flag: str = "--set") -> Workload:
    """A Workload from a run directory (or its run.json record); ``sets`` re-project it (grid, GPU, lifetime)."""
    if isinstance(target, dict):
        file = str(target.get("run_dir") or "run.json")
        record = clean_record(target, file)
        run_dir = Path(target["run_dir"]) if target.get("run_dir") else None
    else:
        path = Path(target)
        path = path / "run.json" if path.is_dir() else path
        record, file, run_dir = read_record(path), str(path), path.parent
        record.setdefault("notes", [])
        record["notes"] = [*record["notes"], *against_journal(record, path.parent)]  # the journal is the evidence
    data = apply_overrides(run_scenario(record), sets or [], file, flag)
    hours = None
    if (data.get("site") or {}).get("carbon_intensity_hourly") is not None:
        _check_utc(record, file)
        hours = run_energy_by_hour(run_dir) or hours_from_record(record.get("energy_by_hour_utc"))
    devices = [d for d in record.get("devices", []) if isinstance(d, dict)]
    gpus = [d for d in devices if d.get("component", "gpu") == "gpu"]
    if not data["hardware"].get("gpu"):
        # no GPU recorded (a CPU-only machine): the host only, unless `sets` name the GPUs it stands for (a what-if)
        data["hardware"]["gpu"] = NO_GPU
        if not data["training"].get("duration"):
            raise ScenarioError("the run has no duration (duration_s): nothing to allocate its host by", file, "duration_s")
    if not data["training"].get("energy"):
        raise ScenarioError("the run has no energy reading (energy.total_j); nothing measured to assess", file, "energy")
    w = workload_from_dict(data, file, energy_by_hour=hours)
    notes = energy_notes(devices)
    groups = gpu_groups(gpus)
    notes += [note for name, n in groups if (note := cards(name, n)[1])]
    unnamed = len(gpus) - sum(n for _, n in groups)
    if unnamed:
        notes.append(
            f"{unnamed} GPU device(s) without a usable model name left out of the GPU count and embodied impacts; "
            "their measured energy stays in the use phase"
        )
    parts: tuple[Workload, ...] = ()
    if len(groups) > 1 and not any(s.split("=", 1)[0].strip() in ("hardware.gpu", "hardware.count") for s in sets or []):
        parts = _model_parts(record, gpus, groups, sets or [], file, hours)
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
            f"short measurement: {float(record['duration_s']):.1f} s; "
            + (
                "energy over short windows is coarse (sampled every 100 ms)"
                if w.host_only
                else "NVML energy over short windows is coarse (the sensor averages ~25 ms of every 100 ms on A100/H100)"
            )
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
        energy_method=energy_method(devices),
        energy_devices=energy_devices(devices),
        gpu_hours_method=HOST_ONLY if w.host_only else "measured duration x GPUs",
        notes=tuple(notes) + w.notes,
        training=story,
        parts=parts,
        **extra,
    )


def _check_utc(record: dict[str, Any], file: str) -> None:
    """An nvidia-smi log's times are local time without an offset: matched to UTC hours as they stand, every hour
    would be off by the site's offset (two at a CEST summer noon). Only a log imported with --utc-offset has hours."""
    if record.get("imported_from") == "nvidia-smi" and record.get("time_zone") != "UTC":
        raise ScenarioError(
            "the nvidia-smi log was imported without --utc-offset: its timestamps are local time of unknown offset, so "
            "its hours cannot be matched to an hourly intensity file (UTC); import it again with --utc-offset +HH:MM",
            file,
            "site.carbon_intensity_hourly",
        )


def run_energy_by_hour(run_dir: Path | None) -> dict[float, float] | None:
    """The run's energy per UTC hour (hour start -> J, every device of every rank) from its stored samples at 1 s
    resolution or finer, streamed batch by batch (bounded memory at any run length): each rank's times are its start
    (``start_unix``) plus the samples' seconds, every meter counting from 0 J at that start. None when the run kept
    no timed samples (then an hourly intensity cannot be matched, and says so)."""
    import numpy as np

    from footprint.lca.hourly import energy_by_hour
    from footprint.tracking.runrecord import _stores

    if run_dir is None or not run_dir.is_dir():
        return None
    out: dict[float, float] = {}
    for _, _, store in _stores(run_dir):
        start = store.header.get("start_unix")
        if not isinstance(start, (int, float)) or isinstance(start, bool) or not math.isfinite(start):
            continue
        last: dict[str, tuple[float, float]] = {}  # per device, the reading that joins one batch to the next
        for table in store.batches(resolution_s=1.0, columns=["uuid", "t_s", "energy_j"]):
            uuids = np.asarray(table["uuid"].to_pylist(), dtype=object)
            t_all = table["t_s"].to_numpy(zero_copy_only=False).astype(float)
            e_all = table["energy_j"].to_numpy(zero_copy_only=False).astype(float)
            for u in set(uuids.tolist()):
                sel = uuids == u
                t0, e0 = last.get(str(u), (0.0, 0.0))
                t, e = np.concatenate([[t0], t_all[sel]]), np.concatenate([[e0], e_all[sel]])
                for h, j in energy_by_hour(start + t, e).items():
                    out[h] = out.get(h, 0.0) + j
                ok = np.isfinite(t) & np.isfinite(e)
                if ok.any():
                    last[str(u)] = (float(t[ok][-1]), float(e[ok][-1]))
    return out or None


def _device_joules(d: dict[str, Any]) -> float:
    v = d.get("energy_j")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 else 0.0


def _model_parts(
    record: dict[str, Any],
    gpus: list[dict[str, Any]],
    groups: list[tuple[str, int]],
    sets: list[str],
    file: str,
    hours: dict[float, float] | None = None,
) -> tuple[Workload, ...]:
    """One Workload per GPU model: its own devices, GPU-hours and share of the run's measured energy (split by each
    device's measured energy; by device count where no device has one), with the run's site and ``sets``."""
    joules = {name: sum(_device_joules(d) for d in gpus if d.get("name") == name) for name, _ in groups}
    named, devices = sum(joules.values()), sum(n for _, n in groups)
    total = float(record["energy"]["total_j"])
    out = []
    for name, n in groups:
        data = run_scenario(record)
        data["hardware"] = {"gpu": name, "count": cards(name, n)[0]}
        data["training"]["energy"] = f"{total * (joules[name] / named if named > 0 else n / devices)} J"
        part = workload_from_dict(apply_overrides(data, sets, file), file, energy_by_hour=hours)
        out.append(
            part.with_(
                name=f"{part.name}: {part.count} x {part.gpu.name}",
                energy_method=energy_method([d for d in gpus if d.get("name") == name], "split by each device's measured energy"),
                gpu_hours_method="measured duration x GPUs",
            )
        )
    return tuple(out)
