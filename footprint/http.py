"""The HTTP client's guards, shared by every request footprint makes (Prometheus queries, a server's /metrics).

Why here: `requests` and urllib bound each socket operation by a timeout, not a request: a server that answers one
byte a second (a trickle) never trips a read timeout and holds a command for hours. `deadline(seconds)` puts one
overall deadline on everything sent and read in its block: a timer shuts the request's sockets down when it passes,
so a blocked read returns at once and the caller fails in one line. `check_url` refuses what the HTTP stack would
crash on (a 70,000-character host) before any request; `get_text` reads a bounded body and follows a redirect only
to the same host (never to a link-local metadata address a server names).

Core layer: imports only `footprint.errors`.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Any

from footprint.errors import FootprintError

MAX_HOST_CHARS = 253  # RFC 1035: a domain name is at most 253 characters, each label at most 63
MAX_URL_CHARS = 8192  # what common servers accept on a request line (nginx, Apache: 8 KiB)
MAX_REDIRECTS = 5

_local = threading.local()


class Deadline:
    """One overall deadline over the requests made in a thread (see `deadline`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.expired = seconds, False
        self._conns: list[Any] = []
        self._lock = threading.Lock()

    def add(self, conn: Any) -> None:
        with self._lock:
            self._conns.append(conn)
            if self.expired:
                _shutdown(conn)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._conns:
                _shutdown(conn)


def _shutdown(conn: Any) -> None:
    sock = conn if isinstance(conn, socket.socket) else getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """Every request sent in this block through a session from `session()` ends by `seconds` from now: at the
    deadline its sockets are shut down (the blocked read returns); check ``.expired`` to tell that from a failure."""
    d = Deadline(seconds)
    before = getattr(_local, "deadline", None)
    _local.deadline = d
    timer = threading.Timer(seconds, d._fire)  # held here, not by d: the two would be a cycle for the collector
    timer.daemon = True
    timer.start()
    try:
        yield d
    finally:
        timer.cancel()
        _local.deadline = before


def _register(conn: Any) -> None:
    d = getattr(_local, "deadline", None)
    if d is not None:
        d.add(conn)


def _pools() -> dict[str, Any]:
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class Registering:
        # the socket itself is registered (http.client drops the connection's reference once a response that ends
        # with the connection has begun), when made and when a kept-alive one is reused
        sock: Any

        def connect(self) -> None:
            super().connect()  # type: ignore[misc]
            _register(self.sock)

        def request(self, *args: Any, **kwargs: Any) -> Any:
            if self.sock is not None:
                _register(self.sock)
            return super().request(*args, **kwargs)  # type: ignore[misc]

    class Conn(Registering, HTTPConnection):
        pass

    class TLSConn(Registering, HTTPSConnection):
        pass

    class Pool(HTTPConnectionPool):
        ConnectionCls = Conn

    class TLSPool(HTTPSConnectionPool):
        ConnectionCls = TLSConn

    return {"http": Pool, "https": TLSPool}


def session(pool_maxsize: int = 16) -> Any:
    """A `requests.Session` whose connections obey `deadline`."""
    import requests

    class Adapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = _pools()

    s = requests.Session()
    adapter = Adapter(pool_maxsize=pool_maxsize)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s


def check_url(url: str, key: str = "--url") -> str:
    """`url` if the HTTP stack can send it: http(s), no spaces or control characters, a port in range, a host of at
    most 253 characters in labels of at most 63 (RFC 1035), at most `MAX_URL_CHARS`; else one error."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise FootprintError(f"expected an http:// or https:// URL, got {str(url)[:200]!r}", key=key)
    if len(url) > MAX_URL_CHARS:
        raise FootprintError(f"the URL is {len(url):,} characters long: at most {MAX_URL_CHARS:,}", key=key)
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise FootprintError("the URL holds spaces or control characters", key=key)
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise FootprintError(f"invalid URL {url[:200]!r}: {exc}", key=key) from None
    host = parts.hostname
    if not host:
        raise FootprintError(f"invalid URL {url[:200]!r}: no host", key=key)
    if len(host) > MAX_HOST_CHARS or (not host.startswith("[") and any(len(x) > 63 for x in host.split("."))):
        raise FootprintError(
            f"invalid URL: the host {host[:60]!r}... is not a host name (at most 253 characters, 63 per label)", key=key
        )
    return url


def get_text(url: str, timeout_s: float, max_bytes: int, key: str = "--metrics-url") -> str:
    """A GET's body as text: at most `max_bytes`, within `timeout_s` overall (connect, headers, body), redirects
    followed only to http(s) on the same host; anything else one FootprintError. (The standard library's
    http.client: a scrape every few seconds needs no more, and it is loaded in milliseconds.)"""
    from urllib.parse import urljoin, urlsplit

    check_url(url, key)
    host = urlsplit(url).hostname
    with deadline(timeout_s) as d:
        try:
            for _ in range(MAX_REDIRECTS + 1):
                conn, r = _get(url, timeout_s)
                try:
                    if r.status not in (301, 302, 303, 307, 308):
                        return _body(r, url, max_bytes, d, key)
                    target = urljoin(url, r.getheader("Location") or "")
                finally:
                    conn.close()
                parts = urlsplit(target)
                if parts.scheme not in ("http", "https") or parts.hostname != host:
                    raise FootprintError(
                        f"{url[:200]} redirects to {target[:200]!r}: only http(s) on the same host ({host}) is followed",
                        key=key,
                    )
                url = check_url(target, key)
            raise FootprintError(f"{url[:200]}: more than {MAX_REDIRECTS} redirects (a loop?)", key=key)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if d.expired:
                raise FootprintError(f"{url[:200]}: no whole answer within {timeout_s:g} s", key=key) from None
            raise FootprintError(f"cannot read {url[:200]}: {str(exc)[:200] or type(exc).__name__}", key=key) from None


def _get(url: str, timeout_s: float) -> tuple[Any, Any]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout_s)
    conn.connect()
    _register(conn.sock)  # shut down at the deadline (the socket itself: the response keeps it, the connection not)
    conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), headers={"Accept": "text/plain"})
    return conn, conn.getresponse()


def _body(r: Any, url: str, max_bytes: int, d: Deadline, key: str) -> str:
    if r.status >= 400:
        raise FootprintError(f"{url[:200]} answered HTTP {r.status}", key=key)
    parts, size = [], 0
    while piece := r.read1(1 << 16):
        size += len(piece)
        if size > max_bytes:
            raise FootprintError(f"{url[:200]}: the answer is larger than {max_bytes:,} bytes", key=key)
        parts.append(piece)
    if d.expired:
        raise FootprintError(f"{url[:200]}: no whole answer within {d.seconds:g} s", key=key)
    return b"".join(parts).decode("utf-8", "replace")
