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
import signal
import sys
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.tracking import runrecord
from footprint.tracking.stepcount import SOURCE
from footprint.tracking.tracker import ATTACHED_DIR, PARENT_ENV, rank_mfu


def _site(grid: str | None, pue: float | None = None) -> dict[str, Any] | None:
    site: dict[str, Any] = {}
    if grid:
        from footprint.lca.electricity import resolve_zone

        site["grid"] = resolve_zone(grid, key="--grid")
    if pue is not None:
        if pue < 1:
            raise FootprintError(f"--pue must be >= 1, got {pue}", key="--pue")
        site["pue"] = pue
    return site or None


def run_command(args: argparse.Namespace) -> int:
    """Run the command as a child process while the tracker measures every visible GPU and the host (signals,
    exit code and the child's fate if we die: `footprint.tracking.supervise`)."""
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
    with Supervisor() as sup:  # before the tracker's threads start: they inherit the blocked signals
        tracker = Tracker(name=args.name, output_dir=args.output_dir, site=site, period_s=args.period, handle_sigterm=False)
        os.environ.pop(PARENT_ENV, None)  # a `footprint run` inside another one measures for itself
        tracker.start()
        exporter = _prometheus(tracker, getattr(args, "prometheus_port", None))
        try:
            proc = sup.spawn(cmd, child_env(tracker.run_dir, getattr(args, "count_steps", False)))
        except OSError as exc:
            tracker.stop()
            raise FootprintError(f"cannot start {cmd[0]!r}: {exc.strerror}", key="cmd") from None
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
        run = merge_attached(tracker, run)
        e = run["energy"]
        where = f"{tracker.run_dir}/run.json" if not tracker.memory_only else f"run {tracker.name!r} (not written)"
        print(
            f"footprint: {where}: {run['duration_s']:.1f} s, GPU "
            f"{_kwh(e['gpu_j'])}, total {_kwh(e['total_j'])}, steps "
            f"{'not measured' if run['steps'] is None else run['steps']} (exit code {code})",
            file=sys.stderr,
        )
    return code


def _prometheus(tracker: Any, port: int | None) -> Any:
    """The live-metrics endpoint on 127.0.0.1:port, if asked; a port already taken is a clear error."""
    if port is None:
        return None
    try:
        from footprint.integrations.prometheus import PrometheusExporter

        return PrometheusExporter(tracker, port=port).start()
    except ImportError:
        tracker.stop()
        raise FootprintError("needs prometheus_client: pip install 'footprint[integrations]'", key="--prometheus-port") from None
    except OSError as exc:
        tracker.stop()
        raise FootprintError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", key="--prometheus-port") from None


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


def _kwh(j: float | None) -> str:
    return "n/a" if j is None else f"{j / 3.6e6:.4g} kWh"


def import_log(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if args.import_command == "nvidia-smi":
        record = from_nvidia_smi(Path(args.file), args.utc_offset, _site(args.grid), args.gpu)
    else:
        record = from_codecarbon(Path(args.file), args.gpu, args.gpu_count)
    record["name"] = record.get("name") or out.name
    runrecord.write_json(out / "run.json", record)
    e = record["energy"]
    print(f"wrote {out}/run.json: {len(record['devices'])} devices, {record['duration_s']:.1f} s, GPU energy {_kwh(e['gpu_j'])}")
    return 0


def _imported_energy(value: Any) -> float | None:
    """An imported energy in joules: a finite number >= 0, else None (not available, never NaN, negative or inf)."""
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if v == v and 0 <= v < float("inf") else None


def from_nvidia_smi(path: Path, utc_offset: str | None, site: dict[str, Any] | None, gpu: str | None = None) -> dict[str, Any]:
    from footprint.inputs import sniff_text
    from meters.importers import _utc_offset, integrate_energy, read_nvidia_smi_csv

    sniff_text(path, "nvidia-smi CSV log")  # the input contract: a readable UTF-8 text file, or one clear error
    if utc_offset is not None:
        try:
            _utc_offset(utc_offset)
        except ValueError as exc:
            raise FootprintError(str(exc), key="--utc-offset") from None
    try:
        df = read_nvidia_smi_csv(path, utc_offset=utc_offset)
        per_device = integrate_energy(df)
    except (ValueError, KeyError) as exc:
        raise FootprintError(f"not an nvidia-smi CSV log this importer understands ({exc})", str(path)) from None
    if not any(_imported_energy(r["energy_j"]) is not None for r in per_device.values()):
        raise FootprintError(
            "no device has two timestamped readings with a power value: no energy to import (nothing written)", str(path)
        )
    devices, notes = [], []
    if gpu:
        from footprint.lca.database import db

        gpu = db().find_gpu(gpu, str(path), "--gpu").name
    names = df.groupby("device")["name"].first().to_dict() if "name" in df else {}
    uuids = df.groupby("device")["uuid"].first().to_dict() if "uuid" in df else {}
    for dev, r in per_device.items():
        devices.append(
            {
                "index": int(dev) if str(dev).isdigit() else None,
                "name": str(gpu or names.get(dev) or "unknown GPU"),
                "uuid": str(uuids.get(dev) or f"nvidia-smi:{dev}"),
                "component": "gpu",
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
    return {
        "format": runrecord.FORMAT,
        "version": runrecord.VERSION,
        "name": None,
        "source_file": str(path),
        "imported_from": "nvidia-smi",
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
    row = df.iloc[-1]
    duration = _imported_energy(row.get("duration_s"))
    if duration is None:
        raise FootprintError(f"expected seconds >= 0, got {row.get('duration_s')!r} (nothing written)", str(path), "duration")
    devices: list[dict[str, Any]] = []
    notes = ["imported from codecarbon: CPU/RAM are codecarbon's estimates unless it read RAPL"]
    recorded = str(row.get("gpu_model") or "").strip()
    if not gpu and recorded and recorded.lower() != "nan":
        gpu = recorded.split(",")[0].split(" x ")[-1].strip()
        logged = _imported_energy(row.get("gpu_count"))
        count = int(logged) if logged is not None and 1 <= logged <= MAX_RECORD_DEVICES else count
    gpu_j = _imported_energy(row.get("gpu_energy_j"))
    if gpu:
        from footprint.lca.database import db

        card = db().find_gpu(gpu, str(path), "--gpu")
        # codecarbon writes 0 J when it saw no GPU: that is "not measured", never 8 GPUs measured at 0 J
        measured = gpu_j is not None and gpu_j > 0
        if not measured:
            notes.append(
                f"this codecarbon log has no GPU energy ({row.get('gpu_energy_j')!r} J): the {count} {card.name} GPU(s) "
                "are recorded for their embodied impacts, their energy is not available (not zero)"
            )
        devices += [
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
