"""The join: every GPU-second of telemetry goes to at most one job, the rest is the cluster's unallocated share.

Which job held a GPU during an interval ``(t0, t1]``:

1. On a node whose exporter labels GPUs with the job (``hpc_job``, or ``namespace``/``pod``), the
   label of the interval's closing sample decides: the job named there gets the whole interval (a GPU
   shared by n jobs at once: 1/n each); no label means unallocated. An interval longer than the gap
   limit whose two samples name different jobs is a telemetry gap: its energy is counted but given
   to no job.
2. On a node without the label, SLURM's allocation decides: the job's window (Start-End) and its GPU
   count on that node. sacct does not record *which* GPUs a job held, so when the job does not hold
   every GPU of the node they are inferred: of the GPUs not already held by an overlapping job, the k
   whose telemetry fits the job best (`_Sweep`: power steps at its edges where the curves give them, then
   the most energy in its window); a pick the telemetry cannot decide is noted with each candidate's energy.
   Each interval is split by its overlap with the claims on that GPU (uniform power inside one scrape
   interval); the rest is unallocated.
3. Host CPU/RAM counters are per node: each job on the node gets its share of the node's GPUs times
   the interval's overlap with its window.

The result is conservative by construction: per device, allocated + unallocated + gap = the energy
the counter measured in the window.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from footprint.fleet.jobtable import LABEL, SLURM, Job, JobTable, LabelJobs
from footprint.fleet.sacct_jobs import SacctJobs
from footprint.fleet.slurm import SlurmJob
from footprint.fleet.telemetry import CPU, GPU_COUNTER, GPU_GAUGE, RAM, Chunk, Device, Telemetry

LABEL_ONLY_NOTE = (
    "job known from its telemetry label only (not in the sacct input): window = first to last labelled sample, GPUs = "
    "those that carried the label"
)

UNALLOCATED, GAP, MULTI = -1, -2, -3
__all__ = ["GAP", "UNALLOCATED", "Activity", "Evidence", "Job", "LabelStats", "Plan", "Totals", "attribute"]
BIN_S = 300.0  # finest resolution of the per-GPU activity used to infer which GPUs a job held
MAX_BINS = 4000  # per GPU: long windows get coarser bins, so memory stays bounded


@dataclass
class LabelStats:
    """Pass 1: for every (job label, device), the first and last instant it was seen."""

    first: dict[tuple[int, int], float] = field(default_factory=dict)
    last: dict[tuple[int, int], float] = field(default_factory=dict)

    def add(self, c: Chunk, gpu_devices: np.ndarray) -> None:
        m = (c.lab1 > 0) & gpu_devices[c.dev] & ~(c.gap & (c.lab0 != c.lab1))
        if not m.any():
            return
        key = c.lab1[m].astype(np.int64) * 1_000_000 + c.dev[m]
        order = np.argsort(key, kind="stable")
        k, t0, t1 = key[order], c.t0[m][order], c.t1[m][order]
        uniq, first = np.unique(k, return_index=True)
        lows, highs = np.minimum.reduceat(t0, first), np.maximum.reduceat(t1, first)
        for u, a, b in zip(uniq.tolist(), lows.tolist(), highs.tolist(), strict=True):
            kk = divmod(u, 1_000_000)
            self.first[kk] = min(self.first.get(kk, math.inf), a)
            self.last[kk] = max(self.last.get(kk, -math.inf), b)

    def items(self) -> Iterator[tuple[int, int, float, float]]:
        """(label id, device, first, last) of every label seen on a device."""
        for (lab, dev), first in self.first.items():
            yield lab, dev, first, self.last[(lab, dev)]


class Activity:
    """Pass 1: energy per GPU per bin (5 minutes, coarser beyond MAX_BINS), to infer which GPUs an unlabelled job held."""

    def __init__(self, start: float, end: float) -> None:
        self.t0 = start
        self.bin_s = max(BIN_S, (end - start) / MAX_BINS)
        self.n = int(math.ceil((end - start) / self.bin_s)) + 1
        self.bins: dict[int, np.ndarray] = {}

    def add(self, c: Chunk, gpu_devices: np.ndarray) -> None:
        m = gpu_devices[c.dev]
        if not m.any():
            return
        mid = 0.5 * (c.t0[m] + c.t1[m])
        b = np.clip(((mid - self.t0) // self.bin_s).astype(np.int64), 0, self.n - 1)
        for dev in np.unique(c.dev[m]).tolist():
            sel = c.dev[m] == dev
            arr = self.bins.setdefault(dev, np.zeros(self.n))
            np.add.at(arr, b[sel], c.energy_j[m][sel])

    def energy(self, dev: int, start: float, end: float) -> float:
        return float(self.energies(dev, np.array([start]), np.array([end]))[0])

    def energies(self, dev: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The GPU's energy in the bins from each start's to each end's (vectorised over windows)."""
        arr = self.bins.get(dev)
        if arr is None:
            return np.zeros(len(starts))
        cum = np.concatenate([[0.0], np.cumsum(arr)])
        a = np.clip((starts - self.t0) // self.bin_s, 0, self.n - 1).astype(np.int64)
        b = np.clip((ends - self.t0) // self.bin_s, 0, self.n - 1).astype(np.int64)
        return cum[b + 1] - cum[a]

    def evidence(self, dev: int, starts: np.ndarray, ends: np.ndarray) -> Evidence:
        """What the GPU's telemetry says of jobs over these windows: here the energy in each (the bins are too coarse
        for the power steps at a job's edges; `aggregate.EdgeActivity` reads them from the curves)."""
        z = np.zeros(len(starts), np.int8)
        return Evidence(self.energies(dev, starts, ends), z, z, np.zeros(len(starts), bool), np.zeros(len(starts)))


@dataclass(frozen=True)
class Evidence:
    """One GPU against a list of job windows: its energy in each, the steps of its power at each window's edges that
    match a job there (+1 each: up at the start, down at the end; -1 each the other way; 0 none or no edge), and
    whether it was busy and stayed so across the start (a job on it before may have been followed by this one), and
    the steps' sizes (W: up at the start plus down at the end, where the window has them)."""

    energy: np.ndarray
    start_step: np.ndarray
    end_step: np.ndarray
    flat_busy_start: np.ndarray
    step_w: np.ndarray


class Spans(Protocol):
    """Where each job label was seen: `LabelStats` (the exact import) or the series index (`aggregate`)."""

    def items(self) -> Iterator[tuple[int, int, float, float]]: ...


@dataclass(slots=True)
class Claim:
    start: float
    end: float
    job: int
    weight: float = 1.0


class Plan:
    """Who holds what: job table, label -> jobs, and per-device claims for unlabelled nodes and host meters."""

    def __init__(self, tel: Telemetry, window: tuple[float, float]) -> None:
        self.tel = tel
        self.window = window
        self.jobs = JobTable()
        self.label_jobs = LabelJobs()
        self.claims: dict[int, list[Claim]] = {}
        self.notes: list[str] = []
        self._label_arrays: LabelArrays | None = None
        self._claim_bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        devs = tel.devices
        self.gpu_mask = np.array([d.kind in (GPU_COUNTER, GPU_GAUGE) for d in devs], bool)
        self.labelled_hosts = {d.host for d in devs if d.labelled}
        self.host_gpus: dict[str, list[Device]] = {}
        for d in devs:  # each physical GPU once (its first meter), for GPU counts and claims
            if d.kind in (GPU_COUNTER, GPU_GAUGE) and all(x.key != d.key for x in self.host_gpus.get(d.host, [])):
                self.host_gpus.setdefault(d.host, []).append(d)
        labelled_dev = np.array([d.host in self.labelled_hosts for d in devs], bool)
        self.labelled_dev = labelled_dev & self.gpu_mask

    # ---- building -------------------------------------------------------------------------------
    def build(self, slurm_jobs: Iterable[SlurmJob] | None, stats: Spans, activity: Activity, now: float) -> None:
        sacct = SacctJobs.of(slurm_jobs or [])
        self.jobs = JobTable(sacct)
        by_id = self._slurm_jobs(sacct, now)
        self._label_jobs(stats, by_id)
        self._claims_unlabelled(activity)
        self._claims_host_meters()

    def _slurm_jobs(self, sacct: SacctJobs, now: float) -> dict[str, int]:
        """sacct's rows as jobs of the plan, their windows clipped to the import's (rows outside it left out), in
        columns; returns every id a job label may carry -> its job."""
        s0, s1 = self.window
        t = self.jobs
        if not len(sacct):
            return {}
        t0, t1 = sacct.column("start"), sacct.column("end")
        running = np.isnan(t1)
        start = np.maximum(t0, s0)
        stop = np.minimum(np.where(running, min(s1, now), t1), s1)
        rows = np.nonzero(~(stop <= start))[0]  # as `stop <= start` left a row out
        first = len(t)
        keys = [sacct.job_id[i] for i in rows.tolist()]
        t.key.extend(keys)
        t.source.extend(bytes([SLURM]) * len(rows))
        t.start.frombytes(start[rows].tobytes())
        t.end.frombytes(stop[rows].tobytes())
        t.row.frombytes(rows.astype(np.int32).tobytes())
        by_id: dict[str, int] = {}
        for j, (i, key) in enumerate(zip(rows.tolist(), keys, strict=True), first):
            by_id[key] = j
            raw = sacct.raw_id[i]
            if raw:
                by_id[raw] = j
        clipped = rows[(t0[rows] < s0) | np.where(running[rows], True, t1[rows] > s1)]
        for i in sorted(set(clipped.tolist()) | set(sacct.notes) & set(rows.tolist())):
            job = t[first + int(np.searchsorted(rows, i))]
            for text in sacct.notes.get(i, ()):
                job.note(text)
            if running[i]:
                job.note(f"still running when sacct ran: window cut at {_iso(stop[i])}")
            if t0[i] < s0 or running[i] or t1[i] > s1:
                job.note(
                    f"ran {_iso(t0[i])} - {'still running' if running[i] else _iso(t1[i])}; "
                    f"only the part inside the import window ({_iso(start[i])} - {_iso(stop[i])}) is counted"
                )
        return by_id

    def _label_jobs(self, stats: Spans, by_id: dict[str, int]) -> None:
        """Map every job label to jobs; labels sacct does not know become jobs of their own (numbered in the order
        their first sighting is met): window = first to last sighting on any of its devices, inside the import
        window; GPUs = its devices, per node in the order first seen. The sightings are gathered in arrays and
        merged per job in numpy (a 512-GPU month's 77,000 label-only jobs: a dict per job and device cost 0.5 s)."""
        t, devs = self.jobs, self.tel.devices
        names_of: dict[int, list[str]] = {}
        sj, sd, sf, sl = array("q"), array("q"), array("d"), array("d")  # label-only jobs' sightings
        for lab, dev, first, last in stats.items():
            names = names_of.get(lab)
            if names is None:
                names = names_of[lab] = self.tel.labels[lab].split(",")
            for name in names:
                j = by_id.get(name)
                if j is None:
                    j = by_id[name] = t.add(name, LABEL, first, last)
                if t.source[j] == LABEL:
                    sj.append(j)
                    sd.append(dev)
                    sf.append(first)
                    sl.append(last)
        for lab, text in enumerate(self.tel.labels):
            if lab:
                self.label_jobs.set(lab, [by_id[n] for n in text.split(",") if n in by_id])
        if not sj:
            return
        j, d = np.frombuffer(sj, np.int64), np.frombuffer(sd, np.int64)
        order = np.argsort(j, kind="stable")  # by job, each job's sightings in the order met
        j, d, f, last = j[order], d[order], np.frombuffer(sf)[order], np.frombuffer(sl)[order]
        head = np.flatnonzero(np.concatenate([[True], j[1:] != j[:-1]]))
        jobs = j[head].tolist()
        start = np.maximum(np.minimum.reduceat(f, head), self.window[0]).tolist()
        end = np.minimum(np.maximum.reduceat(last, head), self.window[1]).tolist()
        bounds = [*head.tolist()[1:], len(j)]
        hosts = [x.host for x in devs]
        d_list = d.tolist()
        lo = 0
        for k, hi in enumerate(bounds):
            job = jobs[k]
            t.start[job], t.end[job] = start[k], end[k]
            gpus = t.label_gpus[job]
            for dev in dict.fromkeys(d_list[lo:hi]):  # each device once, in the order first seen
                host = hosts[dev]
                gpus[host] = gpus.get(host, 0) + 1
            t.notes.setdefault(job, []).append(LABEL_ONLY_NOTE)
            lo = hi

    def _claims_unlabelled(self, activity: Activity) -> None:
        """On nodes without the job label, which of the node's GPUs each SLURM job held: one sweep per node over its
        jobs in start order, each job taking the free GPUs whose telemetry fits it best (`_pick`)."""
        if not self.tel.devices:
            return  # SLURM alone: no telemetry to claim
        t = self.jobs
        per_host = self._unlabelled_jobs()
        for host, jobs in per_host.items():
            gpus = self.host_gpus.get(host, [])
            if not gpus:
                for j, k in jobs:
                    t[j].note(f"node {host}: no GPU telemetry in Prometheus; its {k} GPU(s) are not measured")
                continue
            js = np.array([j for j, _ in jobs], np.int64)
            starts, ends = np.frombuffer(t.start, np.float64)[js], np.frombuffer(t.end, np.float64)[js]
            ev = [activity.evidence(d.id, starts, ends) for d in gpus]
            _Sweep(self, host, gpus, ev, getattr(activity, "edge_s", 0.0)).run(jobs, starts, ends)

    def _unlabelled_jobs(self) -> dict[str, list[tuple[int, int]]]:
        """Node without the job label -> its SLURM jobs (job, GPUs there) in (start, key) order. The allocations are
        looked at once per distinct allocation, the jobs selected with numpy: linear in the jobs."""
        t = self.jobs
        sacct = t.sacct
        if not len(t) or not len(sacct):
            return {}
        rows = np.frombuffer(t.row, np.int32)
        slurm = (np.frombuffer(t.source, np.uint8) == SLURM) & (rows >= 0)
        codes = np.frombuffer(sacct.alloc, np.int32)
        uniq, first = np.unique(codes, return_index=True)
        want: dict[int, list[tuple[str, int]]] = {}
        for code, i in zip(uniq.tolist(), first.tolist(), strict=True):
            hosts = [(h, k) for h, k in sacct.hosts(i)[0].items() if h not in self.labelled_hosts]
            if hosts:
                want[code] = hosts
        if not want:
            return {}
        js = np.nonzero(slurm)[0]
        js = js[np.isin(codes[rows[js]], np.array(list(want), np.int32))]
        keys = np.array([t.key[j] for j in js.tolist()])
        js = js[np.lexsort((keys, np.frombuffer(t.start, np.float64)[js]))]
        out: dict[str, list[tuple[int, int]]] = {}
        for j, code in zip(js.tolist(), codes[rows[js]].tolist(), strict=True):
            for host, k in want[code]:
                out.setdefault(host, []).append((j, k))
        return out

    def _claims_host_meters(self) -> None:
        """Each job's share of its nodes' CPU/RAM meters: its GPUs there over the node's (jobs x their nodes, not
        jobs x meters)."""
        meters: dict[str, list[Device]] = {}
        for d in self.tel.devices:
            if d.kind in (CPU, RAM):
                meters.setdefault(d.host, []).append(d)
        t = self.jobs
        for j in self._jobs_on(set(meters)) if meters else ():
            job = t[j]
            for host, k in job.gpus_by_host.items():
                n_gpus = len(self.host_gpus.get(host, []))
                for d in meters.get(host, []) if k and n_gpus else ():
                    self.claims.setdefault(d.id, []).append(Claim(job.start, job.end, j, min(k / n_gpus, 1.0)))
        for claims in self.claims.values():
            claims.sort(key=lambda c: c.start)

    def _jobs_on(self, hosts: set[str]) -> list[int]:
        """The jobs with GPUs on any of these nodes, in order: SLURM's by their distinct allocations (numpy over the
        jobs), label-only ones by their GPUs."""
        t = self.jobs
        if not len(t):
            return []
        rows = np.frombuffer(t.row, np.int32)
        out = np.zeros(len(t), bool)
        if len(t.sacct):
            codes = np.frombuffer(t.sacct.alloc, np.int32)
            uniq, first = np.unique(codes, return_index=True)
            want = [c for c, i in zip(uniq.tolist(), first.tolist(), strict=True) if hosts & set(t.sacct.hosts(i)[0])]
            out[rows >= 0] = np.isin(codes[rows[rows >= 0]], np.array(want, np.int32))
        for j, gpus in t.label_gpus.items():
            out[j] = bool(hosts & set(gpus))
        return np.nonzero(out)[0].tolist()

    def _claim(self, dev: int, claim: Claim) -> None:
        self.claims.setdefault(dev, []).append(claim)

    def claim_bounds(self, dev: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of a device's claims as arrays, to find those overlapping a chunk without a Python scan."""
        if dev not in self._claim_bounds:
            cl = self.claims.get(dev, [])
            self._claim_bounds[dev] = (np.array([c.start for c in cl]), np.array([c.end for c in cl]))
        return self._claim_bounds[dev]

    def label_arrays(self) -> LabelArrays:
        if self._label_arrays is None:
            n = len(self.tel.labels)
            single = np.full(n, UNALLOCATED, np.int64)
            start, end = np.zeros(n), np.zeros(n)
            window = np.zeros(n, bool)
            for lab, jobs in self.label_jobs.items():
                single[lab] = jobs[0] if len(jobs) == 1 else (MULTI if jobs else UNALLOCATED)
                if jobs and all(self.jobs[j].source == "slurm" for j in jobs):
                    window[lab] = True
                    start[lab] = min(self.jobs[j].start for j in jobs)
                    end[lab] = max(self.jobs[j].end for j in jobs)
            self._label_arrays = LabelArrays(single, start, end, window)
        return self._label_arrays


AMBIGUOUS = 0.01  # candidate GPUs whose energies in a job's window differ by more than this are worth telling apart


class _Sweep:
    """One node without the job label, its jobs in start order: each takes the k free GPUs (no claim overlapping its
    window) ranked by the evidence, then its energy in its window. The evidence: its power steps up at the job's
    start and down at its end (+1 each, -1 each the other way), or it stayed busy across the start right after the
    job it held before ended (a job followed by the next on the same GPU shows no step). A GPU busy with another
    job of the same profile has the job's energy but not its steps; one the job took back to back has no step but
    its previous job's end. Where the chosen and a passed-over GPU have the same evidence and their energies in the
    window differ by more than 1 %, the data cannot decide: the job's note says so and gives the energy on each."""

    def __init__(self, plan: Plan, host: str, gpus: list[Device], ev: list[Evidence], edge_s: float) -> None:
        self.plan, self.host, self.gpus = plan, host, gpus
        self.energy = np.stack([e.energy for e in ev])
        self.steps = np.stack([e.start_step.astype(np.int16) + e.end_step for e in ev])
        self.flat = np.stack([e.flat_busy_start for e in ev])
        self.step_w = np.stack([e.step_w for e in ev])
        self.edge_s = edge_s
        self.order = np.argsort([d.key for d in gpus], kind="stable")  # ties: by GPU key

    def run(self, jobs: list[tuple[int, int]], starts: np.ndarray, ends: np.ndarray) -> None:
        plan, host, gpus = self.plan, self.host, self.gpus
        n = len(gpus)
        busy_until = np.full(n, -math.inf)
        for x, (j, k) in enumerate(jobs):
            s, e = float(starts[x]), float(ends[x])
            job = plan.jobs[j]
            if n <= k:
                chosen = list(range(n))
                job.note(
                    f"node {host} reports no job label: the job held all its {n} GPUs (sacct: {k})"
                    + ("" if n == k else "; GPUs without telemetry are not measured")
                )
            else:
                chosen = self._pick(x, k, s, busy_until, job)
            for g in chosen:
                plan._claim(gpus[g].id, Claim(s, e, j))
                busy_until[g] = max(busy_until[g], e)

    def _pick(self, x: int, k: int, s: float, busy_until: np.ndarray, job: Job) -> list[int]:
        gpus = self.gpus
        free = busy_until <= s
        follows = free & (s - busy_until <= max(self.edge_s, 1.0)) & self.flat[:, x]
        score = self.steps[:, x] + follows
        e = self.energy[:, x]
        cand = [int(g) for g in self.order if free[g]]
        cand.sort(key=lambda g: (-int(score[g]), -float(e[g])))
        if len(cand) > k:  # GPUs as busy as the k-th (within 1 %): the larger steps at the job's edges first
            top = [g for g in cand if score[g] == score[cand[k - 1]] and e[g] >= (1 - AMBIGUOUS) * e[cand[k - 1]]]
            head = [g for g in cand[:k] if g not in top]
            top.sort(key=lambda g: -float(self.step_w[g, x]))
            cand = head + top + [g for g in cand if g not in head and g not in top]
        chosen = cand[:k]
        job.note(
            f"node {self.host} reports no job label and sacct does not record GPU indices: the job's {k} of "
            f"{len(gpus)} GPUs are inferred as the busiest free ones in its window"
            + (", power steps at its edges first " if self.edge_s else " ")
            + f"({', '.join(_gpu_name(gpus[g]) for g in chosen)})"
            + (f"; only {len(chosen)} were free (overlapping allocations in sacct?)" if len(chosen) < k else "")
        )
        if chosen and len(cand) > k:
            last, rest = chosen[-1], cand[k:]
            tied = [g for g in rest if score[g] == score[last]]
            lo, hi = min(e[g] for g in chosen + tied), max(e[g] for g in chosen + tied)
            if tied and hi - lo > AMBIGUOUS * max(hi, 1e-9):
                each = ", ".join(f"{_gpu_name(gpus[g])} {e[g] / 3.6e6:.4g} kWh" for g in chosen + tied)
                job.note(
                    f"which GPU(s) of {self.host} the job held is ambiguous: the telemetry cannot tell "
                    f"{', '.join(_gpu_name(gpus[g]) for g in chosen + tied)} apart (the same power steps at its edges); "
                    f"the busiest was taken, the energy in its window on each: {each}"
                )
        return chosen


@dataclass(frozen=True)
class LabelArrays:
    """Per label id: its job (or MULTI / UNALLOCATED) and, for SLURM jobs, their window."""

    single: np.ndarray
    start: np.ndarray
    end: np.ndarray
    window: np.ndarray

    def share(self, labs: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Share of each interval (a, b] that the label's job(s) held: the overlap with the SLURM window, else 1/2."""
        ov = np.clip(np.minimum(b, self.end[labs]) - np.maximum(a, self.start[labs]), 0.0, None) / (b - a)
        return np.where(labs == 0, 0.0, np.where(self.window[labs], ov, 0.5))


@dataclass
class Totals:
    """Pass 2 accumulators."""

    n_dev: int
    dev_energy: np.ndarray = field(init=False)
    dev_seconds: np.ndarray = field(init=False)
    dev_alloc_energy: np.ndarray = field(init=False)
    dev_alloc_seconds: np.ndarray = field(init=False)
    dev_gap_energy: np.ndarray = field(init=False)
    pairs: list[Any] = field(default_factory=list)  # per chunk: DataFrame(job, dev, energy_j, seconds)

    def __post_init__(self) -> None:
        for name in ("dev_energy", "dev_seconds", "dev_alloc_energy", "dev_alloc_seconds", "dev_gap_energy"):
            setattr(self, name, np.zeros(self.n_dev))


def attribute(c: Chunk, plan: Plan, totals: Totals) -> dict[str, np.ndarray]:
    """Split one chunk's intervals among jobs; returns the series rows (dev, t0, t1, energy_j, seconds, job)."""
    import pandas as pd

    s0, s1 = plan.window
    lo, hi = np.maximum(c.t0, s0), np.minimum(c.t1, s1)
    inside = hi > lo
    dev, t0, t1 = c.dev[inside], c.t0[inside], c.t1[inside]
    lo, hi = lo[inside], hi[inside]
    frac = (hi - lo) / (t1 - t0)
    energy, seconds = c.energy_j[inside] * frac, hi - lo
    lab0, lab1, gap = c.lab0[inside], c.lab1[inside], c.gap[inside]
    n_dev = len(plan.tel.devices)
    totals.dev_energy += np.bincount(dev, weights=energy, minlength=n_dev)
    totals.dev_seconds += np.bincount(dev, weights=seconds, minlength=n_dev)

    rows_dev, rows_i, rows_e, rows_s, rows_job = [], [], [], [], []

    def emit(idx: np.ndarray, e: np.ndarray, s: np.ndarray, job: np.ndarray) -> None:
        rows_i.append(idx)
        rows_dev.append(dev[idx])
        rows_e.append(e)
        rows_s.append(s)
        rows_job.append(job)

    # 1. labelled nodes: the job label decides; an interval where the label changes is split by the
    #    jobs' SLURM windows (half each way for a job known from its label only)
    lab_m = plan.labelled_dev[dev]
    if lab_m.any():
        la = plan.label_arrays()
        idx = np.nonzero(lab_m)[0]
        l0, l1 = lab0[idx], lab1[idx]
        is_gap = gap[idx] & (l0 != l1)
        trans = (l0 != l1) & ~is_gap

        def give(ii: np.ndarray, labs: np.ndarray, frac: np.ndarray) -> None:
            job = la.single[labs]
            one = job >= 0
            emit(ii[one], energy[ii[one]] * frac[one], seconds[ii[one]] * frac[one], job[one])
            for k in np.nonzero(job == MULTI)[0].tolist():
                jobs = plan.label_jobs[int(labs[k])]
                i, f = ii[k], frac[k] / len(jobs)
                emit(np.full(len(jobs), i), np.full(len(jobs), energy[i] * f), np.full(len(jobs), seconds[i] * f), np.array(jobs))

        steady = ~trans & ~is_gap
        give(idx[steady], l1[steady], np.ones(int(steady.sum())))
        none = steady & (l1 == 0)
        emit(idx[none], energy[idx[none]], seconds[idx[none]], np.full(int(none.sum()), UNALLOCATED))
        emit(idx[is_gap], energy[idx[is_gap]], seconds[idx[is_gap]], np.full(int(is_gap.sum()), GAP))
        ti = idx[trans]
        if len(ti):
            f0 = la.share(l0[trans], lo[ti], hi[ti])
            f1 = la.share(l1[trans], lo[ti], hi[ti])
            scale = np.where(f0 + f1 > 1.0, 1.0 / np.maximum(f0 + f1, 1e-300), 1.0)
            f0, f1 = f0 * scale, f1 * scale
            give(ti, l0[trans], f0)
            give(ti, l1[trans], f1)
            rest_f = np.clip(1.0 - f0 - f1, 0.0, 1.0)
            emit(ti, energy[ti] * rest_f, seconds[ti] * rest_f, np.full(len(ti), UNALLOCATED))

    # 2./3. claims: unlabelled GPUs and host meters
    rest = np.nonzero(~lab_m)[0]
    if len(rest):
        left_e, left_s = energy[rest].copy(), seconds[rest].copy()
        pos = {int(d): np.nonzero(dev[rest] == d)[0] for d in np.unique(dev[rest]) if int(d) in plan.claims}
        for d, where in pos.items():
            a, b = lo[rest][where], hi[rest][where]
            claims = plan.claims[d]
            starts, ends = plan.claim_bounds(d)
            for ci in np.nonzero((starts < b.max()) & (ends > a.min()))[0].tolist():  # claims inside this chunk
                cl = claims[ci]
                ov = np.minimum(b, cl.end) - np.maximum(a, cl.start)
                hit = ov > 0
                if not hit.any():
                    continue
                k = where[hit]
                f = ov[hit] / (b[hit] - a[hit]) * cl.weight
                e, s = energy[rest][k] * f, seconds[rest][k] * f
                left_e[k] -= e
                left_s[k] -= s
                emit(rest[k], e, s, np.full(len(k), cl.job))
        emit(rest, np.maximum(left_e, 0.0), np.maximum(left_s, 0.0), np.full(len(rest), UNALLOCATED))

    if not rows_i:
        return {
            k: np.zeros(0, t)
            for k, t in (
                ("dev", np.int32),
                ("t0", float),
                ("t1", float),
                ("energy_j", float),
                ("seconds", float),
                ("job", np.int64),
            )
        }
    idx = np.concatenate(rows_i)
    out = {
        "dev": np.concatenate(rows_dev).astype(np.int32),
        "t0": t0[idx],
        "t1": t1[idx],
        "energy_j": np.concatenate(rows_e),
        "seconds": np.concatenate(rows_s),
        "job": np.concatenate(rows_job).astype(np.int64),
    }
    job = out["job"]
    alloc = job >= 0
    totals.dev_alloc_energy += np.bincount(out["dev"][alloc], weights=out["energy_j"][alloc], minlength=n_dev)
    totals.dev_alloc_seconds += np.bincount(out["dev"][alloc], weights=out["seconds"][alloc], minlength=n_dev)
    g = job == GAP
    totals.dev_gap_energy += np.bincount(out["dev"][g], weights=out["energy_j"][g], minlength=n_dev)
    if alloc.any():
        df = pd.DataFrame(
            {"job": job[alloc], "dev": out["dev"][alloc], "energy_j": out["energy_j"][alloc], "seconds": out["seconds"][alloc]}
        )
        totals.pairs.append(df.groupby(["job", "dev"], sort=False).sum().reset_index())
    return out


def _iso(t: float | None) -> str:
    from datetime import UTC, datetime

    return "?" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpu_name(d: Device) -> str:
    return f"{d.host}:gpu{d.gpu_index}" if d.gpu_index is not None else d.key
