"""Profiler steps: the ProfilerStep#N spans of a trace, which events each holds, and the steady-state choice.

A step is identified by its CPU time span, never by its name alone: with torch.profiler's
``schedule(wait, warmup, active, repeat)`` and with merged traces the same name can appear more than
once. A GPU event belongs to the step in which the CPU launched it (HTA's ``iteration`` convention);
an event with no launch call, to the step its own start falls in; a CPU op, to the step its start
falls in. Events outside every step count in the whole-trace totals only.

`--steps`: ``steady`` (default) summarises every step but the first (the first active step pays for
the profiler's start and cold caches; a trace of one step summarises that step), ``all`` every step,
``N`` the N-th step of the table (1-based, in time order).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from footprint.errors import FootprintError

STEP_CHOICES = "all|steady|N"


def spans(raw: Sequence[tuple[float, float, str, Any]]) -> list[tuple[float, float, str]]:
    """Distinct (start, end, name) spans sorted by start (a step recorded twice counts once)."""
    return sorted({(float(a), float(b), n) for a, b, n, _ in raw if b > a})


class StepIndex:
    """Which step (index into `spans`) a CPU instant falls in; -1 for none."""

    def __init__(self, steps: list[tuple[float, float, str]]) -> None:
        self.steps = steps
        self.starts = [s[0] for s in steps]

    def __call__(self, t: float) -> int:
        k = bisect_right(self.starts, t) - 1
        while k >= 0:  # overlapping spans (should not happen): the latest one that contains t
            if t < self.steps[k][1]:
                return k
            if k == 0 or self.steps[k - 1][1] <= self.starts[k]:
                return -1
            k -= 1
        return -1


def parse_choice(value: Any) -> str | int:
    """'all', 'steady' or a positive step number, from the CLI or the API."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise FootprintError(f"--steps must be all, steady or a step number >= 1, got {value}", key="--steps")
        return value
    text = str(value).strip().lower()
    if text in ("all", "steady"):
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise FootprintError(f"--steps must be all, steady or a step number >= 1, got {value!r}", key="--steps")


def select(n: int, choice: str | int) -> tuple[list[int], str]:
    """(0-based indices of the summarised steps, the sentence that says which and why)."""
    if n == 0:
        return [], "no ProfilerStep spans in the trace: whole-trace figures only"
    if choice == "all":
        return list(range(n)), f"all {n} steps (--steps all)"
    if choice == "steady":
        if n == 1:
            return [0], "the trace's only step (steady state needs two or more: nothing excluded)"
        return list(range(1, n)), f"steady state: steps 2-{n} of {n}, the first active step excluded (--steps steady)"
    assert isinstance(choice, int)
    if choice > n:
        raise FootprintError(f"--steps {choice}: the trace has {n} step{'s' if n != 1 else ''}", key="--steps")
    return [choice - 1], f"step {choice} of {n} only (--steps {choice})"
