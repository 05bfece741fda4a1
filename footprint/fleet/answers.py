"""Prometheus answers decoded: a matrix straight to float arrays where it is well formed, anything else as JSON.

A month's import reads hundreds of MB of matrices (fixed-step counters, per-bin summaries, raw reads), and
decoding them was most of the client's CPU: ``json.loads`` made a Python string per value, then a float per
value again on the way to numpy. A typed msgspec decoder reads each ``[time, "value"]`` pair as two floats in C
(``strict=False``: Prometheus writes values as strings) and the pairs go to one array per answer. Whatever it
refuses — null, "abc", "+Inf", 1e400, a pair of three, labels that are not strings, warnings, another result
type, another status — is read the untyped way, so every answer reads as before, only faster: the same series,
the same floats (msgspec's and Python's parsers are both correctly rounded; the one string they read apart,
"-0", makes the answer go the untyped way).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import msgspec


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]]


class _Matrix(msgspec.Struct):
    resultType: str  # noqa: N815 (Prometheus' name)
    result: list[_Series]


class _Body(msgspec.Struct):
    status: str
    data: _Matrix
    warnings: list[Any] = []


_MATRIX = msgspec.json.Decoder(_Body, strict=False)
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
    try:
        got = _MATRIX.decode(body)
    except _ERRORS:
        return None
    if got.status != "success" or got.warnings or got.data.resultType != "matrix":
        return None
    result = got.data.result
    n = sum(len(s.values) for s in result)
    pairs = itertools.chain.from_iterable(s.values for s in result)
    flat = np.fromiter(itertools.chain.from_iterable(pairs), float, 2 * n).reshape(-1, 2)
    out, a = [], 0
    for s in result:
        b = a + len(s.values)
        out.append({"metric": s.metric, "values": flat[a:b]})
        a = b
    return {"resultType": "matrix", "result": out}


__all__ = ["loads", "matrix_data"]
