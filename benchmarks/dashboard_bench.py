"""Dashboard responsiveness: the rerun after a slider change, timed with Streamlit's AppTest.

Each timed rerun moves the MFU slider to a value not seen before, so the assessment is computed
(no cache hit); the median over the runs is what a user waits for after moving a slider, without
the browser's drawing. Also: the explorer's one-move what-if, a PUE change on a scenario with a
stated MFU, and the same with 10,000 Monte Carlo samples.

`--cold N` also measures what a newcomer waits for on a first visit: N times, a fresh server (`streamlit run`,
as `footprint dashboard`) with an empty footprint cache and no compiled bytecode (PYTHONPYCACHEPREFIX set to an
empty folder, so every module is compiled again), opened in headless Chromium at 1,400 px: seconds from the
navigation to the first content (the page title) and to the headline metrics.

Run: python benchmarks/dashboard_bench.py [--runs 15] [--cold 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

from footprint.lca import DEFAULT_SAMPLES

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "dashboard" / "app.py")


def _rerun(at, key: str, values: list[float]) -> list[float]:
    times = []
    for v in values:
        at.slider(key=key).set_value(v)
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
    return times


def _report(label: str, times: list[float]) -> None:
    ms = sorted(t * 1000 for t in times)
    print(f"{label}: median {statistics.median(ms):.0f} ms (min {ms[0]:.0f}, max {ms[-1]:.0f}, {len(ms)} reruns)")


def cold_loads(n: int) -> None:
    """First visits to a fresh server in Chromium: navigation -> title, -> headline metrics (median, min, max)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import tempfile
    import urllib.request

    from footprint.reports.browser import Browser

    firsts, fulls = [], []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pyc, socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            sock.close()
            env = dict(os.environ, FOOTPRINT_CACHE_DIR=cache, PYTHONPYCACHEPREFIX=pyc)
            cmd = [sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port), "--server.headless", "true"]
            srv = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            try:
                for _ in range(600):
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                        break
                    except OSError:
                        time.sleep(0.1)
                with Browser(width=1400, height=1000) as b:
                    first = b.open(f"http://127.0.0.1:{port}/", ready="document.querySelector('[data-testid=stMain] h1')")
                    full = first + b.wait_for("document.querySelectorAll('[data-testid=stMetric]').length >= 7", 120)
                firsts.append(first)
                fulls.append(full)
            finally:
                os.killpg(srv.pid, signal.SIGTERM)
                srv.wait(timeout=10)
    for label, xs in (("first content (page title)", firsts), ("headline metrics", fulls)):
        xs = sorted(xs)
        print(f"cold first visit, {label}: median {statistics.median(xs):.1f} s (min {xs[0]:.1f}, max {xs[-1]:.1f}, {n} servers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cold", type=int, default=0, help="also time N cold first visits in Chromium (fresh servers)")
    args = parser.parse_args()
    if args.cold:
        cold_loads(args.cold)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    from streamlit.testing.v1 import AppTest

    t0 = time.perf_counter()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    print(
        f"first run in a new process (imports, database, zone list, first assessment): {(time.perf_counter() - t0) * 1000:.0f} ms"
    )
    assert not at.exception, at.exception

    n = args.runs
    mfus = [round(0.30 + 0.01 * i, 2) for i in range(n)]  # BLOOM: MFU restated as derived FLOPs + MFU
    _report(f"BLOOM-176B, MFU slider moved ({DEFAULT_SAMPLES:,} Monte Carlo samples, the default)", _rerun(at, "ex_mfu", mfus))
    _report("BLOOM-176B, MFU slider back to a value seen before (cached assessment)", _rerun(at, "ex_mfu", mfus[:5]))

    box = at.selectbox(key="ex_scenario")
    box.set_value(next(o for o in box.options if o.endswith("(gpt-4-falk.yaml)"))).run()
    times = []
    for _ in range(min(n, 5)):
        at.button(key="btn_reset").click().run()
        at.button(key="btn_one_move").click()
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    _report("GPT-4, one-move what-if (MFU 50 %, 5 years, POL) from the base (cached after the first)", times)
    pues = [round(1.05 + 0.01 * i, 2) for i in range(n)]
    _report("GPT-4, PUE slider moved", _rerun(at, "ex_pue", pues))

    at.toggle(key="mc_more").set_value(True).run()
    mfus = [round(0.60 + 0.01 * i, 2) for i in range(min(n, 8))]
    _report("GPT-4, MFU slider moved with 10,000 Monte Carlo samples", _rerun(at, "ex_mfu", mfus))


if __name__ == "__main__":
    main()
