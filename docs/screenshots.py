"""Regenerate the screenshots in docs/ from the current code: reports and the dashboard in headless Chromium.

    python docs/screenshots.py            # from the repository root; needs Chromium and the dev extra (websockets)

- docs/report.png           `footprint report scenarios/bloom-176b.yaml`, its first screen at 1,200 px
- docs/training-report.png  `footprint report examples/runs/two-gpus`: the training story and the measured run
- docs/dashboard.png        the dashboard's explorer after the one-click what-if (GPT-4, MFU 50 %, 5 years, POL), 1,400 px
- docs/dashboard-runs.png   the Runs page on examples/runs/two-gpus (a link: ?run=examples/runs/two-gpus), power panels

The dashboard runs as `footprint dashboard` runs it, on 127.0.0.1 (the repository's .streamlit/config.toml applies).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from footprint.reports.browser import Browser

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MAIN = "[data-testid=stMain]"


def _crop(png: Path, height: int) -> None:
    from PIL import Image

    img = Image.open(png)
    img.crop((0, 0, img.size[0], min(height, img.size[1]))).save(png, optimize=True)


def report_shots(tmp: Path) -> None:
    from footprint.api import write_report

    bloom = write_report([str(REPO / "scenarios" / "bloom-176b.yaml")], str(tmp / "bloom.html"), quiet=True)
    run = write_report([str(REPO / "examples" / "runs" / "two-gpus")], str(tmp / "run.html"), quiet=True)
    with Browser(width=1200, height=1500) as b:
        b.open(bloom.as_uri(), ready="document.readyState === 'complete'")
        b.screenshot(DOCS / "report.png")
        b.resize(1200, 1100)
        b.open(run.as_uri(), ready="document.readyState === 'complete'")
        y = b.evaluate("[...document.querySelectorAll('h2')].find(h => h.textContent.startsWith('Measured run')).offsetTop")
        b.screenshot(DOCS / "training-report.png", full_page=True)
        _crop(DOCS / "training-report.png", 1100)
        b.evaluate(f"window.scrollTo(0, {int(y) - 10})")
        b.screenshot(DOCS / "training-report-power.png")


def _server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.port", str(port), "--server.headless", "true"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the dashboard did not start")


def dashboard_shots() -> None:
    proc, url = _server()
    try:
        with Browser(width=1400, height=1100) as b:
            b.open(
                f"{url}?scenario=gpt-4-falk.yaml&mfu=0.5&lifetime_years=5&grid=POL", ready=f"document.querySelector('{MAIN} h1')"
            )
            b.wait_for("document.querySelectorAll('[data-testid=stMetric]').length >= 7")
            b.wait_for("document.querySelector('[data-testid=stTable]') !== null")
            time.sleep(2)  # charts
            b.screenshot(DOCS / "dashboard.png")
            b.open(f"{url}?run=examples/runs/two-gpus", ready=f"document.querySelector('{MAIN} h1')")
            b.wait_for("document.querySelectorAll('[data-testid=stMetric]').length >= 4")
            b.evaluate("[...document.querySelectorAll('[role=tab]')].find(t => t.textContent.includes('Power')).click()")
            time.sleep(3)
            b.screenshot(DOCS / "dashboard-runs.png", full_page=True)
            _crop(DOCS / "dashboard-runs.png", 1500)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report_shots(Path(tmp))
    dashboard_shots()
    print("wrote " + ", ".join(str(p.relative_to(REPO)) for p in sorted(DOCS.glob("*.png"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
