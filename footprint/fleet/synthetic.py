"""A synthetic cluster in DCGM-exporter format: OpenMetrics to backfill a real Prometheus, and the sacct file.

Used by the tests (fed with real NVML power logs), the fleet benchmark and the README's demo (fed
with `demo_profiles`, a seeded training-like pattern, so that the demo needs nothing outside the
repository). Every GPU's power is a known function of time (its jobs' profiles, idle otherwise),
integrated on a fine grid into the energy counter that dcgm-exporter would report (mJ, from an
arbitrary value at driver load), so the true energy of every job is known exactly: `truth`.

Run ``python -m footprint.fleet.synthetic OUT_DIR`` for the demo files (metrics.om, sacct.txt).
"""

from __future__ import annotations

import argparse
import io
import uuid as uuidlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from footprint.fleet.slurm import SACCT_FIELDS
from footprint.fleet.telemetry import DcgmNames


@dataclass(frozen=True)
class Profile:
    """Power of a GPU running a job: samples (seconds from the job's start, W), looped; and its idle power."""

    t: np.ndarray
    w: np.ndarray
    idle_w: float
    source: str = ""

    def at(self, dt: np.ndarray, offset: float = 0.0) -> np.ndarray:
        period = float(self.t[-1] - self.t[0]) or 1.0
        return np.interp((dt + offset) % period + self.t[0], self.t, self.w)


@dataclass
class Gpu:
    host: str
    index: int
    model: str
    profile: Profile
    uuid: str = ""
    counter: bool = True  # exports DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (else only the power gauge)
    gone_at: float | None = None  # stops reporting (fell off the bus, node drained)
    reset_at: float | None = None  # the energy counter restarts from 0 (driver reload)

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.index)


@dataclass
class JobSpec:
    job_id: str
    start: float
    end: float | None  # None: running when sacct ran (End=Unknown) until the window's end
    gpus: list[tuple[str, int]]
    user: str = "alice"
    account: str = "proj"
    partition: str = "gpu"
    name: str = "train"
    state: str = "COMPLETED"
    gres_type: str | None = None
    raw_id: str | None = None
    consumed_energy_j: float | None = None


@dataclass
class Cluster:
    start: float
    end: float
    gpus: list[Gpu]
    jobs: list[JobSpec]
    scrape_s: float = 15.0
    fine_s: float = 0.5
    unlabelled_hosts: set[str] = field(default_factory=set)
    cpu_hosts: set[str] = field(default_factory=set)
    extra_sacct_lines: list[str] = field(default_factory=list)  # pending, CPU-only, malformed lines ...
    _holders: Any = field(default=None, init=False, repr=False, compare=False)  # (jobs list's signature, GPU -> jobs)

    # ---- ground truth ---------------------------------------------------------------------------
    def holders(self, gpu: Gpu) -> list[tuple[JobSpec, float, float]]:
        """The jobs on ``gpu`` in job order, from an index of every GPU's jobs made once per jobs list (a scan of
        every job per GPU was 2.6 billion steps at 4,096 GPUs x 30 days)."""
        sig = (id(self.jobs), len(self.jobs), id(self.jobs[-1]) if self.jobs else 0)
        if self._holders is None or self._holders[0] != sig:
            index: dict[tuple[str, int], list[JobSpec]] = {}
            for j in self.jobs:
                for key in dict.fromkeys(j.gpus):
                    index.setdefault(key, []).append(j)
            self._holders = (sig, index)
        end = self.end + 3600.0  # running on
        return [(j, j.start, j.end if j.end is not None else end) for j in self._holders[1].get(gpu.key, [])]

    def power(self, gpu: Gpu, t: np.ndarray) -> np.ndarray:
        """Power (W) at sorted times ``t``: the profile of the job holding the GPU, idle power otherwise."""
        p = np.full(len(t), gpu.profile.idle_w)
        for n, (_, s, e) in enumerate(self.holders(gpu)):
            a, b = np.searchsorted(t, [s, e])
            p[a:b] = gpu.profile.at(t[a:b] - s, offset=37.0 * gpu.index + 101.0 * n)
        return p

    def _fine(self, gpu: Gpu) -> tuple[np.ndarray, np.ndarray]:
        """Fine time grid over the window and the cumulative energy (J) on it."""
        t = np.arange(self.start - 600.0, self.end + 600.0, self.fine_s)
        p = self.power(gpu, t)
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(t))])
        return t, cum

    def energy_j(self, gpu: Gpu, a: float, b: float) -> float:
        t, cum = self._fine(gpu)
        return float(np.interp(b, t, cum) - np.interp(a, t, cum))

    def truth(self) -> dict[str, float]:
        """True GPU energy of every job (J), over the part of its run inside the window."""
        out: dict[str, float] = {}
        for gpu in self.gpus:
            t, cum = self._fine(gpu)
            for job, s, e in self.holders(gpu):
                a, b = max(s, self.start), min(e, self.end)
                if b > a:
                    out[job.job_id] = out.get(job.job_id, 0.0) + float(np.interp(b, t, cum) - np.interp(a, t, cum))
        return out

    # ---- DCGM-exporter samples ------------------------------------------------------------------
    def scrape_times(self, gpu: Gpu) -> np.ndarray:
        jitter = 1.7 * (sorted({g.host for g in self.gpus}).index(gpu.host) % 7)
        t = np.arange(self.start - 240.0 + jitter, self.end + 240.0, self.scrape_s)
        if gpu.gone_at is not None:
            t = t[t < gpu.gone_at]
        return t

    def samples(self, gpu: Gpu) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """(scrape times, counter mJ, power W, job label per scrape)."""
        t = self.scrape_times(gpu)
        tf, cum = self._fine(gpu)
        energy = np.interp(t, tf, cum)
        base = 3.6e6 + 1000.0 * gpu.index  # J since driver load before the window
        counter = (energy + base) * 1000.0
        if gpu.reset_at is not None:
            after = t >= gpu.reset_at
            counter[after] = (energy[after] - float(np.interp(gpu.reset_at, tf, cum))) * 1000.0
        power = np.interp(t, tf, self.power(gpu, tf))
        labels = [""] * len(t)
        if gpu.host not in self.unlabelled_hosts:
            for job, s, e in self.holders(gpu):
                a, b = np.searchsorted(t, [s, e])
                labels[a:b] = [job.raw_id or job.job_id] * int(b - a)
        return t, counter, power, labels

    def lost_to_resets_j(self, gpu: Gpu) -> float:
        """Energy a reset hides from the counter: from the last scrape before the reset to the reset."""
        if gpu.reset_at is None:
            return 0.0
        t = self.scrape_times(gpu)
        before = t[t < gpu.reset_at]
        return self.energy_j(gpu, float(before[-1]), gpu.reset_at) if len(before) else 0.0

    def host_cpu_w(self, host: str, t: np.ndarray) -> np.ndarray:
        busy = np.zeros(len(t))
        for g in self.gpus:
            if g.host == host:
                for _, s, e in self.holders(g):
                    busy += (t >= s) & (t < e)
        return 95.0 + 22.0 * busy


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def _lines(name: str, labels: str, t: np.ndarray, v: np.ndarray, fmt: str) -> str:
    return "".join(f"{name}{labels} {x:{fmt}} {ts:.3f}\n" for x, ts in zip(v.tolist(), t.tolist(), strict=True))


def openmetrics(c: Cluster, names: DcgmNames | None = None, power_gauge: bool = True) -> Iterator[str]:
    """The cluster's DCGM-exporter (and node-exporter RAPL) series as OpenMetrics text, family by family."""
    n = names or DcgmNames()
    per_gpu = {g.key: c.samples(g) for g in c.gpus}

    def gpu_series(g: Gpu, values: np.ndarray, fmt: str, metric: str) -> Iterator[str]:
        t, _, _, labels = per_gpu[g.key]
        base = {n.gpu_label: str(g.index), n.uuid_label: g.uuid, "device": f"nvidia{g.index}", n.model_label: g.model}
        base[n.host_label] = g.host
        # one series per job label (DCGM adds hpc_job while a mapping file names a job), time ordered
        start = 0
        for i in range(1, len(t) + 1):
            if i == len(t) or labels[i] != labels[start]:
                lab = dict(base)
                if labels[start]:
                    lab[n.job_labels[-1]] = labels[start]
                yield _lines(metric, _labels(lab), t[start:i], values[start:i], fmt)
                start = i

    yield f"# TYPE {n.energy_metric} unknown\n"
    for g in c.gpus:
        if g.counter:
            yield from gpu_series(g, per_gpu[g.key][1] * (1e-3 / n.energy_unit_j), ".0f", n.energy_metric)  # mJ -> its unit
    yield f"# TYPE {n.power_metric} gauge\n"
    for g in c.gpus:
        if power_gauge or not g.counter:
            yield from gpu_series(g, per_gpu[g.key][2], ".3f", n.power_metric)
    if c.cpu_hosts:
        for metric, scale in (("node_rapl_package_joules_total", 1.0), ("node_rapl_dram_joules_total", 0.18)):
            yield f"# TYPE {metric.removesuffix('_total')} counter\n"
            for host in sorted(c.cpu_hosts):
                t = np.arange(c.start - 240.0 + 3.1, c.end + 240.0, c.scrape_s)
                tf = np.arange(c.start - 600.0, c.end + 600.0, 1.0)
                p = c.host_cpu_w(host, tf) * scale
                cum = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]))]) + 5e5
                lab = _labels(
                    {"index": "0", "path": "/sys/class/powercap/intel-rapl:0", "instance": f"{host}:9100", "job": "node"}
                )
                yield _lines(metric, lab, t, np.interp(t, tf, cum), ".3f")
    yield "# EOF\n"


def write_openmetrics(c: Cluster, path: str | Path, names: DcgmNames | None = None, power_gauge: bool = True) -> Path:
    from footprint.outputs import atomic_path

    p = Path(path)
    with atomic_path(p) as tmp, tmp.open("w") as f:
        for block in openmetrics(c, names, power_gauge):
            f.write(block)
    return p


def _ts(t: float | None) -> str:
    return "Unknown" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(s: float) -> str:
    s = int(round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{sec:02d}"


def _hostlist(hosts: list[str]) -> str:
    """A compact SLURM hostlist (prefix[a-b,c]) for hosts sharing a prefix and digit width."""
    import re

    groups: dict[tuple[str, int], list[int]] = {}
    plain = []
    for h in hosts:
        m = re.fullmatch(r"(.*?)(\d+)", h)
        if m:
            groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
        else:
            plain.append(h)
    out = plain[:]
    for (prefix, width), nums in groups.items():
        nums = sorted(set(nums))
        if len(nums) == 1:
            out.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs, a, prev = [], nums[0], nums[0]
        for x in [*nums[1:], None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            runs.append(f"{a:0{width}d}" + (f"-{prev:0{width}d}" if prev != a else ""))
            if x is not None:
                a = prev = x
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)


def sacct_text(c: Cluster) -> str:
    """The jobs as `sacct --parsable2 --format=...` prints them (job line, batch/extern/step lines)."""
    buf = io.StringIO()
    buf.write("|".join(SACCT_FIELDS) + "\n")
    for j in c.jobs:
        hosts = list(dict.fromkeys(h for h, _ in j.gpus))
        ngpu = len(j.gpus)
        typed = f"gres/gpu:{j.gres_type}={ngpu}," if j.gres_type else ""
        tres = f"billing={8 * ngpu},cpu={8 * ngpu},{typed}gres/gpu={ngpu},mem={64 * ngpu}G,node={len(hosts)}"
        end = j.end
        elapsed = (end if end is not None else c.end) - j.start
        state = j.state if end is not None else "RUNNING"
        energy = "" if j.consumed_energy_j is None else f"{j.consumed_energy_j:.0f}"
        row = [j.job_id, j.raw_id or j.job_id, j.name, j.user, j.account, j.partition, _ts(j.start), _ts(end)]
        row += [_elapsed(elapsed), tres, _hostlist(hosts), state, ""]
        buf.write("|".join(row) + "\n")
        for step, st in (("batch", "COMPLETED"), ("extern", "COMPLETED"), ("0", "COMPLETED")):
            srow = [f"{j.job_id}.{step}", f"{j.raw_id or j.job_id}.{step}", step, "", j.account, "", _ts(j.start), _ts(end)]
            srow += [_elapsed(elapsed), tres, _hostlist(hosts if step != "batch" else hosts[:1])]
            srow += [st if end is not None else "RUNNING", energy if step == "extern" else ""]
            buf.write("|".join(srow) + "\n")
    for line in c.extra_sacct_lines:
        buf.write(line + "\n")
    return buf.getvalue()


# ---- the demo cluster ------------------------------------------------------------------------------


def demo_profiles(seed: int = 0) -> dict[str, Profile]:
    """Training-like power patterns (W) for the demo and the benchmark: no file outside the repository.

    A steady compute phase near the card's typical training draw with step-to-step noise, a short
    dip every few minutes (evaluation, checkpoint); idle power from the same card family. Shapes,
    not measurements: the tests use real NVML logs instead.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for model, busy, idle in (("NVIDIA A100-SXM4-80GB", 330.0, 62.0), ("NVIDIA H100 80GB HBM3", 560.0, 72.0)):
        t = np.arange(0.0, 600.0, 1.0)
        w = busy + rng.normal(0.0, 0.04 * busy, len(t))
        w[(t % 300) > 285] = idle + 0.3 * (busy - idle)
        out[model] = Profile(t, np.clip(w, idle, None), idle, "synthetic (footprint.fleet.synthetic.demo_profiles)")
    return out


def random_cluster(
    start: float,
    days: float,
    nodes: int,
    gpus_per_node: int,
    profiles: dict[str, Profile],
    scrape_s: float = 30.0,
    seed: int = 0,
    fine_s: float = 5.0,
    job_hours: tuple[float, float] = (1 / 3, 12.0),
    job_gpus: tuple[int, ...] = (1, 2, 4, 8),
) -> Cluster:
    """Nodes of ``gpus_per_node`` GPUs and a seeded stream of jobs (``job_gpus`` GPUs each, at most a node's,
    ``job_hours`` long) filling them ~70 %."""
    rng = np.random.default_rng(seed)
    models = list(profiles)
    gpus = []
    for n in range(nodes):
        model = models[n % len(models)]
        for i in range(gpus_per_node):
            u = uuidlib.UUID(int=(int(rng.integers(0, 2**62)) << 64) | (n * 64 + i), version=4)
            gpus.append(Gpu(f"gpu-{n + 1:02d}", i, model, profiles[model], uuid=f"GPU-{u}"))
    end = start + days * 86400
    jobs: list[JobSpec] = []
    free_at = {g.key: start for g in gpus}
    users = ["alice", "bob", "carol", "dave", "erin"]
    jid = 5000
    for n in range(nodes):
        host = f"gpu-{n + 1:02d}"
        t = start + float(rng.uniform(0, 1800))
        while t < end:
            k = int(rng.choice([k for k in job_gpus if k <= gpus_per_node] or [1]))
            dur = float(rng.uniform(job_hours[0] * 3600, job_hours[1] * 3600))
            idle = [i for i in range(gpus_per_node) if free_at[(host, i)] <= t]
            if len(idle) >= k:
                chosen = sorted(rng.choice(idle, size=k, replace=False).tolist())
                jend = t + dur
                u = users[int(rng.integers(len(users)))]
                jobs.append(
                    JobSpec(
                        str(jid), t, jend if jend < end else None, [(host, i) for i in chosen], user=u, account=f"proj-{u[0]}"
                    )
                )
                jid += 1
                for i in chosen:
                    free_at[(host, i)] = jend
            t += float(rng.exponential(dur * 0.45 / max(gpus_per_node / k, 1)))
    return Cluster(start, end, gpus, jobs, scrape_s=scrape_s, fine_s=fine_s)


def demo_cluster() -> Cluster:
    """The README's cluster: 3 nodes x 4 GPUs over 6 hours, jobs of 4 users, one node without job labels."""
    profiles = demo_profiles()
    start = datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp()
    c = random_cluster(start, 0.25, 3, 4, profiles, scrape_s=30.0, seed=7, fine_s=2.0, job_hours=(0.25, 2.5))
    c.unlabelled_hosts = {"gpu-03"}
    c.cpu_hosts = {"gpu-01", "gpu-02"}
    for j in c.jobs:
        j.gres_type = "a100" if j.gpus[0][0] != "gpu-02" else "h100"
    return c


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Write the demo cluster: metrics.om (OpenMetrics for promtool), sacct.txt, prometheus.yml"
    )
    p.add_argument("out", help="directory to write")
    args = p.parse_args(argv)
    from footprint.outputs import check_dir_target, write_text

    out = check_dir_target(args.out)
    c = demo_cluster()
    write_openmetrics(c, out / "metrics.om")
    write_text(out / "sacct.txt", sacct_text(c))
    write_text(out / "prometheus.yml", "global:\n  scrape_interval: 1h\nscrape_configs: []\n")  # no target: backfilled data only
    nodes = len({g.host for g in c.gpus})
    print(f"wrote {out}/: metrics.om, sacct.txt, prometheus.yml; {len(c.gpus)} GPUs on {nodes} nodes, {len(c.jobs)} jobs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
