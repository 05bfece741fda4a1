"""`footprint serving watch` against the fake NVML and a live /metrics endpoint on 127.0.0.1 (vLLM format)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from footprint.serving import store
from footprint.serving.assess import Site
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
    w = Watcher(endpoint, tmp_path, window_s=1.0, interval_s=0.1).start()
    try:
        deadline = time.time() + 4.5
        while time.time() < deadline:
            time.sleep(0.1)
            w.tick()
    finally:
        w.close()
    lines = (tmp_path / "windows.jsonl").read_text().splitlines()
    assert 3 <= len(lines) <= 5
    assert (tmp_path / "journal.jsonl").exists()  # the tracker's crash-safe journal of the GPU samples
    rec = build_record(tmp_path, Site("FRA", 1.2))
    _, a = store.read(rec)
    assert len(a.gpus) == 2 and (a.gpus["energy_j"] > 0).all()
    # the first window runs from start() to the next whole second (a part of one): compare the whole ones
    whole = a.models_w[a.models_w["window"] > a.models_w["window"].min()]
    got = whole["tokens_out"].sum() / whole["window"].nunique()
    assert got == pytest.approx(500.0, rel=0.15)  # ~500 tokens per 1 s window
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
