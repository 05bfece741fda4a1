"""The ledger rows and device rows of a chunk of jobs, built as columns from the jobs' evaluated energies.

The aggregated import writes ~600,000 jobs for a 4,096-GPU month: a dict per row, per device and per note
cost ~150 µs a job. Here a chunk's (job, device) pairs are typed arrays; sums, counts, seconds and methods
per job are `np.bincount`s over them; device attributes are looked up by index in per-device tables
built once; only what is irregular per job (GPUs SLURM allocated that no telemetry measured, the most
common GPU name, notes) is a short loop over the job's own few entries. The numbers are those the run
record path gives (`importer._write_job` + `_finish`, tested equal).
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import chain, repeat
from typing import Any

import numpy as np

from footprint.fleet.jobtable import SOURCES, JobTable
from footprint.fleet.store import job_gpus_schema
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


def _note_text(notes: list[str]) -> str | None:
    """A job's notes as the ledger's ``notes`` column holds them: each once, in order, joined (None: none)."""
    return "; ".join(dict.fromkeys(notes)) or None


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
        gpu = [d.kind in (GPU_COUNTER, GPU_GAUGE) for d in devices]
        self.comp = np.array([_COMP.get(d.kind, 0) for d in devices], np.int8).reshape(n)
        self.host = [d.host for d in devices]
        hosts = {h: i for i, h in enumerate(dict.fromkeys(self.host))}
        self.host_ids = hosts  # host -> its code
        self.host_code = np.array([hosts[h] for h in self.host], np.int64).reshape(n)
        self.model = [d.model for d in devices]
        self.method = [method_name(d) for d in devices]  # how each meter measured (the ledger's method names)
        names = sorted({m for m, g in zip(self.method, gpu, strict=True) if g})
        self.methods = names  # the GPU methods, each a bit of a job's mask
        self.method_bit = np.array([1 << names.index(m) if m in names else 0 for m in self.method], np.int64).reshape(n)
        index = [d.gpu_index if g else None for d, g in zip(devices, gpu, strict=True)]
        uuid = [
            (d.uuid or f"{d.host}:gpu{d.gpu_index}") if g else f"{d.host}:{KIND_NAMES[d.kind]}"
            for d, g in zip(devices, gpu, strict=True)
        ]
        # a device row's name: a GPU's model (None: from the job's GPU type), a host meter's own name
        name = [
            (d.model or None) if g else f"{d.host} {KIND_NAMES[d.kind].upper()} (node meter)"
            for d, g in zip(devices, gpu, strict=True)
        ]
        self.name = _objects(name)
        codes = {v: i for i, v in enumerate(dict.fromkeys(x for x in name if x is not None))}
        self.name_code = np.array([codes.get(x, -1) if x is not None else -1 for x in name], np.int64).reshape(n)
        self.name_values = _objects(list(codes))
        # a device's own job_gpus cells (the same for every job), typed once: a chunk's rows take them (Arrow)
        rows = {
            "uuid": uuid,
            "index": index,
            "host": self.host,
            "component": [_COMP_NAMES[c] for c in self.comp.tolist()],
            "method": [m if g else HOST_METHOD for m, g in zip(self.method, gpu, strict=True)],
            "notes": [None if g else HOST_NOTE for g in gpu],
        }
        import pyarrow as pa

        schema = job_gpus_schema()
        self.rows = {c: pa.array(v, schema.field(c).type) for c, v in rows.items()}


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), object)
    out[:] = values
    return out


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
        self._allocs: dict[int, tuple[int, int, str | None]] = {}  # sacct allocation -> (its one host's code, GPUs, nodes)

    def _type(self, gres: str | None) -> str | None:
        if gres not in self._types:
            self._types[gres] = type_name(gres, self.gpu_types)
        return self._types[gres]

    def _alloc(self, code: int, row: int) -> tuple[int, int, str | None]:
        if code not in self._allocs:
            self._allocs[code] = self._gpus_of(self.jobs.sacct.hosts(row)[0])
        return self._allocs[code]

    def _gpus_of(self, gbh: Any) -> tuple[int, int, str | None]:
        """GPUs per node as (the one node's host code: -1 several nodes, -2 none, -3 a node no device is on; the
        GPUs; the nodes joined)."""
        host = -2 if not gbh else self.dev.host_ids.get(next(iter(gbh)), -3) if len(gbh) == 1 else -1
        return host, sum(gbh.values()), ",".join(gbh) or None

    def columns(
        self, jobs: range, pair_j: dict[tuple[int, int], float], pair_s: dict[tuple[int, int], float]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The chunk's ledger columns (`store.index_table`'s input) and job_gpus columns (`store.job_gpus_table`'s):
        per job, its measured devices by device id, then the GPUs SLURM allocated that no telemetry measured. A
        job on one node whose measured GPUs there are all it was allocated, of one named model, with full coverage
        is written from the columns alone (its own notes, where it has some, joined one job at a time: every job
        known from its label alone has one); the others (`_irregular`) one by one."""
        t, dv = self.jobs, self.dev
        j0, n = jobs.start, len(jobs)
        k = len(pair_j)
        flat = np.fromiter(chain.from_iterable(pair_j), np.int64, 2 * k).reshape(k, 2)
        pj, pd_ = flat[:, 0] - j0, flat[:, 1]
        pe = np.fromiter(pair_j.values(), np.float64, k)
        ps = np.fromiter(map(pair_s.get, pair_j, repeat(0.0)), np.float64, k)
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
        keys = _objects(t.key[j0 : j0 + n])
        names_p = dv.name[pd_]
        g: dict[str, Any] = {
            "job_id": keys[pj],
            "name": names_p,
            "measured": np.ones(len(pd_), bool),
            "energy_j": pe,
            "duration_s": np.where(gpu, ps, np.nan),
        }
        # the regular jobs' columns, then the others' one by one
        host, want, nodes = self._nodes(j0, n)
        pg, dg = pj[gpu], pd_[gpu]
        have = np.bincount(pg[dv.host_code[dg] == host[pg]], minlength=n)
        code = dv.name_code[dg]
        first_name = np.full(n, -1, np.int64)  # the name of each job's first measured GPU
        if len(code):
            first_name = code[np.minimum(np.searchsorted(pg, np.arange(n)), len(code) - 1)]
        odd = np.bincount(pg[(code != first_name[pg]) | (code < 0)], minlength=n) > 0  # mixed or unnamed GPUs
        gpu_count = counts[0].astype(np.int64)
        start, end = (np.frombuffer(x, np.float64)[j0 : j0 + n] for x in (t.start, t.end))
        allocated = np.maximum(end - start, 0.0) * gpu_count
        with np.errstate(divide="ignore", invalid="ignore"):
            coverage = np.where(allocated > 0, gpu_seconds / allocated, np.nan)
        irregular = (host == -1) | (host == -3) | (have < want) | odd | (coverage < 0.99)
        no_meter = (counts[1] == 0) & (counts[2] == 0)
        gpu_name = np.full(n, None, object)
        gpu_name[first_name >= 0] = dv.name_values[first_name[first_name >= 0]]
        cols = {
            "gpu_count": gpu_count,
            "gpu_name": gpu_name,
            "nodes": nodes,
            "notes": np.where(no_meter, NO_HOST_METER, None),
            "coverage": coverage,
        }
        if t.notes:  # a regular job with notes of its own (every job known from its label alone): only its notes
            noted = np.isin(np.arange(j0, j0 + n), np.fromiter(t.notes, np.int64, len(t.notes))) & ~irregular
            for i in np.flatnonzero(noted).tolist():
                notes = [*t.notes.get(j0 + i, ()), *([NO_HOST_METER] if no_meter[i] else [])]
                cols["notes"][i] = _note_text(notes)
        extra = self._irregular(np.flatnonzero(irregular).tolist(), j0, pj, pd_, gpu, names_p, counts, gpu_seconds, cols)
        import pyarrow as pa

        own = pa.array(pd_)  # each row's device, whose own cells it takes
        for c, cells in dv.rows.items():
            g[c] = cells.take(own)
        if extra:  # unmeasured rows: after their job's measured ones (a stable sort by job)
            rows_ = np.argsort(np.concatenate([pj, np.array([i for i, _ in extra], np.int64)]), kind="stable")
            for c in g:
                more = [r[c] for _, r in extra]
                if isinstance(g[c], pa.Array):
                    g[c] = pa.concat_arrays([g[c], pa.array(more, g[c].type)]).take(pa.array(rows_))
                else:
                    g[c] = np.concatenate([g[c], _objects(more)])[rows_]
        return self._ledger(jobs, sums, counts, kinds, cols), g

    def _nodes(self, j0: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Jobs ``j0``... ``j0 + n - 1``: their one node's host code (`_gpus_of`), GPUs allocated and nodes joined,
        SLURM's per distinct allocation, label-only jobs' from the GPUs that carried their label."""
        t = self.jobs
        rows = np.frombuffer(t.row, np.int32)[j0 : j0 + n].astype(np.int64)
        host, want = np.full(n, -1, np.int64), np.zeros(n, np.int64)
        nodes = np.full(n, None, object)
        slurm = rows >= 0
        if slurm.any():
            alloc = np.frombuffer(t.sacct.alloc, np.int32)[rows[slurm]]
            codes, first = np.unique(alloc, return_index=True)
            info = [self._alloc(c, r) for c, r in zip(codes.tolist(), rows[slurm][first].tolist(), strict=True)]
            at = np.searchsorted(codes, alloc)
            host[slurm] = np.array([x[0] for x in info], np.int64)[at]
            want[slurm] = np.array([x[1] for x in info], np.int64)[at]
            nodes[slurm] = _objects([x[2] for x in info])[at]
        for i in np.flatnonzero(~slurm).tolist():
            host[i], want[i], nodes[i] = self._gpus_of(t.label_gpus[j0 + i])
        return host, want, nodes

    def _irregular(
        self,
        which: list[int],
        j0: int,
        pj: np.ndarray,
        pd_: np.ndarray,
        gpu: np.ndarray,
        names_p: np.ndarray,
        counts: list[np.ndarray],
        gpu_seconds: np.ndarray,
        cols: dict[str, Any],
    ) -> list[tuple[int, dict[str, Any]]]:
        """The ledger columns of these jobs (chunk positions) one by one, and their unmeasured GPUs' rows."""
        t, dv = self.jobs, self.dev
        extra: list[tuple[int, dict[str, Any]]] = []
        bounds = np.searchsorted(pj, np.arange(len(counts[0]) + 1)).tolist()
        for i in which:
            j = j0 + i
            lo, hi = bounds[i], bounds[i + 1]
            mine = [p for p in range(lo, hi) if gpu[p]]
            for p in mine:  # a GPU without a model: the job's GPU type on its node
                if names_p[p] is None:
                    names_p[p] = self._type(self._types_by_host(j).get(dv.host[pd_[p]])) or "unknown GPU"
            names = [names_p[p] for p in mine]
            hosts = [dv.host[pd_[p]] for p in mine]
            notes = list(t.notes.get(j, ()))
            gbh = self._gpus_by_host(j)
            for host, want in gbh.items():
                have = hosts.count(host)
                if want > have:
                    name = self._host_model.get(host) or self._type(self._types_by_host(j).get(host)) or "unknown GPU"
                    names += [name] * (want - have)
                    for x in range(want - have):
                        row = unmeasured(t.key[j], host, x, name)
                        row.update(job_id=t.key[j], duration_s=None, notes=UNMEASURED_NOTE)
                        extra.append((i, row))
                    if host in self.plan.labelled_hosts:
                        notes.append(unlabelled_note(host, want, have))
            if not counts[1][i] and not counts[2][i]:
                notes.append(NO_HOST_METER)
            allocated = max(t.end[j] - t.start[j], 0.0) * len(names)
            cov = float(gpu_seconds[i]) / allocated if allocated > 0 else math.nan
            if cov < 0.99:
                notes.append(coverage_note(cov))
            cols["coverage"][i] = cov
            cols["gpu_count"][i] = len(names)
            cols["gpu_name"][i] = (names[0] if len(set(names)) == 1 else Counter(names).most_common(1)[0][0]) if names else None
            cols["nodes"][i] = ",".join(gbh) or None
            cols["notes"][i] = _note_text(notes)
        return extra

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
            "coverage": cols["coverage"],
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
