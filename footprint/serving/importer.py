"""`footprint serving import`: telemetry (Prometheus or recorded files) -> attribution -> a serving record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.inputs import load_yaml, read_text
from footprint.serving import engines as eng
from footprint.serving import scrape, store
from footprint.serving.assess import Site
from footprint.serving.attribution import attribute, parse_map
from footprint.serving.telemetry import LAYOUTS, Telemetry, from_samples


def load_map(path: str | None) -> dict[str, Any] | None:
    """The user's GPU/pod -> model map (YAML, read within the project's limits)."""
    if not path:
        return None
    return parse_map(load_yaml(read_text(path, "model map"), path), path)


MAX_WINDOWS = 1_000_000  # ~9.5 years of 5-minute windows: more is a wrong timestamp or window, not a recording


def _windows(span_s: float, window_s: float, where: str) -> int:
    n = int(span_s // window_s)
    if n > MAX_WINDOWS:
        raise FootprintError(
            f"{span_s / 86400:,.0f} days of {window_s:g} s windows is over {MAX_WINDOWS:,} windows: check the timestamps, "
            "or give --start/--end or a longer --window",
            where,
        )
    return max(1, n)


def layouts_of(pod_label: str | None, namespace_label: str | None) -> tuple[tuple[str, str], ...]:
    """The DCGM series' pod-label layouts to read: both known ones, or the one the user names."""
    if not pod_label and not namespace_label:
        return LAYOUTS
    pod = pod_label or "pod"
    return ((namespace_label or ("exported_namespace" if pod == "exported_pod" else "namespace"), pod),)


def _check_window(window_s: float, scrape_s: float) -> None:
    if window_s < 2 * scrape_s:  # increase() over fewer than two samples is empty: every model's energy went unattributed
        raise FootprintError(
            f"a window of {window_s:g} s holds fewer than two scrapes of {scrape_s:g} s (--scrape-interval, or the data's "
            f"sample spacing): give at least {2 * scrape_s:g}s",
            key="--window",
        )


def _check(tel: Telemetry, where: str) -> None:
    if not len(tel.gpus):
        raise FootprintError("no GPU energy reading in the window (DCGM counter or power gauge)", where)
    if not len(tel.engines):
        raise FootprintError("no serving-engine counter in the window", where)


def import_prometheus(
    out: str | Path,
    client: Any,
    start: float,
    end: float,
    window_s: float,
    scrape_s: float | None,
    site: Site,
    selector: str = "",
    gpu_map: dict[str, Any] | None = None,
    force: bool = False,
    pod_label: str | None = None,
    namespace_label: str | None = None,
) -> tuple[Path, Any]:
    """``scrape_s`` None: the scrape interval is read from the data; ``pod_label``/``namespace_label``: the DCGM
    series' pod labels (default: both layouts read, the one the engines' pods match kept)."""
    from footprint.serving.promsource import read

    if end - start < window_s:
        raise FootprintError(f"the window ({end - start:g} s) is shorter than one step ({window_s:g} s)", key="--start/--end")
    end = start + _windows(end - start, window_s, "--start/--end") * window_s
    if scrape_s is not None:
        _check_window(window_s, scrape_s)
    tel = read(client, start, end, window_s, scrape_s, selector, layouts_of(pod_label, namespace_label))
    _check_window(window_s, tel.scrape_s)
    _check(tel, client.base)
    a = attribute(tel, gpu_map, pod_label and layouts_of(pod_label, namespace_label)[0][1])
    return store.write(out, tel, a, site, force), a


def import_files(
    out: str | Path,
    files: list[str],
    window_s: float,
    site: Site,
    gpu_map: dict[str, Any] | None = None,
    start: float | None = None,
    end: float | None = None,
    force: bool = False,
    pod_label: str | None = None,
    namespace_label: str | None = None,
    scrape_s: float | None = None,
) -> tuple[Path, Any]:
    series, step = scrape.read_series(files)
    step = scrape_s or step  # the median sample spacing, unless given
    names = {k[0] for k in series}
    found = eng.detect(names, ", ".join(files))
    t0 = min(float(t[0]) for t, _ in series.values())
    t1 = max(float(t[-1]) for t, _ in series.values())
    lo = start if start is not None else t0 - (t0 % window_s)
    hi = end if end is not None else t1
    if hi <= max(lo, t0) or lo >= t1:  # --end before the first sample, --start after the last: no record of nothing
        from footprint.serving.store import iso

        raise FootprintError(
            f"the window {iso(lo)} to {iso(hi)} holds no sample (the files span {iso(t0)} to {iso(t1)}): nothing written",
            files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more files",
            "--start/--end",
        )
    n = _windows(
        hi - lo, window_s, ", ".join(files)
    )  # whole windows: a partial last one would charge its tokens part of its energy
    where = files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more files"
    tel = from_samples(
        ((k[0], dict(k[1]), t, v) for k, (t, v) in series.items()),
        lo,
        lo + n * window_s,
        window_s,
        step,
        found,
        where,
        layouts_of(pod_label, namespace_label),
    )
    _check(tel, where)
    a = attribute(tel, gpu_map, pod_label and layouts_of(pod_label, namespace_label)[0][1])
    return store.write(out, tel, a, site, force), a
