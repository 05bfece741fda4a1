"""A serving record directory: what `footprint serving import` and `watch` write and `report` reads.

``serving.json`` (source, window, site, engines, notes, metered totals) and one CSV per table of the
attribution (``model_windows.csv``, ``residual_windows.csv``, ``unmetered.csv``, ``reserve.csv``,
``gpus.csv``, ``health.csv``, ``models.csv``): the per-window evidence every figure of the report is a
sum of. Written whole or not at all (`footprint.outputs.atomic_dir`).
"""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from footprint.errors import FootprintError
from footprint.inputs import load_json, read_text
from footprint.outputs import atomic_dir, write_text
from footprint.serving.assess import Site
from footprint.serving.attribution import Attribution
from footprint.serving.telemetry import Telemetry

FORMAT = "footprint-serving"
TABLES = ("models_w", "residual_w", "unmetered", "reserve", "gpus", "health", "models", "usage")
FILES = {
    "models_w": "model_windows.csv",
    "residual_w": "residual_windows.csv",
    "unmetered": "unmetered.csv",
    "reserve": "reserve.csv",
    "gpus": "gpus.csv",
    "health": "health.csv",
    "models": "models.csv",
    "usage": "usage.csv",
}


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(
    out: str | Path, tel: Telemetry, a: Attribution, site: Site, force: bool = False, extra: dict[str, Any] | None = None
) -> Path:
    meta = {
        "format": FORMAT,
        "version": 1,
        "source": tel.source,
        "start": iso(tel.first_start),
        "end": iso(tel.end),
        "start_s": tel.first_start,
        "end_s": tel.end,
        "window_s": tel.window_s,
        "partial_windows": {str(w): s for w, s in sorted(tel.partial.items())},
        "scrape_s": tel.scrape_s,
        "site": site.__dict__,
        "metered_gpu_j": a.metered_gpu_j,
        "metered_host_j": float(tel.hosts["energy_j"].sum()) if len(tel.hosts) else None,
        "gpus": int(len(a.gpus)),
        "engines": sorted(set(a.models["engine"].dropna())),
        "notes": a.notes,
        **(extra or {}),
    }
    with atomic_dir(out, replace=force) as tmp:
        write_text(tmp / "serving.json", json.dumps(meta, indent=1, default=_json) + "\n")
        for name in TABLES:
            write_text(tmp / FILES[name], getattr(a, name).to_csv(index=False))
    return Path(out)


def _json(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


def read(path: str | Path) -> tuple[dict[str, Any], Attribution]:
    """The record's metadata and attribution tables, or one error naming what is missing."""
    p = Path(path)
    f = p / "serving.json"
    if not p.is_dir() or not f.exists():
        raise FootprintError(
            "not a serving record directory (no serving.json; write one with `footprint serving import`)", str(p)
        )
    meta = load_json(read_text(f, "serving record"), str(f))
    if meta.get("format") != FORMAT:
        raise FootprintError(f"expected format {FORMAT!r}, got {meta.get('format')!r}", str(f), "format")
    tables = {}
    for name in TABLES:
        text = read_text(p / FILES[name], "serving table")
        tables[name] = pd.read_csv(io.StringIO(text)) if text.strip() else pd.DataFrame()
    for t, k in (
        ("gpus", "host"),
        ("gpus", "gpu"),
        ("gpus", "models"),
        ("gpus", "uuid"),
        ("gpus", "gpu_model"),
        ("usage", "gpu"),
        ("usage", "host"),
        ("health", "which"),
        ("health", "where"),
    ):
        if k in tables[t]:
            tables[t][k] = [x if isinstance(x, str) else "" if x != x else str(x) for x in tables[t][k]]
    window_s = float(meta.get("window_s", 300.0))
    _whole_windows(tables, window_s)
    a = Attribution(**tables, window_s=window_s, notes=list(meta.get("notes", [])))
    return meta, a


def _whole_windows(tables: dict[str, pd.DataFrame], window_s: float) -> None:
    """Records written before windows had their own length (``seconds``): every window was whole."""
    mw, g = tables["models_w"], tables["gpus"]
    if "window" in mw and "seconds" not in mw:
        mw["seconds"] = window_s
    if "windows" in g and "seconds" not in g:
        g["seconds"] = g["windows"] * window_s


def site_of(meta: dict[str, Any], grid: str | None, pue: float | None, lifetime: str | None, hourly: str | None = None) -> Site:
    s = meta.get("site") or {}
    return Site(
        grid or s.get("grid"),
        pue if pue is not None else float(s.get("pue", 1.2)),
        lifetime or s.get("lifetime", "3 years"),
        hourly or s.get("hourly"),
    )


def window_origin(meta: dict[str, Any]) -> float | None:
    """Where the record's window grid starts: its end less its whole number of windows (the first may be partial)."""
    try:
        start, end, w = (float(meta[k]) for k in ("start_s", "end_s", "window_s"))
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(start) and math.isfinite(end) and w > 0):
        return None
    return end - math.ceil((end - start) / w - 1e-9) * w
