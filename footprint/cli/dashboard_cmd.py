"""`footprint dashboard`: start the Streamlit app on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.app import command

    d = command(
        sub,
        "dashboard",
        "open the Streamlit dashboard (scenario explorer, compare, runs, hardware, kernels)",
        "footprint dashboard\nfootprint dashboard --port 8600 --headless",
        handler=dashboard,
    )
    d.add_argument("--port", type=number_arg(int, 1, 65535), default=8501, help="port to listen on (default 8501)")
    d.add_argument("--headless", action="store_true", help="do not open a browser")
    d.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default: this machine only; the Runs page reads local paths)",
    )


def dashboard(args: argparse.Namespace) -> int:
    import importlib.util
    import subprocess

    from footprint.errors import FootprintError

    if importlib.util.find_spec("streamlit") is None:
        raise FootprintError("the dashboard needs streamlit: pip install 'footprint[dashboard]'", key="dashboard")
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
    return subprocess.call(cmd)
