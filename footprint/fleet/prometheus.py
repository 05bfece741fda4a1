"""A small client for the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`, series, label values).

Thanos Query and Grafana Mimir serve the same API (Mimir under a prefix such as ``/prometheus`` and a
tenant header ``X-Scope-OrgID``): give the base URL and ``headers``. Every request has a timeout;
connection failures and 5xx answers are retried with exponential backoff; 4xx answers are not (the
query is wrong) and become one clear error quoting Prometheus's own message. Secrets (bearer token,
basic-auth password) are read from files, never taken on the command line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from footprint.errors import FootprintError
from footprint.fleet.answers import loads, matrix_data

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 3
DEFAULT_MAX_RESPONSE_BYTES = 256 * 2**20  # a decoded answer larger than this is refused, not read to the end
MAX_REDIRECTS = 5
MAX_SECRET_BYTES = 64 * 1024
#: Headers that frame the request or the connection, or name its target: the client's own (RFC 9110 sections 7.2
#: and 7.6.1, RFC 9112 section 6). Given by hand, a Content-Length made every request wait for a body until the timeout.
FRAMING = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect"}
    | {"proxy-connection", "host"}
)
LIMIT_HINTS = ("too many samples", "max-samples", "max samples", "sample limit", "maximum number of samples", "max_samples")


class PrometheusError(FootprintError):
    """The server could not be reached or refused the query."""


class PrometheusLimitError(PrometheusError):
    """The server refused a query for its size (Prometheus' --query.max-samples, Thanos', Mimir's limits): split it."""


@dataclass
class PromConfig:
    url: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    bearer_token_file: str | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: str | None = None
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    insecure_skip_verify: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    gzip: bool = False  # ask for compressed answers: a third of the bytes, three times the server's CPU (see client)

    def __post_init__(self) -> None:
        """Refuse what would fail later, or silently, inside the HTTP client: the URL, every header (framing
        headers, CR/LF), and the CA bundle and client certificate, loaded once here, when the config is made (from
        the CLI's options or in Python), before any slow step or request; secrets files are read by the client."""
        _check_url(self.url.strip().rstrip("/"), self.url)
        for name, value in self.headers.items():
            check_header(name, value)
            if name.lower() in FRAMING:
                raise PrometheusError(
                    f"{name} is set by the HTTP client: given here it would break the request's framing "
                    "(a Content-Length made every request wait for a body until --timeout)",
                    key="--header",
                )
        if self.basic_auth_user:
            check_header("user", self.basic_auth_user)
        check_tls_files(self.ca_file, self.client_cert, self.client_key)


def check_tls_files(ca_file: str | None, cert: str | None, key: str | None) -> None:
    """Load the CA bundle and the client certificate with its key once, before any request: the HTTP client reads
    them only at the first https request, where a missing CA file is a bare "OSError" and a key that is not the
    certificate's looks like the server's fault. An encrypted key is refused, never prompted for."""
    import ssl

    if key and not cert:
        raise PrometheusError("a client key needs its certificate: add --client-cert CERT.pem", key="--client-key")
    from footprint.inputs import check_file

    for opt, path in (("--ca-file", ca_file), ("--client-cert", cert), ("--client-key", key)):
        if path:
            try:
                check_file(path, "PEM file", opt)  # missing, a directory, or a named pipe that would block the read
            except FootprintError as exc:
                raise PrometheusError(exc.detail, file=path, key=opt) from None
    opt, path = "--ca-file", ca_file
    try:
        if ca_file:
            ssl.create_default_context(cafile=ca_file)
        if cert:
            opt, path = "--client-cert", cert
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key, password=b"")
    except ssl.SSLError as exc:
        why = (exc.reason or "not PEM").replace("_", " ").lower()
        hint = "a PEM certificate bundle" if opt == "--ca-file" else "a PEM certificate and its unencrypted key"
        raise PrometheusError(f"TLS error: cannot load it ({why}): expected {hint}", file=path, key=opt) from None
    except OSError as exc:
        raise PrometheusError(f"cannot read it ({exc.strerror or exc})", file=path, key=opt) from None


def _secret(path: str, what: str) -> str:
    """A secret from a file: bounded, UTF-8, one printable line (a binary file is refused, never sent)."""
    from footprint.inputs import check_file

    try:
        p = check_file(path, f"{what} file")  # a named pipe would block the read forever
    except FootprintError as exc:
        raise PrometheusError(f"cannot read the {what} file ({exc.detail})", str(path)) from None
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise PrometheusError(f"cannot read the {what} file ({exc.strerror})", str(p)) from None
    if len(raw) > MAX_SECRET_BYTES:
        raise PrometheusError(f"the {what} file is over {MAX_SECRET_BYTES // 1024} KiB: not a {what}", str(p))
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise PrometheusError(f"the {what} file is not UTF-8 text (a binary file?)", str(p)) from None
    if not text:
        raise PrometheusError(f"the {what} file is empty", str(p))
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise PrometheusError(f"the {what} file holds control characters or several lines: expected one line", str(p))
    return text


def check_header(name: str, value: str) -> None:
    """A header an HTTP client can send as given: a token name, a value without CR, LF or NUL, Latin-1."""
    import re

    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name or ""):
        raise PrometheusError(f"invalid header name {name[:60]!r}: letters, digits and -_. only", key="--header")
    bad = [c for c in value if ord(c) < 32 and c != "\t" or ord(c) == 127]
    if bad:
        raise PrometheusError(f"header {name}: control characters (CR, LF, NUL ...) are not allowed in a value", key="--header")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise PrometheusError(f"header {name}: the value is not Latin-1 (HTTP headers cannot carry it)", key="--header") from None


def _check_url(url: str, given: str) -> None:
    from footprint.http import check_url

    try:
        check_url(url)
    except PrometheusError:
        raise
    except FootprintError as exc:
        raise PrometheusError(exc.detail.replace(repr(url[:200]), repr(given[:200])), key="--url") from None


class _Answer:
    """A bounded, fully read HTTP answer."""

    def __init__(self, status: int, body: bytes, reason: str = "") -> None:
        self.status_code, self.body, self.reason = status, body, reason

    def json(self) -> Any:
        return loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class PrometheusClient:
    def __init__(self, config: PromConfig, session: Any = None) -> None:
        from footprint import http

        url = config.url.strip().rstrip("/")
        self.config = config
        self.base = url
        self.session = session or http.session(pool_maxsize=16)  # connections that obey an overall deadline
        self.session.max_redirects = MAX_REDIRECTS
        # answers uncompressed unless asked (--gzip): Prometheus compresses at the cost of its own CPU, three times
        # that of evaluating a fixed-step counter (a day of a node's 8 GPUs at 30 s: 1.5 s of CPU gzipped, 0.5 s
        # plain, measured over 30 days; the same answers), which a LAN carries faster than it compresses them
        enc = "gzip" if config.gzip else "identity"
        self.session.headers.update({"Accept": "application/json", "Accept-Encoding": enc, **config.headers})
        if config.bearer_token_file:
            self.session.headers["Authorization"] = "Bearer " + _secret(config.bearer_token_file, "bearer token")
        if config.basic_auth_user:
            pw = _secret(config.basic_auth_password_file, "password") if config.basic_auth_password_file else ""
            self.session.auth = (config.basic_auth_user, pw)
        # given per request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's own `verify`
        # (psf/requests#3829), which would silently drop --ca-file wherever those are set
        self.verify: bool | str = False if config.insecure_skip_verify else (config.ca_file or True)
        if self.verify is False:  # asked for: said once here, not by urllib3 on each of thousands of requests
            import sys

            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            print(f"footprint: --insecure-skip-verify: the certificate of {url} is not verified", file=sys.stderr)
        if config.client_cert:
            self.session.cert = (config.client_cert, config.client_key) if config.client_key else config.client_cert
        self.requests = 0
        self.warnings: list[str] = []  # what the server flagged (Thanos/Mimir partial responses, Prometheus notes)

    # ---- transport ------------------------------------------------------------------------------
    def _get(self, path: str, params: dict[str, Any], body: list[bytes] | None = None, arrays: bool = False) -> Any:
        """GET (POST for long queries) with retries on connection errors, truncated answers and 5xx; the `data`
        of a success (``body``: the answer as it came is appended to it, for `promql.Kept` to keep as is;
        ``arrays``: a well-formed matrix's values as float arrays, `answers.matrix_data`)."""
        import requests

        from footprint import http

        url = f"{self.base}{path}"
        delay = 0.5
        last = ""
        for attempt in range(self.config.retries + 1):
            try:
                self.requests += 1
                with http.deadline(self._overall_s()) as d:  # one deadline per request: a trickle cannot outlast it
                    try:
                        r = self._send(url, params, sum(len(str(v)) for v in params.values()) > 4000)
                    finally:
                        if d.expired:
                            raise self._slow(url) from None
            except requests.exceptions.SSLError as exc:
                raise PrometheusError(
                    f"TLS error talking to {self.base}: {_tls_reason(exc)} (a private CA: --ca-file CA.pem; a client "
                    "certificate: --client-cert/--client-key)",
                    key="--url",
                ) from None
            except requests.exceptions.ContentDecodingError:
                raise PrometheusError(f"{url}: the answer's compressed body is damaged (bad gzip)", key="--url") from None
            except (
                requests.exceptions.ConnectionError,
                requests.exceptions.Timeout,
                requests.exceptions.ChunkedEncodingError,
            ) as exc:
                last = f"cannot reach {self.base}: {_reason(exc)}"
            except requests.exceptions.RequestException as exc:  # invalid URL, too many redirects, ...
                raise PrometheusError(f"{url}: {_first_line(exc)}", key="--url") from None
            else:
                if r.status_code < 500:
                    data = self._data(r, path, arrays)
                    if body is not None:
                        body.append(r.body)
                    return data
                last = f"{self.base}{path} answered HTTP {r.status_code}: {_prom_message(r)}"
                if _is_limit(r):
                    raise PrometheusLimitError(last, key="--url")
            if attempt < self.config.retries:
                time.sleep(delay)
                delay *= 2
        tries = self.config.retries + 1
        raise PrometheusError(f"{last} (after {tries} attempt{'s' if tries > 1 else ''})", key="--url")

    def _send(self, url: str, params: dict[str, Any], post: bool) -> _Answer:
        """One request, redirects followed by hand (http(s) on the same host only, at most MAX_REDIRECTS), the
        answer read in pieces up to ``max_response_bytes`` decoded and within ``timeout_s`` overall."""
        from urllib.parse import urljoin, urlsplit

        opts = {"timeout": self.config.timeout_s, "verify": self.verify, "allow_redirects": False, "stream": True}
        host = urlsplit(self.base).hostname
        for _ in range(MAX_REDIRECTS + 1):
            send = self.session.post if post else self.session.get
            r = send(url, **({"data": params} if post else {"params": params}), **opts)
            if r.status_code not in (301, 302, 303, 307, 308):
                return self._read(r, url)
            target = urljoin(url, r.headers.get("Location", ""))
            r.close()
            parts = urlsplit(target)
            if parts.scheme not in ("http", "https") or parts.hostname != host:
                raise PrometheusError(
                    f"{url} redirects to {target[:200]!r}: only http(s) on the same host ({host}) is followed", key="--url"
                )
            url, post = target, post and r.status_code in (307, 308)
            params = params if post else ({} if parts.query else params)
        raise PrometheusError(f"{self.base}: more than {MAX_REDIRECTS} redirects (a loop?)", key="--url")

    def _overall_s(self) -> float:
        return max(self.config.timeout_s, 1.0) * 4

    def _slow(self, url: str) -> PrometheusError:
        return PrometheusError(
            f"{url}: no whole answer after {self._overall_s():g} s (4 x --timeout; a slow server?): raise --timeout or "
            "narrow the query",
            key="--url",
        )

    def _read(self, r: Any, url: str) -> _Answer:
        cap = self.config.max_response_bytes
        declared = r.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap and "gzip" not in r.headers.get("Content-Encoding", ""):
            r.close()
            raise PrometheusError(_too_big(url, cap), key="--url")
        parts, size = [], 0
        try:
            for piece in r.iter_content(1 << 16):
                size += len(piece)
                if size > cap:
                    raise PrometheusError(_too_big(url, cap), key="--url")
                parts.append(piece)
        finally:
            r.close()
        return _Answer(r.status_code, b"".join(parts), r.reason or "")

    def _data(self, r: Any, path: str, arrays: bool = False) -> Any:
        if arrays and r.status_code == 200:
            data = matrix_data(r.body)
            if data is not None:
                return data
        if r.status_code in (401, 403):
            raise PrometheusError(
                f"{self.base}{path}: HTTP {r.status_code} ({_prom_message(r)}): check --bearer-token-file / --basic-auth-user",
                key="--url",
            )
        if r.status_code == 404:
            raise PrometheusError(
                f"{self.base}{path}: HTTP 404: not a Prometheus API here (give the server's base URL, e.g. "
                "http://prometheus:9090, or Mimir's http://mimir/prometheus)",
                key="--url",
            )
        try:
            body = r.json()
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            raise PrometheusError(
                f"{self.base}{path}: HTTP {r.status_code}, not a JSON answer (is this a Prometheus server?)", key="--url"
            ) from None
        if r.status_code >= 400 or body.get("status") != "success":
            kind, why = _clean(body.get("errorType", "error")), _clean(body.get("error", body))
            msg = f"{self.base}{path}: HTTP {r.status_code}, {kind}: {why}"
            raise (PrometheusLimitError if _is_limit(r) else PrometheusError)(msg, key="--url")
        warns = body.get("warnings")
        if isinstance(warns, list) and warns and len(self.warnings) < 50:
            self.warnings += [_clean(x, 200) for x in warns[:5] if _clean(x, 200) not in self.warnings]
        return body.get("data")

    # ---- API ------------------------------------------------------------------------------------
    def query(self, expr: str, at: float | None = None, body: list[bytes] | None = None, arrays: bool = False) -> dict[str, Any]:
        """Instant query: ``{"resultType", "result"}``; a range selector (``m[1h]``) returns raw samples (``arrays``:
        as float arrays where well formed, `answers.matrix_data`)."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params, body, arrays)

    def query_range(
        self, expr: str, start: float, end: float, step_s: float, body: list[bytes] | None = None, arrays: bool = False
    ) -> dict[str, Any]:
        """Range query evaluated every ``step_s`` seconds from start to end (``arrays``: see `query`)."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        return self._get("/api/v1/query_range", params, body, arrays)

    def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        """Label sets of the series matching a selector in the window (reads the index, not the samples)."""
        return self._get("/api/v1/series", {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"}) or []

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """Values of a label among the series matching a selector in the window (cheap: no samples read)."""
        params = {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"}
        return self._get(f"/api/v1/label/{label}/values", params) or []

    def metric_names(self) -> list[str]:
        return self._get("/api/v1/label/__name__/values", {}) or []

    def buildinfo(self) -> dict[str, Any]:
        return self._get("/api/v1/status/buildinfo", {}) or {}


def _tls_reason(exc: BaseException) -> str:
    """What OpenSSL said ("certificate verify failed: unable to get local issuer certificate"), not requests'
    wrapping of it."""
    import re

    m = re.search(r"\[SSL: [A-Z_]+\] ([^'\"]+?)(?: \(_ssl\.c:\d+\))?['\")]", str(exc))
    return m.group(1) if m else _first_line(exc)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for hint in ("Connection refused", "Name or service not known", "timed out", "No route to host", "nodename nor servname"):
        if hint.lower() in text.lower():
            return hint.lower()
    return _first_line(exc)


def _prom_message(r: Any) -> str:
    try:
        body = r.json()
        return _clean(body.get("error") if isinstance(body, dict) else body)
    except (ValueError, RecursionError):
        return _clean((r.text or r.reason or "").strip()) or "no message"


def _clean(text: Any, limit: int = 300) -> str:
    """A server's text as one printable line (control characters and terminal escapes dropped), bounded."""
    s = str(text)[: limit * 4]
    return "".join(c if c.isprintable() else " " for c in s).strip()[:limit]


def _is_limit(r: Any) -> bool:
    return r.status_code in (400, 413, 422, 503) and any(h in _prom_message(r).lower() for h in LIMIT_HINTS)


def _too_big(url: str, cap: int) -> str:
    return (
        f"{url}: the answer is over {cap / 2**20:g} MiB (--max-response-mb): narrow the window or --selector, "
        "or let the server aggregate (the default; not --exact)"
    )
