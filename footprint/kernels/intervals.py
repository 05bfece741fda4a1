"""Interval arithmetic of a timeline: union, length, difference, and busy time up to given instants.

Intervals are (start, end) pairs in one unit (microseconds in traces, seconds in energy attribution);
"merged" means sorted and non-overlapping, as `union` returns them. Imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def union(intervals: Iterable[tuple[float, float]], presorted: bool = False) -> list[tuple[float, float]]:
    """Merged, sorted intervals (`presorted`: the input is already sorted by start)."""
    out: list[tuple[float, float]] = []
    cs = ce = None
    for st, en in intervals if presorted else sorted(intervals):
        if ce is not None and st <= ce:
            if en > ce:
                ce = en
        else:
            if ce is not None:
                out.append((cs, ce))
            cs, ce = st, en
    if ce is not None:
        out.append((cs, ce))
    return out


def length(merged: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in merged)


def subtract(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Parts of merged intervals `b` not covered by merged intervals `a`."""
    out = []
    j = 0
    for s, e in b:
        cur = s
        while j < len(a) and a[j][1] <= s:
            j += 1
        k = j
        while k < len(a) and a[k][0] < e:
            if a[k][0] > cur:
                out.append((cur, min(e, a[k][0])))
            cur = max(cur, a[k][1])
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def cum_busy(starts: Any, ends: Any, cum: Any, t: Any) -> Any:
    """Busy time of merged intervals in (-inf, t], vectorised over t."""
    import numpy as np

    k = np.searchsorted(ends, t, side="right")
    full = cum[k]
    nxt = np.minimum(k, len(starts) - 1)
    partial = np.where((k < len(starts)) & (starts[nxt] < t), t - starts[nxt], 0.0)
    return full + partial
