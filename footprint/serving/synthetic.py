"""A synthetic serving fleet: DCGM-exporter and engine series with a known truth (tests, benchmark, examples).

Every scrape interval is piecewise constant: each pod is busy a fraction b of it (a seeded daily
pattern with quiet hours), split between prefill and decode; its GPUs draw ``idle_w + sum(b) x dyn_w``
(models sharing a GPU draw the same per busy second: the split rule's assumption, so that the truth is
defined); tokens follow the busy seconds at the model's throughput. The series are written as each
exporter writes them: dcgm-exporter's energy counter (mJ) repeated on every pod and MIG instance of a
GPU (NVIDIA/dcgm-exporter#317), node-exporter RAPL, and the engines' counters under the names of
`footprint.serving.engines` (vLLM, TGI, SGLang, llama.cpp; histogram sums written as summaries'
``_sum``). `truth` gives every model's active, prefill and decode energy and tokens per window.

``python -m footprint.serving.synthetic OUT_DIR`` writes the examples (one scrape file per engine).
"""

from __future__ import annotations

import argparse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from footprint.serving.engines import BY_NAME
from footprint.serving.telemetry import ENERGY, GPU, GPU_MODEL, HOST, MIG, UUID


@dataclass
class Model:
    name: str
    engine: str
    in_tok_s: float  # prompt tokens per prefill second
    out_tok_s: float  # generated tokens per decode second
    out_per_request: float
    prefill_share: float  # of busy time
    load: float  # mean busy fraction in busy hours


@dataclass
class Pod:
    name: str
    model: str
    gpus: list[tuple[str, int, str]]  # (host, index, MIG instance or "")
    namespace: str = "serving"


@dataclass
class GpuSpec:
    host: str
    index: int
    model: str = "NVIDIA H100 80GB HBM3"
    idle_w: float = 70.0
    dyn_w: float = 480.0
    mig: bool = False
    reset_at: float | None = None
    gap: tuple[float, float] | None = None  # the exporter is down

    @property
    def uuid(self) -> str:
        return f"GPU-{zlib.crc32(self.host.encode()):08x}-{self.index:04d}"


@dataclass
class Fleet:
    start: float
    end: float
    gpus: list[GpuSpec]
    models: list[Model]
    pods: list[Pod]
    scrape_s: float = 15.0
    seed: int = 0
    rapl_hosts: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.t = np.arange(self.start, self.end + self.scrape_s / 2, self.scrape_s) + 0.0
        self._busy = self._traffic()

    # ---- ground truth -------------------------------------------------------------------------------
    def _traffic(self) -> dict[str, np.ndarray]:
        """Busy fraction of every pod per interval (t[i-1], t[i]]; quiet hours every day; <= 1 per GPU."""
        rng = np.random.default_rng(self.seed)
        mid = self.t[1:] - self.scrape_s / 2
        hour = (mid % 86400) / 3600
        out = {}
        models = {m.name: m for m in self.models}
        for p in self.pods:
            m = models[p.model]
            day = np.clip(np.sin((hour - 6) / 24 * 2 * np.pi) * 1.2 + 0.2, 0, 1)  # ~9 quiet hours a day
            burst = (mid - self.start) % 3600 < 300  # and a quiet 5 minutes every hour
            b = m.load * day * rng.uniform(0.6, 1.0, len(mid)) * ~burst
            out[p.name] = b
        for g in self.gpus:
            on = [p for p in self.pods if (g.host, g.index) in {(h, i) for h, i, _ in p.gpus}]
            tot = sum((out[p.name] for p in on), np.zeros(len(mid)))
            scale = np.where(tot > 0.95, 0.95 / np.maximum(tot, 1e-12), 1.0)
            for p in on:
                out[p.name] = out[p.name] * scale
        return out

    def pods_on(self, g: GpuSpec) -> list[Pod]:
        return [p for p in self.pods if (g.host, g.index) in {(h, i) for h, i, _ in p.gpus}]

    def power(self, g: GpuSpec) -> np.ndarray:
        busy = sum((self._busy[p.name] for p in self.pods_on(g)), np.zeros(len(self.t) - 1))
        return g.idle_w + busy * g.dyn_w

    def counters(self, p: Pod) -> dict[str, np.ndarray]:
        """Cumulative engine counters at every scrape (from 0 at the pod's start)."""
        m = {x.name: x for x in self.models}[p.model]
        busy = self._busy[p.name] * self.scrape_s
        pre, dec = busy * m.prefill_share, busy * (1 - m.prefill_share)
        out_tok = dec * m.out_tok_s
        c = {"prefill_s": pre, "decode_s": dec, "tokens_in": pre * m.in_tok_s, "tokens_out": out_tok}
        c = {k: np.concatenate([[0.0], np.cumsum(v)]) for k, v in c.items()}
        c["requests"] = np.floor(c["tokens_out"] / m.out_per_request)
        c["tokens_in"], c["tokens_out"] = np.floor(c["tokens_in"]), np.floor(c["tokens_out"])
        return c

    def truth(self, window_s: float) -> dict[str, dict[str, np.ndarray]]:
        """Per model and window: active GPU energy (J), its prefill and decode parts, tokens and requests, over what
        the telemetry covers: a pod's windows on a GPU whose exporter was down (under half its scrapes, what the
        import's health table calls a gap) are left out of both energy and tokens, and counted in ``hidden_out``."""
        n = int(round((self.end - self.start) / window_s))
        w = np.clip(np.ceil((self.t[1:] - self.start) / window_s).astype(int) - 1, 0, n - 1)
        hidden = {}
        for g in self.gpus:
            kept = np.ones(len(self.t), bool) if not g.gap else (self.t < g.gap[0]) | (self.t >= g.gap[1])
            wk = np.clip(np.ceil((self.t[kept] - self.start) / window_s).astype(int) - 1, 0, n - 1)
            hidden[(g.host, g.index)] = np.bincount(wk, minlength=n) < 0.5 * window_s / self.scrape_s
        models = {x.name: x for x in self.models}
        out: dict[str, dict[str, np.ndarray]] = {}
        keys = ("active_j", "prefill_j", "decode_j", "tokens_in", "tokens_out", "requests", "hidden_out")
        for p in self.pods:
            m = models[p.model]
            d = out.setdefault(p.model, {k: np.zeros(n) for k in keys})
            hid = np.logical_or.reduce([hidden[(h, i)] for h, i, _ in p.gpus])
            ok = ~hid[w]
            b = self._busy[p.name] * self.scrape_s
            for h, i, _ in p.gpus:
                g = next(x for x in self.gpus if (x.host, x.index) == (h, i))
                e = b * (g.idle_w + g.dyn_w)
                np.add.at(d["active_j"], w[ok], e[ok])
                np.add.at(d["prefill_j"], w[ok], e[ok] * m.prefill_share)
                np.add.at(d["decode_j"], w[ok], e[ok] * (1 - m.prefill_share))
            c = self.counters(p)
            for k in ("tokens_in", "tokens_out", "requests"):
                np.add.at(d[k], w[ok], np.diff(c[k])[ok])
            np.add.at(d["hidden_out"], w[~ok], np.diff(c["tokens_out"])[~ok])
        return out

    def gpu_energy_j(self, g: GpuSpec) -> float:
        return float(np.sum(self.power(g) * self.scrape_s))

    # ---- series -------------------------------------------------------------------------------------
    def series(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]]:
        """(family line, metric, labels, t, v) for every series, as the exporters write them."""
        for g in self.gpus:
            e = np.concatenate([[0.0], np.cumsum(self.power(g) * self.scrape_s)]) + 7.2e6 + 1000.0 * g.index
            mj = e * 1000.0
            keep = np.ones(len(self.t), bool)
            if g.reset_at is not None:
                after = self.t >= g.reset_at
                at = float(np.interp(g.reset_at, self.t, e))
                mj = np.where(after, (e - at) * 1000.0, mj)
            if g.gap:
                keep &= ~((self.t >= g.gap[0]) & (self.t < g.gap[1]))
            base = {GPU: str(g.index), UUID: g.uuid, "device": f"nvidia{g.index}", GPU_MODEL: g.model, HOST: g.host}
            pods = [(p, mig) for p in self.pods_on(g) for h, i, mig in p.gpus if (h, i) == (g.host, g.index)]
            for p, mig in pods or [(None, "")]:
                lab = dict(base)
                if g.mig:
                    lab |= {MIG: mig or "0", "GPU_I_PROFILE": "3g.40gb"}
                if p is not None:
                    lab |= {"namespace": p.namespace, "pod": p.name, "container": p.model.split("/")[-1][:40]}
                yield ("energy", ENERGY, lab, self.t[keep], mj[keep])
        for h in sorted(self.rapl_hosts):
            gp = [g for g in self.gpus if g.host == h]
            busy = sum(((self.power(g) - g.idle_w) / g.dyn_w for g in gp), np.zeros(len(self.t) - 1))
            for metric, scale in (("node_rapl_package_joules_total", 1.0), ("node_rapl_dram_joules_total", 0.2)):
                cum = np.concatenate([[0.0], np.cumsum((110.0 + 35.0 * busy) * scale * self.scrape_s)]) + 4e5
                yield ("rapl", metric, {"instance": f"{h}:9100", "job": "node", "index": "0"}, self.t, cum)
        for p in self.pods:
            e = BY_NAME[{m.name: m for m in self.models}[p.model].engine]
            c = self.counters(p)
            lab = {"namespace": p.namespace, "pod": p.name, "instance": f"{p.name}:8000"}
            if e.model_label:
                lab[e.model_label] = p.model
            for f, v in c.items():
                m = e.metric(f)
                if m is None:
                    continue
                extra = dict(x.split("=") for x in m[1].split(",")) if m[1] else {}
                yield (e.name, m[0], lab | {k: x.strip('"') for k, x in extra.items()}, self.t + 1.3, v)


def _family(metric: str) -> tuple[str, str]:
    """(family, type) line for a metric name: counters end in _total, histogram sums are written as summaries."""
    if metric.endswith("_total"):
        return metric[: -len("_total")], "counter"
    if metric.endswith("_sum"):
        return metric[: -len("_sum")], "summary"
    return metric, "unknown"


def _lab(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def openmetrics(f: Fleet, only: str | None = None, ms: bool = False) -> Iterator[str]:
    """The series as text, family by family (formatted one series at a time: memory holds the arrays, not the text):
    OpenMetrics with ``# EOF`` and seconds (promtool's input), or the Prometheus text format with millisecond
    timestamps (``ms``: a recorded /metrics file)."""
    families: dict[str, list[tuple[str, dict[str, str], np.ndarray, np.ndarray]]] = {}
    for kind, metric, lab, t, v in f.series():
        if only is not None and kind != only:
            continue
        fam, typ = _family(metric)
        head = f"# TYPE {fam} {typ}\n" if not ms else f"# TYPE {metric} {'counter' if typ != 'unknown' else 'untyped'}\n"
        families.setdefault(head, []).append((metric, lab, t, v))
    for head, members in families.items():
        yield head
        for metric, lab, t, v in members:
            ts = [f"{int(round(x * 1000))}" for x in t.tolist()] if ms else [f"{x:.3f}" for x in t.tolist()]
            name = f"{metric}{_lab(lab)} "
            yield "".join(f"{name}{x:.10g} {s}\n" for x, s in zip(v.tolist(), ts, strict=True))
    if not ms:
        yield "# EOF\n"


def write(f: Fleet, path: str | Path, only: str | None = None, ms: bool = False) -> Path:
    """Write the series through the project's one safe writer."""
    from footprint.outputs import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        for block in openmetrics(f, only, ms):
            fh.write(block)
    return Path(path)


# ---- fleets ---------------------------------------------------------------------------------------------

MODELS = [
    Model("meta-llama/Llama-3.1-8B-Instruct", "vllm", 9000.0, 1400.0, 350.0, 0.18, 0.8),
    Model("mistralai/Mistral-7B-Instruct-v0.3", "vllm", 8500.0, 1300.0, 280.0, 0.22, 0.5),
    Model("Qwen/Qwen2.5-14B-Instruct", "tgi", 5200.0, 800.0, 400.0, 0.2, 0.7),
    Model("google/gemma-2-9b-it", "sglang", 7000.0, 1100.0, 300.0, 0.25, 0.6),
    Model("TinyLlama-1.1B-Chat-GGUF", "llamacpp", 2500.0, 300.0, 200.0, 0.3, 0.5),
]


def small_fleet(start: float, hours: float = 3.0, scrape_s: float = 15.0, seed: int = 0) -> Fleet:
    """The tests' fleet: two models sharing GPU 0, tensor parallel over two GPUs, a MIG A100 with two pods, an idle
    GPU nobody uses, a counter reset, an exporter gap, node RAPL on one node; all four engines."""
    end = start + hours * 3600
    gpus = [GpuSpec("node-a", i) for i in range(4)]
    gpus += [
        GpuSpec("node-b", 0, "NVIDIA A100-SXM4-80GB", 55.0, 300.0, mig=True),
        GpuSpec("node-b", 1, "NVIDIA A100-SXM4-80GB", 55.0, 300.0),
        GpuSpec("node-b", 2, "NVIDIA A100-SXM4-80GB", 55.0, 300.0, reset_at=start + 3600 * 1.3 + 1.0),
        GpuSpec("node-b", 3, "NVIDIA A100-SXM4-80GB", 55.0, 300.0, gap=(start + 3600 * 1.75, start + 3600 * 2.0 + 300)),
    ]
    m = [x.name for x in MODELS]
    pods = [
        Pod("llama-0", m[0], [("node-a", 0, "")]),
        Pod("mistral-0", m[1], [("node-a", 0, "")]),  # shares GPU 0 with llama-0
        Pod("qwen-tgi-0", m[2], [("node-a", 1, ""), ("node-a", 2, "")]),  # tensor parallel over two GPUs
        Pod("gemma-0", m[3], [("node-a", 3, "")]),
        Pod("tinyllama-0", m[4], [("node-b", 0, "1")]),  # MIG instance 1
        Pod("llama-1", m[0], [("node-b", 0, "2")]),  # MIG instance 2 of the same GPU
        Pod("llama-2", m[0], [("node-b", 2, "")]),  # the counter reset
        Pod("mistral-1", m[1], [("node-b", 3, "")]),  # the exporter gap
    ]
    return Fleet(start, end, gpus, MODELS, pods, scrape_s, seed, rapl_hosts={"node-a"})


def bench_fleet(start: float, days: float = 30.0, nodes: int = 8, scrape_s: float = 30.0, seed: int = 0) -> Fleet:
    """The benchmark's fleet: ``nodes`` x 8 H100, 4 models (vLLM x2, TGI, SGLang), one pod per GPU."""
    gpus = [GpuSpec(f"gpu-{n + 1:02d}", i) for n in range(nodes) for i in range(8)]
    pods = [
        Pod(f"{MODELS[k % 4].name.split('/')[-1].lower()[:12]}-{k}", MODELS[k % 4].name, [(g.host, g.index, "")])
        for k, g in enumerate(gpus)
    ]
    return Fleet(start, start + days * 86400, gpus, MODELS[:4], pods, scrape_s, seed, rapl_hosts={g.host for g in gpus})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write recorded /metrics files of each engine format and the DCGM series")
    p.add_argument("out", help="directory to write")
    p.add_argument("--hours", type=float, default=2.5)
    args = p.parse_args(argv)
    out = Path(args.out)
    f = small_fleet(datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp(), hours=args.hours, scrape_s=60.0)
    for kind in ("energy", "rapl", "vllm", "tgi", "sglang", "llamacpp"):
        write(f, out / f"{'dcgm' if kind == 'energy' else kind}.prom", only=kind, ms=True)
    print(
        f"wrote {out}/: dcgm.prom, rapl.prom, vllm.prom, tgi.prom, sglang.prom, llamacpp.prom "
        f"({args.hours:g} h, 1-minute scrapes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
