"""A chunk's per-bin summaries in columns, and the bins that lay out without doubt laid out in numpy.

`summaries.Summaries` lays each GPU's series out on its scrape grid bin by bin. Most bins are plain: their
series finite, no reset, value ranges apart, counts filling the grid, not below the bin before. Decided one at a
time in Python they were a third of a month's import; here a chunk's plain bins are laid out per GPU a block at
a time (`Table.runs`), and the Python layout visits only the bins where something is in doubt. Imports numpy only.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np


class Part(NamedTuple):
    """One summary's answer in columns: each series' key (device, job label) and how many rows it has, and the
    rows of all of them end to end (bin, value)."""

    keys: list[tuple[int, str]]
    lens: np.ndarray
    bins: np.ndarray
    vals: np.ndarray

    def window(self, lo: int, n: int) -> Part:
        """The rows in bins ``lo`` to ``lo + n - 1``, numbered from ``lo``."""
        series = np.repeat(np.arange(len(self.keys)), self.lens)
        keep = (self.bins >= lo) & (self.bins < lo + n)
        lens = np.bincount(series[keep], minlength=len(self.keys))
        return Part(self.keys, lens, self.bins[keep] - lo, self.vals[keep])

    def join(self, other: Part) -> Part:
        """Both answers' series (where one key is in both, the later's value at a shared bin)."""
        cat = (np.concatenate((x, y)) for x, y in zip(self[1:], other[1:], strict=True))
        return Part(self.keys + other.keys, *cat)


NO_PART = Part([], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))


def first_values(
    inc: np.ndarray, last: np.ndarray, k: np.ndarray, t0: np.ndarray, t1: np.ndarray, end: np.ndarray, bin_s: float
) -> np.ndarray:
    """Each group's first sample in its bin, from PromQL's ``increase`` over the bin, its last sample (``max``) and
    where its ``k`` samples lie (``t0`` to ``t1``; the bin ends at ``end``; seconds). ``increase`` is the rise from
    the first sample to the last, plus the value before every drop, stretched towards the bin's edges (`_stretch`):
    undone, it gives the first sample where nothing dropped. NaN where that is not certain:
    a drop (it leaves the first value at or below zero), or a counter so near zero that the server may have
    stretched to its zero point instead (``S * first / rise < d_start``). One sample: the last. The same
    floating-point operations for one value or many, so the numpy and the one-bin layouts agree to the bit."""
    factor, span, d_start = _stretch(t0, t1, end, bin_s, k)
    with np.errstate(invalid="ignore", divide="ignore"):
        first = last - inc / factor
        ok = (k >= 2) & (span > 0) & (first > 0) & (span * first >= d_start * (last - first))
    return np.where(k == 1, last, np.where(ok, first, math.nan))


def _stretch(t0: Any, t1: Any, end: Any, range_s: float, k: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prometheus' ``extrapolatedRate`` for ``k`` samples from ``t0`` to ``t1`` in the range ending at ``end``
    (seconds; whole milliseconds, as the server has them): the factor ``(S + d_start + d_end) / S`` it stretches
    the rise by (an edge's distance counted where under 1.1 mean intervals, half an interval otherwise), S, and
    d_start. One place for both directions (`increase_of`, `first_values`)."""
    a, z = np.rint(np.asarray(t0, float) * 1000.0), np.rint(np.asarray(t1, float) * 1000.0)
    e = np.rint(np.asarray(end, float) * 1000.0)
    d_start, d_end, span = (a - (e - round(range_s * 1000.0))) / 1000.0, (e - z) / 1000.0, (z - a) / 1000.0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = span / (k - 1)
        near = mean * 1.1
        ext = span + np.where(d_start < near, d_start, mean / 2)
        ext = ext + np.where(d_end < near, d_end, mean / 2)
        return ext / span, span, d_start


class Runs(NamedTuple):
    """The bins that lay out without doubt (`Table.runs`), as runs in time order per device: a run is one series'
    samples end to end (the pieces of consecutive bins that carry it on, joined). A device's bins before its first
    doubtful one make one block, those after its last another (``post``); ``first`` and ``final`` mark a block's
    first and last run; ``bin``: the bin a run ends in. ``mode``, per segment: 1 in a block before, 2 after, 0
    laid out one bin at a time."""

    dev: list[int]
    job: list[int]
    t0: list[float]
    v0: list[float]
    t1: list[float]
    v1: list[float]
    first: list[bool]
    final: list[bool]
    bin: list[int]
    post: list[bool]
    mode: np.ndarray


def increase_of(t: np.ndarray, v: np.ndarray, at: float, range_s: float) -> float | None:
    """PromQL's ``increase(m[range] @ at)`` of one series' samples (times in seconds), as Prometheus 2 and 3
    compute it (``extrapolatedRate``); None where the two differ (the counter's zero point is nearer than the
    range's start, which they test in a different order) or there are fewer than two samples."""
    if len(v) < 2:
        return None
    rise = float(v[-1] - v[0]) + float(np.sum(v[:-1][np.diff(v) < 0]))  # the value before every drop
    factor, span, d_start = (float(x) for x in _stretch(t[0], t[-1], at, range_s, len(v)))
    if span <= 0 or rise > 0 and v[0] >= 0 and span * (float(v[0]) / rise) < d_start:
        return None
    return rise * factor


class Table:
    """One row per (device, job label, bin): count, min, max and resets, NaN where a summary did not answer (with
    ``by_increase`` the second summary is ``increase``, and the min each row's first sample once `runs` placed it).
    Rows are sorted by bin, then device, then job label (the order the layout visits them); a segment is one
    device's rows in one bin."""

    def __init__(self, parts: list[Part], steady: set[int], by_increase: bool = False) -> None:
        keys = sorted(set().union(*(p.keys for p in parts)))  # a segment's rows in job label order
        at = {key: i for i, key in enumerate(keys)}
        lo = min((int(p.bins.min()) for p in parts if len(p.bins)), default=0)
        nb = max((int(p.bins.max()) for p in parts if len(p.bins)), default=0) - lo + 1
        cells, vals = [], []
        for p in parts:  # each summary's (key, bin) cells; of two series of one key, the later's value
            cell = np.repeat(np.array([at[k] for k in p.keys], np.int64), p.lens) * nb + (p.bins - lo)
            cell, last = np.unique(cell[::-1], return_index=True)
            cells.append(cell)
            vals.append(p.vals[::-1][last])
        union = np.unique(np.concatenate(cells)) if cells else np.zeros(0, np.int64)
        cols = []
        for cell, v in zip(cells, vals, strict=True):
            col = np.full(len(union), math.nan)
            col[np.searchsorted(union, cell)] = v
            cols.append(col)
        while len(cols) < 4:
            cols.append(np.full(len(union), math.nan))
        order = np.lexsort((union // nb, union % nb))  # by bin, then device and job label (the key's order)
        union = union[order]
        cols = [c[order] for c in cols]
        key, b = union // nb, union % nb + lo
        names: dict[str, int] = {}
        self.dev = np.array([k[0] for k in keys], np.int64)[key] if keys else np.zeros(0, np.int64)
        self.job = np.array([names.setdefault(k[1], len(names)) for k in keys], np.int64)[key] if keys else self.dev
        self.bin = b
        self.k, self.vmin, self.vmax, r = cols[:4]
        # the second summary is ``increase`` (`first_values`): each row's first sample is known once it is placed
        self.inc = self.vmin if by_increase else None
        if by_increase:
            self.vmin = np.full(len(union), math.nan)  # until placed (`runs`)
        if steady:  # no reset in the window: none in any bin where the count answered
            r = np.where(np.isin(self.dev, list(steady)), np.where(np.isnan(self.k), math.nan, 0.0), r)
        self.r = r
        self.names = list(names)
        n = len(self.dev)
        new = np.ones(n, bool)
        new[1:] = (self.bin[1:] != self.bin[:-1]) | (self.dev[1:] != self.dev[:-1])
        self.start = np.flatnonzero(new)
        self.stop = np.append(self.start[1:], n)

    def __len__(self) -> int:
        return len(self.start)

    def rows(self) -> list[tuple[str, float, float, float, float, float]]:
        """Every row as (job label, count, first, last, resets, increase), Python values (what the layout reads;
        first: min, or from ``increase`` where the bin's rows fill its grid end to end (`runs`), else NaN;
        increase NaN where it was not asked)."""
        labels = np.array(self.names, dtype=object)[self.job].tolist() if len(self.job) else []
        inc = self.inc if self.inc is not None else np.full(len(self.k), math.nan)
        cols = (self.k.tolist(), self.vmin.tolist(), self.vmax.tolist(), self.r.tolist(), inc.tolist())
        return list(zip(labels, *cols, strict=True))

    def after(self) -> list[bool]:
        """Per segment: whether its device has rows in the next bin too."""
        dev, b = self.dev[self.start], self.bin[self.start]
        by_dev = np.lexsort((b, dev))
        d, b = dev[by_dev], b[by_dev]
        out = np.zeros(len(self), bool)
        out[by_dev[:-1]] = (d[1:] == d[:-1]) & (b[1:] == b[:-1] + 1)
        return out.tolist()

    def runs(self, ends: list[float], phase: dict[int, float], step: float, bin_s: float) -> Runs:
        """The layout `Summaries._lay_out` makes, for the bins that lay out without doubt: rows finite, no reset,
        their value ranges apart, their counts filling the grid, not below the bin before. Per device, the bins
        before its first doubtful one (``post`` False) and after its last (``post`` True) are laid out here, the
        rest one at a time by the caller. A bin's rows ordered by value are laid end to end from its first grid
        point, and a piece joins the one before where `Summaries._run` would (same job label, the next grid
        point, not below it); the same floating-point operations, so the same knots. Whether a block's first
        piece joins the open run, and is not below it, is left to the caller (it is state)."""
        seg = np.repeat(np.arange(len(self)), self.stop - self.start)
        by = self.vmin if self.inc is None else self.vmax  # a device's bins, each by value (first, or last sample)
        o = np.lexsort((self.k, self.vmax, by, self.bin, self.dev))
        d, b, k, lo, hi, r, job, sg = (x[o] for x in (self.dev, self.bin, self.k, self.vmin, self.vmax, self.r, self.job, seg))
        end, ph, i0, i1, head, starts, t0, t1 = _placed(d, b, k, sg, ends, phase, step, bin_s)
        if self.inc is not None:  # first samples where the rows lie end to end from the bin's first grid point
            lo = first_values(self.inc[o], hi, k, t0, t1, end, bin_s)
            self.vmin[o] = lo  # for the bins laid out one at a time (a bin laid out otherwise works it out again)
        n = len(d)
        at = np.cumsum(head) - 1  # each row's bin, numbered in device order
        dev_first = np.append(True, d[1:] != d[:-1])
        with np.errstate(invalid="ignore"):
            good = np.isfinite(k) & np.isfinite(lo) & np.isfinite(hi) & np.isfinite(r) & (r <= 0) & ~np.isnan(ph)
            good[1:] &= head[1:] | (lo[1:] > hi[:-1])  # ranges apart from the row below in the bin
            ksum = np.add.reduceat(k, starts) if n else k
            doubt = np.logical_or.reduceat(~good, starts) if n else good
            doubt |= ksum != (i1 - i0 + 1)[starts]
            # below the bin before (where that one is certain: after a doubtful bin the value is state)
            drop = np.zeros(len(starts), bool)
            drop[1:] = ~dev_first[starts[1:]] & ~doubt[:-1] & (lo[starts[1:]] < hi[starts[1:] - 1])
        doubt |= drop
        pre, post, block_first = _blocks(doubt, dev_first[starts])
        blocks = (pre | post)[at]
        # pieces of the blocks, in time order
        e = np.flatnonzero(blocks)
        first = (block_first[at] & head)[e]
        d, job, t0, t1, lo, hi, b, after = d[e], job[e], t0[e], t1[e], lo[e], hi[e], b[e], post[at][e]
        with np.errstate(invalid="ignore"):
            joins = np.zeros(len(e), bool)
            joins[1:] = ~first[1:] & (job[1:] == job[:-1]) & (np.abs(t0[1:] - t1[:-1] - step) < 1e-3) & (lo[1:] >= hi[:-1])
        begin = np.flatnonzero(~joins)  # each run's first piece
        stop = np.append(begin[1:], len(e))[: len(begin)] - 1  # and its last
        final = np.append(first[begin][1:], True)[: len(begin)]  # a block's last run
        mode = np.zeros(len(self), np.int8)
        mode[sg[starts]] = np.where(pre, 1, np.where(post, 2, 0))
        cols = (d[begin], job[begin], t0[begin], lo[begin], t1[stop], hi[stop], first[begin], final, b[stop], after[begin])
        return Runs(*(x.tolist() for x in cols), mode)


def _placed(
    d: np.ndarray,
    b: np.ndarray,
    k: np.ndarray,
    sg: np.ndarray,
    ends: list[float],
    phase: dict[int, float],
    step: float,
    bin_s: float,
) -> tuple[np.ndarray, ...]:
    """Rows sorted by device, bin and value (``sg``: each row's segment) laid end to end from their bin's first grid
    point: each row's bin end, phase, the bin's first and last grid points, whether it starts its bin, where the
    bins start, and each row's first and last sample time."""
    uniq, inv = np.unique(d, return_inverse=True)
    ph = np.array([phase.get(int(x), math.nan) for x in uniq.tolist()], float)[inv]
    end = np.asarray(ends, float)[b]
    i0 = np.floor((end - bin_s - ph) / step + 1e-6) + 1
    i1 = np.floor((end - ph) / step + 1e-6)
    head = np.ones(len(d), bool)  # a bin's first row (its lowest)
    head[1:] = sg[1:] != sg[:-1]
    starts = np.flatnonzero(head)
    at = np.cumsum(head) - 1
    kk = np.where(np.isfinite(k), k, 0.0)  # a NaN of a doubtful bin spoils no other's sums
    cs = np.cumsum(kk)
    p0 = i0 + (cs - kk - (cs - kk)[starts][at])
    return end, ph, i0, i1, head, starts, ph + p0 * step, ph + (p0 + k - 1) * step


def _blocks(doubt: np.ndarray, first_bin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bin (device order; ``first_bin``: a device's first): in the block before the device's first doubtful bin,
    in the block after its last, and whether it starts a block."""
    seen = np.cumsum(doubt)  # doubtful bins so far, over all devices
    base = np.maximum.accumulate(np.where(first_bin, np.append(0, seen[:-1]), 0))
    upto = seen - base  # the device's doubtful bins up to and including this one
    last_bin = np.append(first_bin[1:], True)
    total = np.repeat(upto[last_bin], np.diff(np.append(np.flatnonzero(first_bin), len(doubt))))
    pre, post = upto == 0, (upto == total) & (total > 0) & ~doubt
    return pre, post, first_bin | (post & np.append(True, doubt[:-1]))


__all__ = ["NO_PART", "Part", "Runs", "Table", "first_values", "increase_of"]
