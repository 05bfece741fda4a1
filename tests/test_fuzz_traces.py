"""Malformed traces through the real CLI (issue 21 class 6, issue 26): one test per class of damage.

Each case runs `footprint kernels analyze` in a forked child of the warm fuzz server (tests/_fuzz.py: a
deadline, an address-space cap) and is judged by `verdict` (no traceback, hang, blow-up, nan/inf; exit 0
or one `footprint: error:` line with exit 2). On top of that, each class has its own promise: a refusal
says what is wrong, a partial result says what it left out, and the figures of what is left equal those
of the trace without the damage. Big inputs (2 GB lines, gzip bombs) are built as a few MB of gzip whose
deflate blocks repeat, so no test writes more than a few MB.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from _fuzz import CliServer, bad_numbers, verdict
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FUZZ

pytestmark = pytest.mark.timeout(300)

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]


def _kernel(ts: Any, dur: Any, name: str = "sm90_xmma_gemm", corr: int = 1) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "correlation": corr},
    }


GOOD = [_kernel(10, 3, corr=1), _kernel(20, 4, corr=2)]  # busy 7 us


def _trace(*extra: dict[str, Any]) -> dict[str, Any]:
    return {"deviceProperties": H100, "traceEvents": [*GOOD, *extra]}


def _analyse(cli: CliServer, path: Path) -> Any:
    return cli.run(["kernels", "analyze", path, "--format", "json"])


def _partial(o: Any, *words: str) -> dict[str, Any]:
    """Exit 0, clean, and a warning with every one of `words`; returns the JSON."""
    assert verdict(o) is None, (verdict(o), o.err[-500:])
    assert o.code == 0, o.err[-400:]
    d = json.loads(o.out)
    assert bad_numbers(d) == [], bad_numbers(d)[:5]
    assert any(all(w in x for w in words) for x in d["warnings"]), (words, d["warnings"])
    return d


def _refused(o: Any, *words: str) -> str:
    assert verdict(o) is None, (verdict(o), o.err[-500:])
    assert o.code == 2, (o.out[-300:], o.err[-300:])
    line = next(x for x in o.err.splitlines() if x.startswith("footprint: error"))
    assert all(w in line for w in words), (words, line)
    return line


def _write(tmp: Path, text: str | bytes, name: str = "t.json") -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _repeated_gzip(head: bytes, filler: bytes, copies: int, tail: bytes) -> bytes:
    """gzip of head + filler x copies + tail, built from one compressed copy of the filler (full flushes make
    every copy's deflate bytes the same). The trailer's CRC is the compressor's, not the content's: a reader
    that got that far would report a corrupt file, which the caps must stop long before."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(filler) + c.flush(zlib.Z_FULL_FLUSH)
    return first + block * copies + c.compress(tail) + c.flush()


# ---- non-numbers and absurd numbers in ts / dur ----------------------------------------------------------
_RAW_EVENT = '{"ph": "X", "cat": "%s", "name": "k", "pid": 0, "tid": 7, "ts": %s, "dur": %s, "args": {"device": 0}}'


@pytest.mark.parametrize(
    "ts, dur, cat",
    [
        ("30", "NaN", "kernel"),
        ("30", "Infinity", "kernel"),
        ("-Infinity", "1", "kernel"),
        ("1" + "0" * 5000, "1", "kernel"),
        ("30", "9" * 5000, "kernel"),
        ("30", "100000000000000000000000000000", "kernel"),
        ("30", "18446744073709551617", "kernel"),
        ("30", "1e308", "kernel"),
        ("30", "NaN", "cpu_op"),
    ],
    ids=["nan-dur", "inf-dur", "-inf-ts", "5000-digit-ts", "5000-digit-dur", "1e29-dur", "2**64-dur", "1e308-dur", "nan-op"],
)
def test_non_finite_and_absurd_times_are_skipped_and_said(cli: CliServer, tmp_path: Path, ts: str, dur: str, cat: str) -> None:
    bad = _RAW_EVENT % (cat, ts, dur)
    text = json.dumps(_trace()).replace('"traceEvents": [', '"traceEvents": [' + bad + ", ")
    d = _partial(_analyse(cli, _write(tmp_path, text)), "1 event(s) skipped", "not finite")
    assert d["busy_time_us"] == 7 and d["launch_overhead"]["kernels"] == 2


@pytest.mark.parametrize("dur", [-5, -1e9, -0.001])
def test_negative_durations_never_give_negative_busy_time(cli: CliServer, tmp_path: Path, dur: float) -> None:
    p = _write(tmp_path, json.dumps(_trace(_kernel(40, dur, corr=3), _kernel(5, dur, corr=4))))
    d = _partial(_analyse(cli, p), "2 event(s) skipped", "negative")
    assert d["busy_time_us"] == 7 and d["idle_time_us"] >= 0 and d["total_time_us"] == 14


def test_missing_fields_are_skipped_and_said(cli: CliServer, tmp_path: Path) -> None:
    holes = [{k: v for k, v in _kernel(50, 2).items() if k != drop} for drop in ("ts", "dur")]
    p = _write(tmp_path, json.dumps(_trace(*holes, {"ph": "X"}, {}, {"cat": "kernel"}, [1, 2], None, "x")))
    d = _partial(_analyse(cli, p), "2 event(s) skipped", "missing")
    assert d["busy_time_us"] == 7


def test_out_of_range_shapes_give_no_flops_not_inf(cli: CliServer, tmp_path: Path) -> None:
    def mm(ts: int, dims: Any, ext: int) -> list[dict[str, Any]]:
        op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 20}
        op["args"] = {"External id": ext, "Input Dims": dims, "Input type": ["c10::BFloat16"] * 2}
        rt = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1, "dur": 2}
        rt["args"] = {"correlation": ext, "External id": ext}
        return [op, rt, _kernel(ts + 5, 5, corr=ext)]

    text = json.dumps(
        {"deviceProperties": H100, "traceEvents": mm(100, [[2**45, 2**45], [2**45, 2**45]], 11) + mm(200, [[2, 3], [3, 4]], 12)}
    )
    text = text.replace("[2, 3], [3, 4]", "[2, 3], [3, 1e999]")  # an infinite dimension (the slow path decodes it)
    d = _partial(_analyse(cli, _write(tmp_path, text)), "recorded shapes dropped: 2")
    gemm = d["by_category"]["gemm"]
    assert gemm["count"] == 2 and gemm["flops"] is None and d["summary"]["matrix_flops"] in (None, 0)


# ---- damaged files ----------------------------------------------------------------------------------------
def test_truncated_json_is_analysed_up_to_the_cut(cli: CliServer, tmp_path: Path) -> None:
    events = [_kernel(100 + 10 * i, 5, corr=i) for i in range(400)]
    text = json.dumps({"deviceProperties": H100, "traceEvents": events})
    cut = text.index('{"ph"', text.index('"ts": 3090')) + 40  # inside event #300
    d = _partial(_analyse(cli, _write(tmp_path, text[:cut])), "ends early or is damaged")
    assert d["launch_overhead"]["kernels"] == 300 and d["busy_time_us"] == 1500


@pytest.mark.parametrize("keep", [0.3, 0.9])
def test_a_truncated_json_gz_is_refused_or_read_up_to_the_cut(cli: CliServer, tmp_path: Path, keep: float) -> None:
    events = [_kernel(100 + 10 * i, 5, corr=i, name=f"k{i % 97}") for i in range(60_000)]
    packed = gzip.compress(json.dumps({"deviceProperties": H100, "traceEvents": events}).encode())
    o = _analyse(cli, _write(tmp_path, packed[: int(len(packed) * keep)], "t.json.gz"))
    if o.code == 2:
        _refused(o, "cannot read the trace", "t.json.gz")
    else:
        d = _partial(o, "ends early or is damaged")
        assert 0 < d["launch_overhead"]["kernels"] < 60_000


@pytest.mark.parametrize(
    "content",
    [b"\x1f\x8b" + bytes(range(256)) * 8, b"\x1f\x8b\x08\x00" + b"\x00" * 6 + bytes(range(255, 0, -1)) * 4, b"\x1f\x8b"],
    ids=["garbage", "bad-deflate", "magic-only"],
)
def test_gzip_garbage_is_one_line_error(cli: CliServer, tmp_path: Path, content: bytes) -> None:
    _refused(_analyse(cli, _write(tmp_path, content, "t.json.gz")), "t.json.gz", "cannot read the trace")


def test_a_latin1_trace_is_decoded_and_said(cli: CliServer, tmp_path: Path) -> None:
    text = json.dumps(_trace(_kernel(30, 2, name="gemm_caf\xe9", corr=5)), ensure_ascii=False)
    d = _partial(_analyse(cli, _write(tmp_path, text.encode("latin-1"))), "not UTF-8", "Latin-1")
    assert d["launch_overhead"]["kernels"] == 3 and d["busy_time_us"] == 9
    assert any("gemm_caf\xe9" in json.dumps(op, ensure_ascii=False) for op in d["ops"])


# ---- sizes: long lines and decompression bombs ----------------------------------------------------------
def _long_line_head() -> bytes:
    return (
        b'{"deviceProperties": '
        + json.dumps(H100).encode()
        + b', "traceEvents": ['
        + json.dumps(GOOD[0]).encode()
        + b', {"ph": "X", "name": "'
    )


def test_a_64_mb_value_is_cut_with_a_note_in_bounded_memory(cli: CliServer, tmp_path: Path) -> None:
    p = _write(tmp_path, _long_line_head() + b"a" * (64 << 20) + b'"}]}')
    o = _analyse(cli, p)
    d = _partial(o, "ends early or is damaged", "over 32 MB")
    assert d["busy_time_us"] == 3 and o.grew_mb < 400, o.grew_mb


def test_a_2_gb_line_in_a_json_gz_is_cut_fast(cli: CliServer, tmp_path: Path) -> None:
    packed = _repeated_gzip(_long_line_head(), b"a" * (1 << 20), 2048, b'"}]}')  # 2 GB line, ~2 MB file
    o = _analyse(cli, _write(tmp_path, packed, "t.json.gz"))
    d = _partial(o, "ends early or is damaged", "over 32 MB")
    assert d["busy_time_us"] == 3 and o.grew_mb < 400 and o.seconds < 15, (o.grew_mb, o.seconds)


def test_a_gzip_bomb_is_refused_with_the_cap_said(cli: CliServer, tmp_path: Path) -> None:
    head = b'{"traceEvents": [' + json.dumps(GOOD[0]).encode() + b","
    packed = _repeated_gzip(head, b" " * (1 << 20), 2048, b"]}")  # 2 GB of blanks in ~2 MB
    o = _analyse(cli, _write(tmp_path, packed, "bomb.json.gz"))
    _refused(o, "bomb.json.gz", "decompression bomb", "100x")
    assert o.grew_mb < 200 and o.seconds < 15, (o.grew_mb, o.seconds)


# ---- property: any byte-level damage of a valid trace -------------------------------------------------------
@FUZZ
@given(data=st.data())
def test_fuzz_damaged_trace_bytes(cli: CliServer, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Cut, overwrite or splice a valid trace anywhere (numbers too): a clean result or a one-line error."""
    text = json.dumps(_trace(_kernel(30, 2, corr=3))).encode()
    op = data.draw(st.sampled_from(["cut", "overwrite", "insert"]))
    at = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from([b"NaN", b"-1e999", b"9" * 5000, b"\xe9\xff", b"\x00", b"]", b"{", b'"', b"-5"]))
    damaged = text[:at] if op == "cut" else text[:at] + junk + text[at + (len(junk) if op == "overwrite" else 0) :]
    o = _analyse(cli, _write(tmp_path_factory.mktemp("t"), damaged))
    assert verdict(o) is None, (verdict(o), damaged[:200], o.err[-300:])
    if o.code == 0:
        d = json.loads(o.out)
        assert bad_numbers(d) == [], bad_numbers(d)[:5]
