"""SLURM accounting: `sacct --parsable2` output read into GPU jobs.

What sacct writes (sacct(1), slurm.conf(5)):

- ``--parsable2``: fields separated by ``|``, no trailing ``|``, a header line naming them.
- JobID: ``JobID[.JobStep]``, array tasks ``ArrayJobID_ArrayTaskID`` (pending ones ``123_[4-9]``),
  heterogeneous jobs ``HetJobID+HetJobOffset``. Steps (``.batch``, ``.extern``, ``.0``) fold into their
  job; the components of a heterogeneous job fold into one job.
- Start/End ``YYYY-MM-DDTHH:MM:SS`` in the local time of the machine that ran sacct, ``Unknown`` (End
  of a running job) or ``None``; Elapsed ``[days-]hours:minutes:seconds``.
- AllocTRES ``billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1``: the GPU count and type.
- NodeList as a hostlist expression: ``gpu-[01-03,07]``, ``rack[0-63]_blade[0-41]`` (a product),
  ``node[1-2]-ib`` (a suffix), zero padding kept.
- ConsumedEnergyRaw: joules, from the site's AcctGatherEnergyType plugin (node, CPU or GPU scope, and
  "only in the case of an exclusive job allocation does this value reflect the job's real energy").

A malformed line becomes a note naming its line and the job is left out; a file that is not sacct
output at all is one clear error.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet.sacct_jobs import Allocation, SacctJobs, SlurmJob  # noqa: F401 - Allocation read from here too
from footprint.fleet.sacct_rules import (  # noqa: F401 - the rules' public names, read from here as before
    EARLIEST_JOB_S,
    FREE_TEXT,
    LATEST_JOB_S,
    REQUIRED,
    SACCT_FIELDS,
    GpuTres,
    expand_hostlist,
    parse_elapsed,
    parse_time,
    parse_tres,
)

MAX_SACCT_BYTES = 2_000_000_000
MAX_SACCT_ROWS = 2_000_000  # jobs (and notes on lines left out) one import holds: 856 MB peak measured at the cap (2026-11-28)

# ---- jobs ----------------------------------------------------------------------------------------


@dataclass
class SacctResult:
    jobs: SacctJobs  # a sequence of SlurmJob, held in columns
    skipped: list[str]  # one line per job or line left out, saying why
    source: str
    fields: tuple[str, ...]
    taken_at: float | None = None  # when sacct ran (running jobs are cut there unless the window ends before)


BATCH_LINES = 16_384  # lines read and parsed at a time (as Arrow columns): ~1.5 KB a line while parsed, whatever the file


def parse_sacct(
    text: str | Iterable[str], tz: tzinfo, source: str = "sacct", delimiter: str = "|", columnar: bool = True
) -> SacctResult:
    """Jobs with GPUs from ``sacct --parsable2`` output (header line required): a string, or its lines one at a
    time (an open file), so that a month's sacct is never held whole. Lines are read `BATCH_LINES` at a time;
    ``columnar``: the plain ones (`sacct_batch`) as columns, every other one (and all with ``columnar=False``)
    by `sacct_rules._line`, the rules' reference, one at a time."""
    lines = iter(io.StringIO(text, newline=None) if isinstance(text, str) else text)
    first, head = next(((i, x.rstrip("\r\n")) for i, x in enumerate(lines, start=1) if x.strip()), (0, ""))
    if not head:
        raise FootprintError("empty: expected `sacct --parsable2` output with its header line", source)
    header = [h.strip() for h in head.split(delimiter)]
    if "JobID" not in header:
        raise FootprintError(
            f"line {first}: expected the header line of `sacct --parsable2` (fields separated by "
            f"{delimiter!r}, e.g. {'|'.join(SACCT_FIELDS)}); got {head[:80]!r}",
            source,
        )
    missing = [f for f in REQUIRED if f not in header]
    if missing:
        raise FootprintError(
            f"the header lacks {', '.join(missing)}: run sacct with --format={','.join(SACCT_FIELDS)}", source, "header"
        )
    from footprint.fleet.sacct_batch import Reader

    r = Reader(header, tz, delimiter, columnar)
    lineno = first + 1
    while batch := list(itertools.islice(lines, BATCH_LINES)):
        r.batch(lineno, batch, MAX_SACCT_ROWS)  # the cap read now: a caller (a test) may lower it
        lineno += len(batch)
    out, jobs = r.out, r.jobs
    for job, parts in r.het.items():
        jobs[job] = out.append(_fold_het(job, parts))
    energy = out.column("consumed_energy_j")
    for job, (step, e) in r.step_energy.items():
        i = jobs.get(job)
        if i is not None and math.isnan(energy[i]):
            out.set_energy(i, e, f"step {job}.{step} (the largest of its steps)")
    skipped = [text for _, text in sorted(r.skipped, key=lambda x: x[0])]  # in line order (one note a line)
    rows = np.fromiter(jobs.values(), np.int64, len(jobs))
    del r, jobs  # the reader's job index (~70 B a job) let go before the rows are copied in order
    gpus = out.gpu_counts()[rows] > 0
    skipped += [f"line {out.line[i]}: job {out.job_id[i]}: no GPU in AllocTRES, left out (CPU-only job)"
                for i in rows[~gpus].tolist()]  # fmt: skip
    out = out.take(_by_start(out, rows[gpus]))
    if columnar:  # the pages Arrow's allocator kept from the batches, handed back (~10-30 MB)
        import pyarrow as pa

        getattr(pa.default_memory_pool(), "release_unused", lambda: None)()

    # sacct prints a running job's Elapsed as the time since it started: start + Elapsed is when sacct ran
    # (and it ran after every End it prints)
    start, end, elapsed = (out.column(k) for k in ("start", "end", "elapsed_s"))
    running = np.isnan(end) & (elapsed > 0)
    seen = np.concatenate([start[running] + elapsed[running], end[~np.isnan(end)]])
    return SacctResult(out, skipped, source, tuple(header), float(seen.max()) if len(seen) else None)


def _by_start(jobs: SacctJobs, rows: np.ndarray) -> np.ndarray:
    """These rows by start, then job id (only jobs that start at the same second are compared by id)."""
    order = rows[np.argsort(jobs.column("start")[rows], kind="stable")]
    starts = jobs.column("start")[order]
    tied = np.flatnonzero(starts[1:] == starts[:-1])
    for a in np.unique(np.searchsorted(starts, starts[tied], side="left")).tolist():
        b = int(np.searchsorted(starts, starts[a], side="right"))
        order[a:b] = sorted(order[a:b].tolist(), key=lambda i: jobs.job_id[i])
    return order


def _fold_het(job: str, parts: list[SlurmJob]) -> SlurmJob:
    """One job from the components of a heterogeneous job (``1010+0``, ``1010+1``)."""
    first = parts[0]
    ends = [p.end for p in parts]
    energies = [p.consumed_energy_j for p in parts if p.consumed_energy_j is not None]
    return replace(
        first,
        job_id=job,
        raw_id=job,
        state="RUNNING" if any(p.state == "RUNNING" for p in parts) else first.state,
        start=min(p.start for p in parts),
        end=None if any(e is None for e in ends) else max(e for e in ends if e is not None),
        elapsed_s=max((p.elapsed_s or 0.0) for p in parts),
        allocations=[a for p in parts for a in p.allocations],
        consumed_energy_j=sum(energies) if energies else None,
        consumed_energy_from="sum of the het-job components" if energies else None,
        notes=[*(n for p in parts for n in p.notes), f"heterogeneous job: {len(parts)} components folded into one"],
    )


def read_sacct(path: str | Path, tz: tzinfo, delimiter: str = "|") -> SacctResult:
    from footprint.inputs import check_file

    p = check_file(path, "sacct file")  # missing, a directory, or a named pipe that would block the read
    if p.stat().st_size > MAX_SACCT_BYTES:
        raise FootprintError(f"larger than {MAX_SACCT_BYTES} bytes: split the sacct export by time", str(p))
    try:
        with p.open(newline=None) as f:  # line by line: a month's sacct is never held whole
            result = parse_sacct(f, tz, str(p), delimiter)
    except UnicodeDecodeError:
        raise FootprintError("not a text file (expected `sacct --parsable2` output)", str(p)) from None
    if result.taken_at is None:
        result.taken_at = p.stat().st_mtime  # no running job to tell: the file was written when sacct ran
    return result


class SacctReading:
    """A sacct file read in a background thread, for an import that first asks the server for its series (a
    512-GPU month's sacct: 1.1 s of parsing, 4,096 GPUs': 5 s, while the client mostly waits for the server's
    series index). A file that is missing or not a regular file is refused at once; `result` waits for the rest
    and raises its error (a daemon thread: an import that fails first does not wait for it)."""

    def __init__(self, path: str | Path, tz: tzinfo, delimiter: str = "|") -> None:
        from concurrent.futures import Future
        from threading import Thread

        from footprint.inputs import check_file

        check_file(path, "sacct file")
        self._done: Future[SacctResult] = Future()
        Thread(target=self._read, args=(path, tz, delimiter), name="sacct", daemon=True).start()

    def _read(self, path: str | Path, tz: tzinfo, delimiter: str) -> None:
        try:
            self._done.set_result(read_sacct(path, tz, delimiter))
        except BaseException as exc:  # re-raised in the import's thread by `result`
            self._done.set_exception(exc)

    def result(self) -> SacctResult:
        return self._done.result()


def sacct_command(start: float, end: float) -> list[str]:
    fmt = "%Y-%m-%dT%H:%M:%S"
    return [
        "sacct",
        "--allusers",
        "--parsable2",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--starttime={datetime.fromtimestamp(start, UTC).strftime(fmt)}",
        f"--endtime={datetime.fromtimestamp(end, UTC).strftime(fmt)}",
    ]


def run_sacct(start: float, end: float, timeout_s: float = 600) -> str:
    """Run sacct for the window, in UTC and SLURM's standard time format (whatever the user's environment says)."""
    if shutil.which("sacct") is None:
        raise FootprintError(
            "sacct is not on PATH: run this on a SLURM login node, or give a file written by "
            f"`sacct --allusers --parsable2 --format={','.join(SACCT_FIELDS)}`",
            key="--run-sacct",
        )
    env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    try:
        proc = subprocess.run(sacct_command(start, end), capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise FootprintError(f"sacct did not answer within {timeout_s:g} s", key="--run-sacct") from None
    if proc.returncode != 0:
        raise FootprintError(f"sacct failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}", key="--run-sacct")
    return proc.stdout
