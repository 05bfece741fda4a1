"""The lifecycle every GPU meter shares (NVML's, amdsmi's): start once and never raise, sample under one lock,
poll power from a background thread where a GPU has no energy counter, stop and shut the library down.

A vendor meter supplies the hooks: `_start` (open the library, probe each GPU into ``self._gpus``), `_read` (one
reading of one GPU), `_poll` (one background poll of one GPU), `_needs_polling`, `_on_error`, `_summarise` and
`_shutdown`. Each GPU state object has ``info`` (a DeviceInfo), ``energy_j``, ``power_w`` and ``last_t``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .base import UNAVAILABLE, DeviceInfo, DeviceSample


class GpuMeter:
    """Shared state and lifecycle; see the module docstring for the hooks a vendor meter implements."""

    name = "gpu"
    library = "the GPU library"  # in notes: "<library> meter failed to start", "<shutdown> failed"

    def __init__(
        self,
        devices: Sequence[int | str] | None,
        poll_period_s: float,
        background_poll: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._selection = list(devices) if devices is not None else None
        self.poll_period_s = float(poll_period_s)
        self.background_poll = background_poll
        self._clock = clock
        self._lock = threading.RLock()
        self._gpus: list[Any] = []
        self._failed: list[DeviceInfo] = []
        self.notes: list[str] = []
        self._initialised = False
        self._started = False
        self._t_start: float | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def devices(self) -> list[DeviceInfo]:
        """One record per measured GPU, then any that could not be opened."""
        with self._lock:
            return [g.info for g in self._gpus] + list(self._failed)

    @property
    def available(self) -> bool:
        """True if at least one GPU is being measured."""
        return any(g.info.method != UNAVAILABLE for g in self._gpus)

    def start(self) -> None:
        """Open the library, choose a method per GPU and take the baseline readings. Never raises."""
        with self._lock:
            if self._started:
                return
            self._started = True
            try:
                self._start()
            except Exception as exc:  # a bug or an exotic binding must not break the training job
                self.notes.append(f"{self.library} meter failed to start: {type(exc).__name__}: {exc}")
            self._t_start = self._clock()
        self._stop_event.clear()
        if any(self._needs_polling(g) for g in self._gpus):
            self._start_polling()

    def _start_polling(self) -> None:
        """Poll power from a background thread (once; not after stop): at start, or when a GPU falls back to power."""
        if self.background_poll and self._thread is None and not self._stop_event.is_set():
            self._thread = threading.Thread(target=self._poll_loop, name=f"{self.name}-power-poll", daemon=True)
            self._thread.start()

    def sample(self) -> list[DeviceSample]:
        """Current cumulative energy (J since start) and power of every measured GPU. Never raises."""
        out: list[DeviceSample] = []
        with self._lock:
            for gpu in self._gpus:
                if gpu.info.method == UNAVAILABLE:
                    continue
                try:
                    self._read(gpu)
                except Exception as exc:  # defensive: _read handles the library's errors itself
                    self._on_error(gpu, exc, self._clock())
                t = gpu.last_t if gpu.last_t is not None else self._clock()
                out.append(DeviceSample(gpu.info.uuid, t, gpu.energy_j, gpu.power_w))
        return out

    def stop(self) -> None:
        """Stop polling, write summary notes, shut the library down. Never raises."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, 5 * self.poll_period_s))
            self._thread = None
        with self._lock:
            for gpu in self._gpus:
                self._summarise(gpu)
            if self._initialised:
                self._initialised = False
                try:
                    self._shutdown()
                except Exception as exc:
                    self.notes.append(f"{self.library} shutdown failed: {exc}")

    def energy_j(self) -> dict[str, float]:
        """Cumulative energy per GPU UUID as of the last reading."""
        with self._lock:
            return {g.info.uuid: g.energy_j for g in self._gpus if g.info.method != UNAVAILABLE}

    def __enter__(self) -> GpuMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _poll_loop(self) -> None:
        period = max(self.poll_period_s, 0.001)
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            with self._lock:
                for gpu in self._gpus:
                    try:
                        self._poll(gpu)
                    except Exception as exc:
                        self._on_error(gpu, exc, self._clock())
            next_t += period
            delay = next_t - time.monotonic()
            if delay < 0:  # overran: skip the missed slots instead of bursting
                next_t = time.monotonic()
                delay = 0.0
            self._stop_event.wait(delay)

    def _track_gap(self, gpu: Any, dt: float) -> None:
        if gpu.info.max_gap_s is None or dt > gpu.info.max_gap_s:
            gpu.info.max_gap_s = dt

    # --- hooks --------------------------------------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _read(self, gpu: Any) -> None:
        raise NotImplementedError

    def _poll(self, gpu: Any) -> None:
        if self._needs_polling(gpu):
            self._read(gpu)

    def _needs_polling(self, gpu: Any) -> bool:
        raise NotImplementedError

    def _on_error(self, gpu: Any, exc: BaseException, t: float) -> None:
        raise NotImplementedError

    def _summarise(self, gpu: Any) -> None:
        if gpu.info.errors:
            gpu.info.note(f"{gpu.info.errors} failed readings in total")

    def _shutdown(self) -> None:
        raise NotImplementedError
