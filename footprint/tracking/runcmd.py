"""`footprint run -- cmd` and `footprint import`: measured runs without touching the training code."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.tracking import runrecord


def _site(grid: str | None, pue: float | None = None) -> dict[str, Any] | None:
    site: dict[str, Any] = {}
    if grid:
        from footprint.lca.electricity import resolve_zone

        site["grid"] = resolve_zone(grid, key="--grid")
    if pue is not None:
        if pue < 1:
            raise FootprintError(f"--pue must be >= 1, got {pue}", key="--pue")
        site["pue"] = pue
    return site or None


def run_command(args: argparse.Namespace) -> int:
    """Run the command as a child process while the tracker measures every visible GPU and the host."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise FootprintError("no command given: footprint run [--name N] -- python train.py", key="cmd")
    if args.period <= 0:
        raise FootprintError(f"--period must be > 0, got {args.period}", key="--period")
    from footprint.tracking.tracker import Tracker

    tracker = Tracker(
        name=args.name, output_dir=args.output_dir, site=_site(args.grid, args.pue), period_s=args.period, handle_sigterm=False
    )
    tracker.start()
    try:
        proc = subprocess.Popen(cmd)
    except OSError as exc:
        tracker.stop()
        raise FootprintError(f"cannot start {cmd[0]!r}: {exc.strerror}", key="cmd") from None
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        run = tracker.stop()
    if run:
        e = run["energy"]
        print(
            f"footprint: {tracker.run_dir}/run.json: {run['duration_s']:.1f} s, GPU "
            f"{_kwh(e['gpu_j'])}, total {_kwh(e['total_j'])} (exit code {code})",
            file=sys.stderr,
        )
    return code


def _kwh(j: float | None) -> str:
    return "n/a" if j is None else f"{j / 3.6e6:.4g} kWh"


def import_log(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if args.import_command == "nvidia-smi":
        record = from_nvidia_smi(Path(args.file), args.utc_offset, _site(args.grid), args.gpu)
    else:
        record = from_codecarbon(Path(args.file), args.gpu, args.gpu_count)
    record["name"] = record.get("name") or out.name
    runrecord.write_json(out / "run.json", record)
    e = record["energy"]
    print(f"wrote {out}/run.json: {len(record['devices'])} devices, {record['duration_s']:.1f} s, GPU energy {_kwh(e['gpu_j'])}")
    return 0


def from_nvidia_smi(path: Path, utc_offset: str | None, site: dict[str, Any] | None, gpu: str | None = None) -> dict[str, Any]:
    from meters.importers import integrate_energy, read_nvidia_smi_csv

    if not path.is_file():
        raise FootprintError("no such file", str(path))
    try:
        df = read_nvidia_smi_csv(path, utc_offset=utc_offset)
        per_device = integrate_energy(df)
    except (ValueError, KeyError) as exc:
        raise FootprintError(f"not an nvidia-smi CSV log this importer understands ({exc})", str(path)) from None
    devices, notes = [], []
    if gpu:
        from footprint.lca.database import db

        gpu = db().find_gpu(gpu, str(path), "--gpu").name
    names = df.groupby("device")["name"].first().to_dict() if "name" in df else {}
    uuids = df.groupby("device")["uuid"].first().to_dict() if "uuid" in df else {}
    for dev, r in per_device.items():
        devices.append(
            {
                "index": int(dev) if str(dev).isdigit() else None,
                "name": str(gpu or names.get(dev) or "unknown GPU"),
                "uuid": str(uuids.get(dev) or f"nvidia-smi:{dev}"),
                "component": "gpu",
                "method": f"nvidia-smi {r['method']}",
                "measured": True,
                "energy_j": r["energy_j"],
                "duration_s": r["duration_s"],
                "reliable": r.get("reliable", True),
                "notes": list(r.get("notes", [])),
            }
        )
        notes += [f"device {dev}: {n}" for n in r.get("notes", [])]
    duration = max((d["duration_s"] for d in devices), default=0.0)
    return {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": None,
        "source_file": str(path),
        "imported_from": "nvidia-smi",
        "duration_s": duration,
        "steps": 0,
        "tokens": 0,
        "devices": devices,
        "energy": runrecord.energy_summary(devices),
        "ranks": [],
        "hosts": [],
        "site": site,
        "notes": ["imported from an nvidia-smi log: GPU board power only (no CPU/RAM)", *notes],
    }


def from_codecarbon(path: Path, gpu: str | None, count: int) -> dict[str, Any]:
    from meters.importers import read_codecarbon_csv

    if not path.is_file():
        raise FootprintError("no such file", str(path))
    try:
        df = read_codecarbon_csv(path)
    except (ValueError, KeyError) as exc:
        raise FootprintError(f"not a codecarbon emissions.csv ({exc})", str(path)) from None
    row = df.iloc[-1]
    devices: list[dict[str, Any]] = []
    recorded = str(row.get("gpu_model") or "").strip()
    if not gpu and recorded and recorded.lower() != "nan":
        gpu = recorded.split(",")[0].split(" x ")[-1].strip()
        count = int(row.get("gpu_count") or count or 1)
    if gpu:
        from footprint.lca.database import db

        card = db().find_gpu(gpu, str(path), "--gpu")
        per = (float(row.get("gpu_energy_j", 0.0) or 0.0)) / max(count, 1)
        devices += [
            {
                "index": i,
                "name": card.name,
                "uuid": f"codecarbon:gpu{i}",
                "component": "gpu",
                "method": "codecarbon",
                "measured": True,
                "energy_j": per,
            }
            for i in range(count)
        ]
    for comp, col in (("cpu", "cpu_energy_j"), ("ram", "ram_energy_j")):
        if col in row and row[col] == row[col]:
            devices.append(
                {
                    "name": f"host {comp}",
                    "uuid": f"codecarbon:{comp}",
                    "component": comp,
                    "method": "codecarbon",
                    "measured": False,
                    "energy_j": float(row[col]),
                }
            )
    site = {"grid": str(row["country_iso_code"])} if "country_iso_code" in row and row["country_iso_code"] else None
    notes = ["imported from codecarbon: CPU/RAM are codecarbon's estimates unless it read RAPL"]
    if not gpu:
        notes.append("no GPU in this codecarbon log: give --gpu (and --gpu-count) to assess embodied impacts")
    return {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": str(row.get("project_name") or "") or None,
        "source_file": str(path),
        "imported_from": "codecarbon",
        "duration_s": float(row.get("duration_s", 0.0) or 0.0),
        "steps": 0,
        "tokens": 0,
        "devices": devices,
        "energy": runrecord.energy_summary(devices),
        "ranks": [],
        "hosts": [],
        "site": site,
        "notes": notes,
    }
