"""Exact request and token counts from Prometheus: counter differences at the window edges, resets handled.

``increase()`` extrapolates each window's first and last samples to its edges, so its windows do not add up to
the counter (off by up to a sample interval's worth per window, and fractional: 1,464,233.7 requests). Here each
window's count is the counter's last sample in it minus its last sample before it (``last_over_time`` at every
edge, one number per series and edge, evaluated by the server), so the windows add up to the counter's own
difference. A window where the series first appears counts from its first sample (``min_over_time``, the first
of a counter that did not reset). A window with a reset (``resets()``) is counted from its raw samples with
PromQL's reset rule (a counter that goes down restarted from 0): only those windows' samples are read. A window
whose first sample is below the edge before it restarted between the two (a restart across the edge, or inside a
gap: ``resets()`` of the window cannot see it) counts from 0. A series missing for some windows (an engine restart, a
scrape gap) adds what it counted meanwhile to its next window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from footprint.fleet.promql import braced

Matrix = Callable[[str, float, float], list[tuple[dict, np.ndarray, np.ndarray]]]
Counted = tuple[dict, np.ndarray, np.ndarray, np.ndarray]  # labels, window index, count, resets in the window


def _key(labels: dict[str, Any]) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _dense(rows: list[tuple[dict, np.ndarray, np.ndarray]], n: int) -> dict[tuple, np.ndarray]:
    out: dict[tuple, np.ndarray] = {}
    for lab, ws, vs in rows:
        a = out.setdefault(_key(lab), np.full(n, np.nan))
        i = ws
        ok = (i >= 0) & (i < n)
        a[i[ok]] = vs[ok]
    return out


def exact_increases(
    client: Any, matrix: Matrix, metric: str, matchers: str, start: float, end: float, window_s: float, rng: str
) -> list[Counted]:
    """(labels, window index, count, resets) per series of ``metric{matchers}``: counter differences at the window
    edges; resets counts a restart across the window's first edge too (``resets()`` of the window does not)."""
    n = int(round((end - start) / window_s))
    sel = f"{metric}{braced(matchers)}[{rng}]"
    # the edge before the first window too: evaluated from start - window, so that edge i ends window i - 1
    rows = matrix(f"last_over_time({sel})", start - window_s, end)
    labels = {_key(lab): {k: v for k, v in lab.items() if k != "__name__"} for lab, _, _ in rows}
    edges = _dense(rows, n + 1)
    firsts = _dense(matrix(f"min_over_time({sel})", start, end), n)
    resets = _dense(matrix(f"resets({sel})", start, end), n)
    out = []
    for key, e in edges.items():
        lab = labels[key]
        first, rst = firsts.get(key, np.full(n, np.nan)), np.nan_to_num(resets.get(key, np.zeros(n)))
        prev = _ffill(e)[:-1]  # the last edge value before each window (NaN: the series had not appeared yet)
        last = e[1:]
        start_at = np.where(np.isnan(first), last, first)
        # a counter whose first sample in the window is below the last one before it restarted across the edge (or
        # inside a gap before the window): resets() sees only the window's samples, so the rule is applied here
        edge_reset = ~np.isnan(prev) & (start_at < prev) & (rst == 0)
        inc = np.where(np.isnan(prev), last - start_at, np.where(edge_reset, last, last - prev))
        ws = np.nonzero(~np.isnan(last))[0]
        for w in ws[rst[ws] > 0].tolist():  # the rare windows with a reset: from their raw samples
            inc[w] = _with_resets(client, metric, lab, start + (w + 1) * window_s, rng, prev[w])
        if len(ws):
            out.append((lab, ws.astype(np.int64), inc[ws], rst[ws] + edge_reset[ws]))
    return out


def _ffill(a: np.ndarray) -> np.ndarray:
    """Each NaN replaced by the last number before it (leading NaNs stay: they point at index 0, a NaN)."""
    idx = np.maximum.accumulate(np.where(~np.isnan(a), np.arange(len(a)), 0))
    return a[idx]


def _with_resets(client: Any, metric: str, labels: dict[str, str], at: float, rng: str, prev: float) -> float:
    """One window's count from its raw samples (it holds a reset): PromQL's reset rule, from the edge before it."""
    exact = ",".join(f"{k}={quote(v)}" for k, v in sorted(labels.items()))
    data = client.query(f"{metric}{{{exact}}}[{rng}]", at)
    vals = [float(v) for s in data.get("result", []) for _, v in s.get("values", [])]
    if not vals:
        return 0.0
    v = np.asarray(([] if np.isnan(prev) else [prev]) + vals)
    d = np.diff(v)
    return float(np.where(d < 0, v[1:], d).sum())


def quote(v: Any) -> str:
    """A label value as a PromQL string literal (escaped: a value cannot end the selector it is put in)."""
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
