"""`footprint run -- cmd` and `footprint import`: measured runs without touching the training code.

`footprint run` measures every visible GPU and the host; it cannot see steps, tokens or FLOPs, which
stay null (not measured) unless the child reports them: any `footprint.track()` or framework
callback in the child attaches to this run (env FOOTPRINT_PARENT_RUN) instead of opening a second
run over the same GPUs, and `--count-steps` counts the child's optimizer steps with no code change
(footprint.tracking.stepcount). What the child reports is merged here into the one run.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.escaping import shown
from footprint.tracking import runrecord
from footprint.tracking.stepcount import SOURCE
from footprint.tracking.tracker import ATTACHED_DIR, PARENT_ENV, rank_mfu


def _site(grid: str | None, pue: float | None = None) -> dict[str, Any] | None:
    site: dict[str, Any] = {}
    if grid:
        from footprint.lca.electricity import resolve_zone

        site["grid"] = resolve_zone(grid, key="--grid")
    if pue is not None:
        from footprint.bounds import check

        site["pue"] = check("site.pue", pue, label="--pue")
    return site or None


def _check_runnable(program: str) -> None:
    """The command's program as the child's exec would find it (a path, or a name on PATH), executable; else one
    error before anything is recorded."""
    where = program if os.sep in program else shutil.which(program)
    if where is None:
        raise FootprintError(f"cannot start {shown(program)!r}: not found on PATH", key="cmd")
    if not os.path.isfile(where):
        why = "no such file" if not os.path.exists(where) else "not a file"
        raise FootprintError(f"cannot start {shown(program)!r}: {why}", key="cmd")
    if not os.access(where, os.X_OK):
        why = "not executable (chmod +x, or run it with its interpreter)"
        raise FootprintError(f"cannot start {shown(program)!r}: {why}", key="cmd")


def run_command(args: argparse.Namespace, exporter_for: Callable[[Any], Any] | None = None) -> int:
    """Run the command as a child process while the tracker measures every visible GPU and the host (signals,
    exit code and the child's fate if we die: `footprint.tracking.supervise`). ``exporter_for(tracker)`` starts
    what serves the live metrics (the CLI's Prometheus endpoint, an integration) and returns it, or None; it is
    stopped when the command ends."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise FootprintError("no command given: footprint run [--name N] -- python train.py", key="cmd")
    if args.period <= 0:
        raise FootprintError(f"--period must be > 0, got {args.period}", key="--period")
    from footprint.tracking.supervise import Supervisor
    from footprint.tracking.tracker import Tracker, check_name

    if args.name is not None and (why := check_name(args.name)):
        raise FootprintError(f"{why}: it names the run's directory inside --output-dir", key="--name")
    site = _site(args.grid, args.pue)
    _check_runnable(cmd[0])  # before any run directory exists: `footprint run -- ./nope` leaves no record
    with Supervisor() as sup:  # before the tracker's threads start: they inherit the blocked signals
        tracker = Tracker(name=args.name, output_dir=args.output_dir, site=site, period_s=args.period, handle_sigterm=False)
        os.environ.pop(PARENT_ENV, None)  # a `footprint run` inside another one measures for itself
        tracker.start()
        exporter = exporter_for(tracker) if exporter_for is not None else None
        try:
            proc = sup.spawn(cmd, child_env(tracker.run_dir, getattr(args, "count_steps", False)))
        except OSError as exc:  # it vanished or changed since it was checked: nothing ran, so no record is left
            tracker.stop()
            if tracker.run_dir is not None:
                shutil.rmtree(tracker.run_dir, ignore_errors=True)
            raise FootprintError(f"cannot start {shown(cmd[0])!r}: {exc.strerror}", key="cmd") from None
        try:
            code = sup.wait(proc)
        finally:
            if exporter is not None:
                exporter.stop()
            if sup.forwarded:
                names = ", ".join(signal.Signals(s).name for s in sup.forwarded)
                tracker._note(f"footprint run passed on {names} to the command")
            run = tracker.stop()
    if run:
        from footprint.lca.workload import site_pue

        run = merge_attached(tracker, run)
        e = run["energy"]
        where = f"{tracker.run_dir}/run.json" if not tracker.memory_only else f"run {tracker.name!r} (not written)"
        print(
            f"footprint: {where}: {run['duration_s']:.1f} s, GPU "
            f"{kwh(e['gpu_j'])}, total {kwh(e['total_j'])}, steps "
            f"{'not measured' if run['steps'] is None else run['steps']}, {site_pue(run.get('site'))} (exit code {code})",
            file=sys.stderr,
        )
    return code


def child_env(run_dir: Path, count_steps: bool) -> dict[str, str]:
    """The child's environment: trackers there attach to this run; with --count-steps our sitecustomize leads PYTHONPATH."""
    env = dict(os.environ)
    env[PARENT_ENV] = str(Path(run_dir).resolve())
    if count_steps:
        hook = str(Path(__file__).resolve().parent / "childhook")
        env["PYTHONPATH"] = os.pathsep.join([hook, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        env["FOOTPRINT_COUNT_STEPS"] = "1"
    return env


NOT_MEASURED = (
    "steps, tokens and FLOPs not measured: `footprint run` sees energy only; add --count-steps to count the "
    "command's optimizer steps, or call footprint.track() or a framework callback in the script (they attach to this run)"
)


def _chosen(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per process, the script's own trackers win over the optimizer hook (never both: that would count twice)."""
    by_pid: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        by_pid.setdefault(r.get("pid"), []).append(r)
    out = []
    for rs in by_pid.values():
        out += [r for r in rs if r.get("source") != SOURCE] or rs
    return out


def _energy_at(series: list[tuple[float, dict[str, float]]], t: float) -> dict[str, float]:
    """Cumulative energy per device at monotonic time ``t``, linearly interpolated on the sampler's series."""
    if not series:
        return {}
    before = [p for p in series if p[0] <= t] or series[:1]
    after = [p for p in series if p[0] >= t] or series[-1:]
    (t0, e0), (t1, e1) = before[-1], after[0]
    f = 0.0 if t1 <= t0 else (t - t0) / (t1 - t0)
    return {u: e0[u] + f * (e1.get(u, e0[u]) - e0[u]) for u in e0}


def merge_attached(tracker: Any, run: dict[str, Any]) -> dict[str, Any]:
    """Fold the child's attached records (steps, tokens, FLOPs, windows) into run.json; null + a note when none came.
    A damaged attached record is left out with a note; a run.json that cannot be written leaves the record in memory."""
    files = sorted((tracker.run_dir / ATTACHED_DIR).glob("*.json")) if not tracker.memory_only else []
    damaged: list[str] = []
    readable = []
    for f in files:
        try:
            readable.append(runrecord.clean_record(runrecord.read_json(f), str(f)))
        except FootprintError as exc:
            damaged.append(f"{ATTACHED_DIR}/{f.name} skipped: {exc.detail}")
    records = _chosen(readable)
    run["notes"] = [*run.get("notes", []), *damaged]
    if not records:
        run.update(steps=None, tokens=None, flops=None, hardware_flops=None, mfu=None)
        run["notes"] = [*run.get("notes", []), NOT_MEASURED]
    else:
        per_rank: dict[Any, int] = {}
        for r in records:
            per_rank[r.get("rank", 0)] = per_rank.get(r.get("rank", 0), 0) + int(r.get("steps") or 0)
        tokens = sum(int(r.get("tokens") or 0) for r in records)
        flops = sum(float(r.get("flops") or 0) for r in records)
        series = tracker._sampler.series() if tracker._sampler is not None else []
        windows = []
        for r in records:
            t0 = runrecord.finite_or_none(r.get("t0_monotonic"), float("-inf"))
            for w in r.get("windows", []) if t0 is not None else []:
                start = t0 + float(w.get("start_s") or 0.0)
                e0, e1 = _energy_at(series, start), _energy_at(series, start + float(w.get("duration_s") or 0.0))
                windows.append({**w, "start_s": start - tracker._t0, "energy_j": {u: e1[u] - e0.get(u, 0.0) for u in e1}})
        sources = sorted({str(r.get("source")) for r in records})
        run.update(
            steps=max(per_rank.values()) or None,
            tokens=tokens or None,
            flops=flops or None,
            hardware_flops=sum(float(r.get("hardware_flops") or 0) for r in records) or None,
            flops_method=next((r["flops_method"] for r in records if r.get("flops_method")), None),
            step_times=next((r["step_times"] for r in records if r.get("step_times")), None),
            windows=[*run.get("windows", []), *windows],
            mfu=_attached_mfu(run, records, flops),
        )
        notes = [f"steps, tokens and FLOPs reported by the command ({', '.join(sources)}), {len(records)} process(es)"]
        if not tokens:
            notes.append("tokens not measured (the optimizer hook counts steps only): null, not zero")
        run["notes"] = [*run.get("notes", []), *notes, *(n for r in records for n in r.get("notes", []))]
    if not tracker.memory_only and not tracker._write(tracker.run_dir / "run.json", run):
        run["notes"].append("not written to disk (no writable directory): this record exists in memory only")
    return run


def _attached_mfu(run: dict[str, Any], records: list[dict[str, Any]], flops: float) -> dict[str, Any] | None:
    """Run MFU over all measured GPUs; steady state per process, each taken to drive an equal share of them."""
    gpus = [d for d in run.get("devices", []) if d.get("component") == "gpu"]
    duration = float(run.get("duration_s") or 0.0)
    if not flops or not gpus or duration <= 0:
        return None
    from footprint.lca.database import db

    dtype, origin = records[0].get("dtype") or "bf16", records[0].get("dtype_source") or "assumed"
    try:
        peak = db().find_gpu(gpus[0]["name"]).peak_flops(dtype)
    except Exception as exc:
        return {"note": f"no dense {dtype} peak for {gpus[0]['name']}: {exc}"}
    share = peak * len(gpus) / len(records)
    steady = [rank_mfu([tuple(x) for x in r.get("rates", [])], share, dtype, origin, r.get("flops_method")) for r in records]
    values = [s["steady_state_mfu"] for s in steady if s["steady_state_mfu"] is not None]
    hw = float(run.get("hardware_flops") or flops)
    return {
        "dtype": dtype,
        "dtype_source": origin,
        "peak_tflops_per_gpu": peak / 1e12,
        "method": records[0].get("flops_method"),
        "run_mfu": flops / (duration * len(gpus) * peak),
        "run_hfu": hw / (duration * len(gpus) * peak),
        "steady_state_mfu": sum(values) / len(values) if values else None,
        "steady_state_hfu": None,
        "definition": "run: job FLOPs / (all measured GPU-hours x dense peak); steady state: median step FLOP/s of "
        "each process over the peak of an equal share of the measured GPUs, mean over processes",
    }


def kwh(j: float | None) -> str:
    return "n/a" if j is None else f"{j / 3.6e6:.4g} kWh"


def import_log(args: argparse.Namespace) -> int:
    """`footprint import`: a run directory from a log. An nvidia-smi log is a time series: its readings are written
    as the tracker writes its own (journal and Parquet segments), so reports and the Runs page draw its power."""
    from footprint.outputs import atomic_dir, check_dir_target, shown

    out = check_dir_target(args.output)  # not '', '/', a symlink, a file, a pipe or a device
    if out.is_dir() and any(out.iterdir()):
        held = "a run record" if (out / "run.json").exists() else "other files"
        raise FootprintError(f"already holds {held}: choose a new or empty directory", str(out), "-o")
    series = None
    if args.import_command == "nvidia-smi":
        record, series = from_nvidia_smi(Path(args.file), args.utc_offset, _site(args.grid), args.gpu, with_series=True)
    else:
        record = from_codecarbon(Path(args.file), args.gpu, args.gpu_count)
    from footprint.bounds import record_problems

    problems = record_problems(record)
    if problems:  # the plausibility table (footprint.bounds): refused whole, nothing written
        raise FootprintError(f"{problems[0]} (nothing written)", args.file)
    record["name"] = shown(record.get("name") or out.resolve().name)
    with atomic_dir(out) as tmp:  # claimed (one of N concurrent imports wins), built whole beside it, renamed in
        if series is not None:
            record["samples"] = write_log_samples(tmp, record, series)
        runrecord.write_json(tmp / "run.json", record)
    e = record["energy"]
    samples = f", {record['samples']['readings']:,} power readings" if series is not None else ""
    rows = record.get("imported_rows") or 1
    summed = f", {rows} rows of one job summed (one per process)" if rows > 1 else ""
    what = f"{_devices_text(record['devices'])}, {record['duration_s']:.1f} s, GPU energy {kwh(e['gpu_j'])}"
    print(f"wrote {shown(out)}/run.json: {what}{samples}{summed}")
    return 0


def _devices_text(devices: list[dict[str, Any]]) -> str:
    """'2 GPUs + host CPU, RAM': what a device count covers, so 4 devices from a 2-GPU log is no surprise."""
    gpus = sum(1 for d in devices if d.get("component", "gpu") == "gpu")
    host = [str(d.get("component")).upper() for d in devices if d.get("component", "gpu") != "gpu"]
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" + (f" + host {', '.join(host)}" if host else "")


LOCAL_TIME = "local time as logged (--utc-offset not given)"


def write_log_samples(run_dir: Path, record: dict[str, Any], series: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """A log's readings (per device: times in Unix seconds, power in W) written through the tracker's own journal
    writer (`meters.journal.JournalWriter`, rolled into Parquet segments), as rank 0 of the run directory: the
    cumulative energy of each reading is the trapezoid integral up to it, so the samples' energy is the record's.
    Every reading is kept (an imported log is evidence), in bounded memory (one segment at a time)."""
    import numpy as np

    from meters.base import DeviceInfo, DeviceSample
    from meters.importers import interval_energy, split_gap_s
    from meters.journal import JournalWriter
    from meters.segments import Retention

    devices = {d["uuid"]: d for d in record["devices"]}
    keys = [d["uuid"] for d in record["devices"] if d["uuid"] in series]
    t0 = min(float(series[u][0][0]) for u in keys)
    host = str(devices[keys[0]].get("host") or "imported log")  # the readers key a rank's devices by host
    meta = {"rank": 0, "local_rank": 0, "world_size": 1, "host": host, "name": record.get("name"), "t0": t0, "start_unix": t0}
    _, journal = runrecord.rank_paths(run_dir, 0)
    writer = JournalWriter(journal, meta=meta, clock=lambda: t0, retention=Retention(raw_s=None, second_s=None))
    info = [
        DeviceInfo(
            uuid=u, name=devices[u]["name"], index=devices[u].get("index"), method=devices[u]["method"], power_scope="board"
        )
        for u in keys
    ]
    writer.set_devices(t0, info)
    # every reading in time order, with the cumulative trapezoid energy of its device up to it
    ts, idx, energy, power = [], [], [], []
    for i, u in enumerate(keys):
        t, p = (np.asarray(x, dtype=float) for x in series[u])
        cum = np.concatenate([[0.0], np.cumsum(interval_energy(t, p, split_gap_s(t))[0])])  # gaps not bridged
        ts.append(t)
        idx.append(np.full(len(t), i))
        energy.append(cum)
        power.append(p)
    t_all, i_all, e_all, p_all = (np.concatenate(x) for x in (ts, idx, energy, power))
    order = np.argsort(t_all, kind="stable")
    t_all, i_all, e_all, p_all = t_all[order], i_all[order], e_all[order], p_all[order]
    cuts = np.flatnonzero(np.diff(t_all)) + 1  # one journal tick per distinct timestamp
    for a, b in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [len(t_all)]]).tolist(), strict=True):
        t = float(t_all[a])
        writer.write_samples(t, [DeviceSample(keys[int(i_all[k])], t, float(e_all[k]), float(p_all[k])) for k in range(a, b)])
    totals = {u: float(energy[i][-1]) for i, u in enumerate(keys)}
    writer.close(float(t_all[-1]), totals=totals)
    if writer.errors:
        raise FootprintError(f"could not write the samples: {writer.errors[0]}", str(run_dir))
    return {
        "layout": runrecord.SAMPLES_LAYOUT,
        "retention": writer.retention.to_dict() if writer.retention else None,
        "readings": len(t_all),
        "source": "the imported log, every reading",
    }


def _imported_energy(value: Any) -> float | None:
    """An imported energy in joules: a finite number >= 0, else None (not available, never NaN, negative or inf)."""
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if v == v and 0 <= v < float("inf") else None


def from_nvidia_smi(
    path: Path, utc_offset: str | None, site: dict[str, Any] | None, gpu: str | None = None, with_series: bool = False
) -> Any:
    """The run record of an nvidia-smi log; with ``with_series`` also (record, {uuid: (times, power)}) to write."""
    from footprint.inputs import sniff_text
    from meters.importers import _utc_offset, integrate_energy, power_series, read_nvidia_smi_csv

    sniff_text(path, "nvidia-smi CSV log")  # the input contract: a readable UTF-8 text file, or one clear error
    if utc_offset is not None:
        try:
            _utc_offset(utc_offset)
        except ValueError as exc:
            raise FootprintError(str(exc), key="--utc-offset") from None
    try:
        df = read_nvidia_smi_csv(path, utc_offset=utc_offset)
        per_device = integrate_energy(df)
        series = power_series(df, df.attrs.get("power_column") or "power_w")
    except (ValueError, KeyError) as exc:
        raise FootprintError(f"not an nvidia-smi CSV log this importer understands ({exc})", str(path)) from None
    dropped = df.attrs.get("dropped") or {}
    left_out = "; ".join(f"{n:,} {why}" for why, n in dropped.items())
    if not any(_imported_energy(r["energy_j"]) is not None for r in per_device.values()):
        why = f" (lines left out: {left_out})" if left_out else ""
        raise FootprintError(
            "no device has two timestamped readings with a power value close enough in time to integrate: no energy "
            f"to import{why} (nothing written)",
            str(path),
        )
    devices, notes = [], [f"lines of the log left out: {left_out}"] if left_out else []
    if gpu:
        from footprint.lca.database import db

        gpu = db().find_gpu(gpu, str(path), "--gpu").name
    names = df.groupby("device")["name"].first().to_dict() if "name" in df else {}
    uuids = df.groupby("device")["uuid"].first().to_dict() if "uuid" in df else {}
    indices = df.groupby("device")["index"].first().to_dict() if "index" in df else {}
    for dev, r in per_device.items():
        index = indices.get(dev, dev)
        devices.append(
            {
                "index": int(index) if str(index).isdigit() else None,
                "name": str(gpu or names.get(dev) or "unknown GPU"),
                "uuid": str(uuids.get(dev) or f"nvidia-smi:{dev}"),
                "component": "gpu",
                "host": path.name,  # the log names no host: its file stands in (labels, the samples' rank)
                "method": f"nvidia-smi {r['method']}",
                "measured": _imported_energy(r["energy_j"]) is not None,
                "energy_j": _imported_energy(r["energy_j"]),
                "duration_s": r["duration_s"],
                "reliable": r.get("reliable", True),
                "notes": list(r.get("notes", [])),
            }
        )
        notes += [f"device {dev}: {n}" for n in r.get("notes", [])]
    duration = max((d["duration_s"] for d in devices), default=0.0)
    record = {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": None,
        "source_file": str(path),
        "imported_from": "nvidia-smi",
        # nvidia-smi writes local time without its offset: UTC only where --utc-offset said how to get there
        "time_zone": "UTC" if utc_offset is not None else LOCAL_TIME,
        "duration_s": duration,
        "steps": None,
        "tokens": None,
        "devices": devices,
        "energy": runrecord.energy_summary(devices),
        "ranks": [],
        "hosts": [],
        "site": site,
        "notes": ["imported from an nvidia-smi log: GPU board power only (no CPU/RAM)", *notes],
    }
    if not with_series:
        return record
    by_uuid = {
        d["uuid"]: (series[dev][0], series[dev][1])
        for d, dev in zip(devices, per_device, strict=True)
        if len(series[dev][0]) >= 2
    }
    return record, by_uuid


def _codecarbon_job(df: Any) -> tuple[Any, int]:
    """The row of the log's last job and how many rows it sums. codecarbon appends one row per flush of one tracker
    (cumulative, the same run_id: the last is kept) and one row per process (each rank of a torchrun job has its own
    tracker and run_id): the last row's job is every row of its project whose time window overlaps its own."""
    import pandas as pd

    if "run_id" in df:
        df = df.drop_duplicates("run_id", keep="last")
    last = df.iloc[-1]
    if len(df) == 1 or "timestamp" not in df or pd.isna(last["timestamp"]):
        return last, 1
    end = df["timestamp"]
    start = end - pd.to_timedelta(pd.to_numeric(df["duration_s"], errors="coerce").fillna(0.0), unit="s")
    same = (start <= end.iloc[-1]) & (end >= start.iloc[-1])
    if "project_name" in df:
        same &= df["project_name"] == last["project_name"]
    job = df[same]
    if len(job) <= 1:
        return last, 1
    row = last.copy()
    for col in ("energy_j", "cpu_energy_j", "gpu_energy_j", "ram_energy_j", "emissions_kg", "gpu_count"):
        if col in job:
            row[col] = pd.to_numeric(job[col], errors="coerce").sum(min_count=1)
    row["duration_s"] = pd.to_numeric(job["duration_s"], errors="coerce").max()
    return row, len(job)


def from_codecarbon(path: Path, gpu: str | None, count: int) -> dict[str, Any]:
    from footprint.inputs import MAX_RECORD_DEVICES, sniff_text
    from meters.importers import read_codecarbon_csv

    sniff_text(path, "codecarbon emissions.csv")  # the input contract: a readable UTF-8 text file, or one clear error
    try:
        df = read_codecarbon_csv(path)
    except (ValueError, KeyError) as exc:
        raise FootprintError(f"not a codecarbon emissions.csv ({exc})", str(path)) from None
    if df.empty:
        raise FootprintError("no row in this codecarbon emissions.csv (nothing written)", str(path))
    row, rows = _codecarbon_job(df)
    duration = _imported_energy(row.get("duration_s"))
    if duration is None:
        raise FootprintError(f"expected seconds >= 0, got {row.get('duration_s')!r} (nothing written)", str(path), "duration")
    notes = ["imported from codecarbon: CPU/RAM are codecarbon's estimates unless it read RAPL"]
    if rows > 1:
        notes.append(
            f"{rows} rows of one job summed (project {row.get('project_name')!r}: concurrent rows with distinct run_ids, "
            "one per process as codecarbon writes them under torchrun): energies and GPU counts added, duration the "
            "longest; where every process measured every GPU of its host (codecarbon without gpu_ids), GPU energy "
            "is counted once per process"
        )
    recorded = str(row.get("gpu_model") or "").strip()
    if not gpu and recorded and recorded.lower() != "nan":
        gpu = recorded.split(",")[0].split(" x ")[-1].strip()
        logged = _imported_energy(row.get("gpu_count"))
        count = int(logged) if logged is not None and 1 <= logged <= MAX_RECORD_DEVICES else count
    devices = _codecarbon_gpus(row, gpu, count, path, notes) if gpu else []
    devices += _codecarbon_host(row, notes)
    iso = row.get("country_iso_code")
    site = {"grid": str(iso)} if isinstance(iso, str) and iso.strip() else None
    if not gpu:
        notes.append("no GPU in this codecarbon log: give --gpu (and --gpu-count) to assess embodied impacts")
    return {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": str(row.get("project_name") or "") or None,
        "source_file": str(path),
        "imported_from": "codecarbon",
        "imported_rows": rows,
        "duration_s": duration,
        "steps": None,
        "tokens": None,
        "devices": devices,
        "energy": runrecord.energy_summary(devices),
        "ranks": [],
        "hosts": [],
        "site": site,
        "notes": notes,
    }


def _codecarbon_gpus(row: Any, gpu: str, count: int, path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """The log's GPUs as devices: codecarbon's GPU energy shared among them, or "not measured" (never 0 J)."""
    from footprint.lca.database import db

    gpu_j = _imported_energy(row.get("gpu_energy_j"))
    card = db().find_gpu(gpu, str(path), "--gpu")
    # codecarbon writes 0 J when it saw no GPU: that is "not measured", never 8 GPUs measured at 0 J
    measured = gpu_j is not None and gpu_j > 0
    if not measured:
        notes.append(
            f"this codecarbon log has no GPU energy ({row.get('gpu_energy_j')!r} J): the {count} {card.name} GPU(s) "
            "are recorded for their embodied impacts, their energy is not available (not zero)"
        )
    return [
        {
            "index": i,
            "name": card.name,
            "uuid": f"codecarbon:gpu{i}",
            "component": "gpu",
            "method": "codecarbon" if measured else "not measured",
            "measured": measured,
            "energy_j": gpu_j / count if measured else None,
        }
        for i in range(count)
    ]


def _codecarbon_host(row: Any, notes: list[str]) -> list[dict[str, Any]]:
    """The host's CPU and RAM as codecarbon estimated them (an unusable value is "not available")."""
    devices = []
    for comp, col in (("cpu", "cpu_energy_j"), ("ram", "ram_energy_j")):
        if col in row:
            energy = _imported_energy(row[col])
            if energy is None and row[col] == row[col]:
                notes.append(f"{col.removesuffix('_j')} {row[col]!r} is not an energy >= 0: not available")
            devices.append(
                {
                    "name": f"host {comp}",
                    "uuid": f"codecarbon:{comp}",
                    "component": comp,
                    "method": "codecarbon",
                    "measured": False,
                    "energy_j": energy,
                }
            )
    return devices
