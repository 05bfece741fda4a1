"""`footprint dashboard`: start the Streamlit app on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("dashboard", help="open the Streamlit dashboard (streamlit run dashboard/app.py)")
    d.add_argument("--port", type=int, default=8501)
    d.add_argument("--headless", action="store_true", help="do not open a browser")
    d.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default: this machine only; the Runs page reads local paths)",
    )
    d.set_defaults(handler=dashboard)


def dashboard(args: argparse.Namespace) -> int:
    import importlib.util
    import subprocess

    from footprint.errors import FootprintError

    if importlib.util.find_spec("streamlit") is None:
        raise FootprintError("the dashboard needs streamlit: pip install streamlit", key="dashboard")
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
    ]
    if args.headless:
        cmd += ["--server.headless", "true"]
    return subprocess.call(cmd)
