"""The Prometheus client against hostile or broken servers and inputs (issue 21, finding 5): every case is one
line on stderr and exit 2 from the CLI, never a traceback, a hang or unbounded memory, and nothing written."""

from __future__ import annotations

import gzip
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from footprint.cli.app import main
from footprint.errors import FootprintError
from footprint.fleet.prometheus import PromConfig, PrometheusClient

OK = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


class Hostile(http.server.BaseHTTPRequestHandler):
    mode = "ok"
    asked: list[str] = []

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        m = type(self).mode
        if m == "huge":  # a never-ending answer: the cap stops it
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                for _ in range(10_000):
                    self.wfile.write(b" " * 65536)
            except OSError:
                pass
            return
        if m == "slow":  # answers after the client's --timeout
            import time

            time.sleep(2.0)
            return self._send(200, OK)
        if m == "file_redirect":
            return self._redirect("file:///etc/passwd")
        if m == "other_host":
            return self._redirect("http://169.254.169.254/latest/meta-data")
        if m == "loop":
            return self._redirect(self.path)
        if m == "same_host":
            if self.path.startswith("/moved"):
                return self._send(200, OK)
            return self._redirect("/moved" + self.path)
        if m == "encoding":  # what the client asked for, and that answer compressed if it asked for gzip
            asked = self.headers.get("Accept-Encoding", "")
            type(self).asked.append(asked)
            return self._send(200, gzip.compress(OK), {"Content-Encoding": "gzip"}) if "gzip" in asked else self._send(200, OK)
        if m == "bad_gzip":
            return self._send(200, b"\x1f\x8b\x08\x00garbage-not-deflate", {"Content-Encoding": "gzip"})
        if m == "gzip_bomb":
            return self._send(200, gzip.compress(b" " * (8 * 2**20)), {"Content-Encoding": "gzip"})
        if m == "truncated":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(OK[:20])
            return
        if m == "escapes":
            body = b'{"status":"error","errorType":"bad_data","error":"\\u001b[31mred\\u0007 \\r\\nInjected: 1"}'
            return self._send(400, body)
        return self._send(200, OK)

    do_POST = do_GET  # noqa: N815

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    """The client hangs up on purpose (a body over its size cap, a refused redirect): the write that then fails is
    expected, and is not printed as a traceback into whichever test's stderr is being captured at that moment."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = Server(("127.0.0.1", 0), Hostile)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _cli(url: str, tmp: Path, *extra: str) -> list[str]:
    return ["fleet", "import", "prometheus", "--url", url, "--start", "now-1h", "--end", "now", "--retries", "0"] + [
        *extra,
        "-o",
        str(tmp / "out"),
        "--quiet",
    ]


@pytest.mark.parametrize(
    ("mode", "extra", "pattern"),
    [
        ("huge", ["--max-response-mb", "1"], "over 1 MiB"),
        ("gzip_bomb", ["--max-response-mb", "1"], "over 1 MiB"),
        ("file_redirect", [], "only http(s) on the same host"),
        ("other_host", [], "only http(s) on the same host"),
        ("loop", [], "more than 5 redirects"),
        ("bad_gzip", [], "bad gzip"),
        ("truncated", [], "cannot reach"),
        ("escapes", [], "HTTP 400"),
        ("slow", ["--timeout", "0.5"], "timed out"),
    ],
)
def test_hostile_servers_are_one_line_and_exit_2(
    server: str, tmp_path: Path, mode: str, extra: list[str], pattern: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Hostile.mode = mode
    assert main(_cli(server, tmp_path, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert pattern in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1 and "\x1b" not in err and "\x07" not in err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_a_redirect_on_the_same_host_is_followed(server: str) -> None:
    Hostile.mode = "same_host"
    c = PrometheusClient(PromConfig(server, retries=0))
    assert c.query("up") == {"resultType": "vector", "result": []}


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("http://127.0.0.1:99999", "invalid URL"),
        ("http://127.0.0.1:abc", "invalid URL"),
        ("file:///etc/passwd", "expected an http:// or https:// URL"),
        ("http://", "expected an http"),
        ("http://exa mple:9090", "spaces or control characters"),
    ],
)
def test_bad_urls(url: str, pattern: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cli(url, tmp_path)) == 2
    err = capsys.readouterr().err
    assert pattern in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("header", "pattern"),
    [
        ("X-Scope-OrgID: t1\r\nX-Evil: 1", "control characters"),
        ("X-A: b\x00c", "control characters"),
        ("Bad Name: v", "invalid header name"),
        ("X-A: \u2603", "not Latin-1"),
    ],
)
def test_bad_headers(server: str, header: str, pattern: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cli(server, tmp_path, "--header", header)) == 2
    err = capsys.readouterr().err
    assert pattern in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        ({"headers": {"Content-Length": "99999"}}, "Content-Length is set by the HTTP client"),
        ({"headers": {"transfer-encoding": "chunked"}}, "set by the HTTP client"),
        ({"headers": {"Host": "elsewhere"}}, "set by the HTTP client"),
        ({"headers": {"X-A": "b\r\nX-Evil: 1"}}, "control characters"),
        ({"basic_auth_user": "ops\nX-Evil: 1"}, "control characters"),
        ({"ca_file": "missing.pem"}, "--ca-file: no such file"),
        ({"ca_file": "tok"}, "--ca-file: TLS error: cannot load it"),
        ({"client_cert": "tok"}, "--client-cert: TLS error: cannot load it"),
        ({"client_key": "tok"}, "needs its certificate"),
    ],
)
def test_a_config_built_in_python_is_checked_like_the_cli_options(
    config: dict, pattern: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `PromConfig` checks itself as it is made, the one check: a config built without the CLI refuses the same
    headers and TLS files, before any request (nothing listens on port 9)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tok").write_text("not a PEM file\n")
    with pytest.raises(FootprintError, match=pattern) as exc:
        PrometheusClient(PromConfig("https://127.0.0.1:9", retries=0, **config))
    assert len(str(exc.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"\xff\xfe\x00\x01binary", "not UTF-8"),
        (b"tok\nsecond line", "one line"),
        (b"\x00" * 10, "control characters"),
        (b"x" * (70 * 1024), "over 64 KiB"),
        (b"  \n", "empty"),
    ],
)
def test_bad_token_files(server: str, content: bytes, pattern: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tok = tmp_path / "tok"
    tok.write_bytes(content)
    assert main(_cli(server, tmp_path, "--bearer-token-file", str(tok))) == 2
    err = capsys.readouterr().err
    assert pattern in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_random_bytes_as_answers_never_raise_anything_but_footprint_errors(tmp_path: Path) -> None:
    """Seeded random bodies, status codes and encodings from a stub: the client answers data or FootprintError."""
    import random

    rng = random.Random(24)

    class Random(Hostile):
        def do_GET(self) -> None:  # noqa: N802
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
            if rng.random() < 0.3:
                body = gzip.compress(body)[: rng.randrange(1, 40)]
            headers = {"Content-Encoding": "gzip"} if rng.random() < 0.4 else {}
            self._send(rng.choice([200, 200, 302, 400, 422, 500, 503]), body, headers)

        do_POST = do_GET  # noqa: N815

    httpd = Server(("127.0.0.1", 0), Random)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        c = PrometheusClient(PromConfig(f"http://127.0.0.1:{httpd.server_address[1]}", retries=0, timeout_s=5))
        outcomes = set()
        for _ in range(150):
            try:
                c.query("up")
                outcomes.add("data")
            except FootprintError as exc:
                assert "\n" not in str(exc)
                outcomes.add("error")
        assert "error" in outcomes
    finally:
        httpd.shutdown()


def test_answers_come_uncompressed_unless_gzip_is_asked_for(server: str) -> None:
    """Prometheus gzips an answer at three times the CPU it spends evaluating a fixed-step counter: the client asks
    for plain answers, and for gzip only with ``--gzip`` (a slow link), reading either."""
    import argparse

    from footprint.cli.prom_options import add_connection_args, prom_config

    Hostile.mode, Hostile.asked = "encoding", []
    try:
        p = argparse.ArgumentParser()
        add_connection_args(p, required=True)
        for argv in (["--url", server], ["--url", server, "--gzip"]):
            assert PrometheusClient(prom_config(p.parse_args(argv))).query("up")["result"] == []
    finally:
        Hostile.mode = "ok"
    assert Hostile.asked == ["identity", "gzip"]
