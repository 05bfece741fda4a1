"""Serving telemetry from Prometheus (Thanos, Mimir): every number is aggregated by the server.

Each quantity is one range query evaluated once per window (``step`` = the window), so the server
returns one number per GPU, pod or host and window, never raw samples: ``increase()`` of the DCGM
energy counter, the engines' counters at every window edge (`footprint.serving.counts`: exact counts, raw
samples read only in a window where a counter reset), ``count_over_time()`` (samples seen: gaps),
``resets()`` (counter resets), ``avg_over_time()`` of the power gauge for GPUs without the counter.
A GPU's repeated series (one per MIG instance, one per pod sharing it) are reduced with ``max by``
on the server: counted once (NVIDIA/dcgm-exporter#317). The expressions are the fleet import's
(`footprint.fleet.promql.window_expr`): one builder of window queries for both. Long ranges are cut into queries of at most
`MAX_POINTS` steps, which also bounds the memory an answer takes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from footprint.errors import FootprintError
from footprint.fleet.prometheus import PrometheusClient
from footprint.fleet.promql import braced, range_of, selector_matchers, window_expr
from footprint.serving import engines as eng
from footprint.serving.counts import exact_increases, quote
from footprint.serving.telemetry import (
    ENERGY,
    ENGINE_COLS,
    GPU,
    GPU_COLS,
    GPU_MODEL,
    HOST,
    HOST_COLS,
    HOST_COUNTERS,
    KUBE_POD_LABELS,
    LAYOUTS,
    MIG,
    PLACE_COLS,
    POWER,
    SET_COLS,
    SET_LABELS,
    UUID,
    Telemetry,
    model_of,
    pod_set,
    short_host,
)

MAX_POINTS = 2_000  # steps per request: bounded answers (one week of 5-minute windows); Prometheus allows 11,000
GPU_BY = (HOST, GPU, UUID, GPU_MODEL)


class Queries:
    """The PromQL of one import (`footprint.fleet.promql.window_expr`, each meter once): also what the benchmark
    times alone (the server's share, the lower bound)."""

    def __init__(self, window_s: float, selector: str = "", layouts: tuple[tuple[str, str], ...] = LAYOUTS) -> None:
        self.w = range_of(window_s)
        self.sel = selector_matchers(selector)  # checked: a selector cannot close the braces it is put in
        self.layouts = layouts

    def _of(self, metric: str, *extra: str) -> str:
        return f"{metric}{braced(self.sel, *extra)}[{self.w}]"

    def gpu(self) -> dict[str, str]:
        e = self._of(ENERGY)
        return {
            "energy_mj": window_expr("increase", e, GPU_BY),
            "samples": window_expr("count", e, GPU_BY),
            "resets": window_expr("resets", e, GPU_BY),
        } | self.placement()

    def placement(self) -> dict[str, str]:
        """Which pods each GPU carried, under every pod-label layout (`footprint.serving.grouping`)."""
        return {
            f"placement:{pod}": window_expr("count", self._of(ENERGY, f'{pod}!=""'), (HOST, GPU, MIG, ns, pod), "count")
            for ns, pod in self.layouts
        }

    def power(self) -> dict[str, str]:
        p = self._of(POWER)
        return {"power_w": window_expr("avg", p, GPU_BY), "samples": window_expr("count", p, GPU_BY)}

    def host(self, metric: str) -> str:
        return window_expr("increase", self._of(metric), ("instance",), "sum")

    def engine(self, e: eng.Engine) -> dict[str, str]:
        """Each counter at the window edges, its first sample and its resets, per series (`footprint.serving.counts`)."""
        out = {}
        for f in eng.FIELDS:
            m = e.metric(f)
            if m:
                sel = self._of(m[0], m[1])
                out |= {f"{f}:{fn}": f"{fn}({sel})" for fn in ("last_over_time", "min_over_time", "resets")}
        return out

    def all(self, engines: list[eng.Engine], power: bool, hosts: list[str]) -> list[str]:
        q = list(self.gpu().values()) + (list(self.power().values()) if power else [])
        q += [self.host(m) for m in hosts]
        for e in engines:
            q += list(self.engine(e).values())
        return q


MAX_SAMPLE = 1e18  # a counter or gauge sample above this (1e300) is damage: 1e18 J is 30 GW-years


def _points(values: Any) -> np.ndarray:
    """Prometheus' ``[[time, "value"], ...]`` as an (n, 2) float array of the samples that are readings: a sample of
    null, text, NaN, an infinity or 1e300 is left out (never a traceback or a 300-digit energy)."""
    out = []
    for pt in values if isinstance(values, list) else []:
        try:
            t, v = float(pt[0]), float(pt[1])
        except (TypeError, ValueError, IndexError, KeyError, OverflowError):
            continue
        if math.isfinite(t) and math.isfinite(v) and abs(v) <= MAX_SAMPLE:
            out.append((t, v))
    return np.asarray(out, dtype=float).reshape(-1, 2)


def matrix(
    client: PrometheusClient, expr: str, start: float, end: float, window_s: float
) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """(labels, window index, value) per series of ``expr`` evaluated at every window's end."""
    n = int(round((end - start) / window_s))
    acc: dict[tuple, tuple[dict, list, list]] = {}
    first = 1
    while first <= n:
        last = min(n, first + MAX_POINTS - 1)
        data = client.query_range(expr, start + first * window_s, start + last * window_s, window_s)
        for s in (data.get("result") or []) if isinstance(data, dict) else []:
            labels = s.get("metric", {}) if isinstance(s, dict) else {}
            vals = _points(s.get("values") if isinstance(s, dict) else None)
            _, ws, vs = acc.setdefault(tuple(sorted(labels.items())), (labels, [], []))
            ws.append(np.rint((vals[:, 0] - start) / window_s).astype(np.int64) - 1)
            vs.append(vals[:, 1])
        first = last + 1
    return [(lab, np.concatenate(ws), np.concatenate(vs)) for lab, ws, vs in acc.values()]


def frame(rows: list[tuple[dict, np.ndarray, np.ndarray]], labels: dict[str, str], value: str) -> pd.DataFrame:
    """One row per series and window: the ``labels`` (label -> column) and the value."""
    if not rows:
        return pd.DataFrame(columns=["window", *labels.values(), value])
    n = [len(ws) for _, ws, _ in rows]
    cols: dict[str, Any] = {"window": np.concatenate([ws for _, ws, _ in rows])}
    for label, col in labels.items():  # object columns: every row points at its series' one string (no copy per row)
        cols[col] = pd.Series(np.repeat(np.array([lab.get(label, "") for lab, _, _ in rows], dtype=object), n), dtype=object)
    cols[value] = np.concatenate([vs for _, _, vs in rows])
    return pd.DataFrame(cols)


GPU_LABELS = {HOST: "host", GPU: "gpu", UUID: "uuid", GPU_MODEL: "gpu_model"}
GKEYS = ["window", "host", "gpu", "uuid", "gpu_model"]


def read(
    client: PrometheusClient,
    start: float,
    end: float,
    window_s: float,
    scrape_s: float | None,
    selector: str = "",
    layouts: tuple[tuple[str, str], ...] = LAYOUTS,
) -> Telemetry:
    """One import's telemetry: found metric names decide the engines; every number is a server-side aggregate.
    ``scrape_s`` None: read from the data (the series' sample spacing)."""
    q = Queries(window_s, selector, layouts)  # first: a bad --selector is refused before any request
    names = set(client.metric_names())
    if ENERGY not in names and POWER not in names:
        raise FootprintError(f"no DCGM series ({ENERGY} or {POWER}) on this server", client.base, "--url")
    found = eng.detect(names, client.base)
    parts = []
    notes: list[str] = []
    place = pd.DataFrame(columns=PLACE_COLS)
    if ENERGY in names:
        gq = {k: e for k, e in q.gpu().items() if not k.startswith("placement")}
        g = {k: frame(matrix(client, e, start, end, window_s), GPU_LABELS, k) for k, e in gq.items()}
        e = g["energy_mj"].merge(g["samples"], on=GKEYS, how="left").merge(g["resets"], on=GKEYS, how="left")
        e["energy_j"] = e["energy_mj"] / 1000.0
        e["method"] = "dcgm_energy_counter"
        parts.append(e)
        place = pd.concat(
            [
                frame(matrix(client, expr, start, end, window_s), place_labels(ns, pod), "n").assign(layout=pod)[PLACE_COLS]
                for (ns, pod), expr in zip(layouts, q.placement().values(), strict=True)
            ],
            ignore_index=True,
        )
    if POWER in names:
        pw = {k: frame(matrix(client, e, start, end, window_s), GPU_LABELS, k) for k, e in q.power().items()}
        p = pw["power_w"].merge(pw["samples"], on=GKEYS, how="left")
        counted = set(parts[0]["uuid"]) if parts else set()
        p = p[~p["uuid"].isin(counted)]
        parts.append(p)
    if scrape_s is None:
        scrape_s = spacing(client, q, parts[0], ENERGY if ENERGY in names else POWER, start, window_s)
        notes.append(f"scrape interval {scrape_s:g} s, read from the data (its sample spacing; --scrape-interval sets it)")
    if POWER in names:
        p = parts[-1]
        p["energy_j"] = p["power_w"] * np.minimum(window_s, p["samples"].fillna(0) * scrape_s)
        p["method"], p["resets"] = "dcgm_power_gauge", 0
    gpus = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=GPU_COLS)
    gpus = gpus.dropna(subset=["energy_j"]).fillna({"samples": 0, "resets": 0}).astype({"samples": "int64", "resets": "int64"})
    hosts = [
        frame(matrix(client, q.host(m), start, end, window_s), {"instance": "host"}, "energy_j")
        for m in HOST_COUNTERS
        if m in names
    ]
    hosts_df = pd.concat(hosts, ignore_index=True) if hosts else pd.DataFrame(columns=HOST_COLS)
    hosts_df["host"] = hosts_df["host"].map(short_host)
    hosts_df = hosts_df.groupby(["window", "host"], as_index=False)["energy_j"].sum()
    engines_df = _engines(client, q, found, start, end, window_s)
    tel = Telemetry(
        start, end, window_s, scrape_s, gpus[GPU_COLS].reset_index(drop=True), place, engines_df, hosts_df, client.base, notes
    )
    if KUBE_POD_LABELS in names:
        tel.pod_sets = pod_sets(client, start, end)
    return tel


def place_labels(ns: str, pod: str) -> dict[str, str]:
    return {HOST: "host", GPU: "gpu", MIG: "mig", ns: "namespace", pod: "pod"}


def spacing(client: PrometheusClient, q: Queries, gpus: pd.DataFrame, metric: str, start: float, window_s: float) -> float:
    """The scrape interval the data shows: the median spacing of the raw samples of one window of a few GPUs (the
    window where each has most samples; at most 8 series read, a window each)."""
    if not len(gpus):
        raise FootprintError("no GPU energy reading in the window (DCGM counter or power gauge)", client.base)
    best = gpus.sort_values("samples", ascending=False).drop_duplicates(["host", "gpu"]).head(8)
    steps = []
    for host, gpu, w in zip(best["host"], best["gpu"], best["window"], strict=True):
        sel = f"{metric}{braced(q.sel, f'{HOST}={quote(host)}', f'{GPU}={quote(gpu)}')}[{q.w}]"
        data = client.query(sel, start + (int(w) + 1) * window_s)
        for series in data.get("result", []):
            t = np.unique(np.asarray([float(x[0]) for x in series.get("values", [])]))
            if len(t) > 1:
                steps.append(float(np.median(np.diff(t))))
    if not steps:
        raise FootprintError("too few GPU samples to read the scrape interval from: give it", key="--scrape-interval")
    return round(float(np.median(steps)), 3)


def pod_sets(client: PrometheusClient, start: float, end: float) -> pd.DataFrame:
    """Pods of one deployment from kube-state-metrics' ``kube_pod_labels`` (the series index only: no samples)."""
    rows = set()
    for name, _ in SET_LABELS:
        for lab in client.series(f'{KUBE_POD_LABELS}{{{name}!=""}}', start, end):
            if (s := pod_set(lab)) is not None:
                rows.add(s)
    return pd.DataFrame(sorted(rows), columns=SET_COLS)


def _engines(
    client: PrometheusClient, q: Queries, found: list[eng.Engine], start: float, end: float, window_s: float
) -> pd.DataFrame:
    keys = ["window", "engine", "namespace", "pod", "instance", "model", "model_flag"]
    labels = {"namespace": "namespace", "pod": "pod", "instance": "instance", "__model": "model", "__flag": "model_flag"}
    out = []

    def mat(expr: str, a: float, b: float) -> list[tuple[dict, np.ndarray, np.ndarray]]:
        return matrix(client, expr, a, b, window_s)

    for e in found:
        merged = None
        resets = None
        for f in eng.FIELDS:
            m = e.metric(f)
            if not m:
                continue
            rows = exact_increases(client, mat, m[0], braced(q.sel, m[1]).strip("{}"), start, end, window_s, q.w)
            ids = [lab | dict(zip(("__model", "__flag"), model_of(e, lab), strict=True)) for lab, _, _, _ in rows]
            named = [(lab, ws, vs) for lab, (_, ws, vs, _) in zip(ids, rows, strict=True)]
            fr = frame(named, labels, f).assign(engine=e.name)
            fr = fr.groupby(keys, as_index=False, dropna=False)[f].sum(min_count=1)
            if f == "tokens_out":  # one restart resets every counter: counted once, with those across a window edge
                rs = [(lab, ws, rst) for lab, (_, ws, _, rst) in zip(ids, rows, strict=True)]
                resets = frame(rs, labels, "resets").assign(engine=e.name).groupby(keys, as_index=False)["resets"].sum()
            if len(fr):  # an empty frame's keys have no type: pandas cannot merge on them (ArrowInvalid)
                merged = fr if merged is None else merged.merge(fr, on=keys, how="outer")
        if merged is not None and len(merged):
            if resets is not None and len(resets):
                merged = merged.merge(resets, on=keys, how="left")
            out.append(merged)
    if not out:
        return pd.DataFrame(columns=ENGINE_COLS)
    df = pd.concat(out, ignore_index=True)
    for c in ENGINE_COLS:
        if c not in df:
            df[c] = np.nan
    df["resets"] = df["resets"].fillna(0).astype("int64")
    return df[ENGINE_COLS]
