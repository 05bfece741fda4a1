"""Each meter's cumulative energy as a curve, from queries that read every sample about once (issue 35).

The aggregated import used to ask the server for one ``increase()`` per job, GPU and stretch: every term
an index lookup and a read of the job's samples, hundreds of terms per request — thousands of times
the cost of reading each sample once. Here the server answers a handful of grouped queries per time chunk,
whatever the number of jobs, and the jobs are joined client-side (numpy):

- GPUs that carry a job label: per series group (host, GPU, job labels) and per bin (an hour, at a fixed
  step: one ``query_range`` per function and chunk), ``count_over_time``, ``min_over_time``,
  ``max_over_time``, and ``resets`` (per bin only on nodes where one over the window found a drop). A GPU's
  series share one monotonic counter and one scrape grid (its phase from ``timestamp()``), so within a bin
  the groups ordered by value are laid end to end on the grid: the first and last sample of every series —
  where a job label starts and stops — are known to the scrape, values and times, without reading the
  samples. A bin the summaries cannot lay out (a reset, a gap, a GPU shared by two jobs, an unknown phase)
  is read raw, grouped by bin and host.
- GPUs on nodes without the label (jobs from SLURM only) and host RAPL/Kepler meters: the counter at a fixed
  step, one ``query_range`` per node (per metric for host meters) and chunk.

Every knot is a real sample (time, counter value). A job's energy on a GPU is the curve's increase between
its window's edges (linear between the two samples around each edge, PromQL's reset rule between knots),
never extrapolated past the first or last sample: a GPU that stopped reporting gives a lower bound, and its
coverage says so. Coverage: the stretches between knots no more than ``max_gap_s`` apart, or inside one
laid-out series (whose count proves it has no gap).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from footprint.fleet.prometheus import PrometheusLimitError
from footprint.fleet.telemetry import beyond_any_device

BIN_S = 3600.0  # summary bins: an hour (the layout needs no finer; a GPU's samples per bin bound the response)
BINS_PER_CHUNK = 24  # bins per request: a day (see `summaries.Summaries._build`)
EDGE = 0.001  # bin ends sit 1 ms past whole seconds: a sample exactly on an end would be counted in two bins
CHUNK_S = BINS_PER_CHUNK * BIN_S  # a chunk's span


def first_chunk_start(window_start: float) -> float:
    """Where a window's first chunk of bins begins (its first bin ends at the window's start). Discovery lists the
    series from here a chunk's span at a time, so that a chunk's summaries select the job labels of one listing."""
    return window_start + EDGE - BIN_S


@dataclass
class Curve:
    """One meter: knot times, cumulative joules and cumulative covered seconds (all sorted by time)."""

    t: np.ndarray
    e: np.ndarray
    s: np.ndarray
    resets: int = 0
    gaps: int = 0
    max_gap_s: float = 0.0
    jumps: int = 0  # intervals whose rise (after PromQL's reset rule) no device can draw: left out, as `--exact` does

    def energy(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.interp(b, self.t, self.e) - np.interp(a, self.t, self.e)

    def seconds(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.interp(b, self.t, self.s) - np.interp(a, self.t, self.s)


@dataclass
class _Knots:
    t: array = field(default_factory=lambda: array("d"))
    v: array = field(default_factory=lambda: array("d"))
    run: array = field(default_factory=lambda: array("q"))  # knots of one laid-out series share a run id; -1: dense


class Curves:
    """Knots collected per device, then turned into `Curve`s (``finish``)."""

    def __init__(self, max_gap_s: float) -> None:
        self.max_gap_s = max_gap_s
        self.knots: dict[int, _Knots] = {}
        self.curves: dict[int, Curve] = {}
        self.spans: dict[tuple[str, int], tuple[float, float]] = {}  # (job label, device) -> first, last sample
        self.raw_bins = 0  # bins read raw because the summaries could not lay them out
        self._runs = 0

    def add_runs(self, dev: list[int], t0: list[float], v0: list[float], t1: list[float], v1: list[float]) -> None:
        """Many runs at once, each device's in the order given (as `add_run` one by one would keep them)."""
        if not dev:
            return
        devs = np.array(dev, np.int64)
        order = np.argsort(devs, kind="stable")
        d = devs[order]
        t = np.column_stack((np.array(t0)[order], np.array(t1)[order])).ravel()
        v = np.column_stack((np.array(v0)[order], np.array(v1)[order])).ravel()
        ids = np.repeat(self._runs + 1 + np.arange(len(d)), 2)
        self._runs += len(d)
        cut = np.flatnonzero(np.append(True, d[1:] != d[:-1]))
        for a, b in zip(cut.tolist(), np.append(cut[1:], len(d)).tolist(), strict=True):
            k = self.knots.setdefault(int(d[a]), _Knots())
            k.t.frombytes(t[2 * a : 2 * b].tobytes())
            k.v.frombytes(v[2 * a : 2 * b].tobytes())
            k.run.frombytes(ids[2 * a : 2 * b].tobytes())

    def add_dense(self, dev: int, t: np.ndarray, v: np.ndarray) -> None:
        k = self.knots.setdefault(dev, _Knots())
        k.t.frombytes(np.ascontiguousarray(t, float).tobytes())  # no Python float per knot
        k.v.frombytes(np.ascontiguousarray(v, float).tobytes())
        k.run.frombytes(np.full(len(t), -1, np.int64).tobytes())

    def seen(self, label: str, dev: int, t0: float, t1: float) -> None:
        if label:
            a, b = self.spans.get((label, dev), (math.inf, -math.inf))
            self.spans[(label, dev)] = (min(a, t0), max(b, t1))

    def spans_in_order(self) -> list[tuple[tuple[str, int], tuple[float, float]]]:
        """``spans`` by first sample, device and label: jobs known from their labels are numbered in this order,
        whatever order the layout met them in."""
        return sorted(self.spans.items(), key=lambda x: (x[1][0], x[0][1], x[0][0]))

    def finish(self, unit_j: dict[int, float]) -> None:
        """Knots to curves: sorted, one per instant, cumulative joules with the reset rule, covered seconds."""
        for dev in list(self.knots):  # each device's knots let go as its curve is made: not both whole at once
            k = self.knots.pop(dev)
            t, v, run = np.frombuffer(k.t), np.frombuffer(k.v), np.frombuffer(k.run, np.int64)
            order = np.lexsort((-v, t))
            t, v, run = t[order], v[order], run[order]
            keep = np.concatenate([[True], np.diff(t) > 0])
            t, v, run = t[keep], v[keep], run[keep]
            inc = np.diff(v)
            drop = inc < 0
            dt = np.diff(t)
            step = np.where(drop, v[1:], inc) * unit_j.get(dev, 1.0)
            jump = beyond_any_device(step, dt)  # damage, not energy (as `--exact` reads it)
            e = np.concatenate([[0.0], np.cumsum(np.where(jump, 0.0, step))])
            inner = (run[1:] == run[:-1]) & (run[1:] >= 0)
            gap = ~inner & (dt > self.max_gap_s)
            s = np.concatenate([[0.0], np.cumsum(np.where(gap, 0.0, dt))])
            self.curves[dev] = Curve(
                t,
                e,
                s,
                int(drop.sum()),
                int(gap.sum()),
                float(dt[gap].max()) if gap.any() else float(dt.max(initial=0.0)),
                int(jump.sum()),
            )


def matrix(
    client: Any,
    expr: Callable[[list[str] | None], str],
    hosts: list[str] | None,
    start: float,
    end: float,
    step: float,
    stats: dict[str, int],
    every_host: list[str] | None = None,
) -> list[dict[str, Any]]:
    """A ``query_range``'s series (``expr(None)``: every host; ``expr(hosts)``: those; their values as float arrays
    where the answer is well formed, `answers.matrix_data`); a request the server refuses for its size is split by
    time, then by host (``every_host``: the hosts that None stands for)."""
    try:
        stats["requests"] = stats.get("requests", 0) + 1
        data = client.query_range(expr(hosts), start, end, step, arrays=True)
    except PrometheusLimitError:
        stats["splits"] = stats.get("splits", 0) + 1
        n = int(round((end - start) / step)) + 1
        if n > 1:
            mid = start + (n // 2) * step
            return matrix(client, expr, hosts, start, mid - step, step, stats, every_host) + matrix(
                client, expr, hosts, mid, end, step, stats, every_host
            )
        hosts = every_host if hosts is None else hosts
        if hosts and len(hosts) > 1:
            h = len(hosts) // 2
            return matrix(client, expr, hosts[:h], start, end, step, stats) + matrix(
                client, expr, hosts[h:], start, end, step, stats
            )
        raise
    return series_of(data)


def series_of(data: Any) -> list[dict[str, Any]]:
    """An answer's series that carry a label set (anything else in ``result`` is no series)."""
    result = data.get("result") if isinstance(data, dict) else None
    return [s for s in result or [] if isinstance(s, dict) and isinstance(s.get("metric"), dict)]


def points(s: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A series' (times, values), plausible readings only: a sample of null, text or 1e300 is no reading (left out
    alone, never the whole series, never a 300-digit energy). Values already decoded to an (n, 2) float array
    (`answers.matrix_data`) are filtered alike."""
    vals = s.get("values")
    if isinstance(vals, np.ndarray):
        return _plausible(vals[:, 0], vals[:, 1])
    if not vals or not isinstance(vals, list):
        vals = []
    both = _columns(vals)
    if both is None:  # a malformed pair: each read alone, the bad ones NaN
        arr = np.array([_sample(x) for x in vals], float).reshape(-1, 2)
        both = arr[:, 0], arr[:, 1]
    return _plausible(*both)


def _columns(vals: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``[time, "value"]`` pairs as two float columns at C speed (3x faster than a pair at a time); None where one
    pair is malformed."""
    try:
        return np.array([x[0] for x in vals], float), np.array([x[1] for x in vals], float)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        return None


def _plausible(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = _ok(t, v)
    return t[ok], v[ok]


def _ok(t: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The plausible readings: finite times, finite counter values in [0, `MAX_COUNTER`)."""
    return np.isfinite(t) & np.isfinite(v) & (v >= 0) & (v < MAX_COUNTER)


def points_many(series: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """`points` of many series at once: their (times, values) end to end and how many each kept. A request's
    summaries are hundreds of short series; converting them together costs a few numpy calls, not a few per series."""
    arrays = [s.get("values") for s in series]
    if all(isinstance(a, np.ndarray) for a in arrays):  # decoded to floats already (`answers.matrix_data`)
        lens = [len(a) for a in arrays]
        both = np.concatenate(arrays) if arrays else np.zeros((0, 2))
        t, v = both[:, 0], both[:, 1]
    elif any(isinstance(a, np.ndarray) for a in arrays):  # a request split, some of its answers read untyped
        return _each(series)
    else:
        vals: list[Any] = []
        lens = []
        for s in series:
            v = s.get("values") or []
            v = v if isinstance(v, list) else []
            lens.append(len(v))
            vals += v
        both = _columns(vals)
        if both is None:
            return _each(series)
        t, v = both
    ok = _ok(t, v)
    if ok.all():
        return t, v, lens
    upto = np.concatenate([[0], np.cumsum(ok)])[np.cumsum([0, *lens])]  # readings kept before each series
    return t[ok], v[ok], np.diff(upto).tolist()


def _each(series: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """`points_many` a series at a time."""
    each = [points(s) for s in series]
    return (
        np.concatenate([e[0] for e in each] or [np.zeros(0)]),
        np.concatenate([e[1] for e in each] or [np.zeros(0)]),
        [len(e[0]) for e in each],
    )


MAX_COUNTER = 1e18  # J (or the counter's unit): 30 GW-years, past any GPU's lifetime energy


def _sample(x: Any) -> tuple[float, float]:
    """One [time, "value"] pair as floats; NaN for anything else (dropped by `points`)."""
    try:
        return float(x[0]), float(x[1])
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        return math.nan, math.nan


def in_order(jobs: list[Any], fn: Callable[[Any], Any], workers: int) -> Iterator[Any]:
    """``fn`` over ``jobs`` in parallel, results in order, at most ``workers`` in flight or done and not yet taken: the
    next job starts as soon as the oldest result is taken, so the server works while the caller consumes (batches
    that waited for their slowest member left the server idle while each batch was consumed)."""
    w = max(workers, 1)
    with ThreadPoolExecutor(max_workers=w) as pool:
        ahead: deque[Future[Any]] = deque(pool.submit(fn, j) for j in jobs[:w])
        for j in jobs[w:]:
            done = ahead.popleft().result()
            ahead.append(pool.submit(fn, j))
            yield done
        while ahead:
            yield ahead.popleft().result()


__all__ = [
    "BIN_S",
    "BINS_PER_CHUNK",
    "CHUNK_S",
    "EDGE",
    "first_chunk_start",
    "Curve",
    "Curves",
    "in_order",
    "matrix",
    "points",
    "points_many",
    "series_of",
]
