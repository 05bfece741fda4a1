"""Run a sampling child process and kill -9 it mid-run (the crash tests of the journal and its segments)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sampler_child(period_s: float, retention: str = "None") -> str:
    """A child that samples the (fake) NVML into the journal given as its argument until it is killed."""
    return (
        "import sys, time\n"
        "from meters.nvml import NvmlMeter\n"
        "from meters.sampler import Sampler\n"
        "from meters.segments import Retention\n"
        f"s = Sampler([NvmlMeter()], period_s={period_s}, journal_path=sys.argv[1], retention={retention}).start()\n"
        "print('started', time.monotonic(), flush=True)\n"
        "time.sleep(60)\n"
    )


def kill_after(code: str, path: Path, seconds: float, fake: str = "2xA100-SXM4-40GB@300W") -> tuple[float, float, int, int]:
    """Start `code` (it prints "started <time.monotonic()>" once sampling) with `path` as argument on the fake
    NVML, SIGKILL it `seconds` later: (start time, kill time, return code)."""
    env = {
        **os.environ,
        "FOOTPRINT_FAKE_NVML": fake,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("started"), line
        t_started = float(line.split()[1])
        time.sleep(seconds)
        t_kill = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return t_started, t_kill, proc.returncode, proc.pid
