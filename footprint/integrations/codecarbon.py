"""Export a run in codecarbon's `emissions.csv` shape, so dashboards built on codecarbon keep working.

The columns are those of the installed codecarbon's ``EmissionsData`` (read from the package, not
copied). Energies are in kWh as codecarbon writes them; ``emissions`` is the use phase in kg CO2 eq
(IT energy x PUE x the grid's carbon intensity, the assessment's use stage), which is what codecarbon
reports: the embodied impacts and the other 15 categories are in footprint's own report, not here.
A second export to the same file appends a row under the same header, as codecarbon does.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from footprint import __version__
from footprint.errors import FootprintError
from footprint.integrations.metrics import resolve


def columns() -> list[str]:
    from codecarbon.output_methods.emissions_data import EmissionsData

    return [f.name for f in dataclasses.fields(EmissionsData)]


def emissions_row(target: Any, samples: int = 0) -> dict[str, Any]:
    """One emissions.csv row for a run directory, run record, stopped tracker or Assessment."""
    a, run_dir = resolve(target, samples)
    w = a.workload
    record: dict[str, Any] = {}
    if run_dir is not None and (run_dir / "run.json").is_file():
        from footprint.tracking.runrecord import read_record

        record = read_record(run_dir / "run.json")
    e = record.get("energy") or {}
    kwh = {k: (e[f"{k}_j"] / 3.6e6 if e.get(f"{k}_j") is not None else None) for k in ("cpu", "gpu", "ram")}
    duration = float(record.get("duration_s") or w.gpu_hours * 3600 / max(w.count, 1))
    use = a.impacts["climate_change"].by_stage.get("use")
    power = {k: (v * 3.6e6 / duration if v is not None and duration > 0 else None) for k, v in kwh.items()}
    gpus = [d for d in record.get("devices", []) if d.get("component") == "gpu"]
    row = {
        "timestamp": record.get("end_utc") or datetime.now(UTC).isoformat(timespec="seconds"),
        "project_name": w.name,
        "run_id": record.get("name") or w.name,
        "experiment_id": "footprint",
        "duration": duration,
        "emissions": use,
        "emissions_rate": use / duration if use is not None and duration > 0 else None,
        "cpu_power": power["cpu"],
        "gpu_power": power["gpu"],
        "ram_power": power["ram"],
        "cpu_energy": kwh["cpu"],
        "gpu_energy": kwh["gpu"],
        "ram_energy": kwh["ram"],
        "energy_consumed": w.it_energy_kwh,
        "water_consumed": a.water_l.get("total"),
        "country_name": a.zone.name,
        "country_iso_code": w.grid,
        "os": platform.platform(),
        "python_version": platform.python_version(),
        "codecarbon_version": f"footprint {__version__}",
        "gpu_count": w.count,
        "gpu_model": f"{w.count} x {w.gpu.name}",
        "tracking_mode": "machine",
        "on_cloud": "N",
        "pue": w.pue,
        "wue": w.wue_l_per_kwh,
    }
    if gpus and len({d.get("name") for d in gpus}) > 1:
        row["gpu_model"] = ", ".join(f"1 x {d.get('name')}" for d in gpus)
    return row


def write_emissions_csv(target: Any, path: str | Path, samples: int = 0) -> Path:
    """Append ``target``'s row to ``path`` (header written when the file is new); returns the path. The file is
    rewritten whole through `footprint.outputs` (never half a row on a full disk); text cells are neutralised
    against spreadsheet formulas."""
    from footprint.outputs import check_file_target, locked

    path = Path(path)
    cols = columns()
    real = check_file_target(path)
    row = emissions_row(target, samples)
    with locked(path):  # concurrent exports each add their row: the read and the rename happen under one lock
        _append_row(path, real, cols, row)
    return path


def _append_row(path: Path, real: Path, cols: list[str], row: dict[str, Any]) -> None:
    from footprint.escaping import csv_cell
    from footprint.outputs import write_text

    old = ""
    if real.is_file() and real.stat().st_size:
        from footprint.inputs import read_bytes

        old = read_bytes(real, "emissions CSV").decode("utf-8", errors="replace")
        header = next(csv.reader(io.StringIO(old)), [])
        if header != cols:
            raise FootprintError(
                f"has other columns than codecarbon {_cc_version()}'s emissions.csv; write to a new file", str(path)
            )
        if not old.endswith("\n"):
            old += "\r\n"
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    if not old:
        wr.writeheader()
    wr.writerow({c: ("" if row.get(c) is None else csv_cell(row[c])) for c in cols})
    write_text(path, old + buf.getvalue())


def _cc_version() -> str:
    mod = sys.modules.get("codecarbon")
    return getattr(mod, "__version__", "")
