"""Serving telemetry from Prometheus (Thanos, Mimir): every number is aggregated by the server.

Each quantity is one range query evaluated once per window (``step`` = the window), so the server
returns one number per GPU, pod or host and window, never raw samples: ``increase()`` of the DCGM
energy counter and of the engines' counters, ``count_over_time()`` (samples seen: gaps),
``resets()`` (counter resets), ``avg_over_time()`` of the power gauge for GPUs without the counter.
A GPU's repeated series (one per MIG instance, one per pod sharing it) are reduced with ``max by``
on the server: counted once (NVIDIA/dcgm-exporter#317). Long ranges are cut into queries of at most
`MAX_POINTS` steps (Prometheus refuses more than 11,000 points per series).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from footprint.errors import FootprintError
from footprint.fleet.prometheus import PrometheusClient
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

MAX_POINTS = 10_000
GPU_BY = f"{HOST},{GPU},{UUID},{GPU_MODEL}"


def _sel(selector: str, *extra: str) -> str:
    parts = [p for p in (selector.strip().strip("{}"), *extra) if p]
    return "{" + ",".join(parts) + "}" if parts else ""


class Queries:
    """The PromQL of one import: also what the benchmark times alone (the server's share, the lower bound)."""

    def __init__(self, window_s: float, selector: str = "") -> None:
        self.w = f"{int(window_s)}s"
        self.sel = selector

    def gpu(self) -> dict[str, str]:
        s, w, pods = _sel(self.sel), self.w, _sel(self.sel, 'pod!=""')
        return {
            "energy_mj": f"max by ({GPU_BY}) (increase({ENERGY}{s}[{w}]))",
            "samples": f"max by ({GPU_BY}) (count_over_time({ENERGY}{s}[{w}]))",
            "resets": f"max by ({GPU_BY}) (resets({ENERGY}{s}[{w}]))",
            "placement": f"count by ({HOST},{GPU},{MIG},namespace,pod) (count_over_time({ENERGY}{pods}[{w}]))",
        }

    def power(self) -> dict[str, str]:
        s, w = _sel(self.sel), self.w
        return {
            "power_w": f"max by ({GPU_BY}) (avg_over_time({POWER}{s}[{w}]))",
            "samples": f"max by ({GPU_BY}) (count_over_time({POWER}{s}[{w}]))",
        }

    def host(self, metric: str) -> str:
        return f"sum by (instance) (increase({metric}{_sel(self.sel)}[{self.w}]))"

    def engine(self, e: eng.Engine) -> dict[str, str]:
        by = ",".join(["namespace", "pod", "instance", *([e.model_label] if e.model_label else [])])
        out = {}
        for f in eng.FIELDS:
            m = e.metric(f)
            if m:
                out[f] = f"sum by ({by}) (increase({m[0]}{_sel(self.sel, m[1])}[{self.w}]))"
        out["resets"] = f"sum by ({by}) (resets({e.metric('tokens_out')[0]}{_sel(self.sel)}[{self.w}]))"  # type: ignore[index]
        return out

    def all(self, engines: list[eng.Engine], power: bool, hosts: list[str]) -> list[str]:
        q = list(self.gpu().values()) + (list(self.power().values()) if power else [])
        q += [self.host(m) for m in hosts]
        for e in engines:
            q += list(self.engine(e).values())
        return q


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
        for s in data.get("result", []):
            labels = s.get("metric", {})
            key = tuple(sorted(labels.items()))
            _, ws, vs = acc.setdefault(key, (labels, [], []))
            for t, v in s.get("values", []):
                ws.append(int(round((float(t) - start) / window_s)) - 1)
                vs.append(float(v))
        first = last + 1
    return [(lab, np.asarray(ws, np.int64), np.asarray(vs, float)) for lab, ws, vs in acc.values()]


def _gpu_key(lab: dict[str, str]) -> tuple[str, str, str, str]:
    return lab.get(HOST, ""), lab.get(GPU, ""), lab.get(UUID, ""), lab.get(GPU_MODEL, "")


def read(client: PrometheusClient, start: float, end: float, window_s: float, scrape_s: float, selector: str = "") -> Telemetry:
    """One import's telemetry: found metric names decide the engines; every number is a server-side aggregate."""
    names = set(client.metric_names())
    if ENERGY not in names and POWER not in names:
        raise FootprintError(f"no DCGM series ({ENERGY} or {POWER}) on this server", client.base, "--url")
    found = eng.detect(names, client.base)
    q = Queries(window_s, selector)
    rows: dict[tuple, dict[int, list[Any]]] = {}
    if ENERGY in names:
        g = q.gpu()
        for kind in ("energy_mj", "samples", "resets"):
            for lab, ws, vs in matrix(client, g[kind], start, end, window_s):
                per = rows.setdefault(_gpu_key(lab), {})
                for w, v in zip(ws.tolist(), vs.tolist(), strict=True):
                    per.setdefault(w, [np.nan, 0, 0, "dcgm_energy_counter"])[("energy_mj", "samples", "resets").index(kind)] = v
    if POWER in names:
        p = q.power()
        pw = {
            _gpu_key(lab): dict(zip(ws.tolist(), vs.tolist(), strict=True))
            for lab, ws, vs in matrix(client, p["power_w"], start, end, window_s)
        }
        pc = {
            _gpu_key(lab): dict(zip(ws.tolist(), vs.tolist(), strict=True))
            for lab, ws, vs in matrix(client, p["samples"], start, end, window_s)
        }
        for key, per_w in pw.items():
            if key in rows:
                continue
            rows[key] = {
                w: [v * min(window_s, pc[key].get(w, 0) * scrape_s) * 1000.0, pc[key].get(w, 0), 0, "dcgm_power_gauge"]
                for w, v in per_w.items()
            }
    gpus = pd.DataFrame(
        [
            (w, k[0], k[1], k[2], k[3], r[0] / 1000.0, r[3], int(r[1]), int(r[2]))
            for k, per in rows.items()
            for w, r in per.items()
            if r[0] == r[0]
        ],
        columns=GPU_COLS,
    )
    place = []
    if ENERGY in names:
        for lab, ws, _ in matrix(client, q.gpu()["placement"], start, end, window_s):
            place += [
                (w, lab.get(HOST, ""), lab.get(GPU, ""), lab.get(MIG, ""), lab.get("namespace", ""), lab.get("pod", ""))
                for w in ws.tolist()
            ]
    hosts = []
    for m in (m for m in HOST_COUNTERS if m in names):
        for lab, ws, vs in matrix(client, q.host(m), start, end, window_s):
            hosts += [(w, short_host(lab.get("instance", "")), v) for w, v in zip(ws.tolist(), vs.tolist(), strict=True)]
    hosts_df = pd.DataFrame(hosts, columns=HOST_COLS).groupby(["window", "host"], as_index=False)["energy_j"].sum()
    return Telemetry(
        start,
        end,
        window_s,
        scrape_s,
        gpus,
        pd.DataFrame(place, columns=PLACE_COLS),
        _engines(client, q, found, start, end, window_s),
        hosts_df,
        client.base,
    )


def _engines(
    client: PrometheusClient, q: Queries, found: list[eng.Engine], start: float, end: float, window_s: float
) -> pd.DataFrame:
    out: dict[tuple, dict[str, float]] = {}
    for e in found:
        for f, expr in q.engine(e).items():
            for lab, ws, vs in matrix(client, expr, start, end, window_s):
                model, flag = model_of(e, lab)
                base = (e.name, lab.get("namespace", ""), lab.get("pod", ""), lab.get("instance", ""), model, flag)
                for w, v in zip(ws.tolist(), vs.tolist(), strict=True):
                    out.setdefault((w, *base), {})[f] = v
    rows = [(*k, *(d.get(f, np.nan) for f in eng.FIELDS), int(d.get("resets", 0))) for k, d in out.items()]
    return pd.DataFrame(rows, columns=ENGINE_COLS)
