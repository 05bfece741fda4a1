"""Recorded /metrics files (Prometheus text format or OpenMetrics) read as timestamped samples.

A file holds one or many scrapes of exporters and engines: ``name{labels} value timestamp`` lines,
timestamps in milliseconds (Prometheus text format) or in seconds (OpenMetrics, a file ending in
``# EOF``). A sample without a timestamp cannot be placed in a window and is refused with the line
that has it; so are a non-numeric value and a malformed line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from footprint.errors import FootprintError
from footprint.inputs import sniff_text

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+(\S+))?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?\s*')


def _labels(text: str, where: str) -> dict[str, str]:
    body = text[1:-1].strip()
    out: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        m = _LABEL.match(body, pos)
        if not m:
            raise FootprintError(f"malformed labels {text[:80]!r}", where)
        out[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return out


def samples(path: str | Path) -> Iterator[tuple[str, dict[str, str], float, float]]:
    """(metric, labels, t in seconds, value) of every sample line of one file, streamed (a file of any size)."""
    p = Path(path)
    sniff_text(p, "recorded /metrics file")
    try:
        with p.open("rb") as fh:  # OpenMetrics ends in "# EOF" and counts seconds; the text format milliseconds
            fh.seek(max(0, p.stat().st_size - 64))
            seconds = fh.read().rstrip().endswith(b"# EOF")
        with p.open(encoding="utf-8") as fh:
            yield from parse(fh, str(path), seconds=seconds)
    except UnicodeDecodeError:
        raise FootprintError("not UTF-8 text: not a recorded /metrics file", str(path)) from None
    except OSError as exc:
        raise FootprintError(f"cannot read it ({exc.strerror or exc})", str(path)) from None


def parse(
    lines: Iterable[str], where: str, seconds: bool = False, now: float | None = None
) -> Iterator[tuple[str, dict[str, str], float, float]]:
    """Sample lines of exposition text; ``now`` is the time of lines without a timestamp (a live scrape), else
    such a line is an error."""
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        at = f"{where}: line {i}"
        m = _LINE.match(line)
        if not m:
            raise FootprintError(f"not a metric line: {line[:80]!r}", at)
        name, lab, val, ts = m.groups()
        if ts is None and now is None:
            raise FootprintError(
                f"{name}: a sample without a timestamp (record scrapes with timestamps, as "
                "`footprint serving watch` and the examples do)",
                at,
            )
        try:
            v = float(val)
            t = now if ts is None else float(ts) if seconds else float(ts) / 1000.0
        except ValueError:
            raise FootprintError(f"{name}: expected a number and a timestamp, got {val!r} {ts!r}", at) from None
        if not math.isfinite(float(t)):  # type: ignore[arg-type]
            raise FootprintError(f"{name}: timestamp {ts!r} is not a finite number", at)
        yield name, _labels(lab, at) if lab else {}, float(t), v  # type: ignore[arg-type]


def read_series(paths: Iterable[str | Path]) -> tuple[dict[tuple[str, tuple], tuple[np.ndarray, np.ndarray]], float]:
    """Series ``(metric, sorted labels) -> (t, v)`` over all files, and the median scrape interval."""
    acc: dict[tuple[str, tuple], tuple[list[float], list[float]]] = {}
    for p in paths:
        for name, lab, t, v in samples(p):
            ts, vs = acc.setdefault((name, tuple(sorted(lab.items()))), ([], []))
            ts.append(t)
            vs.append(v)
    if not acc:
        raise FootprintError("no samples in the recorded files", ", ".join(str(p) for p in paths))
    out = {}
    steps = []
    for k, (ts, vs) in acc.items():
        t, v = np.asarray(ts), np.asarray(vs)
        o = np.argsort(t, kind="stable")
        out[k] = (t[o], v[o])
        d = np.diff(t[o])
        if (d > 0).any():  # repeated timestamps (a file given twice, duplicated lines) say nothing of the interval
            steps.append(float(np.median(d[d > 0])))
    return out, float(np.median(steps)) if steps else 60.0
