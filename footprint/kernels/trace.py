"""`footprint kernels analyze`: what the GPU did in a PyTorch profiler (Kineto) trace, and how efficiently.

Reads ``.json``, ``.json.gz`` and tar archives of traces (``ARCHIVE::MEMBER`` picks one), current and
legacy (2021, ``Kernel``/``Runtime``/``Operator`` categories, lower-case ``external id``) formats, in
one streaming pass: events are decoded one at a time by the standard library's C JSON scanner from a
buffer of about a megabyte, and only what the analysis needs is kept per event (names, threads and
shapes interned), so a trace of hundreds of MB needs a fraction of its size in memory.

Conventions (the README's "Kernel traces" section says the same):

- **Timeline** (TraceLens' ``gpu_timeline``): GPU events are kernels, ``gpu_memcpy`` and ``gpu_memset`` on
  the analysed device; busy = the union of their intervals, total = first start to last end, idle =
  total - busy. The device is the one the kernels ran on (``args.device``), never the first
  ``deviceProperties`` entry; kernels on other devices are left out and a warning says how many.
- **Linking**: kernel -> the runtime call that launched it (``correlation``) -> the innermost ``cpu_op``
  that encloses the launch on the same thread (the op that launched it; TraceLens does the same).
  ``External id`` is the fallback where a kernel has no launch event. Above that op, the outermost
  GEMM/convolution/attention op with a FLOP model takes the kernel (its subtree's helper copies and
  memsets included, as TraceLens). An op's kernel time is the union of its kernels' intervals.
- **FLOPs** (2 per multiply-accumulate) from ``Input Dims``/``Input type``, with TraceLens' formulas:
  GEMM (aten::mm, addmm, bmm, baddbmm, _scaled_mm; aten::linear and aten::matmul only when they launch
  the kernel themselves, so each GEMM counts once) 2MNK per matrix, plus MN for the bias of
  addmm/baddbmm/linear (``flops``; ``matmul_flops`` leaves the bias out); convolution (aten::convolution
  and its _convolution/cudnn children, counted once at the outermost of them) 2 x out x
  prod(weight[1:]) (+ out for bias), backward 2x (+ out for the bias grad); scaled-dot-product attention
  (flash, efficient, cuDNN) 4 B H Sq Skv d (halved when causal), backward 2.5x (flash attention's
  recomputation included). Elementwise ops: 1 FLOP per output element; reductions: 1 per input element
  (estimates, as TraceLens).
- **Bytes**: GEMM A + B + C (+ bias N); convolution input + weight + output (+ bias); attention Q, K, V,
  O; elementwise inputs + output; memcpy the bytes the profiler recorded. Each tensor counted once.
- **Roofline**: arithmetic intensity = FLOPs / bytes against the card's ridge point = dense peak of the
  op's dtype (fp32 vector peak for elementwise and reduction ops) / DRAM bandwidth (lca_data).
- **Peaks** are dense, per dtype, from lca_data; fp32 work whose kernels are TF32 (name contains
  ``tf32``) is compared with the TF32 peak. A card not in the catalogue has peaks "not available":
  ``pct_of_peak`` is null, never 0.
"""

from __future__ import annotations

import codecs
import gzip
import json
import math
import re
import statistics
import tarfile
import time
import zlib
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator
from json.scanner import make_scanner
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

CATEGORIES = ("gemm", "attention", "convolution", "elementwise", "reduction", "communication", "memcpy", "other")
MATRIX_CATEGORIES = ("gemm", "attention", "convolution")
SHORT_KERNEL_US = 10.0
_NUM = (int, float)

# ---- dtypes ------------------------------------------------------------------------------------------
_DTYPES: dict[str, tuple[str, int]] = {
    "c10::BFloat16": ("bf16", 2),
    "BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("fp8", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "short int": ("int16", 2),
    "int": ("int32", 4),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
}

# ---- event kinds ------------------------------------------------------------------------------------
_OP, _RT, _KERNEL, _MEMCPY, _MEMSET = 1, 2, 3, 4, 5
_CAT_KIND = {
    "cpu_op": _OP,
    "operator": _OP,
    "cuda_runtime": _RT,
    "runtime": _RT,
    "cuda_driver": _RT,
    "hip_runtime": _RT,
    "kernel": _KERNEL,
    "gpu_memcpy": _MEMCPY,
    "memcpy": _MEMCPY,
    "gpu_memset": _MEMSET,
    "memset": _MEMSET,
}

# ---- the ops with a FLOP model: name -> (family, rank, leaf_only) -------------------------------------
# Walking up from the op that launched a kernel, the outermost family wins (so a GEMM inside a
# convolution counts once, as the convolution), and within it the lowest rank (the op whose arguments
# the formulas read, as TraceLens: aten::convolution, aten::_scaled_dot_product_flash_attention).
_MODEL_OPS: dict[str, tuple[str, int, bool]] = {
    "aten::mm": ("gemm", 0, False),
    "aten::addmm": ("gemm", 0, False),
    "aten::bmm": ("gemm", 0, False),
    "aten::baddbmm": ("gemm", 0, False),
    "aten::_scaled_mm": ("gemm", 0, False),
    "aten::linear": ("gemm", 1, True),
    "aten::matmul": ("gemm", 1, True),
    "aten::convolution": ("convolution", 0, False),
    "aten::_convolution": ("convolution", 1, False),
    "aten::cudnn_convolution": ("convolution", 2, False),
    "aten::conv2d": ("convolution", 3, False),
    "aten::conv1d": ("convolution", 3, False),
    "aten::conv3d": ("convolution", 3, False),
    "aten::convolution_backward": ("convolution", 0, False),
    "aten::_scaled_dot_product_flash_attention": ("attention", 0, False),
    "aten::_scaled_dot_product_efficient_attention": ("attention", 0, False),
    "aten::_scaled_dot_product_cudnn_attention": ("attention", 0, False),
    "aten::_flash_attention_forward": ("attention", 1, False),
    "aten::_efficient_attention_forward": ("attention", 1, False),
    "aten::scaled_dot_product_attention": ("attention", 2, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("attention", 0, False),
    "aten::_scaled_dot_product_efficient_attention_backward": ("attention", 0, False),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("attention", 0, False),
    "aten::_flash_attention_backward": ("attention", 1, False),
    "aten::_efficient_attention_backward": ("attention", 1, False),
}
# Ops whose formulas read "Concrete Inputs" (stride, padding, causal flags): only these keep them.
_NEEDS_CONCRETE = frozenset(n for n, (fam, _, _) in _MODEL_OPS.items() if fam != "gemm")

# ---- kernel-name classes (for kernels not under a modelled op) ----------------------------------------
_K_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv", re.I)
_K_ATTN = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)
_K_NORM = re.compile(r"norm(?!al)|softmax|bn_fw|bn_bw", re.I)
_K_CONV = re.compile(r"conv|scudnn|cudnn|implicit_?gemm|dgrad|wgrad|fprop|miopen|winograd|igemm", re.I)
_K_GEMM = re.compile(r"gemm|cutlass|cublas|xmma|wgmma|Cijk_|matmul|triton_tem|splitk|sgemm|hgemm", re.I)
_K_RED = re.compile(
    r"reduce|reduction|triton_red|triton_per|sum_|mean|argmax|argmin|cross_entropy|nll_loss|"
    r"scan|cub::|topk|sort|max_|min_",
    re.I,
)
_K_EW = re.compile(
    r"elementwise|vectorized|unrolled|pointwise|triton_poi|fill|copy|catarray|where|clamp|gelu|"
    r"relu|silu|sigmoid|tanh|dropout|distribution|add|mul|div",
    re.I,
)
# Views, allocations and bookkeeping: they launch no kernel, so their shapes are not kept.
_NO_SHAPE_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::as_strided",
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::expand_as",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::unbind",
        "aten::split",
        "aten::split_with_sizes",
        "aten::chunk",
        "aten::detach",
        "aten::detach_",
        "aten::alias",
        "aten::lift_fresh",
        "aten::resize_",
        "aten::record_stream",
        "aten::size",
        "aten::stride",
        "aten::numel",
        "aten::result_type",
        "aten::set_",
        "aten::is_nonzero",
        "aten::item",
        "aten::flatten",
        "aten::view_as",
        "aten::unflatten",
        "aten::_reshape_alias",
        "aten::movedim",
        "aten::pin_memory",
        "detach",
    }
)


# Runtime calls that can start GPU work (kernels, copies, sets, graphs); the others (stream queries,
# events, attribute calls) are not kept.
_LAUNCH = re.compile(r"launch|memcpy|memset|prefetch", re.I)


def _wants_shapes(name: str) -> bool:
    return (
        name not in _NO_SHAPE_OPS
        and not name.startswith("autograd::")
        and not name.endswith(("Backward0", "Backward1", "AccumulateGrad"))
    )


_COPY_OPS = frozenset(
    {
        "aten::copy_",
        "aten::clone",
        "aten::contiguous",
        "aten::to",
        "aten::_to_copy",
        "aten::cat",
        "aten::fill_",
        "aten::zero_",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::index_select",
        "aten::embedding",
        "aten::gather",
        "aten::scatter",
        "aten::index",
        "aten::index_put_",
    }
)


def _kernel_class(name: str) -> str:
    if _K_COMM.search(name):
        return "communication"
    if _K_ATTN.search(name):
        return "attention"
    if _K_NORM.search(name):
        return "reduction"
    if _K_CONV.search(name):
        return "convolution"
    if _K_GEMM.search(name):
        return "gemm"
    if _K_RED.search(name):
        return "reduction"
    if _K_EW.search(name):
        return "elementwise"
    return "other"


# ================================================================================================
# Reading: streaming, with the small top-level metadata captured around the event array
# ================================================================================================
_CHUNK = 1 << 20
_MAX_VALUE = 256 << 20  # one event (or metadata value) larger than this is refused
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*(?:,[ \t\n\r]*)?")


class _BadJSON(Exception):
    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(f"{msg}, character {pos:,}")
        self.msg, self.pos = msg, pos


class _Reader:
    """Streams a JSON document whose top level is ``{..., "traceEvents": [...], ...}`` (or a bare array).

    Events are decoded one at a time with the standard library's C scanner (``raw_decode``) from a
    buffer of about a megabyte, so memory stays flat whatever the file size; the other top-level keys
    (``deviceProperties``, ``baseTimeNanoseconds``, ... before or after the array) land in ``meta``.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.dec = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of the buffer
        self.nbytes = 0
        self.meta: dict[str, Any] = {}
        self.saw_events = False

    def _fill(self) -> bool:
        if self.eof:
            return False
        b = self.stream.read(_CHUNK)
        self.nbytes += len(b)
        if not b:
            self.eof = True
        self.consumed += self.pos
        self.buf = self.buf[self.pos :] + self.dec.decode(b, final=not b)
        self.pos = 0
        return bool(b)

    def _skip(self) -> str:
        """The next non-blank character ('' at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def _value(self) -> Any:
        while True:
            try:
                obj, end = _SCAN(self.buf, self.pos)
            except StopIteration as exc:
                err = json.JSONDecodeError("Expecting value", self.buf, exc.value)
            except json.JSONDecodeError as exc:
                err = exc
            else:
                if end >= len(self.buf) and not self.eof and self._fill():
                    continue  # a number may go on in the next chunk
                self.pos = end
                return obj
            # Only a value cut by the end of the buffer is worth more data; anything else is invalid.
            where = self.consumed + err.pos
            rest = self.buf[err.pos : err.pos + 64]
            cut = (
                len(rest) <= 16
                or err.msg.startswith("Unterminated string")
                or (not rest.strip() and err.pos + 64 >= len(self.buf))
            )
            if cut and len(self.buf) - self.pos < _MAX_VALUE and self._fill():
                continue
            raise _BadJSON(err.msg, where)

    def _error(self, what: str) -> _BadJSON:
        return _BadJSON(what, self.consumed + self.pos)

    def events(self) -> Iterator[Any]:
        c = self._skip()
        if c == "[":
            self.pos += 1
            self.saw_events = True
            yield from self._array()
            return
        if c != "{":
            raise self._error("expected '{' or '['")
        self.pos += 1
        while True:
            c = self._skip()
            if c == "}":
                self.pos += 1
                return
            if c == ",":
                self.pos += 1
                c = self._skip()
            if c != '"':
                raise self._error("expected a key")
            key = self._value()
            if self._skip() != ":":
                raise self._error("expected ':'")
            self.pos += 1
            if self._skip() == "[" and key == "traceEvents":
                self.pos += 1
                self.saw_events = True
                yield from self._array()
            else:
                self.meta[key] = self._value()

    def _array(self) -> Iterator[Any]:
        sep = _SEP.match
        scan = _SCAN
        buf, pos = self.buf, self.pos
        n = len(buf)
        while True:
            pos = sep(buf, pos).end()
            if pos >= n:
                self.pos = pos
                if not self._fill():
                    raise self._error("the event array is not closed")
                buf, pos, n = self.buf, self.pos, len(self.buf)
                continue
            if buf[pos] == "]":
                self.pos = pos + 1
                return
            try:
                obj, end = scan(buf, pos)
                if end >= n and not self.eof:
                    raise StopIteration(pos)  # complete only if the next chunk does not continue it
            except (StopIteration, json.JSONDecodeError):
                self.pos = pos
                obj = self._value()  # refills, or raises the real error
                buf, pos, n = self.buf, self.pos, len(self.buf)
                yield obj
                continue
            pos = end
            yield obj


_SCAN = make_scanner(json.JSONDecoder())  # the C scanner: (value, end) at an index


def _open_source(path: Path, member: str | None) -> tuple[Any, str, list[str]]:
    """(binary stream of the JSON, description, warnings)."""
    notes: list[str] = []
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the caller through the returned stream
    except FileNotFoundError:
        raise FootprintError("not found", str(path)) from None
    except IsADirectoryError:
        raise FootprintError("is a directory, expected a trace file (.json, .json.gz or a tar archive)", str(path)) from None
    magic = fh.read(262)
    fh.seek(0)
    is_gz = magic[:2] == b"\x1f\x8b"
    is_tar = len(magic) > 261 and magic[257:262] == b"ustar"
    if not is_tar and is_gz:
        try:
            with gzip.open(path, "rb") as g:
                is_tar = g.read(262)[257:262] == b"ustar"
        except (OSError, EOFError):
            is_tar = False
    if is_tar:
        fh.close()
        try:
            tf = tarfile.open(path, "r:*")  # noqa: SIM115
        except (tarfile.TarError, OSError) as exc:
            raise FootprintError(f"cannot read the archive ({exc})", str(path)) from None
        traces = sorted((m for m in tf.getmembers() if m.isfile() and re.search(r"\.json(\.gz)?$", m.name)), key=lambda m: m.name)
        if member is not None:
            chosen = [m for m in traces if m.name == member or m.name.endswith("/" + member)]
            if not chosen:
                raise FootprintError(
                    f"no trace named {member!r} in the archive (it holds: "
                    f"{', '.join(m.name for m in traces[:8]) or 'no .json files'})",
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
        return stream, f"{path.name}::{pick.name}", notes
    if member is not None:
        fh.close()
        raise FootprintError("'::MEMBER' is for tar archives; this file is not one", str(path))
    if is_gz:
        return gzip.GzipFile(fileobj=fh), path.name, notes
    return fh, path.name, notes


def _split_member(path: str | Path) -> tuple[Path, str | None]:
    text = str(path)
    if "::" in text and not Path(text).exists():
        archive, member = text.split("::", 1)
        return Path(archive), member
    return Path(text), None


class _Scan:
    """What one streaming pass keeps."""

    def __init__(self) -> None:
        # cpu ops, as parallel arrays; names, threads and shapes interned (ops repeat every step)
        self.op_ts = array("d")
        self.op_end = array("d")
        self.op_ext = array("q")
        self.op_thread: list[Any] = []
        self.op_name: list[str] = []
        self.op_sig: list[Any] = []  # key into `sigs`
        self.sigs: dict[Any, tuple[Any, Any, Any]] = {}  # (Input Dims, Input type) as tuples -> (key, dims, types)
        self.op_conc: dict[int, Any] = {}  # Concrete Inputs, for the ops whose formulas read them
        # launches: correlation -> (ts, dur, thread, name)
        self.launch: dict[Any, tuple[float, float, Any, str]] = {}
        # gpu events: (ts, dur, device, kind, name, correlation, external id, bytes, stream)
        self.gpu: list[tuple[Any, ...]] = []
        self.meta: dict[str, Any] = {}
        self.events = 0
        self.bytes = 0
        self.seconds = 0.0
        self.truncated: str | None = None
        self.notes: list[str] = []


def _scan(stream: Any, file: str) -> _Scan:
    s = _Scan()
    reader = _Reader(stream)
    t0 = time.perf_counter()
    op_ts, op_end, op_thread, op_name = s.op_ts, s.op_end, s.op_thread, s.op_name
    op_sig, sigs, op_conc, op_ext = s.op_sig, s.sigs, s.op_conc, s.op_ext
    launch, gpu = s.launch, s.gpu
    kinds: dict[Any, int] = {}
    names: dict[str, str] = {}
    threads: dict[Any, Any] = {}
    shaped: dict[str, bool] = {}
    launches: dict[str, bool] = {}
    needs_conc = _NEEDS_CONCRETE
    n = 0
    try:
        for e in reader.events():
            n += 1
            if type(e) is not dict:
                continue
            cat = e.get("cat")
            kind = kinds.get(cat)
            if kind is None:
                kind = kinds[cat] = _CAT_KIND.get(str(cat).lower(), 0) if cat is not None else 0
            if not kind or e.get("ph") != "X":
                continue
            ts = e.get("ts")
            dur = e.get("dur")
            if type(ts) not in _NUM or type(dur) not in _NUM:
                continue
            args = e.get("args")
            if type(args) is not dict:
                args = {}
            name = e.get("name")
            if type(name) is not str:
                name = "" if name is None else str(name)
            name = names.setdefault(name, name)
            if kind == _OP:
                if name in needs_conc:
                    op_conc[len(op_name)] = args.get("Concrete Inputs")
                op_ts.append(ts)
                op_end.append(ts + dur)
                th = (e.get("pid"), e.get("tid"))
                op_thread.append(threads.setdefault(th, th))
                op_name.append(name)
                want = shaped.get(name)
                if want is None:
                    want = shaped[name] = _wants_shapes(name)
                dims = args.get("Input Dims") if want else None
                if dims is None:
                    op_sig.append(None)
                else:
                    types = args.get("Input type")
                    try:
                        key = (tuple(map(tuple, dims)), tuple(types) if types is not None else None)
                        hash(key)
                    except TypeError:  # nested lists (TensorList inputs) or a non-list entry
                        key = repr((dims, types))
                    entry = sigs.get(key)
                    if entry is None:
                        entry = sigs[key] = (key, dims, types)
                    op_sig.append(entry[0])  # the first copy of the key: the others are freed
                ext = args.get("External id")
                op_ext.append(ext if type(ext) is int else -1)
            elif kind == _RT:
                corr = args.get("correlation")
                is_launch = launches.get(name)
                if is_launch is None:
                    is_launch = launches[name] = _LAUNCH.search(name) is not None
                if corr is not None and is_launch:
                    th = (e.get("pid"), e.get("tid"))
                    launch[corr] = (ts, dur, threads.setdefault(th, th), name)
            else:
                dev = args.get("device")
                if dev is None:
                    dev = e.get("pid")
                ext = args.get("External id")
                if ext is None:
                    ext = args.get("external id")
                gpu.append((ts, dur, dev, kind, name, args.get("correlation"), ext, args.get("bytes"), args.get("stream")))
    except _BadJSON as exc:
        if n == 0 and not reader.saw_events:
            raise FootprintError(f"not valid JSON ({exc})", file) from None
        s.truncated = str(exc)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:  # a truncated or corrupt .gz / archive
        if n == 0:
            raise FootprintError(f"cannot read the trace ({exc})", file) from None
        s.truncated = str(exc)
    s.events = n
    s.bytes = reader.nbytes
    s.seconds = time.perf_counter() - t0
    if s.truncated:
        s.notes.append(f"the trace ends early or is damaged ({s.truncated}): analysed the {n:,} events read before that")
    elif not reader.saw_events:
        raise FootprintError("no 'traceEvents' array: not a PyTorch profiler (Kineto) trace", file, "traceEvents")
    s.meta = {k: v for k, v in reader.meta.items() if k != "metadata"}
    return s


# ================================================================================================
# FLOP and byte models
# ================================================================================================
def _numel(shape: Any) -> int | None:
    if not isinstance(shape, list):
        return None
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _dtype(types: Any, i: int) -> tuple[str | None, int | None]:
    if isinstance(types, list) and i < len(types):
        return _DTYPES.get(types[i], (None, None))
    return None, None


def _int_list(text: Any) -> list[int] | None:
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        return [int(x) for x in text.strip("[]").split(",") if x.strip()]
    except ValueError:
        return None


def _conc(conc: Any, i: int) -> Any:
    return conc[i] if isinstance(conc, list) and i < len(conc) else None


def _gemm(name: str, dims: list[Any], types: Any) -> dict[str, Any] | None:
    bias = False
    if name in ("aten::mm", "aten::_scaled_mm"):
        a, b = dims[0], dims[1]
        if len(a) != 2 or len(b) != 2:
            return None
        batch, m, k, n = 1, a[0], a[1], b[1]
        dt, size = _dtype(types, 0)
        if name == "aten::_scaled_mm":
            bias = len(dims) > 4 and bool(dims[4])
            out_size = 2 if size == 1 else size
        else:
            out_size = size
    elif name == "aten::addmm":
        a, b = dims[1], dims[2]
        if len(a) != 2 or len(b) != 2:
            return None
        batch, m, k, n, bias = 1, a[0], a[1], b[1], True
        dt, size = _dtype(types, 1)
        out_size = size
    elif name == "aten::bmm":
        a, b = dims[0], dims[1]
        if len(a) != 3 or len(b) != 3:
            return None
        batch, m, k, n = a[0], a[1], a[2], b[2]
        dt, size = _dtype(types, 0)
        out_size = size
    elif name == "aten::baddbmm":
        a, b = dims[1], dims[2]
        if len(a) != 3 or len(b) != 3:
            return None
        batch, m, k, n, bias = a[0], a[1], a[2], b[2], True
        dt, size = _dtype(types, 1)
        out_size = size
    elif name == "aten::linear":
        x, w = dims[0], dims[1]
        if not x or len(w) != 2:
            return None
        batch, m, k, n = 1, _numel(x[:-1]) or 1, x[-1], w[0]
        bias = len(dims) > 2 and bool(dims[2])
        dt, size = _dtype(types, 0)
        out_size = size
    elif name == "aten::matmul":
        a, b = dims[0], dims[1]
        if not a or not b:
            return None
        a2 = [1, a[0]] if len(a) == 1 else a
        b2 = [b[0], 1] if len(b) == 1 else b
        m, k, n = a2[-2], a2[-1], b2[-1]
        ba, bb = a2[:-2], b2[:-2]
        width = max(len(ba), len(bb))
        ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
        batch = _numel([max(x, y) for x, y in zip(ba, bb, strict=True)]) or 1
        dt, size = _dtype(types, 0)
        out_size = size
    else:
        return None
    if not all(isinstance(v, int) for v in (batch, m, n, k)):
        return None
    matmul = 2 * batch * m * n * k
    flops = matmul + (batch * m * n if bias else 0)
    nbytes = None
    if size:
        nbytes = batch * (m * k * size + k * n * size + m * n * out_size + (n * size if bias else 0))
    return {
        "params": {"B": batch, "M": m, "N": n, "K": k, "bias": bias},
        "flops": flops,
        "matmul_flops": matmul,
        "bytes": nbytes,
        "dtype": dt,
        "model": "gemm",
    }


def _conv_out(
    x: list[int],
    w: list[int],
    stride: list[int],
    pad: list[int],
    dil: list[int],
    transposed: bool,
    out_pad: list[int],
    groups: int,
) -> list[int]:
    spatial = []
    for i in range(len(x) - 2):
        if transposed:
            spatial.append((x[i + 2] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w[i + 2] - 1) + out_pad[i] + 1)
        else:
            spatial.append((x[i + 2] + 2 * pad[i] - dil[i] * (w[i + 2] - 1) - 1) // stride[i] + 1)
    c_out = w[1] * groups if transposed else w[0]
    return [x[0], c_out, *spatial]


def _conv(name: str, dims: list[Any], types: Any, conc: Any) -> dict[str, Any] | None:
    backward = name == "aten::convolution_backward"
    off = 1 if backward else 0
    x, w = dims[off], dims[off + 1]
    if not isinstance(x, list) or not isinstance(w, list) or len(x) < 3 or len(x) != len(w):
        return None
    nd = len(x) - 2
    dt, size = _dtype(types, off)

    def arg(i: int, default: int) -> list[int] | None:
        v = _int_list(_conc(conc, i))
        if v is None:
            return None
        v = v or [default]
        return v * nd if len(v) == 1 else v

    if name in ("aten::convolution", "aten::_convolution", "aten::convolution_backward"):
        b = 3 + off
        stride, pad, dil = arg(b, 1), arg(b + 1, 0), arg(b + 2, 1)
        transposed = _conc(conc, b + 3) == "True"
        out_pad, g = arg(b + 4, 0), _conc(conc, b + 5)
        bias = (
            (len(dims) > 2 + off and bool(dims[2 + off]))
            if not backward
            else (_conc(conc, 10) or "").replace(" ", "").endswith("True]")
        )
    elif name == "aten::cudnn_convolution":  # (self, weight, padding, stride, dilation, groups, ...)
        pad, stride, dil = arg(2, 0), arg(3, 1), arg(4, 1)
        transposed, out_pad, g, bias = False, [0] * nd, _conc(conc, 5), False
    elif name in ("aten::conv1d", "aten::conv2d", "aten::conv3d"):  # (input, weight, bias, stride, padding, dil, g)
        stride, pad, dil = arg(3, 1), arg(4, 0), arg(5, 1)
        transposed, out_pad, g = False, [0] * nd, _conc(conc, 6)
        bias = len(dims) > 2 and bool(dims[2])
    else:
        return None
    try:
        groups = int(g) if g not in (None, "") else 1
    except ValueError:
        return None
    if backward:
        out = dims[0] if isinstance(dims[0], list) and len(dims[0]) == len(x) else None
        mask = [t.strip() == "True" for t in (_conc(conc, 10) or "[True, True, True]").strip("[]").split(",")]
        mask = (mask + [True, True, True])[:3]
    else:
        if stride is None or pad is None or dil is None or out_pad is None:
            return None  # no Concrete Inputs (older traces): the output shape is unknown
        out = _conv_out(x, w, stride, pad, dil, transposed, out_pad, groups)
        mask = [True, False, False]
    if out is None:
        return None
    per = 2 * (_numel(w[1:]) or 0)
    base = (_numel(x) if transposed else _numel(out)) or 0
    conv = base * per
    out_n, x_n, w_n = _numel(out) or 0, _numel(x) or 0, _numel(w) or 0
    if backward:
        flops = conv * (int(mask[0]) + int(mask[1])) + (out_n if mask[2] else 0)
        nbytes = (
            (out_n + x_n + w_n + (x_n if mask[0] else 0) + (w_n if mask[1] else 0) + (out[1] if mask[2] else 0)) * size
            if size
            else None
        )
    else:
        flops = conv + (out_n if bias else 0)
        nbytes = (x_n + w_n + out_n + (out[1] if bias else 0)) * size if size else None
    params = {
        "input": x,
        "weight": w,
        "output": out,
        "groups": groups,
        "bias": bool(bias),
        "direction": "backward" if backward else "forward",
    }
    if not backward:
        params.update(stride=stride, padding=pad, dilation=dil, transposed=transposed)
    return {
        "params": params,
        "flops": flops,
        "matmul_flops": conv * (2 if backward and mask[0] and mask[1] else 1),
        "bytes": nbytes,
        "dtype": dt,
        "model": "convolution",
    }


# name -> (index of q in Input Dims (k, v follow), layout, index of is_causal in Concrete Inputs, backward)
_SDPA = {
    "aten::_scaled_dot_product_flash_attention": (0, "bhsd", 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, "bhsd", 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, "bhsd", 6, False),
    "aten::scaled_dot_product_attention": (0, "bhsd", 5, False),
    "aten::_flash_attention_forward": (0, "bshd", 8, False),
    "aten::_efficient_attention_forward": (0, "bshd", 9, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, "bhsd", 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, "bhsd", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", 14, True),
    "aten::_flash_attention_backward": (1, "bshd", 11, True),
    "aten::_efficient_attention_backward": (1, "bshd", 14, True),
}


def _sdpa(name: str, dims: list[Any], types: Any, conc: Any) -> dict[str, Any] | None:
    q_i, layout, causal_i, backward = _SDPA[name]
    if len(dims) < q_i + 3:
        return None
    q, k, v = dims[q_i], dims[q_i + 1], dims[q_i + 2]
    if not all(isinstance(t, list) and len(t) == 4 for t in (q, k, v)):
        return None
    if layout == "bhsd":
        b, hq, sq, d = q
        hkv, skv, dv = k[1], k[2], v[3]
    else:
        b, sq, hq, d = q
        skv, hkv, dv = k[1], k[2], v[3]
    flag = _conc(conc, causal_i)
    causal = flag == "True" or (name.startswith("aten::_efficient_attention") and flag not in (None, "", "0"))
    fwd = 2 * b * hq * sq * skv * (d + dv)
    if causal:
        fwd //= 2
    flops = fwd * 5 // 2 if backward else fwd
    dt, size = _dtype(types, q_i)
    q_n, kv_n, o_n = b * hq * sq * d, b * hkv * skv * (d + dv), b * hq * sq * dv
    nbytes = None
    if size:
        nbytes = (q_n + kv_n + o_n) * size if not backward else (2 * q_n + 2 * kv_n + o_n) * size
    return {
        "params": {
            "B": b,
            "H_Q": hq,
            "H_KV": hkv,
            "N_Q": sq,
            "N_KV": skv,
            "d_qk": d,
            "d_v": dv,
            "causal": causal,
            "direction": "backward" if backward else "forward",
        },
        "flops": flops,
        "matmul_flops": flops,
        "bytes": nbytes,
        "dtype": dt,
        "model": "attention",
    }


def _model(name: str, dims: Any, types: Any, conc: Any) -> dict[str, Any] | None:
    """FLOPs, bytes, dtype and parameters of a modelled op; None when its shapes are not recorded."""
    if not isinstance(dims, list) or not dims:
        return None
    try:
        fam = _MODEL_OPS[name][0]
        if fam == "gemm":
            return _gemm(name, dims, types)
        if fam == "convolution":
            return _conv(name, dims, types, conc)
        return _sdpa(name, dims, types, conc)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return None


def _estimate(cat: str, name: str, dims: Any, types: Any) -> dict[str, Any] | None:
    """Elementwise / reduction estimates (1 FLOP per output / input element) from the launching op's shapes."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    tensors = []
    for shape, t in zip(dims, types, strict=False):
        dt = _DTYPES.get(t)
        n = _numel(shape)
        if dt and n is not None:
            tensors.append((shape, n, dt))
    if not tensors:
        return None
    read = sum(n * dt[1] for _, n, dt in tensors)
    dtype, size = tensors[0][2]
    big = max(n for _, n, _ in tensors)
    if cat == "elementwise":
        shapes = [s for s, _, _ in tensors]
        width = max(len(s) for s in shapes)
        out = 1
        for i in range(width):
            out *= max((s[len(s) - width + i] if len(s) - width + i >= 0 else 1) for s in shapes)
        copy = name in _COPY_OPS
        flops = 0 if copy else out
        nbytes = read + (big if copy else out) * size
        model = "copy" if copy else "elementwise"
    else:
        flops = big
        nbytes = read + (big * size if re.search(r"norm|softmax", name) else 0)
        model = "reduction"
    return {"params": {}, "flops": flops, "matmul_flops": None, "bytes": nbytes, "dtype": dtype, "model": model}


# ================================================================================================
# Intervals
# ================================================================================================
def _union(intervals: Iterable[tuple[float, float]], presorted: bool = False) -> list[tuple[float, float]]:
    """Merged, sorted intervals (`presorted`: the input is already sorted by start)."""
    out: list[tuple[float, float]] = []
    cs = ce = None
    for st, en in intervals if presorted else sorted(intervals):
        if ce is not None and st <= ce:
            if en > ce:
                ce = en
        else:
            if ce is not None:
                out.append((cs, ce))
            cs, ce = st, en
    if ce is not None:
        out.append((cs, ce))
    return out


def _length(merged: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in merged)


def _subtract(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Parts of merged intervals `b` not covered by merged intervals `a`."""
    out = []
    j = 0
    for s, e in b:
        cur = s
        while j < len(a) and a[j][1] <= s:
            j += 1
        k = j
        while k < len(a) and a[k][0] < e:
            if a[k][0] > cur:
                out.append((cur, min(e, a[k][0])))
            cur = max(cur, a[k][1])
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


# ================================================================================================
# Device and peaks
# ================================================================================================
class _Device:
    def __init__(self, index: Any, props: dict[str, Any] | None, warnings: list[str]) -> None:
        self.index = index
        self.trace_name = (props or {}).get("name")
        self.card = None
        self.peaks: dict[str, float] = {}
        self.bandwidth: float | None = None
        if self.trace_name:
            from footprint.lca.database import db

            try:
                self.card = db().find_gpu(self.trace_name)
            except FootprintError:
                warnings.append(
                    f"{self.trace_name!r} is not in the GPU catalogue: peaks are not available, "
                    f"pct_of_peak and the roofline class are null"
                )
        if self.card is not None:
            self.peaks = {k: v * 1e12 for k, v in self.card.peak_tflops.items()}
            bw = self.card.raw.get("memory_bandwidth")
            if isinstance(bw, dict) and bw.get("value"):
                from footprint.lca.units import ureg

                self.bandwidth = float(ureg.Quantity(str(bw["value"])).to("byte/s").magnitude)
            else:
                warnings.append(
                    f"{self.card.name}: memory bandwidth is not in lca_data, so the roofline class "
                    f"(compute- or memory-bound) is not available"
                )

    def peak(self, dtype: str | None) -> float | None:
        return self.peaks.get(dtype) if dtype else None

    def ridge(self, dtype: str | None, vector: bool = False) -> float | None:
        peak = self.peak("fp32" if vector else dtype)
        if peak is None or not self.bandwidth:
            return None
        return peak / self.bandwidth


# ================================================================================================
# The analysis
# ================================================================================================
def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _shape_text(dims: Any) -> str:
    """The tensor inputs' shapes, "(141, 512) x (512, 30522)"; a tensor list as "[(1, 768), (8, 768)]"."""

    def one(d: Any) -> str:
        if any(isinstance(x, list) for x in d):
            return "[" + ", ".join(one(x) for x in d if isinstance(x, list)) + "]"
        return "(" + ", ".join(str(x) for x in d) + ")"

    if not isinstance(dims, list):
        return ""
    return " x ".join(one(d) for d in dims if isinstance(d, list) and d)


def analyze_trace(path: str | Path, power: str | Path | None = None, top: int = 20) -> dict[str, Any]:
    """Analyse a PyTorch profiler (Kineto) trace; see the module docstring for the conventions.

    Returns ``{"trace", "device", "busy_time_us", "idle_time_us", "total_time_us", "timeline", "summary",
    "by_category", "ops", "launch_overhead", "power" (with `power`), "conventions", "warnings"}``.
    """
    file_path, member = _split_member(path)
    file = str(path)
    stream, label, warnings = _open_source(file_path, member)
    try:
        s = _scan(stream, file)
    finally:
        stream.close()
    warnings += s.notes
    meta = s.meta

    # ---- the device ------------------------------------------------------------------------------
    dev_time: dict[Any, float] = defaultdict(float)
    for g in s.gpu:
        dev_time[g[2]] += g[1]
    props_list = meta.get("deviceProperties") if isinstance(meta.get("deviceProperties"), list) else []
    if not dev_time:
        warnings.append("the trace has no GPU kernels, memcpy or memset events (a CPU-only profile?): nothing to time on a GPU")
        device_index = None
    else:
        device_index = max(dev_time, key=lambda d: dev_time[d])
        others = {d: t for d, t in dev_time.items() if d != device_index}
        if others:
            n_other = sum(1 for g in s.gpu if g[2] != device_index)
            warnings.append(
                f"{n_other:,} GPU events on other devices ({', '.join(map(str, sorted(others, key=str)))}) "
                f"are left out: device {device_index} is analysed (analyse one device at a time)"
            )
    props = next((p for p in props_list if isinstance(p, dict) and p.get("id") == device_index), None)
    if props is None and device_index is not None:
        warnings.append(
            "the trace has no deviceProperties entry for the kernels' device: the GPU model is unknown, peaks are not available"
            if not props_list
            else f"no deviceProperties entry has id {device_index} (the kernels' device): the GPU model is "
            f"unknown, peaks are not available"
        )
    device = _Device(device_index, props, warnings)
    gpu = [g for g in s.gpu if g[2] == device_index]
    gpu.sort(key=lambda g: g[0])

    # ---- timeline (TraceLens' gpu_timeline definitions) --------------------------------------------
    comm_names: dict[str, bool] = {}
    for g in gpu:
        if g[4] not in comm_names:
            low = g[4].lower()
            comm_names[g[4]] = "nccl" in low or "rccl" in low
    all_iv = _union(((g[0], g[0] + g[1]) for g in gpu), presorted=True)
    comp_iv = _union(((g[0], g[0] + g[1]) for g in gpu if g[3] != _MEMCPY and not comm_names[g[4]]), presorted=True)
    comm_iv = _union(((g[0], g[0] + g[1]) for g in gpu if g[3] != _MEMCPY and comm_names[g[4]]), presorted=True)
    mem_iv = _union(((g[0], g[0] + g[1]) for g in gpu if g[3] == _MEMCPY), presorted=True)
    busy = _length(all_iv)
    total = (all_iv[-1][1] - all_iv[0][0]) if all_iv else 0.0
    exposed_comm = _length(_subtract(comp_iv, comm_iv))
    exposed_mem = _length(_subtract(comm_iv, _subtract(comp_iv, mem_iv)))

    # ---- link kernels to the ops that launched them ------------------------------------------------
    n_ops = len(s.op_ts)
    op_ts, op_end = s.op_ts, s.op_end
    parent = array("q", [-1]) * n_ops
    leaf = array("q", [-1]) * len(gpu)
    by_thread: dict[Any, list[int]] = defaultdict(list)
    for i, th in enumerate(s.op_thread):
        by_thread[th].append(i)
    queries: dict[Any, list[tuple[float, int]]] = defaultdict(list)
    launch_of: list[tuple[float, float, Any, str] | None] = [None] * len(gpu)
    for j, g in enumerate(gpu):
        rt = s.launch.get(g[5]) if g[5] is not None else None
        launch_of[j] = rt
        if rt is not None:
            queries[rt[2]].append((rt[0], j))
    for th, idx in by_thread.items():
        idx.sort(key=lambda i: (op_ts[i], -op_end[i]))
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
    del by_thread, queries
    unlinked = [j for j in range(len(gpu)) if launch_of[j] is None and gpu[j][6] is not None]
    if unlinked:  # no launch event: fall back to the External id
        wanted = {gpu[j][6] for j in unlinked}
        by_ext: dict[Any, int] = {}
        for i, ext in enumerate(s.op_ext):
            if ext in wanted:
                by_ext.setdefault(ext, i)
        for j in unlinked:
            leaf[j] = by_ext.get(gpu[j][6], -1)

    # ---- the modelled op of each launching op --------------------------------------------------------
    names = s.op_name
    resolved: dict[int, int] = {}

    def model_op(lf: int) -> int:
        if lf in resolved:
            return resolved[lf]
        chain = []
        i = lf
        while i >= 0:
            spec = _MODEL_OPS.get(names[i])
            if spec is not None and (not spec[2] or i == lf):
                chain.append((spec[0], spec[1], i))
            i = parent[i]
        best = -1
        if chain:
            fam = chain[-1][0]
            cands = [c for c in chain if c[0] == fam]
            best = min(cands, key=lambda c: c[1])[2]
        resolved[lf] = best
        return best

    # ---- per-event categories, per-op instances ----------------------------------------------------
    # Events are sorted by start, so each instance's union of intervals is kept online: [time, start, end].
    kclass: dict[str, str] = {}
    tf32_name: dict[str, bool] = {}
    cat_count: dict[str, int] = defaultdict(int)
    cat_time: dict[str, float] = defaultdict(float)
    inst: dict[Any, list[float]] = {}
    inst_cat: dict[Any, str] = {}
    inst_tf32: set[Any] = set()
    memcpy_bytes = 0.0
    kernel_durs = array("d")
    launch_durs = array("d")
    launch_gaps = array("d")
    launch_bound = 0
    event_cat: list[str] = []
    event_key: list[Any] = []
    for j, g in enumerate(gpu):
        ts, dur, kind, kname = g[0], g[1], g[3], g[4]
        lf = leaf[j]
        m = model_op(lf) if lf >= 0 else -1
        if m >= 0:  # everything a modelled op launched is its time (memsets of cuBLAS/cuDNN included)
            cat = _MODEL_OPS[names[m]][0]
            key: Any = m
        elif kind in (_MEMCPY, _MEMSET):
            cat = "memcpy"
            if isinstance(g[7], (int, float)):
                memcpy_bytes += g[7]
            key = ("memcpy", kname)
        else:
            cat = kclass.get(kname)
            if cat is None:
                cat = kclass[kname] = _kernel_class(kname)
            key = lf if lf >= 0 else ("kernel", kname)
        if kind == _KERNEL:
            kernel_durs.append(dur)
            rt = launch_of[j]
            if rt is not None:
                launch_durs.append(rt[1])
                launch_gaps.append(ts - rt[0])
                if rt[1] >= dur:
                    launch_bound += 1
            is_tf32 = tf32_name.get(kname)
            if is_tf32 is None:
                is_tf32 = tf32_name[kname] = "tf32" in kname.lower()
            if is_tf32:
                inst_tf32.add(key)
        event_cat.append(cat)
        event_key.append(key)
        cat_count[cat] += 1
        cat_time[cat] += dur
        end = ts + dur
        cur = inst.get(key)
        if cur is None:
            inst[key] = [0.0, ts, end]
            inst_cat[key] = cat
        elif ts <= cur[2]:
            if end > cur[2]:
                cur[2] = end
        else:
            cur[0] += cur[2] - cur[1]
            cur[1], cur[2] = ts, end

    # ---- per-op rows ------------------------------------------------------------------------------------
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    cat_flops: dict[str, float] = defaultdict(float)
    cat_flops_known: dict[str, bool] = defaultdict(bool)
    cat_flops_time: dict[str, float] = defaultdict(float)
    cat_peak_time: dict[str, float] = defaultdict(float)  # sum of time x peak over ops with a peak
    cat_peak_flops: dict[str, float] = defaultdict(float)
    cat_bytes: dict[str, float] = defaultdict(float)
    cat_bytes_time: dict[str, float] = defaultdict(float)
    cat_matmul: dict[str, float] = defaultdict(float)
    no_shapes: dict[str, int] = defaultdict(int)
    total_flops = 0.0
    flops_by_dtype: dict[str, float] = defaultdict(float)
    info_cache: dict[tuple[Any, ...], tuple[dict[str, Any] | None, str, str]] = {}
    row_of: dict[Any, dict[str, Any]] = {}
    for key, (acc, cs, ce) in inst.items():
        cat = inst_cat[key]
        t = acc + ce - cs
        if isinstance(key, int):
            name, sk, conc = names[key], s.op_sig[key], s.op_conc.get(key)
            ck = (name, sk, cat, repr(conc) if conc is not None else None)
            hit = info_cache.get(ck)
            if hit is None:
                _, dims, types = s.sigs[sk] if sk is not None else (None, None, None)
                if cat in MATRIX_CATEGORIES and name in _MODEL_OPS:
                    info = _model(name, dims, types, conc)
                elif cat in ("elementwise", "reduction"):
                    info = _estimate(cat, name, dims, types)
                else:
                    info = None
                shape = _shape_text(dims)
                sig = json.dumps(info["params"], sort_keys=True) if info and info["params"] else shape
                hit = info_cache[ck] = (info, shape, sig)
            info, shape, sig = hit
            if info is None and cat in MATRIX_CATEGORIES and name in _MODEL_OPS:
                no_shapes[name] += 1
        else:
            name, shape, sig = (f"({key[0]}) {key[1]}" if key[0] == "kernel" else key[1]), "", ""
            info = None
        dtype = info["dtype"] if info else None
        if dtype == "fp32" and cat in MATRIX_CATEGORIES and key in inst_tf32:
            dtype = "tf32"
        rk = (name, sig, dtype, cat)
        row = rows.get(rk)
        if row is None:
            row = rows[rk] = {
                "name": name,
                "category": cat,
                "shapes": shape or None,
                "params": (info or {}).get("params") or None,
                "dtype": dtype,
                "count": 0,
                "kernel_time_us": 0.0,
                "flops": None,
                "matmul_flops": None,
                "bytes": None,
                "flops_model": (info or {}).get("model"),
                "_kernels": defaultdict(float),
            }
        row["count"] += 1
        row["kernel_time_us"] += t
        row_of[key] = row
        if info is not None:
            f, mf, b = info["flops"], info["matmul_flops"], info["bytes"]
            row["flops"] = (row["flops"] or 0) + f
            if mf is not None:
                row["matmul_flops"] = (row["matmul_flops"] or 0) + mf
                cat_matmul[cat] += mf
            if b is not None:
                row["bytes"] = (row["bytes"] or 0) + b
                cat_bytes[cat] += b
                cat_bytes_time[cat] += t
            cat_flops[cat] += f
            cat_flops_known[cat] = True
            cat_flops_time[cat] += t
            if cat in MATRIX_CATEGORIES:
                total_flops += f
                if dtype:
                    flops_by_dtype[dtype] += f
                pk = device.peak(dtype)
                if pk:
                    cat_peak_time[cat] += t * pk
                    cat_peak_flops[cat] += f

    for g, key in zip(gpu, event_key, strict=True):  # the kernels behind each row, by time
        row_of[key]["_kernels"][g[4]] += g[1]
    del event_key, row_of
    ops = []
    for row in rows.values():
        kernels = row.pop("_kernels")
        row["kernels"] = [k for k, _ in sorted(kernels.items(), key=lambda kv: -kv[1])[:3]]
        t = row["kernel_time_us"]
        f, b = row["flops"], row["bytes"]
        row["flops_per_call"] = f / row["count"] if f is not None else None
        row["tflops_per_s"] = f / t / 1e6 if f is not None and t > 0 else None
        matrix = row["category"] in MATRIX_CATEGORIES
        pk = device.peak(row["dtype"]) if matrix else None
        row["pct_of_peak"] = (100 * f / (t * 1e-6) / pk) if f is not None and pk and t > 0 else None
        row["arithmetic_intensity"] = f / b if f is not None and b else None
        row["tbytes_per_s"] = b / t / 1e6 if b and t > 0 else None
        row["pct_of_bandwidth"] = (100 * b / (t * 1e-6) / device.bandwidth) if b and t > 0 and device.bandwidth else None
        ridge = device.ridge(row["dtype"], vector=not matrix) if row["dtype"] else None
        ai = row["arithmetic_intensity"]
        row["ridge_point"] = ridge
        row["roofline"] = None if ai is None or ridge is None else ("compute-bound" if ai >= ridge else "memory-bound")
        ops.append(row)
    ops.sort(key=lambda r: -r["kernel_time_us"])

    # ---- categories -------------------------------------------------------------------------------------
    by_category: dict[str, dict[str, Any]] = {}
    for cat in CATEGORIES:
        t = cat_time.get(cat, 0.0)
        known = cat_flops_known.get(cat, False)
        f = cat_flops[cat] if known else None
        ft = cat_flops_time.get(cat, 0.0)
        b = cat_bytes.get(cat) or (memcpy_bytes if cat == "memcpy" and memcpy_bytes else None)
        bt = cat_bytes_time.get(cat, 0.0) if cat != "memcpy" else t
        entry = {
            "flops": f,
            "kernel_time_us": t,
            "count": cat_count.get(cat, 0),
            "share_of_busy": (t / busy) if busy > 0 else None,
            "time_with_flops_us": ft if known else None,
            "tflops_per_s": (f / ft / 1e6) if f is not None and ft > 0 else None,
            "pct_of_peak": (100 * cat_peak_flops[cat] / (cat_peak_time[cat] * 1e-6)) if cat_peak_time.get(cat) else None,
            "bytes": b,
            "tbytes_per_s": (b / bt / 1e6) if b and bt > 0 else None,
        }
        if cat == "gemm":
            entry["flops_without_bias"] = cat_matmul.get(cat) if known else None
        by_category[cat] = entry

    if no_shapes:
        warnings.append(
            "FLOPs not available for "
            + ", ".join(f"{n:,} {k}" for k, n in sorted(no_shapes.items()))
            + " (no recorded shapes: profile with record_shapes=True; convolutions also need the "
            "'Concrete Inputs' of PyTorch >= 2.1)"
        )
    n_unlinked = sum(1 for j in range(len(gpu)) if leaf[j] < 0 and gpu[j][3] == _KERNEL)
    n_kernels = sum(1 for g in gpu if g[3] == _KERNEL)
    if n_kernels and n_unlinked:
        warnings.append(
            f"{n_unlinked:,} of {n_kernels:,} kernels could not be linked to a CPU op (no launch event or "
            f"enclosing op): they are listed by kernel name"
        )

    # ---- summary and device -------------------------------------------------------------------------------
    main_dtype = max(flops_by_dtype, key=lambda d: flops_by_dtype[d]) if flops_by_dtype else None
    if main_dtype is None and device.peaks:
        main_dtype = "bf16" if "bf16" in device.peaks else next(iter(device.peaks))
    peak_main = device.peak(main_dtype)
    dev_out = {
        "index": device_index,
        "name": device.trace_name,
        "catalogue_id": device.card.id if device.card else None,
        "catalogue_name": device.card.name if device.card else None,
        "peak_dtype": main_dtype,
        "peak_tflops": peak_main / 1e12 if peak_main else None,
        "dtype_peaks": {k: v / 1e12 for k, v in device.peaks.items()} or None,
        "memory_bandwidth_tbytes_per_s": device.bandwidth / 1e12 if device.bandwidth else None,
        "ridge_point_flops_per_byte": device.ridge(main_dtype) if main_dtype else None,
        "memory_gb": (props or {}).get("totalGlobalMem", 0) / 1e9 if props and props.get("totalGlobalMem") else None,
        "sms": (props or {}).get("numSms"),
        "compute_capability": f"{props['computeMajor']}.{props['computeMinor']}"
        if props and "computeMajor" in props and "computeMinor" in props
        else None,
        "peaks_note": "dense peaks from lca_data" if device.peaks else "not available (card not in the catalogue)",
    }
    matrix_time = sum(cat_flops_time.get(c, 0.0) for c in MATRIX_CATEGORIES)
    summary = {
        "matrix_flops": total_flops if any(cat_flops_known.get(c) for c in MATRIX_CATEGORIES) else None,
        "matrix_kernel_time_us": matrix_time,
        "matrix_tflops_per_s": total_flops / matrix_time / 1e6 if matrix_time > 0 else None,
        "tflops_per_s_over_busy": total_flops / busy / 1e6 if busy > 0 and total_flops else None,
        "tflops_per_s_over_total": total_flops / total / 1e6 if total > 0 and total_flops else None,
        "pct_of_peak_over_total": (100 * total_flops / (total * 1e-6) / peak_main)
        if total > 0 and peak_main and total_flops
        else None,
        "flops_by_dtype": dict(flops_by_dtype) or None,
    }

    # ---- launch overhead -----------------------------------------------------------------------------------
    gaps = [all_iv[i + 1][0] - all_iv[i][1] for i in range(len(all_iv) - 1)]
    short = [d for d in kernel_durs if d < SHORT_KERNEL_US]
    ksum = sum(kernel_durs)
    launch_overhead = {
        "kernels": len(kernel_durs),
        "launches_linked": len(launch_durs),
        "cpu_launch_time_us": sum(launch_durs) if launch_durs else None,
        "gpu_kernel_time_us": ksum,
        "launch_to_kernel_time_ratio": _ratio(sum(launch_durs), ksum) if launch_durs else None,
        "median_launch_us": _median(launch_durs),
        "median_kernel_us": _median(kernel_durs),
        "median_launch_to_start_us": _median(launch_gaps),
        "launch_bound_kernels": launch_bound if launch_durs else None,
        "short_kernel_threshold_us": SHORT_KERNEL_US,
        "short_kernels": len(short),
        "short_kernel_time_us": sum(short),
        "short_kernel_share": len(short) / len(kernel_durs) if kernel_durs else None,
        "idle_gaps": len(gaps),
        "median_idle_gap_us": _median(gaps),
        "note": "launch_bound_kernels: kernels whose launch call took at least as long as the kernel ran; many of "
        "them, with a mostly idle GPU, mean the CPU cannot feed the GPU (CUDA graphs, fusion, larger batches)",
    }

    base_ns = meta.get("baseTimeNanoseconds")
    result: dict[str, Any] = {
        "trace": {
            "path": file,
            "source": label,
            "events": s.events,
            "json_bytes": s.bytes,
            "parse_seconds": round(s.seconds, 4),
            "parse_mb_per_s": round(s.bytes / 1e6 / s.seconds, 1) if s.seconds > 0 else None,
            "schema_version": meta.get("schemaVersion"),
            "base_time_ns": base_ns,
            "distributed": meta.get("distributedInfo"),
            "cpu_ops": n_ops,
            "gpu_events": len(gpu),
            "start_us": all_iv[0][0] if all_iv else None,
            "end_us": all_iv[-1][1] if all_iv else None,
        },
        "device": dev_out,
        "busy_time_us": busy,
        "idle_time_us": total - busy,
        "total_time_us": total,
        "timeline": {
            "computation_us": _length(comp_iv),
            "exposed_communication_us": exposed_comm,
            "exposed_memcpy_us": exposed_mem,
            "total_communication_us": _length(comm_iv),
            "total_memcpy_us": _length(mem_iv),
            "busy_share": busy / total if total > 0 else None,
            "definition": "busy = union of kernel, memcpy and memset intervals on the device; total = first start to "
            "last end; idle = total - busy (TraceLens' gpu_timeline); computation = non-NCCL kernels "
            "and memsets; exposed = not overlapped by computation (or communication, for memcpy)",
        },
        "summary": summary,
        "by_category": by_category,
        "ops": ops[: max(0, int(top))],
        "ops_total": len(ops),
        "launch_overhead": launch_overhead,
        "conventions": CONVENTIONS,
        "warnings": warnings,
    }
    if power is not None:
        result["power"] = attribute_energy(power, result, gpu, event_cat, base_ns, file)
    return result


CONVENTIONS = {
    "flops": "2 FLOPs per multiply-accumulate, from recorded shapes (TraceLens' formulas). GEMM 2MNK per matrix "
    "(x batch) plus MN for the bias of addmm/baddbmm/linear; `matmul_flops` / gemm.flops_without_bias "
    "leave the bias out. Convolution 2 x output elements x prod(weight[1:]) (+ output for the bias); "
    "backward: input and weight gradients (2x) + bias. Attention 4 B H Sq Skv d, halved when causal; "
    "backward 2.5x (flash recomputation). Elementwise 1 per output element, reductions 1 per input "
    "element (estimates).",
    "bytes": "each tensor read or written once: GEMM A + B + C (+ bias N); convolution input + weight + output "
    "(+ bias); attention Q, K, V, O (backward adds dO, dQ, dK, dV); elementwise inputs + output",
    "time": "microseconds; an op's kernel time is the union of its kernels' intervals",
    "peaks": "dense per-dtype peaks from lca_data; pct_of_peak of a category = its FLOPs / sum(op time x the "
    "peak of the op's dtype); null where the card or dtype has no peak (never 0)",
    "roofline": "arithmetic intensity = FLOPs / bytes; ridge point = dense peak of the op's dtype (fp32 vector "
    "peak for elementwise and reduction ops) / DRAM bandwidth",
}


# ================================================================================================
# Energy attribution from a run directory's power samples
# ================================================================================================
def _cum_busy(starts: Any, ends: Any, cum: Any, t: Any) -> Any:
    """Busy time of merged intervals in (-inf, t], vectorised over t."""
    import numpy as np

    k = np.searchsorted(ends, t, side="right")
    full = cum[k]
    nxt = np.minimum(k, len(starts) - 1)
    partial = np.where((k < len(starts)) & (starts[nxt] < t), t - starts[nxt], 0.0)
    return full + partial


SAMPLE_MARGIN_S = 120.0  # samples read either side of the trace: at least one reading at the coarsest kept resolution


def _run_samples(
    run_dir: Path, device_index: Any, file: str, window: tuple[float, float] | None = None
) -> tuple[Any, dict[str, Any], list[str]]:
    """The GPU power samples around the trace window (unix seconds), read lazily from the run's segments
    (or a samples.parquet written before segments existed): never the whole run."""
    from footprint.tracking import runrecord

    notes: list[str] = []
    if not run_dir.is_dir():
        raise FootprintError("not a run directory (expected run.json and ranks/ with the samples)", str(run_dir))
    if not runrecord.journals(run_dir) and not (run_dir / runrecord.LEGACY_SAMPLES).exists():
        raise FootprintError(
            "no power samples (no ranks/rank-*.journal.jsonl, no samples.parquet): not a footprint run directory "
            "(run `footprint recover` for a killed run)",
            str(run_dir),
        )
    run = {}
    if (run_dir / "run.json").exists():
        run = runrecord.read_json(run_dir / "run.json")
    starts: dict[int, float] = {}
    for p in sorted((run_dir / "ranks").glob("rank-*.json")):
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if rec.get("start_unix") is not None:
            starts[int(rec.get("rank", 0))] = float(rec["start_unix"])
    if not starts:
        if run.get("start_utc"):
            from datetime import datetime

            starts[0] = datetime.fromisoformat(run["start_utc"]).timestamp()
            notes.append("no per-rank start_unix: samples aligned with run.json start_utc (1 s resolution)")
        else:
            raise FootprintError(
                "no start time (ranks/rank-*.json start_unix or run.json start_utc): cannot place the power samples in time",
                str(run_dir),
            )
    t_range = None
    if window is not None:
        t_range = (window[0] - max(starts.values()) - SAMPLE_MARGIN_S, window[1] - min(starts.values()) + SAMPLE_MARGIN_S)
    df = runrecord.read_samples(
        run_dir, t_range=t_range, components=["gpu"], columns=["rank", "uuid", "component", "t_s", "energy_j", "power_w"]
    )
    df = df[df["uuid"].notna()]
    if df.empty:
        span = runrecord.sample_span(run_dir)
        if span is None or window is None:
            raise FootprintError("the run has no GPU power samples", str(run_dir))
        t0 = min(starts.values())
        raise FootprintError(
            f"the run's power samples ({_iso(t0 + span[0])} to {_iso(t0 + span[1])}) do not overlap "
            f"the trace ({_iso(window[0])} to {_iso(window[1])}): is this the run that was profiled?",
            str(run_dir),
        )
    uuids = list(dict.fromkeys(df["uuid"]))
    devices = [d for d in run.get("devices", []) if d.get("component", "gpu") == "gpu"]
    uuid = uuids[0]
    if len(uuids) > 1:
        match = [d.get("uuid") for d in devices if d.get("index") == device_index and d.get("uuid") in uuids]
        if match:
            uuid = match[0]
            notes.append(f"the run has {len(uuids)} GPUs: used {uuid} (index {device_index}, the trace's device)")
        else:
            uuid = df["uuid"].value_counts().index[0]
            notes.append(
                f"the run has {len(uuids)} GPUs and none has the trace's device index {device_index}: used {uuid} "
                "(most samples around the trace)"
            )
    df = df[df["uuid"] == uuid].copy()
    offset = df["rank"].map(lambda r: starts.get(int(r), starts[min(starts)])) if "rank" in df.columns else starts[min(starts)]
    df["t_unix"] = df["t_s"].astype(float) + offset
    df = df.sort_values("t_unix")
    dev = next((d for d in devices if d.get("uuid") == uuid), {})
    return df, {"uuid": uuid, "name": dev.get("name"), "method": dev.get("method")}, notes


def attribute_energy(
    run_dir: str | Path, result: dict[str, Any], gpu: list[tuple[Any, ...]], cats: list[str], base_ns: Any, file: str
) -> dict[str, Any]:
    """Split the run's GPU energy over kernel categories by time overlap with the kernel timeline."""
    import numpy as np

    run_dir = Path(run_dir)
    notes: list[str] = []
    if gpu and gpu[0][0] > 1e14:  # about 3 years of microseconds: ts is already absolute
        t0 = 0.0
        basis = "ts as epoch microseconds"
    elif isinstance(base_ns, (int, float)):
        t0 = float(base_ns) / 1e9
        basis = "baseTimeNanoseconds + ts"
    else:
        raise FootprintError(
            "the trace's timestamps are relative and it has no baseTimeNanoseconds: it cannot be aligned with power samples",
            file,
            "baseTimeNanoseconds",
        )
    # per-category merged intervals in unix seconds
    per_cat: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for g, cat in zip(gpu, cats, strict=True):
        per_cat[cat].append((t0 + g[0] / 1e6, t0 + (g[0] + g[1]) / 1e6))
    merged = {c: _union(v) for c, v in per_cat.items()}
    all_iv = _union(iv for v in per_cat.values() for iv in v)
    df, dev, more = _run_samples(run_dir, result["device"]["index"], file, (all_iv[0][0], all_iv[-1][1]) if all_iv else None)
    notes += more
    if not gpu:
        raise FootprintError("the trace has no GPU events to attribute energy to", file)
    w0, w1 = all_iv[0][0], all_iv[-1][1]

    t = df["t_unix"].to_numpy(dtype=float)
    if "energy_j" in df.columns and df["energy_j"].notna().all():
        e = df["energy_j"].to_numpy(dtype=float)
        de = np.diff(e)
        if (de < 0).any():
            notes.append("the cumulative energy decreases somewhere (counter reset?): those intervals use power x time")
        energy_method = "energy counter differences"
    else:
        de = np.full(len(t) - 1, np.nan)
        energy_method = "power samples (trapezoid)"
    if "power_w" in df.columns:
        p = df["power_w"].to_numpy(dtype=float)
        trap = 0.5 * (p[1:] + p[:-1]) * np.diff(t)
        de = np.where(np.isnan(de) | (de < 0), trap, de)
    de = np.nan_to_num(de, nan=0.0)
    a, b = t[:-1], t[1:]
    sel = (b > w0) & (a < w1) & (b > a)
    if not sel.any():
        run_span = (float(t[0]), float(t[-1])) if len(t) else (None, None)
        raise FootprintError(
            f"the run's power samples ({_iso(run_span[0])} to {_iso(run_span[1])}) do not overlap "
            f"the trace ({_iso(w0)} to {_iso(w1)}): is this the run that was profiled?",
            str(run_dir),
        )
    a, b, de = a[sel], b[sel], de[sel]
    length = b - a

    def overlap(ivs: list[tuple[float, float]]) -> Any:
        if not ivs:
            return np.zeros_like(a)
        st = np.array([x[0] for x in ivs])
        en = np.array([x[1] for x in ivs])
        cum = np.concatenate([[0.0], np.cumsum(en - st)])
        return _cum_busy(st, en, cum, b) - _cum_busy(st, en, cum, a)

    ov = {c: overlap(v) for c, v in merged.items()}
    busy_ov = overlap(all_iv)
    window_ov = np.clip(np.minimum(b, w1) - np.maximum(a, w0), 0.0, None)
    idle_ov = np.clip(window_ov - busy_ov, 0.0, None)
    outside = np.clip(length - window_ov, 0.0, None)
    denom = sum(ov.values()) + idle_ov + outside
    denom = np.where(denom > 0, denom, 1.0)
    by_cat = {c: float(np.sum(de * v / denom)) for c, v in ov.items()}
    idle_j = float(np.sum(de * idle_ov / denom))
    outside_j = float(np.sum(de * outside / denom))
    in_window = sum(by_cat.values()) + idle_j
    period = float(np.median(np.diff(t))) if len(t) > 1 else None
    med_kernel = result["launch_overhead"]["median_kernel_us"]
    ratio = (period * 1e6 / med_kernel) if period and med_kernel else None
    span = w1 - w0
    coarse = (
        f"the power sensor gives one reading every {period * 1e3:.3g} ms; the median kernel lasts "
        f"{med_kernel:.3g} us ({ratio:,.0f}x shorter) and the trace spans {span * 1e3:.3g} ms"
        if period and med_kernel and ratio
        else "sample period or kernel durations unknown"
    )
    if period and span < period:
        coarse += ": one reading covers the whole trace, so categories share its energy by time only"
    coarse += (
        "; per-category energy is an attribution by time overlap within each sample interval (a GPU's power "
        "differs between kernel types), not a measurement; A100/H100 sensors also average only ~25 ms of "
        "every 100 ms"
    )
    for c in CATEGORIES:
        entry = result["by_category"][c]
        ej = by_cat.get(c, 0.0)
        entry["energy_j"] = ej
        entry["gflops_per_j"] = entry["flops"] / ej / 1e9 if entry.get("flops") and ej > 0 else None
    return {
        "run_dir": str(run_dir),
        "device_uuid": dev["uuid"],
        "device_name": dev["name"],
        "meter_method": dev["method"],
        "energy_method": energy_method,
        "alignment": basis,
        "trace_window_unix": [w0, w1],
        "run_window_unix": [float(t[0]), float(t[-1])],
        "sample_intervals_used": int(sel.sum()),
        "sample_period_s": period,
        "median_kernel_us": med_kernel,
        "sample_period_over_median_kernel": ratio,
        "coarseness": coarse,
        "energy_j": float(np.sum(de)),
        "energy_in_trace_window_j": in_window,
        "by_category_j": {c: by_cat.get(c, 0.0) for c in CATEGORIES},
        "idle_j": idle_j,
        "outside_trace_j": outside_j,
        "mean_power_in_window_w": in_window / span if span > 0 else None,
        "notes": notes,
    }


def _iso(t: float | None) -> str:
    if t is None:
        return "?"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


# ================================================================================================
# Text output and the CLI entry point
# ================================================================================================
def fmt_count(v: float | None, digits: int = 3) -> str:
    """Kernel-table numbers: whole numbers above 1,000 (GFLOP, counts), 3 significant digits below."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1e-3:
        return f"{float(f'{v:.{digits}g}'):g}"
    return f"{v:.2e}"


def format_us(v: float | None) -> str:
    """Microseconds for people: "41.3 us", "3.908 ms", "1.204 s"."""
    if v is None:
        return "n/a"
    if v >= 1e6:
        return f"{v / 1e6:.3f} s"
    if v >= 1e3:
        return f"{v / 1e3:.3f} ms"
    return f"{v:.1f} us"


def _table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def render_table(r: dict[str, Any]) -> str:
    d, tr, tl = r["device"], r["trace"], r["timeline"]
    out = [
        f"Trace: {tr['source']}  ({tr['events']:,} events, {tr['json_bytes'] / 1e6:,.1f} MB of JSON read in "
        f"{tr['parse_seconds']:.2f} s)"
    ]
    if d["name"] or d["index"] is not None:
        gpu = f"GPU: {d['name'] or 'unknown model'} (device {d['index']})"
        if d["catalogue_name"]:
            gpu += f" = {d['catalogue_name']}: dense {d['peak_dtype']} peak {fmt_count(d['peak_tflops'])} TFLOP/s"
            if d["memory_bandwidth_tbytes_per_s"]:
                gpu += (
                    f", {fmt_count(d['memory_bandwidth_tbytes_per_s'])} TB/s, ridge point "
                    f"{fmt_count(d['ridge_point_flops_per_byte'])} FLOP/byte"
                )
        else:
            gpu += ": not in the catalogue, peaks not available"
        out.append(gpu)
    total = r["total_time_us"]
    share = tl["busy_share"]
    out.append(
        f"GPU time: total {format_us(total)}  |  busy {format_us(r['busy_time_us'])}"
        + (f" ({share:.1%})" if share is not None else "")
        + f"  |  idle {format_us(r['idle_time_us'])}"
        + (f" ({1 - share:.1%})" if share is not None else "")
    )
    out.append(
        f"  computation {format_us(tl['computation_us'])}, exposed communication "
        f"{format_us(tl['exposed_communication_us'])}, exposed memcpy {format_us(tl['exposed_memcpy_us'])}"
    )
    sm = r["summary"]
    if sm["matrix_flops"]:
        line = (
            f"Matrix FLOPs (GEMM, attention, convolution): {sm['matrix_flops'] / 1e9:,.4g} GFLOP; "
            f"{fmt_count(sm['matrix_tflops_per_s'])} TFLOP/s in their kernels, {fmt_count(sm['tflops_per_s_over_total'])} "
            f"TFLOP/s over the whole trace"
        )
        if sm["pct_of_peak_over_total"] is not None:
            line += f" ({sm['pct_of_peak_over_total']:.2f} % of peak)"
        out.append(line)
    power = r.get("power")
    heads = ["Category", "Kernels", "Time", "Busy", "GFLOP", "TFLOP/s", "% peak", "TB/s"]
    if power:
        heads += ["Energy J", "GFLOP/J"]
    rows = []
    for c in CATEGORIES:
        e = r["by_category"][c]
        if not e["count"]:
            continue
        row = [
            c,
            f"{e['count']:,}",
            format_us(e["kernel_time_us"]),
            f"{e['share_of_busy']:.1%}" if e["share_of_busy"] is not None else "n/a",
            fmt_count(e["flops"] / 1e9) if e["flops"] is not None else "n/a",
            fmt_count(e["tflops_per_s"]),
            f"{e['pct_of_peak']:.1f}" if e["pct_of_peak"] is not None else "n/a",
            fmt_count(e["tbytes_per_s"]),
        ]
        if power:
            row += [fmt_count(e.get("energy_j")), fmt_count(e.get("gflops_per_j"))]
        rows.append(row)
    out += [""] + _table(heads, rows)
    if r["ops"]:
        heads = ["Top ops (by kernel time)", "Shape", "dtype", "Calls", "Time", "GFLOP", "TFLOP/s", "% peak", "FLOP/B", "Bound"]
        rows = []
        for o in r["ops"]:
            rows.append(
                [
                    _short(o["name"], 48),
                    _short(o["shapes"] or "", 40),
                    o["dtype"] or "",
                    f"{o['count']:,}",
                    format_us(o["kernel_time_us"]),
                    fmt_count(o["flops"] / 1e9) if o["flops"] is not None else "n/a",
                    fmt_count(o["tflops_per_s"]),
                    f"{o['pct_of_peak']:.1f}" if o["pct_of_peak"] is not None else "n/a",
                    fmt_count(o["arithmetic_intensity"]),
                    o["roofline"] or "n/a",
                ]
            )
        out += [""] + _table(heads, rows, left=(0, 1, 2, 9))
        if r["ops_total"] > len(r["ops"]):
            out.append(f"({r['ops_total'] - len(r['ops'])} more ops; --top N shows more)")
    lo = r["launch_overhead"]
    if lo["kernels"]:
        out += [
            "",
            f"Launch overhead: {lo['kernels']:,} kernels, median {fmt_count(lo['median_kernel_us'])} us; CPU launch "
            f"calls {format_us(lo['cpu_launch_time_us'])} for {format_us(lo['gpu_kernel_time_us'])} of kernels "
            f"(ratio {fmt_count(lo['launch_to_kernel_time_ratio'])}); {lo['short_kernels']:,} kernels under "
            f"{lo['short_kernel_threshold_us']:g} us; {lo['launch_bound_kernels'] or 0:,} launch-bound; "
            f"{lo['idle_gaps']:,} idle gaps (median {fmt_count(lo['median_idle_gap_us'])} us)",
        ]
    if power:
        out += [
            "",
            f"Energy ({power['device_uuid']}, {power['energy_method']}): "
            f"{fmt_count(power['energy_in_trace_window_j'])} J in the trace window "
            f"({fmt_count(power['mean_power_in_window_w'])} W mean), of which idle {fmt_count(power['idle_j'])} J; "
            f"{fmt_count(power['outside_trace_j'])} J of the same samples fall outside the trace",
            f"  {power['coarseness']}",
        ]
        out += [f"  - {n}" for n in power["notes"]]
    if r["warnings"]:
        out += ["", "Warnings:"] + [f"  - {w}" for w in r["warnings"]]
    return "\n".join(out) + "\n"


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    return str(o)


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, default=_json_default, allow_nan=False) + "\n"


def main_analyze(args: Any) -> int:
    """`footprint kernels analyze TRACE [--power RUN_DIR] [--top N] [--format table|json] [-o FILE]`."""
    import sys

    top = getattr(args, "top", 20)
    if top is None or top < 0:
        raise FootprintError(f"--top must be >= 0, got {top}", key="--top")
    result = analyze_trace(args.trace, power=getattr(args, "power", None), top=top)
    text = to_json(result) if getattr(args, "format", "table") == "json" else render_table(result)
    output = getattr(args, "output", None)
    if output:
        try:
            Path(output).write_text(text)
        except OSError as exc:
            raise FootprintError(f"cannot write ({exc.strerror})", output) from None
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


__all__ = ["CATEGORIES", "analyze_trace", "attribute_energy", "main_analyze", "render_table", "to_json"]
