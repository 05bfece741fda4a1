"""`footprint serving watch` against the fake NVML and a live /metrics endpoint on 127.0.0.1 (vLLM format)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from footprint.errors import FootprintError
from footprint.serving import store
from footprint.serving.assess import Site
from footprint.serving.report import build, series
from footprint.serving.watch import Watcher, build_record


class _Engine:
    """A vLLM /metrics whose counters grow with wall time: 500 output tokens/s, prefill 10 % of busy time."""

    def __init__(self) -> None:
        self.t0 = time.time()

    def text(self) -> str:
        dt = time.time() - self.t0
        lab = '{model_name="llama",namespace="s",pod="p"}'
        return (
            f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{lab} {500 * dt:.3f}\n"
            f"vllm:prompt_tokens_total{lab} {1500 * dt:.3f}\nvllm:request_success_total{lab} {dt:.3f}\n"
            f"vllm:request_prefill_time_seconds_sum{lab} {0.1 * dt:.4f}\n"
            f"vllm:request_decode_time_seconds_sum{lab} {0.9 * dt:.4f}\n"
        )


@pytest.fixture
def endpoint() -> Iterator[str]:
    eng = _Engine()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = eng.text().encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    srv.shutdown()


def test_watch_journals_windows_and_builds_the_same_record(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "2xA100-SXM4-40GB")
    time.sleep(1.5 - time.time() % 1.0)  # start half a second into a second: a first window of half a second
    w = Watcher(endpoint, tmp_path, window_s=1.0, interval_s=0.1).start()
    try:
        deadline = time.time() + 4.5
        while time.time() < deadline:
            time.sleep(0.1)
            w.tick()
    finally:
        w.close()
    lines = [json.loads(x) for x in (tmp_path / "windows.jsonl").read_text().splitlines()]
    assert 3 <= len(lines) <= 5
    # the first window runs from the start (half a second into a second) to the next whole second: partial
    assert lines[0]["end"] - lines[0]["start"] == pytest.approx(0.5, abs=0.15)
    assert all(b["start"] == a["end"] and b["end"] - b["start"] == 1.0 for a, b in zip(lines, lines[1:], strict=False))
    assert (tmp_path / "journal.jsonl").exists()  # the tracker's crash-safe journal of the GPU samples
    rec = build_record(tmp_path, Site("FRA", 1.2))
    _, a = store.read(rec)
    assert len(a.gpus) == 2 and (a.gpus["energy_j"] > 0).all()
    # every window's rate over its real length, the partial first one's included: ~500 output tokens/s
    assert a.models_w["seconds"].iloc[0] == pytest.approx(lines[0]["end"] - lines[0]["start"])
    rates = series(a.models_w, a.window_s)["tokens_per_s"]
    assert rates.to_numpy() == pytest.approx(np.full(len(rates), 500.0), rel=0.25)
    assert rates.sum() == pytest.approx(500.0 * len(rates), rel=0.1)
    total = a.models_w["active_j"].sum() + a.residual_w["idle_j"].sum() + a.residual_w["unused_j"].sum()
    assert total == pytest.approx(a.metered_gpu_j, rel=1e-9)
    # a torn last line (a crash mid-write) is skipped, and the record is rebuilt from the complete windows
    with open(tmp_path / "windows.jsonl", "a") as fh:
        fh.write('{"end": 12')
    _, b = store.read(build_record(tmp_path, Site("FRA", 1.2)))
    assert b.metered_gpu_j == pytest.approx(a.metered_gpu_j)


def test_watch_command_writes_a_record(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from footprint.cli.app import main

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xH100-SXM5-80GB")
    out = tmp_path / "live"
    args = ["serving", "watch", "--metrics-url", endpoint, "-o", str(out), "--interval", "0.2", "--window", "1s"]
    assert main([*args, "--duration", "3s", "--grid", "FRA"]) == 0
    meta, a = store.read(out / "record")
    assert meta["site"]["grid"] == "FRA" and a.models["model"].tolist() == ["llama"]
    assert main(["serving", "report", str(out / "record"), "--format", "json"]) == 0


def test_watch_of_a_server_without_engine_metrics_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from footprint.cli.app import main

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xH100-SXM5-80GB")
    assert (
        main(["serving", "watch", "--metrics-url", "http://127.0.0.1:9/metrics", "-o", str(tmp_path / "x"), "--duration", "1s"])
        == 2
    )
    err = capsys.readouterr().err
    assert "cannot scrape http://127.0.0.1:9/metrics" in err and "Traceback" not in err


def _window(start: float, end: float, gpu_j: float, tokens_out: float, busy_s: float) -> str:
    eng = {"tokens_in": 2 * tokens_out, "tokens_out": tokens_out, "requests": tokens_out / 100}
    eng |= {"prefill_s": 0.1 * busy_s, "decode_s": 0.9 * busy_s}
    gpus = {"GPU-1": [0, "NVIDIA H100 80GB HBM3", gpu_j]}
    line = {"start": start, "end": end, "window_s": 1.0, "scrape_s": 0.1, "host": "h", "gpus": gpus, "engines": {"vllm|m": eng}}
    return json.dumps(line) + "\n"


def test_a_partial_first_window_is_stored_and_rated_over_its_real_length(tmp_path: Path) -> None:
    """A watch started 0.75 s into a window: its first window lasts 0.25 s. Busy all of it, the GPU was never idle
    then (charged as a whole 1 s window, it would be 75 % idle and its rate a quarter of the truth)."""
    (tmp_path / "windows.jsonl").write_text(
        _window(100.75, 101.0, 100.0, 125.0, 0.25)  # 400 W, 500 tokens/s, busy throughout
        + _window(101.0, 102.0, 400.0, 500.0, 1.0)
        + _window(102.0, 103.0, 100.0, 0.0, 0.0)  # quiet: the idle power (100 W) is measured here
    )
    meta, a = store.read(build_record(tmp_path, Site("FRA", 1.2)))
    assert meta["partial_windows"] == {"0": 0.25} and meta["start_s"] == 100.75 and meta["end_s"] == 103.0
    mw = a.models_w.set_index("window")
    assert mw["seconds"].tolist() == [0.25, 1.0, 1.0]
    assert mw.loc[0, "gpu_s"] == pytest.approx(0.25) and mw.loc[0, "active_j"] == pytest.approx(100.0)  # not idle
    assert a.residual_w.set_index("window")["idle_j"].tolist() == pytest.approx([0.0, 0.0, 100.0])
    assert series(a.models_w, a.window_s)["tokens_per_s"].tolist() == pytest.approx([500.0, 500.0, 0.0])
    assert a.gpus["seconds"].tolist() == [2.25] and a.gpus["busy_s"].tolist() == pytest.approx([1.25])
    rep = build(meta, a, Site("FRA", 1.2))
    assert rep["days"] == pytest.approx(2.25 / 86400) and rep["partial_windows"] == {"0": 0.25}
    assert rep["unattributed"]["gpu_hours"] == pytest.approx(1.0 / 3600)  # the quiet second, no more


def test_the_watch_scrapes_at_each_window_edge(tmp_path: Path) -> None:
    """Scrapes every --interval, but never past a window's edge: a window's counters are read when it ends."""
    now = [95.0]
    w = Watcher("http://127.0.0.1:9/metrics", tmp_path, window_s=10.0, interval_s=15.0, clock=lambda: now[0])
    w.window_end = 100.0
    assert w.next_wait() == pytest.approx(5.0, abs=0.01)
    now[0] = 81.0
    assert w.next_wait() == 15.0  # the edge is further than one interval
    now[0] = 100.5  # late (a busy machine): scrape now, and the tick closes the window
    assert w.next_wait() == pytest.approx(0.01)


def test_window_lines_without_or_with_a_damaged_start_give_finite_rates(tmp_path: Path) -> None:
    old = json.loads(_window(0.0, 101.0, 300.0, 500.0, 1.0))
    del old["start"]  # written before windows had a start: a whole window
    damaged = _window(109.0, 102.0, 400.0, 500.0, 1.0) + _window(103.0, 103.0, 400.0, 500.0, 1.0)  # start >= end
    (tmp_path / "windows.jsonl").write_text(json.dumps(old) + "\n" + damaged)
    meta, a = store.read(build_record(tmp_path, Site("FRA", 1.2)))
    # a damaged start is no length: the window is whole (it was 1 ms: 400 kW from one H100, 500,000 tokens/s)
    assert a.models_w["seconds"].tolist() == [1.0, 1.0, 1.0] and meta["partial_windows"] == {}
    rep = build(meta, a, Site("FRA", 1.2))
    assert np.isfinite(series(a.models_w, a.window_s)["tokens_per_s"]).all() and np.isfinite(rep["days"])


def test_a_repeated_or_torn_line_is_counted_once_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    good = _window(100.5, 101.0, 200.0, 250.0, 0.5) + _window(101.0, 102.0, 400.0, 500.0, 1.0)
    (tmp_path / "windows.jsonl").write_text(good + good.splitlines(keepends=True)[1] + '{"start": 102.0, "end"')
    _, a = store.read(build_record(tmp_path, Site("FRA", 1.2)))
    assert a.metered_gpu_j == pytest.approx(600.0) and a.models_w["seconds"].tolist() == [0.5, 1.0]
    line = json.loads(_window(102.0, 103.0, 400.0, 500.0, 1.0))
    for key, value, expected in [
        ("window_s", 0, "expected a number in (0"),  # was ZeroDivisionError
        ("window_s", -1.0, "expected a number in (0"),  # was a negative length of the watch
        ("window_s", 2.0, "restarted with another --window"),  # was windows of 1 s and 2 s on one index
        ("scrape_s", 0, "expected a number in (0"),
        ("end", "later", "expected a number"),  # was a TypeError
        ("end", 1e300, "expected a number"),  # was an OverflowError
        ("gpus", [1], "expected {uuid"),
        ("gpus", {"GPU-1": [0, "H100", -5.0]}, "joules >= 0"),
        ("engines", None, "expected {engine|model"),
    ]:
        (tmp_path / "windows.jsonl").write_text(good + json.dumps(line | {key: value}) + "\n")
        with pytest.raises(FootprintError) as exc:
            build_record(tmp_path, Site("FRA", 1.2))
        assert expected in str(exc.value) and f"line 3: {key}" in str(exc.value), str(exc.value)
    for text in ("[1, 2]", "5", '{"end": NaN}'):
        (tmp_path / "windows.jsonl").write_text(good + text + "\n")
        with pytest.raises(FootprintError, match="line 3"):
            build_record(tmp_path, Site("FRA", 1.2))


def test_a_watch_with_another_window_over_the_same_directory_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from footprint.cli.app import main

    (tmp_path / "windows.jsonl").write_text(_window(100.5, 101.0, 200.0, 250.0, 0.5))
    args = ["serving", "watch", "--metrics-url", "http://127.0.0.1:9/metrics", "-o", str(tmp_path), "--duration", "1s"]
    assert main([*args, "--window", "5m"]) == 2
    err = capsys.readouterr().err
    assert "windows of 1 s" in err and "--window" in err and "cannot scrape" not in err, err


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--grid", "XXX"], "--grid: unknown grid zone"),  # was accepted, and refused by the first report
        (["--lifetime", "banana"], "--lifetime: cannot read"),
        (["--metrics-url", "file:///etc/passwd"], "expected an http:// or https:// URL"),  # was read, its line quoted
    ],
)
def test_a_bad_site_or_url_is_refused_before_the_watch_starts(
    option: list[str], expected: str, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from footprint.cli.app import main

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xH100-SXM5-80GB")
    args = ["serving", "watch", "--metrics-url", endpoint, "-o", str(tmp_path / "w"), "--window", "1s", "--duration", "2s"]
    assert main([*args, *option]) == 2
    err = capsys.readouterr().err
    assert expected in err and "watching" not in err and "root:" not in err, err
    assert not (tmp_path / "w").exists()


def test_a_watch_stopped_inside_a_window_keeps_what_it_measured(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open window is closed, partial, on stop: a 2 s watch with 1 h windows was "no complete window yet"
    (exit 2, nothing kept)."""
    from footprint.cli.app import main

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xH100-SXM5-80GB")
    args = ["serving", "watch", "--metrics-url", endpoint, "-o", str(tmp_path), "--interval", "0.2", "--window", "1h"]
    assert main([*args, "--duration", "2s"]) == 0
    (line,) = [json.loads(x) for x in (tmp_path / "windows.jsonl").read_text().splitlines()]
    assert line["end"] - line["start"] == pytest.approx(2.0, abs=0.5) and line["engines"]["vllm|llama"]["tokens_out"] > 0
    meta, a = store.read(tmp_path / "record")
    assert meta["start_s"] == line["start"] and meta["end_s"] == line["end"]  # not the hour's edge
    assert meta["partial_windows"] == {"0": pytest.approx(line["end"] - line["start"])} and a.metered_gpu_j > 0
    rep = build(meta, a, Site("FRA", 1.2))
    assert rep["days"] * 86400 == pytest.approx(line["end"] - line["start"])


def test_a_watch_stopped_and_restarted_inside_one_window_fills_it_once(tmp_path: Path) -> None:
    """Stopped 0.4 s into window 1 (its part closed on stop), restarted 0.6 s in: window 1 holds both parts, 0.8 s."""
    (tmp_path / "windows.jsonl").write_text(
        _window(100.5, 101.0, 200.0, 250.0, 0.5)
        + _window(101.0, 101.4, 160.0, 200.0, 0.4)  # the stop
        + _window(101.6, 102.0, 160.0, 200.0, 0.4)  # the restart's first window
        + _window(102.0, 103.0, 400.0, 500.0, 1.0)
    )
    meta, a = store.read(build_record(tmp_path, Site("FRA", 1.2)))
    mw = a.models_w.set_index("window")
    assert mw["seconds"].tolist() == pytest.approx([0.5, 0.8, 1.0]) and mw["tokens_out"].tolist() == [250.0, 400.0, 500.0]
    assert a.metered_gpu_j == pytest.approx(920.0) and meta["start_s"] == 100.5 and meta["end_s"] == 103.0
    assert np.isfinite(series(a.models_w, a.window_s)["tokens_per_s"]).all()
