"""Background sampling of meters with bounded memory and a crash-safe journal.

    s = Sampler([NvmlMeter(), *host_meters()], period_s=0.1, journal_path="run/journal.jsonl").start()
    ...training...
    totals = s.stop()        # {uuid: DeviceTotal}

Design choices (ARCHITECTURE.md principles "never lose a run", "fast start"):
- one daemon thread; each tick calls every meter's `sample()` and never lets an exception escape:
  errors are counted, kept in a bounded log and journaled;
- memory is bounded whatever the run length: a ring buffer of recent ticks plus a coarse series that
  halves its resolution when full (energies are cumulative, so dropping points loses no energy);
- samples go to an append-only journal flushed at least every `flush_interval_s` (<= 1 s), which rolls
  into compact Parquet segments every few minutes (`meters.segments`, written by a background thread):
  stopping costs one segment, never the whole run, and so does any reader;
- nothing heavy is imported here: starting costs milliseconds plus the meters' own start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .base import DeviceInfo, DeviceSample, Meter
from .journal import JournalWriter
from .segments import Retention


@dataclass
class DeviceTotal:
    """Energy of one device over the sampled window, with the provenance needed to trust it."""

    uuid: str
    name: str
    component: str
    method: str
    measured: bool
    energy_j: float | None
    duration_s: float
    mean_power_w: float | None
    samples: int
    last_t: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Series:
    """Coarse cumulative-energy series with a fixed maximum size (decimates by 2 when full)."""

    def __init__(self, max_points: int, width_s: float) -> None:
        self.max_points = max(4, max_points)
        self.width_s = width_s
        self.points: list[tuple[float, dict[str, float]]] = []

    def add(self, t: float, energies: dict[str, float]) -> None:
        """The last point always holds the latest reading; earlier ones are >= width_s apart."""
        point = (t, dict(energies))
        if len(self.points) >= 2 and t - self.points[-2][0] < self.width_s:
            self.points[-1] = point
            return
        self.points.append(point)
        if len(self.points) > self.max_points:
            self.points = self.points[::2] if len(self.points) % 2 else [*self.points[:-1:2], self.points[-1]]
            self.width_s *= 2


class Sampler:
    """Samples `meters` every `period_s` seconds in a background thread; see the module docstring."""

    def __init__(
        self,
        meters: Meter | Sequence[Meter],
        period_s: float = 0.1,
        journal_path: str | os.PathLike[str] | None = None,
        *,
        history_s: float = 600.0,
        max_points: int = 4096,
        flush_interval_s: float = 0.5,
        fsync_interval_s: float | None = None,
        start_meters: bool = True,
        meta: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[], dict[str, Any]] | None = None,
        progress_interval_s: float = 1.0,
        retention: Retention | dict[str, Any] | None = None,
        segments: bool = True,
        background: bool = True,
    ) -> None:
        """`retention` sets how long each resolution of the samples is kept on disk (see `Retention`);
        `segments=False` keeps the whole run in the one journal file; `background=False` starts no thread
        (the caller drives `tick()`, e.g. to replay a recorded or synthetic run through the real writer)."""
        self.meters: list[Meter] = [meters] if not isinstance(meters, Sequence) else list(meters)
        self.period_s = max(float(period_s), 0.001)
        self.journal_path = journal_path
        self.flush_interval_s = min(float(flush_interval_s), 1.0)
        self.fsync_interval_s = fsync_interval_s
        self.start_meters = start_meters
        self.meta = dict(meta or {})
        self.retention = Retention.of(retention) if segments else None
        self.background = background
        self._clock = clock
        # The caller's counters (steps, tokens...), journaled from this thread so the caller never does I/O.
        self._progress = progress
        self.progress_interval_s = progress_interval_s
        self._last_progress_t = float("-inf")
        self._recent: deque[tuple[float, list[DeviceSample]]] = deque(maxlen=max(1, int(history_s / self.period_s)))
        self._series = _Series(max_points, self.period_s)
        self._last: dict[str, DeviceSample] = {}
        self._counts: dict[str, int] = {}
        self._infos: dict[str, DeviceInfo] = {}
        self._journal: JournalWriter | None = None
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._tick_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._started_meters: list[Meter] = []
        self._t_start: float | None = None
        self._t_stop: float | None = None
        self._totals: dict[str, DeviceTotal] | None = None
        self.errors = 0
        self.error_log: deque[str] = deque(maxlen=100)
        self.ticks = 0
        self.missed_ticks = 0
        self._last_device_check = 0.0
        self._device_sig: tuple[tuple[str, str, int], ...] = ()
        self._tick_costs: deque[float] = deque(maxlen=2048)
        self._tick_cost_total = 0.0
        # Called once, from the sampling thread, when the journal cannot be written any more (disk full, read-only,
        # volume gone): the sampler then stops journaling and goes on measuring in memory (totals are unaffected).
        self.on_journal_error: Callable[[BaseException], None] | None = None
        self.journal_failed: str | None = None

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Sampler:
        """Start the meters (unless told not to), open the journal, start the thread. Never raises."""
        if self._t_start is not None:
            return self
        self._t_start = self._clock()
        if self.journal_path is not None:
            try:
                meta = {
                    "period_s": self.period_s,
                    "meters": [getattr(m, "name", type(m).__name__) for m in self.meters],
                    **self.meta,
                }
                self._journal = JournalWriter(
                    self.journal_path,
                    meta=meta,
                    clock=self._clock,
                    flush_interval_s=self.flush_interval_s,
                    fsync_interval_s=self.fsync_interval_s,
                    retention=self.retention,
                )
            except Exception as exc:
                self._journal_error(exc)
        if self.start_meters:
            for meter in self.meters:
                try:
                    meter.start()
                    self._started_meters.append(meter)
                except Exception as exc:
                    self._error(meter, exc)
        self._refresh_devices(self._t_start)
        if self.background:
            self._thread = threading.Thread(target=self._run, name="footprint-sampler", daemon=True)
            self._thread.start()
        atexit.register(self._at_exit)
        return self

    def stop(self, timeout: float = 5.0) -> dict[str, DeviceTotal]:
        """Stop the thread, take a final sample, stop the meters, close the journal; return totals."""
        if self._totals is not None:
            return self._totals
        if self._t_start is None:
            self._totals = {}
            return self._totals
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for meter in self._started_meters:  # a meter still resolving (the CPU estimate's TDP lookup) gets to finish
            wait = getattr(meter, "wait_resolved", None)
            if callable(wait):
                try:
                    wait(10.0)
                except Exception as exc:
                    self._error(meter, exc)
        self._tick()  # final reading, so totals cover the window up to stop()
        for meter in self._started_meters:
            try:
                meter.stop()
            except Exception as exc:
                self._error(meter, exc)
        self._t_stop = self._clock()
        with self._tick_lock:
            self._refresh_devices(self._t_stop, force=True)  # meters add summary notes at stop
        totals = self.totals()
        with self._tick_lock:
            if self._journal is not None:
                try:
                    self._journal.close(self._t_stop, {k: v.to_dict() for k, v in totals.items()})
                except Exception as exc:
                    self._error("journal", exc)
                for msg in self._journal.errors:
                    self.errors += 1
                    self.error_log.append(msg)
                self._journal = None
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        self._totals = totals
        return totals

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _at_exit(self) -> None:
        """Interpreter exit without stop(): flush what we have (the journal has no end marker)."""
        try:
            with self._tick_lock:
                if self._journal is not None:
                    self._journal.flush(force=True)
        except Exception:
            pass

    # --- the loop -----------------------------------------------------------------------------------

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            self._tick()
            next_t += self.period_s
            delay = next_t - time.monotonic()
            if delay < 0:
                skipped = int(-delay // self.period_s) + 1
                self.missed_ticks += skipped
                next_t += skipped * self.period_s
                delay = next_t - time.monotonic()
            self._stop_event.wait(max(delay, 0.0))

    def tick(self) -> None:
        """Take one reading of every meter now (the thread does this every `period_s`). Never raises."""
        self._tick()

    def _tick(self) -> None:
        """One round of sampling. Everything is guarded: a tick never raises."""
        with self._tick_lock:
            c0 = time.perf_counter()
            try:
                samples: list[DeviceSample] = []
                for meter in self.meters:
                    try:
                        samples.extend(meter.sample())
                    except Exception as exc:
                        self._error(meter, exc)
                t = self._clock()  # tick time; each DeviceSample keeps its own reading time
                with self._state_lock:
                    new = [s.uuid for s in samples if s.uuid not in self._infos]
                    for s in samples:
                        self._last[s.uuid] = s
                        self._counts[s.uuid] = self._counts.get(s.uuid, 0) + 1
                    self._recent.append((t, samples))
                    self._series.add(t, {s.uuid: s.energy_j_cumulative for s in samples})
                    self.ticks += 1
                if new:
                    self._refresh_devices(t, force=True)
                elif t - self._last_device_check >= 1.0:  # notes (GPU lost, resets) reach the journal
                    self._last_device_check = t
                    if self._device_signature() != self._device_sig:
                        self._refresh_devices(t, force=True)
                if self._journal is not None:
                    try:
                        self._journal.write_samples(t, samples)
                        self._journal_progress(t, force=self._stop_event.is_set())
                        self._journal.maybe_flush()
                    except Exception as exc:
                        self._journal_error(exc)
            except Exception as exc:  # defensive: a bug here must not kill the thread
                self._error("sampler", exc)
            cost = time.perf_counter() - c0
            self._tick_costs.append(cost)
            self._tick_cost_total += cost

    def _device_signature(self) -> tuple[tuple[str, str, int], ...]:
        with self._state_lock:
            return tuple((i.uuid, i.method, len(i.notes)) for i in self._infos.values())

    def _journal_progress(self, t: float, force: bool = False) -> None:
        if self._progress is None or self._journal is None:
            return
        if not force and t - self._last_progress_t < self.progress_interval_s:
            return
        self._last_progress_t = t
        try:
            self._journal.event(t, "progress", **self._progress())
        except Exception as exc:
            self._error("progress", exc)

    def _refresh_devices(self, t: float, force: bool = False) -> None:
        infos: list[DeviceInfo] = []
        for meter in self.meters:
            try:
                infos.extend(meter.devices)
            except Exception as exc:
                self._error(meter, exc)
        with self._state_lock:
            changed = force or any(i.uuid not in self._infos for i in infos)
            for info in infos:
                self._infos[info.uuid] = info
        if changed and self._journal is not None:
            try:
                self._journal.set_devices(t, infos)
            except Exception as exc:
                self._journal_error(exc)
        self._device_sig = self._device_signature()

    def _journal_error(self, exc: BaseException) -> None:
        """The journal failed (an OSError: disk full, read-only): stop journaling, say so once, keep measuring."""
        self._error("journal", exc)
        if not isinstance(exc, OSError) or self.journal_failed is not None:
            return
        self.journal_failed = f"{type(exc).__name__}: {exc}"
        journal, self._journal = self._journal, None
        if journal is not None:
            with contextlib.suppress(Exception):
                journal.abandon()
            for msg in journal.errors:
                self.error_log.append(msg)
        self.error_log.append("journal: stopped after a write error; energy measured in memory from then on")
        callback = self.on_journal_error
        if callback is not None:
            with contextlib.suppress(Exception):
                callback(exc)

    def _error(self, source: Any, exc: BaseException) -> None:
        self.errors += 1
        name = source if isinstance(source, str) else getattr(source, "name", type(source).__name__)
        msg = f"{name}: {type(exc).__name__}: {exc}"
        self.error_log.append(msg)
        journal = self._journal
        if journal is not None and source != "journal" and (self.errors <= 20 or self.errors % 100 == 0):
            with contextlib.suppress(Exception):
                journal.event(self._clock(), "error", source=name, error=msg, count=self.errors)

    # --- results ------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def devices(self) -> list[DeviceInfo]:
        """Device records of every meter (methods, scopes, notes)."""
        with self._state_lock:
            return list(self._infos.values())

    def latest(self) -> dict[str, DeviceSample]:
        """The most recent sample per device."""
        with self._state_lock:
            return dict(self._last)

    def recent(self) -> list[tuple[float, list[DeviceSample]]]:
        """Ticks kept in the ring buffer (the last `history_s` seconds)."""
        with self._state_lock:
            return list(self._recent)

    def series(self) -> list[tuple[float, dict[str, float]]]:
        """Coarse (t, {uuid: cumulative J}) points covering the whole run, at most `max_points`."""
        with self._state_lock:
            return list(self._series.points)

    def totals(self) -> dict[str, DeviceTotal]:
        """Energy per device so far (final after `stop()`); devices never sampled have energy None."""
        with self._state_lock:
            t_start = self._t_start if self._t_start is not None else 0.0
            out: dict[str, DeviceTotal] = {}
            for uuid, info in self._infos.items():
                last = self._last.get(uuid)
                t_end = last.t_monotonic if last else (self._t_stop or self._clock())
                duration = max(t_end - t_start, 0.0)
                energy = last.energy_j_cumulative if last else None
                out[uuid] = DeviceTotal(
                    uuid=uuid,
                    name=info.name,
                    component=info.component,
                    method=info.method,
                    measured=info.measured,
                    energy_j=energy,
                    duration_s=duration,
                    mean_power_w=(energy / duration) if (energy is not None and duration > 0) else None,
                    samples=self._counts.get(uuid, 0),
                    last_t=last.t_monotonic if last else None,
                )
            return out

    def tick_stats(self) -> dict[str, float]:
        """Cost of a tick in seconds (mean, median, p99, max over the last 2048) and tick counts."""
        costs = sorted(self._tick_costs)
        if not costs:
            return {"ticks": 0}
        n = len(costs)
        return {
            "ticks": float(self.ticks),
            "missed_ticks": float(self.missed_ticks),
            "mean_s": sum(costs) / n,
            "median_s": costs[n // 2],
            "p99_s": costs[min(n - 1, int(0.99 * n))],
            "max_s": costs[-1],
            "errors": float(self.errors),
        }

    def flush(self) -> None:
        """Force the journal to the OS now."""
        with self._tick_lock:
            if self._journal is not None:
                try:
                    self._journal.flush(force=True)
                except Exception as exc:
                    self._error("journal", exc)


def total_energy_j(totals: dict[str, DeviceTotal], components: Iterable[str] | None = None) -> float:
    """Sum of measured-or-estimated energy over devices, optionally only some components."""
    wanted = set(components) if components is not None else None
    return sum(t.energy_j or 0.0 for t in totals.values() if wanted is None or t.component in wanted)
