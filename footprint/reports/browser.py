"""Headless Chromium: the PDF printer of `footprint report`, and a DevTools session for screenshots.

`html_to_pdf` needs only the Chromium binary (Debian's `chromium`; `footprint doctor` says whether it is
there). `Browser` drives Chromium over the DevTools protocol to load a page at a given window width, wait
for it, measure it (any JavaScript expression) and capture it: the tests use it to check what a newcomer
sees (no sideways scrolling at 1,400 px, no blank first load), and `docs/screenshots.py` regenerates the
README's screenshots with it. It needs the `websockets` package (in the `dev` extra), imported lazily.
Only pages on 127.0.0.1 or local files are opened; nothing is fetched from the network.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--hide-scrollbars",
)


def find_chromium() -> str | None:
    """The headless browser that prints PDFs (Debian's chromium, or Chrome), if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def html_to_pdf(html_text: str, out: Path) -> None:
    """Print an HTML document to a PDF with headless Chromium (A4, no header or footer)."""
    browser = find_chromium()
    if not browser:
        raise FootprintError("PDF output needs Chromium (Debian package chromium); write .html and print it instead", str(out))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "report.html"
        src.write_text(html_text)
        cmd = [
            browser,
            *FLAGS,
            f"--user-data-dir={tmp}/profile",
            "--no-pdf-header-footer",
            f"--print-to-pdf={out.resolve()}",
            src.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or not out.exists() or out.stat().st_size == 0:
            raise FootprintError(f"Chromium could not print the PDF: {proc.stderr.strip()[-300:]}", str(out))


class Browser:
    """One headless Chromium with one page, driven over the DevTools protocol (a context manager).

    >>> with Browser(width=1400, height=1000) as b:          # doctest: +SKIP
    ...     b.open("http://127.0.0.1:8501", ready="document.querySelector('h1') !== null")
    ...     b.evaluate("document.body.scrollWidth")
    ...     b.screenshot(Path("page.png"))
    """

    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 60.0) -> None:
        self.width, self.height, self.timeout_s = width, height, timeout_s
        self._ids = itertools.count(1)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: Any = None
        self._conn: Any = None

    # ---- life cycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Browser:
        from websockets.sync.client import connect

        binary = find_chromium()
        if not binary:
            raise FootprintError("needs Chromium (Debian package chromium)", "chromium")
        self._tmp = tempfile.TemporaryDirectory(prefix="footprint-chromium-", ignore_cleanup_errors=True)
        profile = Path(self._tmp.name)
        self._proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--window-size={self.width},{self.height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        port = self._port(profile / "DevToolsActivePort")
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(p for p in pages if p.get("type") == "page")
        self._conn = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self._ws = self._conn.__enter__()
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.resize(self.width, self.height)
        return self

    def _port(self, active: Path) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(active.read_text().splitlines()[0])
            if self._proc is not None and self._proc.poll() is not None:
                break
            time.sleep(0.05)
        raise FootprintError("Chromium did not open its DevTools port", "chromium")

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._conn.__exit__(None, None, None)
        if self._proc is not None:  # Chromium and its helper processes: the session it was started in
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
        if self._tmp is not None:
            self._tmp.cleanup()

    # ---- protocol -----------------------------------------------------------------------------------
    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; returns its result (events that arrive meanwhile are dropped)."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            msg = json.loads(self._ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise FootprintError(f"{method}: {msg['error'].get('message')}", "chromium")
                return msg.get("result", {})

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise FootprintError(f"JavaScript error: {res['exceptionDetails'].get('text')}: {expression[:80]}", "chromium")
        return res.get("result", {}).get("value")

    def open(self, url: str, ready: str | None = None, timeout_s: float | None = None) -> float:
        """Load `url` and wait until the JavaScript condition `ready` holds; returns the seconds it took."""
        t0 = time.monotonic()
        self.send("Page.navigate", url=url)
        if ready:
            self.wait_for(ready, timeout_s)
        return time.monotonic() - t0

    def wait_for(self, condition: str, timeout_s: float | None = None, poll_s: float = 0.1) -> float:
        """Poll a JavaScript condition until it is true; returns the seconds waited (raises on timeout)."""
        t0 = time.monotonic()
        limit = t0 + (timeout_s or self.timeout_s)
        while True:
            with contextlib.suppress(FootprintError):  # the page may be between documents
                if self.evaluate(f"Boolean({condition})"):
                    return time.monotonic() - t0
            if time.monotonic() > limit:
                raise FootprintError(
                    f"timed out after {timeout_s or self.timeout_s:g} s waiting for {condition[:120]}", "chromium"
                )
            time.sleep(poll_s)

    def content_height(self) -> int:
        """The height of the page's content, also where an inner element scrolls (Streamlit's main area does)."""
        js = (
            "Math.ceil(Math.max(document.documentElement.scrollHeight, ...[...document.querySelectorAll('section, main, div')]"
            ".filter(e => e.scrollHeight > e.clientHeight + 1 && getComputedStyle(e).overflowY !== 'visible')"
            ".map(e => e.scrollHeight + e.getBoundingClientRect().top)))"
        )
        return int(self.evaluate(js) or self.height)

    def screenshot(self, out: Path, full_page: bool = False, settle_s: float = 0.5) -> Path:
        """A PNG of the viewport, or of the whole content (the viewport is stretched to the content's height for
        the capture, so inner scrolling areas are drawn whole, then restored)."""
        width, height = self.width, self.height
        if full_page:
            self.resize(width, max(height, self.content_height()))
            time.sleep(settle_s)  # let the page lay out and draw at the new height
        try:
            data = self.send("Page.captureScreenshot", format="png")["data"]
        finally:
            if full_page:
                self.resize(width, height)
        from footprint.outputs import write_bytes

        write_bytes(out, base64.b64decode(data))
        return out
