"""sacct's lines a batch at a time: the plain ones as Arrow columns, every other by the rules line by line.

A 4,096-GPU month is ~630,000 jobs and ~2.5 M lines (a job and its steps); read a line at a time through
`sacct_rules._line` that is ~30 µs a job. Here a batch of lines is split into fields by Arrow, and a line is
*plain* when it is printable ASCII with the header's number of fields, a JobID that is a number (or an
array task) with or without a step, times as ``YYYY-MM-DDTHH:MM:SS`` (or Unknown/None/empty), an Elapsed
and a ConsumedEnergyRaw of bounded digits: those are parsed as columns. Any other line (a pipe in a
JobName, a het-job component, a pending array range, a time with an offset, anything damaged) goes through
`sacct_rules._line`, so the rules and their one-line notes have one source. Allocations (AllocTRES, NodeList,
AllocGRES) are parsed once per distinct value by `sacct_rules._allocation`. Results are merged in line order:
the first of two lines with one job id wins, a step's energy ties go to the first, notes keep their order,
and the row cap is checked line by line as before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet.sacct_jobs import SacctJobs, SlurmJob
from footprint.fleet.sacct_rules import (
    _NO_TIME,
    EARLIEST_JOB_S,
    LATEST_JOB_S,
    _allocation,
    _line,
)

_TIME = r"^(?:19[7-9]\d|2[01]\d\d)-\d\d-\d\dT\d\d:\d\d:\d\d$"  # years 1970-2199: out of range or odd -> by the rules
_ELAPSED = r"^ *(?:(?P<d>\d{1,6})-)?(?:(?P<h>\d{1,6}):)?(?P<m>\d{1,6}):(?P<s>\d{1,6}(?:\.\d{1,9})?) *$"
_ENERGY = r"^ *(?:\d{1,18}(?:\.\d{1,9})?)? *$"
_STRICT_JOBID = r"^(?P<job>\d+(?:_\d+)?)(?:\.(?P<step>[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?))?$"
_TEXT = {"name": "JobName", "user": "User", "account": "Account", "partition": "Partition", "raw_id": "JobIDRaw"}
_EPOCH = datetime(1970, 1, 1)


class Reader:
    """Reads sacct lines batch by batch into `SacctJobs` (``out``): job id -> row (``jobs``), het-job components
    and steps' largest energy aside, notes as (line, text)."""

    def __init__(self, header: list[str], tz: tzinfo, delimiter: str, columnar: bool = True) -> None:
        self.header, self.tz, self.delimiter = header, tz, delimiter
        self.columnar = columnar and len(delimiter) == 1 and (delimiter == "\t" or " " <= delimiter <= "~")
        self.col = {h: i for i, h in enumerate(header)}  # a repeated name: its last field, as `sacct_rules._row`'s dict keeps
        self.out = SacctJobs()
        self.jobs: dict[str, int] = {}
        self.het: dict[str, list[SlurmJob]] = {}
        self.skipped: list[tuple[int, str]] = []
        self.step_energy: dict[str, tuple[str, float]] = {}
        self._allocs: dict[tuple[str, str, str], tuple[Any, tuple[str, ...]] | str] = {}
        self._offsets: dict[int, float | None] = {}

    # ---- one batch ------------------------------------------------------------------------------

    def batch(self, lineno: int, lines: list[str], cap: int) -> None:
        """Lines ``lineno``... read; ``cap``: the jobs and notes one read may hold (`slurm.MAX_SACCT_ROWS`)."""
        rows = [x.rstrip("\r\n") for x in lines]
        plain, cols = self._columns(rows) if self.columnar else (np.zeros(len(rows), bool), None)
        notes: list[tuple[int, str]] = []
        steps: list[tuple[int, str, str, float]] = []
        cands: list[tuple[int, str, Any]] = []  # (position, job, row among the plain ones or a SlurmJob)
        blank = np.zeros(len(rows), bool)
        for p in np.flatnonzero(~plain).tolist():
            ev = _line(lineno + p, rows[p], self.header, self.tz, self.delimiter)
            if ev is None:
                blank[p] = not rows[p].strip()
                continue
            kind, job, what = ev
            if kind == "note":
                notes.append((p, str(what)))
            elif kind == "step":
                step, e = what  # type: ignore[misc]
                steps.append((p, job, step, e))
            elif kind == "het":
                self.het.setdefault(job, []).append(what)  # type: ignore[arg-type]
            else:
                cands.append((p, job, what))
        by_rules = len(cands)
        if cols is not None:
            cols["lineno0"] = lineno
            self._plain(cols, notes, steps, cands)
        self._check_cap(lineno, len(rows), blank, [p for p, _ in notes] + [p for p, _, _ in cands], cap)
        for _, job, step, e in sorted(steps, key=lambda x: x[0]):
            if e > self.step_energy.get(job, ("", -1.0))[1]:
                self.step_energy[job] = (step, e)
        if by_rules or not self._fresh(cands, cols):
            self._candidates(lineno, cands, cols, notes)
        self.skipped += [(lineno + p, text) for p, text in notes]

    def _candidates(self, lineno: int, cands: list[tuple[int, str, Any]], cols: dict[str, Any] | None, notes: list) -> None:
        """The batch's job lines in line order: the first line of a job id is kept, a repeat noted."""
        take: list[int] = []
        fresh: list[str] = []
        for p, job, what in sorted(cands, key=lambda x: x[0]):
            if job in self.jobs:
                notes.append((p, f"line {lineno + p}: job {job} appears twice (sacct --duplicates?); the first line is kept"))
            elif isinstance(what, SlurmJob):
                self.jobs[job] = self.out.append(what)
            else:
                self.jobs[job] = -1  # placed below, with the other plain rows
                take.append(what)
                fresh.append(job)
        if take:
            for job, i in zip(fresh, self._extend(cols, take), strict=True):
                self.jobs[job] = i

    def _fresh(self, cands: list[tuple[int, str, Any]], cols: dict[str, Any] | None) -> bool:
        """Plain job lines alone, in line order, each job new: appended at once (as `_candidates` would, one by one);
        False where some job repeats (`_candidates` then notes it)."""
        jobs = [job for _, job, _ in cands]
        if len(set(jobs)) != len(jobs) or not self.jobs.keys().isdisjoint(jobs):
            return False
        if jobs:
            self.jobs.update(zip(jobs, self._extend(cols, [row for _, _, row in cands]), strict=True))
        return True

    def _check_cap(self, lineno: int, n: int, blank: np.ndarray, counted: list[int], cap: int) -> None:
        """sacct's row cap, checked at each line as a line-by-line reader would: jobs and notes held before it."""
        held = len(self.jobs) + len(self.skipped)
        if held + len(counted) < cap:
            return
        adds = np.bincount(np.array(counted, np.int64), minlength=n)
        before = held + np.cumsum(adds) - adds
        over = np.flatnonzero((before >= cap) & ~blank)
        if len(over):
            raise FootprintError(
                f"more than {cap:,} jobs and lines left out by line {lineno + int(over[0]):,}: split the "
                "export by time (sacct -S ... -E ...) and import each part into its own fleet directory"
            )

    # ---- the plain lines as columns -------------------------------------------------------------

    def _columns(self, rows: list[str]) -> tuple[np.ndarray, dict[str, Any] | None]:
        """Which lines are plain, and their fields as columns (Arrow), parsed."""
        import pyarrow as pa
        import pyarrow.compute as pc

        plain, text = _plain_lines(rows, self.delimiter, len(self.header))
        idx = np.flatnonzero(plain)
        if not len(idx):
            return plain, None
        table = _fields(text, len(idx), self.delimiter, len(self.header))

        def field(name: str) -> Any:
            return table[self.col[name]] if name in self.col else _pa_str([""] * len(table[0]))

        jid = field("JobID")  # matched without captures (4x faster): a plain id's job part has no dot, its step one
        energy = field("ConsumedEnergyRaw")
        good = _bools(pc.and_(pc.match_substring_regex(jid, _STRICT_JOBID), pc.match_substring_regex(energy, _ENERGY)))
        is_step = _bools(pc.greater_equal(pc.find_substring(jid, "."), 0))
        e = self._energy(energy)
        sr = np.flatnonzero(good & is_step & ~np.isnan(e))  # steps with an energy: only that is kept of a step
        parts = [x.split(".", 1) for x in jid.take(sr).to_pylist()]
        steps = zip(idx[sr].tolist(), [a for a, _ in parts], [b for _, b in parts], e[sr].tolist(), strict=True)
        plain[idx[~good]] = False
        # the job lines: a line whose times or Elapsed are not plain goes by the rules
        jr = np.flatnonzero(good & ~is_step)
        at = pa.array(jr)
        table = [c.take(at) for c in table]
        start_raw, end_raw = field("Start"), field("End")
        start, s_none, s_ok = self._times(start_raw)
        end, e_none, e_ok = self._times(end_raw)
        elapsed, el_ok = self._elapsed(field("Elapsed"))
        ok = (s_none | (s_ok & (e_none | e_ok))) & el_ok
        plain[idx[jr[~ok]]] = False
        state = pc.ascii_upper(pc.struct_field(pc.extract_regex(field("State"), r"^ *(?P<s>[^ ]*)"), "s"))
        cols: dict[str, Any] = {"steps": list(steps), "pos": idx[jr], "job": jid.take(jr).to_pylist(), "energy": e[jr]}
        cols.update(start=start, s_none=s_none, end=np.where(e_none, np.nan, end), elapsed=elapsed, good=ok)
        cols.update(state=pc.if_else(pc.equal(state, ""), "UNKNOWN", state), start_raw=start_raw, end_raw=end_raw)
        for k, h in _TEXT.items():
            t = pc.ascii_trim_whitespace(field(h))
            cols[k] = pc.if_else(pc.equal(t, ""), None, t)
        cols["alloc_key"] = (field("AllocTRES"), field("NodeList"), field("AllocGRES"))
        return plain, cols

    @staticmethod
    def _energy(text: Any) -> np.ndarray:
        """ConsumedEnergyRaw as joules, NaN where absent or not a reading (0 or SLURM's all-ones on errors)."""
        import pyarrow.compute as pc

        t = pc.ascii_trim_whitespace(text)
        v = pc.cast(pc.if_else(pc.equal(t, ""), None, t).fill_null("nan"), "float64", safe=False).to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            return np.where((v > 0) & (v < 1.8e19), v, np.nan)

    def _times(self, text: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Unix seconds, no time (Unknown/None/empty), a plain time): local times of ``tz`` as Python reads them."""
        import pyarrow.compute as pc

        low = pc.ascii_lower(pc.ascii_trim_whitespace(text))
        none = _bools(pc.is_in(low, value_set=_pa_set(_NO_TIME)))
        shaped = _bools(pc.match_substring_regex(text, _TIME))
        local, ok = _local_seconds(pc.if_else(shaped, text, "1970-01-01T00:00:00"))
        ok &= shaped
        off, known = self._utc_offsets(local, ok)
        return local - off, none, ok & known

    def _utc_offsets(self, local: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each local time's UTC offset as `datetime.replace(tzinfo=tz).timestamp()` applies it (fold=0), found once
        per local hour; an hour whose offset changes inside it (a transition) is left to the rules."""
        if isinstance(self.tz, timezone) or self.tz is UTC:
            o = self.tz.utcoffset(None)
            return np.full(len(local), o.total_seconds() if o is not None else 0.0), np.ones(len(local), bool)
        hours = (local // 3600).astype(np.int64)
        uniq, inv = np.unique(np.where(ok, hours, 0), return_inverse=True)
        offs = np.empty(len(uniq))
        known = np.ones(len(uniq), bool)
        for k, h in enumerate(uniq.tolist()):
            if h not in self._offsets:
                a = (_EPOCH + timedelta(hours=h)).replace(tzinfo=self.tz).utcoffset()
                b = (_EPOCH + timedelta(hours=h, seconds=3599)).replace(tzinfo=self.tz).utcoffset()
                self._offsets[h] = a.total_seconds() if a is not None and a == b else None
            o = self._offsets[h]
            offs[k], known[k] = (o, True) if o is not None else (0.0, False)
        return offs[inv], known[inv]

    @staticmethod
    def _elapsed(text: Any) -> tuple[np.ndarray, np.ndarray]:
        """Elapsed in seconds (NaN when empty); whether it is plain (empty or [d-][h:]m:s of bounded digits)."""
        import pyarrow.compute as pc

        m = pc.extract_regex(text, _ELAPSED)
        ok = _bools(pc.is_valid(m))
        empty = _bools(pc.equal(pc.ascii_trim_whitespace(text), ""))

        def num(k: str, kind: str = "int64") -> np.ndarray:
            v = pc.struct_field(m, k)
            v = pc.if_else(pc.equal(v, ""), "0", v).fill_null("0")
            return pc.cast(v, kind).to_numpy(zero_copy_only=False)

        whole = num("d") * 86400 + num("h") * 3600 + num("m") * 60
        return np.where(ok, whole + num("s", "float64"), np.nan), ok | empty

    def _plain(self, cols: dict[str, Any], notes: list, steps: list, cands: list) -> None:
        """The plain lines: steps' energies, notes for jobs left out, and the jobs themselves (as candidates)."""
        pos, good, jobs = cols["pos"], cols["good"], cols["job"]
        line0 = cols["lineno0"]
        steps += cols["steps"]
        rows = np.flatnonzero(good)
        if not len(rows):
            return
        start, end, s_none = cols["start"][rows], cols["end"][rows], cols["s_none"][rows]
        bad_start = ~s_none & ~((start >= EARLIEST_JOB_S) & (start < LATEST_JOB_S))
        bad_end = ~s_none & ~bad_start & ~(np.isnan(end) | ((end >= EARLIEST_JOB_S) & (end < LATEST_JOB_S)))
        parsed, code = self._alloc_of(cols, rows)
        failed = np.array([isinstance(x, str) for x in parsed], bool)[code] & ~(s_none | bad_start | bad_end)
        backwards = ~(s_none | bad_start | bad_end | failed) & (end < start)
        odd = s_none | bad_start | bad_end | failed | backwards
        for k in np.flatnonzero(odd).tolist():  # the jobs left out, each with its note
            i = int(rows[k])
            p, job = int(pos[i]), jobs[i]
            if failed[k]:
                notes.append((p, f"line {line0 + p}: {parsed[code[k]]}; line left out"))
                continue
            if s_none[k]:
                why = f"{cols['state'][i].as_py().lower()} and never started, left out"
            elif bad_start[k] or bad_end[k]:
                key, raw = ("Start", cols["start_raw"]) if bad_start[k] else ("End", cols["end_raw"])
                why = f"{key} {raw[i].as_py()[:30]} is outside 2000-2200, left out"
            else:
                why = f"End {cols['end_raw'][i].as_py()} is before Start {cols['start_raw'][i].as_py()}, left out"
            notes.append((p, f"line {line0 + p}: job {job}: {why}"))
        keep = np.flatnonzero(~odd)
        cols["alloc"] = np.full(len(good), -1, np.int64)  # per job line: its allocation among ``parsed``
        cols["alloc"][rows[keep]] = code[keep]
        cols["parsed"] = parsed
        cands += zip(pos[rows[keep]].tolist(), [jobs[i] for i in rows[keep].tolist()], rows[keep].tolist(), strict=True)

    def _alloc_of(self, cols: dict[str, Any], rows: np.ndarray) -> tuple[list[Any], np.ndarray]:
        """The distinct allocations of these job lines (each with its notes, or the error), parsed once per distinct
        (AllocTRES, NodeList, AllocGRES), and each line's index among them."""
        import pyarrow as pa
        import pyarrow.compute as pc

        take = pa.array(rows)
        keys = pc.binary_join_element_wise(*(c.take(take) for c in cols["alloc_key"]), "\x00")
        enc = pc.dictionary_encode(keys)
        codes = enc.indices.to_numpy(zero_copy_only=False)
        parsed = []
        for key in enc.dictionary.to_pylist():
            if key not in self._allocs:
                tres, nodes, gres = key.split("\x00")
                row = {"AllocTRES": tres, "NodeList": nodes, **({"AllocGRES": gres} if "AllocGRES" in self.col else {})}
                notes: list[str] = []
                try:
                    a = _allocation(row, notes)
                    self._allocs[key] = ((a,) if a else (), tuple(notes))
                except (ValueError, KeyError, OverflowError) as exc:
                    self._allocs[key] = str(exc)
            parsed.append(self._allocs[key])
        return parsed, codes.astype(np.int64)

    def _extend(self, cols: dict[str, Any], take: list[int]) -> range:
        """The accepted plain job lines appended to ``out`` as columns (text as distinct values and indices)."""
        import pyarrow as pa

        t = np.array(take, np.int64)
        at = pa.array(t)
        e = cols["energy"][t]
        rows: dict[str, Any] = {k: _distinct(cols[k].take(at)) for k in ("name", "user", "account", "partition", "state")}
        used, first, code = np.unique(cols["alloc"][t], return_index=True, return_inverse=True)
        order = np.argsort(first)  # the distinct allocations in order of first appearance, as a list would give them
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        allocs, code = [cols["parsed"][c] for c in used[order].tolist()], rank[code.reshape(-1)]
        rows.update(
            raw_id=cols["raw_id"].take(at).to_pylist(),
            job_id=[cols["job"][r] for r in take],
            consumed_energy_from=np.where(np.isnan(e), None, "job line").tolist(),
            start=cols["start"][t],
            end=cols["end"][t],
            elapsed_s=cols["elapsed"][t],
            consumed_energy_j=e,
            line=cols["pos"][t] + cols["lineno0"],
            alloc=([a for a, _ in allocs], code),
        )
        noted = np.flatnonzero(np.array([bool(n) for _, n in allocs], bool)[code]) if len(code) else np.zeros(0, np.int64)
        return self.out.extend(rows, {i: list(allocs[code[i]][1]) for i in noted.tolist()})


def _distinct(arr: Any) -> tuple[list[Any], np.ndarray]:
    """A text column as its distinct values (in order of first appearance, None among them) and each row's index."""
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(arr, null_encoding="encode")
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _plain_lines(rows: list[str], delimiter: str, fields: int) -> tuple[np.ndarray, bytes]:
    """Lines of printable ASCII (the delimiter aside) with ``fields`` fields, and those lines joined by newlines
    (UTF-8). Read from the batch's bytes (numpy): a byte outside 0x20-0x7e is a line that is not plain."""
    text = "\n".join(rows).encode("utf-8", "surrogatepass")
    b = np.frombuffer(text, np.uint8)
    ends = np.flatnonzero(b == 10)
    if len(ends) != len(rows) - 1:  # a line with a newline inside: none of it is plain
        return np.zeros(len(rows), bool), b""
    ends = np.append(ends, len(b))
    starts = np.concatenate([[0], ends[:-1] + 1])
    odd = np.flatnonzero((b - np.uint8(0x20)) > np.uint8(0x5E))  # outside 0x20-0x7e (newlines too): few
    odd = odd[(b[odd] != 10) & ((b[odd] != 9) if delimiter == "\t" else True)]
    at = np.flatnonzero(b == ord(delimiter))
    count = np.searchsorted(at, ends) - np.searchsorted(at, starts)
    plain = (count == fields - 1) & (np.bincount(np.searchsorted(ends, odd), minlength=len(rows)) == 0)
    if not plain.all():  # the plain lines alone, each with its newline, less the last one's
        text = np.append(b, np.uint8(10))[np.repeat(plain, ends - starts + 1)].tobytes()[:-1]
    return plain, text


def _fields(text: bytes, lines: int, delimiter: str, fields: int) -> list[Any]:
    """``lines`` lines of ``fields`` fields each (joined by newlines) as one Arrow string array per field: no
    quoting, no escapes (sacct writes neither)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text += b"\n"
    offsets = np.concatenate([[0], np.flatnonzero(np.frombuffer(text, np.uint8) == 10) + 1]).astype(np.int32)
    arr = pa.StringArray.from_buffers(lines, pa.py_buffer(offsets), pa.py_buffer(text))  # each line with its newline
    flat = pc.list_flatten(pc.split_pattern(pc.utf8_rtrim(arr, "\n"), delimiter))
    at = np.arange(lines, dtype=np.int64) * fields
    return [flat.take(pa.array(at + i)) for i in range(fields)]


def _pa_str(values: list[str]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.string())


def _local_seconds(text: Any) -> tuple[np.ndarray, np.ndarray]:
    """``YYYY-MM-DDTHH:MM:SS`` strings (every one 19 characters) as seconds since 1970 of a clock without time
    zone, and whether each is a real time (no February 30, no second 60: `datetime.fromisoformat` refuses those)."""
    n = len(text)
    if not n:
        return np.zeros(0), np.zeros(0, bool)
    offsets = np.frombuffer(text.buffers()[1], np.int32)[text.offset : text.offset + n + 1]
    data = np.frombuffer(text.buffers()[2], np.uint8)
    d = data[offsets[:-1, None] + np.arange(19)].astype(np.int64) - 48

    def num(a: int, b: int) -> np.ndarray:
        v = np.zeros(n, np.int64)
        for k in range(a, b):
            v = v * 10 + d[:, k]
        return v

    y, mo, day, h, mi, sec = num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19)
    ok = (mo >= 1) & (mo <= 12) & (h < 24) & (mi < 60) & (sec < 60)
    month = ((y - 1970) * 12 + np.clip(mo, 1, 12) - 1).astype("datetime64[M]")
    first = month.astype("datetime64[D]").astype(np.int64)
    days = (month + 1).astype("datetime64[D]").astype(np.int64) - first
    ok &= (day >= 1) & (day <= days)
    return ((first + day - 1) * 86400 + h * 3600 + mi * 60 + sec).astype(np.float64), ok


def _bools(x: Any) -> np.ndarray:
    """An Arrow boolean array as numpy, null as False."""
    import pyarrow.compute as pc

    return pc.fill_null(x, False).to_numpy(zero_copy_only=False)


def _pa_set(values: Any) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())
