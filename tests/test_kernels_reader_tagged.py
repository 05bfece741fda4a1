"""`scan`'s fast decode (slices decoded into structs tagged by `cat`, unread categories left empty) keeps
exactly what the general decode keeps, on a real trace and on one whose slices must fall back."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from footprint.kernels import reader as R

TRACE = "traces/tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"


def kept(doc: dict[str, Any], tagged: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """What one pass keeps of `doc`, with the tagged decoder or with the general one in its place."""
    with monkeypatch.context() as m:
        if not tagged:
            m.setattr(R, "_TAGGED", R._EVENTS)
        s = R.scan(io.BytesIO(json.dumps(doc, indent=2).encode()), "t.json")
    return (
        s.events,
        s.gpu,
        list(s.op_ts),
        list(s.op_end),
        list(s.op_ext),
        s.op_name,
        s.op_thread,
        s.op_sig,
        s.launch,
        s.steps,
        s.op_conc,
        s.bad_times,
    )


def test_tagged_decode_keeps_what_the_general_decode_keeps(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with gzip.open(shared / TRACE, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    reader = R.Reader(io.BytesIO(json.dumps(doc).encode()), unread_empty=True)
    names = {type(e).__name__ for b in reader.batches() for e in b}
    assert names >= {"_python_function", "_cpu_op", "_kernel"}  # the fast path was taken
    assert kept(doc, True, monkeypatch) == kept(doc, False, monkeypatch)
    # Slices that must fall back: an unknown category, an event without one, the 2021 spelling, a list as cat.
    half = len(events) // 2
    odd = [
        {"ph": "X", "cat": "some_new_category", "name": "x", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {**next(e for e in events if e.get("cat") == "kernel"), "cat": "Kernel"},
        {"ph": "X", "cat": ["cpu_op"], "name": "y", "ts": 2.0, "dur": 1.0},
    ]
    doc["traceEvents"] = events[:half] + odd + events[half:]
    fell_back = kept(doc, True, monkeypatch)
    assert fell_back == kept(doc, False, monkeypatch)
    assert fell_back[0] == len(events) + len(odd)
