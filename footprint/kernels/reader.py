"""Reading a PyTorch profiler (Kineto) trace in one streaming pass, keeping only what the analysis needs.

Formats: ``.json``, ``.json.gz`` and tar archives of traces (``ARCHIVE::MEMBER`` picks one), current and
legacy (2021, ``Kernel``/``Runtime``/``Operator`` categories, lower-case ``external id``). The top level
is ``{..., "traceEvents": [...], ...}`` (or a bare array); the small top-level values around the event
array (``deviceProperties``, ``baseTimeNanoseconds``, ...) land in ``meta``.

Speed and memory: the event array is cut into slices of about a megabyte at an event boundary and each
slice is decoded by msgspec into typed structs whose ``args`` stay raw bytes (most events are
``python_function`` and are never looked at again); only the events the analysis uses have their
``args`` decoded; `scan` decodes each slice into structs tagged by category, so that the events of the
categories it never reads come back empty, their fields skipped unbuilt (a slice with another category
is decoded as above). A slice that is not plain Kineto layout (an event larger than the buffer, a value of
an unexpected type) falls back to decoding one event at a time with the standard library's C scanner,
which also finds the exact position of a damaged or truncated file. The categories never read
(``python_function``, flows, instant events) are dropped per slice before the per-event loop. Memory
stays flat whatever the file size: the buffer, one slice's events, and per kept event a few numbers
(names, threads and shapes interned). A big plain ``.json`` is read by worker processes (`parallel`).

Malformed input: a kept event whose ts/dur is missing, not a number, NaN, infinite, negative or absurd
(`_MAX_TS`, `_MAX_DUR`) is skipped and counted; recorded shapes with a dimension that is not a count
are dropped (no FLOPs rather than inf); bytes that are not UTF-8 are read as Latin-1; one value over
`_MAX_VALUE` ends the pass; a compressed trace expanding past `_EXPAND_RATIO` x its size (and
`_EXPAND_FLOOR`) is refused. Each leaves a note, or a one-line FootprintError when nothing is usable.
"""

from __future__ import annotations

import gzip
import json
import re
import tarfile
import time
import zlib
from array import array
from collections.abc import Iterator
from json.scanner import make_scanner
from pathlib import Path
from typing import Any, Union

import msgspec

from footprint.errors import FootprintError
from footprint.kernels.opmodels import (
    ANNOTATION,
    CAT_KIND,
    LAUNCH,
    NEEDS_CONCRETE,
    NUM,
    OP,
    RT,
    wants_shapes,
)

_CHUNK = 1 << 20
_MAX_VALUE = 32 << 20  # one event (or metadata value) larger than this is refused: real ones are < 1 MB
_WS = re.compile(rb"[ \t\n\r]*")
_BOUNDARY = re.compile(rb"\}[ \t\n\r]*[,\]]")  # where an event may end: '}' then ',' or the array's ']'
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_TRIES = 4  # candidate boundaries tried per slice before the one-event-at-a-time path


def _int(text: str) -> int | float:
    """A JSON integer; one too long for an exact int (Python refuses > 4,300 digits) becomes a float (maybe inf)."""
    return int(text) if len(text) < 40 else float(text)


_JSON = json.JSONDecoder(parse_int=_int)  # NaN and Infinity decode as floats: the range check drops them
_SCAN = make_scanner(_JSON)  # the C scanner: (value, end) at an index
STEP_PREFIX = "ProfilerStep#"


class Event(msgspec.Struct):
    """The fields of a trace event the analysis reads; ``args`` is kept undecoded."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = None


class Args(msgspec.Struct):
    """The ``args`` the analysis reads; shapes stay raw bytes (interned by their text, decoded once)."""

    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=None)
    types: msgspec.Raw = msgspec.field(name="Input type", default=None)
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=None)
    ext: Any = msgspec.field(name="External id", default=None)
    ext_legacy: Any = msgspec.field(name="external id", default=None)
    correlation: Any = None
    device: Any = None
    nbytes: Any = msgspec.field(name="bytes", default=None)
    stream: Any = None


# Categories of the bulk of a trace that the analysis never reads: dropped per slice before the loop.
_SKIP_CATS = frozenset({"python_function", "cpu_instant_event", "ac2g", "Trace", "fwdbwd", None})
# Other categories the analysis never reads (their kind is 0), seen in real traces.
_UNREAD_CATS = ("gpu_user_annotation", "cuda_profiler_range", "overhead")
_LEGACY_CATS = ("Kernel", "Runtime", "Operator", "Memcpy", "Memset")  # 2021 traces' spelling


def _tagged_decoder() -> msgspec.json.Decoder:
    """`scan`'s decoder of a slice: one struct per category, tagged by `cat`. Events of the categories the
    analysis never reads (python_function: most of a trace) decode to empty structs, their fields skipped
    without being built; the others carry Event's fields. A slice with another category, or an event
    without one, is refused (ValidationError) and decoded as Events: the tags change the cost, not the result."""
    fields = [(f, msgspec.Raw if f == "args" else Any, None) for f in Event.__struct_fields__ if f != "cat"]
    kept = (*CAT_KIND, *_LEGACY_CATS)
    unread = (*(c for c in _SKIP_CATS if c is not None), *_UNREAD_CATS)
    assert not {c.lower() for c in unread} & set(CAT_KIND)  # an unread category is never one the loop keeps
    types = [
        msgspec.defstruct(f"_{c}", fields if c in kept else [], tag_field="cat", tag=c, namespace={"cat": c})
        for c in (*kept, *unread)
    ]
    return msgspec.json.Decoder(list[Union[tuple(types)]])  # noqa: UP007 - a Union of a runtime tuple


_EVENTS = msgspec.json.Decoder(list[Event])
_TAGGED = _tagged_decoder()
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENT = msgspec.json.Decoder(Event)
_ARGS = msgspec.json.Decoder(Args)
_ANY = msgspec.json.Decoder()
_NO_ARGS = Args()


class BadJSON(Exception):
    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(f"{msg}, byte {pos:,}")
        self.msg, self.pos = msg, pos


def _event_from(obj: Any) -> Event | None:
    """An Event from a decoded value (None for a value that is not an object)."""
    if type(obj) is not dict:
        return None
    args = obj.get("args")
    return Event(
        obj.get("ph"),
        obj.get("cat"),
        obj.get("name"),
        obj.get("pid"),
        obj.get("tid"),
        obj.get("ts"),
        obj.get("dur"),
        msgspec.Raw(msgspec.json.encode(args)) if "args" in obj else None,
    )


def _decoded(raw: msgspec.Raw | None) -> Any:
    """A raw value decoded; numbers msgspec refuses (1e999, NaN) by the standard library; None if invalid."""
    if raw is None:
        return None
    try:
        return _ANY.decode(raw)
    except msgspec.DecodeError:
        try:
            return _JSON.decode(bytes(raw).decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None


def decode_args(raw: msgspec.Raw | None) -> Args:
    """The args of one event; args that are not an object, or of unexpected types, read as empty."""
    if raw is None:
        return _NO_ARGS
    try:
        return _ARGS.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        obj = _decoded(raw)
        if type(obj) is not dict:
            return _NO_ARGS

        def raw_of(key: str) -> msgspec.Raw | None:
            return msgspec.Raw(msgspec.json.encode(obj[key])) if key in obj else None

        return Args(
            raw_of("Input Dims"),
            raw_of("Input type"),
            raw_of("Concrete Inputs"),
            obj.get("External id"),
            obj.get("external id"),
            obj.get("correlation"),
            obj.get("device"),
            obj.get("bytes"),
            obj.get("stream"),
        )


class Reader:
    """Streams a trace's events (`events()` yields Event, or None for a non-object entry)."""

    def __init__(self, stream: Any, unread_empty: bool = False) -> None:
        self.stream = stream
        self.unread_empty = unread_empty  # `scan`: events of categories never read may come back empty (no fields)
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # bytes dropped from the front of the buffer
        self.nbytes = 0
        self.meta: dict[str, Any] = {}
        self.saw_events = False
        self._text: str | None = None  # latin-1 view of buf (byte positions = character positions)
        self.not_utf8 = 0  # values whose bytes are not UTF-8 (read as Latin-1)
        self._slow_until = 0  # file offset up to which msgspec failed: events read one by one
        self._first = True
        self.bom = 0

    def _fill(self, size: int = _CHUNK) -> bool:
        if self.eof:
            return False
        b = self.stream.read(size)
        self.nbytes += len(b)
        if not b:
            self.eof = True
        if self._first and b:
            self._first = False
            if b.startswith(b"\xef\xbb\xbf"):
                b, self.bom = b[3:], 3
        self.consumed += self.pos
        # One new buffer, not two (slice, then concatenation): each fresh megabyte costs page faults.
        self.buf = b"".join((memoryview(self.buf)[self.pos :], b)) if self.pos < len(self.buf) else b
        self.pos = 0
        self._text = None
        return bool(b)

    def _skip(self) -> int:
        """The next non-blank byte (-1 at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return -1

    def _value(self) -> Any:
        """One JSON value at pos, decoded by the standard library (slow path, and metadata)."""
        while True:
            if self._text is None:
                self._text = self.buf.decode("latin-1")
            try:
                _, end = _SCAN(self._text, self.pos)
            except StopIteration as exc:
                err = json.JSONDecodeError("Expecting value", self._text, exc.value)
            except json.JSONDecodeError as exc:
                err = exc
            else:
                if end >= len(self.buf) and not self.eof and self._fill():
                    continue  # a number may go on in the next chunk
                raw = self.buf[self.pos : end]
                self.pos = end
                try:
                    text = raw.decode()
                except UnicodeDecodeError:
                    self.not_utf8 += 1
                    text = raw.decode("latin-1")  # every byte is a character: names stay readable
                return _JSON.decode(text)
            # Only a value cut by the end of the buffer is worth more data; anything else is invalid.
            where = self.consumed + err.pos
            rest = self.buf[err.pos : err.pos + 64]
            cut = (
                len(rest) <= 16
                or err.msg.startswith("Unterminated string")
                or (not rest.strip() and err.pos + 64 >= len(self.buf))
            )
            held = len(self.buf) - self.pos
            if cut and held >= _MAX_VALUE:
                raise BadJSON(f"one value is over {_MAX_VALUE >> 20} MB long", self.consumed + self.pos)
            if cut and self._fill(min(max(_CHUNK, held), _MAX_VALUE - held)):  # doubling: linear time
                continue
            raise BadJSON(err.msg, where)

    def _error(self, what: str) -> BadJSON:
        return BadJSON(what, self.consumed + self.pos)

    def events(self) -> Iterator[Event | None]:
        """Every entry of the event array, one by one (`batches` is the fast way)."""
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[Event | None]]:
        """The entries of the event array in lists (a slice's worth each); metadata lands in `meta`."""
        in_object = self.open_array()
        if in_object is None:
            return
        yield from self._array()
        if in_object:
            yield from self.members()

    def open_array(self) -> bool | None:
        """Moves to the event array's first entry: True inside ``{...}``, False in a bare array, None when
        the object holds no ``traceEvents`` array (its keys are then all in `meta`)."""
        c = self._skip()
        if c == ord("["):
            self.pos += 1
            self.saw_events = True
            return False
        if c != ord("{"):
            raise self._error("expected '{' or '['")
        self.pos += 1
        return True if self._next_member() else None

    def members(self) -> Iterator[list[Event | None]]:
        """The rest of the top-level object after an event array (a second ``traceEvents`` is read too)."""
        while self._next_member():
            yield from self._array()

    def _next_member(self) -> bool:
        """Reads members into `meta` up to a traceEvents array (True: at its first entry) or the end (False)."""
        while True:
            c = self._skip()
            if c == ord("}"):
                self.pos += 1
                return False
            if c == ord(","):
                self.pos += 1
                c = self._skip()
            if c != ord('"'):
                raise self._error("expected a key")
            key = self._value()
            if self._skip() != ord(":"):
                raise self._error("expected ':'")
            self.pos += 1
            if self._skip() == ord("[") and key == "traceEvents":
                self.pos += 1
                self.saw_events = True
                return True
            self.meta[key] = self._value()

    @property
    def offset(self) -> int:
        """The position in the stream (a BOM counted)."""
        return self.consumed + self.pos + self.bom

    def _array(self) -> Iterator[list[Event | None]]:
        while True:
            c = self._skip()
            if c == ord(","):
                self.pos += 1
                c = self._skip()
            if c == -1:
                raise self._error("the event array is not closed")
            if c == ord("]"):
                self.pos += 1
                return
            batch = self._slice() if self.consumed + self.pos >= self._slow_until else None
            if batch is None:  # one event the slow way (it may need more data, or be damaged)
                yield [_event_from(self._value())]
            else:
                yield batch

    def _slice(self) -> list[Event | None] | None:
        """The complete events from pos to the last event boundary in the buffer, decoded by msgspec."""
        buf, start = self.buf, self.pos
        if len(buf) - start < _CHUNK // 2 and not self.eof:
            self._fill()
            buf, start = self.buf, self.pos
        end = len(buf)
        for _ in range(_TRIES):
            p = buf.rfind(b"}", start, end)
            while p >= 0 and not _BOUNDARY.match(buf, p):
                p = buf.rfind(b"}", start, p)
            if p < 0:
                break
            text = b"".join((b"[", memoryview(buf)[start : p + 1], b"]"))  # one copy, not three
            try:
                batch = self._decode(text)
            except UnicodeDecodeError:  # not UTF-8: the slow path reads it as Latin-1
                break
            except msgspec.DecodeError as exc:
                m = _TRAILING.search(str(exc))
                if m is None:  # not an event boundary (inside a string or a nested value)
                    end = p
                    continue
                # The event array closed inside the slice (metadata follows it): decode up to its ']'.
                q = len(text[: int(m.group(1)) + 1].rstrip(b" \t\r\n,")) - 1  # the array's ']' in text
                if text[q : q + 1] != b"]":
                    return None
                try:
                    batch = self._decode(text[: q + 1])
                except msgspec.DecodeError:
                    return None
                self.pos = start + q - 1  # at the array's ']'
                return batch
            self.pos = p + 1
            return batch
        self._slow_until = self.consumed + len(buf)  # not plain Kineto here: no second try per event
        return None

    def _decode(self, text: bytes) -> list[Event | None]:
        if self.unread_empty:
            try:
                return _TAGGED.decode(text)
            except msgspec.ValidationError:  # another category, no category...: decoded as Events below
                pass
        try:
            return _EVENTS.decode(text)
        except msgspec.ValidationError:  # an entry that is not an object, or a field of another type
            return [self._one(r) for r in _RAWS.decode(text)]

    @staticmethod
    def _one(raw: msgspec.Raw) -> Event | None:
        try:
            return _EVENT.decode(raw)
        except msgspec.ValidationError:
            return _event_from(_decoded(raw))


# ================================================================================================
# Opening a file or an archive member
# ================================================================================================
_EXPAND_RATIO = 100  # a compressed trace that expands more than this (real ones: 10-30x) ...
_EXPAND_FLOOR = 64 << 20  # ... and past 64 MiB is refused as a decompression bomb


class TooLarge(OSError):
    """A compressed trace expanded past the cap."""


class _Capped:
    """A decompressing stream that refuses to expand past `cap` bytes (a gzip bomb)."""

    def __init__(self, stream: Any, packed: int) -> None:
        self.stream, self.total = stream, 0
        self.cap = max(_EXPAND_FLOOR, _EXPAND_RATIO * packed)
        self.packed = packed

    def read(self, size: int) -> bytes:
        b = self.stream.read(size)
        self.total += len(b)
        if self.total > self.cap:
            raise TooLarge(
                f"decompresses to over {self.cap / 1e9:,.1f} GB, {_EXPAND_RATIO}x its {self.packed / 1e6:,.1f} MB "
                "(real traces compress 10-30x): refused as a decompression bomb; decompress it yourself to analyse it"
            )
        return b

    def close(self) -> None:
        self.stream.close()


def open_source(path: Path, member: str | None) -> tuple[Any, str, list[str]]:
    """(binary stream of the JSON, description, warnings)."""
    notes: list[str] = []
    from footprint.inputs import check_file

    check_file(path, "trace file (.json, .json.gz or a tar archive)")  # a named pipe would block the read forever
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the caller through the returned stream
    except FileNotFoundError:
        raise FootprintError("not found", str(path)) from None
    except IsADirectoryError:
        raise FootprintError("is a directory, expected a trace file (.json, .json.gz or a tar archive)", str(path)) from None
    except OSError as exc:
        raise FootprintError(f"cannot open ({exc.strerror})", str(path)) from None
    magic = fh.read(262)
    fh.seek(0)
    is_gz = magic[:2] == b"\x1f\x8b"
    is_tar = len(magic) > 261 and magic[257:262] == b"ustar"
    if not is_tar and is_gz:
        try:
            with gzip.open(path, "rb") as g:
                is_tar = g.read(262)[257:262] == b"ustar"
        except (OSError, EOFError, zlib.error):
            is_tar = False
    if is_tar:
        fh.close()
        return _open_member(path, member, notes)
    if member is not None:
        fh.close()
        raise FootprintError("'::MEMBER' is for tar archives; this file is not one", str(path))
    if is_gz:
        return _Capped(gzip.GzipFile(fileobj=fh), _size(path)), path.name, notes
    return fh, path.name, notes


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _open_member(path: Path, member: str | None, notes: list[str]) -> tuple[Any, str, list[str]]:
    try:
        tf = tarfile.open(path, "r:*")  # noqa: SIM115
        members = tf.getmembers()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise FootprintError(f"cannot read the archive ({exc})", str(path)) from None
    traces = sorted((m for m in members if m.isfile() and re.search(r"\.json(\.gz)?$", m.name)), key=lambda m: m.name)
    if member is not None:
        chosen = [m for m in traces if m.name == member or m.name.endswith("/" + member)]
        if not chosen:
            raise FootprintError(
                f"no trace named {member!r} in the archive "
                f"(it holds: {', '.join(m.name for m in traces[:8]) or 'no .json files'})",
                str(path),
            )
        pick = chosen[0]
    else:
        if not traces:
            raise FootprintError("the archive holds no .json trace", str(path))
        pick = traces[0]
        if len(traces) > 1:
            notes.append(f"the archive holds {len(traces)} traces; analysed {pick.name} (pick another with ARCHIVE::MEMBER)")
    stream = tf.extractfile(pick)
    assert stream is not None
    if pick.name.endswith(".gz"):
        stream = gzip.GzipFile(fileobj=stream)
    return _Capped(stream, _size(path)), f"{path.name}::{pick.name}", notes


def split_member(path: str | Path) -> tuple[Path, str | None]:
    text = str(path)
    if "::" in text and not Path(text).exists():
        archive, member = text.split("::", 1)
        return Path(archive), member
    return Path(text), None


# ================================================================================================
# The one pass: what is kept of each event
# ================================================================================================
class Scan:
    """What one streaming pass keeps."""

    def __init__(self) -> None:
        # cpu ops, as parallel arrays; names, threads and shapes interned (ops repeat every step)
        self.op_ts = array("d")
        self.op_end = array("d")
        self.op_ext = array("q")
        self.op_thread: list[Any] = []
        self.op_name: list[str] = []
        self.op_sig: list[Any] = []  # key into `sigs`
        self.sigs: dict[Any, tuple[Any, Any, Any]] = {}  # raw (Input Dims, Input type) -> (key, dims, types)
        self.op_conc: dict[int, Any] = {}  # Concrete Inputs, for the ops whose formulas read them
        # launches: correlation -> (ts, dur, thread, name)
        self.launch: dict[Any, tuple[float, float, Any, str]] = {}
        # gpu events: (ts, dur, device, kind, name, correlation, external id, bytes, stream)
        self.gpu: list[tuple[Any, ...]] = []
        # ProfilerStep#N spans on the CPU: (ts, end, name, thread)
        self.steps: list[tuple[float, float, str, Any]] = []
        self.meta: dict[str, Any] = {}
        self.events = 0
        self.bytes = 0
        self.seconds = 0.0
        self.truncated: str | None = None
        self.bad_times = 0  # events left out: ts/dur missing, not finite, negative or absurd
        self.bad_shapes: set[Any] = set()  # keys of recorded shapes with a dimension that is not a count
        self.notes: list[str] = []


_MAX_TS = 1e19  # |ts| beyond this (us: 300,000 years; ns: 300 years since 1970) is not a time
_MAX_DUR = 1e13  # one event longer than this (us: 116 days; ns: 2.8 h x 1000) is not a duration
_MAX_BYTES = 1 << 50  # a copy's byte count beyond a petabyte is not one
_MAX_DIM = 1 << 40  # a tensor dimension beyond this is not one


def _sane(dims: Any, depth: int = 0) -> bool:
    """Recorded shapes hold only lists and counts in [0, 2**40) (None and strings for non-tensors)."""
    if type(dims) is int:
        return 0 <= dims < _MAX_DIM
    if type(dims) is list:
        return depth < 8 and all(_sane(d, depth + 1) for d in dims)
    return dims is None or type(dims) is str


class _Keeper:
    """What one pass keeps of each slice of events, into a Scan (see `scan`)."""

    def __init__(self, s: Scan) -> None:
        self.s = s
        self.n = 0
        self.kinds: dict[Any, int] = {}
        self.names: dict[str, str] = {}
        self.threads: dict[Any, Any] = {}
        self.shaped: dict[str, bool] = {}
        self.launches: dict[str, bool] = {}

    def add(self, batch: list[Event | None]) -> None:
        self.n += len(batch)
        try:
            wanted = [e for e in batch if e is not None and e.cat not in _SKIP_CATS]
        except TypeError:  # an unhashable category somewhere in the slice: the loop skips it
            wanted = [e for e in batch if e is not None]
        s, kinds, names, threads = self.s, self.kinds, self.names, self.threads
        for e in wanted:
            cat = e.cat
            try:
                kind = kinds[cat]
            except KeyError:
                kind = kinds[cat] = CAT_KIND.get(str(cat).lower(), 0) if cat is not None else 0
            except TypeError:  # an unhashable category
                continue
            if not kind or e.ph != "X":
                continue
            ts, dur = e.ts, e.dur
            if type(ts) not in NUM or type(dur) not in NUM or not (0 <= dur <= _MAX_DUR and -_MAX_TS <= ts <= _MAX_TS):
                self.s.bad_times += 1  # missing, not a number, nan, negative or absurd
                continue
            name = e.name
            if type(name) is not str:
                name = "" if name is None else str(name)
            name = names.setdefault(name, name)
            if kind == ANNOTATION or (kind == OP and name.startswith(STEP_PREFIX)):
                if name.startswith(STEP_PREFIX):
                    th = (e.pid, e.tid)
                    s.steps.append((ts, ts + dur, name, threads.setdefault(th, th)))
                if kind == ANNOTATION:
                    continue
            args = decode_args(e.args)
            if kind == OP:
                self._op(e, name, ts, dur, args)
            elif kind == RT:
                self._runtime(e, name, ts, dur, args)
            else:
                dev = args.device
                if dev is None:
                    dev = e.pid
                ext = args.ext if args.ext is not None else args.ext_legacy
                nb = args.nbytes
                if nb is not None and (type(nb) not in NUM or not 0 <= nb < _MAX_BYTES):
                    nb = None
                s.gpu.append((ts, dur, dev, kind, name, args.correlation, ext, nb, args.stream))

    def _op(self, e: Event, name: str, ts: float, dur: float, args: Args) -> None:
        s = self.s
        if name in NEEDS_CONCRETE:
            s.op_conc[len(s.op_name)] = _decoded(args.concrete)
        s.op_ts.append(ts)
        s.op_end.append(ts + dur)
        th = (e.pid, e.tid)
        s.op_thread.append(self.threads.setdefault(th, th))
        s.op_name.append(name)
        want = self.shaped.get(name)
        if want is None:
            want = self.shaped[name] = wants_shapes(name)
        if not want or args.dims is None:
            s.op_sig.append(None)
        else:
            key = (bytes(args.dims), bytes(args.types) if args.types is not None else None)
            entry = s.sigs.get(key)
            if entry is None:
                dims = _decoded(args.dims)
                if not _sane(dims):  # a dimension that is not a count: shapes treated as not recorded
                    s.bad_shapes.add(key)
                    dims = None
                entry = s.sigs[key] = (key, dims, _decoded(args.types))
            s.op_sig.append(entry[0])  # the first copy of the key: the others are freed
        ext = args.ext
        s.op_ext.append(ext if type(ext) is int and -(2**63) <= ext < 2**63 else -1)

    def _runtime(self, e: Event, name: str, ts: float, dur: float, args: Args) -> None:
        corr = args.correlation
        is_launch = self.launches.get(name)
        if is_launch is None:
            is_launch = self.launches[name] = LAUNCH.search(name) is not None
        if corr is not None and is_launch:
            th = (e.pid, e.tid)
            try:  # noqa: SIM105 - contextlib.suppress costs a context manager per launch in the hot loop
                self.s.launch[corr] = (ts, dur, self.threads.setdefault(th, th), name)
            except TypeError:  # an unhashable correlation is skipped
                pass


def scan(stream: Any, file: str) -> Scan:
    """Read every event once; keep CPU ops, launches, GPU events and profiler steps (see Scan)."""
    s = Scan()
    reader = Reader(stream, unread_empty=True)
    keep = _Keeper(s)
    t0 = time.perf_counter()
    try:
        for batch in reader.batches():
            keep.add(batch)
    except (BadJSON, UnicodeDecodeError, RecursionError, ValueError) as exc:  # invalid JSON, not UTF-8, too deep
        why = {UnicodeDecodeError: "not UTF-8 text", RecursionError: "nested too deep"}.get(type(exc), str(exc))
        if keep.n == 0 and not reader.saw_events:
            raise FootprintError(f"not valid JSON ({why})", file) from None
        s.truncated = why
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:  # a truncated or corrupt .gz / archive
        if isinstance(exc, TooLarge):
            raise FootprintError(str(exc), file) from None
        if keep.n == 0:
            raise FootprintError(f"cannot read the trace ({exc})", file) from None
        s.truncated = str(exc)
    s.seconds = time.perf_counter() - t0
    s.events, s.bytes = keep.n, reader.nbytes
    return finish(s, reader.saw_events, reader.meta, reader.not_utf8, file)


def finish(s: Scan, saw_events: bool, meta: dict[str, Any], not_utf8: int, file: str) -> Scan:
    """The pass's notes and metadata (also for a pass split over processes: `parallel`)."""
    if s.truncated:
        s.notes.append(f"the trace ends early or is damaged ({s.truncated}): analysed the {s.events:,} events read before that")
    elif not saw_events:
        raise FootprintError("no 'traceEvents' array: not a PyTorch profiler (Kineto) trace", file, "traceEvents")
    if not_utf8:
        s.notes.append(
            f"the trace is not UTF-8 (damaged, or written in another encoding): {not_utf8:,} value(s) read as "
            "Latin-1, so names with other characters may read oddly"
        )
    if s.bad_times:
        s.notes.append(
            f"{s.bad_times:,} event(s) skipped: ts/dur missing, not numbers, not finite, negative or beyond any "
            f"real trace (dur > {_MAX_DUR:g}, |ts| > {_MAX_TS:g}); the figures leave them out"
        )
    if s.bad_shapes:
        s.notes.append(
            f"recorded shapes dropped: {len(s.bad_shapes):,} distinct ones, holding a dimension that is not a count "
            f"below {_MAX_DIM:,}; FLOPs are not available for the ops that recorded them"
        )
    s.meta = {k: v for k, v in meta.items() if k != "metadata"}
    return s
