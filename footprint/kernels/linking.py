"""The CPU op tree of a trace, and which op launched each GPU event and which modelled op owns it.

- **Tree**: on each thread, ops nest by time (an op encloses the ops that start and end within it);
  `parents` gives each op its innermost enclosing op.
- **Linking** (TraceLens' convention): kernel -> the runtime call that launched it (``correlation``) ->
  the innermost op enclosing the launch on the same thread. ``External id`` is the fallback where a
  kernel has no launch event.
- **Modelled op**: above the launching op, the outermost GEMM/convolution/attention op with a FLOP model
  takes the kernel, and within that family the op of lowest rank (the one whose arguments the formulas
  read), so a GEMM inside a convolution counts once, as the convolution. CPU operators use the same
  rule from the innermost modelled op of each subtree (`cpu_model_ops`).

Imports `footprint.kernels.opmodels` and `footprint.kernels.reader` (the Scan) only.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Any

from footprint.kernels.opmodels import MODEL_OPS
from footprint.kernels.reader import Scan


def _by_thread(s: Scan) -> dict[Any, list[int]]:
    by_thread: dict[Any, list[int]] = defaultdict(list)
    for i, th in enumerate(s.op_thread):
        by_thread[th].append(i)
    op_ts, op_end = s.op_ts, s.op_end
    for idx in by_thread.values():
        idx.sort(key=lambda i: (op_ts[i], -op_end[i]))
    return by_thread


def link(s: Scan, gpu: list[tuple[Any, ...]]) -> tuple[array, array, list[tuple[float, float, Any, str] | None]]:
    """(parent of each op, launching op of each GPU event (-1: none), launch call of each GPU event)."""
    op_ts, op_end = s.op_ts, s.op_end
    parent = array("q", [-1]) * len(op_ts)
    leaf = array("q", [-1]) * len(gpu)
    queries: dict[Any, list[tuple[float, int]]] = defaultdict(list)
    launch_of: list[tuple[float, float, Any, str] | None] = [None] * len(gpu)
    for j, g in enumerate(gpu):
        rt = s.launch.get(g[5]) if g[5] is not None else None
        launch_of[j] = rt
        if rt is not None:
            queries[rt[2]].append((rt[0], j))
    for th, idx in _by_thread(s).items():
        qs = sorted(queries.get(th, ()))
        stack: list[int] = []
        qi, nq = 0, len(qs)
        for i in idx:
            t = op_ts[i]
            while qi < nq and qs[qi][0] < t:
                qt = qs[qi][0]
                while stack and op_end[stack[-1]] < qt:
                    stack.pop()
                if stack:
                    leaf[qs[qi][1]] = stack[-1]
                qi += 1
            while stack and op_end[stack[-1]] <= t:
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        while qi < nq:
            qt = qs[qi][0]
            while stack and op_end[stack[-1]] < qt:
                stack.pop()
            if stack:
                leaf[qs[qi][1]] = stack[-1]
            qi += 1
    unlinked = [j for j in range(len(gpu)) if launch_of[j] is None and gpu[j][6] is not None]
    if unlinked:  # no launch event: fall back to the External id
        wanted = {gpu[j][6] for j in unlinked}
        by_ext: dict[Any, int] = {}
        for i, ext in enumerate(s.op_ext):
            if ext in wanted:
                by_ext.setdefault(ext, i)
        for j in unlinked:
            leaf[j] = by_ext.get(gpu[j][6], -1)
    return parent, leaf, launch_of


class ModelResolver:
    """The modelled op that owns the work of an op (-1: none), memoised."""

    def __init__(self, names: list[str], parent: array) -> None:
        self.names = names
        self.parent = parent
        self.resolved: dict[int, int] = {}

    def __call__(self, lf: int) -> int:
        hit = self.resolved.get(lf)
        if hit is not None:
            return hit
        names, parent = self.names, self.parent
        chain = []
        i = lf
        while i >= 0:
            spec = MODEL_OPS.get(names[i])
            if spec is not None and (not spec[2] or i == lf):
                chain.append((spec[0], spec[1], i))
            i = parent[i]
        best = -1
        if chain:
            fam = chain[-1][0]
            best = min((c for c in chain if c[0] == fam), key=lambda c: c[1])[2]
        self.resolved[lf] = best
        return best


def cpu_model_ops(s: Scan, parent: array, resolve: ModelResolver) -> list[int]:
    """The modelled ops of a CPU trace, each counted once: resolved from the innermost modelled op of
    every subtree (aten::linear -> its aten::addmm; aten::conv2d -> aten::convolution)."""
    names = s.op_name
    modelled = [i for i, n in enumerate(names) if n in MODEL_OPS]
    inner = set(modelled)
    for i in modelled:  # an op with a modelled descendant is not innermost
        p = parent[i]
        while p >= 0:
            inner.discard(p)
            p = parent[p]
    return sorted({resolve(i) for i in inner} - {-1})


CARRIED_OVER = "carried_over"
UNLINKED = "unlinked"


def partition(s: Scan, gpu: list[tuple[Any, ...]], launch_of: list[Any]) -> tuple[list[int], list[int], list[int]]:
    """(linked, carried over, unlinked): indices of the GPU events with a launch call in the recording, of
    those without one that were queued before it began, and of the other launchless events.

    Carried over: no launch call, and the event starts before the first recorded launch or its
    correlation id is below every recorded launch's (CUPTI numbers launches in issue order, so such a
    kernel was launched before the profiler started: the previous iteration's queue draining, which
    can run on well after the first recorded launch).
    """
    first_ts = min((rt[0] for rt in s.launch.values()), default=None)
    corrs = [k for k in s.launch if type(k) is int]
    first_corr = min(corrs) if corrs else None
    linked: list[int] = []
    carried: list[int] = []
    unlinked: list[int] = []
    for j, g in enumerate(gpu):
        if launch_of[j] is not None:
            linked.append(j)
        elif (first_ts is not None and g[0] < first_ts) or (first_corr is not None and type(g[5]) is int and g[5] < first_corr):
            carried.append(j)
        else:
            unlinked.append(j)
    return linked, carried, unlinked
