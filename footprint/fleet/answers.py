"""Prometheus answers decoded: a matrix straight to float arrays where it is well formed, anything else as JSON.

A month's import reads hundreds of MB of matrices (fixed-step counters, per-bin summaries, raw reads), and
decoding them was most of the client's CPU: ``json.loads`` made a Python string per value, then a float per
value again on the way to numpy. A typed msgspec decoder reads each ``[time, "value"]`` pair as two floats in C
(``strict=False``: Prometheus writes values as strings) and the pairs go to one array per answer. Whatever it
refuses — null, "abc", "+Inf", 1e400, a pair of three, labels that are not strings, warnings, another result
type, another status — is read the untyped way, so every answer reads as before, only faster: the same series,
the same floats (msgspec's and Python's parsers are both correctly rounded; the one string they read apart,
"-0", makes the answer go the untyped way).

The common answer (every value a finite number) is read faster still (`_plain`): the values taken as raw JSON text,
their brackets and quotes dropped, and the numbers decoded as one list, so no tuple is made per sample (half the
time of the typed decoder on a day's summary). It is taken only where the text has exactly the shape of ``[time,
"value"]`` pairs and every number is finite; anything else goes the typed way above.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Generic, TypeVar

import msgspec

S = TypeVar("S")


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]]


class _RawSeries(msgspec.Struct):  # the values as their JSON text (`_plain`)
    metric: dict[str, str]
    values: msgspec.Raw


class _Matrix(msgspec.Struct, Generic[S]):
    resultType: str  # noqa: N815 (Prometheus' name)
    result: list[S]


class _Body(msgspec.Struct, Generic[S]):
    status: str
    data: _Matrix[S]
    warnings: list[Any] = []


_MATRIX = msgspec.json.Decoder(_Body[_Series], strict=False)
_RAW = msgspec.json.Decoder(_Body[_RawSeries])
_FLOATS = msgspec.json.Decoder(list[float])
_NUMBER = b"0123456789.eE+-"  # what a JSON number is written with
_PAIR = b'[,""]'  # a ``[time, "value"]`` pair less its numbers
_ERRORS = (msgspec.DecodeError, RecursionError, ValueError, OverflowError)


def loads(body: bytes) -> Any:
    """JSON as ``json.loads`` reads it (msgspec where it can: twice as fast; json for what msgspec refuses, such
    as NaN literals, 1e400 or a byte-order mark, so the result and the errors are json's)."""
    try:
        return msgspec.json.decode(body)
    except _ERRORS:
        return json.loads(body)


def matrix_data(body: bytes) -> dict[str, Any] | None:
    """A successful matrix answer's ``data`` with each series' values as an (n, 2) float array (times, values),
    views of one array for the whole answer; None for any answer that is not exactly that (read it untyped)."""
    import numpy as np  # here: the HTTP client is imported where numpy is not needed

    if b'"-0"' in body:  # msgspec reads "-0" as 0.0, Python as -0.0
        return None
    plain = _plain(body, np)
    if plain is not None:
        return plain
    result = _result(_MATRIX, body)
    if result is None:
        return None
    n = sum(len(s.values) for s in result)
    pairs = itertools.chain.from_iterable(s.values for s in result)
    flat = np.fromiter(itertools.chain.from_iterable(pairs), float, 2 * n).reshape(-1, 2)
    return _split(result, flat, [len(s.values) for s in result])


def _plain(body: bytes, np: Any) -> dict[str, Any] | None:
    """`matrix_data` of an answer whose values are all ``[number, "number"]`` pairs of finite numbers; None for any
    other (left to the typed decoder). The shape is checked on the text less its numbers: each series must be
    ``[`` + pairs ``[,""]`` separated by commas + ``]``; the numbers are then one JSON list once the brackets and
    quotes are gone, and must be two a pair, all finite (a value such as "NaN", "1e" or "+1" fails one or the other)."""
    result = _result(_RAW, body)
    if result is None:
        return None
    values = [s.values for s in result]
    text = b",".join(values)
    shape = text.translate(None, _NUMBER)
    pairs = shape.count(_PAIR)
    if shape.replace(_PAIR, b"").replace(b",", b"") != b"[]" * len(result):
        return None
    try:
        full = [v for v in values if len(v) > 2]  # an empty series ("[]") would leave a comma with no number
        numbers = (text if len(full) == len(values) else b",".join(full)).translate(None, b'[]"')
        flat = np.array(_FLOATS.decode(b"[" + numbers + b"]"), float)
    except _ERRORS:
        return None
    if len(flat) != 2 * pairs or not np.isfinite(flat).all():
        return None
    opens = np.flatnonzero(np.frombuffer(shape, np.uint8) == ord("["))  # a series' or a pair's
    series = np.frombuffer(shape, np.uint8)[opens + 1] != ord(",")  # a pair's "[" is followed by its comma
    lens = np.bincount(np.cumsum(series)[~series] - 1, minlength=len(result))
    return _split(result, flat.reshape(-1, 2), lens.tolist())


def _result(decoder: msgspec.json.Decoder, body: bytes) -> list[Any] | None:
    """The series of a successful matrix answer without warnings, as ``decoder`` reads them; None otherwise."""
    try:
        got = decoder.decode(body)
    except _ERRORS:
        return None
    if got.status != "success" or got.warnings or got.data.resultType != "matrix":
        return None
    return got.data.result


def _split(result: list[Any], flat: Any, lens: list[int]) -> dict[str, Any]:
    """The answer's ``data``: each series' labels and its rows of ``flat``, views of the one array."""
    out, a = [], 0
    for s, k in zip(result, lens, strict=True):
        out.append({"metric": s.metric, "values": flat[a : a + k]})
        a += k
    return {"resultType": "matrix", "result": out}


__all__ = ["loads", "matrix_data"]
