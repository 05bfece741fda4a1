"""The ledger rows and device rows of a chunk of jobs, built as columns from the jobs' evaluated energies.

The aggregated import writes ~600,000 jobs for a 4,096-GPU month: a dict per row, per device and per note
cost ~150 µs a job. Here a chunk's (job, device) pairs are typed arrays; sums, counts, seconds and methods
per job are `np.bincount`s over them; device attributes are looked up by index in per-device tables
built once; only what is irregular per job (GPUs SLURM allocated that no telemetry measured, the most
common GPU name, notes) is a short loop over the job's own few entries. The numbers are those the run
record path gives (`importer._write_job` + `_finish`, tested equal).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from footprint.fleet.jobtable import SOURCES, JobTable
from footprint.fleet.telemetry import CPU, GPU_COUNTER, GPU_GAUGE, KIND_NAMES, RAM, Device, method_name

HOST_METHOD = "prometheus host counter"  # the method of a job's share of its node's CPU/RAM meter
HOST_NOTE = "node-level counter shared among the node's jobs by their share of its GPUs"
UNMEASURED_NOTE = "allocated by SLURM; no telemetry for this GPU: energy not available (not zero)"
NO_HOST_METER = "host CPU/RAM energy not measured (no RAPL/Kepler series for this job's nodes)"
_COMP = {CPU: 1, RAM: 2}  # component codes: 0 gpu, 1 cpu, 2 ram
_COMP_NAMES = ("gpu", "cpu", "ram")


def type_name(gres_type: str | None, gpu_types: dict[str, str]) -> str | None:
    """The catalogue GPU a SLURM gres type names (``--gpu-type``, case-insensitive), else the type itself."""
    if not gres_type:
        return None
    lower = {k.lower(): v for k, v in gpu_types.items()}
    return lower.get(gres_type.lower(), gres_type)


def unlabelled_note(host: str, k: int, labelled: int) -> str:
    return f"node {host}: {k} GPU(s) allocated, {labelled} carried the job's label; the rest is not measured"


def coverage_note(coverage: float) -> str:
    return f"GPU telemetry covers {coverage:.0%} of the job's allocated GPU-time: its measured energy is a lower bound"


def unmeasured(job: str, host: str, i: int, name: str) -> dict[str, Any]:
    """A GPU SLURM allocated that no telemetry measured: energy not available, never zero."""
    return {
        "uuid": f"slurm:{job}:{host}:{i}",
        "name": name,
        "index": None,
        "host": host,
        "component": "gpu",
        "method": "none",
        "measured": False,
        "energy_j": None,
        "notes": [UNMEASURED_NOTE],
    }


_GPU_IDS: dict[str, str | None] = {}


def catalogue_id(name: str | None) -> str | None:
    """The catalogue id of a GPU name (None when no card answers to it), cached."""
    if not name:
        return None
    if name not in _GPU_IDS:
        from footprint.errors import UnknownGpuError
        from footprint.lca.database import db

        try:
            _GPU_IDS[name] = db().find_gpu(name).id
        except UnknownGpuError:
            _GPU_IDS[name] = None
    return _GPU_IDS[name]


class _Devices:
    """Per-device attributes as tables indexed by device id (built once per import)."""

    def __init__(self, devices: list[Device]) -> None:
        n = len(devices)
        self.comp = np.array([_COMP.get(d.kind, 0) for d in devices], np.int8).reshape(n)
        self.host = [d.host for d in devices]
        self.model = [d.model for d in devices]
        self.method = [method_name(d) for d in devices]  # how each meter measured (the ledger's method names)
        names = sorted({m for m, d in zip(self.method, devices, strict=True) if d.kind in (GPU_COUNTER, GPU_GAUGE)})
        self.methods = names  # the GPU methods, each a bit of a job's mask
        self.method_bit = np.array([1 << names.index(m) if m in names else 0 for m in self.method], np.int64).reshape(n)
        self.index = [d.gpu_index if d.kind in (GPU_COUNTER, GPU_GAUGE) else None for d in devices]
        self.uuid = [
            (d.uuid or f"{d.host}:gpu{d.gpu_index}") if d.kind in (GPU_COUNTER, GPU_GAUGE) else f"{d.host}:{KIND_NAMES[d.kind]}"
            for d in devices
        ]
        self.name = [
            None if d.kind in (GPU_COUNTER, GPU_GAUGE) else f"{d.host} {KIND_NAMES[d.kind].upper()} (node meter)" for d in devices
        ]


class JobRows:
    """Writes the ledger and job_gpus rows of the aggregated import, a chunk of jobs at a time."""

    def __init__(self, plan: Any, gpu_types: dict[str, str], site: dict[str, Any] | None) -> None:
        self.plan = plan
        self.jobs: JobTable = plan.jobs
        self.gpu_types = gpu_types
        self.site = site or {}
        self.dev = _Devices(plan.tel.devices)
        self._types: dict[str | None, str | None] = {}
        self._host_model: dict[str, str | None] = {
            h: next((d.model for d in ds if d.model), None) for h, ds in plan.host_gpus.items()
        }

    def _type(self, gres: str | None) -> str | None:
        if gres not in self._types:
            self._types[gres] = type_name(gres, self.gpu_types)
        return self._types[gres]

    def columns(
        self, jobs: range, pair_j: dict[tuple[int, int], float], pair_s: dict[tuple[int, int], float]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The chunk's ledger columns (`store.index_frame`'s input) and job_gpus columns (`store.job_gpus_frame`'s):
        per job, its measured devices by device id, then the GPUs SLURM allocated that no telemetry measured."""
        t, dv = self.jobs, self.dev
        j0, n = jobs.start, len(jobs)
        k = len(pair_j)
        pj = np.fromiter((x[0] for x in pair_j), np.int64, k) - j0
        pd_ = np.fromiter((x[1] for x in pair_j), np.int64, k)
        pe = np.fromiter(pair_j.values(), np.float64, k)
        ps = np.fromiter((pair_s.get(x, 0.0) for x in pair_j), np.float64, k)
        keep = (pj >= 0) & (pj < n)
        order = np.lexsort((pd_[keep], pj[keep]))  # by job, then device: the rows' order
        pj, pd_, pe, ps = pj[keep][order], pd_[keep][order], pe[keep][order], ps[keep][order]
        comp = dv.comp[pd_]
        gpu = comp == 0
        # sums in the pairs' order from 0.0, as the record path adds them
        sums = [np.bincount(pj[comp == c], weights=pe[comp == c], minlength=n) for c in range(3)]
        counts = [np.bincount(pj[comp == c], minlength=n) for c in range(3)]
        gpu_seconds = np.bincount(pj[gpu], weights=ps[gpu], minlength=n)
        kinds = np.zeros(n, np.int64)  # a bit per GPU method any of the job's measured GPUs used
        for b in range(len(dv.methods)):
            on = gpu & (dv.method_bit[pd_] == 1 << b)
            kinds |= (np.bincount(pj[on], minlength=n) > 0).astype(np.int64) << b
        devs, comps, jl = pd_.tolist(), comp.tolist(), pj.tolist()
        names_p = [dv.model[d] or (self._type(self._types_by_host(j0 + j).get(dv.host[d])) or "unknown GPU") if c == 0
                   else dv.name[d] for d, c, j in zip(devs, comps, jl, strict=True)]  # fmt: skip
        g: dict[str, list[Any]] = {
            "job_id": [t.key[j0 + j] for j in jl],
            "uuid": [dv.uuid[d] for d in devs],
            "name": names_p,
            "index": [dv.index[d] for d in devs],
            "host": [dv.host[d] for d in devs],
            "component": [_COMP_NAMES[c] for c in comps],
            "method": [dv.method[d] if c == 0 else HOST_METHOD for d, c in zip(devs, comps, strict=True)],
            "measured": [True] * len(devs),
            "energy_j": pe.tolist(),
            "duration_s": np.where(gpu, ps, np.nan).tolist(),
            "notes": [None if c == 0 else HOST_NOTE for c in comps],
        }
        at = jl[:]  # each device row's job, to place the unmeasured rows after the job's measured ones
        bounds = np.searchsorted(pj, np.arange(n + 1)).tolist()
        cols: dict[str, list[Any]] = {k: [None] * n for k in ("gpu_count", "gpu_name", "nodes", "notes", "coverage")}
        for i in range(n):
            j = j0 + i
            lo, hi = bounds[i], bounds[i + 1]
            names = [names_p[p] for p in range(lo, hi) if comps[p] == 0]
            hosts = [dv.host[devs[p]] for p in range(lo, hi) if comps[p] == 0]
            notes = list(t.notes.get(j, ()))
            gbh = self._gpus_by_host(j)
            for host, want in gbh.items():
                have = hosts.count(host)
                if want > have:
                    name = self._host_model.get(host) or self._type(self._types_by_host(j).get(host)) or "unknown GPU"
                    names += [name] * (want - have)
                    for x in range(want - have):
                        for c, v in unmeasured(t.key[j], host, x, name).items():
                            g[c].append(v if c != "notes" else UNMEASURED_NOTE)
                        g["job_id"].append(t.key[j])
                        g["duration_s"].append(None)
                        at.append(i)
                    if host in self.plan.labelled_hosts:
                        notes.append(unlabelled_note(host, want, have))
            if not counts[1][i] and not counts[2][i]:
                notes.append(NO_HOST_METER)
            allocated = max(t.end[j] - t.start[j], 0.0) * len(names)
            if allocated > 0:
                cols["coverage"][i] = cov = float(gpu_seconds[i]) / allocated
                if cov < 0.99:
                    notes.append(coverage_note(cov))
            cols["gpu_count"][i] = len(names)
            cols["gpu_name"][i] = (names[0] if len(set(names)) == 1 else Counter(names).most_common(1)[0][0]) if names else None
            cols["nodes"][i] = ",".join(gbh) or None
            cols["notes"][i] = "; ".join(dict.fromkeys(notes)) or None
        if len(at) > len(jl):  # unmeasured rows: moved after their job's measured ones (a stable sort by job)
            rows = np.argsort(np.array(at), kind="stable")
            g = {c: [v[r] for r in rows.tolist()] for c, v in g.items()}
        return self._ledger(jobs, sums, counts, kinds, cols), g

    def _ledger(self, jobs: range, sums: list, counts: list, kinds: Any, cols: dict) -> dict[str, Any]:
        t = self.jobs
        j0, j1 = jobs.start, jobs.stop
        keys = t.key[j0:j1]
        start = np.frombuffer(t.start, np.float64)[j0:j1]
        end = np.frombuffer(t.end, np.float64)[j0:j1]
        energy = [np.where(c > 0, s, np.nan) for s, c in zip(sums, counts, strict=True)]
        known = (counts[0] > 0) | (counts[1] > 0) | (counts[2] > 0)
        total = np.where(counts[0] > 0, sums[0], 0.0) + np.where(counts[1] > 0, sums[1], 0.0)
        total = np.where(known, total + np.where(counts[2] > 0, sums[2], 0.0), np.nan)
        ms = self.dev.methods  # a job's methods joined in sorted order, as the record path joins them
        joined = np.array(["+".join(m for b, m in enumerate(ms) if k >> b & 1) or "none" for k in range(1 << len(ms))], object)
        m = joined[kinds]
        slurm = {k: self._sacct_text(jobs, k) for k in ("name", "user", "account", "partition", "state")}
        account = [a if a else (k.split("/")[0] if "/" in k else None) for a, k in zip(slurm["account"], keys, strict=True)]
        gpu_name = cols["gpu_name"]
        return {
            "job_id": keys,
            "name": [x or k for x, k in zip(slurm["name"], keys, strict=True)],
            "user": slurm["user"],
            "account": account,
            "partition": slurm["partition"],
            "state": slurm["state"],
            "source": [SOURCES[s] for s in t.source[j0:j1]],
            "start": start,
            "end": end,
            "duration_s": np.maximum(end - start, 0.0),
            "gpu_count": cols["gpu_count"],
            "gpu_name": gpu_name,
            "gpu_model": [catalogue_id(x) for x in gpu_name],
            "nodes": cols["nodes"],
            "gpu_energy_j": energy[0],
            "cpu_energy_j": energy[1],
            "ram_energy_j": energy[2],
            "energy_j": total,
            "energy_method": np.where(known, m, "none"),
            "coverage": np.array([np.nan if c is None else c for c in cols["coverage"]], np.float64),
            "grid": [self.site.get("grid")] * len(keys),
            "pue": [self.site.get("pue")] * len(keys),
            "run_dir": [None] * len(keys),
            "notes": cols["notes"],
        }

    def _sacct_text(self, jobs: range, key: str) -> list[str | None]:
        """A text column of sacct's (user, account ...) for these jobs, None for jobs known from a label only."""
        t = self.jobs
        rows = np.frombuffer(t.row, np.int32)[jobs.start : jobs.stop]
        sacct = t.sacct
        if not len(sacct):
            return [None] * len(rows)
        codes = np.frombuffer(sacct.text[key], np.int32)[np.maximum(rows, 0)]
        values = np.array(sacct.codes[key].values, object)
        return np.where(rows >= 0, values[codes], None).tolist()

    def _gpus_by_host(self, j: int) -> Any:
        t = self.jobs
        row = t.row[j]
        return t.sacct.hosts(row)[0] if row >= 0 else t.label_gpus[j]

    def _types_by_host(self, j: int) -> Any:
        t = self.jobs
        row = t.row[j]
        return t.sacct.hosts(row)[1] if row >= 0 else {}
