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

Faults (README "Promises"): a bad argument is a warning, a default and a note, never an exception; a run
name is one plain name inside ``output_dir``, and a name already taken there gets a suffix (``x-2``); if
the run directory cannot be written (read-only, disk full) the tracker says so once on stderr, goes on
measuring in memory, and writes the record to a temporary directory instead (or prints the totals when
nothing can be written); the exit gather of a distributed run waits at most ``FOOTPRINT_GATHER_TIMEOUT_S``
(60 s) and a rank that raised skips it, leaving per-rank records for ``footprint merge``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError, FootprintWarning
from footprint.tracking import runrecord
from footprint.tracking.runview import RunRecord

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
GATHER_TIMEOUT_ENV = "FOOTPRINT_GATHER_TIMEOUT_S"
DEFAULT_GATHER_TIMEOUT_S = 60.0
DEFAULT_PERIOD_S = 0.1
FALLBACK_DIR = "footprint-runs"  # under the system's temporary directory, when the run directory cannot be written


def check_name(name: Any) -> str | None:
    """Why ``name`` cannot be a run name (one plain name, no path, no control character), or None when it can."""
    from footprint.outputs import check_name as plain_name

    return plain_name(name)


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


def _gpu_meters(nvml: Any, selected: list[int | str] | None, poll_s: float) -> list[Any]:
    """The GPU meters of this machine: AMD's (amdsmi) where an Instinct GPU or FOOTPRINT_FAKE_AMDSMI is there, NVIDIA's
    (NVML) otherwise, or as well where NVIDIA's driver (/dev/nvidiactl) or a fake NVML is there too."""
    from meters import amd
    from meters.nvml import ENV_FAKE, NvmlMeter

    out: list[Any] = []
    if nvml is None and amd.wanted():
        out.append(amd.AmdMeter(devices=selected, poll_period_s=poll_s))
    if not out or os.environ.get(ENV_FAKE, "").strip() or os.path.exists("/dev/nvidiactl"):
        out.append(NvmlMeter(nvml=nvml, devices=selected, poll_period_s=poll_s))
    return out


def _source_and_retention(problems: list[str], source: Any, retention: Any) -> tuple[str, Any]:
    """track()'s source label and segment retention, each replaced by the default (with a problem said) when unusable."""
    if not isinstance(source, str):
        problems.append(f"source {source!r} is not a string")
        source = "footprint.track"
    if retention is not None:
        from meters.segments import Retention

        try:
            Retention.of(retention)
        except (ValueError, TypeError) as exc:
            problems.append(str(exc))
            retention = None
    return source, retention


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
        *,
        _problems: list[str] | None = None,
    ) -> None:
        self.dist = dist_info()
        self.notes: list[str] = []
        problems: list[str] = list(_problems or [])  # what track() already found (unknown arguments)
        name, output_dir, site, gpus, period_s, model, dtype = _arguments(
            problems, name, output_dir, site, gpus, period_s, model, dtype
        )
        host, handle_sigterm = (_flag(problems, k, v) for k, v in (("host", host), ("handle_sigterm", handle_sigterm)))
        source, retention = _source_and_retention(problems, source, retention)
        self.retention = retention  # meters.segments.Retention or a dict of its fields; None: the defaults
        self.name = name or _default_name(self.dist)
        self.output_dir = Path(output_dir)
        self.run_dir = self.output_dir / self.name
        self.site = {"grid": site} if isinstance(site, str) else (dict(site) if site else None)
        self.gpus = gpus
        self.period_s = period_s
        self.measure_host = host
        self._nvml = nvml
        self._handle_sigterm = handle_sigterm
        self._failed: str | None = None  # the exception that left the `with` block, if any
        self._said: set[str] = set()
        self._meters: list[Any] = []
        self.fallback: Path | None = None  # where the record went when run_dir could not be written
        self.memory_only = False  # nothing writable at all: measured in memory, totals printed at the end
        self.source = source
        self.attached: Path | None = None  # the parent run directory when inside `footprint run`
        self._init_accounting(dtype)
        if model:
            try:
                self._per_token = _per_token(model)
            except Exception as exc:  # noqa: BLE001 - a model dict the FLOP formula cannot use
                problems.append(f"model {_short(model)} gives no FLOPs per token ({exc})")
        self.windows: list[dict[str, Any]] = []
        self.record: dict[str, Any] | None = None
        self.run: dict[str, Any] | None = None
        self._sampler: Any = None
        self._t0 = 0.0
        self._start_unix = 0.0
        self._stopped = False
        self._lock = threading.Lock()
        self._prev_sigterm: Any = None
        if problems:
            message = "footprint.track(): " + "; ".join(problems) + ": ignored, the defaults are used"
            warnings.warn(message, FootprintWarning, stacklevel=3 if _problems is None else 4)
            for p in problems:
                self._note(f"argument ignored: {p} (the default is used instead)")

    def _init_accounting(self, dtype: str | None) -> None:
        """What the steps add up: counts, FLOPs and their method, the dtype, the last steps' times (bounded)."""
        self.steps = 0
        self.tokens = 0
        self.flops = 0.0
        self.hardware_flops = 0.0
        self.dtype = dtype
        self.dtype_source = "given" if dtype else None
        self._dtype_origin: str | None = None
        self.flops_method: str | None = None
        self.step_times: deque[float] = deque(maxlen=4096)
        self.step_flops: deque[tuple[float, float, float]] = deque(maxlen=4096)  # (t, model, hardware)
        self._per_token: tuple[float, float] | None = None
        self._watched: tuple[float, int | None] | None = None  # (FLOPs, tokens) of the counted step
        self._watch: Any = None
        self._open: dict[str, tuple[tuple[float, dict[str, float]], str]] = {}

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

        from meters.sampler import Sampler

        d = self.dist
        self._claim_run_dir()
        meters: list[Any] = []
        selected = gpus_for_rank(d, self.gpus)
        if selected != []:
            meters += _gpu_meters(self._nvml, selected, min(self.period_s, 0.1))
        else:
            self._note(f"rank {d.rank}: no GPU visible for LOCAL_RANK {d.local_rank}")
        if self.measure_host and d.local_rank == 0:  # host CPU/RAM once per node
            from meters.cpu_estimate import host_meters

            meters.extend(host_meters())
        self._meters = meters
        self._record_path, journal = runrecord.rank_paths(self.run_dir, d.rank)
        journal_path = None if self.memory_only else journal
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
        self._sampler = self._new_sampler(Sampler, meters, journal_path, meta, retention)
        with contextlib.suppress(AttributeError):  # a replayed sampler may not take it
            self._sampler.on_journal_error = self._on_write_error
        self._sampler.start()
        atexit.register(self._at_exit)
        if self._handle_sigterm and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(Exception):
                self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _claim_run_dir(self) -> None:
        """Claim the run directory, unique and writable (`footprint.tracking.runname`): a taken name gets a suffix,
        said on stderr; in a distributed run rank 0 claims and the other ranks join the directory it got. An
        unwritable one falls back to a temporary directory, then memory."""
        from footprint.outputs import claim_dir
        from footprint.tracking import runname

        wanted = self.name
        d = self.dist
        try:
            if d.distributed and d.rank != 0:
                got = runname.learn(self.output_dir, wanted, _gather_timeout())
                if got is None:
                    self._note(f"rank 0 did not say which directory it claimed for {wanted!r}: this rank writes into it")
                self.name = got or wanted
                self.run_dir = self.output_dir / self.name
                self.run_dir.mkdir(parents=True, exist_ok=True)
            else:
                try:
                    self.run_dir = claim_dir(self.output_dir, wanted)
                except FootprintError:
                    if d.distributed:
                        runname.publish(self.output_dir, wanted, "", _gather_timeout())
                    raise
                self.name = self.run_dir.name
                if d.distributed:
                    runname.publish(self.output_dir, wanted, self.name, _gather_timeout())
                if self.name != wanted:
                    self._say("name", f"run name {wanted!r} is taken in {self.output_dir}: this run is recorded as {self.name!r}")
            probe = self.run_dir / f".footprint-write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except (OSError, FootprintError) as exc:
            self._fall_back(exc)

    def _fall_back(self, exc: BaseException) -> None:
        """The run directory cannot be written: a directory under the system's temporary one, else memory only."""
        wanted = self.run_dir
        try:
            base = Path(tempfile.gettempdir()) / FALLBACK_DIR
            base.mkdir(parents=True, exist_ok=True)
            self.run_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=base))
            self.fallback = self.run_dir
            where = f"the run is recorded in {self.run_dir} instead"
        except OSError:
            self.memory_only = True
            where = "measuring in memory; the totals are printed at the end"
        self._say("write", f"cannot write the run directory {wanted} ({_why(exc)}): the training goes on; {where}")

    def _on_write_error(self, exc: BaseException) -> None:
        """Called once by the sampler when the journal cannot be written any more (disk full, volume gone)."""
        self._say(
            "write",
            f"writing the run directory {self.run_dir} failed ({_why(exc)}): the training goes on and energy is still "
            "measured in memory; the record is written at the end wherever possible",
        )

    def _say(self, key: str, message: str) -> None:
        """Tell the user once on stderr (per kind of problem) and keep it in the run's notes."""
        self._note(message)
        if key not in self._said:
            self._said.add(key)
            with contextlib.suppress(Exception):
                print(f"footprint: {message}", file=sys.stderr, flush=True)

    def _new_sampler(
        self, sampler_cls: Any, meters: list[Any], journal: Path | None, meta: dict[str, Any], retention: Any
    ) -> Any:
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
            tokens, flops = self._plausible_step(tokens, flops)
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

    def _plausible_step(self, tokens: Any, flops: Any) -> tuple[int | None, float | None]:
        """This step's counts if plausible (`footprint.bounds`: finite, >= 0, below the per-step ceiling), else
        None each, warned once and noted: a 309-digit token count must not become the run's total."""
        from footprint.bounds import STEP_FLOPS_MAX, STEP_TOKENS_MAX

        out: list[Any] = []
        for what, v, top in (("tokens", tokens, STEP_TOKENS_MAX), ("flops", flops, STEP_FLOPS_MAX)):
            ok = v is None or (
                not isinstance(v, bool)
                and isinstance(v, (int, float))
                and (not isinstance(v, int) or v.bit_length() < 128)
                and math.isfinite(float(v))
                and 0 <= v <= top
            )
            if not ok:
                if f"step-{what}" not in self._said:
                    self._said.add(f"step-{what}")
                    given = f"an integer of {v.bit_length()} bits" if isinstance(v, int) and v.bit_length() > 64 else _short(v)
                    message = f"step({what}={given}): not a count from 0 to {top:g} per step; ignored"
                    self._note(message)
                    warnings.warn(f"footprint.track(): {message}", FootprintWarning, stacklevel=4)
                v = None
            out.append(v)
        return out[0], out[1]

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
            "notes": list(self.notes) + self._meter_notes() + list(self._sampler.error_log),
        }
        if self._failed:
            self.record["notes"].append(f"rank {d.rank} left the tracked block with {self._failed}")
        if not self._write(self._record_path, self.record):
            self.run = _viewed(self._in_memory_run())
            return self.run
        self.run = _viewed(self._finalise_job())
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        return self.run

    def _meter_notes(self) -> list[str]:
        """Why a meter measured nothing (NVML missing, a malformed FOOTPRINT_FAKE_NVML...): said in the run's notes."""
        out = []
        for m in self._meters:
            with contextlib.suppress(Exception):
                if not m.devices and getattr(m, "notes", None):
                    out += [f"{getattr(m, 'name', type(m).__name__)}: {n}" for n in m.notes]
        return out

    def _write(self, path: Path, data: dict[str, Any]) -> bool:
        """write_json, falling back to a temporary directory once if the run directory cannot be written."""
        if self.memory_only:
            return False
        try:
            runrecord.write_json(path, data)
            return True
        except (OSError, FootprintError) as exc:
            if self.fallback is not None:
                self._say("write", f"cannot write {path} ({_why(exc)}): the totals are printed below")
                self.memory_only = True
                return False
            old = self.run_dir
            self._fall_back(exc)
            if self.memory_only:
                return False
            self._record_path = self.run_dir / self._record_path.relative_to(old)
            return self._write(self.run_dir / path.relative_to(old), data)

    def _in_memory_run(self) -> dict[str, Any] | None:
        """The job record when nothing could be written: built from this rank, returned, its totals printed."""
        record = runrecord.merge_ranks([self.record] if self.record else [], self.name, self.site)
        record["run_dir"] = None
        record["notes"].append("not written to disk (no writable directory): this record exists in memory only")
        e = record["energy"]
        self._say(
            "totals",
            f"run {self.name!r} ({record['duration_s']:.1f} s): GPU energy "
            f"{'n/a' if e['gpu_j'] is None else format(e['gpu_j'], '.6g') + ' J'}, total "
            f"{'n/a' if e['total_j'] is None else format(e['total_j'], '.6g') + ' J'} "
            "(not written to disk; the record is the tracker's `.run`)",
        )
        return record

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
        notes: list[str] = []
        dist = _process_group()
        if d.world_size > 1 and (dist is None or self._failed):
            why = (
                f"this rank left the tracked block with {self._failed}" if self._failed else "no torch.distributed process group"
            )
            self._note(f"{why}: per-rank records written; run `footprint merge {self.run_dir}` when all ranks have finished")
            return None
        if dist is not None and d.world_size > 1:
            gathered = _gather(dist, self.record, d.world_size, _gather_timeout())
            if gathered is None:
                self._note(
                    f"the exit gather of the ranks' records timed out after {_gather_timeout():g} s "
                    f"({GATHER_TIMEOUT_ENV}): per-rank records written; run `footprint merge {self.run_dir}` when all "
                    "ranks have finished"
                )
                if d.rank != 0:
                    return None
                records = runrecord.rank_records(self.run_dir, notes)  # what is on a shared filesystem now
                notes.append("the exit gather timed out: run.json holds the ranks whose records were on disk then")
            else:
                records = [r for r in gathered if r]
            if d.rank != 0:
                return None
        record = runrecord.merge_ranks(records, self.name, self.site, notes=notes)
        record["run_dir"] = str(self.run_dir)
        if not self._write(self.run_dir / "run.json", record):  # samples stay in each rank's segments: nothing to copy
            return self._in_memory_run()
        record["run_dir"] = str(self.run_dir)
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

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:  # the block raised: no collective at exit (the other ranks may never join it)
            self._failed = exc_type.__name__
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


def _arguments(
    problems: list[str], name: Any, output_dir: Any, site: Any, gpus: Any, period_s: Any, model: Any, dtype: Any
) -> tuple[Any, ...]:
    """track()'s arguments, each checked: one that cannot be used is replaced by its default and named in ``problems``."""
    if name is not None and (why := check_name(name)):
        problems.append(why)
        name = None
    try:
        output_dir = os.fspath(output_dir)
        if "\x00" in output_dir:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(f"output_dir {_short(output_dir)} is not a path")
        output_dir = "runs"
    if site is not None and not (isinstance(site, str) and 0 < len(site) <= 200) and not _mapping(site):
        problems.append(
            f"site {_short(site)} is neither a grid zone (e.g. 'FRA') nor a mapping like {{'grid': 'FRA', 'pue': 1.2}}"
        )
        site = None
    if site is not None:
        from footprint.bounds import site_problems

        bad = site_problems({"grid": site} if isinstance(site, str) else site)
        if bad:  # out of the plausibility table (footprint.bounds): those keys dropped, the defaults used
            problems.extend(bad)
            keys = {b.split(":", 1)[0].split(" ", 1)[0].removeprefix("site.") for b in bad}
            site = None if isinstance(site, str) else {k: v for k, v in site.items() if k not in keys} or None
    if gpus is not None and not _gpu_list(gpus):
        problems.append(f"gpus {_short(gpus)} is not a GPU index, UUID or a list of them")
        gpus = None
    ok = isinstance(period_s, (int, float)) and not isinstance(period_s, bool) and math.isfinite(period_s)
    if not ok or not 0.001 <= period_s <= 3600:
        problems.append(f"period_s {_short(period_s)} is not a number of seconds from 0.001 to 3600")
        period_s = DEFAULT_PERIOD_S
    if model is not None and not _mapping(model):
        problems.append(f"model {_short(model)} is not a mapping such as {{'params': 7e9}}")
        model = None
    if dtype is not None and not (isinstance(dtype, str) and 0 < len(dtype) <= 16):
        problems.append(f"dtype {_short(dtype)} is not a dtype name such as 'bf16'")
        dtype = None
    return name, output_dir, site, gpus, float(period_s), model, dtype


def _flag(problems: list[str], key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    problems.append(f"{key} {_short(value)} is not True or False")
    return True


def _mapping(value: Any) -> bool:
    """A small mapping of names to plain values (what a site or a model description is)."""
    return (
        isinstance(value, dict)
        and len(value) <= 64
        and all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool))) for k, v in value.items())
    )


def _gpu_list(value: Any) -> bool:
    items = [value] if isinstance(value, (int, str)) else value
    try:
        items = list(items)
    except TypeError:
        return False
    return len(items) <= 4096 and all(
        (isinstance(g, int) and not isinstance(g, bool) and g >= 0) or (isinstance(g, str) and 0 < len(g) <= 200) for g in items
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _why(exc: BaseException) -> str:
    if isinstance(exc, FootprintError):
        return str(exc)
    return getattr(exc, "strerror", None) or f"{type(exc).__name__}: {exc}"


def _gather_timeout() -> float:
    try:
        v = float(os.environ.get(GATHER_TIMEOUT_ENV, DEFAULT_GATHER_TIMEOUT_S))
    except ValueError:
        return DEFAULT_GATHER_TIMEOUT_S
    return v if math.isfinite(v) and v > 0 else DEFAULT_GATHER_TIMEOUT_S


def _gather(dist: Any, record: dict[str, Any], world: int, timeout_s: float) -> list[Any] | None:
    """all_gather_object of the rank records, given at most ``timeout_s``: None if a rank did not join in time (it
    raised, died, or is still busy). The collective goes on in a daemon thread; nothing waits for it any more."""
    out: list[Any] = [None] * world
    failed: list[BaseException] = []

    def run() -> None:
        try:
            dist.all_gather_object(out, record)
        except BaseException as exc:  # noqa: BLE001 - a peer that died: the same fallback as a timeout
            failed.append(exc)

    thread = threading.Thread(target=run, name="footprint-gather", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return None if thread.is_alive() or failed else out


def _default_name(d: DistInfo) -> str:
    job = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID")
    if d.distributed and job and job != "none":
        return "job-" + re.sub(r"[^A-Za-z0-9._+-]+", "_", job)[:100].strip(".")  # a plain name, whatever the env says
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
    """A Tracker: use as `with track(...) as t:`, as a decorator `@track(...)`, or `t.start()` / `t.stop()`.

    Never raises for a bad argument: it warns once (FootprintWarning), uses the default and notes it in the run."""
    import inspect

    known = set(inspect.signature(Tracker.__init__).parameters) - {"self", "_problems"}
    unknown = sorted(str(k) for k in kwargs if k not in known)
    kwargs = {k: v for k, v in kwargs.items() if k in known}
    problems = [f"unknown argument(s) {', '.join(unknown)}"] if unknown else []
    return Tracker(name=name, output_dir=output_dir, site=site, gpus=gpus, period_s=period_s, _problems=problems, **kwargs)


def _viewed(record: dict[str, Any] | None) -> RunRecord | None:
    """The job record with its notebook view (a short repr), or None where this rank writes none."""
    return RunRecord(record) if record is not None else None
