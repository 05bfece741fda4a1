"""The fuzz suite's harness: run the CLI in a forked child with a deadline and a memory cap, and judge it.

`run_cli(argv)` forks the test process (footprint, pandas, pyarrow and the LCA database already loaded:
a case costs milliseconds, not an interpreter start), runs `footprint.cli.main(argv)` in the child with
an address-space cap and an alarm, and returns what a user would see: the exit code, stdout, stderr,
the child's peak memory growth, and whether it hung or blew its memory. `verdict` says what is wrong
with an outcome under the input contract (README "Promises"): a traceback, a hang, memory out of
bounds, an exit code other than 0 or 2, an error that is not one line, or nan/inf in the output.
"""

from __future__ import annotations

import io
import json
import math
import os
import resource
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT_S = 30.0  # per case: a hang is any case past this (the slowest honest case takes ~2 s)
MEMORY_MB = 1536  # address space a case may add: an alias bomb or --samples 1e8 needs gigabytes


@dataclass
class Outcome:
    argv: list[str]
    code: int | None
    out: str
    err: str
    seconds: float
    grew_mb: float
    hung: bool = False
    killed: str | None = None  # why the child died, if it did not return

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err or "Traceback (most recent call last)" in self.out


def _warm() -> None:
    """Load what every case needs once, in the parent, so each forked child starts warm."""
    from footprint.cli.app import build_parser
    from footprint.lca.database import db
    from footprint.lca.units import Q

    build_parser()
    db()
    Q("1 W")


def run_cli(argv: list[str], cwd: str | Path | None = None, timeout_s: float = TIMEOUT_S, memory_mb: int = MEMORY_MB) -> Outcome:
    """`footprint.cli.main(argv)` in a forked child: (exit code, stdout, stderr, time, memory growth)."""
    _warm()
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = Path(tmp, "out"), Path(tmp, "err")
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 70
            try:
                fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT)
                fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT)
                os.dup2(fd_out, 1)
                os.dup2(fd_err, 2)
                sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
                sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
                if cwd is not None:
                    os.chdir(cwd)
                _cap_memory(memory_mb)
                from footprint.cli import main

                try:
                    code = main(list(argv))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
                except BaseException:  # noqa: BLE001 - what the user would see: a traceback
                    import traceback

                    traceback.print_exc()
                    code = 1
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 1)
        hung, status, usage = _wait(pid, timeout_s)
        seconds = time.monotonic() - t0
        out = out_path.read_text(errors="replace") if out_path.exists() else ""
        err = err_path.read_text(errors="replace") if err_path.exists() else ""
    code: int | None = None
    killed = None
    if hung:
        killed = "timeout"
    elif os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
    else:
        killed = f"signal {os.WTERMSIG(status)}"
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    grew = max(0.0, (usage.ru_maxrss - base) / 1024) if usage is not None else 0.0
    return Outcome(list(argv), code, out, err, seconds, grew, hung, killed)


def _cap_memory(memory_mb: int) -> None:  # pragma: no cover - the child
    """Cap the address space at what is mapped now plus `memory_mb`: a blow-up is a MemoryError, not a swapping host."""
    try:
        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
        limit = vm * 1024 + memory_mb * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, StopIteration):
        pass


def _wait(pid: int, timeout_s: float) -> tuple[bool, int, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return False, status, usage
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            return True, 0, None
        time.sleep(0.005)


def non_finite(text: str) -> list[str]:
    """JSON numbers that are nan or inf (json.dumps writes NaN/Infinity), or negative impacts' markers."""
    bad = []
    for token in ("NaN", "Infinity", "-Infinity"):
        if f": {token}" in text or f"[{token}" in text or f", {token}" in text:
            bad.append(token)
    for word in (" nan ", " inf ", " nan\n", " inf\n", "|nan", "|inf"):
        if word in text.lower():
            bad.append(word.strip())
    return bad


def verdict(o: Outcome, max_mb: float = 1024) -> str | None:
    """What breaks the input contract in this outcome (None: nothing)."""
    if o.hung:
        return f"hung (> {TIMEOUT_S:g} s)"
    if o.killed:
        return f"died: {o.killed}"
    if o.traceback:
        return "traceback: " + o.err.strip().splitlines()[-1][:200]
    if "MemoryError" in o.err:
        return "MemoryError"
    if o.grew_mb > max_mb:
        return f"memory grew {o.grew_mb:.0f} MB"
    if o.code not in (0, 2):
        return f"exit code {o.code}: {o.err.strip()[-200:]}"
    if o.code == 2:
        lines = [line for line in o.err.strip().splitlines() if line.startswith("footprint: error")]
        if not lines:
            return f"exit 2 without a one-line 'footprint: error' message: {o.err.strip()[-200:]!r}"
    bad = non_finite(o.out)
    if bad:
        return f"non-finite numbers in the output: {bad}"
    return None


def json_numbers(value: Any) -> list[float]:
    """Every number in a JSON value (for no nan/inf/negative checks)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in json_numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in json_numbers(v)]
    return []


def finite_json(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return True
    return all(math.isfinite(x) for x in json_numbers(data))
