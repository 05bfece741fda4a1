"""The plausibility table: each input quantity's physical range, with the reason for it. One place, read by every
entry point (scenarios and `--set` through `footprint.lca.workload`, the Python API's `track()`, `footprint recover`
and the importers), so that `power 1e300 W`, `pue 1e300` or `lifetime 1e-300 years` are refused with one line
instead of giving 300-digit results.

The ranges are wide on purpose: they refuse what cannot be physical (a typo, a unit slip of 10^3 or more, an
overflow), never an unusual but real value. Each bound says why it is where it is; docs/bounds.md lists them.
Values are in the unit shown (the scenario's own quantities are converted before they are checked).

Core layer: imports only `footprint.errors` and `footprint.inputs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from footprint.errors import FootprintError
from footprint.inputs import MAX_GPUS, number_arg

HOURS_PER_YEAR = 8766.0


@dataclass(frozen=True)
class Bound:
    lo: float  # the lowest plausible value (inclusive)
    hi: float  # the highest plausible value (inclusive)
    unit: str  # the unit lo and hi are in ("" for a pure number)
    reason: str  # why: the physical fact the range comes from


#: Keyed by the scenario key (what `--set` names); `track()`'s site dict uses the `site.` keys.
BOUNDS: dict[str, Bound] = {
    "hardware.count": Bound(1, MAX_GPUS, "", "GPUs in one job: more than any cluster holds (footprint.inputs.MAX_GPUS)"),
    "hardware.lifetime": Bound(
        0.1 * HOURS_PER_YEAR,
        20 * HOURS_PER_YEAR,
        "hour",
        "a GPU's service life: from about a month (a short lease) to 20 years, twice the longest data-centre refresh",
    ),
    "training.power_per_gpu": Bound(
        1, 5000, "W", "one accelerator's draw: above 1 W when on; below 5 kW (a GB200 superchip peaks at ~2.7 kW)"
    ),
    "training.power_fraction_of_tdp": Bound(0.01, 1.5, "", "board power over TDP: boost clocks exceed TDP by tens of %"),
    "training.duration": Bound(
        1e-9, 20 * HOURS_PER_YEAR, "hour", "above zero (a measured test run may last milliseconds), below the 20-year life"
    ),
    "training.gpu_hours": Bound(
        1e-9,
        MAX_GPUS * 20 * HOURS_PER_YEAR,
        "hour",
        "at most every GPU of the largest job for its whole 20-year life",
    ),
    "training.energy": Bound(
        1e-12,
        MAX_GPUS * 5.0 * 20 * HOURS_PER_YEAR,
        "kWh",
        "at most the largest job's GPUs at 5 kW each for 20 years",
    ),
    "training.flops": Bound(1, 1e33, "", "10^33 FLOP: 10^5 times the largest training runs announced (~10^27-10^28)"),
    "model.parameters": Bound(1, 1e16, "", "10^16 parameters: 10^4 times the largest models published"),
    "model.active_parameters": Bound(1, 1e16, "", "as model.parameters"),
    "model.tokens": Bound(1, 1e18, "", "10^18 tokens: 10^4 times the largest training corpora (~10^14)"),
    "site.pue": Bound(
        1.0, 3.0, "", "PUE is 1.0 by definition at best; no surveyed data centre is above 3.0 (Uptime 2023 mean: 1.58)"
    ),
    "site.wue": Bound(0, 20, "L/kWh", "on-site water per kWh: 0 (dry cooling) to ~10 L/kWh for evaporative towers in heat"),
    "site.ewif": Bound(0, 500, "L/kWh", "water per kWh of grid electricity: hydro's evaporation reaches ~200 L/kWh"),
    "site.carbon_intensity": Bound(
        0, 2.0, "kgCO2eq/kWh", "grid carbon intensity: 0 to 2 kg/kWh (lignite plants emit ~1.2 kg/kWh)"
    ),
}
#: Counts the tracker accepts per step (`t.step(tokens=..., flops=...)`): more is a bug in the caller's arithmetic.
STEP_TOKENS_MAX = 1e13
STEP_FLOPS_MAX = 1e30


def arg(key: str, kind: type = float) -> Any:
    """An argparse ``type=`` holding a CLI option to the table's range for `key` (`--pue` is `site.pue`)."""
    b = BOUNDS[key]
    return number_arg(kind, b.lo, b.hi)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def problem(key: str, value: Any) -> str | None:
    """Why `value` (already in the bound's unit) is not plausible for `key`, or None (also for keys not in the table)."""
    b = BOUNDS.get(key)
    if b is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return f"expected a number, got {str(value)[:40]!r}"
    if not math.isfinite(v):
        return f"expected a finite number, got {str(value)[:40]!r}"
    if b.lo <= v <= b.hi:
        return None
    unit = f" {b.unit}" if b.unit else ""
    return f"{_fmt(v)}{unit} is outside the plausible range {_fmt(b.lo)}-{_fmt(b.hi)}{unit} ({b.reason})"


def check(key: str, value: float, file: str | None = None, label: str | None = None) -> float:
    """`value` if plausible for `key`, else one FootprintError naming the file and the key (or `label`, such as
    the CLI option that gave it)."""
    why = problem(key, value)
    if why:
        raise FootprintError(why, file, label or key)
    return value


def record_problems(record: dict[str, Any]) -> list[str]:
    """What is implausible in an imported run record: its duration (and each device's) against `training.duration`
    (codecarbon's `duration` of 1e308 s), each GPU's average power (energy over its duration) against
    `training.power_per_gpu`, and its site against the site rows."""
    out = []
    for v in (record.get("duration_s"), *(d.get("duration_s") for d in record.get("devices") or [])):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0:  # 0: no duration (not available)
            why = problem("training.duration", v / 3600.0)
            if why:
                return [f"duration_s: {why}"]
    for d in record.get("devices") or []:
        e, t = d.get("energy_j"), d.get("duration_s") or record.get("duration_s")
        if d.get("component", "gpu") != "gpu" or not e or not t or t <= 0:
            continue
        avg = e / t
        if avg > BOUNDS["training.power_per_gpu"].hi:  # below 1 W on average is an idle GPU, not an error
            out.append(f"device {d.get('uuid')}: average power {problem('training.power_per_gpu', avg)}")
    return out + site_problems(record.get("site"), zones=True)


SITE_UNITS = {"pue": None, "wue": "L/kWh", "ewif": "L/kWh", "carbon_intensity": "kgCO2eq/kWh"}


def site_problems(site: Any, zones: bool = False) -> list[str]:
    """What is implausible in a run's site (from `track(site=...)` or a journal header): its numeric keys checked
    against the table (a number is read in the bound's unit; a quantity string is converted to it); with `zones`,
    the grid must also be a zone footprint knows."""
    if site is None:
        return []
    if not isinstance(site, dict):
        return [f"site is a {type(site).__name__}, not a mapping"]
    out = []
    for k, unit in SITE_UNITS.items():
        if k not in site or site[k] is None:
            continue
        v = site[k]
        if k == "carbon_intensity" and not isinstance(v, bool) and isinstance(v, (str, int, float)):
            from footprint.lca.electricity import intensity_override  # a bare number is g/kWh, as in scenarios

            try:
                v = intensity_override(v)
            except FootprintError as exc:
                out.append(f"site.{k}: {exc.detail}")
                continue
        elif isinstance(v, str) and unit is not None:
            from footprint.lca.units import Q, UnitParseError

            try:
                v = float(Q(v, unit).to(unit).magnitude)
            except (UnitParseError, Exception):  # noqa: BLE001 - any unreadable quantity is one problem
                out.append(f"site.{k} {v[:40]!r} is not a quantity in {unit}")
                continue
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            out.append(f"site.{k} is a {type(v).__name__}, not a number")
            continue
        why = problem(f"site.{k}", v)
        if why:
            out.append(f"site.{k}: {why}")
    grid = site.get("grid")
    if grid is not None and not (isinstance(grid, str) and 0 < len(grid) <= 200):
        out.append(f"site.grid {str(grid)[:40]!r} is not a grid name")
    elif grid is not None and zones:
        from footprint.lca.electricity import resolve_zone

        try:
            resolve_zone(grid)
        except FootprintError as exc:
            out.append(f"site.grid: {exc.detail}")
    return out


def clean_site(site: Any) -> tuple[Any, list[str]]:
    """A site with its implausible keys removed, and a note per key removed (the defaults apply to them)."""
    problems = site_problems({"grid": site} if isinstance(site, str) else site, zones=True)
    if not problems:
        return site, []
    if not isinstance(site, dict):
        return None, [f"{p}: ignored, the defaults are used" for p in problems]
    bad = {p.split(":", 1)[0].split(" ", 1)[0].removeprefix("site.") for p in problems}
    return {k: v for k, v in site.items() if k not in bad}, [f"{p}: ignored, the default is used" for p in problems]
