"""Serving telemetry as windows: what every source (Prometheus, scrape files, the live watcher) reduces to.

Per window ``(t - window_s, t]``: each physical GPU's energy (DCGM counter increase, or the power gauge's
mean x the window where the GPU has no counter), which Kubernetes pods (or MIG instances) each GPU
carried, each engine series' token, request and busy-time increases, each host's CPU+RAM energy, and
the counters' health (samples seen, resets). Repeated series of one GPU (dcgm-exporter writes the
whole-GPU counter once per MIG instance and once per pod sharing the GPU, NVIDIA/dcgm-exporter#317)
are reduced by ``max``, never summed: a GPU is counted once.

The local reduction (`from_samples`) follows PromQL ``increase()``'s reset rule (a counter that goes
down restarted from 0) without its extrapolation; an interval longer than ``max_gap_s`` (the exporter
was down) is not counted in any window: it is a gap, recorded in the health table, as Prometheus
would not see it either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from footprint.serving.engines import FIELDS

#: dcgm-exporter's labels (defaults as NVIDIA ships them) and the Kubernetes pod mapping's.
HOST, GPU, UUID, GPU_MODEL, MIG = "Hostname", "gpu", "UUID", "modelName", "GPU_I_ID"
POD_LABELS = ("namespace", "pod", "container")
#: (namespace label, pod label) of the GPU's pod on dcgm-exporter's series: as the exporter writes them (scraped with
#: ``honor_labels``), or renamed ``exported_*`` by Prometheus when it is scraped through a Service without it (``pod``
#: then names the exporter itself). Both are read; the attribution keeps the one the engines' pods match.
LAYOUTS = (("namespace", "pod"), ("exported_namespace", "exported_pod"))
#: kube-state-metrics' ``kube_pod_labels``: the pod labels that make several pods one deployment (a LeaderWorkerSet's
#: group: ``leaderworkerset.sigs.k8s.io/name`` and ``/group-index``; a Ray cluster: ``ray.io/cluster``), as exposed
KUBE_POD_LABELS = "kube_pod_labels"
SET_LABELS = (
    ("label_leaderworkerset_sigs_k8s_io_name", "label_leaderworkerset_sigs_k8s_io_group_index"),
    ("label_ray_io_cluster", ""),
)
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since the driver loaded
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
HOST_COUNTERS = ("node_rapl_package_joules_total", "node_rapl_dram_joules_total")

GPU_COLS = ["window", "host", "gpu", "uuid", "gpu_model", "energy_j", "method", "samples", "resets"]
PLACE_COLS = ["window", "host", "gpu", "mig", "namespace", "pod", "layout"]  # layout: the pod label it came from
SET_COLS = ["namespace", "pod", "set"]
ENGINE_COLS = ["window", "engine", "namespace", "pod", "instance", "model", "model_flag", *FIELDS, "resets"]
HOST_COLS = ["window", "host", "energy_j"]


@dataclass
class Telemetry:
    start: float
    end: float
    window_s: float
    scrape_s: float
    gpus: pd.DataFrame
    placement: pd.DataFrame
    engines: pd.DataFrame
    hosts: pd.DataFrame
    source: str
    notes: list[str] = field(default_factory=list)
    #: windows shorter than ``window_s`` -> their real length (a live watch's first window runs from its start to the
    #: next window edge); every per-window rate divides by `seconds`, never by ``window_s``
    partial: dict[int, float] = field(default_factory=dict)
    #: when the first window really began, where it does not end at an edge (a watch stopped inside its first window)
    began: float | None = None
    #: pods that form one deployment (kube-state-metrics' pod labels): namespace, pod, set
    pod_sets: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SET_COLS))

    @property
    def n_windows(self) -> int:
        return int(round((self.end - self.start) / self.window_s))

    def window_end(self, w: np.ndarray | int) -> Any:
        return self.start + (np.asarray(w) + 1) * self.window_s

    def seconds(self, w: Any) -> np.ndarray:
        """The real length of each window ``w``."""
        w = np.asarray(w, dtype=np.int64)
        out = np.full(w.shape, float(self.window_s))
        for k, s in self.partial.items():
            out[w == k] = s
        return out

    @property
    def first_start(self) -> float:
        """When the first window really began (later than ``start`` where that window is partial)."""
        return float(self.window_end(0) - self.seconds(0)) if self.began is None else self.began


def short_host(instance: str) -> str:
    """``gpu-01:9100`` -> ``gpu-01``: node-exporter's instance label against DCGM's Hostname."""
    return instance.rsplit(":", 1)[0] if ":" in instance and instance.rsplit(":", 1)[1].isdigit() else instance


def place_of(labels: dict[str, str], layouts: tuple[tuple[str, str], ...] = LAYOUTS) -> list[tuple[str, str, str]]:
    """(namespace, pod, layout) of a DCGM series under every pod-label layout it carries."""
    return [(labels.get(ns, ""), labels[pod], pod) for ns, pod in layouts if labels.get(pod)]


def pod_set(labels: dict[str, str]) -> tuple[str, str, str] | None:
    """(namespace, pod, set) of a ``kube_pod_labels`` series; None when it names no set. kube-state-metrics scraped
    without ``honor_labels`` has the pod in ``exported_pod``."""
    pod = labels.get("exported_pod") or labels.get("pod")
    for name, group in SET_LABELS:
        if labels.get(name) and pod:
            key = f"{name.removeprefix('label_')}={labels[name]}" + (f"/{labels.get(group, '')}" if group else "")
            return labels.get("exported_namespace") or labels.get("namespace", ""), pod, key
    return None


def window_increases(t: np.ndarray, v: np.ndarray, start: float, window_s: float, n: int, max_gap_s: float) -> tuple:
    """Per window: (increase, samples, resets) of one counter series; intervals over ``max_gap_s`` are dropped."""
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    inc = np.zeros(n)
    cnt = np.zeros(n, np.int64)
    rst = np.zeros(n, np.int64)
    w = np.ceil((t - start) / window_s).astype(np.int64) - 1  # sample at t belongs to the window ending at or after t
    inside = (w >= 0) & (w < n)
    np.add.at(cnt, w[inside], 1)
    if len(t) > 1:
        d = np.diff(v)
        reset = d < 0
        d = np.where(reset, v[1:], d)
        ok = (np.diff(t) <= max_gap_s) & inside[1:]
        np.add.at(inc, w[1:][ok], d[ok])
        np.add.at(rst, w[1:][reset & inside[1:]], 1)
    return inc, cnt, rst


def _bad(v: np.ndarray) -> bool:
    return bool(np.any(~np.isfinite(v)) or np.any(v < 0))


def from_samples(
    series: Iterable[tuple[str, dict[str, str], np.ndarray, np.ndarray]],
    start: float,
    end: float,
    window_s: float,
    scrape_s: float,
    engines: list[Any],
    source: str,
    layouts: tuple[tuple[str, str], ...] = LAYOUTS,
) -> Telemetry:
    """Reduce raw samples ``(metric, labels, t, v)`` to windows (scrape files, the live watcher)."""
    from footprint.errors import FootprintError

    n = max(1, int(round((end - start) / window_s)))
    max_gap = 2.5 * scrape_s
    gpu_rows: list[dict[str, Any]] = []
    place: set[tuple[Any, ...]] = set()
    eng_rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    host_rows: dict[str, np.ndarray] = {}
    power: dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    notes: list[str] = []
    sets: set[tuple[str, str, str]] = set()
    fields_of = {e.name: {f: e.metric(f) for f in FIELDS} for e in engines}
    read_here = {ENERGY, POWER, *HOST_COUNTERS} | {m[0] for d in fields_of.values() for m in d.values() if m}
    for metric, labels, t, v in series:
        if metric in read_here and _bad(v):  # the counters read below; other series (gauges) may hold NaN
            raise FootprintError(f"{metric}{_fmt(labels)}: negative or non-finite counter values", source)
        if metric == ENERGY:
            inc, cnt, rst = window_increases(t, v / 1000.0, start, window_s, n, max_gap)
            key = (labels.get(HOST, ""), labels.get(GPU, ""), labels.get(UUID, ""), labels.get(GPU_MODEL, ""))
            gpu_rows.append({"key": key, "inc": inc, "cnt": cnt, "rst": rst})
            for ns, pod, layout in place_of(labels, layouts):
                for wi in np.nonzero(cnt)[0].tolist():
                    place.add((wi, key[0], key[1], labels.get(MIG, ""), ns, pod, layout))
        elif metric == KUBE_POD_LABELS:
            if (s := pod_set(labels)) is not None:
                sets.add(s)
        elif metric == POWER:
            key = (labels.get(HOST, ""), labels.get(GPU, ""), labels.get(UUID, ""), labels.get(GPU_MODEL, ""))
            power.setdefault(key, (t, v))
        elif metric in HOST_COUNTERS:
            inc, _, _ = window_increases(t, v, start, window_s, n, max_gap)
            h = short_host(labels.get("instance", ""))
            host_rows[h] = host_rows.get(h, np.zeros(n)) + inc
        else:
            for e in engines:
                for f, m in fields_of[e.name].items():
                    if m and m[0] == metric and _matches(labels, m[1]):
                        # every increment counts, across gaps too: exact counts (an engine gap moves its tokens to the
                        # window after it, where they are "without energy" if the GPU was not metered there)
                        inc, cnt, rst = window_increases(t, v, start, window_s, n, np.inf)
                        model, flag = model_of(e, labels)
                        k = (e.name, labels.get("namespace", ""), labels.get("pod", ""), labels.get("instance", ""), model, flag)
                        row = eng_rows.setdefault(k, {g: np.full(n, np.nan) for g in FIELDS} | {"resets": np.zeros(n)})
                        row[f] = np.where(cnt > 0, np.nan_to_num(row[f]) + inc, row[f])
                        if f == "tokens_out":  # one restart resets every counter: counted once, as from Prometheus
                            row["resets"] = row["resets"] + rst
    gpus = _gpu_frame(gpu_rows, power, start, window_s, n, scrape_s)
    engines_df = _engine_frame(eng_rows, n)
    hosts = pd.DataFrame(
        [{"window": w, "host": h, "energy_j": float(x[w])} for h, x in host_rows.items() for w in range(n)], columns=HOST_COLS
    )
    placement = pd.DataFrame(sorted(place), columns=PLACE_COLS)
    tel = Telemetry(start, start + n * window_s, window_s, scrape_s, gpus, placement, engines_df, hosts, source, notes)
    tel.pod_sets = pd.DataFrame(sorted(sets), columns=SET_COLS)
    return tel


def _matches(labels: dict[str, str], matchers: str) -> bool:
    for part in filter(None, (p.strip() for p in matchers.split(","))):
        k, _, val = part.partition("=")
        if labels.get(k.strip()) != val.strip().strip('"'):
            return False
    return True


def _fmt(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else ""


def model_of(engine: Any, labels: dict[str, str]) -> tuple[str, str]:
    """(model, flag): the engine's model label, else the pod (or instance) it runs in, flagged as such."""
    if engine.model_label and labels.get(engine.model_label):
        return labels[engine.model_label], ""
    where = labels.get("pod") or labels.get("instance") or labels.get("job") or "unknown"
    why = f"no {engine.model_label} label" if engine.model_label else f"{engine.name} publishes no model label"
    return where, f"{why}: named after its pod/instance {where!r} (give the model in --map)"


def _gpu_frame(rows: list[dict[str, Any]], power: dict, start: float, window_s: float, n: int, scrape_s: float) -> pd.DataFrame:
    """One row per GPU and window: repeated series (MIG instances, pods sharing it) reduced by max."""
    by_key: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        by_key.setdefault(r["key"], []).append(r)
    out = []
    for key, rs in by_key.items():
        inc = np.max([r["inc"] for r in rs], axis=0)
        cnt = np.max([r["cnt"] for r in rs], axis=0)
        rst = np.max([r["rst"] for r in rs], axis=0)
        for w in np.nonzero(cnt)[0].tolist():
            out.append((w, *key[:2], key[2], key[3], float(inc[w]), "dcgm_energy_counter", int(cnt[w]), int(rst[w])))
    counted = set(by_key)
    for key, (t, v) in power.items():
        if key in counted:
            continue
        w = np.ceil((t - start) / window_s).astype(np.int64) - 1
        ok = (w >= 0) & (w < n)
        s = np.bincount(w[ok], weights=v[ok], minlength=n)
        c = np.bincount(w[ok], minlength=n)
        for wi in np.nonzero(c)[0].tolist():
            covered = min(window_s, c[wi] * scrape_s)
            out.append((wi, *key[:2], key[2], key[3], float(s[wi] / c[wi] * covered), "dcgm_power_gauge", int(c[wi]), 0))
    return pd.DataFrame(out, columns=GPU_COLS)


def _engine_frame(rows: dict[tuple[Any, ...], dict[str, Any]], n: int) -> pd.DataFrame:
    out = []
    for (engine, ns, pod, inst, model, flag), r in rows.items():
        for w in range(n):
            vals = [float(r[f][w]) for f in FIELDS]
            if all(np.isnan(x) for x in vals):
                continue
            out.append((w, engine, ns, pod, inst, model, flag, *vals, int(r["resets"][w])))
    return pd.DataFrame(out, columns=ENGINE_COLS)
