"""`footprint dashboard`: start the Streamlit app on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command

    d = command(
        sub,
        "dashboard",
        "open the Streamlit dashboard (scenario explorer, compare, runs, hardware, kernels)",
        "footprint dashboard                  # the newest run under ./runs, else the shipped scenario\n"
        "footprint dashboard runs/llama-ft     # opens on that run\n"
        "footprint dashboard --port 8600 --headless",
        handler=dashboard,
    )
    d.add_argument(
        "run",
        nargs="?",
        help="a run directory (with run.json) to open on; default: the newest run under ./runs, else the explorer",
    )
    d.add_argument("--port", type=number_arg(int, 1, 65535), default=8501, help="port to listen on (default 8501)")
    d.add_argument("--headless", action="store_true", help="do not open a browser")
    d.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default: this machine only; the Runs page reads local paths)",
    )


def _check_address(address: str, port: int) -> None:
    """The interface and port Streamlit will listen on, tried here first: a name that resolves to nothing, an
    address not on this machine or a port in use is one line, not Streamlit's traceback."""
    import socket

    from footprint.errors import FootprintError
    from footprint.escaping import shown

    where = f"{shown(address[:100])}:{port}"
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
    except (OSError, UnicodeError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)[:100] or type(exc).__name__
        raise FootprintError(f"cannot listen on {where} ({why})", key="--address") from None


def dashboard(args: argparse.Namespace) -> int:
    import importlib.util

    from footprint.errors import FootprintError

    if importlib.util.find_spec("streamlit") is None:
        raise FootprintError("the dashboard needs streamlit: pip install 'footprint[dashboard]'", key="dashboard")
    _check_address(args.address, args.port)
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.port",
        str(args.port),
        "--server.address",
        args.address,
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]
    if args.headless:
        cmd += ["--server.headless", "true"]
    opening = start_on(args.run)
    if opening:
        cmd += ["--", *opening]
        print(f"footprint: the dashboard opens on the run {opening[1]}", file=sys.stderr, flush=True)
    return serve(cmd)


def start_on(run: str | None, runs: Path = Path("runs")) -> list[str]:
    """The app's own arguments (after `--`) that open it on a run: ``run`` given (a run directory, else one clear
    error), or the newest run under ./runs (by its run.json's time), else none (the explorer's shipped scenario)."""
    from footprint.errors import FootprintError

    if run is not None:
        path = Path(run).expanduser()
        if not (path / "run.json").is_file():
            raise FootprintError("not a run directory (no run.json in it)", run, "RUN")
        return ["--run", str(path.resolve())]
    newest = newest_run(runs)
    return ["--run", newest.name, "--runs", str(runs.resolve())] if newest is not None else []


def newest_run(runs: Path) -> Path | None:
    """The run directory under ``runs`` whose run.json was written last (None: no run there)."""
    found = []
    try:
        for p in runs.iterdir():
            try:
                found.append(((p / "run.json").stat().st_mtime, p.name, p))
            except OSError:
                continue
    except OSError:
        return None
    return max(found)[2] if found else None


def serve(cmd: list[str], grace_s: float = 10.0) -> int:
    """Run the server as a child that ends with us: SIGTERM and SIGHUP to `footprint dashboard` are passed on (a
    service manager's stop, a closed terminal), and a server still up when we leave gets ``grace_s`` to stop before
    it is killed. With ``subprocess.call`` a SIGTERM ended us and left Streamlit holding the port."""
    import signal
    import subprocess

    proc = subprocess.Popen(cmd)

    def forward(signum: int, frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                code = proc.wait()
                return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says it
            except KeyboardInterrupt:
                continue  # Ctrl-C reached the server too (same process group): wait for it to stop
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
