"""Reading a trace: `read_trace` picks one pass (`reader.scan`) or, for a big plain-JSON trace, that pass split
across processes on byte ranges (`scan_parallel`).

Why: past a few hundred MB the pass is CPU-bound in the decoder, and a machine that records such traces
has cores to spare. The event array is cut after a ``},`` followed by a line break (a raw line break is
never inside a JSON string); each worker process reads its range as a stand-alone array. A cut can still
fall inside a nested value, so the result is accepted only when every range but the last ends exactly
at its last byte with a complete entry: range 0 starts at the array's true first entry, so by induction
every cut is then a true entry boundary and the merged pass equals the sequential one. Anything else —
damage, a cut inside a value, metadata between two cuts — returns None and the caller reads the file
sequentially, which reports damage exactly as before. Memory per worker is the reader's (flat); each
returns what it kept, as the sequential pass would have.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from footprint.kernels.reader import Reader, Scan, _Keeper, finish, open_source, scan, split_member

MIN_BYTES = 64 << 20  # smaller files are read in one process: forking costs more than it saves
_CUT = re.compile(rb"\},[ \t\r]*\n[ \t\r\n]*\{")  # an entry's end, a comma, a line break, the next entry
_LOOK = 4 << 20  # how far past a nominal cut to look for a line-broken entry boundary


def workers() -> int:
    """Processes to use: FOOTPRINT_TRACE_WORKERS if set (1 = sequential), else one per idle core (at most 8).

    Idle = usable cores - the 1-minute load average, this process's core counted: on a machine whose
    cores are busy, splitting costs more (forks, pickling, contention) than it saves, so it reads alone."""
    env = os.environ.get("FOOTPRINT_TRACE_WORKERS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return min(int(env), 64)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        idle = cores - os.getloadavg()[0]
    except OSError:
        idle = cores
    return max(1, min(cores, 8, int(idle) + 1))


def can_fork() -> bool:
    """Whether worker processes may be forked here: not on a platform without fork, not from a threaded
    process (a lock held by another thread would stay held in the child), not from a pool's worker."""
    return (
        "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
        and not multiprocessing.current_process().daemon
    )


class _Range:
    """The bytes [start, end) of a file followed by the ']' that closes the array there (end None: to EOF)."""

    def __init__(self, path: Path, start: int, end: int | None) -> None:
        self.fh = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.fh.seek(start)
        self.left = None if end is None else end - start
        self.closed_with = b"" if end is None else b"]"

    def read(self, size: int) -> bytes:
        if self.left is None:
            return self.fh.read(size)
        if self.left <= 0:
            tail, self.closed_with = self.closed_with, b""
            return tail
        b = self.fh.read(min(size, self.left))
        self.left -= len(b)
        if not b:
            self.left = 0
        return b

    def close(self) -> None:
        self.fh.close()


def _scan_range(job: tuple[str, int, int | None, bool]) -> tuple[Scan, int, dict[str, Any]] | None:
    """One worker: its range's events kept as `scan` keeps them; None if the range is not whole entries."""
    path, start, end, in_object = job
    stream = _Range(Path(path), start, end)
    reader = Reader(stream, unread_empty=True)
    reader.saw_events = True
    s = Scan()
    keep = _Keeper(s)
    try:
        for batch in reader._array():
            keep.add(batch)
        if end is None:
            if in_object:
                for batch in reader.members():
                    keep.add(batch)
        elif reader._skip() != -1:  # the array closed before the cut: not one array of entries
            return None
    except Exception:  # noqa: BLE001 - damage or a bad cut: the sequential pass reads it and says what it is
        return None
    finally:
        stream.close()
    s.events = keep.n
    return s, reader.not_utf8, reader.meta


def _cuts(path: Path, start: int, size: int, n: int) -> list[int]:
    """Entry boundaries splitting [start, size) into about n ranges (fewer where none is found)."""
    cuts = [start]
    with open(path, "rb") as fh:
        for k in range(1, n):
            nominal = start + (size - start) * k // n
            if nominal <= cuts[-1]:
                continue
            fh.seek(nominal)
            m = _CUT.search(fh.read(_LOOK))
            if m is not None:
                cuts.append(nominal + m.end() - 1)  # at the next entry's '{'
    return cuts


def _merge(parts: list[tuple[Scan, int, dict[str, Any]]]) -> tuple[Scan, int, dict[str, Any]]:
    """The ranges' scans in file order, as one sequential pass would have kept them."""
    s = Scan()
    not_utf8 = 0
    meta: dict[str, Any] = {}
    for part, bad_text, more in parts:
        offset = len(s.op_name)
        s.op_ts.extend(part.op_ts)
        s.op_end.extend(part.op_end)
        s.op_ext.extend(part.op_ext)
        s.op_thread.extend(part.op_thread)
        s.op_name.extend(part.op_name)
        s.op_sig.extend(part.op_sig)
        for key, entry in part.sigs.items():
            s.sigs.setdefault(key, entry)
        s.op_conc.update({i + offset: v for i, v in part.op_conc.items()})
        s.launch.update(part.launch)  # a later launch with the same correlation wins, as in one pass
        s.gpu.extend(part.gpu)
        s.steps.extend(part.steps)
        s.events += part.events
        s.bad_times += part.bad_times
        s.bad_shapes |= part.bad_shapes
        not_utf8 += bad_text
        meta.update(more)
    return s, not_utf8, meta


def scan_parallel(path: Path, file: str, meanwhile: Callable[[], Any] | None = None) -> Scan | None:
    """The pass over a plain .json file in several processes; None where it must be read sequentially."""
    n = workers()
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if n < 2 or size < MIN_BYTES or not can_fork():
        return None
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        magic = fh.read(262)
        if magic[:2] == b"\x1f\x8b" or magic[257:262] == b"ustar":  # compressed or an archive: one stream
            return None
        fh.seek(0)
        head = Reader(fh)
        try:
            in_object = head.open_array()
        except Exception:  # noqa: BLE001 - the sequential pass says what is wrong
            return None
        if in_object is None:
            return None
        start = head.offset
    cuts = _cuts(path, start, size, n)
    if len(cuts) < 2:
        return None
    jobs = [(str(path), a, b, in_object) for a, b in zip(cuts, [*cuts[1:], None], strict=True)]
    with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
        pending = pool.map_async(_scan_range, jobs, chunksize=1)
        if meanwhile is not None:
            meanwhile()
        parts = pending.get()
    if any(p is None for p in parts):
        return None
    s, not_utf8, meta = _merge(parts)  # type: ignore[arg-type]
    s.seconds = time.perf_counter() - t0
    s.bytes = size
    return finish(s, True, {**head.meta, **meta}, not_utf8, file)


def read_trace(path: str | Path, meanwhile: Callable[[], Any] | None = None) -> tuple[Scan, str, list[str]]:
    """(what the pass kept, the source's description, warnings) for a trace path or ARCHIVE::MEMBER.

    A big plain .json file is read by several processes (`scan_parallel`), anything else in one pass;
    `meanwhile` (say, loading the GPU catalogue) then runs in this one while the workers read."""
    file_path, member = split_member(path)
    if member is None:
        s = scan_parallel(file_path, str(path), meanwhile)
        if s is not None:
            return s, file_path.name, s.notes
    stream, label, warnings = open_source(file_path, member)
    try:
        s = scan(stream, str(path))
    finally:
        stream.close()
    return s, label, warnings + s.notes
