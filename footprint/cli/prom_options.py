"""What every command that reads a Prometheus server (Thanos, Mimir) shares: its connection options, the
`PromConfig` they build, and the parsers of the window (``--start``, ``--end``, durations).

One list, so that `footprint fleet import prometheus|slurm` and `footprint serving import prometheus` offer the
same ways in (TLS, client certificates, tokens, basic auth, headers, timeouts, answer size) and no command lacks
one the other has.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from datetime import UTC, datetime
from typing import Any

from footprint.errors import FootprintError
from footprint.inputs import number_arg

DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_DURATION_S = 100 * 365.25 * 86400  # a century: longer is a typo (or 1e400 digits that float() makes inf)
MAX_TIME_S = 253402300799.0  # 9999-12-31T23:59:59Z, the last time ISO 8601 and Prometheus can write


def add_connection_args(g: Any, required: bool) -> None:
    """The server's URL, ``--selector``, and every option of the HTTP client (`footprint.fleet.prometheus`)."""
    g.add_argument("--url", required=required, help="base URL, e.g. http://prometheus:9090 (Mimir: http://mimir/prometheus)")
    g.add_argument("--selector", default="", help='extra label matchers for every query, e.g. cluster="a"')
    g.add_argument(
        "--max-response-mb", type=number_arg(float, 1, 65536), default=256, help="largest answer accepted (default 256)"
    )
    g.add_argument(
        "--timeout", type=number_arg(float, 0, 86_400, lo_open=True), default=60.0, help="seconds per request (default 60)"
    )
    g.add_argument(
        "--retries", type=number_arg(int, 0, 100), default=3, help="retries on connection errors and HTTP 5xx (default 3)"
    )
    g.add_argument("--bearer-token-file", help="file holding a bearer token")
    g.add_argument("--basic-auth-user", help="basic-auth user (password from --basic-auth-password-file)")
    g.add_argument("--basic-auth-password-file", help="file holding the basic-auth password")
    g.add_argument("--ca-file", help="CA bundle for https")
    g.add_argument("--client-cert", help="client certificate (PEM) for mutual TLS")
    g.add_argument("--client-key", help="its key")
    g.add_argument("--insecure-skip-verify", action="store_true", help="do not verify the server's certificate")
    g.add_argument("--header", action="append", default=[], metavar="NAME: VALUE", help="extra header, e.g. 'X-Scope-OrgID: t1'")
    g.add_argument("--gzip", action="store_true", help="ask for compressed answers (a slow link; costs the server CPU)")


def prom_config(args: argparse.Namespace) -> Any:
    """The client's configuration from the options `add_connection_args` added."""
    from footprint.fleet.prometheus import PromConfig

    return PromConfig(  # checked as it is made: before any slow step (sacct, the ledger)
        url=args.url,
        timeout_s=args.timeout,
        retries=args.retries,
        bearer_token_file=args.bearer_token_file,
        basic_auth_user=args.basic_auth_user,
        basic_auth_password_file=args.basic_auth_password_file,
        ca_file=args.ca_file,
        client_cert=args.client_cert,
        client_key=args.client_key,
        insecure_skip_verify=args.insecure_skip_verify,
        headers=headers(args.header),
        max_response_bytes=int(args.max_response_mb * 2**20),
        gzip=args.gzip,
    )


def headers(items: list[str]) -> dict[str, str]:
    """``--header 'Name: value'`` options as a mapping (the PromConfig checks each)."""
    out = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise FootprintError(f"expected 'Name: value', got {item!r}", key="--header")
        out[name.strip()] = value.strip()
    return out


def parse_duration(text: str, key: str) -> float:
    """A positive duration of at most a century, in seconds (``30s``, ``5m``, ``6h``, ``1d``, ``2w``)."""
    m = DURATION.match(str(text).strip())
    seconds = float(m.group(1)) * UNITS_S[m.group(2)] if m else 0.0
    if not 0 < seconds <= MAX_DURATION_S:
        raise FootprintError(
            f"expected a duration such as 30s, 5m, 6h or 1d (at most 100 years), got {str(text)[:60]!r}", key=key
        )
    return seconds


def add_window_args(p: argparse.ArgumentParser, first: str | None = None, last: str | None = None) -> None:
    """``--start`` and ``--end`` in the forms `parse_when` reads: required, or optional where ``first``/``last`` say
    what the window defaults to."""
    start = "window start: ISO 8601 (UTC unless it says), Unix seconds, or now-7d"
    end = "window end: the same forms, or now"
    p.add_argument("--start", required=first is None, help=start + (f" (default: {first})" if first else ""))
    p.add_argument("--end", required=last is None, help=end + (f" (default: {last})" if last else ""))


def window_args(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """``--start`` and ``--end`` as Unix seconds (None where an optional one was not given)."""
    start = parse_when(args.start, "--start") if args.start else None
    end = parse_when(args.end, "--end") if args.end else None
    if start is not None and end is not None and end <= start:
        raise FootprintError(f"--end ({args.end}) is not after --start ({args.start}): nothing to import", key="--start/--end")
    return start, end


def parse_when(text: str, key: str, now: float | None = None) -> float:
    """ISO 8601 (UTC unless it has an offset), Unix seconds, ``now`` or ``now-7d``: a time from 1970 to 9999."""
    t = str(text).strip()
    now = time.time() if now is None else now
    m = re.fullmatch(r"now(?:-(\d+(?:\.\d+)?[smhdw]))?", t)
    if m:
        when = now - (parse_duration(m.group(1), key) if m.group(1) else 0.0)
    elif re.fullmatch(r"\d+(?:\.\d+)?", t):
        when = float(t)
    else:
        try:
            dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
            when = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError):
            when = math.nan
    if not 0 <= when <= MAX_TIME_S:  # nan (unparsed) too
        raise FootprintError(
            f"expected a time from 1970 to 9999 (2025-03-01T00:00:00Z, Unix seconds, now or now-7d), got {str(text)[:60]!r}",
            key=key,
        )
    return when
