"""A real Prometheus on 127.0.0.1 over a TSDB backfilled from OpenMetrics (tests, benchmark, README demo).

`backfill` runs ``promtool tsdb create-blocks-from openmetrics``; `serve` starts ``prometheus`` on a free
port of 127.0.0.1 with that TSDB and no scrape target (or the ``scrape`` targets given, e.g. a tracker's live
endpoint), optionally behind TLS and basic auth as deployments run it (Prometheus' ``--web.config.file``),
waits until it is ready and stops it on exit.
Debian's ``prometheus`` package provides both binaries (``apt-get install prometheus``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

MAX_BLOCK = "744h"  # one month per block: promtool re-reads the input once per block


def missing() -> str | None:
    """Why a local Prometheus cannot run here (None when it can)."""
    absent = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if absent:
        return f"{' and '.join(absent)} not installed (Debian: apt-get install prometheus; .ci/run installs it)"
    return None


def backfill(openmetrics: str | Path, tsdb: str | Path, timeout_s: float = 3600) -> Path:
    """Blocks in ``tsdb`` from an OpenMetrics file (``# EOF``-terminated, timestamps in seconds)."""
    out = Path(tsdb)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        "promtool",
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        f"--max-block-duration={MAX_BLOCK}",
        str(openmetrics),
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"promtool failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}")
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def web_config(path: Path, tls: tuple[str, str] | None, users: dict[str, str] | None) -> Path:
    """Prometheus' web configuration: ``tls`` (certificate, key files) and basic-auth ``users`` (name -> bcrypt
    hash). Written as JSON, which is YAML."""
    cfg: dict[str, object] = {}
    if tls:
        cfg["tls_server_config"] = {"cert_file": str(tls[0]), "key_file": str(tls[1])}
    if users:
        cfg["basic_auth_users"] = dict(users)
    path.write_text(json.dumps(cfg))
    return path


@contextlib.contextmanager
def serve(
    tsdb: str | Path,
    port: int | None = None,
    timeout_s: float = 60,
    scrape: list[str] | None = None,
    every: str = "1s",
    tls: tuple[str, str] | None = None,
    users: dict[str, str] | None = None,
    extra: list[str] | None = None,
) -> Iterator[str]:
    """Prometheus over ``tsdb`` on 127.0.0.1; yields its base URL (https:// with ``tls``). ``scrape``: host:port
    targets it scrapes (job "footprint") every ``every``; ``tls``, ``users``: see `web_config`; ``extra``: more flags
    (e.g. ``--query.max-samples=2000``)."""
    tsdb = Path(tsdb)
    port = port or free_port()
    config = tsdb.parent / f"{tsdb.name}.prometheus.yml"
    if scrape:
        targets = ", ".join(f"'{t}'" for t in scrape)
        jobs = f"scrape_configs:\n  - job_name: footprint\n    static_configs:\n      - targets: [{targets}]\n"
        config.write_text(f"global:\n  scrape_interval: {every}\n{jobs}")
    else:
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    log = (tsdb.parent / f"{tsdb.name}.prometheus.log").open("w")
    cmd = [
        "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        *(extra or []),
    ]
    if tls or users:
        cmd.append(f"--web.config.file={web_config(tsdb.parent / f'{tsdb.name}.web.yml', tls, users)}")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    probe = None
    if tls:  # our own server, probed for readiness only (no data read): its certificate is not checked here
        probe = ssl.create_default_context()
        probe.check_hostname = False
        probe.verify_mode = ssl.CERT_NONE
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2, context=probe) as r:
                    if r.status == 200:
                        break
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # up, behind basic auth
                    break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready after {timeout_s:g} s; see {log.name}")
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
