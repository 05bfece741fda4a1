"""Per job x device spans of the aggregated import, in columns (~30 B each instead of a ~250 B tuple or object).

`LabelSpans`: where each job label was seen on each device (the days of the series index), which the plan
reads as `attribution.Spans`. `Items`: every (job, device, stretch, weight) whose energy the server is
asked for, sorted by job so that a chunk of jobs is a slice; `Item` objects are made for one chunk at a
time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Item:
    """One quantity to evaluate: job ``job`` on device ``dev`` over ``[a, b]`` with weight ``w``."""

    job: int
    dev: int
    a: float
    b: float
    w: float = 1.0


class LabelSpans:
    """(label id, device) -> first and last instant seen, merged over the days it was listed."""

    def __init__(self) -> None:
        self._row: dict[int, int] | None = {}  # (label, device) -> row, for `add`; None: made when first needed
        self.lab, self.dev = array("i"), array("i")
        self.first, self.last = array("d"), array("d")

    def add(self, lab: int, dev: int, a: float, b: float) -> None:
        if self._row is None:
            keys = np.frombuffer(self.lab, np.int32).astype(np.int64) << 32 | np.frombuffer(self.dev, np.int32)
            self._row = dict(zip(keys.tolist(), range(len(keys)), strict=True))
        key = lab << 32 | dev
        i = self._row.get(key)
        if i is None:
            self._row[key] = len(self.lab)
            self.lab.append(lab)
            self.dev.append(dev)
            self.first.append(a)
            self.last.append(b)
        else:
            self.first[i] = min(self.first[i], a)
            self.last[i] = max(self.last[i], b)

    def extend(self, lab: list[int], dev: list[int], a: list[float], b: list[float]) -> None:
        """Many sightings at once, as `add` one by one would keep them (numpy: a month of 4,096 GPUs lists ~10^6)."""
        if not lab:
            return
        if len(self.lab):
            for x in zip(lab, dev, a, b, strict=True):
                self.add(*x)
            return
        key = np.array(lab, np.int64) << 32 | np.array(dev, np.int64)
        order = np.argsort(key, kind="stable")
        k = key[order]
        head = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))  # each key's first sighting, in key order
        first = np.minimum.reduceat(np.array(a, np.float64)[order], head)
        last = np.maximum.reduceat(np.array(b, np.float64)[order], head)
        rows = np.argsort(order[head], kind="stable")  # the rows in the order their keys were first seen
        self.lab.frombytes((k[head][rows] >> 32).astype(np.int32).tobytes())
        self.dev.frombytes((k[head][rows] & 0xFFFFFFFF).astype(np.int32).tobytes())
        self.first.frombytes(first[rows].tobytes())
        self.last.frombytes(last[rows].tobytes())
        self._row = None  # ~100 B a row: made only if `add` is called after

    def items(self) -> Iterator[tuple[int, int, float, float]]:
        return zip(self.lab, self.dev, self.first, self.last, strict=True)

    def __len__(self) -> int:
        return len(self.lab)

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]


class Items:
    """Items in columns, sorted by job."""

    def __init__(self, job: array, dev: array, a: array, b: array, w: array) -> None:
        order = np.argsort(np.frombuffer(job, np.int32), kind="stable") if len(job) else np.zeros(0, np.int64)
        self.job = np.frombuffer(job, np.int32)[order] if len(job) else np.zeros(0, np.int32)
        self.dev = np.frombuffer(dev, np.int32)[order] if len(dev) else np.zeros(0, np.int32)
        self.a, self.b, self.w = (np.frombuffer(x, np.float64)[order] if len(x) else np.zeros(0) for x in (a, b, w))

    def __len__(self) -> int:
        return len(self.job)

    def shared(self) -> np.ndarray:
        """Indices of the items whose stretch another job shares (weight below 1)."""
        return np.nonzero(self.w < 1.0)[0]

    def item(self, i: int) -> Item:
        return Item(int(self.job[i]), int(self.dev[i]), float(self.a[i]), float(self.b[i]), float(self.w[i]))

    def jobs(self, lo: int, hi: int) -> list[Item]:
        """The items of jobs ``lo`` to ``hi - 1``."""
        i, k = np.searchsorted(self.job, [lo, hi])
        return [self.item(x) for x in range(int(i), int(k))]


class ItemsBuilder:
    def __init__(self) -> None:
        self.cols = (array("i"), array("i"), array("d"), array("d"), array("d"))

    def add(self, job: int, dev: int, a: float, b: float, w: float = 1.0) -> None:
        for col, v in zip(self.cols, (job, dev, a, b, w), strict=True):
            col.append(v)

    def extend(self, job: np.ndarray, dev: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> None:
        """Items of one device, as columns."""
        n = len(job)
        for col, v in zip(self.cols, (job.astype(np.int32), np.full(n, dev, np.int32), a, b, w), strict=True):
            col.frombytes(np.ascontiguousarray(v, np.float64 if col.typecode == "d" else np.int32).tobytes())

    def build(self) -> Items:
        return Items(*self.cols)
