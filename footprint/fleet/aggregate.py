"""`footprint fleet import` by server-side aggregation (the default): per-job energy evaluated by the server.

Raw samples cross the network only for nodes without job labels, host meters, short jobs and the few bins a
layout cannot place. The steps:

1. Discovery from the series index (`/api/v1/series`, one request per day: label sets, no samples):
   every GPU (host + index), whether it has the energy counter or only the power gauge, the job
   labels each GPU carried and on which days, host RAPL/Kepler meters.
2. The job table and who held which GPU: `attribution.Plan`, as for the exact import (SLURM windows,
   labels, label-only jobs whose windows come from the curves' first and last labelled samples; on nodes
   without the label, the free GPUs whose curves step at the job's edges, then the busiest in its window).
3. (Before 2.) Every counter GPU and host meter as a curve of its cumulative energy (`summaries`, `curves`): a few
   grouped queries per day whatever the number of jobs — per series group and hour, count / min / max /
   resets laid out on the GPU's scrape grid where the job label is on the series, the counter at every
   scrape on nodes without it and for host meters — so that each sample is read about once. Per job, per
   GPU, per stretch of its window shared with k other jobs (a GPU shared by jobs, MIG instances; weight 1/k)
   the energy is the curve's increase over the stretch (numpy, client-side). GPUs with only the power gauge,
   jobs shorter than ``exact_below_s`` (their raw samples) and a recording rule's energy keep one
   `promql.Term` per stretch.
4. Per GPU, the metered total over the window (the curve's increase): total - what jobs hold = the
   unattributed / idle line, so that per-job sums close to the metered total.

The ledger (`index.parquet`, `job_gpus.parquet`, `gpus.parquet`, `fleet.json`) is written; a job's run
record is written on demand (`footprint fleet job`), never for every job.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet import promql
from footprint.fleet.attribution import Activity, Evidence, Job, Plan
from footprint.fleet.curves import CHUNK_S, Curves, first_chunk_start, in_order
from footprint.fleet.edges import Edges, curve_edges
from footprint.fleet.jobtable import LABEL
from footprint.fleet.prometheus import PrometheusClient
from footprint.fleet.spans import Item, Items, ItemsBuilder, LabelSpans
from footprint.fleet.telemetry import CPU, GPU_COUNTER, GPU_GAUGE, KIND_NAMES, LOOKBACK_S, RAM, Fetcher, jump_note

DAY = 86400.0
HOUR = 3600.0
_SLACK_S = 1e-4  # below Prometheus' millisecond: a time this close to a day's end is read as on it
Progress = Callable[[str, int | None, int], None]


@dataclass
class Found:
    """What discovery found: devices (in ``fetch.t``), each device's label set, job labels per device and day."""

    fetch: Fetcher
    labels: dict[int, dict[str, str]] = field(default_factory=dict)
    jobs_on: LabelSpans = field(default_factory=LabelSpans)  # (job label id, dev) -> first and last day seen
    counter_keys: set[str] = field(default_factory=set)
    by_labels: dict[tuple[int, str, str], int] = field(default_factory=dict)  # (kind, host label, gpu label) -> device
    instance: dict[tuple[int, int], str] = field(default_factory=dict)  # (job label id, device) -> MIG instance
    multi: set[int] = field(default_factory=set)  # GPUs seen on several series (less job labels) in one day
    uuids: dict[int, set[str]] = field(default_factory=dict)  # GPU -> its series' UUID labels ("": a series without)
    # the job labels each day listed on counter GPUs (label ids; the raw value of the last job label where it is not
    # the label's key), so that a day's summaries select its series by value, not by walking the block's series
    day_jobs: dict[float, array] = field(default_factory=dict)
    raw_last: dict[int, str] = field(default_factory=dict)
    listed: tuple[float, float, float] = (0.0, 0.0, CHUNK_S)  # the span the days listed cover, and a day's length

    def gpu_of(self, labels: dict[str, str]) -> int | None:
        """The counter GPU an answer's series belongs to, by its node and GPU labels (None: not one discovery found)."""
        n = self.fetch.names
        return self.by_labels.get((GPU_COUNTER, labels.get(n.host_label, ""), labels.get(n.gpu_label, "")))

    def gpu_matchers(self, devs: list[int]) -> str:
        """Matchers selecting these GPUs (host and index regexes: a cross product, filtered when the answer is read)."""
        n = self.fetch.names
        hosts = {self.labels[d].get(n.host_label, "") for d in devs}
        idx = {self.labels[d].get(n.gpu_label, "") for d in devs}
        return ",".join(_eq_or_re(k, v) for k, v in ((n.host_label, hosts), (n.gpu_label, idx)))

    def lists(self, a: float, b: float) -> bool:
        """Whether [a, b] lies inside the days listed."""
        return self.listed[0] <= a and b <= self.listed[1]

    def jobs_between(self, a: float, b: float) -> list[str] | None:
        """The raw values of the last job label on counter GPUs with samples in [a, b] (a superset: every day
        listed that overlaps it; a day listed is closed, so a chunk's span, whose ends are a day's, is one day
        however its floats round, within 0.1 ms: Prometheus reads times to the millisecond); None where [a, b]
        reaches outside the days listed."""
        if not self.lists(a, b):
            return None
        lo, _, day = self.listed
        ids: set[int] = set()
        first = math.floor((a - lo + _SLACK_S) / day)
        for k in range(first, max(first + 1, math.ceil((b - lo - _SLACK_S) / day))):
            ids.update(self.day_jobs.get(lo + k * day, ()))
        labels = self.fetch.t.labels
        return [self.raw_last.get(i, labels[i]) for i in ids]


def discover(client: PrometheusClient, fetch: Fetcher, window: tuple[float, float], concurrency: int = 4) -> Found:
    """Devices and job labels from the series index, one request per metric per day (no samples read), ``concurrency``
    in flight, read in order (device ids follow the order)."""
    n = fetch.names
    fetch.discover()  # which metrics exist, host CPU source (label-value lookups)
    found = Found(fetch)
    # days of the summaries' chunks (`summaries`), from the first's start (an hour before the window, more than
    # the lookback): a chunk's job labels are one day's, where days offset from the chunks made them two
    lo, hi = first_chunk_start(window[0]), window[1] + LOOKBACK_S
    days = [(a, min(a + CHUNK_S, hi)) for a in np.arange(lo, hi, CHUNK_S).tolist()]
    found.listed = (lo, hi, CHUNK_S)
    metrics = [(m, k) for m, k, _ in fetch.sources if k == GPU_COUNTER]
    if n.power_metric:
        metrics.append((n.power_metric, GPU_GAUGE))
    metrics += [(m, k) for m, k, _ in fetch.sources if k in (CPU, RAM)]
    asks = [(metric, kind, a, b) for metric, kind in metrics for a, b in days]

    def ask(x: tuple[str, int, float, float]) -> list[Any]:
        return client.series(x[0] + n.matchers(), x[2], x[3])

    seen = _Seen(found, window)
    for (metric, kind, a, b), answer in zip(asks, in_order(asks, ask, concurrency), strict=True):
        for labels in answer:
            if isinstance(labels, dict):
                seen.add(metric, kind, a, b, labels)
    seen.close()
    if not any(d.kind in (GPU_COUNTER, GPU_GAUGE) for d in fetch.t.devices):
        raise FootprintError("the series were found but none inside the window", key="--start")
    return found


class _Seen:
    """Discovery's reading of one label set (a series listed on a day): its device, found once per distinct label
    set less the job labels (a GPU's series of a day differ by their job label only: a month of 4,096 GPUs lists
    ~10^6 label sets and ~10^5 such sets), then its job label, kept in columns until the end (`close`)."""

    def __init__(self, found: Found, window: tuple[float, float]) -> None:
        self.found, self.window = found, window
        self.n = found.fetch.names
        self.devs: dict[tuple[Any, ...], Any] = {}
        self.day_sets: dict[tuple[int, float], int] = {}  # (GPU, day) -> hash of its other labels (4,096 GPUs: 123k)
        self.job_labels = tuple(dict.fromkeys(self.n.job_labels))
        self.last_label = self.n.job_labels[-1] if self.n.job_labels else ""
        self.rests: dict[tuple[Any, ...], list[Any] | None] = {}  # (kind, labels less job labels) -> [device, uuid,
        # model, hash of the labels, last day seen]; None: a gauge whose GPU's counter is read
        self.spans: tuple[list[int], list[int], list[float], list[float]] = ([], [], [], [])  # label, device, first, last

    def add(self, metric: str, kind: int, a: float, b: float, labels: dict[str, str]) -> None:
        if kind not in (GPU_COUNTER, GPU_GAUGE):
            d = self.found.fetch._device(kind, labels, metric)
            self.found.labels.setdefault(d.id, dict(labels))
            d.first_t, d.last_t = min(d.first_t, a), max(d.last_t, b)
            return
        other = labels.copy()
        for k in self.job_labels:
            other.pop(k, None)
        rk = (kind, tuple(other.items()))
        r = self.rests.get(rk, False)
        if r is False:
            r = self.rests[rk] = self._device(metric, kind, labels, other)
            if r is not None:
                self.found.uuids.setdefault(r[0].id, set()).add(r[1] or "")
        if r is None:
            return  # the counter is read for this GPU: its gauge is not needed
        d = r[0]
        if r[1]:
            d.uuid = r[1]
        if r[2]:
            d.model = r[2]
        if r[4] != a:  # the first series of this label set on this day
            r[4] = a
            if self.day_sets.setdefault((d.id, a), r[3]) != r[3]:
                self.found.multi.add(d.id)
            d.first_t, d.last_t = min(d.first_t, a), max(d.last_t, b)
        job = self.found.fetch._job_key(labels)
        if job:
            d.labelled = True
            lab = self.found.fetch.t.label_id(job)
            if labels.get(self.n.instance_label):
                self.found.instance[(lab, d.id)] = labels[self.n.instance_label]
            labs, devs, firsts, lasts = self.spans
            labs.append(lab)
            devs.append(d.id)
            firsts.append(max(a, self.window[0]))
            lasts.append(min(b, self.window[1]))
            if kind == GPU_COUNTER:
                self.found.day_jobs.setdefault(a, array("q")).append(lab)
                raw = labels.get(self.last_label, "")
                if raw != job:
                    self.found.raw_last[lab] = raw

    def _device(self, metric: str, kind: int, labels: dict[str, str], other: dict[str, str]) -> list[Any] | None:
        """A label set's device (made or found by host, instance and GPU labels), its uuid and model labels, the
        hash of its labels less the job labels; None where it is a gauge whose GPU's counter is read."""
        found, fetch, n = self.found, self.found.fetch, self.n
        ck = (kind, labels.get(n.host_label), labels.get("instance"), labels.get(n.gpu_label))
        d = self.devs.get(ck)
        if d is None:
            key = fetch._gpu_key(labels)
            if kind == GPU_GAUGE and key in found.counter_keys:
                return None
            if kind == GPU_COUNTER:
                found.counter_keys.add(key)
            d = self.devs[ck] = fetch._device(kind, labels, metric)
            found.by_labels[(kind, labels.get(n.host_label, ""), labels.get(n.gpu_label, ""))] = d.id
        if d.id not in found.labels:
            found.labels[d.id] = {k: v for k, v in labels.items() if k == "__name__"}
            found.labels[d.id].update({k: labels.get(k, "") for k in (n.host_label, n.gpu_label)})
        return [d, labels.get(n.uuid_label), labels.get(n.model_label), hash(frozenset(other.items())), None]

    def close(self) -> None:
        """The job labels' spans, merged per (label, device): first and last day seen."""
        self.found.jobs_on.extend(*self.spans)
        self.spans = ([], [], [], [])


def refine_label_jobs(plan: Plan, found: Found, ev: promql.Evaluator) -> None:
    """Jobs known from their label only: window = half a scrape before the first labelled sample (the job began
    between it and the one before) to the last labelled one, from the server's min/max of the samples' timestamps."""
    n = found.fetch.names
    step = max(int(round(ev.scrape_s)), 1)
    terms = []
    for j, job in enumerate(plan.jobs):
        if job.source != "label":
            continue
        ids = promql.regex_alt(_label_values(job, n.job_labels))
        sel = f"timestamp({n.energy_metric}{n.matchers(_matcher(n.job_labels[-1], ids))})"
        a, b = max(job.start - DAY, plan.window[0] - LOOKBACK_S), min(job.end + DAY, plan.window[1] + LOOKBACK_S)
        terms += [promql.Term(("F", j), sel, "", a, b, (), "min", subquery_step=step)]
        terms += [promql.Term(("L", j), sel, "", a, b, (), "max", subquery_step=step)]
    for key, groups in ev.run(terms).items():
        if groups:
            v = next(iter(groups.values()))
            job = plan.jobs[key[1]]
            if key[0] == "F":
                job.start = max(v - 0.5 * ev.scrape_s, plan.window[0])  # the job began between two scrapes
            else:
                job.end = min(v, plan.window[1])
    host_meters = [d.id for d in found.fetch.t.devices if d.kind in (CPU, RAM)]
    for dev in host_meters:  # their shares follow the job windows just refined
        plan.claims.pop(dev, None)
    plan._claims_host_meters()


def activity(
    client: PrometheusClient,
    found: Found,
    window: tuple[float, float],
    hosts: set[str],
    kinds: tuple[int, ...] = (GPU_COUNTER, GPU_GAUGE),
) -> Activity:
    """Per-GPU energy in bins (the server's increase per bin), on the nodes without job labels only: what
    `Plan` needs to infer which GPUs an unlabelled job held."""
    act = Activity(*window)
    if not hosts:
        return act
    n = found.fetch.names
    by = (n.host_label, n.gpu_label)
    devs = [d for d in found.fetch.t.devices if d.kind in kinds and d.host in hosts]
    keys = {(d.kind, found.fetch._gpu_key(found.labels[d.id])): d.id for d in devs}
    for host in sorted(hosts):
        raw = sorted({found.labels[d.id].get(n.host_label, "") for d in devs if d.host == host})
        m = n.matchers(f'{n.host_label}=~"{promql.regex_alt(raw)}"')
        for kind in sorted({d.kind for d in devs if d.host == host}):
            if kind == GPU_COUNTER:
                expr, unit = f"increase({n.energy_metric}{m}[{int(act.bin_s)}s])", n.energy_unit_j
            else:
                expr, unit = f"avg_over_time({n.power_metric}{m}[{int(act.bin_s)}s])", act.bin_s
            a, b = act.t0 + act.bin_s, act.t0 + act.n * act.bin_s
            data = client.query_range(f"max by ({','.join(by)}) ({expr})", a, b, act.bin_s)
            for s in data.get("result") or [] if isinstance(data, dict) else []:
                dev = keys.get((kind, found.fetch._gpu_key(s.get("metric") or {})))
                if dev is not None:
                    _add_bins(act, dev, s.get("values") or [], unit)
    return act


def curve_spans(found: Found, curves: Curves, scrape_s: float, window: tuple[float, float]) -> LabelSpans:
    """Where each job label was seen on each device: to the scrape from the curves' runs for counter GPUs, from the
    series index (per day) for the others. A job known from its label alone began somewhere between its first
    labelled sample and the one before, and ended between its last and the one after: half a scrape before
    the first and after the last, which halves the largest error of either choice of sample."""
    on = found.jobs_on
    lab, dev = np.frombuffer(on.lab, np.int32), np.frombuffer(on.dev, np.int32)
    rest = np.flatnonzero(~np.isin(dev, np.fromiter(curves.curves, np.int64, len(curves.curves)))) if len(on) else []
    cols = [np.asarray(x)[rest].tolist() for x in (lab, dev, on.first, on.last)] if len(on) else [[], [], [], []]
    label_id, h, (w0, w1) = found.fetch.t.label_id, 0.5 * scrape_s, window
    labs, devs, firsts, lasts = cols
    for (label, d), (a, b) in curves.spans_in_order():
        labs.append(label_id(label))
        devs.append(d)
        firsts.append(max(a - h, w0))
        lasts.append(min(b + h, w1))
    spans = LabelSpans()
    spans.extend(*cols)
    return spans


def label_edges(plan: Plan, found: Found, curves: Curves, scrape_s: float) -> int:
    """Jobs known from their label alone: each edge placed inside the scrape interval where the label starts (or
    stops) by the energy of that interval, the GPU drawing the power of the series before it (after it) and then
    the job's mean power: a knot added to the curve there, so the job's energy is a step, not half of a ramp.
    Where the two powers are within 20 % of each other (a job following one alike) the edge stays half a scrape
    out (`edges.curve_edges`, a GPU's spans at once). Returns how many edges were placed so."""
    t = plan.jobs
    lab = np.nonzero(np.frombuffer(t.source, np.uint8) == LABEL)[0].tolist()
    if not lab:
        return 0
    want = {t.key[j]: j for j in lab}
    rank: dict[int, int] = {}  # job -> the order of its first span (a GPU has one span a job: spans are per label)
    per_dev: dict[int, tuple[list[int], list[float], list[float], list[int]]] = {}  # device -> jobs, a, b, rank
    for (label, dev), (a, b) in curves.spans_in_order():
        j = want.get(label)
        if j is not None and dev in curves.curves:
            jobs, aa, bb, ranks = per_dev.setdefault(dev, ([], [], [], []))
            jobs.append(j)
            aa.append(a)
            bb.append(b)
            ranks.append(rank.setdefault(j, len(rank)))
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    placed = 0
    for dev, (jobs, aa, bb, ranks) in per_dev.items():
        c = curves.curves[dev]
        x = curve_edges(c.t, c.e, np.array(aa), np.array(bb), scrape_s)
        for j, s0, e0 in zip(jobs, x.start.tolist(), x.end.tolist(), strict=True):
            starts[j] = min(starts.get(j, s0), s0)
            ends[j] = max(ends.get(j, e0), e0)
        n = int(x.start_ok.sum() + x.end_ok.sum())
        if n:
            placed += n
            _add_knots(c, x, np.array(ranks))
    for j, s0 in starts.items():
        job = t[j]
        job.start = max(s0, plan.window[0])
        job.end = min(ends[j], plan.window[1])
    if placed:
        for d in found.fetch.t.devices:  # host meters' shares follow the windows just placed
            if d.kind in (CPU, RAM):
                plan.claims.pop(d.id, None)
        plan._claims_host_meters()
    return placed


def _add_knots(c: Any, x: Edges, rank: np.ndarray) -> None:
    """The placed edges as knots of the curve, in the order the jobs were met (a job's start, then its end), so
    that of two knots at one instant (one job's end and the next one's start) the one met first is kept."""
    n = len(rank)
    ok = np.concatenate([x.start_ok, x.end_ok])
    key = np.lexsort((np.repeat([0, 1], n)[ok], np.concatenate([rank, rank])[ok]))
    kt = np.concatenate([x.start, x.end])[ok][key]
    ke = np.concatenate([x.start_e, x.end_e])[ok][key]
    ks_s = np.interp(kt, c.t, c.s)
    order = np.argsort(np.concatenate([c.t, kt]), kind="stable")
    t_, e_, s_ = (np.concatenate(v)[order] for v in ((c.t, kt), (c.e, ke), (c.s, ks_s)))
    keep = np.concatenate([[True], np.diff(t_) > 0])  # one job's end and the next one's start: one knot
    c.t, c.e, c.s = t_[keep], e_[keep], s_[keep]


class EdgeActivity(Activity):
    """`Activity` from the curves of a node's GPUs: their energy in a job's window, and whether their power steps up
    at the job's start and down at its end (mean power over ``edge_s`` after minus before each edge, against half
    the GPU's range of power: its 95th minus 5th percentile over the window), so that a GPU a job took is told
    from one merely busy with another job of the same profile, which has the energy but not the steps."""

    def __init__(self, start: float, end: float, curves: dict[int, Any], edge_s: float | None = None) -> None:
        super().__init__(start, end)
        if edge_s is None:  # two scrape intervals (the curves' median knot spacing): the shortest window that holds
            # a step anywhere inside a scrape interval at 3/4 of its size or more, and averages the job's own noise
            steps = [float(np.median(np.diff(c.t))) for c in curves.values() if len(c.t) > 2]
            edge_s = 2.0 * float(np.median(steps)) if steps else 120.0
        self.curves, self.edge_s = curves, edge_s
        self.window = (start, end)
        self._levels: dict[int, tuple[float, float]] = {}

    def energies(self, dev: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        c = self.curves.get(dev)
        if c is None:
            return super().energies(dev, starts, ends)
        return c.energy(starts, ends)

    def levels(self, dev: int) -> tuple[float, float]:
        """(idle-ish power, step threshold) of a GPU: its 5th percentile of power, half its 5-95th percentile range
        (at least a tenth of its 95th percentile, so that a GPU busy all along sees no step in its own noise)."""
        if dev not in self._levels:
            c = self.curves[dev]
            dt = np.diff(c.t)
            p = np.diff(c.e)[dt > 0] / dt[dt > 0]
            lo, hi = np.percentile(p, [5, 95]).tolist() if len(p) else (0.0, 0.0)
            self._levels[dev] = (lo, max(0.5 * (hi - lo), 0.1 * hi, 1e-9))
        return self._levels[dev]

    def evidence(self, dev: int, starts: np.ndarray, ends: np.ndarray) -> Evidence:
        c = self.curves.get(dev)
        if c is None:
            return super().evidence(dev, starts, ends)
        w = np.minimum(self.edge_s, 0.5 * np.maximum(ends - starts, 1.0))
        q = np.interp(np.stack([starts - w, starts, starts + w, ends - w, ends, ends + w]), c.t, c.e)
        before, after = (q[1] - q[0]) / w, (q[2] - q[1]) / w
        up, down = after - before, (q[4] - q[3]) / w - (q[5] - q[4]) / w
        lo, thr = self.levels(dev)
        has_s, has_e = starts > self.window[0] + w, ends < self.window[1] - w  # an edge the window cut is no edge
        s_step = np.where(has_s, np.sign(up) * (np.abs(up) > thr), 0).astype(np.int8)
        e_step = np.where(has_e, np.sign(down) * (np.abs(down) > thr), 0).astype(np.int8)
        flat = has_s & (np.abs(up) <= thr) & (before > lo + thr)
        return Evidence(q[4] - q[1], s_step, e_step, flat, np.where(has_s, up, 0.0) + np.where(has_e, down, 0.0))


def curve_activity(
    client: PrometheusClient, found: Found, curves: Curves, window: tuple[float, float], hosts: set[str]
) -> Activity:
    """What `Plan` ranks the free GPUs of an unlabelled node by, from their curves (no request of its own; GPUs
    with only the power gauge by `activity`)."""
    gauges = activity(client, found, window, hosts, (GPU_GAUGE,))
    mine = {d.id: curves.curves[d.id] for d in found.fetch.t.devices if d.host in hosts and d.id in curves.curves}
    act = EdgeActivity(*window, mine)
    act.bins = gauges.bins
    return act


def _add_bins(act: Activity, dev: int, values: list[Any], unit: float) -> None:
    arr = act.bins.setdefault(dev, np.zeros(act.n))
    for t, v in values:
        try:
            b, x = int(round((float(t) - act.t0) / act.bin_s)) - 1, float(v) * unit
        except (TypeError, ValueError):
            continue
        if 0 <= b < act.n and math.isfinite(x) and x >= 0:
            arr[b] += x


def holdings(plan: Plan, found: Found) -> Items:
    """Every (job, GPU, stretch, weight): labelled GPUs from the labels the job's ids carried, unlabelled ones
    from the plan's claims; a stretch where k jobs hold one GPU weighs 1/k. Columns throughout: the holders of
    every GPU sorted once, each GPU's stretches from its sorted edges (`_stretches`), linear in the holders."""
    tel, t, spans = found.fetch.t, plan.jobs, found.jobs_on
    lab = np.frombuffer(spans.lab, np.int32) if len(spans) else np.zeros(0, np.int32)
    dev = np.frombuffer(spans.dev, np.int32) if len(spans) else np.zeros(0, np.int32)
    one = np.frombuffer(plan.label_jobs.one, np.int32) if len(plan.label_jobs.one) else np.zeros(0, np.int32)
    single = np.full(len(lab), -1, np.int64)
    inside = lab < len(one)
    single[inside] = one[lab[inside]]
    jobs, devs = [single[single >= 0]], [dev[single >= 0]]
    for x in np.nonzero((single < 0) & np.isin(lab, list(plan.label_jobs.many)))[0].tolist():  # labels naming several
        many = plan.label_jobs.many[int(lab[x])]
        jobs.append(np.array(many, np.int64))
        devs.append(np.full(len(many), dev[x], np.int32))
    gpu = {d.id for d in tel.devices if d.kind in (GPU_COUNTER, GPU_GAUGE)}
    for d, claims in plan.claims.items():
        if d in gpu and claims:
            jobs.append(np.array([c.job for c in claims], np.int64))
            devs.append(np.full(len(claims), d, np.int32))
    job, dv = np.concatenate(jobs), np.concatenate(devs).astype(np.int64)
    start, end = np.frombuffer(t.start, np.float64), np.frombuffer(t.end, np.float64)
    out = ItemsBuilder()
    if not len(job):
        return out.build()
    pair = np.unique(dv << 32 | job)  # each (GPU, job) once, by GPU
    dv, job = pair >> 32, pair & 0xFFFFFFFF
    bounds = np.searchsorted(dv, np.unique(dv).tolist() + [dv[-1] + 1])
    for x, y in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        _stretches(int(dv[x]), job[x:y], start[job[x:y]], end[job[x:y]], out)
    return out.build()


def _stretches(dev: int, job: np.ndarray, a: np.ndarray, b: np.ndarray, out: ItemsBuilder) -> None:
    """One GPU's holders: a job alone on it gets its window, jobs sharing it each stretch between two edges (the
    holders' starts and ends), weighed 1/k where k of them hold it."""
    if len(job) == 1:
        out.extend(job, dev, a, b, np.ones(1))
        return
    edges = np.unique(np.concatenate([a, b]))
    ia, ib = np.searchsorted(edges, a), np.searchsorted(edges, b)
    k = np.cumsum(np.bincount(ia, minlength=len(edges)) - np.bincount(ib, minlength=len(edges)))[:-1]  # per stretch
    whole = (ib - ia == 1) & (k[np.minimum(ia, len(k) - 1)] == 1)
    out.extend(job[whole], dev, a[whole], b[whole], np.ones(int(whole.sum())))
    n = np.where(whole, 0, np.maximum(ib - ia, 0))
    if not n.sum():
        return
    first = np.repeat(ia, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)  # every stretch of each
    out.extend(np.repeat(job, n), dev, edges[first], edges[first + 1], 1.0 / k[first])


def split_by_activity(plan: Plan, found: Found, items: Items, ev: promql.Evaluator) -> int:
    """Stretches where jobs on different MIG instances share a GPU: each job's weight is its instance's share of
    the instances' mean activity (``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` by ``GPU_I_ID``) over the stretch, where
    the exporter gives it; otherwise the even split stays. Returns how many stretches were split so."""
    n = found.fetch.names
    inst: dict[tuple[int, int], str] = {}
    for (lab, dev), i in found.instance.items():
        for j in plan.label_jobs.get(lab, []):
            inst[(j, dev)] = i
    where = [int(i) for i in items.shared() if (int(items.job[i]), int(items.dev[i])) in inst]
    shared = [items.item(i) for i in where]
    if not shared or not n.activity_metric:
        return 0
    by = (n.host_label, n.gpu_label, n.instance_label)
    terms = {}
    for it in shared:
        lab = found.labels[it.dev]
        m = f'{n.host_label}="{_q(lab.get(n.host_label, ""))}",{n.gpu_label}="{_q(lab.get(n.gpu_label, ""))}"'
        m = n.matchers(m).strip("{}")
        terms[(it.dev, it.a, it.b)] = promql.Term((it.dev, it.a, it.b), n.activity_metric, m, it.a, it.b, by, "gauge_energy")
    res = ev.run(terms.values())
    done = 0
    holders: dict[tuple[int, float, float], list[str | None]] = {}  # each stretch's instances (one pass, not pairs)
    for x in shared:
        holders.setdefault((x.dev, x.a, x.b), []).append(inst.get((x.job, x.dev)))
    for it in shared:
        acts = {g[2]: v for g, v in res.get((it.dev, it.a, it.b), {}).items()}
        mine = acts.get(inst[(it.job, it.dev)])
        held = holders[(it.dev, it.a, it.b)]
        total = sum(acts.get(h, 0.0) for h in held if h is not None)
        if mine is not None and total > 0 and len(held) == round(1 / it.w):
            it.w = mine / total
            done += 1
    items.w[where] = [it.w for it in shared]
    return done


def cpu_items(plan: Plan, found: Found, chunk: int) -> Callable[[int], list[Item]]:
    """Every job's share of its nodes' host meters, in columns grouped by chunk of jobs (meter by meter, each
    meter's claims by start within a chunk); `Item` objects made one chunk at a time: ``items(k)``."""
    t = found.fetch.t
    job, dev, a, b, w = [], [], [], [], []  # type: ignore[var-annotated]
    for d, claims in plan.claims.items():
        if t.devices[d].kind in (CPU, RAM):
            job += [c.job for c in claims]
            dev += [d] * len(claims)
            a += [c.start for c in claims]
            b += [c.end for c in claims]
            w += [c.weight for c in claims]
    by = np.array(job, np.int64) // chunk
    order = np.argsort(by, kind="stable")
    cols = [np.array(x)[order] for x in (job, dev, a, b, w)]
    bounds = np.searchsorted(by[order], np.arange(-(-len(plan.jobs) // chunk) + 1)).tolist()

    def items(k: int) -> list[Item]:
        if k + 1 >= len(bounds):
            return []
        rows = zip(*(x[bounds[k] : bounds[k + 1]].tolist() for x in cols), strict=True)
        return [Item(*r) for r in rows]

    return items


def exact_energy(client: PrometheusClient, found: Found, item: Item, metric: str, scrape_s: float) -> float:
    """A short stretch from raw samples: the GPU's counter (all its series merged) interpolated at the stretch's
    edges, resets counted as PromQL does. Never extrapolated: a GPU that stopped reporting gives a lower bound."""
    n = found.fetch.names
    lab = found.labels[item.dev]
    m = n.matchers(f'{n.host_label}="{_q(lab.get(n.host_label, ""))}",{n.gpu_label}="{_q(lab.get(n.gpu_label, ""))}"')
    pad = max(2.0 * scrape_s, 60.0)
    data = client.query(f"{metric}{m}[{int(math.ceil(item.b - item.a + 2 * pad))}s]", at=item.b + pad)
    ts: dict[float, float] = {}
    for s in (data.get("result") or []) if isinstance(data, dict) else []:
        for t, v in s.get("values") or []:
            try:
                tt, vv = float(t), float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(vv) and vv >= 0:
                ts[tt] = max(ts.get(tt, 0.0), vv)
    if len(ts) < 2:
        return 0.0
    t = np.array(sorted(ts))
    v = np.array([ts[x] for x in t])
    inc = np.diff(v)
    cum = np.concatenate([[0.0], np.cumsum(np.where(inc < 0, v[1:], inc))])
    a, b = np.clip([item.a, item.b], t[0], t[-1])
    return float(np.interp(b, t, cum) - np.interp(a, t, cum)) * n.energy_unit_j


def _matcher(label: str, regex: str) -> str:
    return f'{label}=~"{regex}"'


def _q(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


CHUNK_JOBS = 2_000  # jobs evaluated and written at a time: their terms, answers and energies are then dropped
CURVE_BLOCK = 16  # chunks whose jobs are read from the curves at once (`_curve_block`): a few MB of columns


@dataclass
class Energies:
    """Per (job, device): joules and seconds of telemetry (one chunk of jobs); per device: metered joules and
    seconds, and what the jobs evaluated so far hold of them (`evaluate`'s totals)."""

    pair_j: dict[tuple[int, int], float] = field(default_factory=dict)
    pair_s: dict[tuple[int, int], float] = field(default_factory=dict)
    dev_j: dict[int, float] = field(default_factory=dict)
    dev_s: dict[int, float] = field(default_factory=dict)
    alloc_j: dict[int, float] = field(default_factory=dict)
    alloc_s: dict[int, float] = field(default_factory=dict)
    exact_jobs: set[int] = field(default_factory=set)
    by_activity: int = 0  # shared stretches split by the MIG instances' activity


def evaluate(
    client: PrometheusClient,
    plan: Plan,
    found: Found,
    ev: promql.Evaluator,
    exact_below_s: float,
    exact_all: bool = False,
    chunk: int | None = None,
    curves: Curves | None = None,
) -> tuple[Energies, Iterator[tuple[range, Energies]]]:
    """Each GPU's metered total now (first: where a GPU reported without a break, a job's telemetry covers its
    window and needs no sample count), and an iterator over the jobs ``chunk`` at a time, in order: every job's
    energy on every GPU it held and the host meters' shares. The totals' ``alloc_j``/``alloc_s`` are complete
    once the iterator is spent; memory is bounded by the chunk, not the job count. ``found``'s job labels per
    device are consumed (cleared) here. With ``curves`` (`summaries`), counter GPUs and host meters are read
    from them (no request per job); power-gauge GPUs keep their terms."""
    chunk = max(int(chunk or CHUNK_JOBS), 1)
    tot = Energies()
    if curves is not None:
        label_edges(plan, found, curves, ev.scrape_s)
    items = holdings(plan, found)
    tot.by_activity = split_by_activity(plan, found, items, ev)
    if curves is None:  # a recording rule's per-minute energy (`rules/`) read instead of the counters
        tot.dev_j, tot.dev_s = metered_recorded(found, plan.window, ev)
    else:
        tot.dev_j, tot.dev_s = metered_curves(found, plan.window, ev, curves)
    found.jobs_on.clear()  # the holdings hold what these said: dropped before the chunks
    found.instance.clear()
    host_items = cpu_items(plan, found, chunk)

    def chunks() -> Iterator[tuple[range, Energies]]:
        block = None
        for k, c0 in enumerate(range(0, len(plan.jobs), chunk)):
            out = Energies()
            if curves is None:
                gpu = items.jobs(c0, c0 + chunk)  # Item objects for this chunk only
            else:  # read from the curves in columns, `CURVE_BLOCK` chunks at once; Items only for gauges, short jobs
                if k % CURVE_BLOCK == 0:
                    block = _curve_block(plan, items, c0, c0 + CURVE_BLOCK * chunk, curves, exact_below_s or 0.0, exact_all)
                assert block is not None
                gpu = block.take(c0, c0 + chunk, out)
            now = (gpu, host_items(k))
            out = _evaluate_jobs(client, plan, found, ev, now, exact_below_s, exact_all, curves, out)
            for (_j, dev), v in out.pair_j.items():
                tot.alloc_j[dev] = tot.alloc_j.get(dev, 0.0) + v
            for (_j, dev), v in out.pair_s.items():
                tot.alloc_s[dev] = tot.alloc_s.get(dev, 0.0) + v
            yield range(c0, min(c0 + chunk, len(plan.jobs))), out

    return tot, chunks()


def _evaluate_jobs(
    client: PrometheusClient,
    plan: Plan,
    found: Found,
    ev: promql.Evaluator,
    items: tuple[list[Item], list[Item]],
    exact_below_s: float,
    exact_all: bool,
    curves: Curves | None = None,
    out: Energies | None = None,
) -> Energies:
    """The energies of these (GPU, host meter) items: one chunk of jobs (added to ``out``)."""
    out = out if out is not None else Energies()
    gpu_items, host_items = items
    if curves is not None:
        gpu_items = _from_curves(plan, gpu_items, curves, exact_below_s or 0.0, exact_all, out)
        host_items = _from_curves(plan, host_items, curves, 0.0, False, out)
    groups, short = _job_groups(plan, found, gpu_items, exact_below_s or 0.0, exact_all, out)
    terms, info = _job_terms(plan, found, groups, ev)
    for i, it in enumerate(host_items):
        lab = found.labels[it.dev]
        m = ",".join(f'{k}="{_q(v)}"' for k, v in sorted(lab.items()) if k != "__name__")
        terms.append(promql.Term(("h", i, it.job, it.dev, it.w), lab.get("__name__", ""), m, it.a, it.b, ("instance",)))
    for key, result in ev.run(terms).items():
        if key[0] == "h":
            out.pair_j[(key[2], key[3])] = out.pair_j.get((key[2], key[3]), 0.0) + sum(result.values()) * key[4]
            continue
        (j, kind, a, b, w, _, _), devs_e, devs_c, unit, every = info[key[1]]
        for lab, v in result.items():
            dev = found.by_labels.get((kind, *lab))
            if dev not in (devs_e if key[0] == "e" else devs_c):
                continue
            if key[0] == "e":
                out.pair_j[(j, dev)] = out.pair_j.get((j, dev), 0.0) + v * w * unit
            else:
                out.pair_s[(j, dev)] = out.pair_s.get((j, dev), 0.0) + min(v * every, b - a) * w
    _short(client, found, short, ev, out)
    return out


class _CurvePairs(NamedTuple):
    """A block of jobs' (job, GPU) pairs read from the curves (`_curve_block`), sorted by job and GPU: joules and
    seconds; and the block's other items (`Item`s, in order) with their jobs."""

    job: np.ndarray
    dev: np.ndarray
    j: np.ndarray
    s: np.ndarray
    rest: list[Item]
    rest_job: np.ndarray

    def take(self, lo: int, hi: int, out: Energies) -> list[Item]:
        """Jobs ``lo`` to ``hi - 1``: their pairs into ``out`` (by job and GPU: a GPU's pairs in job order, as its
        totals add them), and their other items."""
        i, k = (int(v) for v in np.searchsorted(self.job, [lo, hi]))
        keys = list(zip(self.job[i:k].tolist(), self.dev[i:k].tolist(), strict=True))
        out.pair_j.update(zip(keys, self.j[i:k].tolist(), strict=True))
        out.pair_s.update(zip(keys, self.s[i:k].tolist(), strict=True))
        i, k = (int(v) for v in np.searchsorted(self.rest_job, [lo, hi]))
        return self.rest[i:k]


def _curve_block(
    plan: Plan, items: Items, lo: int, hi: int, curves: Curves, exact_below_s: float, exact_all: bool
) -> _CurvePairs:
    """Jobs ``lo`` to ``hi - 1``: their items whose GPU has a curve evaluated from it in columns, a GPU at a time
    over the whole block (per chunk of 2,000 jobs, a 4,096-GPU month made ~600,000 interpolation calls: 5 s); the
    rest kept as `Item`s: power gauges, the short jobs read raw. Each (job, GPU)'s sum is made in item order from
    0.0 (np.add.at adds one at a time, in order), as for one chunk alone, so the same floats; the ledger orders
    its rows by job and GPU whatever order the pairs come in."""
    i, k = (int(x) for x in np.searchsorted(items.job, [lo, hi]))
    job, dev = items.job[i:k], items.dev[i:k]
    start, end = np.frombuffer(plan.jobs.start, np.float64), np.frombuffer(plan.jobs.end, np.float64)
    short = np.full(k - i, True) if exact_all else end[job] - start[job] < exact_below_s
    have = np.fromiter(curves.curves, np.int64, len(curves.curves))
    use = np.isin(dev, have) & ~short
    other = np.flatnonzero(~use)
    rest = [items.item(i + y) for y in other.tolist()]
    x = np.flatnonzero(use)
    x = x[np.argsort(dev[x], kind="stable")]  # by GPU, each GPU's items in order
    d, j = dev[x], job[x]
    a, b, w = items.a[i:k][x], items.b[i:k][x], items.w[i:k][x]
    e, sec = np.empty(len(x)), np.empty(len(x))
    cuts = np.flatnonzero(np.diff(d)) + 1
    for p, q in zip([0, *cuts.tolist()], [*cuts.tolist(), len(x)], strict=True):
        if p < q:
            c = curves.curves[int(d[p])]
            e[p:q], sec[p:q] = c.energy(a[p:q], b[p:q]) * w[p:q], c.seconds(a[p:q], b[p:q]) * w[p:q]
    keys, inv = np.unique(j.astype(np.int64) << 32 | d.astype(np.int64), return_inverse=True)
    sj, ss = np.zeros(len(keys)), np.zeros(len(keys))
    np.add.at(sj, inv.reshape(-1), e)
    np.add.at(ss, inv.reshape(-1), sec)
    return _CurvePairs(keys >> 32, keys & 0xFFFFFFFF, sj, ss, rest, job[other])


def _from_curves(
    plan: Plan, items: list[Item], curves: Curves, exact_below_s: float, exact_all: bool, out: Energies
) -> list[Item]:
    """The items whose device has a curve, evaluated from it (per device, vectorised); the rest returned: power
    gauges, and the short jobs read raw."""
    rest: list[Item] = []
    by_dev: dict[int, list[Item]] = {}
    for it in items:
        short = exact_all or plan.jobs.end[it.job] - plan.jobs.start[it.job] < exact_below_s
        (rest if it.dev not in curves.curves or short else by_dev.setdefault(it.dev, [])).append(it)
    for dev, its in by_dev.items():
        c = curves.curves[dev]
        a, b = np.array([it.a for it in its]), np.array([it.b for it in its])
        w = np.array([it.w for it in its])
        e, sec = c.energy(a, b) * w, c.seconds(a, b) * w
        for it, x, y in zip(its, e.tolist(), sec.tolist(), strict=True):
            key = (it.job, it.dev)
            out.pair_j[key] = out.pair_j.get(key, 0.0) + x
            out.pair_s[key] = out.pair_s.get(key, 0.0) + y
    return rest


def metered_curves(found: Found, window: tuple[float, float], ev: promql.Evaluator, curves: Curves) -> tuple[dict, dict]:
    """Each meter's joules and reporting seconds over the window from its curve; power-gauge GPUs from their terms."""
    dev_j: dict[int, float] = {}
    dev_s: dict[int, float] = {}
    a, b = np.array([window[0]]), np.array([window[1]])
    for dev, c in curves.curves.items():
        dev_j[dev] = float(c.energy(a, b)[0])
        dev_s[dev] = float(c.seconds(a, b)[0])
        d = found.fetch.t.devices[dev]
        d.resets, d.gaps, d.max_gap_s, d.jumps = c.resets, c.gaps, c.max_gap_s, c.jumps
        if c.jumps:
            found.fetch.t.notes.append(jump_note(d.key))
    edges = list(np.arange(window[0], window[1], DAY).tolist()) + [window[1]]
    days = [(x, y) for x, y in zip(edges[:-1], edges[1:], strict=True) if y > x]
    gauges = [(d.id, x, y) for d in found.fetch.t.devices if d.kind == GPU_GAUGE for x, y in days]
    if gauges:
        sj, ss = _merged(found, gauges, ev)
        dev_j.update(sj)
        dev_s.update({k: min(v, window[1] - window[0]) for k, v in ss.items()})
    return dev_j, dev_s


def _job_groups(
    plan: Plan, found: Found, items: list[Item], exact_below_s: float, exact_all: bool, out: Energies
) -> tuple[dict[tuple[Any, ...], list[int]], list[Item]]:
    """(job, kind, start, end, weight, labelled, what) -> its GPUs, one term each; the short stretches apart."""
    tel = found.fetch.t
    groups: dict[tuple[Any, ...], list[int]] = {}
    short: list[Item] = []
    for it in items:
        d, job = tel.devices[it.dev], plan.jobs[it.job]
        out.pair_j.setdefault((it.job, it.dev), 0.0)
        what = "both"
        if d.kind == GPU_COUNTER and (exact_all or job.duration_s < exact_below_s):
            short.append(it)
            out.exact_jobs.add(it.job)
            what = "count"
        groups.setdefault((it.job, d.kind, it.a, it.b, it.w, d.labelled, what), []).append(it.dev)
    return groups, short


def _job_terms(
    plan: Plan,
    found: Found,
    groups: dict[tuple[Any, ...], list[int]],
    ev: promql.Evaluator,
) -> tuple[list[promql.Term], dict[int, tuple[tuple[Any, ...], set[int], set[int], float, float]]]:
    """The energy and sample-count terms of every group (the items no curve answers: power gauges, short jobs
    read raw, the recorded energy)."""
    n = found.fetch.names
    by = (n.host_label, n.gpu_label)
    terms: list[promql.Term] = []
    info: dict[int, tuple[tuple[Any, ...], set[int], set[int], float, float]] = {}  # devices of e, of c
    for gi, (g, devs) in enumerate(groups.items()):
        j, kind, a, b, w, labelled, what = g
        m = found.gpu_matchers(devs)
        if labelled:  # an equality where one value will do: a regex is matched against every job label value
            m += f",{_eq_or_re(n.job_labels[-1], set(_label_values(plan.jobs[j], n.job_labels)))}"
        m = n.matchers(m).strip("{}")
        metric, fn, unit, every = n.energy_metric, "increase", n.energy_unit_j, ev.scrape_s
        if kind == GPU_GAUGE:
            metric, fn, unit = n.power_metric, "gauge_energy", 1.0
        elif n.recorded:  # a sample at t holds the energy of (t - every, t]: a job's end is in the next one
            metric, fn, unit, every = n.recorded, "sum", 1.0, n.recorded_every_s
            b = b + n.recorded_every_s if labelled and b < plan.window[1] else b
        if what == "both":
            terms.append(promql.Term(("e", gi), metric, m, a, b, by, fn))
        terms.append(promql.Term(("c", gi), metric, m, a, b, by, "count", series=len(devs)))
        info[gi] = (g, set(devs), set(devs), unit, every)
    return terms, info


def _eq_or_re(label: str, values: set[str]) -> str:
    return f'{label}="{_q(next(iter(values)))}"' if len(values) == 1 else _matcher(label, promql.regex_alt(values))


def _short(client: PrometheusClient, found: Found, short: list[Item], ev: promql.Evaluator, out: Energies) -> None:
    from concurrent.futures import ThreadPoolExecutor

    metric = found.fetch.names.energy_metric

    def one(it: Item) -> tuple[Item, float]:
        return it, exact_energy(client, found, it, metric, ev.scrape_s) * it.w

    with ThreadPoolExecutor(max_workers=ev.concurrency) as pool:
        for it, e in pool.map(one, short):
            out.pair_j[(it.job, it.dev)] = out.pair_j.get((it.job, it.dev), 0.0) + e


def _label_values(job: Job, labels: tuple[str, ...]) -> list[str]:
    """The values of the last job label that name the job (``ns/pod`` -> ``pod``)."""
    return sorted({i.split("/")[-1] if len(labels) > 1 else i for i in job.ids})


def metered_recorded(found: Found, window: tuple[float, float], ev: promql.Evaluator) -> tuple[dict, dict]:
    """Each GPU's metered joules and seconds from the recorded energy, and the host meters', per day."""
    edges = list(np.arange(window[0], window[1], DAY).tolist()) + [window[1]]
    days = [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
    dev_j, dev_s = _metered_recorded(found, days, ev, window[1] - window[0])
    dev_j.update(_host_totals(found, days, ev))
    return dev_j, dev_s


def _host_totals(found: Found, days: list[tuple[float, float]], ev: promql.Evaluator) -> dict[int, float]:
    terms = []
    for d in found.fetch.t.devices:
        if d.kind in (CPU, RAM):
            lab = found.labels[d.id]
            hm = ",".join(f'{k}="{_q(v)}"' for k, v in sorted(lab.items()) if k != "__name__")
            terms += [promql.Term(("host", d.id), lab.get("__name__", ""), hm, a, b, ("instance",)) for a, b in days]
    return {key[1]: sum(groups.values()) for key, groups in ev.run(terms).items()}


def _metered_recorded(found: Found, days: list[tuple[float, float]], ev: promql.Evaluator, span: float) -> tuple[dict, dict]:
    """Each GPU's metered joules and seconds from the recorded per-minute energy (every series of the GPU: the
    rule already counted MIG repeats once; consecutive job-label series partition the minutes)."""
    n = found.fetch.names
    by, m = (n.host_label, n.gpu_label), n.matchers().strip("{}")
    k = len(found.fetch.t.devices)
    terms = [promql.Term((what, i), n.recorded, m, a, b, by, fn, series=k, agg="sum")
             for i, (a, b) in enumerate(days) for what, fn in (("e", "sum"), ("s", "count"))]  # fmt: skip
    dev_j: dict[int, float] = {}
    dev_s: dict[int, float] = {}
    for (what, _), groups in ev.run(terms).items():
        for lab, v in groups.items():
            dev = found.by_labels.get((GPU_COUNTER, *lab))
            if dev is None:
                continue
            if what == "e":
                dev_j[dev] = dev_j.get(dev, 0.0) + v
            else:
                dev_s[dev] = min(dev_s.get(dev, 0.0) + v * n.recorded_every_s, span)
    return dev_j, dev_s


def _merged(found: Found, windows: list[tuple[int, float, float]], ev: promql.Evaluator) -> tuple[dict, dict]:
    """Joules and seconds of (GPU, start, end) windows, the GPU's series merged by GPU in a subquery at the scrape
    interval (a counter's increase, or the gauge's mean x duration)."""
    n = found.fetch.names
    by = (n.host_label, n.gpu_label)
    step = max(int(round(ev.scrape_s)), 1)
    terms = []
    for dev, a, b in windows:
        d, lab = found.fetch.t.devices[dev], found.labels[dev]
        m = n.matchers(f'{n.host_label}="{_q(lab.get(n.host_label, ""))}",{n.gpu_label}="{_q(lab.get(n.gpu_label, ""))}"')
        metric = n.energy_metric if d.kind == GPU_COUNTER else n.power_metric
        merged = f"(max by ({','.join(by)}) ({metric}{m}))"
        fn = "increase" if d.kind == GPU_COUNTER else "gauge_energy"
        terms.append(promql.Term(("e", dev), merged, "", a, b, by, fn, subquery_step=step))
        terms.append(promql.Term(("s", dev), merged, "", a, b, by, "count", subquery_step=step))
    dev_j: dict[int, float] = {}
    dev_s: dict[int, float] = {}
    for (what, dev), groups in ev.run(terms).items():
        kind = found.fetch.t.devices[dev].kind
        v = sum(groups.values())
        if what == "e":
            dev_j[dev] = v * (n.energy_unit_j if kind == GPU_COUNTER else 1.0)
        else:
            dev_s[dev] = v * step
    return dev_j, dev_s


def gpu_rows(found: Found, plan: Plan, e: Energies) -> Any:
    """gpus.parquet: per GPU (and host meter) what it metered, what jobs held and the unattributed rest (``e``:
    `evaluate`'s totals, once every chunk of jobs is evaluated)."""
    import pandas as pd

    from footprint.fleet.telemetry import describe

    alloc_j, alloc_s = e.alloc_j, e.alloc_s
    rows = []
    for d in found.fetch.t.devices:
        r = describe(d)
        gpu = d.kind in (GPU_COUNTER, GPU_GAUGE)
        r["component"] = "gpu" if gpu else KIND_NAMES[d.kind]
        total = e.dev_j.get(d.id, alloc_j.get(d.id, 0.0))
        held = alloc_j.get(d.id, 0.0)
        r.update(
            energy_j=max(total, held),
            seconds=e.dev_s.get(d.id, 0.0),
            allocated_energy_j=held,
            allocated_seconds=min(alloc_s.get(d.id, 0.0), e.dev_s.get(d.id, math.inf)),
            gap_energy_j=0.0,
            unallocated_energy_j=max(total - held, 0.0),
            first_seen=None,
            last_seen=None,
        )
        rows.append(r)
    return pd.DataFrame(rows)


def hosts_without_labels(found: Found) -> set[str]:
    labelled = {d.host for d in found.fetch.t.devices if d.labelled}
    return {d.host for d in found.fetch.t.devices if d.kind in (GPU_COUNTER, GPU_GAUGE) and d.host not in labelled}
