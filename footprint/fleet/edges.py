"""Where a job known from its label alone starts and stops inside a scrape interval: the edges of every span of one
GPU's curve at once, in arrays (a 4,096-GPU month has ~630,000 such jobs, two edges each: placed one at a time in
Python they took ~9 s of the import's serial end).

An edge is placed where the GPU's power stepped from the power before it (the series before the label) to the job's
mean power, so that the interval holds the energy the counter read; where the two powers are within 20 % of each
other (a job following one alike), or the step would fall outside the interval, no edge is placed and the job's edge
stays half a scrape out. Used by `aggregate.label_edges`; imports numpy only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Edges(NamedTuple):
    """Per span: the start and end times (placed, or half a scrape out), and the knots placed."""

    start: np.ndarray  # the job's start on this GPU: the placed edge, or the first labelled sample less half a scrape
    end: np.ndarray
    start_ok: np.ndarray  # bool: an edge was placed (a knot at (start, start_e))
    end_ok: np.ndarray
    start_e: np.ndarray  # the cumulative energy at the placed edge
    end_e: np.ndarray


def curve_edges(t: np.ndarray, e: np.ndarray, a: np.ndarray, b: np.ndarray, scrape_s: float) -> Edges:
    """The edges of the spans [a, b] (first and last labelled samples, knots of the curve ``t``, ``e``: times and
    cumulative energy). A start is placed in the interval ending at ``a`` when the sample before it is at most 1.5
    scrapes earlier, with the power of the interval before that; an end likewise after ``b``; a span shorter than a
    scrape has none."""
    n = len(t)
    start, end = a - 0.5 * scrape_s, b + 0.5 * scrape_s
    none = np.zeros(len(a), bool)
    if n < 3:
        return Edges(start, end, none, none.copy(), start.copy(), end.copy())
    with np.errstate(all="ignore"):
        long = ~(b - a < scrape_s)
        i = np.searchsorted(t, a)
        ii = np.clip(i, 2, n - 1)
        ok = (i >= 2) & (i < n) & (t[ii] == a) & ~(a - t[ii - 1] > 1.5 * scrape_s) & long
        job = (np.interp(b, t, e) - e[ii]) / (b - a)
        before = (e[ii - 1] - e[ii - 2]) / np.maximum(t[ii - 1] - t[ii - 2], 1e-9)
        s_ok, s_x, s_e = _place(t[ii - 1], a, e[ii - 1], e[ii], before, job)
        k = np.searchsorted(t, b)
        kk = np.clip(k, 0, n - 3)
        ok_end = (k + 2 < n) & (t[kk] == b) & ~(t[kk + 1] - b > 1.5 * scrape_s) & long
        job = (e[kk] - np.interp(a, t, e)) / (b - a)
        after = (e[kk + 2] - e[kk + 1]) / np.maximum(t[kk + 2] - t[kk + 1], 1e-9)
        e_ok, e_x, e_e = _place(b, t[kk + 1], e[kk], e[kk + 1], job, after)
    s_ok &= ok
    e_ok &= ok_end
    return Edges(np.where(s_ok, s_x, start), np.where(e_ok, e_x, end), s_ok, e_ok, s_e, e_e)


def _place(
    t0: np.ndarray, t1: np.ndarray, e0: np.ndarray, e1: np.ndarray, p0: np.ndarray, p1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where in (t0, t1) the power stepped from p0 to p1 for the interval to hold e1 - e0, and the energy there:
    (placed, time, energy); not placed where the powers are within 20 % or the time falls outside."""
    x = (p1 * t1 - p0 * t0 - (e1 - e0)) / (p1 - p0)
    ok = ~(np.abs(p1 - p0) < 0.2 * np.maximum(np.maximum(p0, p1), 1e-9)) & (t0 < x) & (x < t1)
    return ok, x, np.minimum(np.maximum(e0 + p0 * (x - t0), e0), e1)


__all__ = ["Edges", "curve_edges"]
