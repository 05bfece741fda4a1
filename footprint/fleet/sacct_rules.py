"""sacct's rules for one line (`_line`): its fields, hostlists, times, TRES and what the line adds to the jobs.

`footprint.fleet.slurm` reads a whole export (see its docstring for what sacct writes); the columnar reader
(`footprint.fleet.sacct_batch`) parses plain lines as columns and hands every other line to `_line`, so each
rule and its one-line note is written once, here.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from dataclasses import dataclass
from datetime import datetime, tzinfo

from footprint.fleet.sacct_jobs import Allocation, SlurmJob
from footprint.inputs import MAX_RECORD_DEVICES

SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Account",
    "Partition",
    "Start",
    "End",
    "Elapsed",
    "AllocTRES",
    "NodeList",
    "State",
    "ConsumedEnergyRaw",
)
REQUIRED = ("JobID", "Start", "End", "AllocTRES", "NodeList", "State")
FREE_TEXT = ("JobName",)  # may contain the delimiter (sacct does not escape it)
_NO_TIME = {"", "unknown", "none", "n/a"}
_JOBID = re.compile(r"^(?P<job>\d+(?:_(?:\d+|\[[^\]]*\]))?)(?:\+(?P<het>\d+))?(?:\.(?P<step>.+))?$")


# ---- hostlists ------------------------------------------------------------------------------------


def _split_top(text: str) -> list[str]:
    """Split on commas (and whitespace) outside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {text!r}")
        if (ch == "," or ch.isspace()) and depth == 0:
            if cur:
                out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    if cur:
        out.append("".join(cur))
    return out


def _range_items(body: str, expr: str) -> list[str]:
    items: list[str] = []
    for part in body.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad range {part!r} in {expr!r}")
        lo_s, hi_s = m.group(1), m.group(2)
        width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
        lo, hi = int(lo_s), int(hi_s) if hi_s is not None else int(lo_s)
        if hi < lo:
            raise ValueError(f"range {part!r} runs backwards in {expr!r}")
        if hi - lo > 1_000_000:
            raise ValueError(f"range {part!r} in {expr!r} is implausibly large")
        items += [str(i).zfill(width) for i in range(lo, hi + 1)]
    return items


def expand_hostlist(expr: str) -> list[str]:
    """Host names of a SLURM hostlist expression, in SLURM's order (``scontrol show hostnames``)."""
    text = (expr or "").strip()
    if not text or text.lower() in ("none assigned", "(null)", "none"):
        return []
    hosts: list[str] = []
    for token in _split_top(text):
        pieces = re.split(r"(\[[^\]]*\])", token)
        choices = [_range_items(p[1:-1], expr) if p.startswith("[") else [p] for p in pieces if p]
        if len(hosts) + math.prod(len(c) for c in choices) > MAX_RECORD_DEVICES:
            raise ValueError(f"hostlist {expr[:60]!r} names more than {MAX_RECORD_DEVICES:,} hosts")
        hosts += ["".join(c) for c in itertools.product(*choices)]
    return hosts


# ---- fields -----------------------------------------------------------------------------------------


def parse_elapsed(text: str) -> float | None:
    """``[days-]hours:minutes:seconds[.frac]`` (or ``minutes:seconds``) in seconds; None when not a duration."""
    t = (text or "").strip()
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", t)
    if not m:
        return None
    d, h, mi, s = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + float(s)


EARLIEST_JOB_S = 946_684_800.0  # 2000-01-01 UTC: SLURM's first release was in 2002
LATEST_JOB_S = 7_258_118_400.0  # 2200-01-01 UTC: within every timestamp type downstream (ns: up to 2262)


def parse_time(text: str, tz: tzinfo) -> float | None:
    """A sacct timestamp as Unix seconds; None for Unknown/None/empty."""
    t = (text or "").strip()
    if t.lower() in _NO_TIME:
        return None
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.timestamp()


@dataclass(frozen=True, slots=True)
class GpuTres:
    count: int
    types: dict[str, int]  # gres type -> count (empty when the site does not type its GPUs)


def parse_tres(text: str) -> GpuTres:
    """GPUs in an AllocTRES string (``gres/gpu=4``, ``gres/gpu:a100=4``); typed entries are summed when untyped is absent."""
    total: int | None = None
    types: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item.startswith("gres/gpu"):
            continue
        key, _, value = item.partition("=")
        if not value.strip().isdigit():
            raise ValueError(f"{item!r}: expected gres/gpu[:type]=count")
        n = int(value)
        if n > MAX_RECORD_DEVICES:
            raise ValueError(f"{item!r}: more than {MAX_RECORD_DEVICES:,} GPUs in one allocation")
        if key == "gres/gpu":
            total = n
        elif key.startswith("gres/gpu:"):
            t = key[len("gres/gpu:") :]
            types[t] = types.get(t, 0) + n
    if total is None:
        total = sum(types.values())
    return GpuTres(total, types)


# ---- lines ----------------------------------------------------------------------------------------


def _split_gpus(total: int, nodes: list[str]) -> tuple[tuple[int, ...], str | None]:
    if not nodes:
        return (), None
    base, extra = divmod(total, len(nodes))
    per = tuple(base + (1 if i < extra else 0) for i in range(len(nodes)))
    note = (
        None
        if extra == 0
        else f"{total} GPUs over {len(nodes)} nodes is not a whole number per node: assumed {', '.join(map(str, per))}"
    )
    return per, note


def _row(parts: list[str], header: list[str]) -> dict[str, str]:
    if len(parts) > len(header):
        free = [h for h in FREE_TEXT if h in header]
        if len(free) != 1:
            raise ValueError(f"{len(parts)} fields, header has {len(header)}")
        i, extra = header.index(free[0]), len(parts) - len(header)
        parts = parts[:i] + ["|".join(parts[i : i + extra + 1])] + parts[i + extra + 1 :]
    if len(parts) < len(header):
        raise ValueError(f"{len(parts)} fields, header has {len(header)}")
    return dict(zip(header, parts, strict=True))


def _gpu_type(tres: GpuTres) -> str | None:
    if len(tres.types) == 1:
        return next(iter(tres.types))
    return None


def _allocation(row: dict[str, str], notes: list[str]) -> Allocation | None:
    tres = parse_tres(row.get("AllocTRES", ""))
    if tres.count == 0 and row.get("AllocGRES", "").strip():  # before SLURM 20.11: AllocGRES=gpu:4
        m = re.search(r"gpu(?::([^:,()]+))?:(\d+)", row["AllocGRES"])
        if m:
            tres = GpuTres(int(m.group(2)), {m.group(1): int(m.group(2))} if m.group(1) else {})
    if tres.count <= 0:
        return None
    nodes = [sys.intern(n) for n in expand_hostlist(row.get("NodeList", ""))]  # a node's name once, not per job
    if len(tres.types) > 1:
        notes.append(f"GPU types {dict(tres.types)} in one allocation: the node of each type is not recorded by sacct")
    per, note = _split_gpus(tres.count, nodes)
    if note:
        notes.append(note)
    return Allocation(tuple(nodes), per, _gpu_type(tres))


def _energy(text: str) -> float | None:
    t = (text or "").strip()
    if not t:
        return None
    v = float(t)
    # SLURM prints 0 when no energy plugin ran and an all-ones value on plugin errors.
    return v if 0 < v < 1.8e19 else None


# what a line adds: ("note", job or "", text), ("step", job, (step, energy)), ("het" | "job", job, SlurmJob)
Event = tuple[str, str, object] | None


def _line(lineno: int, line: str, header: list[str], tz: tzinfo, delimiter: str) -> Event:
    """One line by the rules (the reference the columnar reader agrees with): what it adds, if anything."""
    if not line.strip():
        return None
    try:
        row = _row(line.split(delimiter), header)
        m = _JOBID.match(row["JobID"].strip())
        if not m:
            raise ValueError(f"JobID {row['JobID']!r} is not JobID[_task][+offset][.step]")
        job, het_off, step = m.group("job"), m.group("het"), m.group("step")
        if step is not None:  # steps fold into their job: only their energy is kept
            e = _energy(row.get("ConsumedEnergyRaw", ""))
            return ("step", job, (step, e)) if e is not None else None
        if "[" in job:
            return ("note", job, f"line {lineno}: job {job}: array tasks not started yet (pending), left out")
        sj = _job(row, job, lineno, tz)
    except (ValueError, KeyError, OverflowError) as exc:
        return ("note", "", f"line {lineno}: {exc}; line left out")
    if isinstance(sj, str):
        return ("note", job, f"line {lineno}: job {job}: {sj}")
    return ("het" if het_off is not None else "job", job, sj)


def _job(row: dict[str, str], job: str, lineno: int, tz: tzinfo) -> SlurmJob | str | None:
    state = (row.get("State") or "").split()[0].upper() if (row.get("State") or "").strip() else "UNKNOWN"
    start = parse_time(row.get("Start", ""), tz)
    if start is None:
        return f"{state.lower()} and never started, left out"
    end = parse_time(row.get("End", ""), tz)
    for key, t in (("Start", start), ("End", end)):  # 0001-01-01 or 9999-12-31: damage, not a job (SLURM is from 2002)
        if t is not None and not EARLIEST_JOB_S <= t < LATEST_JOB_S:
            return f"{key} {row.get(key, '')[:30]} is outside 2000-2200, left out"
    notes: list[str] = []
    alloc = _allocation(row, notes)
    elapsed = parse_elapsed(row.get("Elapsed", ""))
    if end is not None and end < start:
        return f"End {row.get('End')} is before Start {row.get('Start')}, left out"
    energy = _energy(row.get("ConsumedEnergyRaw", ""))

    def opt(key: str, shared: bool = True) -> str | None:
        v = (row.get(key) or "").strip()
        return (sys.intern(v) if shared else v) or None  # a user's name once, not once per job

    return SlurmJob(
        job_id=job,
        raw_id=opt("JobIDRaw", shared=False),
        name=opt("JobName"),
        user=opt("User"),
        account=opt("Account"),
        partition=opt("Partition"),
        state=sys.intern(state),
        start=start,
        end=end,
        elapsed_s=elapsed,
        allocations=[alloc] if alloc else [],
        consumed_energy_j=energy,
        consumed_energy_from="job line" if energy is not None else None,
        line=lineno,
        notes=notes,
    )
