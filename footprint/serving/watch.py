"""`footprint serving watch`: NVML and one inference server's /metrics, live, for people without Prometheus.

The GPUs are sampled by the training tracker's own machinery (`meters.sampler.Sampler` over
`meters.nvml.NvmlMeter`: the crash-safe journal rolled into Parquet segments, bounded memory); the
server's /metrics is scraped every ``--interval`` and its engine counters are journalled with it (the
sampler's progress events). Every window, one line goes to ``windows.jsonl`` (flushed and fsynced:
a crash loses at most the open window): its start and end, each GPU's energy increase and each model's
token, request and busy-time increases (the same reset rule as the import). The first window runs from
the watch's start to the next window edge: it is partial, kept with its real length, and every rate of
it divides by that length; on stop the open window is closed there, partial too. Memory holds one
window, whatever the length of the watch. On stop (Ctrl-C, SIGTERM or ``--duration``), and again on
every later start over the same directory, ``record/`` is rebuilt from all the windows: the same serving
record as `footprint serving import`, with every local GPU mapped to the served model(s).
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from footprint.errors import FootprintError
from footprint.serving import engines as eng
from footprint.serving.scrape import parse
from footprint.serving.telemetry import ENGINE_COLS, GPU_COLS, HOST_COLS, PLACE_COLS, Telemetry, model_of
from meters.importers import MAX_DEVICE_POWER_W

MAX_BODY = 20_000_000
MAX_TIME_S = 253402300799.0  # 9999-12-31: a later window end is damage
MAX_COUNT = 1e18  # requests or tokens in one window: the plausibility table's most tokens of a whole training run


def fetch_url(url: str, timeout: float = 5.0) -> str:
    """The server's /metrics text: bounded, within `timeout` overall, redirects only to the same host
    (`footprint.http.get_text`)."""
    from footprint.http import get_text

    return get_text(url, timeout, MAX_BODY)


class Watcher:
    """One window of state at a time; `tick` scrapes and closes windows, `close` ends the last one."""

    def __init__(
        self,
        url: str,
        out: Path,
        window_s: float,
        interval_s: float,
        fetch: Callable[[str], str] = fetch_url,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url, self.out, self.window_s, self.interval_s = url, out, window_s, interval_s
        self.fetch, self.clock = fetch, clock
        self.engines: list[eng.Engine] | None = None
        self.counters: dict[tuple[str, str], dict[str, float]] = {}  # (engine, model) -> field -> cumulative
        self.start_counters: dict[tuple[str, str], dict[str, float]] = {}
        self.start_energy: dict[str, float] = {}
        self.window_start = 0.0  # when the open window began: its real length is end - start (the first is partial)
        self.window_end: float | None = None
        self.errors = 0
        self.scrapes = 0
        self.sampler: Any = None
        self.host = socket.gethostname()

    def start(self) -> Watcher:
        from meters.nvml import NvmlMeter
        from meters.sampler import Sampler

        self._scrape()  # first: a server that cannot be read or has no engine metrics stops here, before any thread
        self.out.mkdir(parents=True, exist_ok=True)
        self.sampler = Sampler(
            NvmlMeter(),
            period_s=min(1.0, self.interval_s),
            journal_path=self.out / "journal.jsonl",
            progress=self._progress,
            meta={"serving": self.url},
        ).start()
        self._scrape()  # the counters' baseline as the meters start (they count from 0 J now)
        now = self.clock()
        self.window_end = (now // self.window_s + 1) * self.window_s  # the first window is partial: now to the edge
        self._open_window(now)
        return self

    def _progress(self) -> dict[str, Any]:
        return {"engine_counters": {f"{e}|{m}": c for (e, m), c in self.counters.items()}}

    def _scrape(self) -> None:
        try:
            text = self.fetch(self.url)
        except (OSError, ValueError, FootprintError) as exc:
            self.errors += 1
            if self.engines is None:
                why = exc.detail if isinstance(exc, FootprintError) else exc
                raise FootprintError(f"cannot scrape {self.url}: {why}", key="--metrics-url") from None
            return
        rows = list(parse(text.splitlines(), self.url, now=self.clock()))
        if self.engines is None:
            self.engines = eng.detect({r[0] for r in rows}, self.url)
        acc: dict[tuple[str, str], dict[str, float]] = {}
        for e in self.engines:
            for f in eng.FIELDS:
                m = e.metric(f)
                if m is None:
                    continue
                for name, lab, _, v in rows:
                    if name == m[0] and all(lab.get(k) == x.strip('"') for k, x in (p.split("=") for p in m[1].split(",") if p)):
                        d = acc.setdefault((e.name, model_of(e, lab)[0]), {})
                        d[f] = d.get(f, 0.0) + v
        self.counters = acc
        self.scrapes += 1

    def _energies(self) -> dict[str, tuple[int | None, str, float]]:
        infos = {i.uuid: i for i in self.sampler.devices if i.component == "gpu"}
        return {u: (infos[u].index, infos[u].name, s.energy_j_cumulative) for u, s in self.sampler.latest().items() if u in infos}

    def _open_window(self, start: float) -> None:
        self.window_start = start
        self.start_counters = {k: dict(v) for k, v in self.counters.items()}
        self.start_energy = {u: e for u, (_, _, e) in self._energies().items()}

    def _close_window(self, end: float) -> None:
        # a GPU not read yet at the window's start counts from 0 J: its meter started with the watch
        gpus = {u: [i, n, max(0.0, e - self.start_energy.get(u, 0.0))] for u, (i, n, e) in self._energies().items()}
        engines = {}
        for k, c in self.counters.items():
            s = self.start_counters.get(k, {})
            rise = {f: (v - s[f] if f in s and v >= s[f] else v) for f, v in c.items()}
            # a server's negative, NaN or 1e300 counter is not written: the line stays one a reader accepts
            engines[f"{k[0]}|{k[1]}"] = {f: v for f, v in rise.items() if _count(v) <= MAX_COUNT}
        line = json.dumps(
            {
                "start": self.window_start,
                "end": end,
                "window_s": self.window_s,
                "scrape_s": self.interval_s,
                "host": self.host,
                "gpus": gpus,
                "engines": engines,
                "scrapes": self.scrapes,
                "errors": self.errors,
            }
        )
        with open(self.out / "windows.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.scrapes = self.errors = 0
        self._open_window(end)

    def tick(self) -> None:
        self._scrape()
        now = self.clock()
        while self.window_end is not None and now >= self.window_end:
            self._close_window(self.window_end)
            self.window_end += self.window_s

    def next_wait(self) -> float:
        """Seconds to the next scrape: ``interval``, or less so that a window closes at its edge (its counters are then
        read at the edge, and a window's real length is its nominal one)."""
        left = (self.window_end or 0.0) - self.clock()
        return max(0.01, min(self.interval_s, left + 0.001))

    def finish(self) -> None:
        """On stop: the open window up to now, partial, so that what was measured since the last edge is kept (a watch
        stopped before its first edge had nothing)."""
        if self.sampler is None or self.window_end is None:
            return
        self._scrape()
        now = self.clock()
        if now > self.window_start:
            self._close_window(now)

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()


def telemetry(out: Path) -> tuple[Telemetry, dict[str, Any]]:
    """The windows written so far as telemetry, and the map of every local GPU to the served models."""
    path = out / "windows.jsonl"
    lines = read_windows(path)
    if not lines:
        raise FootprintError("no complete window yet (watch for at least one --window)", str(path))
    w_s = float(lines[0]["window_s"])
    first = min(_slot(x["end"], w_s) for x in lines)
    start = first * w_s
    g, e = [], []
    seconds: dict[int, float] = {}
    for x in lines:
        w = _slot(x["end"], w_s) - first
        secs = _seconds(x, w_s)
        seconds[w] = min(w_s, seconds.get(w, 0.0) + secs)  # a restart inside a window: its two parts
        for u, (i, name, j) in x["gpus"].items():
            g.append((w, x["host"], str(i), u, name, float(j), "nvml", int(secs / x["scrape_s"]), 0))
        for k, d in x["engines"].items():
            engine, _, model = k.partition("|")
            e.append((w, engine, "", "", "", model, "", *(_count(d.get(f)) for f in eng.FIELDS), 0))
    partial = {w: s for w, s in seconds.items() if s < w_s}
    gpus, engines = pd.DataFrame(g, columns=GPU_COLS), pd.DataFrame(e, columns=ENGINE_COLS)
    end = max(x["end"] for x in lines)
    tel = Telemetry(
        start,
        end,
        w_s,
        float(lines[0]["scrape_s"]),
        gpus,
        pd.DataFrame(columns=PLACE_COLS),
        engines,
        pd.DataFrame(columns=HOST_COLS),
        f"footprint serving watch ({lines[0]['host']})",
        partial=partial,
        began=min(x["end"] - _seconds(x, w_s) for x in lines),
    )
    gmap = pd.DataFrame(
        [
            (h, gi, m)
            for h, gi in gpus[["host", "gpu"]].drop_duplicates().itertuples(index=False)
            for m in engines["model"].unique()
        ],
        columns=["host", "gpu", "model"],
    )
    return tel, {"pods": {}, "gpus": gmap}


def read_windows(path: Path) -> list[dict[str, Any]]:
    """The lines of ``windows.jsonl``, each checked: a torn line (a crash mid-write) is left out, a repeated line
    counted once (the same window, not more energy), and a line that parses but is not a window of this watch is
    one error naming the file, the line and the key (never a traceback, a nan rate or a negative length)."""
    lines: list[dict[str, Any]] = []
    seen: set[int] = set()
    if not path.exists():
        return lines
    from footprint.inputs import check_file

    check_file(path, "windows journal")  # a named pipe planted there would block the read
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            raw = raw.strip()
            if not raw or hash(raw) in seen:
                continue
            seen.add(hash(raw))
            try:
                x = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            lines.append(_check_window(x, f"line {n}", lines[0]["window_s"] if lines else None, str(path)))
    return lines


def _check_window(x: Any, where: str, window_s: float | None, file: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise FootprintError(f"expected a window (a JSON object), got {type(x).__name__}", file, where)

    def number(key: str, lo: float, hi: float = MAX_TIME_S) -> float:
        v = x.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo < v <= hi:
            raise FootprintError(f"expected a number in ({lo:g}, {hi:g}], got {str(v)[:40]!r}", file, f"{where}: {key}")
        return float(v)

    number("end", 0.0)
    w_s = number("window_s", 0.0, 366 * 86400)
    number("scrape_s", 0.0, 366 * 86400)
    if window_s is not None and w_s != window_s:
        raise FootprintError(
            f"a window of {w_s:g} s after windows of {window_s:g} s: the watch was restarted with another --window "
            "(watch into another -o directory)",
            file,
            f"{where}: window_s",
        )
    gpus, engines = x.get("gpus"), x.get("engines")
    most_j = MAX_DEVICE_POWER_W * w_s  # no GPU draws more: 1e300 J in a window is damage
    ok_gpus = isinstance(gpus, dict) and all(
        isinstance(v, list) and len(v) == 3 and _count(v[2]) <= most_j for v in gpus.values()
    )
    ok_engines = isinstance(engines, dict) and all(
        isinstance(d, dict) and all(_count(c) <= MAX_COUNT for c in d.values()) for d in engines.values()
    )
    if not ok_gpus or not ok_engines:
        key = "gpus" if not ok_gpus else "engines"
        want = (
            f"{{uuid: [index, name, joules >= 0 and at most {most_j:g}]}}"
            if key == "gpus"
            else f"{{engine|model: {{counter: a count from 0 to {MAX_COUNT:g}}}}} (not NaN, negative or 1e300)"
        )
        raise FootprintError(f"expected {want}", file, f"{where}: {key}")
    x.setdefault("host", "?")
    return x


def _slot(end: float, w_s: float) -> int:
    """The window a line belongs to: the one whose edge (a multiple of the window, as the watch cuts them) is its end
    or, for the last window of a stopped watch, the next edge after it."""
    return math.ceil(end / w_s - 1e-6) - 1


def _seconds(x: dict[str, Any], w_s: float) -> float:
    """A window's real length: from its start (a watch's first window is partial) to its end; a line without a start
    (written before windows had one) or with one outside [end - window, end) is a whole window."""
    start = x.get("start")
    if isinstance(start, int | float) and not isinstance(start, bool) and 0 < x["end"] - start <= w_s:
        return float(x["end"] - start)
    return w_s


def _count(v: Any) -> float:
    """A counter's increase as written; a missing, non-numeric, negative or non-finite one is not available (nan)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
        return math.nan
    return float(v)


def build_record(out: Path, site: Any) -> Path:
    from footprint.serving import store
    from footprint.serving.attribution import attribute

    tel, gmap = telemetry(out)
    return store.write(out / "record", tel, attribute(tel, gmap), site, force=True)


def watch(url: str, out: Path, window_s: float, interval_s: float, duration_s: float | None, site: Any) -> Path:
    """Watch until Ctrl-C, SIGTERM or ``duration_s``; then rebuild the record from every window written."""
    from footprint.http import check_url
    from footprint.outputs import check_dir_target

    check_url(url, "--metrics-url")  # http(s) only (never file://), a host the HTTP stack can send
    check_dir_target(out)
    earlier = read_windows(out / "windows.jsonl")  # a damaged journal or another --window: said now, not at the end
    if earlier and earlier[0]["window_s"] != window_s:
        raise FootprintError(
            f"this directory holds windows of {earlier[0]['window_s']:g} s: watch with that --window, or into another -o",
            str(out / "windows.jsonl"),
            "--window",
        )
    until = time.monotonic() + duration_s if duration_s else None
    w = Watcher(url, out, window_s, interval_s).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"watching {url} and {len(w._energies())} GPU(s); windows in {out}/windows.jsonl (Ctrl-C stops)", file=sys.stderr)
    try:
        while not stop.is_set() and (until is None or time.monotonic() < until):
            stop.wait(w.next_wait())
            w.tick()
    except KeyboardInterrupt:
        pass
    finally:
        try:
            w.finish()
        finally:
            w.close()
    return build_record(out, site)
