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
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 3


class PrometheusError(FootprintError):
    """The server could not be reached or refused the query."""


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


def _secret(path: str, what: str) -> str:
    p = Path(path)
    try:
        text = p.read_text().strip()
    except OSError as exc:
        raise PrometheusError(f"cannot read the {what} file ({exc.strerror})", str(p)) from None
    if not text:
        raise PrometheusError(f"the {what} file is empty", str(p))
    return text


class PrometheusClient:
    def __init__(self, config: PromConfig, session: Any = None) -> None:
        import requests

        url = config.url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise PrometheusError(f"expected an http:// or https:// URL, got {config.url!r}", key="--url")
        self.config = config
        self.base = url
        self.session = session or requests.Session()
        self.session.headers.update({"Accept": "application/json", **config.headers})
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

    # ---- transport ------------------------------------------------------------------------------
    def _get(self, path: str, params: dict[str, Any]) -> Any:
        """GET (POST for long queries) with retries on connection errors and 5xx; the `data` of a success."""
        import requests

        url = f"{self.base}{path}"
        delay = 0.5
        last = ""
        for attempt in range(self.config.retries + 1):
            try:
                self.requests += 1
                opts = {"timeout": self.config.timeout_s, "verify": self.verify}
                if sum(len(str(v)) for v in params.values()) > 4000:
                    r = self.session.post(url, data=params, **opts)
                else:
                    r = self.session.get(url, params=params, **opts)
            except requests.exceptions.SSLError as exc:
                raise PrometheusError(
                    f"TLS error talking to {self.base}: {_tls_reason(exc)} (a private CA: --ca-file CA.pem; a client "
                    "certificate: --client-cert/--client-key)",
                    key="--url",
                ) from None
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                last = f"cannot reach {self.base}: {_reason(exc)}"
            else:
                if r.status_code < 500:
                    return self._data(r, path)
                last = f"{self.base}{path} answered HTTP {r.status_code}: {_prom_message(r)}"
            if attempt < self.config.retries:
                time.sleep(delay)
                delay *= 2
        tries = self.config.retries + 1
        raise PrometheusError(f"{last} (after {tries} attempt{'s' if tries > 1 else ''})", key="--url")

    def _data(self, r: Any, path: str) -> Any:
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
            raise PrometheusError(
                f"{self.base}{path}: HTTP {r.status_code}, {body.get('errorType', 'error')}: {body.get('error', body)}",
                key="--url",
            )
        return body.get("data")

    # ---- API ------------------------------------------------------------------------------------
    def query(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """Instant query: ``{"resultType", "result"}``; a range selector (``m[1h]``) returns raw samples."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params)

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> dict[str, Any]:
        """Range query evaluated every ``step_s`` seconds from start to end."""
        return self._get(
            "/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        )

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
        return str(body.get("error") if isinstance(body, dict) else body)[:300]
    except (ValueError, RecursionError):
        return (r.text or r.reason or "").strip()[:200] or "no message"
