"""A job's run record (the tracker's run.json format) from what the fleet knows of it: one builder for the
import's records (`--records`, `--exact`) and for `footprint fleet job`, which rebuilds it from the ledger."""

from __future__ import annotations

from typing import Any


def hosts_of(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each host and the uuids of its GPUs, in the devices' order."""
    hosts: dict[str, list[str]] = {}
    for d in devices:
        if d.get("component") == "gpu" and d.get("host"):
            hosts.setdefault(d["host"], []).append(d["uuid"])
    return [{"host": h, "gpus": u} for h, u in hosts.items()]


def run_record(
    *,
    name: str,
    job_id: str,
    imported_from: str,
    start: float,
    end: float,
    duration_s: float | None,
    devices: list[dict[str, Any]],
    site: dict[str, Any] | None,
    slurm: dict[str, Any] | None,
    telemetry: dict[str, Any] | None,
    notes: list[str],
) -> dict[str, Any]:
    """The record of an imported job: its devices and energies, no steps, tokens or FLOPs (a scheduler knows none)."""
    from footprint.tracking import runrecord

    return {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": name,
        "job_id": job_id,
        "imported_from": imported_from,
        "start_utc": runrecord.utc_iso(start),
        "end_utc": runrecord.utc_iso(end),
        "duration_s": duration_s,
        "steps": 0,
        "tokens": 0,
        "flops": None,
        "mfu": None,
        "devices": devices,
        "energy": runrecord.energy_summary(devices),
        "ranks": [],
        "hosts": hosts_of(devices),
        "site": site,
        "slurm": slurm,
        "telemetry": telemetry,
        "windows": [],
        "notes": list(dict.fromkeys(notes)),
    }
