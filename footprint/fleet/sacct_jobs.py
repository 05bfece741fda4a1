"""sacct's GPU jobs: one as a `SlurmJob`, all of them as columns (a month of a cluster's jobs without a Python
object per job).

A `SlurmJob` with its allocation, strings and floats costs ~800 B; a row here costs ~100 B: times and
energies in typed arrays, repeated strings (user, account, partition, state, job name) as codes into a
table of distinct values, and the allocation (nodes, GPUs per node, GPU type) as a code into a table of
distinct allocations, which a cluster repeats job after job. Notes are kept only for the jobs that
have some. Indexing gives a `SlurmJob` back, built on demand and dropped by the caller.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, overload

import numpy as np

_NAN = math.nan


@dataclass(frozen=True, slots=True)
class Allocation:
    """GPUs a job (or a het-job component) holds: ``gpus_per_node`` on each of ``nodes``."""

    nodes: tuple[str, ...]
    gpus_per_node: tuple[int, ...]
    gpu_type: str | None


@dataclass(slots=True)
class SlurmJob:
    job_id: str  # as sacct prints it: 1001, 1003_2 (array task), 1010 (het job, components folded)
    raw_id: str | None
    name: str | None
    user: str | None
    account: str | None
    partition: str | None
    state: str
    start: float
    end: float | None  # None: still running when sacct ran
    elapsed_s: float | None
    allocations: list[Allocation]
    consumed_energy_j: float | None = None
    consumed_energy_from: str | None = None
    line: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_count(self) -> int:
        return sum(sum(a.gpus_per_node) for a in self.allocations)

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(n for a in self.allocations for n in a.nodes))

    @property
    def ids(self) -> set[str]:
        """Every id a job label may carry for this job (sacct's JobID and JobIDRaw)."""
        return {self.job_id} | ({self.raw_id} if self.raw_id else set())

    def gpus_on(self) -> dict[str, list[tuple[int, str | None]]]:
        """node -> [(count, gres type)] over the job's allocations."""
        out: dict[str, list[tuple[int, str | None]]] = {}
        for a in self.allocations:
            for n, k in zip(a.nodes, a.gpus_per_node, strict=True):
                if k:
                    out.setdefault(n, []).append((k, a.gpu_type))
        return out


class Codes:
    """Distinct values and their codes (0 is None): each string held once however many rows repeat it."""

    def __init__(self) -> None:
        self.values: list[Any] = [None]
        self._ids: dict[Any, int] = {None: 0}

    def code(self, value: Any) -> int:
        i = self._ids.get(value)
        if i is None:
            i = self._ids[value] = len(self.values)
            self.values.append(value)
        return i


def _coded(column: Any, code: Any, by_id: bool = False) -> np.ndarray:
    """A column's codes (int32) from (distinct values, each row's index), or from a list, each distinct value (each
    object, ``by_id``: allocation tuples hashed once each, not once a row) coded once, in order of first appearance."""
    if isinstance(column, tuple):
        values, index = column
        codes = np.array([code(v) for v in values], np.int32)
        return codes[index] if len(codes) else np.zeros(len(index), np.int32)
    key: Any = id if by_id else (lambda v: v)
    distinct = {key(v): code(v) for v in {key(v): v for v in column}.values()}
    return np.array([distinct[key(v)] for v in column], np.int32).reshape(len(column))


def _num(x: float | None) -> float:
    return _NAN if x is None else float(x)


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else x


T = TypeVar("T")


class Rows(Sequence[T]):
    """A sequence whose items are made from columns on demand (`_at`), and dropped by the caller."""

    def _at(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._at(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._at(i)

    def __iter__(self) -> Iterator[T]:
        return (self._at(i) for i in range(len(self)))


class SacctJobs(Rows[SlurmJob]):
    """The jobs of a `SacctResult`, in columns; ``jobs[i]`` is the i-th as a `SlurmJob`."""

    _TEXT = ("name", "user", "account", "partition", "state", "consumed_energy_from")
    _FLOAT = ("start", "end", "elapsed_s", "consumed_energy_j")

    def __init__(self) -> None:
        self.job_id: list[str] = []
        self.raw_id: list[str | None] = []  # the job id's own string object where they are equal
        self.text = {k: array("i") for k in self._TEXT}
        self.codes = {k: Codes() for k in self._TEXT}
        self.num = {k: array("d") for k in self._FLOAT}
        self.line = array("i")
        self.alloc = array("i")
        self.allocs = Codes()  # tuple[Allocation, ...] per distinct allocation set
        self.notes: dict[int, list[str]] = {}
        self._hosts: dict[int, tuple[Any, Any]] = {}

    @classmethod
    def of(cls, jobs: Iterable[SlurmJob]) -> SacctJobs:
        if isinstance(jobs, SacctJobs):
            return jobs
        out = cls()
        for sj in jobs:
            out.append(sj)
        return out

    def append(self, sj: SlurmJob) -> int:
        i = len(self.job_id)
        self.job_id.append(sj.job_id)
        self.raw_id.append(sj.job_id if sj.raw_id == sj.job_id else sj.raw_id)
        for k in self._TEXT:
            self.text[k].append(self.codes[k].code(getattr(sj, k)))
        for k in self._FLOAT:
            self.num[k].append(_num(getattr(sj, k)))
        self.line.append(sj.line)
        self.alloc.append(self.allocs.code(tuple(sj.allocations)))
        if sj.notes:
            self.notes[i] = list(sj.notes)
        return i

    def __len__(self) -> int:
        return len(self.job_id)

    def _at(self, i: int) -> SlurmJob:
        text = {k: self.codes[k].values[self.text[k][i]] for k in self._TEXT}
        num = {k: _opt(self.num[k][i]) for k in self._FLOAT}
        start = num.pop("start")
        assert start is not None
        return SlurmJob(
            job_id=self.job_id[i],
            raw_id=self.raw_id[i],
            **text,
            start=start,
            **num,
            allocations=list(self.allocs.values[self.alloc[i]]),
            line=self.line[i],
            notes=list(self.notes.get(i, ())),
        )

    def column(self, key: str) -> np.ndarray:
        """A float column (start, end, elapsed_s, consumed_energy_j) as an array, NaN where sacct gave none."""
        return np.frombuffer(self.num[key], dtype=np.float64) if len(self) else np.zeros(0)

    def ids(self, i: int) -> tuple[str, ...]:
        """The ids a job label may carry for job ``i`` (JobID and JobIDRaw), sorted."""
        raw = self.raw_id[i]
        return tuple(sorted({self.job_id[i], raw})) if raw else (self.job_id[i],)

    def hosts(self, i: int) -> tuple[Any, Any]:
        """Job ``i``'s GPUs per node and GPU type per node (only the nodes with one type), read-only and shared by
        every job with the same allocation."""
        code = self.alloc[i]
        if code not in self._hosts:
            gpus: dict[str, int] = {}
            types: dict[str, set[str]] = {}
            for a in self.allocs.values[code]:
                for n, k in zip(a.nodes, a.gpus_per_node, strict=True):
                    if k:
                        gpus[n] = gpus.get(n, 0) + k
                        types.setdefault(n, set()).update([a.gpu_type] if a.gpu_type else [])
            one = {n: next(iter(t)) for n, t in types.items() if len(t) == 1}
            self._hosts[code] = (MappingProxyType(gpus), MappingProxyType(one))
        return self._hosts[code]

    def gpu_count(self, i: int) -> int:
        return sum(self.hosts(i)[0].values())

    def set_energy(self, i: int, joules: float, source: str) -> None:
        self.num["consumed_energy_j"][i] = joules
        self.text["consumed_energy_from"][i] = self.codes["consumed_energy_from"].code(source)

    def gpu_counts(self) -> np.ndarray:
        """Every row's GPU count (from its allocation's, computed once per distinct allocation)."""
        per_alloc = np.array([sum(sum(a.gpus_per_node) for a in allocs) for allocs in self.allocs.values[1:]], np.int64)
        per_alloc = np.concatenate([np.zeros(1, np.int64), per_alloc])
        return per_alloc[np.frombuffer(self.alloc, np.int32)] if len(self) else np.zeros(0, np.int64)

    def extend(self, rows: dict[str, Any], notes: dict[int, list[str]]) -> range:
        """Many rows at once, as columns: ``job_id`` and ``raw_id`` (lists of str or None), the text columns (lists
        of str or None, or (distinct values, each row's index into them)), the float columns and ``line`` (arrays),
        ``alloc`` (a list of allocation tuples, or (distinct ones, indices)) and the notes of some rows (by their
        position among these)."""
        i0, n = len(self), len(rows["job_id"])
        self.job_id += rows["job_id"]
        self.raw_id += [j if r == j else r for j, r in zip(rows["job_id"], rows["raw_id"], strict=True)]
        for k in self._TEXT:
            self.text[k].frombytes(_coded(rows[k], self.codes[k].code).tobytes())
        for k in self._FLOAT:
            self.num[k].frombytes(np.ascontiguousarray(rows[k], np.float64).tobytes())
        self.line.frombytes(np.ascontiguousarray(rows["line"], np.int32).tobytes())
        self.alloc.frombytes(_coded(rows["alloc"], self.allocs.code, by_id=True).tobytes())
        self.notes.update({i0 + i: list(v) for i, v in notes.items()})
        return range(i0, i0 + n)

    def take(self, order: Sequence[int]) -> SacctJobs:
        """These rows, in this order (the tables of distinct values are kept as they are)."""
        out = SacctJobs()
        out.codes, out.allocs = self.codes, self.allocs
        idx = np.asarray(order, np.int64)
        out.job_id = [self.job_id[i] for i in idx]  # one index at a time: no list of a million ints
        out.raw_id = [self.raw_id[i] for i in idx]

        def pick(col: array, dtype: type) -> array:
            a = array(col.typecode)
            if len(idx):
                a.frombytes(np.frombuffer(col, dtype)[idx].tobytes())
            return a

        for k in self._TEXT:
            out.text[k] = pick(self.text[k], np.int32)
        for k in self._FLOAT:
            out.num[k] = pick(self.num[k], np.float64)
        out.line = pick(self.line, np.int32)
        out.alloc = pick(self.alloc, np.int32)
        if self.notes:
            where = {old: new for new, old in enumerate(idx.tolist()) if old in self.notes}
            out.notes = {new: self.notes[old] for old, new in where.items()}
        return out
