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
MAX_LINE_BYTES = 64 * 1024  # nvidia-smi's lines are a few hundred bytes even with every field queried
MAX_READINGS = 2_000_000  # rows one import holds (~0.3 GB): 8 GPUs at 1 Hz for ~3 days; split a longer log
MAX_GPU_INDEX = 100_000  # nvidia-smi numbers a host's GPUs from 0: an index above this is damage
# Readings further apart than this are not bridged: the integration is split there (the logger stopped; a line
# through the gap would invent its energy). Ten of the log's own median intervals, at least MIN_SPLIT_GAP_S (a 1 Hz
# log paused for a minute) and at most MAX_SPLIT_GAP_S (no power log samples less often than hourly).
MIN_SPLIT_GAP_S = 60.0
MAX_SPLIT_GAP_S = 3600.0
_ZONE = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})\s*$")

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


def _lines(path: PathLike, counts: dict[str, int]) -> Any:
    """The log's lines, streamed: a line over `MAX_LINE_BYTES` is skipped (counted), never held whole."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        while True:
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
                while line and not line.endswith("\n"):  # the rest of an over-long line, read in pieces
                    line = fh.readline(1 << 20)
                counts["too long"] += 1
                continue
            yield line


def _fields(line: str) -> list[str] | None:
    """One line's fields. nvidia-smi never quotes: a quote is parsed on its own line only, so an unterminated one
    cannot swallow the lines after it; None for a line the csv module cannot read."""
    if '"' not in line:
        return [c.strip() for c in line.split(",")]
    try:
        return [c.strip() for c in next(csv.reader([line.rstrip("\r\n")], skipinitialspace=True, strict=True))]
    except (csv.Error, StopIteration):
        return None


def _rows(path: PathLike) -> tuple[list[str], list[list[str]], dict[str, int]]:
    """The header and the rows of the header's width, streamed and capped at `MAX_READINGS`; what was left out,
    counted by why."""
    counts = {"too long": 0, "unreadable": 0, "wrong width": 0, "not a GPU index": 0}
    header: list[str] | None = None
    body: list[list[str]] = []
    for line in _lines(path, counts):
        row = _fields(line)
        if row is None:
            counts["unreadable"] += 1
            continue
        if not any(row):
            continue
        if header is None:
            header = row
        elif row == header:
            continue  # nvidia-smi repeats its header when restarted into the same file
        elif len(row) != len(header):
            counts["wrong width"] += 1
        else:
            if len(body) >= MAX_READINGS:
                raise ValueError(f"{path}: more than {MAX_READINGS:,} readings: split the log (`split -l`) and import each part")
            body.append(row)
    if header is None:
        raise ValueError(f"{path}: empty nvidia-smi log")
    return header, body, counts


def _timestamps(values: list[str], utc_offset: Any) -> tuple[Any, bool]:
    """(naive datetimes, zoned): nvidia-smi's own format, else ISO 8601; ISO 8601 with a zone (`Z`, `+02:00`) is
    converted to UTC (zoned=True, and a `utc_offset` is refused: the log states its own)."""
    import pandas as pd

    ts = pd.to_datetime(pd.Series(values, dtype=object), format=NVIDIA_SMI_TIME_FORMAT, errors="coerce")
    if not (ts.isna().all() and len(values)):
        return ts.astype("datetime64[ns]"), False
    zoned = [bool(_ZONE.search(v)) for v in values]
    if not any(zoned):
        return pd.to_datetime(pd.Series(values, dtype=object), errors="coerce", format="mixed").astype("datetime64[ns]"), False
    if not all(zoned):
        raise ValueError("the log mixes timestamps with a UTC offset and timestamps without one")
    if utc_offset is not None:
        raise ValueError("utc_offset: the timestamps state their own UTC offset (ISO 8601 'Z' or '+HH:MM'): leave it out")
    ts = pd.to_datetime(pd.Series(values, dtype=object), errors="coerce", format="ISO8601", utc=True)
    return ts.dt.tz_localize(None).astype("datetime64[ns]"), True


def read_nvidia_smi_csv(path: PathLike, utc_offset: float | str | timedelta | None = None) -> pd.DataFrame:
    """Parse an nvidia-smi --query-gpu CSV log into a tidy DataFrame, one row per (time, GPU).

    Columns: ``timestamp`` (naive local time as written, or tz-aware UTC when `utc_offset` is given:
    hours east of UTC, e.g. 1 for the SC'24 logs, or when the timestamps are ISO 8601 with a zone such as
    ``2024-01-01T10:00:00Z``), ``t_s`` (float seconds on the same clock; epoch seconds when the time is UTC),
    ``device`` (UUID if logged, else the index, else "0"),
    ``index``/``name``/``uuid`` when logged, ``power_draw_w``, ``power_draw_instant_w``,
    ``power_draw_average_w`` when logged, ``power_w`` (the preferred one: instant if present), and every
    other queried field with a tidy name and its unit as suffix (e.g. ``clocks_current_sm_mhz``).
    Unavailable values ("[N/A]", "[Unknown Error]") become NaN. Read as a stream, line by line, at most
    `MAX_READINGS` rows: repeated header lines are dropped; a torn line, a line of another width, one over
    `MAX_LINE_BYTES`, an index that is no GPU index or a time that is no time is left out and counted in
    ``df.attrs["dropped"]`` (by why; ``dropped_rows`` is their sum). ``df.attrs`` also holds ``power_column``
    and ``source``.
    """
    import numpy as np
    import pandas as pd

    header, body, counts = _rows(path)
    fields: list[tuple[str, str | None]] = []
    for col in header:
        m = _HEADER_UNIT.match(col)
        fields.append((m.group(1).strip(), m.group(2).strip()) if m else (col, None))
    if "timestamp" not in [f for f, _ in fields]:
        raise ValueError(f"{path}: no timestamp column in header {header[:20]}")
    data: dict[str, Any] = {}
    for j, (fname, unit) in enumerate(fields):
        values = [r[j] for r in body]
        if fname in _STRING_FIELDS:
            data[_tidy_name(fname, None)] = values
        else:
            data[_tidy_name(fname, unit)] = np.array([_parse_value(v) for v in values], dtype=float)
    df = pd.DataFrame(data)
    keep = np.ones(len(df), dtype=bool)
    if "index" in df:  # a GPU index is a small whole number; 1e30 or -1 is damage, not a device
        idx = df["index"].to_numpy(dtype=float)
        bad = np.isfinite(idx) & ~((idx >= 0) & (idx <= MAX_GPU_INDEX) & (idx == np.floor(idx)))
        counts["not a GPU index"] += int(bad.sum())
        keep &= ~bad
    ts, zoned = _timestamps(df["timestamp"].astype(str).tolist(), utc_offset)
    counts["no readable time"] = int((keep & ts.isna().to_numpy()).sum())
    keep &= ts.notna().to_numpy()
    df, ts = df.loc[keep].copy(), ts[keep]
    t_s = (ts - pd.Timestamp("1970-01-01")) / pd.Timedelta(seconds=1)
    if utc_offset is not None:
        off = _utc_offset(utc_offset)
        t_s = t_s - off.total_seconds()
        ts = ts - pd.Timedelta(off)
    df["timestamp"] = ts.dt.tz_localize("UTC") if utc_offset is not None or zoned else ts.to_numpy()
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
    df.attrs["dropped"] = {k: v for k, v in counts.items() if v}
    df.attrs["dropped_rows"] = sum(counts.values())
    df.attrs["utc"] = utc_offset is not None or zoned
    return df


def split_gap_s(t: Any) -> float:
    """The longest interval between two readings that is bridged (see `MIN_SPLIT_GAP_S`): ten of the log's median
    intervals, within [MIN_SPLIT_GAP_S, MAX_SPLIT_GAP_S]."""
    import numpy as np

    d = np.diff(np.asarray(t, dtype=float))
    med = float(np.median(d)) if len(d) else 0.0
    return min(MAX_SPLIT_GAP_S, max(MIN_SPLIT_GAP_S, 10.0 * med))


def interval_energy(t: Any, p: Any, split_s: float) -> tuple[Any, Any]:
    """(trapezoid energy of each interval between readings, bridged): an interval longer than `split_s` is a gap in
    the log, not bridged: its energy is 0 here (unknown, left out), and it is False in `bridged`."""
    import numpy as np

    t, p = np.asarray(t, dtype=float), np.asarray(p, dtype=float)
    dt = np.diff(t)
    bridged = dt <= split_s
    return np.where(bridged, 0.5 * (p[1:] + p[:-1]) * dt, 0.0), bridged


def _trapezoid_window(t: Any, p: Any, start: float, end: float, split_s: float = math.inf) -> tuple[float, float, int, float]:
    """Trapezoid integral of p(t) over [start, end], interpolating linearly at the edges, without the gaps longer than
    `split_s`: (energy, seconds covered by readings, gaps left out, seconds left out)."""
    import numpy as np

    inside = (t > start) & (t < end)
    tt = np.concatenate([[start], t[inside], [end]])
    pp = np.concatenate([[np.interp(start, t, p)], p[inside], [np.interp(end, t, p)]])
    dt = np.diff(tt)
    k = np.clip(np.searchsorted(t, tt[:-1], side="right") - 1, 0, len(t) - 2)  # the log's interval each piece is in
    bridged = (t[k + 1] - t[k]) <= split_s
    gaps = int(np.count_nonzero(np.diff(t[(t >= start) & (t <= end)]) > split_s)) if len(t) > 1 else 0
    if not bridged.all() and gaps == 0:
        gaps = 1  # the window lies inside one gap
    energy = float(np.sum(0.5 * (pp[1:] + pp[:-1]) * dt, where=bridged))
    return energy, float(dt[bridged].sum()), gaps, float(dt[~bridged].sum())


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


def _no_energy(samples: int, method: str, notes: list[str]) -> dict[str, Any]:
    """A device whose log gives no energy (too few readings, no overlap, no two close readings): not available, with why."""
    return {
        "energy_j": math.nan,
        "duration_s": 0.0,
        "mean_power_w": math.nan,
        "samples": samples,
        "method": method,
        "reliable": False,
        "stuck_s": 0.0,
        "notes": notes,
    }


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
            out[device] = _no_energy(int(len(t)), method, [*notes, "fewer than two readings: no energy"])
            continue
        a = float(t[0]) if t_start is None else t_start
        b = float(t[-1]) if t_end is None else t_end
        if a < t[0] or b > t[-1]:
            notes.append("window extends beyond the log; clipped to the logged span")
            a, b = max(a, float(t[0])), min(b, float(t[-1]))
        if b <= a:
            out[device] = _no_energy(0, method, [*notes, "window does not overlap the log"])
            continue
        split_s = split_gap_s(t)
        energy, duration, gaps, left_out = _trapezoid_window(t, p, a, b, split_s)
        if gaps:
            notes.append(
                f"{gaps} gap(s) longer than {split_s:g} s between readings not bridged: {left_out:.0f} s without "
                f"readings left out (the energy covers the {duration:.0f} s with readings)"
            )
        if duration <= 0:
            out[device] = _no_energy(
                int(len(t)), method, [*notes, f"no two readings within {split_s:g} s of each other: no energy"]
            )
            continue
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
            if max_gap_s < gap <= split_s:
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
MAX_CODECARBON_BYTES = 64 * 2**20  # ~200,000 rows: codecarbon appends one per flush (every 15 s by default)


def read_codecarbon_csv(path: PathLike) -> pd.DataFrame:
    """codecarbon's emissions.csv with energies in joules (its kWh columns converted, then dropped).

    ``energy_j``, ``cpu_energy_j``, ``gpu_energy_j``, ``ram_energy_j``, ``duration_s``, ``emissions_kg``,
    ``*_power_w``; other columns (timestamp, run_id, gpu_model, tracking_mode, ...) kept as they are.
    """
    import pandas as pd

    if os.path.getsize(path) > MAX_CODECARBON_BYTES:  # one row per flush: a file this large is not an emissions.csv
        raise ValueError(f"larger than {MAX_CODECARBON_BYTES:,} bytes")
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
