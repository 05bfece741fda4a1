"""Play a recorded power log back as if it were a live meter (demos, dashboards, tests).

Input: a DataFrame or CSV with columns ``timestamp`` (seconds as numbers, or datetimes), ``device``
and ``power_w`` (``t_s`` is accepted in place of ``timestamp``; `read_nvidia_smi_csv` output works
as is). Time runs from the log's first reading at `speed` x wall time; the energy reported is the
exact integral of the piecewise-linear power (the trapezoid rule), so replaying a log gives the same
energy as `integrate_energy` on it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import REPLAY, DeviceInfo, DeviceSample

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class _Trace:
    info: DeviceInfo
    t: list[float]  # seconds from the log's start
    p: list[float]
    cum: list[float]  # cumulative energy at each t

    def energy_at(self, x: float) -> float:
        """Exact trapezoid integral from the trace start to x (x within the trace)."""
        from bisect import bisect_right

        t, p = self.t, self.p
        if x <= t[0]:
            return 0.0
        if x >= t[-1]:
            return self.cum[-1]
        i = bisect_right(t, x) - 1
        h = t[i + 1] - t[i]
        u = x - t[i]
        slope = (p[i + 1] - p[i]) / h if h > 0 else 0.0
        return self.cum[i] + p[i] * u + 0.5 * slope * u * u

    def power_at(self, x: float) -> float:
        from bisect import bisect_right

        t, p = self.t, self.p
        if x <= t[0]:
            return p[0]
        if x >= t[-1]:
            return p[-1]
        i = bisect_right(t, x) - 1
        h = t[i + 1] - t[i]
        return p[i] + (p[i + 1] - p[i]) * (x - t[i]) / h if h > 0 else p[i]


class ReplayMeter:
    """A recorded log as a meter. `loop=True` restarts the log at its end (energy keeps adding up)."""

    name = "replay"

    def __init__(
        self,
        data: pd.DataFrame | str | os.PathLike[str],
        *,
        speed: float = 1.0,
        loop: bool = False,
        clock: Callable[[], float] = time.monotonic,
        method: str = REPLAY,
        component: str = "gpu",
    ) -> None:
        import pandas as pd

        if speed <= 0:
            raise ValueError("speed must be positive")
        source = "DataFrame"
        if not isinstance(data, pd.DataFrame):
            source = os.fspath(data)
            data = pd.read_csv(source, skipinitialspace=True)
        df = data
        if "t_s" in df:
            t_all = df["t_s"].to_numpy(dtype=float)
        elif "timestamp" in df:
            col = df["timestamp"]
            if pd.api.types.is_numeric_dtype(col):
                t_all = col.to_numpy(dtype=float)
            else:
                ts = pd.to_datetime(col)
                if getattr(ts.dt, "tz", None) is not None:
                    ts = ts.dt.tz_convert("UTC").dt.tz_localize(None)
                t_all = ((ts - pd.Timestamp("1970-01-01")) / pd.Timedelta(seconds=1)).to_numpy(dtype=float)
        else:
            raise ValueError("replay data needs a 'timestamp' (or 't_s') column")
        if "power_w" not in df:
            raise ValueError("replay data needs a 'power_w' column")
        p_all = df["power_w"].to_numpy(dtype=float)
        devices = df["device"].astype(str).to_numpy() if "device" in df else ["0"] * len(df)
        names = df["name"].astype(str).to_numpy() if "name" in df else None
        finite = [math.isfinite(a) and math.isfinite(b) for a, b in zip(t_all, p_all, strict=True)]
        t0 = min((a for a, ok in zip(t_all, finite, strict=True) if ok), default=0.0)
        self.source = source
        self.speed = float(speed)
        self.loop = loop
        self._clock = clock
        self._lock = threading.Lock()
        self._wall0: float | None = None
        self._traces: list[_Trace] = []
        for index, device in enumerate(dict.fromkeys(str(d) for d in devices)):
            rows = sorted(
                (float(t_all[i] - t0), float(p_all[i])) for i in range(len(df)) if finite[i] and str(devices[i]) == device
            )
            dedup: dict[float, float] = {}
            for t, p in rows:
                dedup[t] = p  # keep the last reading at a repeated timestamp
            t = list(dedup)
            p = list(dedup.values())
            if len(t) < 2:
                continue
            cum = [0.0]
            for i in range(1, len(t)):
                cum.append(cum[-1] + 0.5 * (p[i] + p[i - 1]) * (t[i] - t[i - 1]))
            name = device
            if names is not None:
                name = next((str(names[i]) for i in range(len(df)) if str(devices[i]) == device), device)
            info = DeviceInfo(
                uuid=device,
                name=name,
                index=index,
                method=method,
                component=component,
                power_scope="board" if component == "gpu" else None,
            )
            info.note(f"replayed from {source} at {speed:g}x" + (" (looping)" if loop else ""))
            self._traces.append(_Trace(info, t, p, cum))
        if not self._traces:
            raise ValueError("replay data has no device with two or more valid readings")

    @classmethod
    def from_nvidia_smi(cls, path: str | os.PathLike[str], **kwargs: Any) -> ReplayMeter:
        """Replay an nvidia-smi --query-gpu CSV log (see `meters.importers.read_nvidia_smi_csv`)."""
        from .importers import read_nvidia_smi_csv

        return cls(read_nvidia_smi_csv(path), **kwargs)

    @property
    def devices(self) -> list[DeviceInfo]:
        return [tr.info for tr in self._traces]

    @property
    def duration_s(self) -> float:
        """Length of the longest trace, in log seconds."""
        return max(tr.t[-1] for tr in self._traces)

    @property
    def finished(self) -> bool:
        """True once a non-looping replay has passed the end of the log."""
        return not self.loop and self._wall0 is not None and (self._clock() - self._wall0) * self.speed >= self.duration_s

    def total_energy_j(self) -> dict[str, float]:
        """Energy of each whole trace (what a full replay reports at its end)."""
        return {tr.info.uuid: tr.cum[-1] for tr in self._traces}

    def start(self) -> None:
        with self._lock:
            if self._wall0 is None:
                self._wall0 = self._clock()

    def sample(self) -> list[DeviceSample]:
        """Energy since the start of the log up to the replay position. Never raises."""
        try:
            with self._lock:
                now = self._clock()
                if self._wall0 is None:
                    self._wall0 = now
                x = (now - self._wall0) * self.speed
                out = []
                for tr in self._traces:
                    span = tr.t[-1]
                    if self.loop and span > 0 and x > span:
                        laps, rest = divmod(x, span)
                        energy = laps * tr.cum[-1] + tr.energy_at(rest)
                        power = tr.power_at(rest)
                    else:
                        energy = tr.energy_at(x)
                        power = tr.power_at(x) if x <= span else None
                    out.append(DeviceSample(tr.info.uuid, now, energy, power))
                return out
        except Exception as exc:
            for tr in self._traces:
                tr.info.errors += 1
                tr.info.note(f"replay error: {type(exc).__name__}: {exc}")
            return []

    def stop(self) -> None:
        return None
