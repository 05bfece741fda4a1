"""`footprint.track`: measure a training job's energy without ever hurting it.

    with footprint.track(name="llama-ft", output_dir="runs", site={"grid": "FRA"}) as t:
        for batch in loader:
            ...
            t.step(tokens=batch_tokens)
    footprint.assess(t.run)

Principles: the tracker never raises into user code (every public method swallows and records its
own errors), never does I/O on the step (the sampler thread journals counters), starts in
milliseconds (meters and journal only), stops in O(one segment) whatever the run's length (the
journal rolls into Parquet segments as it goes, see `meters.segments`), and makes no network call.
Under torchrun each rank measures only its own GPU and host meters run once per node; the job
record (each GPU once) is written by rank 0 when a process group is up, else `footprint merge`.

Inside `footprint run` (env FOOTPRINT_PARENT_RUN) a tracker *attaches*: the parent already measures
every GPU, so the child measures no energy and hands its steps, tokens, FLOPs and windows to the
parent's run record (`attached/`), instead of writing a second run over the same devices.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from footprint.tracking import runrecord

log = logging.getLogger("footprint.tracking.tracker")
SHORT_WINDOW_S = 1.0  # below this NVML energy is unreliable (sensor averages ~25 ms of every 100 ms)
PARENT_ENV = "FOOTPRINT_PARENT_RUN"  # set by `footprint run` for its child: trackers there attach to it
ATTACHED_DIR = "attached"
DEFAULT_DTYPE = "bf16"
#: window name -> kind (the training story's energy shares); any other name is its own kind
WINDOW_KINDS = {
    "train": "train",
    "eval": "eval",
    "evaluate": "eval",
    "evaluation": "eval",
    "validation": "eval",
    "sanity_check": "eval",
    "checkpoint": "checkpoint",
    "save": "checkpoint",
}
_ACTIVE: list[Tracker] = []


def current() -> Tracker | None:
    """The tracker running in this process (started, not stopped), which callbacks join instead of opening another."""
    return next((t for t in reversed(_ACTIVE) if not t._stopped), None)


@dataclass(frozen=True)
class DistInfo:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1 or "LOCAL_RANK" in os.environ


def dist_info() -> DistInfo:
    """Rank layout from torchrun (RANK, LOCAL_RANK, WORLD_SIZE) or SLURM (SLURM_PROCID, SLURM_LOCALID)."""
    env = os.environ

    def num(*keys: str, default: int) -> int:
        for k in keys:
            if env.get(k, "").strip().lstrip("-").isdigit():
                return int(env[k])
        return default

    return DistInfo(
        rank=num("RANK", "SLURM_PROCID", default=0),
        local_rank=num("LOCAL_RANK", "SLURM_LOCALID", default=0),
        world_size=num("WORLD_SIZE", "SLURM_NTASKS", default=1),
        local_world_size=num("LOCAL_WORLD_SIZE", default=1),
    )


def gpus_for_rank(d: DistInfo, gpus: Any = None) -> list[int | str] | None:
    """The NVML devices this process measures: explicit `gpus`, else its CUDA device under torchrun
    (LOCAL_RANK, or torch's current device, through CUDA_VISIBLE_DEVICES), else the visible ones (None: all)."""
    if gpus is not None:
        return [gpus] if isinstance(gpus, (int, str)) else list(gpus)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    as_nvml: Callable[[str], int | str] = lambda v: int(v) if v.isdigit() else v  # noqa: E731
    if d.distributed:
        cuda_index = d.local_rank
        torch = sys.modules.get("torch")
        if torch is not None:
            with contextlib.suppress(Exception):
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    cuda_index = torch.cuda.current_device()
        if visible:
            return [as_nvml(visible[cuda_index])] if cuda_index < len(visible) else []
        return [cuda_index]
    return [as_nvml(v) for v in visible] if visible else None


class Tracker:
    """Measures energy per device and per step; see the module docstring. Never raises."""

    def __init__(
        self,
        name: str | None = None,
        output_dir: str | os.PathLike[str] = "runs",
        site: dict[str, Any] | str | None = None,
        gpus: Any = None,
        period_s: float = 0.1,
        host: bool = True,
        nvml: Any = None,
        handle_sigterm: bool = True,
        model: dict[str, Any] | None = None,
        dtype: str | None = None,
        source: str = "footprint.track",
        retention: Any = None,
    ) -> None:
        self.dist = dist_info()
        self.retention = retention  # meters.segments.Retention or a dict of its fields; None: the defaults
        self.name = name or _default_name(self.dist)
        self.run_dir = Path(output_dir) / self.name
        self.site = {"grid": site} if isinstance(site, str) else (dict(site) if site else None)
        self.gpus = gpus
        self.period_s = period_s
        self.measure_host = host
        self._nvml = nvml
        self._handle_sigterm = handle_sigterm
        self.steps = 0
        self.tokens = 0
        self.flops = 0.0
        self.hardware_flops = 0.0
        self.dtype = dtype
        self.dtype_source = "given" if dtype else None
        self._dtype_origin: str | None = None
        self.source = source
        self.attached: Path | None = None  # the parent run directory when inside `footprint run`
        self.flops_method: str | None = None
        self.step_times: deque[float] = deque(maxlen=4096)
        self.step_flops: deque[tuple[float, float, float]] = deque(maxlen=4096)  # (t, model, hardware)
        self._per_token: tuple[float, float] | None = None
        self._watched: tuple[float, int | None] | None = None  # (FLOPs, tokens) of the counted step
        self._watch: Any = None
        self._open: dict[str, tuple[tuple[float, dict[str, float]], str]] = {}
        if model:
            self._per_token = _per_token(model)
        self.windows: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.record: dict[str, Any] | None = None
        self.run: dict[str, Any] | None = None
        self._sampler: Any = None
        self._t0 = 0.0
        self._start_unix = 0.0
        self._stopped = False
        self._lock = threading.Lock()
        self._prev_sigterm: Any = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Tracker:
        try:
            parent = os.environ.get(PARENT_ENV)
            if parent and self._nvml is None:
                self._attach(Path(parent))
            else:
                self._start()
            _ACTIVE.append(self)
        except Exception as exc:  # never into user code
            self._note(f"tracker could not start: {type(exc).__name__}: {exc}")
        return self

    def _attach(self, parent: Path) -> None:
        """Inside `footprint run`: count steps, tokens, FLOPs and windows; the parent measures the energy."""
        self.attached = parent
        self.run_dir = parent
        self._t0 = time.monotonic()
        self._start_unix = time.time()
        self._note(f"attached to the `footprint run` measuring this process ({parent}): energy is measured there")
        atexit.register(self._at_exit)

    def _start(self) -> None:
        # pyarrow (imported by the segment writer) imports concurrent.futures, which cannot register its
        # exit hook once the interpreter is shutting down (a stop from atexit): import it now (~3 ms).
        import concurrent.futures.thread  # noqa: F401

        from meters.nvml import NvmlMeter
        from meters.sampler import Sampler

        d = self.dist
        meters: list[Any] = []
        selected = gpus_for_rank(d, self.gpus)
        if selected != []:
            meters.append(NvmlMeter(nvml=self._nvml, devices=selected, poll_period_s=min(self.period_s, 0.1)))
        else:
            self._note(f"rank {d.rank}: no GPU visible for LOCAL_RANK {d.local_rank}")
        if self.measure_host and d.local_rank == 0:  # host CPU/RAM once per node
            from meters.cpu_estimate import host_meters

            meters.extend(host_meters())
        self._record_path, journal = runrecord.rank_paths(self.run_dir, d.rank)
        self._t0 = time.monotonic()
        self._start_unix = time.time()
        meta = {
            "rank": d.rank,
            "local_rank": d.local_rank,
            "world_size": d.world_size,
            "name": self.name,
            "t0": self._t0,
            "start_unix": self._start_unix,
            "site": self.site,
            "slurm": runrecord.slurm_info(),
            **runrecord.host_info(),
        }
        from meters.segments import Retention

        try:
            retention = Retention.of(self.retention)
        except ValueError as exc:
            self._note(f"{exc}; the default retention is used")
            retention = Retention()
        meta["retention"] = retention.to_dict()
        self._sampler = self._new_sampler(Sampler, meters, journal, meta, retention)
        self._sampler.start()
        atexit.register(self._at_exit)
        if self._handle_sigterm and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(Exception):
                self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _new_sampler(self, sampler_cls: Any, meters: list[Any], journal: Path, meta: dict[str, Any], retention: Any) -> Any:
        """The sampler of this rank (a seam for replaying a recorded or synthetic run through the real writer)."""
        return sampler_cls(
            meters, period_s=self.period_s, journal_path=journal, meta=meta, progress=self._progress, retention=retention
        )

    def _progress(self) -> dict[str, Any]:
        return {"steps": self.steps, "tokens": self.tokens, "flops": self.flops}

    def begin_step(self) -> None:
        """Mark the start of an optimizer step (callbacks call it at the framework's boundary): a pending
        ``watch`` counts from here to the next ``step()``, every micro-batch included. O(1), no I/O."""
        try:
            if self._watch is not None and self._watch.pending:
                self._watch.begin()
        except Exception as exc:
            self._note(f"begin_step: {exc}")

    def step(self, tokens: int | None = None, flops: float | None = None) -> None:
        """Mark the end of an optimizer step (tokens and FLOPs of this rank). O(1), no I/O.

        FLOPs come from ``flops``, else tokens x the analytical FLOPs per token of ``track(model=...)``,
        else the step ``watch(model)`` measured (scaled by this step's tokens when both are known).
        """
        try:
            now = time.monotonic()
            if self._watch is not None and self._watch.mode is not None:
                self._finish_watch(tokens)
            hw = None
            if flops is None and tokens and self._per_token:
                flops, hw = tokens * self._per_token[0], tokens * self._per_token[1]
                self.flops_method = self.flops_method or "analytical"
            elif flops is None and self._watched:
                counted, counted_tokens = self._watched
                flops = counted * tokens / counted_tokens if tokens and counted_tokens else counted
                self.flops_method = self.flops_method or (
                    "measured: FlopCounterMode over one training step" + (", scaled by tokens" if counted_tokens else "")
                )
            elif flops is not None:
                self.flops_method = self.flops_method or "given to step()"
            self.steps += 1
            if tokens:
                self.tokens += int(tokens)
            if flops:
                self.flops += float(flops)
                self.hardware_flops += float(hw if hw is not None else flops)
                self.step_flops.append((now, float(flops), float(hw if hw is not None else flops)))
            self.step_times.append(now)
        except Exception as exc:
            self._note(f"step: {exc}")

    def watch(self, model: Any) -> None:
        """Measure the FLOPs of one training step of ``model`` and reuse them (see ``footprint.tracking.watch``)."""
        try:
            from footprint.tracking.watch import StepWatch

            if self._watch is not None:
                self._watch.remove()
            self._watch = StepWatch(model, self._note)
        except Exception as exc:
            self._note(f"watch: {exc}")

    def _finish_watch(self, tokens: int | None) -> None:
        w = self._watch
        total = w.end(tokens)
        if total is not None:
            self._watched = w.result
        if w.dtype and self.dtype_source in (None, "framework"):
            self.dtype, self.dtype_source = w.dtype

    def set_dtype(self, dtype: str, source: str) -> None:
        """A dtype the framework states (e.g. Trainer's bf16 flag); a dtype given to track() or seen by watch wins."""
        if self.dtype_source is None:
            self.dtype, self.dtype_source = dtype, "framework"
            self._dtype_origin = source

    # ---- windows --------------------------------------------------------------------------------
    def begin_window(self, name: str, kind: str | None = None) -> None:
        """Open a named window (e.g. "eval", "checkpoint"); ``end_window(name)`` closes it. Never raises."""
        try:
            start = self._edge()
            with self._lock:
                self._open[name] = (start, kind or WINDOW_KINDS.get(name, name))
        except Exception as exc:
            self._note(f"begin_window: {exc}")

    def end_window(self, name: str) -> None:
        """Close the window ``name`` and record its duration and energy per device (no-op if not open)."""
        try:
            with self._lock:
                opened = self._open.pop(name, None)
            if opened is not None:
                self._add_window(name, opened[0], self._edge(), opened[1])
        except Exception as exc:
            self._note(f"end_window: {exc}")

    def cancel_window(self, name: str) -> None:
        """Forget an open window that turned out not to happen (e.g. a checkpoint the framework skipped)."""
        with self._lock:
            self._open.pop(name, None)

    def window_open(self, name: str) -> bool:
        return name in self._open

    @contextlib.contextmanager
    def window(self, name: str, kind: str | None = None) -> Iterator[None]:
        """Measure a named window (e.g. evaluation); synchronises the accelerator at its edges if torch runs."""
        self.begin_window(name, kind)
        try:
            yield
        finally:
            self.end_window(name)

    def snapshot(self) -> dict[str, Any]:
        """Counters and each device's latest cumulative energy and power, for live metrics. No I/O, no tick."""
        devices = []
        if self._sampler is not None:
            infos = {i.uuid: i for i in self._sampler.devices}
            for uuid, s in self._sampler.latest().items():
                info = infos.get(uuid)
                devices.append(
                    {
                        "uuid": uuid,
                        "name": info.name if info else None,
                        "component": info.component if info else None,
                        "energy_j": s.energy_j_cumulative,
                        "power_w": s.power_w,
                    }
                )
        return {
            "elapsed_s": time.monotonic() - self._t0 if self._t0 else 0.0,
            "steps": self.steps,
            "tokens": self.tokens,
            "flops": self.flops,
            "step_flops": list(self.step_flops)[-64:],
            "devices": devices,
            "dtype": self.dtype or DEFAULT_DTYPE,
        }

    def _edge(self) -> tuple[float, dict[str, float]]:
        try:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()
            if self._sampler is not None:
                self._sampler._tick()  # a fresh reading at the edge (the sampler's lock keeps it safe)
                return time.monotonic(), {u: s.energy_j_cumulative for u, s in self._sampler.latest().items()}
        except Exception as exc:
            self._note(f"window edge: {exc}")
        return time.monotonic(), {}

    def _add_window(
        self, name: str, start: tuple[float, dict[str, float]], end: tuple[float, dict[str, float]], kind: str | None = None
    ) -> None:
        dur = end[0] - start[0]
        energy = {u: end[1][u] - start[1].get(u, 0.0) for u in end[1]}
        w = {
            "name": name,
            "kind": kind or WINDOW_KINDS.get(name, name),
            "start_s": start[0] - self._t0,
            "duration_s": dur,
            "energy_j": energy,
            "rank": self.dist.rank,
        }
        if dur < SHORT_WINDOW_S:
            w["note"] = (
                "shorter than 1 s: NVML energy over such windows is unreliable (the sensor averages ~25 ms "
                "of every 100 ms on A100/H100)"
            )
        with self._lock:
            self.windows.append(w)

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling, write the rank record and (rank 0 / single process) the job's run.json."""
        with self._lock:
            if self._stopped:
                return self.run
            self._stopped = True
        with contextlib.suppress(ValueError):
            _ACTIVE.remove(self)
        try:
            self._close_open_parts()
            if self.attached is not None:
                return self._stop_attached()
            return self._stop()
        except Exception as exc:
            self._note(f"tracker could not finalise: {type(exc).__name__}: {exc}")
            log.debug("stop failed", exc_info=True)
            return self.run

    def _stop(self) -> dict[str, Any] | None:
        if self._sampler is None:
            return None
        totals = self._sampler.stop()
        end_unix = time.time()
        devices = []
        for info in self._sampler.devices:
            d = info.to_dict()
            t = totals.get(info.uuid)
            d["energy_j"] = t.energy_j if t else None
            if d["energy_j"] is None:
                d["notes"] = [*d.get("notes", []), "no energy reading: not available (not zero)"]
            devices.append(d)
        stats = self._sampler.tick_stats()
        d = self.dist
        self.record = {
            "rank": d.rank,
            "local_rank": d.local_rank,
            "world_size": d.world_size,
            "name": self.name,
            "site": self.site,
            "slurm": runrecord.slurm_info(),
            **runrecord.host_info(),
            "start_unix": self._start_unix,
            "end_unix": end_unix,
            "duration_s": end_unix - self._start_unix,
            "steps": self.steps,
            "tokens": self.tokens,
            "flops": self.flops or None,
            "hardware_flops": self.hardware_flops or None,
            "flops_method": self.flops_method,
            "mfu": self._mfu(devices),
            "devices": devices,
            "windows": self.windows,
            "step_times": _step_stats(self.step_times),
            "complete": True,
            "sampler": {"period_s": self.period_s, **stats},
            "retention": self._sampler.retention.to_dict() if self._sampler.retention else None,
            "notes": list(self.notes) + list(self._sampler.error_log),
        }
        runrecord.write_json(self._record_path, self.record)
        self.run = self._finalise_job()
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        return self.run

    def _close_open_parts(self) -> None:
        """At stop: windows still open are closed (and noted), the watch's hooks removed."""
        for name in list(self._open):
            self._note(f"window {name!r} was still open at stop: closed there")
            self.end_window(name)
        if self._watch is not None:
            self._watch.close()

    def _rates(self) -> list[tuple[float, float]]:
        """(model, hardware) FLOP/s of each step whose FLOPs are known."""
        times = list(self.step_times)
        by_t = {t: (f, h) for t, f, h in self.step_flops}
        return [
            (by_t[b][0] / (b - a), by_t[b][1] / (b - a))
            for a, b in zip(times[:-1], times[1:], strict=False)
            if b in by_t and b > a
        ]

    def _dtype_used(self) -> tuple[str, str]:
        """(dtype of the MFU peak, where it came from): given, the framework, autocast or parameters, else assumed."""
        if self.dtype:
            origin = self._dtype_origin if self.dtype_source == "framework" else None
            return self.dtype, origin or self.dtype_source or "given"
        return DEFAULT_DTYPE, f"assumed (not given and not seen by watch()): {DEFAULT_DTYPE}"

    def _mfu(self, devices: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Steady-state MFU/HFU of this rank: median over steps of step FLOPs / (step time x dense peak)."""
        gpus = [d for d in devices if d.get("component") == "gpu"]
        if not self.step_flops or not gpus:
            return None
        from footprint.lca.database import db

        dtype, origin = self._dtype_used()
        try:
            peak = sum(db().find_gpu(d["name"]).peak_flops(dtype) for d in gpus)
        except Exception as exc:
            return {"note": f"no dense {dtype} peak for {gpus[0]['name']}: {exc}"}
        return rank_mfu(self._rates(), peak, dtype, origin, self.flops_method)

    def _finalise_job(self) -> dict[str, Any] | None:
        """Rank 0 writes the job record: gathered over the process group, or directly when alone."""
        d = self.dist
        records = [self.record]
        dist = _process_group()
        if dist is not None and d.world_size > 1:
            gathered: list[Any] = [None] * d.world_size
            dist.all_gather_object(gathered, self.record)
            records = [r for r in gathered if r]
            if d.rank != 0:
                return None
        elif d.world_size > 1:
            self._note(
                "no torch.distributed process group: per-rank records written; run `footprint merge "
                f"{self.run_dir}` when all ranks have finished"
            )
            return None
        record = runrecord.merge_ranks(records, self.name, self.site)
        record["run_dir"] = str(self.run_dir)
        runrecord.write_json(self.run_dir / "run.json", record)  # samples stay in each rank's segments: nothing to copy
        return record

    def _stop_attached(self) -> dict[str, Any] | None:
        """Inside `footprint run`: hand the counters to the parent's run record; the parent writes run.json."""
        d = self.dist
        dtype, origin = self._dtype_used()
        record = {
            "source": self.source,
            "pid": os.getpid(),
            "rank": d.rank,
            "world_size": d.world_size,
            "t0_monotonic": self._t0,
            "end_monotonic": time.monotonic(),
            "steps": self.steps,
            "tokens": self.tokens,
            "flops": self.flops or None,
            "hardware_flops": self.hardware_flops or None,
            "flops_method": self.flops_method,
            "dtype": dtype,
            "dtype_source": origin,
            "rates": self._rates()[-4096:],
            "windows": self.windows,
            "step_times": _step_stats(self.step_times),
            "notes": list(self.notes),
        }
        path = self.attached / ATTACHED_DIR / f"pid-{os.getpid()}-{id(self):x}.json"
        runrecord.write_json(path, record)
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        return None

    def _at_exit(self) -> None:
        self.stop()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._note("stopped by SIGTERM")
        self.stop()
        prev = self._prev_sigterm
        if callable(prev):
            prev(signum, frame)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def _note(self, msg: str) -> None:
        log.debug(msg)
        if msg not in self.notes:
            self.notes.append(msg)

    # ---- context manager and decorator ------------------------------------------------------------
    def __enter__(self) -> Tracker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper


def rank_mfu(rates: list[tuple[float, float]], peak: float, dtype: str, dtype_source: str, method: str | None) -> dict[str, Any]:
    """Steady-state MFU/HFU from per-step (model, hardware) FLOP/s against ``peak`` FLOP/s (first 10 % skipped)."""
    steady = rates[len(rates) // 10 :] or rates  # skip warm-up steps
    mfu = sorted(r[0] for r in steady)
    hfu = sorted(r[1] for r in steady)
    return {
        "dtype": dtype,
        "dtype_source": dtype_source,
        "peak_tflops": peak / 1e12,
        "method": method,
        "steady_state_mfu": mfu[len(mfu) // 2] / peak if mfu else None,
        "steady_state_hfu": hfu[len(hfu) // 2] / peak if hfu else None,
        "per_step_mfu": [r[0] / peak for r in rates[-200:]],
    }


def _per_token(model: dict[str, Any]) -> tuple[float, float]:
    from footprint.flops import transformer_flops

    r = transformer_flops(
        float(model.get("params") or model.get("parameters")),
        1.0,
        active_params=model.get("active_params") or model.get("active_parameters"),
        layers=model.get("layers"),
        hidden=model.get("hidden"),
        seq_len=model.get("seq_len"),
        recompute=model.get("recompute", "none"),
    )
    return r.flops_per_token, r.hardware_flops_per_token


def _default_name(d: DistInfo) -> str:
    job = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID")
    if d.distributed and job and job != "none":
        return f"job-{job}"
    return time.strftime("run-%Y%m%d-%H%M%S")


def _process_group() -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        dist = torch.distributed
        return dist if dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


def _step_stats(times: deque[float]) -> dict[str, float] | None:
    if len(times) < 2:
        return None
    gaps = sorted(b - a for a, b in zip(list(times)[:-1], list(times)[1:], strict=False))
    return {"count": len(gaps), "median_s": gaps[len(gaps) // 2], "p90_s": gaps[int(0.9 * (len(gaps) - 1))]}


def track(
    name: str | None = None,
    output_dir: str | os.PathLike[str] = "runs",
    site: Any = None,
    gpus: Any = None,
    period_s: float = 0.1,
    **kwargs: Any,
) -> Tracker:
    """A Tracker: use as `with track(...) as t:`, as a decorator `@track(...)`, or `t.start()` / `t.stop()`."""
    return Tracker(name=name, output_dir=output_dir, site=site, gpus=gpus, period_s=period_s, **kwargs)
