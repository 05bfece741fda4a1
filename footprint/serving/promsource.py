"""Serving telemetry from Prometheus (Thanos, Mimir): every number is aggregated by the server.

Each quantity is one range query evaluated once per window (``step`` = the window), so the server
returns one number per GPU, pod or host and window, never raw samples: ``increase()`` of the DCGM
energy counter and of the engines' counters, ``count_over_time()`` (samples seen: gaps),
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
from footprint.serving.telemetry import (
    ENERGY,
    ENGINE_COLS,
    GPU,
    GPU_COLS,
    GPU_MODEL,
    HOST,
    HOST_COLS,
    HOST_COUNTERS,
    MIG,
    PLACE_COLS,
    POWER,
    UUID,
    Telemetry,
    model_of,
    short_host,
)

MAX_POINTS = 2_000  # steps per request: bounded answers (one week of 5-minute windows); Prometheus allows 11,000
GPU_BY = (HOST, GPU, UUID, GPU_MODEL)


class Queries:
    """The PromQL of one import (`footprint.fleet.promql.window_expr`, each meter once): also what the benchmark
    times alone (the server's share, the lower bound)."""

    def __init__(self, window_s: float, selector: str = "") -> None:
        self.w = range_of(window_s)
        self.sel = selector_matchers(selector)  # checked: a selector cannot close the braces it is put in

    def _of(self, metric: str, *extra: str) -> str:
        return f"{metric}{braced(self.sel, *extra)}[{self.w}]"

    def gpu(self) -> dict[str, str]:
        e = self._of(ENERGY)
        return {
            "energy_mj": window_expr("increase", e, GPU_BY),
            "samples": window_expr("count", e, GPU_BY),
            "resets": window_expr("resets", e, GPU_BY),
            "placement": window_expr("count", self._of(ENERGY, 'pod!=""'), (HOST, GPU, MIG, "namespace", "pod"), "count"),
        }

    def power(self) -> dict[str, str]:
        p = self._of(POWER)
        return {"power_w": window_expr("avg", p, GPU_BY), "samples": window_expr("count", p, GPU_BY)}

    def host(self, metric: str) -> str:
        return window_expr("increase", self._of(metric), ("instance",), "sum")

    def engine(self, e: eng.Engine) -> dict[str, str]:
        by = ("namespace", "pod", "instance", *([e.model_label] if e.model_label else []))
        out = {}
        for f in eng.FIELDS:
            m = e.metric(f)
            if m:
                out[f] = window_expr("increase", self._of(m[0], m[1]), by, "sum")
        out["resets"] = window_expr("resets", self._of(e.metric("tokens_out")[0]), by, "sum")  # type: ignore[index]
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


def read(client: PrometheusClient, start: float, end: float, window_s: float, scrape_s: float, selector: str = "") -> Telemetry:
    """One import's telemetry: found metric names decide the engines; every number is a server-side aggregate."""
    q = Queries(window_s, selector)  # first: a bad --selector is refused before any request
    names = set(client.metric_names())
    if ENERGY not in names and POWER not in names:
        raise FootprintError(f"no DCGM series ({ENERGY} or {POWER}) on this server", client.base, "--url")
    found = eng.detect(names, client.base)
    parts = []
    place = pd.DataFrame(columns=PLACE_COLS)
    if ENERGY in names:
        g = {k: frame(matrix(client, e, start, end, window_s), GPU_LABELS, k) for k, e in q.gpu().items() if k != "placement"}
        e = g["energy_mj"].merge(g["samples"], on=GKEYS, how="left").merge(g["resets"], on=GKEYS, how="left")
        e["energy_j"] = e["energy_mj"] / 1000.0
        e["method"] = "dcgm_energy_counter"
        parts.append(e)
        pl = {HOST: "host", GPU: "gpu", MIG: "mig", "namespace": "namespace", "pod": "pod"}
        place = frame(matrix(client, q.gpu()["placement"], start, end, window_s), pl, "n")[PLACE_COLS]
    if POWER in names:
        pw = {k: frame(matrix(client, e, start, end, window_s), GPU_LABELS, k) for k, e in q.power().items()}
        p = pw["power_w"].merge(pw["samples"], on=GKEYS, how="left")
        counted = set(parts[0]["uuid"]) if parts else set()
        p = p[~p["uuid"].isin(counted)]
        p["energy_j"] = p["power_w"] * np.minimum(window_s, p["samples"].fillna(0) * scrape_s)
        p["method"], p["resets"] = "dcgm_power_gauge", 0
        parts.append(p)
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
    return Telemetry(
        start, end, window_s, scrape_s, gpus[GPU_COLS].reset_index(drop=True), place, engines_df, hosts_df, client.base
    )


def _engines(
    client: PrometheusClient, q: Queries, found: list[eng.Engine], start: float, end: float, window_s: float
) -> pd.DataFrame:
    keys = ["window", "engine", "namespace", "pod", "instance", "model", "model_flag"]
    out = []
    for e in found:
        merged = None
        for f, expr in q.engine(e).items():
            rows = matrix(client, expr, start, end, window_s)
            named = [(lab | dict(zip(("__model", "__flag"), model_of(e, lab), strict=True)), ws, vs) for lab, ws, vs in rows]
            labels = {"namespace": "namespace", "pod": "pod", "instance": "instance", "__model": "model", "__flag": "model_flag"}
            fr = frame(named, labels, f).assign(engine=e.name)
            fr = fr.groupby(keys, as_index=False, dropna=False)[f].sum(min_count=1)
            if len(fr):  # an empty frame's keys have no type: pandas cannot merge on them (ArrowInvalid)
                merged = fr if merged is None else merged.merge(fr, on=keys, how="outer")
        if merged is not None and len(merged):
            out.append(merged)
    if not out:
        return pd.DataFrame(columns=ENGINE_COLS)
    df = pd.concat(out, ignore_index=True)
    for c in ENGINE_COLS:
        if c not in df:
            df[c] = np.nan
    df["resets"] = df["resets"].fillna(0).astype("int64")
    return df[ENGINE_COLS]
