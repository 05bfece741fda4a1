"""DCGM-exporter (and host RAPL/Kepler) series from Prometheus, as per-device energy intervals.

Raw samples are fetched with range selectors (``metric[6h]`` at the chunk's end, `/api/v1/query`),
chunk by chunk, so memory stays bounded whatever the window. The series of one physical GPU (host +
GPU index, whatever other labels change: a job label, the driver version) are merged into one
timeline, and each pair of consecutive samples becomes an interval ``(t0, t1]`` with its energy:

- energy counter (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, mJ since the driver loaded): the increase
  ``v1 - v0``, or ``v1`` where the counter went down (a reset: driver reload, reboot). That is the
  reset rule of PromQL's ``increase()``; its extrapolation to the range's edges is left out on
  purpose, so that consecutive intervals tile time exactly and their sum is the counter's increase;
- power gauge (``DCGM_FI_DEV_POWER_USAGE``, W), for GPUs without the counter: trapezoid over the
  interval, and no energy across a gap longer than ``max_gap_s`` (the gauge says nothing there);
- host CPU/RAM counters (node-exporter RAPL ``node_rapl_*_joules_total`` or Kepler
  ``kepler_node_*_joules_total``) the same way as the GPU counter.

Each interval carries the job label of its two samples (DCGM's ``hpc_job`` from
``--hpc-job-mapping-dir``, or Kubernetes ``namespace``/``pod``); a GPU shared by several jobs shows
one series per job with the same value, merged into one sample naming all of them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet.dialects import DIALECTS, dialect
from footprint.fleet.prometheus import PrometheusClient
from footprint.fleet.promql import selector_matchers
from meters.importers import MAX_DEVICE_POWER_W

GPU_COUNTER, GPU_GAUGE, CPU, RAM = 0, 1, 2, 3
KIND_NAMES = {GPU_COUNTER: "dcgm_energy_counter", GPU_GAUGE: "dcgm_power_gauge", CPU: "cpu", RAM: "ram"}
HOST_CPU_SOURCES = {
    "rapl": (("node_rapl_package_joules_total", CPU), ("node_rapl_dram_joules_total", RAM)),
    "kepler": (("kepler_node_package_joules_total", CPU), ("kepler_node_dram_joules_total", RAM)),
}
LOOKBACK_S = 300.0  # Prometheus' default lookback: the samples just outside the window are fetched to close its edge intervals


_DCGM = DIALECTS["dcgm"]


@dataclass(frozen=True)
class DcgmNames:
    """Metric and label names; the defaults are dcgm-exporter's (`dialects.DIALECTS`), `of` takes another entry."""

    energy_metric: str = _DCGM.energy_metric
    energy_unit_j: float = _DCGM.energy_unit_j
    recorded: str = ""  # a recording rule's per-minute GPU energy (J), read instead of the counter (rules/)
    activity_metric: str = _DCGM.activity_metric  # per MIG instance: splits a shared GPU by activity
    instance_label: str = _DCGM.instance_label
    recorded_every_s: float = 60.0
    power_metric: str = _DCGM.power_metric
    gpu_label: str = _DCGM.gpu_label
    uuid_label: str = _DCGM.uuid_label
    model_label: str = _DCGM.model_label
    host_label: str = _DCGM.host_label
    job_labels: tuple[str, ...] = _DCGM.job_labels
    selector: str = ""  # extra matchers for every query, e.g. cluster="a",namespace!="test"
    cpu_source: str = "auto"  # auto | rapl | kepler | none
    cpu_host_label: str = "instance"

    @classmethod
    def of(cls, name: str, **overrides: object) -> DcgmNames:
        """The names of exporter dialect ``name`` (`dialects.DIALECTS`), with ``overrides``."""
        d = dialect(name)
        fields = ("energy_metric", "energy_unit_j", "power_metric", "gpu_label", "uuid_label", "model_label")
        fields += ("activity_metric", "instance_label")
        base = {f: getattr(d, f) for f in fields} | {"host_label": d.host_label, "job_labels": d.job_labels}
        return cls(**(base | overrides))  # type: ignore[arg-type]

    def __post_init__(self) -> None:  # the user's selector, checked and without its braces: it cannot close ours
        object.__setattr__(self, "selector", selector_matchers(self.selector))

    def matchers(self, extra: str = "") -> str:
        parts = [p for p in (self.selector, extra) if p]
        return "{" + ",".join(parts) + "}" if parts else ""


#: Exporter dialects as names the import reads (`dialects.DIALECTS`: NVIDIA's dcgm-exporter and AMD's
#: device-metrics-exporter, each with its documented source).
EXPORTERS: dict[str, DcgmNames] = {name: DcgmNames.of(name) for name in DIALECTS}


def exporter_names(exporter: str, **changes: Any) -> DcgmNames:
    """The names of an exporter dialect ("dcgm" or "amd"), with the options the user gave over them."""
    from dataclasses import replace

    if exporter not in EXPORTERS:
        raise FootprintError(f"expected one of {', '.join(EXPORTERS)}, got {exporter!r}", key="--exporter")
    return replace(EXPORTERS[exporter], **{k: v for k, v in changes.items() if v is not None})


@dataclass
class Device:
    """One physical meter: a GPU (host + index) or a host CPU/RAM counter."""

    id: int
    kind: int
    host: str
    key: str
    gpu_index: int | None = None
    uuid: str | None = None
    model: str | None = None
    metric: str = ""
    labelled: bool = False  # any sample carried a job label
    first_t: float = math.inf
    last_t: float = -math.inf
    resets: int = 0
    jumps: int = 0  # counter increases no device can make (above MAX_DEVICE_POWER_W over the interval): left out
    gaps: int = 0
    max_gap_s: float = 0.0
    reset_times: list[float] = field(default_factory=list)


@dataclass
class Chunk:
    """Intervals of one time chunk, every device: parallel arrays."""

    dev: np.ndarray  # int32 device id
    t0: np.ndarray
    t1: np.ndarray
    energy_j: np.ndarray
    lab0: np.ndarray  # int32 label id at t0 (0 = no job label)
    lab1: np.ndarray  # int32 label id at t1
    gap: np.ndarray  # bool: longer than max_gap_s

    @staticmethod
    def empty() -> Chunk:
        z = np.zeros(0)
        zi = np.zeros(0, np.int32)
        return Chunk(zi, z, z, z, zi, zi, np.zeros(0, bool))


@dataclass
class Telemetry:
    """What a fetch found: devices, the label table, and the chunks (streamed)."""

    devices: list[Device] = field(default_factory=list)
    labels: list[str] = field(default_factory=lambda: [""])  # id -> job key ("" = none; "a,b" = shared)
    notes: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    def label_id(self, text: str) -> int:
        try:
            return self._label_ids[text]
        except AttributeError:
            self._label_ids = {t: i for i, t in enumerate(self.labels)}
            return self.label_id(text)
        except KeyError:
            self._label_ids[text] = len(self.labels)
            self.labels.append(text)
            return self._label_ids[text]


def short_host(name: str) -> str:
    """SLURM's short node name from a Hostname or an ``instance`` label (domain and port dropped)."""
    host = name.strip()
    if host.startswith("[") and "]" in host:  # [ipv6]:port
        return host[1 : host.index("]")]
    if host.count(":") == 1:
        host = host.split(":")[0]
    return host.split(".")[0] if not host.replace(".", "").isdigit() else host


class Fetcher:
    """Streams a window of DCGM (and host) telemetry as interval chunks."""

    def __init__(
        self,
        client: PrometheusClient,
        names: DcgmNames,
        start: float,
        end: float,
        chunk_s: float = 6 * 3600,
        max_gap_s: float = 300.0,
    ) -> None:
        if end <= start:
            raise FootprintError(f"the window is empty: --end ({end:.0f}) is not after --start ({start:.0f})", key="--end")
        self.client, self.names = client, names
        self.start, self.end, self.chunk_s, self.max_gap_s = start, end, chunk_s, max_gap_s
        self.t = Telemetry()
        self._dev: dict[tuple[int, str], Device] = {}
        self._carry: dict[int, tuple[float, float, int]] = {}  # device -> last (t, value, label)
        self.sources: list[tuple[str, int, str]] = []  # (metric, kind, extra matcher)
        self._with_counter: set[str] = set()  # GPUs seen with the energy counter: their gauge is never used
        self._gauge_mode = "none"  # none | all (no counter anywhere) | check (per chunk)
        self._gauge_hosts: set[str] = set()

    # ---- discovery -----------------------------------------------------------------------------
    def discover(self) -> None:
        """Which metrics exist in the window (cheap label-value lookups, whatever the fleet's size) and which
        host CPU source; GPUs that have only the power gauge are found chunk by chunk (`_gauge_only`)."""
        n = self.names
        lo, hi = self.start - LOOKBACK_S, self.end + LOOKBACK_S
        counter = self.client.label_values(n.host_label, n.energy_metric + n.matchers(), lo, hi) if n.energy_metric else []
        gauge = self.client.label_values(n.host_label, n.power_metric + n.matchers(), lo, hi) if n.power_metric else []
        if not counter and not gauge:
            raise FootprintError(self._no_series_message(), key="--energy-metric")
        if counter:
            self.sources.append((n.energy_metric, GPU_COUNTER, ""))
        self._gauge_mode = "none" if not gauge else ("check" if counter else "all")
        if self._gauge_mode == "all":
            self.sources.append((n.power_metric, GPU_GAUGE, ""))
            self._gauge_note(sorted({short_host(h) for h in gauge}))
        self._discover_cpu(lo)

    def _gauge_note(self, hosts: list[str]) -> None:
        new = [h for h in hosts if h not in self._gauge_hosts]
        if new:
            self._gauge_hosts.update(new)
            n = self.names
            self.t.notes = [x for x in self.t.notes if not x.startswith(f"{n.energy_metric} missing")]
            self.t.notes.append(
                f"{n.energy_metric} missing for GPUs on {', '.join(sorted(self._gauge_hosts))}: their energy is integrated "
                f"from the {n.power_metric} gauge (trapezoid between scrapes; nothing across gaps over {self.max_gap_s:g} s)"
            )

    def _gauge_only(self, a: float, b: float) -> Chunk:
        """The gauge of the GPUs that report it but not the energy counter in this chunk (usually none): the
        chunk's gauge series from the index (no samples read), less the GPUs whose counter was fetched."""
        n = self.names
        listed = self.client.series(n.power_metric + n.matchers(), a, b)
        found = [s for s in listed if isinstance(s, dict) and self._gpu_key(s) not in self._with_counter]
        if not found:
            return Chunk.empty()
        keys = {self._gpu_key(m) for m in found}
        hosts = sorted({m.get(n.host_label, "") for m in found})
        self._gauge_note(sorted({short_host(h) for h in hosts}))
        extra = f'{n.host_label}=~"{"|".join(_re_escape(h) for h in hosts)}"'
        return self._fetch(n.power_metric, GPU_GAUGE, extra, a, b, only=keys)

    def _discover_cpu(self, lo: float) -> None:
        n = self.names
        choices = ["rapl", "kepler"] if n.cpu_source == "auto" else ([] if n.cpu_source == "none" else [n.cpu_source])
        for name in choices:
            hi = self.end + LOOKBACK_S
            found = [
                (m, k) for m, k in HOST_CPU_SOURCES[name] if self.client.label_values(n.cpu_host_label, m + n.matchers(), lo, hi)
            ]
            if found:
                self.sources += [(m, k, "") for m, k in found]
                self.t.notes.append(
                    f"host CPU/RAM energy from {', '.join(m for m, _ in found)} "
                    f"({'node-exporter RAPL' if name == 'rapl' else 'Kepler'}), per node, shared among the node's jobs "
                    "by their share of its GPUs"
                )
                return
        self.t.notes.append(
            "host CPU/RAM energy not measured: no node-exporter RAPL (node_rapl_*_joules_total) or Kepler "
            "(kepler_node_*_joules_total) series in the window"
        )

    def _no_series_message(self) -> str:
        n = self.names
        try:
            names = self.client.metric_names()
        except FootprintError:
            names = []
        known = {e: [m for m in names if m in (x.energy_metric, x.power_metric)] for e, x in EXPORTERS.items()}
        dcgm = [m for m in names if m.startswith("DCGM_")][:8]
        hint = f"; DCGM metrics this server has: {', '.join(dcgm)}" if dcgm else "; this server has no DCGM_ metric at all"
        other = [f"{', '.join(v)} (--exporter {e})" for e, v in known.items() if v and n.energy_metric not in v]
        hint += f"; it has {'; '.join(other)}" if other else ""
        return (
            f"no series of {n.energy_metric} or {n.power_metric}{n.matchers()} between the window's start and end "
            f"at {self.client.base}: check --start/--end, --selector and the metric names{hint}"
        )

    # ---- devices --------------------------------------------------------------------------------
    def _host(self, labels: dict[str, str]) -> str:
        return short_host(labels.get(self.names.host_label) or labels.get("instance") or "?")

    def _gpu_key(self, labels: dict[str, str]) -> str:
        return f"{self._host(labels)}/gpu{labels.get(self.names.gpu_label, '?')}"

    def _device(self, kind: int, labels: dict[str, str], metric: str) -> Device:
        n = self.names
        if kind in (GPU_COUNTER, GPU_GAUGE):
            key = self._gpu_key(labels)
            host = self._host(labels)
        else:
            host = short_host(labels.get(n.cpu_host_label) or labels.get("instance") or "?")
            rest = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("__name__", "instance", "job"))
            key = f"{host}/{metric}{{{rest}}}"
        dk = (kind, key)  # a GPU read from its gauge in some chunks and its counter in others is two meters
        d = self._dev.get(dk)
        if d is None:
            idx = labels.get(n.gpu_label)
            d = Device(len(self.t.devices), kind, host, key, metric=metric)
            if kind in (GPU_COUNTER, GPU_GAUGE):
                d.gpu_index = int(idx) if idx is not None and str(idx).isdigit() else None
            self._dev[dk] = d
            self.t.devices.append(d)
        if kind in (GPU_COUNTER, GPU_GAUGE):
            d.uuid = labels.get(n.uuid_label) or d.uuid
            d.model = labels.get(n.model_label) or d.model
        return d

    def _job_key(self, labels: dict[str, str]) -> str:
        values = [labels.get(k, "").strip() for k in self.names.job_labels]
        if not values or not values[-1]:
            return ""
        return "/".join(v for v in values if v)

    # ---- fetching -------------------------------------------------------------------------------
    def chunk_bounds(self) -> list[tuple[float, float]]:
        lo, hi = self.start - LOOKBACK_S, self.end + LOOKBACK_S
        bounds, a = [], lo
        while a < hi:
            b = min(a + self.chunk_s, hi)
            bounds.append((a, b))
            a = b
        return bounds

    def chunks(self, progress: Callable[[int], None] | None = None) -> Iterator[Chunk]:
        """One Chunk per time chunk (all sources), in time order."""
        for a, b in self.chunk_bounds():
            parts = [self._fetch(metric, kind, extra, a, b) for metric, kind, extra in self.sources]
            if self._gauge_mode == "check":
                parts.append(self._gauge_only(a, b))
            yield _concat(parts)
            if progress is not None:
                progress(1)

    def _fetch(self, metric: str, kind: int, extra: str, a: float, b: float, only: set[str] | None = None) -> Chunk:
        rng = max(int(math.ceil(b - a)), 1)
        expr = f"{metric}{self.names.matchers(extra)}[{rng}s]"
        if len(self.t.queries) < 16:
            self.t.queries.append(expr)
        data = self.client.query(expr, at=b)
        if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result") or [], list):
            got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise FootprintError(f"expected a matrix for {expr!r}, got {got!r}", key="--url")
        per_dev: dict[int, list[tuple[np.ndarray, np.ndarray, int]]] = {}
        for s in data.get("result") or []:
            labels = s.get("metric") if isinstance(s, dict) else None
            values = s.get("values") if isinstance(s, dict) else None
            if not isinstance(labels, dict) or not isinstance(values, list) or not values:
                continue  # an entry that is not a series (a damaged or foreign answer): skipped
            if kind == GPU_GAUGE and (
                self._gpu_key(labels) in self._with_counter or (only is not None and self._gpu_key(labels) not in only)
            ):
                continue  # this GPU has the energy counter: its gauge is not needed
            if kind == GPU_COUNTER:
                self._with_counter.add(self._gpu_key(labels))
            d = self._device(kind, labels, metric)
            lab = 0
            if kind in (GPU_COUNTER, GPU_GAUGE):
                job = self._job_key(labels)
                lab = self.t.label_id(job) if job else 0
                d.labelled |= bool(job)
            t, v = _column(values, 0), _column(values, 1)
            per_dev.setdefault(d.id, []).append((t, v, lab))
        parts = [self._intervals(self.t.devices[dev], series) for dev, series in per_dev.items()]
        return _concat([p for p in parts if p is not None])

    def _intervals(self, d: Device, series: list[tuple[np.ndarray, np.ndarray, int]]) -> Chunk | None:
        t, v, lab = _merge(series, self.t)
        prev = self._carry.get(d.id)
        if prev is not None:
            keep = t > prev[0]
            t, v, lab = t[keep], v[keep], lab[keep]
            t = np.concatenate([[prev[0]], t])
            v = np.concatenate([[prev[1]], v])
            lab = np.concatenate([np.array([prev[2]], np.int32), lab])
        # a sample that is not a reading (NaN, +Inf, negative, a gauge above any device's power) is skipped, so no
        # interval ever carries NaN, infinite or negative energy
        ok = np.isfinite(t) & np.isfinite(v) & (v >= 0) & ((v <= MAX_DEVICE_POWER_W) if d.kind == GPU_GAUGE else True)
        t, v, lab = t[ok], v[ok], lab[ok]
        if len(t) == 0:
            return None
        self._carry[d.id] = (float(t[-1]), float(v[-1]), int(lab[-1]))
        d.first_t, d.last_t = min(d.first_t, float(t[0])), max(d.last_t, float(t[-1]))
        if len(t) < 2:
            return None
        dt = np.diff(t)
        gap = dt > self.max_gap_s
        if d.kind == GPU_GAUGE:
            e = 0.5 * (v[1:] + v[:-1]) * dt
            e[gap] = 0.0
        else:
            inc = np.diff(v)
            reset = inc < 0
            if reset.any():
                d.resets += int(reset.sum())
                d.reset_times += t[1:][reset].tolist()[: max(0, 1000 - len(d.reset_times))]
            e = np.where(reset, v[1:], inc) * (self.names.energy_unit_j if d.kind == GPU_COUNTER else 1.0)
            if d.kind == GPU_COUNTER:  # a jump of 10^7 x (about 1 GW) or to 1e300 is damage, not energy: left out
                jump = beyond_any_device(e, dt)
                if jump.any():
                    if not d.jumps:
                        self.t.notes.append(jump_note(d.key))
                    d.jumps += int(jump.sum())
                    e = np.where(jump, 0.0, e)
        d.gaps += int(gap.sum())
        d.max_gap_s = max(d.max_gap_s, float(dt.max()))
        n = len(dt)
        return Chunk(np.full(n, d.id, np.int32), t[:-1], t[1:], e, lab[:-1], lab[1:], gap)


def _column(values: list[Any], i: int) -> np.ndarray:
    """Column ``i`` of Prometheus' ``[[time, "value"], ...]`` as floats; an entry that is not a number is NaN."""
    try:
        return np.array([v[i] for v in values], dtype=float)
    except (ValueError, TypeError, IndexError, KeyError):
        out = np.full(len(values), np.nan)
        for k, v in enumerate(values):
            with contextlib.suppress(ValueError, TypeError, IndexError, KeyError, OverflowError):
                out[k] = float(v[i])
        return out


def _merge(series: list[tuple[np.ndarray, np.ndarray, int]], tel: Telemetry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One timeline from a device's series; samples at the same instant (a GPU shared by jobs) merged."""
    if len(series) == 1:
        t, v, lab = series[0]
        return t, v, np.full(len(t), lab, np.int32)
    t = np.concatenate([s[0] for s in series])
    v = np.concatenate([s[1] for s in series])
    lab = np.concatenate([np.full(len(s[0]), s[2], np.int32) for s in series])
    order = np.lexsort((lab, t))
    t, v, lab = t[order], v[order], lab[order]
    uniq, first, counts = np.unique(t, return_index=True, return_counts=True)
    if len(uniq) == len(t):
        return t, v, lab
    out_lab = lab[first].copy()
    for i in np.nonzero(counts > 1)[0]:
        ids = lab[first[i] : first[i] + counts[i]]
        jobs = sorted({j for x in ids if x for j in tel.labels[x].split(",")})
        out_lab[i] = tel.label_id(",".join(jobs)) if jobs else 0
    return uniq, v[first], out_lab


def _concat(parts: list[Chunk]) -> Chunk:
    parts = [p for p in parts if p is not None and len(p.t0)]
    if not parts:
        return Chunk.empty()
    if len(parts) == 1:
        return parts[0]
    return Chunk(
        *(np.concatenate([getattr(p, f) for p in parts]) for f in ("dev", "t0", "t1", "energy_j", "lab0", "lab1", "gap"))
    )


def _re_escape(text: str) -> str:
    out = []
    for ch in text:
        out.append("\\\\" + ch if ch in ".^$*+?()[]{}|\\" else ch)
    return "".join(out)


def beyond_any_device(joules: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """Intervals whose energy no device draws in their time (over `MAX_DEVICE_POWER_W`): damage, not energy."""
    return joules > MAX_DEVICE_POWER_W * np.maximum(dt, 1e-9)


def jump_note(key: str) -> str:
    """What the import says of a GPU whose counter rose faster than any device draws (damage, left out)."""
    return (
        f"{key}: the energy counter rose faster than {MAX_DEVICE_POWER_W:g} W (no GPU draws that): "
        "such intervals are left out (their energy is not counted; a lower bound)"
    )


def method_name(d: Device) -> str:
    """How a device's energy was measured, named for its exporter: ``amd_energy_counter`` for AMD's
    device-metrics-exporter's counter, ``dcgm_power_gauge`` for DCGM's power gauge; ``dcgm_*`` for a metric named
    by hand (``--energy-metric``), as before; ``cpu``/``ram`` for host meters."""
    if d.kind not in (GPU_COUNTER, GPU_GAUGE):
        return KIND_NAMES[d.kind]
    what = "energy_metric" if d.kind == GPU_COUNTER else "power_metric"
    name = next((k for k, x in DIALECTS.items() if getattr(x, what) == d.metric), "dcgm")
    return KIND_NAMES[d.kind].replace("dcgm", name, 1)


def describe(d: Device) -> dict[str, Any]:
    return {
        "device": d.id,
        "kind": method_name(d),
        "host": d.host,
        "key": d.key,
        "gpu_index": d.gpu_index,
        "uuid": d.uuid,
        "model": d.model,
        "metric": d.metric,
        "labelled": d.labelled,
        "resets": d.resets,
        "gaps": d.gaps,
    }
