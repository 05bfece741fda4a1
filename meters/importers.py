"""Readers for power logs made by other tools, and energy integration with honest caveats.

- `read_nvidia_smi_csv`: ``nvidia-smi --query-gpu=timestamp,...,power.draw[,power.draw.instant] --format=csv``
  (with or without ``nounits``; "46.19 W"-style values; "[N/A]"; local-time timestamps).
- `integrate_energy`: trapezoid energy per device over an optional window, flagging a stuck sensor
  (the same value for a long stretch) and short windows (< ~1 s, unreliable: on A100/H100 the sensor
  averages ~25 ms of every 100 ms, MEASUREMENT.md section 1.2).
- `read_codecarbon_csv`: codecarbon's emissions.csv with kWh converted to J.
- `read_pmd_log`: the ElmorLabs PMD external power meter stream used in the SC'24 study's recordings.

pandas/numpy are imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

PathLike = str | os.PathLike[str]

_MISSING = {
    "",
    "[n/a]",
    "n/a",
    "[not supported]",
    "[unknown error]",
    "[gpu is lost]",
    "nan",
    "[insufficient permissions]",
    "[unknown]",
    "unknown error",
}
_STRING_FIELDS = {
    "timestamp",
    "name",
    "uuid",
    "pstate",
    "pci.bus_id",
    "driver_version",
    "serial",
    "vbios_version",
    "compute_mode",
    "gpu_name",
    "gpu_uuid",
    "gpu_bus_id",
    "persistence_mode",
    "mig.mode.current",
    "display_mode",
}
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$")
_HEADER_UNIT = re.compile(r"^(.*?)\s*\[([^\]]*)\]\s*$")
NVIDIA_SMI_TIME_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
# A device's power reading above this is not a reading (the largest accelerator boards draw ~1-2 kW): such rows
# are skipped with a note, like negative or missing ones, so an imported energy is never negative or absurd.
MAX_DEVICE_POWER_W = 10_000.0
MAX_UTC_OFFSET_H = 14  # UTC-12 to UTC+14 are the offsets in use

# Preferred power column when integrating: the instantaneous reading first (power.draw is a 1 s
# average on Ampere (except GA100) and newer drivers/boards).
POWER_COLUMNS = ("power_draw_instant_w", "power_draw_w", "power_draw_average_w")
_METHOD_OF = {"power_draw_instant_w": "instant_power", "power_draw_w": "power_draw", "power_draw_average_w": "average_power"}


def _tidy_name(query_field: str, unit: str | None) -> str:
    base = re.sub(r"[^0-9a-z]+", "_", query_field.lower()).strip("_")
    if unit:
        suffix = {"%": "pct", "w": "w", "mhz": "mhz", "mib": "mib", "c": "c"}.get(
            unit.lower(), re.sub(r"[^0-9a-z]+", "", unit.lower())
        )
        if suffix and not base.endswith("_" + suffix):
            base = f"{base}_{suffix}"
    return base


def _parse_value(text: str) -> float:
    t = text.strip()
    if t.lower() in _MISSING or t.startswith("["):
        return math.nan
    m = _NUMBER.match(t)
    return float(m.group(1)) if m else math.nan


def _utc_offset(value: float | str | timedelta) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        if not abs(float(value)) <= MAX_UTC_OFFSET_H:  # also refuses nan
            raise ValueError(f"utc_offset {value!r}: hours from -{MAX_UTC_OFFSET_H} to +{MAX_UTC_OFFSET_H}")
        return timedelta(hours=float(value))
    m = re.fullmatch(r"\s*(?:UTC)?\s*([+-])(\d{1,2})(?::?(\d{2}))?\s*", str(value))
    if not m:
        raise ValueError(f"utc_offset {value!r}: expected hours (1, -5.5), a timedelta or '+01:00'")
    sign = 1 if m.group(1) == "+" else -1
    hours, minutes = int(m.group(2)), int(m.group(3) or 0)
    if hours > MAX_UTC_OFFSET_H or minutes >= 60:
        raise ValueError(f"utc_offset {value!r}: hours from -{MAX_UTC_OFFSET_H} to +{MAX_UTC_OFFSET_H}, minutes below 60")
    return sign * timedelta(hours=hours, minutes=minutes)


def read_nvidia_smi_csv(path: PathLike, utc_offset: float | str | timedelta | None = None) -> pd.DataFrame:
    """Parse an nvidia-smi --query-gpu CSV log into a tidy DataFrame, one row per (time, GPU).

    Columns: ``timestamp`` (naive local time as written, or tz-aware UTC when `utc_offset` is given:
    hours east of UTC, e.g. 1 for the SC'24 logs), ``t_s`` (float seconds on the same clock; epoch
    seconds when `utc_offset` is given), ``device`` (UUID if logged, else the index, else "0"),
    ``index``/``name``/``uuid`` when logged, ``power_draw_w``, ``power_draw_instant_w``,
    ``power_draw_average_w`` when logged, ``power_w`` (the preferred one: instant if present), and every
    other queried field with a tidy name and its unit as suffix (e.g. ``clocks_current_sm_mhz``).
    Unavailable values ("[N/A]", "[Unknown Error]") become NaN; repeated header lines and a torn last
    line are dropped. ``df.attrs`` holds ``power_column`` and ``source``.
    """
    import numpy as np
    import pandas as pd

    text = Path(path).read_text(errors="replace")
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    rows = [r for r in reader if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{path}: empty nvidia-smi log")
    header = [c.strip() for c in rows[0]]
    fields: list[tuple[str, str | None]] = []
    for col in header:
        m = _HEADER_UNIT.match(col)
        fields.append((m.group(1).strip(), m.group(2).strip()) if m else (col, None))
    if "timestamp" not in [f for f, _ in fields]:
        raise ValueError(f"{path}: no timestamp column in header {header}")
    body = [r for r in rows[1:] if len(r) == len(header) and [c.strip() for c in r] != header]
    dropped = len(rows) - 1 - len(body)

    data: dict[str, Any] = {}
    for j, (fname, unit) in enumerate(fields):
        values = [r[j].strip() for r in body]
        if fname in _STRING_FIELDS:
            data[_tidy_name(fname, None)] = values
        else:
            data[_tidy_name(fname, unit)] = np.array([_parse_value(v) for v in values], dtype=float)
    df = pd.DataFrame(data)
    ts = pd.to_datetime(df["timestamp"], format=NVIDIA_SMI_TIME_FORMAT, errors="coerce")
    if ts.isna().all() and len(df):
        ts = pd.to_datetime(df["timestamp"], errors="coerce", format="mixed")
    ts = ts.astype("datetime64[ns]")
    df = df.loc[ts.notna().to_numpy()].copy()
    ts = ts[ts.notna()]
    t_s = (ts - pd.Timestamp("1970-01-01")) / pd.Timedelta(seconds=1)
    if utc_offset is not None:
        off = _utc_offset(utc_offset)
        t_s = t_s - off.total_seconds()
        ts = (ts - pd.Timedelta(off)).dt.tz_localize("UTC")
    df["timestamp"] = ts.to_numpy() if utc_offset is None else ts
    df["t_s"] = t_s.to_numpy(dtype=float)
    if "index" in df:
        df["index"] = df["index"].astype("Int64")
    if "uuid" in df:
        df["device"] = df["uuid"].astype(str)
    elif "index" in df:
        df["device"] = df["index"].astype(str)
    else:
        df["device"] = "0"
    power_col = next((c for c in POWER_COLUMNS if c in df and df[c].notna().any()), None)
    df["power_w"] = df[power_col] if power_col else np.nan
    df = df.reset_index(drop=True)
    df.attrs["power_column"] = power_col
    df.attrs["source"] = str(path)
    df.attrs["dropped_rows"] = dropped
    return df


def _trapezoid_window(t: Any, p: Any, start: float, end: float) -> float:
    """Trapezoid integral of p(t) over [start, end], interpolating linearly at the edges."""
    import numpy as np

    inside = (t > start) & (t < end)
    tt = np.concatenate([[start], t[inside], [end]])
    pp = np.concatenate([[np.interp(start, t, p)], p[inside], [np.interp(end, t, p)]])
    return float(np.sum(0.5 * (pp[1:] + pp[:-1]) * np.diff(tt)))


def _longest_constant_run(t: Any, p: Any) -> tuple[float, int, int]:
    """(duration, first index, last index) of the longest stretch of identical consecutive values."""
    import numpy as np

    if len(p) < 2:
        return 0.0, 0, 0
    change = np.flatnonzero(np.diff(p) != 0)
    starts = np.concatenate([[0], change + 1])
    ends = np.concatenate([change, [len(p) - 1]])
    durations = t[ends] - t[starts]
    k = int(np.argmax(durations))
    return float(durations[k]), int(starts[k]), int(ends[k])


def _to_seconds(value: Any, df: pd.DataFrame) -> float | None:
    import pandas as pd

    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    ts = pd.Timestamp(value)
    col = df["timestamp"]
    if ts.tzinfo is not None and getattr(col.dt, "tz", None) is None:
        raise ValueError("window bound is tz-aware but the log's timestamps are naive: pass utc_offset")
    if ts.tzinfo is None and getattr(col.dt, "tz", None) is not None:
        ts = ts.tz_localize("UTC")
    epoch = pd.Timestamp("1970-01-01", tz=ts.tzinfo)
    return float((ts - epoch) / pd.Timedelta(seconds=1))


def power_series(df: pd.DataFrame, power_column: str | None = None) -> dict[str, tuple[Any, Any, int, int]]:
    """Per device of a tidy power log: (times in ``t_s`` seconds, power in W, rows without a value skipped, rows
    with an implausible power skipped), the readings that `integrate_energy` integrates: finite values between 0
    and `MAX_DEVICE_POWER_W` only, in time order, the last reading of a repeated timestamp."""
    import numpy as np

    col = power_column or df.attrs.get("power_column") or ("power_w" if "power_w" in df else None)
    if col is None or col not in df:
        raise ValueError("no power column to integrate")
    out: dict[str, tuple[Any, Any, int, int]] = {}
    devices = df["device"].astype(str).to_numpy() if "device" in df else np.full(len(df), "0")
    for device in dict.fromkeys(devices.tolist()):
        sub = df[devices == device]
        t = sub["t_s"].to_numpy(dtype=float)
        p = sub[col].to_numpy(dtype=float)
        ok = np.isfinite(t) & np.isfinite(p)
        implausible = ok & ((p < 0) | (p > MAX_DEVICE_POWER_W))
        keep_rows = ok & ~implausible
        t, p = t[keep_rows], p[keep_rows]
        order = np.argsort(t, kind="stable")
        t, p = t[order], p[order]
        if len(t):  # duplicate timestamps: keep the last reading
            keep = np.concatenate([t[1:] != t[:-1], [True]])
            t, p = t[keep], p[keep]
        out[device] = (t, p, int((~ok).sum()), int(implausible.sum()))
    return out


def integrate_energy(
    df: pd.DataFrame,
    *,
    start: Any = None,
    end: Any = None,
    power_column: str | None = None,
    stuck_after_s: float = 60.0,
    short_window_s: float = 1.0,
    max_gap_s: float = 5.0,
) -> dict[str, dict[str, Any]]:
    """Energy per device from a tidy power log (as returned by `read_nvidia_smi_csv` or `ReplayMeter`).

    `start`/`end`: window bounds in the log's ``t_s`` seconds, or timestamps. Returns, per device:
    ``energy_j``, ``duration_s``, ``mean_power_w``, ``samples``, ``method`` ("instant_power" when
    power.draw.instant was logged, "power_draw" or "average_power" otherwise), ``reliable`` (False for a
    stuck sensor or a short window), ``stuck_s`` (longest constant stretch) and ``notes``.
    """
    import numpy as np

    col = (
        power_column
        or df.attrs.get("power_column")
        or ("power_w" if "power_w" in df else next((c for c in POWER_COLUMNS if c in df), None))
    )
    if col is None or col not in df:
        raise ValueError("no power column to integrate")
    method = _METHOD_OF.get(col, df.attrs.get("method", "power"))
    if col == "power_w" and df.attrs.get("power_column"):
        method = _METHOD_OF.get(df.attrs["power_column"], method)
    t_start = _to_seconds(start, df)
    t_end = _to_seconds(end, df)
    out: dict[str, dict[str, Any]] = {}
    for device, (t, p, skipped, implausible) in power_series(df, col).items():
        notes: list[str] = []
        if skipped:
            notes.append(f"{skipped} rows without a power value skipped")
        if implausible:
            notes.append(
                f"{implausible} rows with a power reading below 0 or above {MAX_DEVICE_POWER_W:g} W skipped "
                "(not a reading a device can give)"
            )
        if len(t) < 2:
            out[device] = {
                "energy_j": math.nan,
                "duration_s": 0.0,
                "mean_power_w": math.nan,
                "samples": int(len(t)),
                "method": method,
                "reliable": False,
                "stuck_s": 0.0,
                "notes": notes + ["fewer than two readings: no energy"],
            }
            continue
        a = float(t[0]) if t_start is None else t_start
        b = float(t[-1]) if t_end is None else t_end
        if a < t[0] or b > t[-1]:
            notes.append("window extends beyond the log; clipped to the logged span")
            a, b = max(a, float(t[0])), min(b, float(t[-1]))
        if b <= a:
            out[device] = {
                "energy_j": math.nan,
                "duration_s": 0.0,
                "mean_power_w": math.nan,
                "samples": 0,
                "method": method,
                "reliable": False,
                "stuck_s": 0.0,
                "notes": notes + ["window does not overlap the log"],
            }
            continue
        energy = _trapezoid_window(t, p, a, b)
        duration = b - a
        in_win = (t >= a) & (t <= b)
        tw, pw = t[in_win], p[in_win]
        reliable = True
        stuck_s, i0, i1 = _longest_constant_run(tw, pw)
        if stuck_s >= stuck_after_s and (i1 - i0 + 1) >= 10:
            reliable = False
            notes.append(
                f"sensor looks stuck: constant {pw[i0]:g} W for {stuck_s:.0f} s "
                f"({i1 - i0 + 1} readings); energy over that stretch is not trustworthy"
            )
        if duration < short_window_s:
            reliable = False
            notes.append(
                f"window of {duration:.3f} s is shorter than ~{short_window_s:g} s: on A100/H100 the "
                "sensor averages ~25 ms of every 100 ms, so this energy is unreliable"
            )
        if len(tw) > 1:
            gap = float(np.max(np.diff(tw)))
            if gap > max_gap_s:
                notes.append(f"largest gap between readings {gap:.1f} s: power interpolated across it")
        if method == "power_draw":
            notes.append(
                "power.draw integrated: a 1 s average on Ampere (except GA100) and newer boards, "
                "which smears the window edges; log power.draw.instant where available"
            )
        elif method == "average_power":
            notes.append("power.draw.average integrated: a 1 s average that smears the window edges")
        out[device] = {
            "energy_j": energy,
            "duration_s": duration,
            "mean_power_w": energy / duration,
            "samples": int(len(tw)),
            "method": method,
            "reliable": reliable,
            "stuck_s": stuck_s,
            "notes": notes,
        }
    return out


_CODECARBON_KWH = {
    "energy_consumed": "energy_j",
    "cpu_energy": "cpu_energy_j",
    "gpu_energy": "gpu_energy_j",
    "ram_energy": "ram_energy_j",
}
_CODECARBON_RENAME = {
    "duration": "duration_s",
    "emissions": "emissions_kg",
    "emissions_rate": "emissions_rate_kg_s",
    "cpu_power": "cpu_power_w",
    "gpu_power": "gpu_power_w",
    "ram_power": "ram_power_w",
    "ram_total_size": "ram_total_size_gb",
    "water_consumed": "water_consumed_l",
}
KWH_TO_J = 3.6e6


def read_codecarbon_csv(path: PathLike) -> pd.DataFrame:
    """codecarbon's emissions.csv with energies in joules (its kWh columns converted, then dropped).

    ``energy_j``, ``cpu_energy_j``, ``gpu_energy_j``, ``ram_energy_j``, ``duration_s``, ``emissions_kg``,
    ``*_power_w``; other columns (timestamp, run_id, gpu_model, tracking_mode, ...) kept as they are.
    """
    import pandas as pd

    df = pd.read_csv(path)
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in ("duration", "energy_consumed") if c not in df]
    if missing:
        raise ValueError(f"{path}: not a codecarbon emissions.csv (missing {missing})")
    for src, dst in _CODECARBON_KWH.items():
        if src in df:
            df[dst] = pd.to_numeric(df[src], errors="coerce") * KWH_TO_J
            df = df.drop(columns=src)
    df = df.rename(columns={k: v for k, v in _CODECARBON_RENAME.items() if k in df})
    if "timestamp" in df:
        df["timestamp"] = pd.to_datetime(df["timestamp"], errors="coerce")
    df.attrs["source"] = str(path)
    return df


# ElmorLabs PMD: 18-byte little-endian records of 9 uint16 (tick, then V/I pairs for 4 rails).
PMD_TICKS_PER_MS = 2933.5  # as in the SC'24 artifact's parser (SOURCE.txt paraphrases it as 2934.5)
PMD_START_OFFSET_US = -50_000  # the artifact's parser shifts PMD_start_ts by -50 ms
_PMD_VOLT = (0.007568, 0.007568, 0.0075, 0.007568)  # PCIe1, PCIe2, EPS1, EPS2 V per count
_PMD_AMP = 0.0488  # A per count


def read_pmd_log(directory: PathLike, *, start_offset_us: int = PMD_START_OFFSET_US) -> pd.DataFrame:
    """External-meter power from an SC'24 recording folder (PMD_data.bin + PMD_start_ts.txt).

    Returns ``t_s`` (epoch seconds, UTC), ``power_w`` (sum of the four rails), ``cables_w`` and
    ``slot_w``, following `convert_pmd_data` in JimZeyuYang/GPU_Power_Benchmark: 12-bit values in bits
    4..15, sign bit 11 treated as 0, a 16-bit tick counter unwrapped at 65536.
    """
    import numpy as np
    import pandas as pd

    d = Path(directory)
    start_us = int((d / "PMD_start_ts.txt").read_text().split()[0]) + start_offset_us
    raw = np.fromfile(d / "PMD_data.bin", dtype="<u2")
    n = len(raw) // 9
    rec = raw[: n * 9].reshape(n, 9).astype(np.int64)
    steps = np.diff(rec[:, 0])
    steps[steps < 0] += 65536
    ticks = np.concatenate([[0], np.cumsum(steps)])
    vals = (rec[:, 1:] >> 4) & 0x0FFF
    vals[(vals & (1 << 11)) != 0] = 0
    rails = [vals[:, 2 * k] * _PMD_VOLT[k] * vals[:, 2 * k + 1] * _PMD_AMP for k in range(4)]
    slot = rails[2]  # EPS1 position: the artifact plots it as the PCIe x16 slot
    cables = rails[0] + rails[1] + rails[3]
    t_s = start_us / 1e6 + ticks / PMD_TICKS_PER_MS / 1000.0
    df = pd.DataFrame({"t_s": t_s, "power_w": cables + slot, "cables_w": cables, "slot_w": slot})
    df["device"] = "pmd"
    df.attrs["power_column"] = None
    df.attrs["method"] = "external_meter"
    df.attrs["source"] = str(d)
    return df
