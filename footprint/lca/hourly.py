"""Hourly carbon intensity: a site's hour-by-hour grid intensity, matched to the hours a job drew its energy.

A zone's annual mix is what an average kWh of the year emitted; a job that ran through a windless night or a
sunny noon drew different kWh. `read_intensity` reads ``site.carbon_intensity_hourly``: Electricity Maps'
hourly export as downloaded (``Datetime (UTC)`` and ``Carbon intensity gCO₂eq/kWh (Life cycle)``, the direct
column beside it left unused: life-cycle is what the annual factors are) or a plain ``datetime_utc,g_per_kwh``
file. `energy_by_hour` splits a cumulative energy series at hour boundaries; `match` pairs each hour's energy
with that hour's intensity, so that the use phase's climate change is the hour-by-hour sum
``sum(E_h x CI_h)``, carried as its energy-weighted intensity. Climate change only: the other 15 categories keep
the zone's annual mix (no hourly data exists for them), and the notes say so.

A file that does not cover every hour the job drew energy in, or has a gap, a repeated hour or a value that
is not a carbon intensity, is one clear error (exit 2): an hourly result built on a guessed hour is not hourly.

The file is user input without a licence of its own: the outputs record what it says of itself (Electricity Maps'
zone id and data source, the matched hours it flags as estimated) and its SHA-256, so that the result can be traced
to the exact download; its terms of use are the provider's.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from footprint.errors import FootprintError
from footprint.inputs import read_text

HOUR_S = 3600.0
KEY = "site.carbon_intensity_hourly"
MAX_BYTES = 20_000_000  # ten years of hourly rows with Electricity Maps' eleven columns is ~9 MB
MAX_G_PER_KWH = 2000.0  # footprint.bounds' site.carbon_intensity: lignite plants emit ~1,200 g/kWh
EM_TIME = "Datetime (UTC)"
EM_LIFE_CYCLE = "Carbon intensity gCO₂eq/kWh (Life cycle)"
EM_DIRECT = "Carbon intensity gCO₂eq/kWh (direct)"
EM_LCA_OLD = "Carbon Intensity gCO₂eq/kWh (LCA)"  # the same column in Electricity Maps' earlier exports
EM_ZONE, EM_SOURCE, EM_ESTIMATED = "Zone id", "Data source", "Data estimated"  # matched without regard to case
PLAIN = ("datetime_utc", "g_per_kwh")
FORMATS = ((EM_TIME, EM_LIFE_CYCLE), (EM_TIME, EM_LCA_OLD), PLAIN)  # (time column, g CO2 eq/kWh column)


@dataclass(frozen=True)
class HourlyIntensity:
    """An hourly intensity file, validated: hour starts (Unix s, UTC), contiguous, and g CO2 eq/kWh per hour."""

    file: str
    column: str
    hours: tuple[float, ...]
    g_per_kwh: tuple[float, ...]
    source: str = ""  # what the file says of itself: "Electricity Maps, zone FR (data source: ...)"
    sha256: str = ""
    estimated: tuple[bool, ...] = ()  # per hour, where the file flags estimated hours (Electricity Maps)

    @property
    def span(self) -> str:
        return f"{_iso(self.hours[0])} to {_iso(self.hours[-1] + HOUR_S)}"


@dataclass(frozen=True)
class HourlyMatch:
    """A job's energy per hour (kWh of IT energy) against that hour's intensity: the hour-by-hour climate sum."""

    file: str
    column: str
    hours: tuple[float, ...]
    kwh: tuple[float, ...]
    g_per_kwh: tuple[float, ...]
    source: str = ""
    sha256: str = ""
    estimated_hours: int | None = None  # of the matched hours, those the file flags as estimated; None: no flag

    @property
    def weighted_g_per_kwh(self) -> float:
        """sum(E_h x CI_h) / sum(E_h): the intensity that gives the hour-by-hour sum on the job's total energy."""
        e = np.asarray(self.kwh)
        return float(np.dot(e, self.g_per_kwh) / e.sum()) if e.sum() > 0 else float(np.mean(self.g_per_kwh))

    def to_dict(self) -> dict[str, object]:
        """For the JSON output and the dashboard: the hours (ISO UTC), their kWh and intensity, and the weighted mean."""
        return {
            "method": "hourly",
            "file": self.file,
            "column": self.column,
            "hours_utc": [_iso(h) for h in self.hours],
            "it_energy_kwh": list(self.kwh),
            "g_per_kwh": list(self.g_per_kwh),
            "energy_weighted_g_per_kwh": self.weighted_g_per_kwh,
            "source": self.source or None,
            "sha256": self.sha256 or None,
            "estimated_hours": self.estimated_hours,
            "licence": "the file's provider's terms (not stated in the file)",
        }

    def method(self) -> str:
        return (
            f"hourly: climate change of electricity matched hour by hour ({len(self.hours)} h, {_iso(self.hours[0])} to "
            f"{_iso(self.hours[-1] + HOUR_S)}) to {Path(self.file).name} ({self.column}{self._provenance()}): energy-weighted "
            f"{self.weighted_g_per_kwh:.4g} g CO2 eq/kWh; the other 15 categories use the zone's annual mix"
        )

    def _provenance(self) -> str:
        parts = [self.source] if self.source else []
        if self.estimated_hours:
            parts.append(f"{self.estimated_hours} of {len(self.hours)} matched hours estimated by the provider")
        return "".join(f"; {p}" for p in parts)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _parse_time(text: str, file: str, row: int) -> float:
    s = text.strip().replace(" ", "T", 1) if "T" not in text else text.strip()
    s = s[:-1] + "+00:00" if s.endswith("Z") else s
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise FootprintError(f"row {row}: expected a UTC date and hour (2025-03-03 08:00:00), got {text!r}", file, KEY) from None
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    t = dt.timestamp()
    if t % HOUR_S:
        raise FootprintError(f"row {row}: {text!r} is not on the hour (one row per hour, each at its start)", file, KEY)
    return t


def _columns(header: list[str], file: str) -> tuple[int, int, str]:
    names = [h.strip().lstrip("\ufeff") for h in header]
    folded = [n.casefold() for n in names]
    for time_col, value_col in FORMATS:
        if time_col.casefold() in folded and value_col.casefold() in folded:
            return (
                folded.index(time_col.casefold()),
                folded.index(value_col.casefold()),
                names[folded.index(value_col.casefold())],
            )
    raise FootprintError(
        f"expected Electricity Maps' hourly export ({EM_TIME!r} and {EM_LIFE_CYCLE!r}) or the columns "
        f"{','.join(PLAIN)}, got {', '.join(names[:6]) or 'no header'}",
        file,
        KEY,
    )


def read_intensity(path: str | Path, file: str | None = None) -> HourlyIntensity:
    """An hourly intensity CSV, validated whole: every row a UTC hour and a finite 0-2,000 g/kWh, no hour twice, no
    hour missing between the first and the last. ``file`` names the scenario the path came from, in errors."""
    name = str(path)
    text = read_text(path, "hourly carbon-intensity CSV", MAX_BYTES, KEY)
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise FootprintError("no hourly rows (a header and one row per hour expected)", name, KEY)
    ti, vi, column = _columns(rows[0], name)
    header = [h.strip().lstrip("\ufeff").casefold() for h in rows[0]]
    zi, si, ei = (header.index(c.casefold()) if c.casefold() in header else None for c in (EM_ZONE, EM_SOURCE, EM_ESTIMATED))
    hours, values, zones, sources, estimated = [], [], set(), set(), []
    for n, r in enumerate(rows[1:], start=2):
        if len(r) <= max(ti, vi):
            raise FootprintError(f"row {n}: {len(r)} fields, expected at least {max(ti, vi) + 1}", name, KEY)
        hours.append(_parse_time(r[ti], name, n))
        raw = r[vi].strip()
        try:
            v = float(raw)
        except ValueError:
            raise FootprintError(f"row {n}: expected g CO2 eq/kWh, got {raw!r} (an empty hour is a gap)", name, KEY) from None
        if not math.isfinite(v) or not 0 <= v <= MAX_G_PER_KWH:
            raise FootprintError(f"row {n}: {raw} g/kWh is not a grid carbon intensity (0 to {MAX_G_PER_KWH:g})", name, KEY)
        values.append(v)
        zones |= {r[zi].strip()} if zi is not None and zi < len(r) and r[zi].strip() else set()
        sources |= {r[si].strip()} if si is not None and si < len(r) and r[si].strip() else set()
        if ei is not None:
            estimated.append(ei < len(r) and r[ei].strip().casefold() == "true")
    order = np.argsort(hours, kind="stable")
    h, v = np.asarray(hours)[order], np.asarray(values)[order]
    step = np.diff(h)
    if (step == 0).any():
        raise FootprintError(f"hour {_iso(float(h[1:][step == 0][0]))} appears twice", name, KEY)
    if (step > HOUR_S).any():
        i = int(np.flatnonzero(step > HOUR_S)[0])
        missing = int(step[i] // HOUR_S) - 1
        raise FootprintError(f"gap: {missing} hour(s) missing after {_iso(float(h[i]))}", name, KEY)
    flags = tuple(np.asarray(estimated, bool)[order].tolist()) if ei is not None else ()
    return HourlyIntensity(
        name, column, tuple(h.tolist()), tuple(v.tolist()), _source(column, zones, sources), _sha256(text), flags
    )


def _source(column: str, zones: set[str], sources: set[str]) -> str:
    if column.casefold() == PLAIN[1]:
        return ""
    text = "Electricity Maps" + (f", zone {', '.join(sorted(zones))}" if zones else "")
    return text + (f" (data source: {', '.join(sorted(sources))})" if sources else "")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def energy_by_hour(t_unix: np.ndarray, energy_j: np.ndarray) -> dict[float, float]:
    """Joules per UTC hour (hour start -> J) of a cumulative energy series (times ascending), the energy between two
    readings spread evenly over the time between them (the cumulative series interpolated at each hour boundary)."""
    t, e = np.asarray(t_unix, float), np.asarray(energy_j, float)
    ok = np.isfinite(t) & np.isfinite(e)
    t, e = t[ok], e[ok]
    if len(t) < 2:
        return {}
    first, last = math.floor(t[0] / HOUR_S) * HOUR_S, math.ceil(t[-1] / HOUR_S) * HOUR_S
    edges = np.arange(first, max(last, first + HOUR_S) + 1, HOUR_S)
    cum = np.interp(edges, t, e)
    per = np.diff(cum)
    return {float(a): float(j) for a, j in zip(edges[:-1].tolist(), per.tolist(), strict=True) if j > 0}


def intervals_by_hour(t0: np.ndarray, t1: np.ndarray, energy_j: np.ndarray) -> dict[float, float]:
    """Joules per UTC hour of energy intervals ``(t0, t1]`` (a fleet's telemetry), each spread evenly over its span."""
    a, b, e = (np.asarray(x, float) for x in (t0, t1, energy_j))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(e) & (b >= a) & (e > 0)
    a, b, e = a[ok], b[ok], e[ok]
    ha, hb = np.floor(a / HOUR_S), np.floor(np.nextafter(b, -np.inf) / HOUR_S)
    out: dict[float, float] = {}
    one = (ha == hb) | (b == a)
    hours = np.unique(ha[one])
    if len(hours):
        idx = np.searchsorted(hours, ha[one])
        sums = np.bincount(idx, weights=e[one], minlength=len(hours))
        out = {float(h) * HOUR_S: float(j) for h, j in zip(hours.tolist(), sums.tolist(), strict=True)}
    for x, y, j in zip(a[~one].tolist(), b[~one].tolist(), e[~one].tolist(), strict=True):  # the few that cross an hour
        edges = np.arange(math.floor(x / HOUR_S) * HOUR_S, y + HOUR_S, HOUR_S)
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
            part = j * (min(hi, y) - max(lo, x)) / (y - x)
            if part > 0:
                out[lo] = out.get(lo, 0.0) + part
    return out


def hours_from_record(value: object) -> dict[float, float] | None:
    """A run record's ``energy_by_hour_utc`` ({"2025-03-03T08:00Z": J}, written by `footprint fleet job`) as hour
    start -> J; None where it is absent or not such a mapping (a record is user input: nothing in it is trusted)."""
    if not isinstance(value, dict) or not value:
        return None
    out = {}
    for k, v in value.items():
        try:
            t = _parse_time(str(k), "run.json", 0)
        except FootprintError:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return None
        out[t] = float(v)
    return out


def iso_hours(profile_j: dict[float, float]) -> dict[str, float]:
    """hour start -> J as the run record keeps it: ISO UTC hour -> J."""
    return {_iso(h): j for h, j in sorted(profile_j.items())}


def match(profile_j: dict[float, float], intensity: HourlyIntensity, total_kwh: float) -> HourlyMatch:
    """Each hour the job drew energy in, with its intensity; the profile scaled to ``total_kwh`` (the workload's IT
    energy, of which the samples give the shape). One clear error where the file misses an hour of the job."""
    if not profile_j or sum(profile_j.values()) <= 0:
        raise FootprintError("no timed energy samples to match hour by hour (a run record or a log has them)", None, KEY)
    index = {h: i for i, h in enumerate(intensity.hours)}
    hours = sorted(profile_j)
    missing = [h for h in hours if h not in index]
    if missing:
        raise FootprintError(
            f"does not cover the run: no intensity for {_iso(missing[0])}"
            + (f" and {len(missing) - 1} more hour(s)" if len(missing) > 1 else "")
            + f" (the run drew energy {_iso(hours[0])} to {_iso(hours[-1] + HOUR_S)}; the file covers {intensity.span})",
            intensity.file,
            KEY,
        )
    joules = np.asarray([profile_j[h] for h in hours])
    kwh = joules / joules.sum() * total_kwh
    g = tuple(intensity.g_per_kwh[index[h]] for h in hours)
    flagged = sum(intensity.estimated[index[h]] for h in hours) if intensity.estimated else None
    return HourlyMatch(
        intensity.file, intensity.column, tuple(hours), tuple(kwh.tolist()), g, intensity.source, intensity.sha256, flagged
    )


def resolve_path(raw: object, scenario_file: str | None) -> Path:
    """``site.carbon_intensity_hourly`` as a path: relative to the scenario file when it is not found as given."""
    if not isinstance(raw, str) or not raw.strip():
        raise FootprintError(f"expected the path of an hourly CSV file, got {raw!r}", scenario_file, KEY)
    path = Path(raw)
    if not path.is_absolute() and scenario_file and not path.is_file():
        path = Path(scenario_file).resolve().parent / path
    return path
