"""A serving cluster as platform engineers run it, with a known truth: the cases the examples' generator
(`footprint.serving.synthetic`) does not write.

- **Both pod-label layouts.** ``layout="pod"``: dcgm-exporter scraped with ``honor_labels`` (the GPU's pod in
  ``namespace``/``pod``); ``layout="exported"``: scraped through a Service without it, so Prometheus renamed them
  ``exported_namespace``/``exported_pod`` and ``namespace``/``pod`` name the exporter's own pod; ``layout="mixed"``:
  node-1's exporter one way, node-2's the other.
- **A model over two pods**: a LeaderWorkerSet group, leader ``llama70-0`` (vLLM counters) on node-1 GPUs 0-1 and
  worker ``llama70-0-1`` (no engine series) on node-2 GPUs 0-1, in lockstep: the worker's GPUs are busy when the
  leader is. kube-state-metrics' ``kube_pod_labels`` carries ``leaderworkerset.sigs.k8s.io/name`` and group index
  (``kube_labels=False`` leaves it out: only the names relate the pods).
- **Two engines on one GPU** (time-sliced, node-1 GPU 3): SGLang (tokens, time to first token only) and llama.cpp
  (slot-seconds, no model label); ``shared`` puts two other models there (TGI's batch-seconds beside vLLM's
  request-seconds, 16 requests batched: 16 request-seconds a busy second).
- **An engine restart** (Mistral's counters go back to 0 mid-run) and **a scrape gap under load** on node-2 GPU 2
  (30 minutes, the driver reloaded inside it: its energy counter restarts, the gap's energy is lost), an idle GPU.

Power is piecewise constant per 15 s scrape interval: ``idle_w + sum(busy) x dyn_w`` per GPU; a model's true GPU
energy is ``busy x (idle_w + dyn_w)`` summed over its GPUs and intervals (the attribution's own definition of
active energy, so that per-model energy has a truth). Engine counters are integers where the engines' are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from footprint.serving.engines import BY_NAME
from footprint.serving.synthetic import Model
from footprint.serving.telemetry import ENERGY, GPU, GPU_MODEL, HOST, UUID

START = datetime(2025, 4, 7, 8, 0, tzinfo=UTC).timestamp()
SCRAPE = 15.0
H100 = "NVIDIA H100 80GB HBM3"  # lca_data: TDP 700 W
IDLE_W, DYN_W = 70.0, 520.0


@dataclass
class Pod:
    name: str
    model: Model | None  # None: a worker, no engine series of its own
    gpus: list[tuple[str, int]]
    leader: str = ""  # a worker's leader: busy when it is
    labels: dict[str, str] = field(default_factory=dict)  # kube_pod_labels' label_* labels
    restart_at: float | None = None  # the engine restarts: its counters go back to 0
    concurrency: float = 1.0  # requests batched at once: an engine timing requests counts this many seconds a second


LLAMA70 = Model("meta-llama/Llama-3.1-70B-Instruct", "vllm", 4000.0, 450.0, 350.0, 0.2, 0.75)
MISTRAL = Model("mistralai/Mistral-7B-Instruct-v0.3", "vllm", 9000.0, 1300.0, 280.0, 0.22, 0.6)
GEMMA = Model("google/gemma-2-9b-it", "sglang", 7000.0, 1100.0, 300.0, 0.25, 0.45)
TINY = Model("TinyLlama-1.1B-Chat-GGUF", "llamacpp", 2500.0, 300.0, 200.0, 0.3, 0.35)
QWEN = Model("Qwen/Qwen2.5-14B-Instruct", "vllm", 5200.0, 800.0, 400.0, 0.2, 0.85)
NAMESPACE = "serving"
MAP_PODS = {"tinyllama-0": TINY.name}  # llama.cpp publishes no model label: the map names it, as a user would


class Cluster:
    """Two nodes of 4 H100s, 2 hours at 15 s (480 scrapes): series, truth and counter totals."""

    def __init__(
        self,
        layout: str = "pod",
        kube_labels: bool = True,
        hours: float = 2.0,
        seed: int = 3,
        cluster: str = "",
        worker: str = "llama70-0-1",
        restart_at: float = START + 3000.0 + 7.0,
        gap: tuple[float, float] = (3600.0, 5400.0),
        shared: tuple[Model, Model] | None = None,
        ray: bool = False,
    ) -> None:
        self.layout, self.kube_labels = layout, kube_labels
        self.extra = {"cluster": cluster} if cluster else {}  # several clusters in one Prometheus, told apart
        self.start, self.end = START, START + hours * 3600
        self.scrape_s = SCRAPE
        self.t = START + np.arange(int(round(hours * 3600 / SCRAPE)) + 1) * SCRAPE
        lws = {"label_leaderworkerset_sigs_k8s_io_name": "llama70", "label_leaderworkerset_sigs_k8s_io_group_index": "0"}
        if ray:  # one Ray cluster serving two models: the leader, its worker and Mistral's pod carry one set label
            lws = {"label_ray_io_cluster": "serve"}
        self.pods = [
            Pod("llama70-0", LLAMA70, [("node-1", 0), ("node-1", 1)], labels=lws),
            Pod(worker, None, [("node-2", 0), ("node-2", 1)], leader="llama70-0", labels=lws),
            Pod("mistral-7b-5d9f8-xk2lp", MISTRAL, [("node-1", 2)], restart_at=restart_at, labels=lws if ray else {}),
            Pod("gemma-9b-0", shared[0] if shared else GEMMA, [("node-1", 3)]),
            Pod("tinyllama-0", shared[1] if shared else TINY, [("node-1", 3)], concurrency=16.0 if shared else 1.0),
            Pod("qwen-14b-0", QWEN, [("node-2", 2)]),
        ]
        self.gpus = [(h, i) for h in ("node-1", "node-2") for i in range(4)]
        # [from, to) seconds after the start: no scrape on node-2 GPU 2; the driver reloaded inside
        self.gap = ("node-2", 2, START + gap[0], START + gap[1])
        self.busy = self._traffic(np.random.default_rng(seed))

    # ---- truth ----------------------------------------------------------------------------------------------------
    def _traffic(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Busy fraction of every pod per interval; quiet 10 minutes every hour; a worker runs with its leader."""
        mid = self.t[1:] - SCRAPE / 2 - self.start
        wave = 0.75 + 0.25 * np.sin(mid / 3600 * 2 * np.pi)
        quiet = (mid % 3600 >= 1800) & (mid % 3600 < 2400)
        out = {p.name: p.model.load * wave * rng.uniform(0.85, 1.0, len(mid)) * ~quiet for p in self.pods if p.model}
        for p in self.pods:
            if not p.model:
                out[p.name] = out[p.leader]
        return out

    def on(self, host: str, index: int) -> list[Pod]:
        return [p for p in self.pods if (host, index) in p.gpus]

    def power(self, host: str, index: int) -> np.ndarray:
        return IDLE_W + sum((self.busy[p.name] for p in self.on(host, index)), np.zeros(len(self.t) - 1)) * DYN_W

    def model_energy_j(self, model: str) -> float:
        """A model's true active GPU energy over the whole range (its workers' GPUs and any gap included)."""
        leaders = {p.name for p in self.pods if p.model and p.model.name == model}
        pods = [p for p in self.pods if p.name in leaders or p.leader in leaders]
        return float(sum(np.sum(self.busy[p.name] * (IDLE_W + DYN_W) * SCRAPE) * len(p.gpus) for p in pods))

    def counters(self, p: Pod) -> dict[str, np.ndarray]:
        """Cumulative engine counters at every scrape, integers where the engine counts (tokens, requests)."""
        m = p.model
        assert m is not None
        busy = self.busy[p.name] * SCRAPE
        pre, dec = busy * m.prefill_share, busy * (1 - m.prefill_share)
        c = {"prefill_s": pre, "decode_s": dec, "tokens_in": pre * m.in_tok_s, "tokens_out": dec * m.out_tok_s}
        c["prefill_s"], c["decode_s"] = pre * p.concurrency, dec * p.concurrency  # request-seconds overlap
        c = {k: np.concatenate([[0.0], np.cumsum(v)]) for k, v in c.items()}
        if p.restart_at is not None:  # a new process counts from 0 from its start on
            after = self.t >= p.restart_at
            c = {k: np.where(after, v - np.interp(p.restart_at, self.t, v), v) for k, v in c.items()}
        c["requests"] = np.floor(c["tokens_out"] / m.out_per_request)
        c["tokens_in"], c["tokens_out"] = np.floor(c["tokens_in"]), np.floor(c["tokens_out"])
        return c

    def counted(self, model: str, field: str) -> int:
        """What the counters say a model did in (start, end]: every increment, PromQL's reset rule."""
        total = 0.0
        for p in self.pods:
            if p.model and p.model.name == model:
                v = self.counters(p)[field][self.t + 1.3 <= self.end]
                d = np.diff(v)
                total += float(np.where(d < 0, v[1:], d).sum())
        return int(round(total))

    # ---- series ---------------------------------------------------------------------------------------------------
    def series(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]]:
        """(kind, metric, labels, t, v) as the exporters write them (`footprint.serving.synthetic.openmetrics` reads it)."""
        for kind, metric, lab, t, v in self._series():
            yield kind, metric, lab | self.extra, t, v

    def _series(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]]:
        yield from self._dcgm()
        for p in self.pods:
            if p.model is not None:
                yield from self._engine(p)
        if self.kube_labels:
            for p in self.pods:
                lab = {"namespace": NAMESPACE, "pod": p.name, "job": "kube-state-metrics"} | (
                    p.labels or {"label_app": p.name.rsplit("-", 1)[0]}
                )
                yield ("kube", "kube_pod_labels", lab, self.t, np.ones(len(self.t)))

    def _dcgm(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]]:
        for h, i in self.gpus:
            e = np.concatenate([[0.0], np.cumsum(self.power(h, i) * SCRAPE)]) + 5.0e6 + 1000.0 * i
            keep = np.ones(len(self.t), bool)
            if (h, i) == self.gap[:2]:
                keep = (self.t < self.gap[2]) | (self.t >= self.gap[3])
                e = np.where(self.t >= self.gap[3], e - float(np.interp(self.gap[2] + 600.0, self.t, e)), e)
            base = {GPU: str(i), UUID: f"GPU-{h}-{i}", "device": f"nvidia{i}", GPU_MODEL: H100, HOST: h}
            exporter = {"namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{h}", "container": "nvidia-dcgm-exporter"}
            exported = self.layout == "exported" or (self.layout == "mixed" and h == "node-1")
            if exported:
                base |= exporter | {"job": "nvidia-dcgm-exporter", "service": "nvidia-dcgm-exporter", "instance": f"{h}:9400"}
            for p in self.on(h, i) or [None]:
                lab = dict(base)
                if p is not None:
                    pod = {"namespace": NAMESPACE, "pod": p.name, "container": "engine"}
                    lab |= {f"exported_{k}": v for k, v in pod.items()} if exported else pod
                yield ("energy", ENERGY, lab, self.t[keep], e[keep] * 1000.0)

    def _engine(self, p: Pod) -> Iterator[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]]:
        assert p.model is not None
        e = BY_NAME[p.model.engine]
        lab = {"namespace": NAMESPACE, "pod": p.name, "instance": f"10.1.0.{len(p.name)}:8000", "job": "engines"}
        if e.model_label:
            lab[e.model_label] = p.model.name
        for f, v in self.counters(p).items():
            m = e.metric(f)
            if m is None:
                continue
            extra = dict(x.split("=") for x in m[1].split(",")) if m[1] else {}
            yield (e.name, m[0], lab | {k: x.strip('"') for k, x in extra.items()}, self.t + 1.3, v)
