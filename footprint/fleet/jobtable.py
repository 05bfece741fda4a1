"""The import's job table in columns: what `attribution.Plan` knows of every job, without an object per job.

A row holds the job's key, where it came from (SLURM or a telemetry label), its window inside the import
window (typed arrays) and its row in the sacct table (`sacct_jobs.SacctJobs`), from which its ids, GPUs
per node and GPU types are read; only label-only jobs keep a dict of their GPUs, and only jobs with notes
keep a list. ``table[j]`` is a `Job`: a view that reads and writes the row, held by nobody.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence

from footprint.fleet.sacct_jobs import Rows, SacctJobs
from footprint.fleet.slurm import SlurmJob

SLURM, LABEL = 0, 1
SOURCES = ("slurm", "label")


class JobTable(Rows["Job"]):
    def __init__(self, sacct: SacctJobs | None = None) -> None:
        self.sacct = sacct if sacct is not None else SacctJobs()
        self.key: list[str] = []
        self.source = bytearray()
        self.start = array("d")
        self.end = array("d")
        self.row = array("i")  # the job's row in ``sacct`` (-1: known from its label only)
        self.label_gpus: dict[int, dict[str, int]] = {}
        self.notes: dict[int, list[str]] = {}

    def add(self, key: str, source: int, start: float, end: float, row: int = -1, notes: list[str] | None = None) -> int:
        j = len(self.key)
        self.key.append(key)
        self.source.append(source)
        self.start.append(start)
        self.end.append(end)
        self.row.append(row)
        if notes:
            self.notes[j] = list(notes)
        if source == LABEL:
            self.label_gpus[j] = {}
        return j

    def __len__(self) -> int:
        return len(self.key)

    def _at(self, j: int) -> Job:
        return Job(self, j)


class Job:
    """Job ``j`` of a `JobTable`: its window inside the import window, GPUs per node (allocated by SLURM, or
    those that carried its label), notes."""

    __slots__ = ("_t", "j")

    def __init__(self, table: JobTable, j: int) -> None:
        self._t, self.j = table, j

    @property
    def key(self) -> str:
        return self._t.key[self.j]

    @property
    def source(self) -> str:
        return SOURCES[self._t.source[self.j]]

    @property
    def ids(self) -> tuple[str, ...]:
        row = self._t.row[self.j]
        return self._t.sacct.ids(row) if row >= 0 else (self.key,)

    @property
    def start(self) -> float:
        return self._t.start[self.j]

    @start.setter
    def start(self, t: float) -> None:
        self._t.start[self.j] = t

    @property
    def end(self) -> float:
        return self._t.end[self.j]

    @end.setter
    def end(self, t: float) -> None:
        self._t.end[self.j] = t

    @property
    def slurm(self) -> SlurmJob | None:
        row = self._t.row[self.j]
        return self._t.sacct[row] if row >= 0 else None

    @property
    def gpus_by_host(self) -> Mapping[str, int]:
        """Read-only for SLURM jobs (shared by every job with the same allocation); a dict for label-only jobs."""
        row = self._t.row[self.j]
        return self._t.sacct.hosts(row)[0] if row >= 0 else self._t.label_gpus[self.j]

    @property
    def types_by_host(self) -> Mapping[str, str]:
        row = self._t.row[self.j]
        return self._t.sacct.hosts(row)[1] if row >= 0 else {}

    @property
    def notes(self) -> Sequence[str]:
        return tuple(self._t.notes.get(self.j, ()))

    def note(self, text: str) -> None:
        self._t.notes.setdefault(self.j, []).append(text)

    @property
    def gpu_count(self) -> int:
        return sum(self.gpus_by_host.values())

    @property
    def duration_s(self) -> float:
        return max(self.end - self.start, 0.0)


class LabelJobs:
    """Label id -> the jobs it names: one int a label (most name one job), a list only where it names several."""

    def __init__(self) -> None:
        self.one = array("i")  # the job, -1: none or several
        self.many: dict[int, list[int]] = {}

    def set(self, lab: int, jobs: list[int]) -> None:
        if lab >= len(self.one):
            self.one.extend([-1] * (lab + 1 - len(self.one)))
        self.one[lab] = jobs[0] if len(jobs) == 1 else -1
        if len(jobs) > 1:
            self.many[lab] = jobs

    def get(self, lab: int, default: Sequence[int] = ()) -> Sequence[int]:
        if 0 <= lab < len(self.one) and self.one[lab] >= 0:
            return (self.one[lab],)
        return self.many.get(lab, default)

    def __getitem__(self, lab: int) -> Sequence[int]:
        return self.get(lab)

    def items(self) -> Iterator[tuple[int, Sequence[int]]]:
        """(label, jobs) of every label that names a job."""
        for lab in range(len(self.one)):
            jobs = self.get(lab)
            if jobs:
                yield lab, jobs
