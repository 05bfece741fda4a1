"""The queries behind `curves`: grouped per-bin summaries laid out on each GPU's scrape grid, fixed-step
counters for nodes without job labels and for host meters, raw samples only for bins that need them.

Requests per day of window: three summaries (count, increase, max; ``max by`` host, GPU and job labels, so a
counter repeated on every MIG instance is one group; each group's first sample worked back from ``increase``, which
also shows any drop: `bins.first_values`), one fixed-step ``query_range`` per unlabelled node and per
host-meter metric, and the raw samples of the bins to repair: GPUs with one UUID label read several bins in one
request (`RAW_REQUEST`), the others one request a bin (in parallel). Once per window: whether the server's
``increase`` is Prometheus' (`Summaries._increase_ok`; if not, ``min`` in its place and ``resets`` per GPU over the
whole window, the hourly ``resets`` only on nodes where it found one) and the scrape phases (``timestamp()``,
asked again only while a meter has none). Days are fetched two at a time, the next
asked as soon as the oldest is consumed (Thanos and Mimir split them further), and consumed in time order, so
the answers held at once are bounded by the concurrency, not the window.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from footprint.fleet.bins import NO_PART, Part, Runs, Table, first_values, increase_of
from footprint.fleet.curves import BIN_S, BINS_PER_CHUNK, EDGE, Curves, in_order, matrix, points, points_many, series_of
from footprint.fleet.prometheus import PrometheusClient, PrometheusLimitError
from footprint.fleet.promql import Kept, range_of, regex_alt
from footprint.fleet.telemetry import CPU, GPU_COUNTER, LOOKBACK_S, RAM

IDLE_CHUNKS = 8  # chunks (days) whose series without a job label are asked at once (`Summaries._idle`)
MAX_STEPS = 10_000  # steps per series in one query_range (Prometheus' limit: 11,000)
RAW_SAMPLES = 200_000  # samples (GPUs x bins x samples a bin) one raw read of several bins asks at most
# what a request costs, in samples read beside it: ~4.8 ms of client and server CPU a raw read (a 512-GPU month's 586
# one-bin reads: 1.4 s of each) against ~0.45 us a sample more (server ~0.1, client decoding ~0.35)
RAW_REQUEST = 10_000
BLANK = '=~"\\\\s*"'  # PromQL: a label absent, empty or only blanks, as a matcher's operator and value
SUMMARIES = (("count_over_time", "max"), ("min_over_time", "min"), ("max_over_time", "max"), ("resets", "max"))
# where the server's ``increase`` is Prometheus' (`Summaries._increase_ok`), the second summary: with count and max it gives
# each group's first sample and shows any drop, so no ``resets`` over the window (one read of every sample less)
BY_INCREASE = (SUMMARIES[0], ("increase", "max"), *SUMMARIES[2:])


def grid_step(estimate: float) -> float:
    """The scrape interval as the grid's step: a whole number of seconds when the estimate is within 5 % of one
    (an hour's count is off by one where a sample sits on both of its ends)."""
    r = float(round(estimate))
    return r if r >= 1 and abs(r - estimate) <= 0.05 * estimate else round(estimate, 3)


@dataclass
class _Chunk:
    ends: list[float]
    table: Table | None = None  # the summaries in columns (`_group`)
    phase: dict[int, float] = field(default_factory=dict)
    latest: dict[tuple[int, float], float] = field(default_factory=dict)  # (device, instant) -> its latest sample
    dense: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    by_job: str | None = None  # the matcher of the chunk's series with a job label (`Summaries._by_job`); "": none
    keys: dict[tuple[tuple[str, str], ...], tuple[int, str] | None] = field(default_factory=dict)  # labels -> key


class Summaries:
    """Builds `Curves` for the counter GPUs and host meters that discovery found (``found``: `aggregate.Found`)."""

    def __init__(
        self,
        client: PrometheusClient,
        found: Any,
        window: tuple[float, float],
        scrape_s: float,
        max_gap_s: float,
        unlabelled: set[str],
        concurrency: int = 4,
        resume: Path | None = None,
    ) -> None:
        self.client, self.found, self.window = Kept(client, resume), found, window
        self.n = found.fetch.names
        self.s = grid_step(scrape_s)
        self.unlabelled = unlabelled
        self.concurrency = concurrency
        self.max_gap_s = max_gap_s
        self.bin_s = BIN_S
        self.stats: dict[str, int] = {}
        self.by_increase = False  # decided at `_build` (`_increase_ok`)
        self._summaries = SUMMARIES
        devs = found.fetch.t.devices
        self.gpus = [d for d in devs if d.kind == GPU_COUNTER]
        self.raw_hosts = sorted({found.labels[d.id].get(self.n.host_label, "") for d in self.gpus if d.host in unlabelled})
        every = {found.labels[d.id].get(self.n.host_label, "") for d in self.gpus}
        self.labelled_hosts = sorted(every - set(self.raw_hosts))  # the nodes the summaries and `resets` ask
        self.meters = sorted({(d.metric, d.kind) for d in devs if d.kind in (CPU, RAM)})

    # ---- the whole window ------------------------------------------------------------------------
    def build(self) -> Curves:
        """The curves; bins halved (and everything asked again) while the server refuses one bin of one node for
        its size (``--query.max-samples`` far below the default).
        """
        while True:
            try:
                return self._build()
            except PrometheusLimitError:
                if self.bin_s / 2 < 4 * self.s:
                    raise
                self.bin_s /= 2
                self.stats["splits"] = self.stats.get("splits", 0) + 1

    def _build(self) -> Curves:
        self.curves = Curves(self.max_gap_s)
        self._open: dict[int, list[Any]] = {}  # device -> its last run, still growing: [label, t0, v0, t1, v1]
        self._done: tuple[list[Any], ...] = ([], [], [], [], [])  # runs finished, not yet in the curves: columns
        self._last_v: dict[int, float] = {}
        self._seen: dict[int, float] = {}  # device -> the end of the last bin it had samples in
        self._phase: dict[int, float] = {}
        lo, hi = self.window
        k = int(math.ceil((hi - lo) / self.bin_s)) + 1
        ends = [lo + i * self.bin_s + EDGE for i in range(k + 1)]
        # a day a chunk: series come and go with the jobs, and a query_range costs the series it selects times its
        # steps (a month of 64 GPUs in one request: 33 s a summary; in days: 0.02 s a day)
        chunks = [ends[i : i + BINS_PER_CHUNK] for i in range(0, len(ends), BINS_PER_CHUNK)]
        self.by_increase = self._increase_ok(ends)
        self._summaries = BY_INCREASE if self.by_increase else SUMMARIES
        self._reset_devs: set[int] = set()  # GPUs whose counter went down in the window (`_reset_hosts`)
        self._resetting = [] if self.by_increase else self._reset_hosts(ends)
        self._first_end, self._last_end = chunks[0][0], chunks[-1][-1]
        self._idle_parts: dict[tuple[int, int], list[Any]] = {}  # (summary, chunks' group) -> [answer, chunks left]
        self._idle_users = [0] * (len(chunks) // IDLE_CHUNKS + 1)  # a group's chunks that select by job label
        for i, ch in enumerate(chunks):
            self._idle_users[i // IDLE_CHUNKS] += self.found.lists(ch[0] - self.bin_s, ch[-1])
        self._idle_lock = threading.Lock()
        if self.gpus or self.meters:
            for c in in_order(chunks, self._fetch, 2):  # two chunks in flight at most: memory bounded by two
                self._consume(c)
        for dev in list(self._open):
            self._close(dev)
        self._flush()
        units = {d.id: self.n.energy_unit_j for d in self.gpus}
        self.curves.finish(units)
        self.stats["reused"] = self.client.reused
        return self.curves

    # ---- fetching (threads) ----------------------------------------------------------------------
    def _fetch(self, ends: list[float]) -> _Chunk:
        """One chunk's answers, its requests in parallel (``concurrency``): the summaries, the phases, the
        fixed-step counters of each unlabelled node and host-meter metric."""
        c = _Chunk(ends)
        c.by_job = self._listed(ends[0] - self.bin_s, ends[-1])  # once for the chunk's summaries
        labelled = any(d.host not in self.unlabelled for d in self.gpus)
        asks: list[Callable[[], Any]] = []
        if labelled:
            asks += [functools.partial(self._summary, c, f) for f in range(len(SUMMARIES) - 1)]
            if self._resetting:
                asks.append(functools.partial(self._summary, c, len(SUMMARIES) - 1, self._resetting))
        unphased = self._unphased(c) if self.gpus else []
        if unphased:
            asks.append(functools.partial(self._phases, c, unphased))
        asks += [functools.partial(self._dense_gpus, c, host) for host in self.raw_hosts]
        asks += [functools.partial(self._dense_meters, c, metric, kind) for metric, kind in self.meters]
        parts: dict[int, Part] = {}
        for part in in_order(asks, lambda ask: ask(), self.concurrency):
            if part is not None:
                parts[part[0]] = part[1]
        self._group(c, parts)
        return c

    def _sel(self, metric: str, hosts: list[str] | None, exclude: bool = False, also: str = "") -> str:
        """``metric`` on these nodes (``exclude``: on all others; None: every node), with the matchers ``also``."""
        n = self.n
        if hosts is None:
            return f"{metric}{n.matchers(also)}"
        op = "!~" if exclude else "=~"
        on = f'{n.host_label}{op}"{regex_alt(hosts)}"'
        return f"{metric}{n.matchers(f'{on},{also}' if also else on)}"

    def _listed(self, a: float, b: float) -> str | None:
        """The matcher of the series whose job label discovery listed in [a, b] ("": none listed); None where
        [a, b] reaches outside the days listed or the exporter has no job label (every series is then selected)."""
        jobs = self.found.jobs_between(a, b) if self.n.job_labels else None
        return None if jobs is None else self._by_job(jobs) if jobs else ""

    def _by_job(self, jobs: list[str]) -> str:
        """The matcher of the series whose last job label is one of ``jobs`` (as discovery listed them: a set
        matcher, looked up in the label index), or of those without a job label where ``jobs`` is empty (a blank
        label, as the job key reads it: absent, empty or whitespace). Without one a query over a day walks every
        series of its TSDB block (a month of jobs: 2.2 s of a 512-GPU month's 6.2 s for one summary)."""
        last = self.n.job_labels[-1]
        return last + (f'=~"{regex_alt(jobs)}"' if jobs else BLANK)

    def _group(self, c: _Chunk, parts: dict[int, Part]) -> None:
        """The summaries side by side in ``c.table``: per device, job label and bin, count, min (or increase), max
        and resets; a value not answered is NaN (the bin is then read raw). A GPU with no reset in the window has
        none in any bin; with ``increase``, a drop is seen in the bin itself (`bins.first_values`)."""
        steady = {d.id for d in self.gpus} - self._reset_devs
        c.table = Table([parts.get(f, NO_PART) for f in range(len(SUMMARIES))], steady, self.by_increase)

    def _summary(self, c: _Chunk, f: int, only: list[str] | None = None) -> tuple[int, Part]:
        """Summary ``f`` (`SUMMARIES`) of every labelled series group in every bin of the chunk (``only``: of these
        nodes), as ``(f, Part)``. Inside the days discovery listed, the series
        with a job label are selected by the chunk's job labels and those without one come from `_idle`."""
        if only or c.by_job is None:
            return f, self._parts(f, c.ends[0], c.ends[-1], "", only, c.keys)
        out = self._parts(f, c.ends[0], c.ends[-1], c.by_job, None, c.keys) if c.by_job else NO_PART
        return f, out.join(self._idle(c, f))  # keys without a job label: none of them above

    def _parts(self, f: int, a: float, b: float, match: str, only: list[str] | None, known: dict[Any, Any]) -> Part:
        """Summary ``f`` of the labelled nodes' series of the matcher ``match`` ("": all of them; ``only``: of these
        nodes) in the bins ending at ``a`` to ``b``, keyed by (device, job label), bins numbered from ``a``;
        ``known``: the keys of label sets already seen."""
        n, by = self.n, (self.n.host_label, self.n.gpu_label, *self.n.job_labels)
        fn, agg = self._summaries[f]

        def expr(hosts: list[str] | None) -> str:  # hosts: ``only``, or the nodes a refused request is split into
            if hosts:
                sel = self._sel(n.energy_metric, hosts, also=match)
            else:
                sel = self._sel(n.energy_metric, self.raw_hosts or None, exclude=True, also=match)
            return f"{agg} by ({','.join(by)}) ({fn}({sel}[{range_of(self.bin_s)}]))"

        keys, kept = [], []
        for s in matrix(self.client, expr, only, a, b, self.bin_s, self.stats, self.labelled_hosts):
            lab = s["metric"]
            at = tuple(lab.items())  # a group's labels: the same in each of the chunk's summaries
            key = known.get(at, False)
            if key is False:
                dev = self.found.gpu_of(lab)
                key = known[at] = None if dev is None else (dev, self.found.fetch._job_key(lab))
            if key is not None:
                keys.append(key)
                kept.append(s)
        t, v, lens = points_many(kept)  # every series' samples converted at once: a few hundred series a request
        return Part(keys, np.array(lens, np.int64), np.rint((t - a) / self.bin_s).astype(np.int64), v)

    def _idle(self, c: _Chunk, f: int) -> Part:
        """Summary ``f`` of the series without a job label in the chunk's bins, asked for `IDLE_CHUNKS` chunks at
        once: selecting them computes the job label's inverse (every job label of the TSDB block: 0.35 s of server
        CPU a query at 4,096 GPUs, where the day's job labels cost 0.13 s and walking the block 0.62 s), once for
        those days rather than once a day. A GPU's unlabelled series are one or two a GPU, so the answer stays
        small; each chunk takes its bins, and the answer is let go when its last chunk has."""
        span = BINS_PER_CHUNK * self.bin_s
        k = int(round((c.ends[0] - self._first_end) / span)) // IDLE_CHUNKS
        with self._idle_lock:
            entry = self._idle_parts.get((f, k))
            mine = entry is None
            if mine:
                entry = self._idle_parts[(f, k)] = [Future(), self._idle_users[k]]
        fut = entry[0]
        if mine:
            try:
                a = self._first_end + k * IDLE_CHUNKS * span
                b = min(a + (IDLE_CHUNKS * BINS_PER_CHUNK - 1) * self.bin_s, self._last_end)
                parts = self._parts(f, a, b, self._by_job([]), None, {})
                fut.set_result((a, parts))
            except BaseException as exc:
                fut.set_exception(exc)
        a, parts = fut.result()
        out = parts.window(int(round((c.ends[0] - a) / self.bin_s)), len(c.ends))
        with self._idle_lock:
            entry[1] -= 1
            if entry[1] <= 0:
                self._idle_parts.pop((f, k), None)
        return out

    def _increase_ok(self, ends: list[float]) -> bool:
        """Whether the server's ``increase`` is Prometheus' to the last digits (`bins.increase_of`), so that the
        summaries can read it in place of ``min`` and no ``resets`` over the window (`first_values`). Asked of one
        labelled GPU's raw samples over one bin (the window's last, then its middle; a few hundred samples): every
        series that the check can judge must agree, and one at least. Engines that compute it otherwise (without
        the extrapolation, say) keep ``min`` and ``resets``, the same numbers at one read more."""
        gpu = next((d for d in self.gpus if d.host not in self.unlabelled), None)
        if gpu is None:
            return False
        lab, n = self.found.labels[gpu.id], self.n
        sel = self._sel(n.energy_metric, [lab.get(n.host_label, "")], also=f'{n.gpu_label}="{lab.get(n.gpu_label, "")}"')
        span = range_of(self.bin_s)
        inside = [e for e in ends if e <= self.window[1] + EDGE]
        for at in dict.fromkeys((inside or ends)[-1:] + ends[len(ends) // 2 : len(ends) // 2 + 1]):
            try:
                raw = self.client.query(f"{sel}[{span}]", at=at)
                got = self.client.query(f"increase({sel}[{span}])", at=at)
            except PrometheusLimitError:
                return False
            self.stats["requests"] = self.stats.get("requests", 0) + 2
            if not isinstance(raw, dict) or not isinstance(got, dict) or raw.get("resultType") != "matrix":
                return False
            server = {}
            for s in got.get("result") or []:
                try:
                    server[_labels(s)] = float(s["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    return False
            judged = 0
            for s in raw.get("result") or []:
                want = increase_of(*points(s), at, self.bin_s)
                if want is None:
                    continue
                have = server.get(_labels(s))
                if have is None or not abs(have - want) <= 1e-9 * max(abs(want), 1.0):
                    return False
                judged += 1
            if judged:
                return True
        return False

    def _reset_hosts(self, ends: list[float]) -> list[str]:
        """The nodes of the labelled GPUs whose counter went down anywhere in the bins (``self._reset_devs``: those
        GPUs): one ``resets`` over the whole window instead of one per bin, a read of each sample once and a value
        per GPU. A bin's resets count drops between its own samples, which are drops inside the window, so a GPU
        with none in the window has none in any bin; only the nodes of the others are asked ``resets`` per bin.
        The nodes are asked in ``concurrency`` groups at once (one query is one server thread: a 512-GPU month's
        took 2.1 s on one core while the other and the client waited); a group the server refuses for its size
        is asked in halves of the window (whole bins each)."""
        n = self.n
        hosts = self.labelled_hosts
        if not hosts:
            return []
        k = max(1, min(self.concurrency, len(hosts)))
        groups = [hosts[g * len(hosts) // k : (g + 1) * len(hosts) // k] for g in range(k)]
        for answer in in_order(groups, lambda nodes: self._resets(nodes, ends, 0, len(ends) - 1), k):
            for s in answer:
                lab = s.get("metric") if isinstance(s, dict) else None
                if not isinstance(lab, dict):
                    continue
                dev = self.found.gpu_of(lab)
                try:
                    r = float(s["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    r = math.nan
                if dev is not None and r != 0:  # a reset, or an answer not understood: asked per bin
                    self._reset_devs.add(dev)
        return sorted({self.found.labels[d].get(n.host_label, "") for d in self._reset_devs})

    def _resets(self, nodes: list[str], ends: list[float], i: int, j: int) -> list[Any]:
        """``resets`` per GPU of these nodes over the bins ending at ``ends[i..j]``, in halves if refused (a method,
        not a closure calling itself: that would be a reference cycle holding the curves until a collection)."""
        n = self.n
        self.stats["requests"] = self.stats.get("requests", 0) + 1
        sel = self._sel(n.energy_metric, nodes)
        try:
            expr = f"max by ({n.host_label},{n.gpu_label}) (resets({sel}[{range_of((j - i + 1) * self.bin_s)}]))"
            data = self.client.query(expr, at=ends[j])
        except PrometheusLimitError:
            if i == j:
                raise
            self.stats["splits"] = self.stats.get("splits", 0) + 1
            h = (i + j) // 2
            return self._resets(nodes, ends, i, h) + self._resets(nodes, ends, h + 1, j)
        return (data.get("result") or []) if isinstance(data, dict) else []

    def _unphased(self, c: _Chunk) -> list[tuple[str, int]]:
        """The metrics to ask ``timestamp()`` of in this chunk: every one in the window's first chunk, then only those
        with a meter whose scrape phase is not known yet (phases are steady)."""
        first = c.ends[0] < self.window[0] + self.bin_s
        known = self._phase
        out = [(self.n.energy_metric, GPU_COUNTER)] if first or any(d.id not in known for d in self.gpus) else []
        for metric, kind in self.meters:
            devs = [d.id for d in self.found.fetch.t.devices if d.kind == kind and d.metric == metric]
            if first or any(d not in known for d in devs):
                out.append((metric, kind))
        return out

    def _phases(self, c: _Chunk, metrics: list[tuple[str, int]]) -> None:
        """Each meter's scrape phase (a sample's time modulo the interval), from its latest sample at the chunk's
        end (and the window's start): one ``timestamp()`` per metric and instant, a sample per series. A meter
        silent at that instant keeps the phase an earlier chunk found. Asked only until every meter has one
        (`_unphased`): elsewhere a GPU's latest sample at a chunk's end is not known, and a bin where it appears
        there is read raw."""
        first = c.ends[0] < self.window[0] + self.bin_s  # the window's first bin: where GPUs that appear start
        instants = (c.ends[-1], c.ends[0]) if first else (c.ends[-1],)
        for (metric, kind), at in itertools.product(metrics, instants):
            for s in self._latest(metric, kind, at):
                lab = s.get("metric") if isinstance(s, dict) else None
                if not isinstance(lab, dict):
                    continue
                if kind == GPU_COUNTER:
                    dev = self.found.gpu_of(lab)
                else:
                    dev = self.found.fetch._device(kind, {k: str(v) for k, v in lab.items()} | {"__name__": metric}, metric).id
                try:
                    ts = float(s["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                if dev is not None and math.isfinite(ts):
                    c.phase.setdefault(dev, round(ts % self.s, 3))
                    c.latest[(dev, at)] = max(c.latest.get((dev, at), -math.inf), ts)

    def _latest(self, metric: str, kind: int, at: float) -> list[Any]:
        """``timestamp()`` of the metric's series at ``at``. The GPU counter's inside the days discovery listed: its
        series with a job label listed around ``at``, then those without one (the selection `_summary` makes), so
        the server looks up those series, not every series of the TSDB block (a 4,096-GPU month: ~3 s a query)."""
        by_job = self._listed(at - LOOKBACK_S, at) if kind == GPU_COUNTER else None
        parts = [""] if by_job is None else [m for m in (by_job, self._by_job([])) if m]
        out: list[Any] = []
        for also in parts:
            self.stats["requests"] = self.stats.get("requests", 0) + 1
            data = self.client.query(f"timestamp({self._sel(metric, None, also=also)})", at=at)
            out += (data.get("result") or []) if isinstance(data, dict) else []
        return out

    def _dense_gpus(self, c: _Chunk, host: str) -> None:
        """A node without job labels: each GPU's counter at every scrape step (its last sample at each step)."""
        n = self.n
        by = f"{n.host_label},{n.gpu_label}"
        for s in self._dense(c, lambda h: f"max by ({by}) ({self._sel(n.energy_metric, h)})", [host]):
            lab = s["metric"]
            dev = self.found.gpu_of(lab)
            if dev is not None:
                t, v = _fresh(*points(s))
                c.dense.append((dev, t, v))

    def _dense_meters(self, c: _Chunk, metric: str, kind: int) -> None:
        """A host meter's counter at every scrape step: its job edges are SLURM's, anywhere between two samples."""
        for s in self._dense(c, lambda h: self._sel(metric, None), None):
            lab = s["metric"]
            d = self.found.fetch._device(kind, {k: str(v) for k, v in lab.items()}, metric)
            t, v = _fresh(*points(s))
            c.dense.append((d.id, t, v))

    def _dense(self, c: _Chunk, expr: Callable[[list[str] | None], str], hosts: list[str] | None) -> list[dict[str, Any]]:
        """A fixed-step ``query_range`` over the chunk at the scrape interval, in pieces of at most ``MAX_STEPS``
        steps (Prometheus refuses more than 11,000 points a series)."""
        a, end = c.ends[0] - self.bin_s + self.s, c.ends[-1]
        out: list[dict[str, Any]] = []
        while a <= end:
            b = min(a + (MAX_STEPS - 1) * self.s, end)
            out += matrix(self.client, expr, hosts, a, b, self.s, self.stats)
            a = b + self.s
        return out

    # ---- consuming (in time order) ---------------------------------------------------------------
    def _consume(self, c: _Chunk) -> None:
        for dev, ph in c.phase.items():
            self._phase[dev] = ph
        c.phase = self._phase  # scrape phases are steady: one found in an earlier chunk still holds
        for dev, t, v in c.dense:
            if dev in c.phase:
                ph = c.phase[dev]
                t = ph + np.floor((t - ph) / self.s + 1e-6) * self.s  # the sample each step returned
            self.curves.add_dense(dev, t, v)
        repair = self._walk(c) if c.table is not None and len(c.table) else {}
        self._flush()
        todo = [(b, sorted(devs)) for b, devs in sorted(repair.items())]  # each bin's GPUs in order, whichever pass
        for (_, devs), series in zip(todo, self._raw_reads(c, todo), strict=True):
            self._raw(devs, series)  # asked in parallel, applied in time order

    def _walk(self, c: _Chunk) -> dict[int, list[int]]:
        """Each GPU's bins in time order: those that lay out without doubt a block at a time (`Table.runs`), the
        others one at a time (`_goes_on`, `_lay_out`). Returns the bins to read raw, and their GPUs."""
        tab = c.table
        assert tab is not None
        runs = tab.runs(c.ends, c.phase, self.s, self.bin_s)
        repair: dict[int, list[int]] = {}  # bin -> devices to read raw
        rows, after, devs = tab.rows(), tab.after(), tab.dev[tab.start]
        mode = runs.mode
        for post in (False, True):  # the blocks before each GPU's doubtful bins, those bins, the blocks after
            below = self._lay_runs(runs, tab.names, c.ends, post)
            todo = (mode == 0) | (mode == 1) & np.isin(devs, below) if not post else (mode == 2) & np.isin(devs, below)
            for i in np.flatnonzero(todo).tolist():
                self._one(c, i, rows, after, repair)
        return repair

    def _one(self, c: _Chunk, i: int, rows: list[Any], after: list[bool], repair: dict[int, list[int]]) -> None:
        """Segment ``i`` of the chunk's table (one GPU's groups in one bin) laid out alone."""
        tab, ends = c.table, c.ends
        assert tab is not None
        a, z = int(tab.start[i]), int(tab.stop[i])
        dev, b = int(tab.dev[a]), int(tab.bin[a])
        here, end, ph = rows[a:z], ends[b], c.phase.get(dev)
        if self._goes_on(dev, end, here, ph):
            return
        edge = Edge(
            self._seen.get(dev) == end - self.bin_s,
            after[i] or (b + 1 == len(ends) and not c.ends[-1] >= self.window[1]),
            c.latest.get((dev, end)),
        )
        if not self._lay_out(dev, end, here, ph, edge):
            repair.setdefault(b, []).append(dev)
        self._seen[dev] = end

    def _lay_runs(self, runs: Runs, names: list[str], ends: list[float], post: bool) -> list[int]:
        """The runs of the blocks before (``post``: after) each GPU's doubtful bins (`Table.runs`). A block's first
        run carries the GPU's open run on where `_run` would; its last stays open. Returns the GPUs whose block
        starts below their last value (a drop: laid out one bin at a time instead)."""
        below: list[int] = []
        skip = -1
        cols = (runs.dev, runs.job, runs.t0, runs.v0, runs.t1, runs.v1, runs.first, runs.final, runs.bin, runs.post)
        for dev, job, t0, v0, t1, v1, first, final, b, after in zip(*cols, strict=True):
            if after != post or dev == skip:
                continue
            label = names[job]
            if first:
                if v0 < self._last_v.get(dev, -math.inf):
                    below.append(dev)
                    skip = dev
                    continue
                cur = self._open.get(dev)
                if cur is not None and cur[0] == label and abs(t0 - cur[3] - self.s) < 1e-3 and v0 >= cur[4]:
                    t0, v0 = cur[1], cur[2]
                    del self._open[dev]
                elif cur is not None:
                    self._close(dev)
            if final:
                self._open[dev] = [label, t0, v0, t1, v1]
                self._last_v[dev] = v1
                self._seen[dev] = ends[b]
            else:
                self._emit(dev, label, t0, v0, t1, v1)
        return below

    def _grid(self, end: float, ph: float) -> tuple[int, int]:
        """The first and last grid points (indices from the phase) of the bin ending at ``end``."""
        return math.floor((end - self.bin_s - ph) / self.s + 1e-6) + 1, math.floor((end - ph) / self.s + 1e-6)

    def _goes_on(
        self, dev: int, end: float, groups: list[tuple[str, float, float, float, float, float]], ph: float | None
    ) -> bool:
        """The common bin, decided without `_lay_out`'s bookkeeping (what it would do, at a third of the cost): one
        series, every grid point of the bin, no reset, going on from the GPU's open run (same label, the next grid
        point, not below it). The open run is extended to the bin's last sample."""
        if len(groups) != 1 or ph is None:
            return False
        job, k, vmin, vmax, r, _ = groups[0]  # vmin from ``increase``: placed as here (`Table.runs`)
        cur = self._open.get(dev)
        if cur is None or r != 0 or cur[0] != job or not (math.isfinite(vmin) and math.isfinite(vmax)):
            return False
        if vmin < cur[4] or vmin < self._last_v.get(dev, -math.inf):
            return False
        i0, i1 = self._grid(end, ph)
        if k != i1 - i0 + 1 or abs(ph + i0 * self.s - cur[3] - self.s) >= 1e-3:
            return False
        cur[3], cur[4] = ph + i1 * self.s, vmax
        self._last_v[dev] = vmax
        self._seen[dev] = end
        return True

    def _lay_out(
        self, dev: int, end: float, groups: list[tuple[str, float, float, float, float, float]], ph: float | None, edge: Edge
    ) -> bool:
        """One GPU's groups in one bin end to end on its scrape grid; False where that is not certain. A GPU with
        fewer samples than the grid holds is placed only where one series begins or ends in the bin and the
        rest is certain: it reported up to the bin and not in the next (it vanished: its samples start the
        bin), or not in the bin before and its latest sample is the bin's last grid point (it appeared)."""
        if ph is None:
            return False
        inc = self.by_increase  # first samples from ``increase`` once placed, not from the table
        for _, k, vmin, vmax, r, rise in groups:
            first = (rise if k != 1 else vmax) if inc else vmin  # one sample: its first is its last
            if r > 0 or not (math.isfinite(k) and math.isfinite(first) and math.isfinite(vmax) and math.isfinite(r)):
                return False
        runs: dict[tuple[float, float, float], list[str]] = {}
        for job, k, vmin, vmax, _, rise in groups:  # by value; alike groups (one series shared) as one
            runs.setdefault((vmax, k, rise if k != 1 else 0.0) if inc else (vmin, vmax, k), []).append(job)
        keys = sorted(runs)
        i0, i1 = self._grid(end, ph)
        k = sum(int(r[1] if inc else r[2]) for r in keys)
        if k > i1 - i0 + 1 or k < i1 - i0 + 1 and not (len(keys) == 1 and self._anchored(dev, runs, i0, i1, k, ph, edge)):
            return False  # a gap, a GPU appearing or vanishing, another interval
        if k < i1 - i0 + 1 and not edge.before:
            i0 = i1 - k + 1  # it appeared: its samples end the bin
        firsts = self._firsts(keys, ph, i0, end) if inc else keys
        order = [(*f, key) for f, key in zip(firsts, keys, strict=True)]
        for a, b in zip(order, order[1:]):  # noqa: B905 (one shorter)
            if not a[1] < b[0]:
                return False  # overlapping groups: a GPU shared by jobs, or one label on both sides of another
        if not order[0][0] >= self._last_v.get(dev, -math.inf):
            return False  # below the previous bin: a reset between bins, or runs out of order (or not certain)
        p = i0
        for vmin, vmax, k, key in order:
            t0, t1 = ph + p * self.s, ph + (p + int(k) - 1) * self.s
            self._run(dev, runs[key], t0, vmin, t1, vmax)
            p += int(k)
        self._last_v[dev] = order[-1][1]
        return True

    def _firsts(self, keys: list[tuple[float, float, float]], ph: float, i0: int, end: float) -> Any:
        """Each (last, count, increase) group's (first, last, count) where the groups lie end to end from grid point
        ``i0`` (`bins.first_values`; NaN where not certain)."""
        last, k, rise = (np.array(x, float) for x in zip(*keys, strict=True))
        p0 = i0 + np.concatenate(([0.0], np.cumsum(k)[:-1]))
        t0, t1 = ph + p0 * self.s, ph + (p0 + k - 1) * self.s
        first = first_values(rise, last, k, t0, t1, np.full(len(k), end), self.bin_s)
        return zip(first.tolist(), last.tolist(), k.tolist(), strict=True)

    def _anchored(self, dev: int, runs: dict, i0: int, i1: int, k: int, ph: float, edge: Edge) -> bool:
        label = ",".join(sorted(next(iter(runs.values()))))
        cur = self._open.get(dev)
        if edge.before and not edge.after:  # vanished: the open run of the same series reached the bin's start
            return cur is not None and cur[0] == label and abs(cur[3] - (ph + (i0 - 1) * self.s)) < 1e-3
        if not edge.before and edge.after:  # appeared: its latest sample at the bin's end is the last grid point
            return edge.latest is not None and abs(edge.latest - (ph + i1 * self.s)) < 1e-3
        return False

    def _run(self, dev: int, jobs: list[str], t0: float, v0: float, t1: float, v1: float) -> None:
        label = ",".join(sorted(jobs))
        cur = self._open.get(dev)
        if cur is not None and cur[0] == label and abs(t0 - cur[3] - self.s) < 1e-3 and v0 >= cur[4]:
            cur[3], cur[4] = t1, v1  # the same series going on from the previous bin
            return
        if cur is not None:
            self._close(dev)
        self._open[dev] = [label, t0, v0, t1, v1]

    def _close(self, dev: int) -> None:
        self._emit(dev, *self._open.pop(dev))

    def _emit(self, dev: int, label: str, t0: float, v0: float, t1: float, v1: float) -> None:
        """A finished run: its two knots (added with the others at `_flush`), and where its jobs were seen."""
        for col, x in zip(self._done, (dev, t0, v0, t1, v1), strict=True):
            col.append(x)
        for job in label.split(",") if label else ():
            self.curves.seen(job, dev, t0, t1)

    def _flush(self) -> None:
        """The finished runs to the curves, before any other knot of their devices (a device's knots in order)."""
        self.curves.add_runs(*self._done)
        self._done = ([], [], [], [], [])

    def _raw(self, devs: list[int], series: list[dict[str, Any]]) -> None:
        """A bin the summaries could not lay out, from every sample of those GPUs in it (`_raw_series`)."""
        found = self.found
        want = set(devs)
        self.curves.raw_bins += len(devs)
        merged: dict[int, dict[float, float]] = {}
        for s in series:
            lab = s["metric"]
            dev = found.gpu_of(lab)
            if dev not in want:
                continue
            t, v = points(s)
            if not len(t):
                continue
            job = found.fetch._job_key(lab)
            for j in job.split(",") if job else ():
                self.curves.seen(j, dev, float(t[0]), float(t[-1]))
            acc = merged.setdefault(dev, {})
            for tt, vv in zip(t.tolist(), v.tolist(), strict=True):
                acc[tt] = max(acc.get(tt, vv), vv)
        for dev in devs:
            if dev in self._open:
                self._close(dev)
        self._flush()
        for dev in devs:
            acc = merged.get(dev, {})
            if acc:
                t = np.array(sorted(acc))
                self.curves.add_dense(dev, t, np.array([acc[x] for x in t.tolist()]))
                self._last_v[dev] = max(self._last_v.get(dev, -math.inf), acc[float(t[-1])])

    def _raw_reads(self, c: _Chunk, todo: list[tuple[int, list[int]]]) -> list[list[dict[str, Any]]]:
        """The raw samples of each bin to repair (``todo``: bins and their GPUs, in time order), in that order. GPUs
        with one UUID label on all their series are read several bins at once (`_raw_batch`: one request, not one
        a bin: a 512-GPU month's ~600 raw reads cost the client and the server ~2.4 ms each, almost all of it the
        request, not the samples); the others a bin at a time by node and GPU labels (`_raw_series`)."""
        found = self.found.uuids if self.n.uuid_label else {}
        uuid = {d: next(iter(u)) for d, u in found.items() if len(u) == 1 and "" not in u}
        asks: list[Callable[[], list[tuple[int, list[dict[str, Any]]]]]] = []
        for i, (b, devs) in enumerate(todo):
            rest = [d for d in devs if d not in uuid]
            if rest:
                asks.append(functools.partial(self._raw_alone, i, rest, c.ends[b]))
        for batch in self._raw_batches(todo, uuid):
            asks.append(functools.partial(self._raw_batch, c, batch, uuid))
        out: list[list[dict[str, Any]]] = [[] for _ in todo]
        for got in in_order(asks, lambda ask: ask(), self.concurrency):
            for i, series in got:
                out[i] += series
        return out

    def _raw_alone(self, i: int, devs: list[int], end: float) -> list[tuple[int, list[dict[str, Any]]]]:
        """Bin ``i`` of the repairs read alone for these GPUs (`_raw_series`), as `_raw_batch` answers."""
        return [(i, self._raw_series(devs, end))]

    def _raw_batches(self, todo: list[tuple[int, list[int]]], uuid: dict[int, str]) -> list[list[tuple[int, int, list[int]]]]:
        """The bins to repair in groups read at once, in time order: ``(index in todo, bin, GPUs with a UUID)``. A
        group is read whole (its GPUs over its span of bins), so a bin joins it only where the samples that adds
        beyond the bin's own cost less than a request of its own (`RAW_REQUEST`), and a group holds at most
        `RAW_SAMPLES` samples at the scrape interval."""
        per_bin = self.bin_s / self.s
        out: list[list[tuple[int, int, list[int]]]] = []
        group: list[tuple[int, int, list[int]]] = []
        union: set[int] = set()
        for i, (b, devs) in enumerate(todo):
            mine = [d for d in devs if d in uuid]
            if not mine:
                continue
            grown = len(union | set(mine)) * (b - group[0][1] + 1) * per_bin if group else 0.0
            now = len(union) * (group[-1][1] - group[0][1] + 1) * per_bin if group else 0.0
            if group and (grown > RAW_SAMPLES or grown - now > len(mine) * per_bin + RAW_REQUEST):
                out.append(group)
                group, union = [], set()
            group.append((i, b, mine))
            union.update(mine)
        return out + [group] if group else out

    def _raw_batch(
        self, c: _Chunk, group: list[tuple[int, int, list[int]]], uuid: dict[int, str]
    ) -> list[tuple[int, list[dict[str, Any]]]]:
        """A group of bins (`_raw_batches`) read in one request, the GPUs selected by their UUID labels over the
        group's span, each bin's samples then taken from it: those in [end - bin, end], the samples the bin's own
        range selector returns (both ends; a sample on an end is then in two bins, as Prometheus 2 reads a
        bin's range alone, and the curves keep one knot an instant). Split in halves if the server refuses it."""
        n = self.n
        end, start = c.ends[group[-1][1]], c.ends[group[0][1]] - self.bin_s
        devs = sorted({d for _, _, mine in group for d in mine})
        self.stats["requests"] = self.stats.get("requests", 0) + 1
        sel = self._sel(n.energy_metric, None, also=f'{n.uuid_label}=~"{regex_alt(uuid[d] for d in devs)}"')
        try:
            data = self.client.query(f"{sel}[{range_of(end - start)}]", end, arrays=True)
        except PrometheusLimitError:
            if len(group) < 2:
                return [(i, self._raw_series(mine, c.ends[b])) for i, b, mine in group]
            self.stats["splits"] = self.stats.get("splits", 0) + 1
            h = len(group) // 2
            return self._raw_batch(c, group[:h], uuid) + self._raw_batch(c, group[h:], uuid)
        series = series_of(data)
        by_dev: dict[int, list[dict[str, Any]]] = {}
        for s in series:
            lab = s["metric"]
            dev = self.found.gpu_of(lab)
            if dev is not None:
                by_dev.setdefault(dev, []).append(s)
        out = []
        for i, b, mine in group:
            lo, hi = c.ends[b] - self.bin_s, c.ends[b]
            cut = (_between(s, lo, hi) for d in mine for s in by_dev.get(d, ()))
            out.append((i, [s for s in cut if len(s["values"])]))  # a series with no sample in the bin: not returned
        return out

    def _raw_series(self, devs: list[int], end: float) -> list[dict[str, Any]]:
        """The raw samples of these GPUs' counters in the bin ending at ``end`` (their nodes and GPU labels: a cross
        product, the other GPUs dropped by `_raw`), split if refused. By node alone a read selected every series of
        each node over the TSDB block, all its GPUs' jobs there: a 512-GPU month's raw reads spent more time looking
        series up than reading samples."""
        self.stats["requests"] = self.stats.get("requests", 0) + 1
        sel = self._sel(self.n.energy_metric, None, also=self.found.gpu_matchers(devs))
        try:
            data = self.client.query(f"{sel}[{range_of(self.bin_s)}]", end, arrays=True)
        except PrometheusLimitError:
            if len(devs) < 2:
                raise
            self.stats["splits"] = self.stats.get("splits", 0) + 1
            h = len(devs) // 2
            return self._raw_series(devs[:h], end) + self._raw_series(devs[h:], end)
        return series_of(data)


class Edge(NamedTuple):
    """What is known of a GPU's samples around one bin: any in the bin before, any in the bin after, and its
    latest sample at the bin's end (from the phase queries; None where not asked). A tuple: one is made for every
    bin laid out (a frozen dataclass cost twice as much to make)."""

    before: bool
    after: bool
    latest: float | None


def _between(s: dict[str, Any], lo: float, hi: float) -> dict[str, Any]:
    """A series of a raw answer less its samples outside [lo, hi] (values as arrays: a slice; as read untyped: the
    pairs whose time reads as a number in it)."""
    vals = s.get("values")
    if isinstance(vals, np.ndarray):
        t = vals[:, 0]
        return {"metric": s["metric"], "values": vals[np.searchsorted(t, lo, "left") : np.searchsorted(t, hi, "right")]}
    keep = []
    for x in vals if isinstance(vals, list) else ():
        try:
            if lo <= float(x[0]) <= hi:
                keep.append(x)
        except (TypeError, ValueError, IndexError, KeyError, OverflowError):
            continue
    return {"metric": s["metric"], "values": keep}


def _labels(s: dict[str, Any]) -> frozenset[tuple[str, str]]:
    """A series' labels but its name (a function's answer drops it), as a key."""
    lab = s.get("metric") if isinstance(s, dict) else None
    return frozenset((k, str(v)) for k, v in lab.items() if k != "__name__") if isinstance(lab, dict) else frozenset()


def _fresh(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-step series less the steps that repeat the previous value (a stale sample, within the lookback)."""
    if len(v) < 2:
        return t, v
    keep = np.concatenate([[True], v[1:] != v[:-1]])
    return t[keep], v[keep]


__all__ = ["SUMMARIES", "Summaries", "grid_step"]
