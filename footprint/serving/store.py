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
    _check_meta(meta, str(f))
    tables = {name: _table(p / FILES[name], KEYS[name]) for name in TABLES}
    unlisted = sorted(set(map(str, tables["models_w"]["model"])) - set(map(str, tables["models"]["model"])))
    if unlisted:  # every model with energy is listed with its engine and GPU model: a truncated models.csv is damage
        where = str(p / FILES["models"])
        raise FootprintError(f"damaged: model {unlisted[0][:60]!r} of {FILES['models_w']} is not listed", where)
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
    window_s = float(meta["window_s"])
    _whole_windows(tables, window_s)
    a = Attribution(**tables, window_s=window_s, notes=list(meta.get("notes", [])))
    return meta, a


#: The columns each table must have (what the report joins and groups on); the others are read as numbers.
KEYS = {
    "models_w": ("window", "model"),
    "residual_w": ("window",),
    "unmetered": ("window", "model"),
    "reserve": ("model",),
    "gpus": ("host", "gpu", "gpu_model"),
    "health": ("counter",),
    "models": ("model", "engine"),
    "usage": ("host", "gpu", "model"),
}
TEXT_COLUMNS = {
    *("model", "engine", "flag", "gpu_model", "host", "gpu", "uuid", "method", "models", "counter", "where", "which"),
    "split",  # gpus.csv: the unit a shared GPU was split in
}


def _check_meta(meta: dict[str, Any], file: str) -> None:
    """serving.json's numbers and site as the report uses them, or one error naming the key (a record is not trusted:
    it may be damaged or edited by hand)."""
    from footprint.inputs import finite_number

    meta.setdefault("window_s", 300.0)
    finite_number(meta["window_s"], "window_s", file, 0, 366 * 86400, lo_open=True)
    for k in ("start_s", "end_s"):
        if k in meta:
            finite_number(meta[k], k, file, 0, 253402300799.0)
    if not isinstance(meta.get("site") or {}, dict):
        raise FootprintError(f"expected a mapping (grid, pue, lifetime), got {type(meta['site']).__name__}", file, "site")
    if not isinstance(meta.get("notes", []), list):
        raise FootprintError("expected a list of notes", file, "notes")
    if not isinstance(meta.get("partial_windows", {}), dict):
        raise FootprintError("expected a mapping of window: seconds", file, "partial_windows")


def _table(path: Path, keys: tuple[str, ...]) -> pd.DataFrame:
    """One table of the record: CSV with its key columns, every other column numbers that are not negative or
    infinite (NaN is "not available"); an empty file is an empty table; anything else one error naming the file."""
    text = read_text(path, "serving table")
    if not text.strip():
        return pd.DataFrame(columns=list(keys))
    try:
        df = pd.read_csv(io.StringIO(text))
    except (ValueError, pd.errors.ParserError) as exc:  # a quote never closed, a torn row
        raise FootprintError(f"not a CSV table ({str(exc).splitlines()[0][:120]})", str(path)) from None
    missing = [k for k in keys if k not in df]
    if missing:
        have = ", ".join(map(str, df.columns[:12]))
        raise FootprintError(f"damaged: no column {', '.join(missing)} (columns: {have})", str(path))
    for c in df.columns:
        if c in TEXT_COLUMNS:
            continue
        v = pd.to_numeric(df[c], errors="coerce")
        bad = (v.isna() & df[c].notna()) | (v < 0) | ~(v.abs() < math.inf) & v.notna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise FootprintError(f"row {row + 1}: {str(df[c].iloc[row])[:40]!r} is not a number >= 0", str(path), str(c))
        df[c] = v
    return df


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
