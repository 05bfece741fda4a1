"""The run record: what the tracker writes, how ranks merge, how a killed run is recovered.

Layout of a run directory (one per job):

    run.json                          job record: devices (each GPU once), energy, duration, steps, ranks, hosts, site
    ranks/rank-00000.json             one record per rank (small: summaries, never samples; merged into run.json)
    ranks/rank-00000.journal.jsonl    the crash-safe tail of the rank's samples (the last few minutes)
    ranks/rank-00000.segments/        the rest as Parquet parts: raw/ (10 Hz, recent), 1s/ and 60s/ (min/mean/max
                                      power and the cumulative counter), written as the run goes (meters.segments)
    samples.parquet                   runs recorded before segments existed: the whole time series in one file

Samples are read lazily, in bounded memory, whatever the run's length: `iter_samples` / `read_samples`
push the time range, devices and columns down to the files, `power_timeline` streams min/mean/max per
time bucket for plots. Every energy says how it was obtained (device ``method``, ``measured``);
anything estimated or missing is in ``notes``.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from footprint.errors import FootprintError
from footprint.escaping import shown

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

FORMAT = "footprint-run"
VERSION = 1
RANKS_DIR = "ranks"
GPU_COMPONENTS = ("gpu",)
CPU_COMPONENTS = ("cpu",)
RAM_COMPONENTS = ("dram", "ram")
LEGACY_SAMPLES = "samples.parquet"
SAMPLES_LAYOUT = f"per rank: {RANKS_DIR}/rank-N.journal.jsonl (tail) + {RANKS_DIR}/rank-N.segments/ (Parquet parts)"
SAMPLE_COLUMNS = ("rank", "host", "uuid", "component", "t_s", "energy_j", "power_w")


def utc_iso(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).isoformat(timespec="seconds")


def rank_paths(run_dir: Path, rank: int) -> tuple[Path, Path]:
    """(record, journal) paths of one rank."""
    base = run_dir / RANKS_DIR / f"rank-{rank:05d}"
    return base.with_suffix(".json"), Path(f"{base}.journal.jsonl")


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Through `footprint.outputs`: a reader never sees half a record, a failed write (disk full, read-only, a size
    limit) leaves nothing behind, and a pipe, device or symlink out of the directory is refused; any of these is
    one FootprintError line naming the path."""
    from footprint.outputs import write_text

    write_text(path, json.dumps(finite_json(data), indent=2, default=str, allow_nan=False))


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None: a record on disk never holds NaN or Infinity
    (JSON has neither; Python would write them as bare words other readers reject)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a run directory (run.json, a rank record), or one FootprintError naming the file."""
    from footprint.inputs import load_json, read_bytes

    if not Path(path).exists():
        raise FootprintError("not found", str(path))
    return load_json(read_bytes(path, "JSON record"), str(path))


def read_record(path: str | Path) -> dict[str, Any]:
    """run.json of a run directory (or the file itself), read and cleaned: see `clean_record`."""
    p = Path(path)
    p = p / "run.json" if p.is_dir() else p
    return clean_record(read_json(p), str(p))


def finite_or_none(v: Any, lo: float = 0.0) -> float | None:
    """A finite number >= lo, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= lo else None


_COUNTERS = (
    "duration_s",
    "steps",
    "tokens",
    "flops",
    "hardware_flops",
    "start_unix",
    "end_unix",
    "rank",
    "local_rank",
    "world_size",
)
_MAPPINGS = ("mfu", "step_times", "slurm", "samples", "sampler", "retention")
_LISTS = ("ranks", "hosts")
_TEXTS = ("name", "start_utc", "end_utc", "flops_method", "imported_from", "source_file", "run_dir", "time_zone")


def clean_record(record: Any, file: str = "run.json") -> dict[str, Any]:
    """A run record whose every field has the type and domain readers expect: what is damaged (a list where an
    object belongs, a negative, NaN or infinite energy, a device without its fields) is dropped with a note in
    ``notes``, and everything else kept. Energy totals lost this way are recomputed from the devices."""
    if not isinstance(record, dict):
        raise FootprintError(f"expected a run record (a JSON object), got {type(record).__name__}", file)
    out = dict(record)
    dropped: list[str] = []

    def drop(key: str, why: str) -> None:
        dropped.append(f"{Path(file).name}: {key} {why}: ignored")

    for k in _COUNTERS:
        if out.get(k) is not None and finite_or_none(out[k], -math.inf if k.endswith("unix") else 0.0) is None:
            drop(k, f"is not a finite number >= 0 ({str(out[k])[:40]!r})")
            out[k] = None
    for k, kinds in [(k, dict) for k in _MAPPINGS] + [(k, list) for k in _LISTS] + [(k, str) for k in _TEXTS]:
        if out.get(k) is not None and not isinstance(out[k], kinds):
            drop(k, f"is a {type(out[k]).__name__}, not a{'n object' if kinds is dict else ' ' + kinds.__name__}")
            out[k] = None
    if out.get("site") is not None and not isinstance(out["site"], (dict, str)):
        drop("site", f"is a {type(out['site']).__name__}")
        out["site"] = None
    out["devices"] = _clean_devices(out.get("devices"), drop)
    out["windows"] = _clean_windows(out.get("windows"), drop)
    energy = out.get("energy")
    keys = ("gpu_j", "cpu_j", "ram_j", "total_j")
    if not isinstance(energy, dict) or any(energy.get(k) is not None and finite_or_none(energy[k]) is None for k in keys):
        if energy is not None:
            drop("energy", "has a value that is not a finite number >= 0 (recomputed from the devices)")
        out["energy"] = energy_summary(out["devices"])
    notes = out.get("notes")
    if notes is not None and not isinstance(notes, list):
        drop("notes", f"is a {type(notes).__name__}, not a list")
        notes = []
    out["notes"] = [str(n) for n in (notes or [])] + dropped
    return finite_json(out)


def _listed(value: Any, key: str, drop: Any) -> list[Any]:
    """A list field of a record ([] when absent; when it is something else, [] and a note)."""
    if value is None:
        return []
    if not isinstance(value, list):
        drop(key, f"is a {type(value).__name__}, not a list")
        return []
    return value


def _clean_devices(devices: Any, drop: Any) -> list[dict[str, Any]]:
    out = []
    for i, d in enumerate(_listed(devices, "devices", drop)):
        if not isinstance(d, dict):
            drop(f"devices[{i}]", f"is a {type(d).__name__}, not an object")
            continue
        d = dict(d)
        for k in ("name", "uuid", "component", "method"):
            if d.get(k) is not None and not isinstance(d[k], str):
                d[k] = str(d[k])[:200]
        if d.get("energy_j") is not None and finite_or_none(d["energy_j"]) is None:
            drop(f"devices[{i}].energy_j", f"is not a finite number >= 0 ({str(d['energy_j'])[:40]!r}): not available")
            d["energy_j"] = None
        if d.get("notes") is not None and not isinstance(d["notes"], list):
            d["notes"] = [str(d["notes"])]
        out.append(d)
    return out


def _clean_windows(windows: Any, drop: Any) -> list[dict[str, Any]]:
    out = []
    for i, w in enumerate(_listed(windows, "windows", drop)):
        ok = (
            isinstance(w, dict)
            and finite_or_none(w.get("duration_s", 0.0)) is not None
            and finite_or_none(w.get("start_s", 0.0), -math.inf) is not None
            and isinstance(w.get("energy_j", {}), dict)
            and all(finite_or_none(v, -math.inf) is not None for v in (w.get("energy_j") or {}).values())
        )
        if ok:
            out.append({**w, **{k: str(w[k])[:200] for k in ("name", "kind") if w.get(k) is not None}})
        else:
            drop(f"windows[{i}]", "is not a window (name, start_s, duration_s, energy_j)")
    return out


def energy_summary(devices: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """{gpu_j, cpu_j, ram_j, total_j}; a component with no reading is None (not available), never 0."""
    sums: dict[str, float | None] = {"gpu_j": None, "cpu_j": None, "ram_j": None}
    for d in devices:
        comp = d.get("component", "gpu")
        key = (
            "gpu_j"
            if comp in GPU_COMPONENTS
            else "cpu_j"
            if comp in CPU_COMPONENTS
            else "ram_j"
            if comp in RAM_COMPONENTS
            else None
        )
        if key is None or d.get("energy_j") is None:
            continue
        sums[key] = (sums[key] or 0.0) + float(d["energy_j"])
    known = [v for v in sums.values() if v is not None]
    return {**sums, "total_j": sum(known) if known else None}


def merge_ranks(records: list[dict[str, Any]], name: str, site: Any = None, notes: list[str] | None = None) -> dict[str, Any]:
    """One job record from per-rank records: each GPU once, host meters once per host. ``notes``: what the caller
    already skipped (damaged rank files), carried into the record."""
    records = sorted(records, key=lambda r: r.get("rank") or 0)
    devices: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    notes = list(notes or [])
    for rec in records:
        for i, d in enumerate(rec.get("devices") or []):
            if not d.get("uuid"):
                d = {**d, "uuid": f"rank-{rec.get('rank')}-device-{i}"}
                notes.append(
                    f"rank {rec.get('rank')}: device without a UUID counted as {d['uuid']} (not checked for double counting)"
                )
            key = (d["uuid"], "" if d.get("component", "gpu") == "gpu" else rec.get("host", ""))
            if key in seen:
                notes.append(
                    f"device {d['uuid']} was measured by more than one rank; counted once (rank {rec.get('rank')} dropped)"
                )
                continue
            seen.add(key)
            devices.append({**d, "rank": rec.get("rank"), "host": rec.get("host")})
        notes += [f"rank {rec.get('rank')}: {n}" for n in rec.get("notes", [])]
    gpus = [d for d in devices if d.get("component", "gpu") == "gpu"]
    for i, d in enumerate(gpus):
        d.setdefault("job_index", i)
    starts = [r["start_unix"] for r in records if r.get("start_unix") is not None]
    ends = [r["end_unix"] for r in records if r.get("end_unix") is not None]
    duration = (max(ends) - min(starts)) if starts and ends else max((r.get("duration_s") or 0 for r in records), default=0.0)
    duration = max(duration, 0.0)
    hosts: dict[str, dict[str, Any]] = {}
    for rec in records:
        h = hosts.setdefault(rec.get("host", "?"), {"host": rec.get("host", "?"), "ranks": [], "gpus": []})
        h["ranks"].append(rec.get("rank"))
        h["gpus"] += [d.get("uuid") for d in rec.get("devices") or [] if d.get("component", "gpu") == "gpu"]
    world = int(max((r.get("world_size") or 1 for r in records), default=1))
    present = {r.get("rank") for r in records}
    missing = sorted(set(range(min(world, 1 << 20))) - present)
    if missing:
        shown = missing if len(missing) <= 20 else [*missing[:20], "..."]
        notes.append(f"records of ranks {shown} are missing: their GPUs are not counted")
    partial = partial_counts(records, world, missing)
    notes += [info["note"] for info in partial.values()]
    steps = max((r.get("steps") or 0 for r in records), default=0)
    tokens = sum(r.get("tokens", 0) or 0 for r in records)
    flops = sum(r.get("flops", 0) or 0 for r in records)
    first = records[0] if records else {}
    hw = sum(r.get("hardware_flops", 0) or 0 for r in records)
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "start_utc": utc_iso(min(starts)) if starts else None,
        "end_utc": utc_iso(max(ends)) if ends else None,
        "duration_s": duration,
        "steps": steps,
        "tokens": tokens,
        "flops": flops or None,
        "hardware_flops": hw or None,
        "flops_method": first.get("flops_method"),
        "mfu": job_mfu(records, gpus, flops, hw, duration),
        "devices": gpus + [d for d in devices if d.get("component", "gpu") != "gpu"],
        "energy": energy_summary(devices),
        "ranks": [{k: r.get(k) for k in ("rank", "local_rank", "host", "pid", "complete", "recovered")} for r in records],
        "partial": partial or None,
        "world_size": world,
        "hosts": list(hosts.values()),
        "site": site if site is not None else first.get("site"),
        "slurm": first.get("slurm"),
        "windows": [w for r in records for w in r.get("windows", [])],
        "step_times": first.get("step_times"),
        "samples": {
            "layout": SAMPLES_LAYOUT,
            "retention": first.get("retention"),
        },
        "notes": list(dict.fromkeys(notes)),
    }


PARTIAL_FIELDS = ("steps", "tokens", "flops", "hardware_flops")


def partial_counts(records: list[dict[str, Any]], world: int, missing: list[int]) -> dict[str, dict[str, Any]]:
    """Which of the job's totals could only be partly rebuilt, and from which ranks: a count some ranks reported
    and others did not (a rank missing, or rebuilt from a journal that held no count), or one taken from a rebuilt
    rank's last progress event (a lower bound). Each entry carries a note for the record's notes."""
    out: dict[str, dict[str, Any]] = {}

    def _rk(r: dict[str, Any]) -> int:
        return r["rank"] if isinstance(r.get("rank"), int) else 0

    recovered = sorted(_rk(r) for r in records if r.get("recovered") or r.get("complete") is False)
    for field in PARTIAL_FIELDS:
        have = sorted(_rk(r) for r in records if r.get(field))
        if not have:
            continue  # nobody counted it: not measured, not partial
        lacking = sorted({_rk(r) for r in records} - set(have)) + list(missing)
        rebuilt = [k for k in have if k in recovered]
        if not lacking and not rebuilt:
            continue
        why = [f"ranks {lacking[:20]} did not report it"] if lacking else []
        why += [f"ranks {rebuilt[:20]} were rebuilt from their journal's last progress event"] if rebuilt else []
        out[field] = {
            "from_ranks": have[:1000],
            "without_ranks": lacking[:1000],
            "recovered_ranks": rebuilt[:1000],
            "bound": "lower",
            "note": f"{field}: partial, a lower bound counted from ranks {have[:20]} only ({'; '.join(why)})",
        }
    if missing or recovered:
        out["energy"] = {
            "from_ranks": sorted(_rk(r) for r in records)[:1000],
            "without_ranks": list(missing)[:1000],
            "recovered_ranks": recovered[:1000],
            "bound": "lower",
            "note": "energy: partial, a lower bound"
            + (f" (ranks {missing[:20]} left no record)" if missing else "")
            + (f" (ranks {recovered[:20]} rebuilt up to their journal's last flush)" if recovered else ""),
        }
    return out


def job_mfu(
    records: list[dict[str, Any]], gpus: list[dict[str, Any]], flops: float, hw: float, duration: float
) -> dict[str, Any] | None:
    """Run MFU = the job's FLOPs over all its GPU-hours (stalls and restarts included), beside the steady state."""
    ranks = [r["mfu"] for r in records if isinstance(r.get("mfu"), dict) and r["mfu"].get("peak_tflops")]
    if not flops or not ranks or not gpus or duration <= 0:
        return None
    peak = (
        ranks[0]["peak_tflops"]
        * 1e12
        / max(1, len([d for d in records[0].get("devices", []) if d.get("component", "gpu") == "gpu"]))
    )
    gpu_seconds = duration * len(gpus)
    steady = [r["steady_state_mfu"] for r in ranks if r.get("steady_state_mfu") is not None]
    steady_h = [r["steady_state_hfu"] for r in ranks if r.get("steady_state_hfu") is not None]
    return {
        "dtype": ranks[0].get("dtype"),
        "dtype_source": ranks[0].get("dtype_source"),
        "peak_tflops_per_gpu": peak / 1e12,
        "method": ranks[0].get("method"),
        "run_mfu": flops / (gpu_seconds * peak),
        "run_hfu": (hw or flops) / (gpu_seconds * peak),
        "steady_state_mfu": sum(steady) / len(steady) if steady else None,
        "steady_state_hfu": sum(steady_h) / len(steady_h) if steady_h else None,
        "definition": "run: job FLOPs / (all GPU-hours x dense peak), stalls included; steady state: median "
        "over steps (first 10 % skipped) of step FLOPs / (step time x peak), mean over ranks",
    }


def rank_records(run_dir: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The per-rank records, cleaned (`clean_record`); a damaged one is left out with a note in ``notes``."""
    out = []
    ranks = Path(run_dir) / RANKS_DIR
    for p in sorted(ranks.glob("rank-*.json")) if ranks.is_dir() else []:
        try:
            rec = clean_record(read_json(p), str(p))
        except FootprintError as exc:
            if notes is None:
                raise
            notes.append(f"{RANKS_DIR}/{p.name} skipped: {exc.detail}")
            continue
        if rec.get("rank") is None:
            rec["rank"] = _rank_of(p)
        out.append(rec)
    return out


def _rank_of(path: Path) -> int:
    """The rank in a file name `rank-00003.json` / `rank-00003.journal.jsonl` (0 if it says none)."""
    digits = path.name.split("-", 1)[-1].split(".", 1)[0]
    return int(digits) if digits.isdigit() else 0


def against_journal(record: dict[str, Any], run_dir: str | Path) -> list[str]:
    """Correct, in `record`, what contradicts the run's own journal (the evidence the meters wrote as they went; a
    run.json may be edited or damaged): steps, tokens or FLOPs below the journals' last progress events (a run cannot
    count less than it already flushed), a duration longer than the samples by more than a minute and 10 %. The
    journal's value is used and a note says so. Cheap: the journals' headers and progress events, the newest
    readings only."""
    from meters.journal import read_journal

    notes: list[str] = []
    counted: dict[str, float] = {"steps": 0.0, "tokens": 0.0, "flops": 0.0}
    for jp in journals(Path(run_dir)):
        try:
            progress = read_journal(jp, samples=False).progress or {} if jp.is_file() else {}
        except Exception:  # noqa: BLE001 - a damaged journal is no evidence: nothing is corrected from it
            continue
        for k in counted:  # every rank counts the job's steps; tokens and FLOPs are each rank's own, summed
            v = finite_or_none(progress.get(k)) or 0.0
            counted[k] = max(counted[k], v) if k == "steps" else counted[k] + v
    for k, logged in counted.items():
        stated = finite_or_none(record.get(k))
        if logged > 0 and (stated is None or stated < logged):
            notes.append(f"run.json's {k} ({stated}) is below the {logged:.6g} its journals counted: the journals' value is used")
            record[k] = int(logged) if k != "flops" else logged
    span = sample_span(Path(run_dir))
    stated = finite_or_none(record.get("duration_s"))
    if span is not None and stated is not None and stated > span[1] * 1.1 + 60:
        notes.append(
            f"run.json's duration ({stated:.6g} s) is longer than the {span[1]:.6g} s its samples cover: the samples' "
            "duration is used"
        )
        record["duration_s"] = span[1]
    return notes


def journals(run_dir: Path) -> list[Path]:
    """Each rank's journal (the tail of its samples; the whole run for runs recorded before segments), also
    where only its segments are left (a kill in the instant of a roll on a filesystem without hard links)."""
    ranks = Path(run_dir) / RANKS_DIR
    found = set(ranks.glob("rank-*.journal.jsonl"))
    found |= {p.with_name(p.name.removesuffix(".segments") + ".journal.jsonl") for p in ranks.glob("rank-*.segments")}
    return sorted(found)


def _stores(run_dir: Path) -> list[tuple[Any, Any, Any]]:
    """(rank, host, meters.store.Store) per rank journal."""
    from meters.store import Store

    out = []
    for jp in journals(run_dir):
        store = Store(jp)
        rank = store.header.get("rank")
        rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else _rank_of(jp)
        host = store.header.get("host")
        out.append((rank, host if isinstance(host, str) else None, store))
    return out


def _legacy(run_dir: Path, stores: list[tuple[Any, Any, Any]]) -> Path | None:
    """samples.parquet of a run recorded before segments, unless a rank wrote segments (then they are the truth)."""
    path = Path(run_dir) / LEGACY_SAMPLES
    if not path.is_file():
        return None
    return None if any(s.version >= 2 for _, _, s in stores) else path


def iter_samples(
    run_dir: str | Path,
    *,
    t_range: tuple[float | None, float | None] | None = None,
    uuids: Iterable[str] | None = None,
    components: Iterable[str] | None = None,
    resolution_s: float = 0.0,
    columns: Iterable[str] | None = None,
    notes: list[str] | None = None,
) -> Iterator[pa.Table]:
    """The run's samples as Arrow tables (rank, host, uuid, component, t_s, energy_j, power_w, power_min_w,
    power_max_w, n, res_s), streamed rank by rank and in time order within each device.

    `t_range` (seconds since each rank's start), `uuids`, `components` and `columns` are pushed down to
    the files; `resolution_s` picks the coarsest stored resolution that is still at least that fine.
    Memory is one batch, whatever the run's length. A damaged part or journal line is skipped (named in
    ``notes`` when given) and the rest is read."""
    import numpy as np
    import pyarrow as pa

    from meters.segments import COLUMNS, dict_array

    run_dir = _run_dir(run_dir)
    want = list(columns or ("rank", "host", *COLUMNS))
    inner = [c for c in want if c not in ("rank", "host")]
    lo, hi = t_range or (None, None)
    stores = _stores(run_dir)
    legacy = _legacy(run_dir, stores)
    if legacy is not None:
        yield from _legacy_tables(legacy, lo, hi, uuids, components, want)
        return
    for rank, host, store in stores:
        for table in store.batches(lo, hi, resolution_s=resolution_s, uuids=uuids, components=components, columns=inner):
            zeros = np.zeros(table.num_rows, dtype=np.int32)
            if "host" in want:  # constant per rank: a one-value dictionary costs nothing
                table = table.append_column("host", dict_array(zeros, [host]))
            if "rank" in want:
                table = table.append_column("rank", pa.array(zeros.astype(np.int64) + rank))
            yield table.select(want)
        if notes is not None:
            notes.extend(f"rank {rank}: {n}" for n in store.notes if f"rank {rank}: {n}" not in notes)


def _legacy_tables(
    path: Path, lo: float | None, hi: float | None, uuids: Iterable[str] | None, components: Iterable[str] | None, want: list[str]
) -> Iterator[pa.Table]:
    """samples.parquet (runs before segments) read with the same pushdown, in the same columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(str(path), format="parquet")
    except Exception as exc:  # noqa: BLE001 - a damaged file is a user-facing error
        raise FootprintError(f"cannot read {LEGACY_SAMPLES} ({exc})", str(path)) from None
    names = set(dataset.schema.names)
    flt = None
    for cond in (
        ds.field("t_s") >= lo if lo is not None and "t_s" in names else None,
        ds.field("t_s") < hi if hi is not None and "t_s" in names else None,
        ds.field("uuid").isin(sorted(set(uuids))) if uuids is not None and "uuid" in names else None,
        ds.field("component").isin(sorted(set(components))) if components is not None and "component" in names else None,
    ):
        if cond is not None:
            flt = cond if flt is None else flt & cond
    stored = [c for c in want if c in names] + (["power_w"] if "power_w" in names and "power_w" not in want else [])
    try:
        for batch in dataset.to_batches(columns=stored, filter=flt, batch_size=1 << 16):
            if not batch.num_rows:
                continue
            t = pa.Table.from_batches([batch])
            n = t.num_rows
            power = t["power_w"] if "power_w" in t.column_names else pa.nulls(n, pa.float64())
            fill = {
                "power_min_w": power,
                "power_max_w": power,
                "n": pc.if_else(pc.is_null(power), 0, 1).cast(pa.int32()),
                "res_s": pa.nulls(n, pa.float64()),
            }
            yield pa.table({c: t[c] if c in t.column_names else fill.get(c, pa.nulls(n)) for c in want})
    except Exception as exc:  # noqa: BLE001
        raise FootprintError(f"cannot read {LEGACY_SAMPLES} ({exc})", str(path)) from None


def _run_dir(run_dir: str | Path) -> Path:
    """A run directory that exists, or one error: `read_samples('nope')` is a mistake, not an empty run."""
    p = Path(run_dir)
    if not p.is_dir():
        raise FootprintError("no such run directory" if not p.exists() else "not a directory, expected a run directory", str(p))
    return p


#: Time buckets a power timeline may ask for: a plot is a few thousand pixels wide; memory is devices x buckets.
MAX_BUCKETS = 100_000


def read_samples(run_dir: str | Path, **kwargs: Any) -> pd.DataFrame:
    """`iter_samples` gathered into one DataFrame: ask for the span, devices and columns you need (a 30-day run
    read whole at full resolution is what the segments exist to avoid)."""
    import pandas as pd
    import pyarrow as pa

    tables = list(iter_samples(run_dir, **kwargs))
    if not tables:
        cols = list(kwargs.get("columns") or SAMPLE_COLUMNS)
        return pd.DataFrame({c: [] for c in cols})
    df = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    for c in df.columns:  # device names arrive dictionary-encoded (categoricals): plain values for callers
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object)
    return df


def sample_span(run_dir: str | Path) -> tuple[float, float] | None:
    """(first, last) sample time in seconds since start over all ranks, read from the newest readings only."""
    run_dir = Path(run_dir)
    stores = _stores(run_dir)
    legacy = _legacy(run_dir, stores)
    if legacy is not None:
        import pyarrow.compute as pc

        top = None
        for table in _legacy_tables(legacy, None, None, None, None, ["t_s"]):
            m = pc.max(table["t_s"]).as_py()
            top = m if top is None or (m is not None and m > top) else top
        return None if top is None else (0.0, max(0.0, float(top)))
    ends = [r["t_s"] for _, _, s in stores for r in s.last_readings().values()]
    return (0.0, max(ends)) if ends else None


TIMELINE_COLUMNS = ("rank", "host", "uuid", "component", "t_s", "power_w", "power_min_w", "power_max_w", "energy_j", "n")


def power_timeline(
    run_dir: str | Path, buckets: int = 1000, components: Iterable[str] | None = None, notes: list[str] | None = None
) -> pa.Table:
    """Power per device downsampled for a plot (an Arrow table): one row per device and time bucket with min,
    mean and max power (peaks survive: the max of a bucket is the max of every reading in it) and the last
    cumulative energy. Streams the coarsest stored resolution that still fills the buckets: bounded memory at
    any run length, and no pandas (a report process stays small)."""
    import pyarrow as pa

    from footprint.inputs import finite_number
    from meters.store import downsample

    buckets = int(finite_number(buckets, "buckets", str(run_dir), 1, MAX_BUCKETS, what="a whole number of buckets"))
    span = sample_span(_run_dir(run_dir))
    if span is None:
        return pa.table({c: pa.array([], pa.float64()) for c in TIMELINE_COLUMNS})
    lo, hi = span
    hi = max(hi, lo + 1e-3) + 1e-3
    keys = ("rank", "host", "uuid", "component")
    tables = iter_samples(run_dir, resolution_s=(hi - lo) / max(buckets, 1), components=components, notes=notes)
    return downsample(tables, lo, hi, buckets, keys=keys).select(list(TIMELINE_COLUMNS))


DEVICE_ORDER = {"gpu": 0, "cpu": 1, "dram": 2, "ram": 3}  # how plots and tables list a run's devices: GPUs first


def device_label(device: dict[str, Any]) -> str:
    """A device as a person names it: kind and index, model, host ("GPU 0 · NVIDIA A100-SXM4-40GB · node1"), never a
    UUID fragment. ``device`` is a run.json device (or a sample row: component, uuid, host)."""
    comp = str(device.get("component") or "gpu")
    kind = {"gpu": "GPU", "cpu": "CPU", "dram": "DRAM", "ram": "RAM"}.get(comp, comp)
    index = device.get("index")
    head = kind if index is None else f"{kind} {index}"
    name = str(device.get("name") or "")
    if not name and index is None and comp == "gpu":  # a GPU row without its record: only its UUID tells it apart
        name = str(device.get("uuid") or "?")[-8:]
    parts = [name] if index is None and name.upper().startswith(kind) else [head, name]
    if device.get("host"):
        parts.append(str(device["host"]))
    return " · ".join(dict.fromkeys(p for p in parts if p))


def device_labels(record: dict[str, Any]) -> dict[tuple[str | None, str], str]:
    """(host, uuid) -> `device_label` for every device of a run record, made unique (rank added where two clash)."""
    devices = record.get("devices") or []
    labels = {(d.get("host"), str(d.get("uuid"))): device_label(d) for d in devices}
    seen: dict[str, int] = {}
    for v in labels.values():
        seen[v] = seen.get(v, 0) + 1
    for d in devices:
        key = (d.get("host"), str(d.get("uuid")))
        if seen[labels[key]] > 1:
            labels[key] += f" · rank {d.get('rank', '?')}" if d.get("rank") is not None else f" · {str(d.get('uuid'))[-8:]}"
    return labels


def merge(run_dir: str | Path, name: str | None = None, notes: list[str] | None = None) -> dict[str, Any]:
    """`footprint merge`: write run.json from the per-rank records (small: no sample is read). A damaged rank
    record is left out with a note; the others are merged."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FootprintError("no such run directory", str(run_dir))
    notes = list(notes or [])
    records = rank_records(run_dir, notes)
    if not records:
        why = f" ({'; '.join(notes)})" if notes else ""
        raise FootprintError(
            f"no readable per-rank records in {RANKS_DIR}/{why} (`footprint recover` rebuilds them)", str(run_dir)
        )
    record = merge_ranks(records, name or records[0].get("name") or run_dir.name, notes=notes)
    write_json(run_dir / "run.json", record)
    return record


def recover(run_dir: str | Path) -> dict[str, Any]:
    """`footprint recover`: rebuild rank records from the journals of a killed run, then merge.

    Bounded: each rank's energy is its newest counter readings (the newest Parquet part's footer plus the
    journal tail), its steps the last progress event; a journal written before segments is streamed."""
    from meters.journal import read_journal
    from meters.segments import PENDING, list_parts, segments_dir
    from meters.store import Store

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FootprintError("no such run directory", str(run_dir))
    found = journals(run_dir)
    if not found:
        raise FootprintError(f"no journal found under {RANKS_DIR}/: is this a run directory?", str(run_dir))
    notes: list[str] = []
    for jp in found:
        rec_path = Path(str(jp).replace(".journal.jsonl", ".json"))
        if _complete(rec_path, notes):
            continue
        try:
            rec = _recover_rank(
                jp, read_journal, Store, list_parts(segments_dir(jp), PENDING) if segments_dir(jp).is_dir() else []
            )
        except Exception as exc:  # noqa: BLE001 - one rank's damage must not cost the others
            notes.append(f"{RANKS_DIR}/{jp.name}: could not be recovered ({type(exc).__name__}: {str(exc)[:160]}): skipped")
            continue
        if rec is not None:
            write_json(rec_path, rec)
    return merge(run_dir, notes=notes)


def _complete(rec_path: Path, notes: list[str]) -> bool:
    """Whether a rank's record exists and says it was written by a clean stop (a damaged one is rebuilt)."""
    if not rec_path.exists():
        return False
    try:
        return bool(read_json(rec_path).get("complete"))
    except FootprintError as exc:
        notes.append(f"{RANKS_DIR}/{rec_path.name} was damaged ({exc.detail}): rebuilt from the journal")
        return False


def _recover_rank(jp: Path, read_journal: Any, store_cls: Any, pieces: list[Any]) -> dict[str, Any] | None:
    """One rank's record rebuilt from its journal tail and segments (None when nothing of it is left)."""
    store = store_cls(jp)
    source = jp if jp.is_file() else pieces[-1][0] if pieces else None
    if source is None:
        return None
    j = read_journal(source, samples=False)  # header, devices, last progress; the samples come from the store
    h = j.header
    last = store.last_readings()
    duration = max((r["t_s"] for r in last.values()), default=0.0)
    duration = max(duration, 0.0)
    progress = j.progress or {}
    devices = []
    for uuid, info in j.devices.items():
        d = info.to_dict()
        d["energy_j"] = last[uuid]["energy_j"] if uuid in last else None
        d["notes"] = [*d.get("notes", []), "recovered from the journal of a killed run"]
        devices.append(d)
    start_unix = finite_or_none(h.get("start_unix"), -math.inf)
    from footprint.bounds import clean_site

    site, site_notes = clean_site(h.get("site"))  # a journal header is not trusted: the plausibility table applies
    fields, field_notes = header_fields(h)
    rec = {
        "rank": fields["rank"] if fields["rank"] is not None else _rank_of(jp),
        "local_rank": fields["local_rank"] or 0,
        "world_size": fields["world_size"] or 1,
        "host": fields["host"],
        "pid": fields["pid"],
        "name": fields["name"],
        "site": site,
        "slurm": fields["slurm"],
        "start_unix": start_unix,
        "end_unix": (start_unix + duration) if start_unix is not None else None,
        "duration_s": duration,
        "steps": finite_or_none(progress.get("steps")) or 0,
        "tokens": finite_or_none(progress.get("tokens")) or 0,
        "flops": finite_or_none(progress.get("flops")) or 0,
        "devices": devices,
        "retention": h.get("retention"),
        "complete": False,
        "recovered": True,
        "notes": [
            f"recovered from the journal: samples up to {duration:.1f} s after start; anything after "
            f"the last flush (at most ~1 s) is lost"
        ]
        + (["journal ended with a torn line"] if j.torn_tail else [])
        + ([f"journal: {j.bad_lines} damaged line(s) skipped"] if j.bad_lines else [])
        + store.notes
        + [f"journal header: {n}" for n in site_notes + field_notes],
    }
    return clean_record(rec, str(jp))


#: The ranks, processes and hosts a journal header may name (more is damage): MAX_RECORD_DEVICES ranks, Linux's
#: pid_max (2^22), a host name of at most 253 characters (RFC 1035).
_HEADER_INTS = {"rank": 100_000, "local_rank": 100_000, "world_size": 100_000, "pid": 1 << 22}


def header_fields(h: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A journal header's rank, local_rank, world_size, pid, host, name and slurm as `recover` may copy them (a
    header is not trusted: it may be damaged or written by hand): numbers whole and in range, the name a plain run
    name, the host a host name, slurm a mapping of short texts; anything else is left out with a note."""
    from footprint.outputs import check_name

    out: dict[str, Any] = {}
    notes: list[str] = []
    for k, hi in _HEADER_INTS.items():
        v = h.get(k)
        ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= hi
        out[k] = v if ok else None
        if v is not None and not ok:
            notes.append(f"{k} {str(v)[:40]!r} is not a whole number from 0 to {hi:,}: left out")
    name, host, slurm = h.get("name"), h.get("host"), h.get("slurm")
    out["name"] = name if name is None or check_name(name) is None else None
    if out["name"] is None and name is not None:
        notes.append(f"name: {check_name(name)}: left out (the directory's name is used)")
    host_ok = isinstance(host, str) and 0 < len(host) <= 253 and re.fullmatch(r"[\w.:-]+", host) is not None
    out["host"] = host if host_ok else None
    if host is not None and not host_ok:
        notes.append(f"host {shown(str(host)[:40])!r} is not a host name: left out")
    slurm_ok = isinstance(slurm, dict) and all(isinstance(v, str) and len(v) <= 1000 for v in slurm.values())
    out["slurm"] = {str(k): shown(v) for k, v in slurm.items()} if slurm_ok else None
    if slurm is not None and not slurm_ok:
        notes.append("slurm: not a mapping of texts: left out")
    return out, notes


def host_info() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def slurm_info() -> dict[str, str] | None:
    keys = (
        "SLURM_JOB_ID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_NODELIST",
        "SLURM_NTASKS",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_CLUSTER_NAME",
        "SLURM_JOB_PARTITION",
    )
    found = {k.removeprefix("SLURM_").lower(): os.environ[k] for k in keys if k in os.environ}
    return found or None
