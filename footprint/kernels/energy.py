"""Energy per category: a run directory's power samples attributed to the trace's timeline by time overlap.

GPU traces: the run's GPU energy (NVML counter differences, else power x time) split over kernel
categories, idle and the time outside the trace. CPU traces: the run's CPU package energy (RAPL only:
an estimated CPU energy is not a measurement to attribute) split over the CPU operator categories and
the rest of the window. Within each sample interval the energy is shared in proportion to the time
each category covers; this is an attribution, not a measurement per category, and the result says so.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.intervals import cum_busy, union
from footprint.kernels.opmodels import CATEGORIES, MATRIX_CATEGORIES


class MissingEnergy(FootprintError):
    """The run directory has no samples of the kind the trace needs (said in one line, not an error exit)."""


SAMPLE_MARGIN_S = 120.0  # samples read either side of the trace: at least one reading at the coarsest kept resolution


def _iso(t: float | None) -> str:
    if t is None:
        return "?"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _rank_starts(run_dir: Path, run: dict[str, Any], notes: list[str]) -> dict[int, float]:
    """Unix start time of each rank's sample clock (t_s counts from it)."""
    from footprint.tracking import runrecord

    starts: dict[int, float] = {}
    for rec in runrecord.rank_records(run_dir, notes):  # a damaged rank record is skipped with a note
        if rec.get("start_unix") is not None:
            starts[int(rec.get("rank") or 0)] = float(rec["start_unix"])
    if not starts:
        if not run.get("start_utc"):
            raise FootprintError(
                "no start time (ranks/rank-*.json start_unix or run.json start_utc): cannot place the power samples in time",
                str(run_dir),
            )
        from datetime import datetime

        try:
            starts[0] = datetime.fromisoformat(run["start_utc"]).timestamp()
        except ValueError:
            raise FootprintError(f"run.json start_utc {run['start_utc'][:40]!r} is not an ISO 8601 time", str(run_dir)) from None
        notes.append("no per-rank start_unix: samples aligned with run.json start_utc (1 s resolution)")
    return starts


def _run_samples(
    run_dir: Path, device_index: Any, file: str, component: str = "gpu", window: tuple[float, float] | None = None
) -> tuple[Any, dict[str, Any], list[str]]:
    """The `component` samples around the trace window (unix seconds), read lazily from the run's segments
    (or a samples.parquet written before segments existed): never the whole run."""
    from footprint.tracking import runrecord

    notes: list[str] = []
    if not run_dir.is_dir():
        raise FootprintError("not a run directory (expected run.json and ranks/ with the samples)", str(run_dir))
    if not runrecord.journals(run_dir) and not (run_dir / runrecord.LEGACY_SAMPLES).exists():
        raise FootprintError(
            "no power samples (no ranks/rank-*.journal.jsonl, no samples.parquet): not a footprint run directory "
            "(run `footprint recover` for a killed run)",
            str(run_dir),
        )
    run = runrecord.read_record(run_dir / "run.json") if (run_dir / "run.json").exists() else {}
    starts = _rank_starts(run_dir, run, notes)
    devices = [d for d in run.get("devices", []) if d.get("component", "gpu") == component]
    uuids = None
    if component != "gpu":
        uuids = {d.get("uuid") for d in devices if d.get("method") == "rapl"}
        if not uuids:
            kinds = sorted({str(d.get("method")) for d in devices}) or ["none"]
            raise MissingEnergy(
                f"no RAPL CPU package samples in this run (its CPU energy method: {', '.join(kinds)}), so CPU energy "
                "is not attributed to operators: record the run where /sys/class/powercap/intel-rapl is readable",
                str(run_dir),
            )
    t_range = None
    if window is not None:
        t_range = (window[0] - max(starts.values()) - SAMPLE_MARGIN_S, window[1] - min(starts.values()) + SAMPLE_MARGIN_S)
    df = runrecord.read_samples(
        run_dir,
        t_range=t_range,
        uuids=uuids,
        components=[component],
        columns=["rank", "uuid", "component", "t_s", "energy_j", "power_w"],
    )
    df = df[df["uuid"].notna()]
    if df.empty:
        span = runrecord.sample_span(run_dir)
        if span is None or window is None:
            raise FootprintError(f"the run has no {component.upper()} power samples", str(run_dir))
        t0 = min(starts.values())
        raise FootprintError(
            f"the run's power samples ({_iso(t0 + span[0])} to {_iso(t0 + span[1])}) do not overlap "
            f"the trace ({_iso(window[0])} to {_iso(window[1])}): is this the run that was profiled?",
            str(run_dir),
        )
    found = list(dict.fromkeys(df["uuid"]))
    uuid = found[0]
    if len(found) > 1:
        match = [d.get("uuid") for d in devices if d.get("index") == device_index and d.get("uuid") in found]
        if match:
            uuid = match[0]
            notes.append(f"the run has {len(found)} devices: used {uuid} (index {device_index}, the trace's device)")
        else:
            uuid = df["uuid"].value_counts().index[0]
            notes.append(
                f"the run has {len(found)} devices and none has the trace's device index {device_index}: used {uuid} "
                "(most samples around the trace)"
            )
    df = df[df["uuid"] == uuid].copy()
    offset = df["rank"].map(lambda r: starts.get(int(r), starts[min(starts)])) if "rank" in df.columns else starts[min(starts)]
    df["t_unix"] = df["t_s"].astype(float) + offset
    df = df.sort_values("t_unix")
    dev = next((d for d in devices if d.get("uuid") == uuid), {})
    return df, {"uuid": uuid, "name": dev.get("name"), "method": dev.get("method")}, notes


def attribute_energy(
    run_dir: str | Path, result: dict[str, Any], gpu: list[tuple[Any, ...]], cats: list[str], base_ns: Any, file: str
) -> dict[str, Any]:
    """Split the run's GPU energy over kernel categories by time overlap with the kernel timeline; `cats` gives
    each event's category, or the launchless bucket of an event the figures leave out (its energy is
    reported apart, in ``not_counted_j``, rather than counted as idle)."""
    per_cat: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for g, cat in zip(gpu, cats, strict=True):
        per_cat[cat].append((g[0], g[0] + g[1]))
    if not gpu:
        raise FootprintError("the trace has no GPU events to attribute energy to", file)
    return attribute(run_dir, result, per_cat, base_ns, file, "gpu", result["launch_overhead"]["median_kernel_us"])


def attribute(
    run_dir: str | Path,
    result: dict[str, Any],
    per_cat_us: dict[str, list[tuple[float, float]]],
    base_ns: Any,
    file: str,
    component: str,
    median_event_us: float | None,
) -> dict[str, Any]:
    """Split the run's `component` energy over categories by time overlap with their intervals (trace us): the
    trace aligned to the run's clock, each sample interval's energy, its split by overlap, how coarse that is."""
    import numpy as np

    run_dir = Path(run_dir)
    t0, basis = _alignment(per_cat_us, base_ns, file, component)
    # per-category merged intervals in unix seconds
    per_cat = {c: [(t0 + a / 1e6, t0 + b / 1e6) for a, b in v] for c, v in per_cat_us.items()}
    merged = {c: union(v) for c, v in per_cat.items()}
    all_iv = union(iv for v in per_cat.values() for iv in v)
    w0, w1 = all_iv[0][0], all_iv[-1][1]
    df, dev, notes = _run_samples(run_dir, result["device"]["index"], file, component, (w0, w1))
    t, de, energy_method = _interval_energy(df, notes)
    by_cat, idle_j, outside_j, used = _split_by_overlap(t, de, merged, all_iv, (w0, w1), run_dir)
    in_window = sum(by_cat.values()) + idle_j
    period = float(np.median(np.diff(t))) if len(t) > 1 else None
    ratio = (period * 1e6 / median_event_us) if period and median_event_us else None
    cats = CATEGORIES if component == "gpu" else MATRIX_CATEGORIES
    section = result["by_category"] if component == "gpu" else result["cpu"]["by_category"]
    for c in cats:
        entry = section[c]
        ej = by_cat.get(c, 0.0)
        entry["energy_j"] = ej
        entry["gflops_per_j"] = entry["flops"] / ej / 1e9 if entry.get("flops") and ej > 0 else None
    span = w1 - w0
    return {
        "run_dir": str(run_dir),
        "component": component,
        "device_uuid": dev["uuid"],
        "device_name": dev["name"],
        "meter_method": dev["method"],
        "energy_method": energy_method,
        "alignment": basis,
        "trace_window_unix": [w0, w1],
        "run_window_unix": [float(t[0]), float(t[-1])],
        "sample_intervals_used": used,
        "sample_period_s": period,
        "median_kernel_us": median_event_us,
        "sample_period_over_median_kernel": ratio,
        "coarseness": _coarseness(period, median_event_us, ratio, span, component),
        "energy_j": float(np.sum(de)),
        "energy_in_trace_window_j": in_window,
        "by_category_j": {c: by_cat.get(c, 0.0) for c in cats},
        "not_counted_j": {k: v for k, v in by_cat.items() if k not in cats} or None,
        "idle_j": idle_j,
        "outside_trace_j": outside_j,
        "mean_power_in_window_w": in_window / span if span > 0 else None,
        "notes": notes,
    }


def _alignment(per_cat_us: dict[str, list[tuple[float, float]]], base_ns: Any, file: str, component: str) -> tuple[float, str]:
    """The trace's time origin in unix seconds and how it was found (absolute ts, or baseTimeNanoseconds)."""
    first = min((iv[0] for v in per_cat_us.values() for iv in v), default=None)
    if first is None:
        raise FootprintError(
            f"the trace has no {'GPU events' if component == 'gpu' else 'CPU operators'} to attribute energy to", file
        )
    if first > 1e14:  # about 3 years of microseconds: ts is already absolute
        return 0.0, "ts as epoch microseconds"
    if isinstance(base_ns, (int, float)):
        return float(base_ns) / 1e9, "baseTimeNanoseconds + ts"
    raise FootprintError(
        "the trace's timestamps are relative and it has no baseTimeNanoseconds: it cannot be aligned with power samples",
        file,
        "baseTimeNanoseconds",
    )


def _interval_energy(df: Any, notes: list[str]) -> tuple[Any, Any, str]:
    """Sample times and each interval's energy: counter differences where the counter holds, power x time where it
    does not (a reset) or is absent."""
    import numpy as np

    t = df["t_unix"].to_numpy(dtype=float)
    if "energy_j" in df.columns and df["energy_j"].notna().all():
        de = np.diff(df["energy_j"].to_numpy(dtype=float))
        if (de < 0).any():
            notes.append("the cumulative energy decreases somewhere (counter reset?): those intervals use power x time")
        energy_method = "energy counter differences"
    else:
        de = np.full(len(t) - 1, np.nan)
        energy_method = "power samples (trapezoid)"
    if "power_w" in df.columns:
        p = df["power_w"].to_numpy(dtype=float)
        trap = 0.5 * (p[1:] + p[:-1]) * np.diff(t)
        de = np.where(np.isnan(de) | (de < 0), trap, de)
    return t, np.nan_to_num(de, nan=0.0), energy_method


def _split_by_overlap(
    t: Any,
    de: Any,
    merged: dict[str, list[tuple[float, float]]],
    all_iv: list[tuple[float, float]],
    window: tuple[float, float],
    run_dir: Path,
) -> tuple[dict[str, float], float, float, int]:
    """Each sample interval's energy shared by time: categories' busy time, idle time in the trace window, time
    outside it. Returns per-category joules, idle, outside and the number of intervals used."""
    import numpy as np

    w0, w1 = window
    a, b = t[:-1], t[1:]
    sel = (b > w0) & (a < w1) & (b > a)
    if not sel.any():
        run_span = (float(t[0]), float(t[-1])) if len(t) else (None, None)
        raise FootprintError(
            f"the run's power samples ({_iso(run_span[0])} to {_iso(run_span[1])}) do not overlap "
            f"the trace ({_iso(w0)} to {_iso(w1)}): is this the run that was profiled?",
            str(run_dir),
        )
    a, b, de = a[sel], b[sel], de[sel]

    def overlap(ivs: list[tuple[float, float]]) -> Any:
        if not ivs:
            return np.zeros_like(a)
        st = np.array([x[0] for x in ivs])
        en = np.array([x[1] for x in ivs])
        cum = np.concatenate([[0.0], np.cumsum(en - st)])
        return cum_busy(st, en, cum, b) - cum_busy(st, en, cum, a)

    ov = {c: overlap(v) for c, v in merged.items()}
    window_ov = np.clip(np.minimum(b, w1) - np.maximum(a, w0), 0.0, None)
    idle_ov = np.clip(window_ov - overlap(all_iv), 0.0, None)
    outside = np.clip((b - a) - window_ov, 0.0, None)
    denom = sum(ov.values()) + idle_ov + outside
    denom = np.where(denom > 0, denom, 1.0)
    by_cat = {c: float(np.sum(de * v / denom)) for c, v in ov.items()}
    return by_cat, float(np.sum(de * idle_ov / denom)), float(np.sum(de * outside / denom)), int(sel.sum())


def _coarseness(period: float | None, median_us: float | None, ratio: float | None, span: float, component: str) -> str:
    """How coarse the attribution is: the sensor's period against the median kernel and the trace's span."""
    coarse = (
        f"the power sensor gives one reading every {period * 1e3:.3g} ms; the median "
        f"{'kernel' if component == 'gpu' else 'operator'} lasts "
        f"{median_us:.3g} us ({ratio:,.0f}x shorter) and the trace spans {span * 1e3:.3g} ms"
        if period and median_us and ratio
        else "sample period or kernel durations unknown"
    )
    if period and span < period:
        coarse += ": one reading covers the whole trace, so categories share its energy by time only"
    return coarse + (
        "; per-category energy is an attribution by time overlap within each sample interval (a GPU's power "
        "differs between kernel types), not a measurement"
        + ("; A100/H100 sensors also average only ~25 ms of every 100 ms" if component == "gpu" else "")
    )
