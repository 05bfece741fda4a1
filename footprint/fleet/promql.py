"""Energy per window computed by the server: PromQL that Prometheus, Thanos and Mimir evaluate.

A `Term` asks for one quantity over one window ``[start, end]`` for the series its matchers select:

- ``increase``: a counter's increase (``increase(m[d] @ end)``): PromQL's reset rule, and its linear
  extrapolation to the window's edges when the first and last samples lie within 1.1 scrape intervals of
  them, which is what makes a job's window exact to within the power's curvature inside one scrape;
- ``gauge_energy``: a power gauge integrated as its mean times the window (``avg_over_time(m[d]) * d``),
  the fallback for GPUs without the energy counter;
- ``count``: samples in the window (telemetry coverage);
- ``sum``: a recorded per-interval energy (a recording rule's output) summed over the window.

Series that repeat one physical meter (the whole-GPU energy counter on every MIG instance,
dcgm-exporter#317, or on every job sharing a GPU) are counted once: each term is ``max by`` the
meter's labels, never ``sum``. Many terms go in one request (a balanced tree of ``or`` over ``label_replace``-tagged
vectors), in batches sized to stay under the server's sample limit (``--query.max-samples``); a batch
the server still refuses for its size is split in halves, and a single term's window in halves, until it
passes. Batches run concurrently with bounded workers; the client retries connection errors and 5xx.

Reusable by any producer that needs "energy of these series over these windows" (`energy_by`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.fleet.answers import loads, matrix_data
from footprint.fleet.prometheus import PrometheusClient, PrometheusLimitError

DEFAULT_MAX_SAMPLES = 5_000_000  # per request: a tenth of Prometheus' default --query.max-samples (50 M)
DEFAULT_CONCURRENCY = 4
MAX_TERMS = 120  # per request: `or` costs grow faster than the terms (measured: 125 terms 33 ms, 250 terms 215 ms)
FUNCTIONS = ("increase", "gauge_energy", "avg", "count", "min", "max", "resets", "sum")


@dataclass(frozen=True)
class Term:
    """One quantity (``fn``) of the series ``metric{matchers}`` over ``[start, end]``, grouped ``by`` labels."""

    key: Hashable
    metric: str
    matchers: str  # without braces: 'Hostname="a",gpu=~"0|1"'
    start: float
    end: float
    by: tuple[str, ...]
    fn: str = "increase"
    series: int = 1  # how many series it selects (an estimate, for the sample budget)
    subquery_step: int = 0  # >0: ``metric`` is an expression, evaluated every step seconds (a subquery)
    agg: str = ""  # how series are combined into a group: "max" (one meter repeated; the default), "min", "sum"

    def samples(self, scrape_s: float) -> float:
        return ((self.end - self.start) / max(scrape_s, 1e-3) + 1.0) * max(self.series, 1)

    def halves(self) -> tuple[Term, Term]:
        mid = 0.5 * (self.start + self.end)
        return replace(self, end=mid), replace(self, start=mid)


def render(t: Term, tag: str) -> str:
    """The PromQL of one term, tagged with ``fp_term=tag`` so that many can share a request."""
    d = t.end - t.start
    if t.subquery_step:
        sel = f"{t.metric}[{range_of(d)}:{t.subquery_step}s] @ {t.end:.3f}"
    else:
        sel = f"{t.metric}{braced(t.matchers)}[{range_of(d)}] @ {t.end:.3f}"
    return f'label_replace({window_expr(t.fn, sel, t.by, t.agg, d)}, "fp_term", "{tag}", "", "")'


def window_expr(fn: str, sel: str, by: Iterable[str], agg: str = "", d: float = 0.0) -> str:
    """``agg by (by) (fn(sel))``: one quantity of a range selector's series over its window (``d`` seconds:
    ``gauge_energy`` only). ``agg`` defaults to ``max`` (``min`` for ``min``): series repeating one meter (a MIG
    instance's or a sharing job's copy of the whole-GPU counter) count once. The one builder of every such query,
    the fleet's and the serving import's."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown term function {fn!r}")
    inner = {
        "increase": f"increase({sel})",
        "gauge_energy": f"avg_over_time({sel}) * {d:.3f}",
        "avg": f"avg_over_time({sel})",
        "count": f"count_over_time({sel})",
        "min": f"min_over_time({sel})",
        "max": f"max_over_time({sel})",
        "resets": f"resets({sel})",
        "sum": f"sum_over_time({sel})",
    }[fn]
    return f"{agg or ('min' if fn == 'min' else 'max')} by ({','.join(by)}) ({inner})"


def range_of(d: float) -> str:
    """A window of ``d`` seconds as a PromQL range, to the millisecond."""
    return f"{max(int(round(d * 1000)), 1)}ms"


def braced(*matchers: str) -> str:
    """Label matchers (each without braces, or a user's ``{...}`` selector) joined into one ``{...}``; "" if none."""
    parts = [p for p in (m.strip().strip("{}") for m in matchers) if p]
    return "{" + ",".join(parts) + "}" if parts else ""


#: One ``label op "value"`` matcher: a PromQL label name, an operator, a double-quoted value with backslash escapes
#: (no raw line break or control character), then a comma or the end. Anything else is not a matcher.
MATCHER = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*(=~|!~|!=|=)[ \t]*("(?:[^"\\\x00-\x1f\x7f]|\\[^\x00-\x1f\x7f])*")[ \t]*(,|\Z)'
)


def selector_matchers(text: str) -> str:
    """A user's ``--selector`` as matchers without braces (``a="b",c=~"d|e"``): a comma-separated list of
    ``label op "value"``, optionally in one pair of braces. Anything else is refused, so that the selector cannot
    close the braces it is put in and add to the query (``a="b"} or vector(1) or {c="d"``)."""
    body = (text or "").strip(" \t")
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out: list[str] = []
    pos = 0
    while pos < len(body) and body[pos:].strip(" \t"):
        m = MATCHER.match(body, pos)
        if not m:
            raise FootprintError(
                'expected label matchers such as cluster="a",namespace!~"test|dev" (label =, !=, =~ or !~ a '
                f"double-quoted value, optionally in one pair of braces), got {text[:80]!r} (at character {pos + 1})",
                key="--selector",
            )
        out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}")
        pos = m.end()
    return ",".join(out)


def batches(terms: list[Term], scrape_s: float, max_samples: float, max_terms: int = MAX_TERMS) -> list[list[Term]]:
    """Terms grouped so that each request reads at most ``max_samples`` samples (a term larger than that alone
    is split by time) and holds at most ``max_terms`` terms."""
    out: list[list[Term]] = []
    cur: list[Term] = []
    load = 0.0
    stack = list(reversed(terms))
    while stack:
        t = stack.pop()
        n = t.samples(scrape_s)
        if n > max_samples and t.end - t.start > 2 * scrape_s:
            a, b = t.halves()
            stack += [b, a]
            continue
        if cur and (load + n > max_samples or len(cur) >= max_terms):
            out.append(cur)
            cur, load = [], 0.0
        cur.append(t)
        load += n
    if cur:
        out.append(cur)
    return out


Result = dict[Hashable, dict[tuple[str, ...], float]]  # term key -> group labels -> value (summed over window pieces)


class Evaluator:
    """Runs terms against a server: batched, concurrent, split on the server's sample limit."""

    def __init__(
        self,
        client: PrometheusClient,
        scrape_s: float,
        max_samples: float = DEFAULT_MAX_SAMPLES,
        concurrency: int = DEFAULT_CONCURRENCY,
        progress: Callable[[int, int], None] | None = None,
        resume: Path | None = None,
    ) -> None:
        self.client, self.scrape_s = client, scrape_s
        self.max_samples, self.concurrency = max_samples, max(int(concurrency), 1)
        self.progress = progress
        self.resume = resume  # a directory keeping every answer, so that a failed run's re-run asks only the rest
        self.requests = 0
        self.splits = 0
        self.reused = 0

    def run(self, terms: Iterable[Term]) -> Result:
        terms = list(terms)
        todo = batches(terms, self.scrape_s, self.max_samples)
        fns = {t.key: t.fn for t in terms}
        out: Result = {}
        done = 0
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for part in pool.map(self._batch, todo):
                _merge(out, part, fns)
                done += 1
                if self.progress:
                    self.progress(done, len(todo))
        return out

    def _batch(self, batch: list[Term]) -> Result:
        try:
            return self._query(batch)
        except PrometheusLimitError:
            self.splits += 1
            if len(batch) > 1:
                h = len(batch) // 2
                return _merge(self._batch(batch[:h]), self._batch(batch[h:]), {t.key: t.fn for t in batch})
            t = batch[0]
            if t.end - t.start <= 2 * self.scrape_s:
                raise
            a, b = t.halves()
            return _merge(self._batch([a]), self._batch([b]), {t.key: t.fn})

    def _query(self, batch: list[Term]) -> Result:
        expr = _balanced([render(t, str(i)) for i, t in enumerate(batch)])
        data = self._answer(expr, max(t.end for t in batch))
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise FootprintError(f"expected a vector from {self.client.base}, got {got!r}", key="--url")
        out: Result = {}
        for s in data["result"]:
            labels = s.get("metric") if isinstance(s, dict) else None
            value = s.get("value") if isinstance(s, dict) else None
            if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
                continue
            try:
                t = batch[int(labels.get("fp_term", ""))]
                v = float(value[1])
            except (ValueError, IndexError, TypeError):
                continue
            if not math.isfinite(v) or v < 0:
                continue  # NaN / Inf / negative is no measurement
            g = tuple(str(labels.get(k, "")) for k in t.by)
            acc = out.setdefault(t.key, {})
            acc[g] = _combine(t.fn, acc.get(g), v)
        return out

    def _answer(self, expr: str, at: float) -> Any:
        """The server's answer, or the one a previous run kept under ``resume`` (`Kept`)."""
        kept = Kept(self.client, self.resume)
        data = kept.query(expr, at)
        self.reused += kept.reused
        self.requests += 1 - kept.reused
        return data


class Kept:
    """A client whose answers are kept in ``resume`` (one file a request), so that a failed import's re-run asks the
    server only for the rest; ``resume`` None: a plain pass-through."""

    def __init__(self, client: PrometheusClient, resume: Path | None) -> None:
        self.client, self.resume = client, resume
        self.reused = 0

    def query(self, expr: str, at: float, arrays: bool = False) -> Any:
        """``arrays``: a matrix's values as float arrays where well formed (`answers.matrix_data`), kept or not."""
        return self._kept(("q", expr, f"{at:.3f}"), lambda body: self.client.query(expr, at, body, arrays), arrays)

    def query_range(self, expr: str, start: float, end: float, step: float, arrays: bool = False) -> Any:
        key = ("r", expr, f"{start:.3f}", f"{end:.3f}", f"{step:g}")
        return self._kept(key, lambda body: self.client.query_range(expr, start, end, step, body, arrays), arrays)

    def _kept(self, key: tuple[str, ...], ask: Callable[[list[bytes] | None], Any], arrays: bool = False) -> Any:
        """The answer kept (the server's whole answer as it came, its ``data`` read back, ``arrays`` as the server's
        would be), or asked and kept: written as received, never encoded again (re-encoding the month's answers cost
        more client CPU than reading them), and looked up in a listing of the folder made once, not by opening files
        that are not there."""
        if self.resume is None:
            return ask(None)
        name = hashlib.sha256("|".join(key).encode()).hexdigest()[:32] + ".answer.json"
        path = self.resume / name
        with _LISTINGS_LOCK:
            listed = name in _listing_of(self.resume)
        if listed:
            try:
                raw = path.read_bytes()
                data = (matrix_data(raw) if arrays else None) or loads(raw)["data"]
                self.reused += 1
                return data
            except (OSError, ValueError, KeyError, TypeError):
                pass
        body: list[bytes] = []
        data = ask(body)
        tmp = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(body[0] if body else json.dumps({"data": data}).encode())
        os.replace(tmp, path)  # whole or not at all; not fsynced (a lost answer is asked again)
        with _LISTINGS_LOCK:
            _listing_of(self.resume).add(name)
        return data


_LISTINGS: dict[Path, set[str]] = {}
_LISTINGS_LOCK = threading.Lock()


def _listing_of(folder: Path) -> set[str]:
    """The kept answers' names in ``folder`` (hold ``_LISTINGS_LOCK``): listed once a process, then each answer kept
    added; a name listed whose file is gone is asked again."""
    got = _LISTINGS.get(folder)
    if got is None:
        try:
            got = {p.name for p in folder.iterdir()}
        except OSError:
            got = set()
        _LISTINGS[folder] = got
    return got


def _balanced(parts: list[str]) -> str:
    """``a or b or c ...`` as a balanced tree: Prometheus evaluates a chain of ``or`` left to right, hashing the
    whole left side again at every step (quadratic in the terms); a balanced tree is n log n."""
    if len(parts) == 1:
        return parts[0]
    h = len(parts) // 2
    return f"({_balanced(parts[:h])}) or ({_balanced(parts[h:])})"


def _combine(fn: str, old: float | None, v: float) -> float:
    """Pieces of one term (its window split): sums, or the extreme for min/max."""
    if old is None:
        return v
    return min(old, v) if fn == "min" else max(old, v) if fn == "max" else old + v


def _merge(a: Result, b: Result, fns: dict[Hashable, str] | None = None) -> Result:
    for key, groups in b.items():
        acc = a.setdefault(key, {})
        fn = (fns or {}).get(key, "increase")
        for g, v in groups.items():
            acc[g] = _combine(fn, acc.get(g), v)
    return a


def scrape_interval(client: PrometheusClient, selector: str, at: float, probe_s: float = 3600.0, probes: int = 6) -> float:
    """The densest scrape interval among the series ``selector`` selects before ``at``: samples per hour of the
    busiest series in each of the last ``probes`` hours (one ``query_range``). One hour alone misled where every
    series was cut by a job label that hour (4 GPUs: 97 samples at most, read as 37 s instead of 30 s: every
    summary bin then looked short and was read raw); 15 s when none is found. Used to size requests and as the
    summaries' grid (rounded to whole seconds), not to compute energy."""
    try:
        data = client.query_range(f"max(count_over_time({selector}[{int(probe_s)}s]))", at - (probes - 1) * probe_s, at, probe_s)
        vals = [float(v[1]) for s in data.get("result") or [] for v in s.get("values") or []]
        n = max(vals, default=0.0)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        n = 0.0
    return probe_s / n if n >= 2 else 15.0


def regex_alt(values: Iterable[str]) -> str:
    """``a|b|c`` with each value's regex metacharacters escaped, for a ``=~`` matcher inside double quotes."""
    return "|".join(v.translate(_ESCAPES) for v in sorted(set(values)))


# a regex metacharacter escaped for RE2 inside a PromQL string (two backslashes there), a double quote for PromQL
_ESCAPES = str.maketrans({ch: "\\\\" + ch for ch in ".^$*+?()[]{}|\\"} | {'"': '\\"'})


def energy_by(
    client: PrometheusClient,
    metric: str,
    matchers: str,
    start: float,
    end: float,
    by: tuple[str, ...],
    unit_j: float = 1.0,
    chunk_s: float = 86400.0,
    max_samples: float = DEFAULT_MAX_SAMPLES,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> dict[tuple[str, ...], float]:
    """Joules per group of an energy counter over ``[start, end]`` (``increase``, each meter once), evaluated
    by the server in windows of at most ``chunk_s`` (adjacent windows' extrapolations meet at their edges)."""
    if end <= start:
        raise FootprintError(f"the window is empty ({start:.0f} - {end:.0f})", key="--end")
    ev = Evaluator(client, scrape_interval(client, f"{metric}{{{matchers}}}", end), max_samples, concurrency)
    edges = [start + i * chunk_s for i in range(int(math.ceil((end - start) / chunk_s)))] + [end]
    terms = [Term("e", metric, matchers, a, b, by) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
    return {g: v * unit_j for g, v in ev.run(terms).get("e", {}).items()}


__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "Evaluator",
    "Term",
    "batches",
    "braced",
    "energy_by",
    "range_of",
    "regex_alt",
    "render",
    "scrape_interval",
    "selector_matchers",
    "window_expr",
]
