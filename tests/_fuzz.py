"""The fuzz suite's harness: the CLI run case by case in forked children of a warm, single-threaded server.

`CliServer` starts one helper process (``python tests/_fuzz.py serve``) that imports footprint, pandas and
pyarrow and loads the LCA database once, then, for every case, forks a child that runs
`footprint.cli.main(argv)` under an address-space cap and a deadline: a case costs tens of milliseconds
instead of an interpreter start, and no case can hang the suite, eat the machine's memory or inherit a
lock from the test process's threads. `Outcome` is what a user would see (exit code, stdout, stderr)
plus the child's memory growth and whether it hung; `verdict` says what breaks the input contract of
README "Promises": a traceback, a hang, memory out of bounds, an exit code other than 0 or 2, an error
that is not one `footprint: error:` line, or nan/inf in the output.
"""

from __future__ import annotations

import io
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

TIMEOUT_S = 20.0  # per case: the slowest honest case (a report) takes ~2 s on a 2-core machine
MEMORY_MB = 1536  # address space a case may add: an alias bomb or --samples 1e8 would need gigabytes
GROWTH_MB = 768  # resident memory a case may add before it counts as a blow-up
REPO = Path(__file__).resolve().parents[1]
#: The fuzz suites' Hypothesis settings: a fixed, reproducible number of examples (FOOTPRINT_FUZZ_EXAMPLES raises it)
FUZZ = settings(
    max_examples=int(os.environ.get("FOOTPRINT_FUZZ_EXAMPLES", "12")),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


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


# ---- the server (its own process) ---------------------------------------------------------------------


def _warm() -> None:
    """Load what every case needs once, so that each forked child starts warm."""
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    from footprint.cli.app import build_parser
    from footprint.lca.database import db
    from footprint.lca.units import Q

    build_parser()
    db()
    Q("1 W")


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def _child(
    argv: list[str], cwd: str | None, env: dict[str, str], out: Path, err: Path, memory_mb: int
) -> None:  # pragma: no cover
    code = 70
    try:
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT), 2)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
        limit = vm * 1024 + memory_mb * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
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


def _case(request: dict[str, Any]) -> dict[str, Any]:
    argv = request["argv"]
    timeout_s = float(request.get("timeout", TIMEOUT_S))
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        base = _rss_kb()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            _child(argv, request.get("cwd"), request.get("env") or {}, out, err, int(request.get("memory_mb", MEMORY_MB)))
        hung, status, usage = False, 0, None
        deadline = t0 + timeout_s
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.wait4(pid, 0)
                hung = True
                break
            time.sleep(0.002)
        seconds = time.monotonic() - t0
        text_out = out.read_text(errors="replace") if out.exists() else ""
        text_err = err.read_text(errors="replace") if err.exists() else ""
    code, killed = None, None
    if hung:
        killed = "timeout"
    elif os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
    else:
        killed = f"signal {os.WTERMSIG(status)}"
    grew = max(0.0, (usage.ru_maxrss - base) / 1024) if usage is not None else 0.0
    return asdict(Outcome(list(argv), code, text_out[-200_000:], text_err[-20_000:], seconds, grew, hung, killed))


def serve() -> None:  # pragma: no cover - the server process
    _warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_case(json.loads(line))), flush=True)


# ---- the client (the test process) ----------------------------------------------------------------------


class CliServer:
    """The fork server, seen from the tests: ``run(argv, cwd=..., env=...)`` -> Outcome."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        env.pop("FOOTPRINT_FAKE_NVML", None)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError("the fuzz server did not start")

    def run(
        self, argv: list[str], cwd: str | Path | None = None, env: dict[str, str] | None = None, timeout_s: float = TIMEOUT_S
    ) -> Outcome:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"argv": [str(a) for a in argv], "cwd": str(cwd) if cwd else None, "env": env or {}, "timeout": timeout_s}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return Outcome(**json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ---- judging ----------------------------------------------------------------------------------------------


def non_finite(text: str) -> list[str]:
    """nan/inf written in an output (JSON's NaN/Infinity, or a table's nan/inf)."""
    bad = []
    for token in ("NaN", "Infinity"):
        if f": {token}" in text or f"[{token}" in text or f", {token}" in text or f": -{token}" in text:
            bad.append(token)
    lowered = f" {text.lower()} "
    for word in ("nan", "inf"):
        for before in (" ", "|", ",", "("):
            for after in (" ", "\n", "|", ",", "%", ")"):
                if f"{before}{word}{after}" in lowered:
                    bad.append(word)
    return sorted(set(bad))


def verdict(o: Outcome, max_mb: float = GROWTH_MB) -> str | None:
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
        errors = [line for line in o.err.strip().splitlines() if line.startswith("footprint: error")]
        if len(errors) != 1:
            return f"exit 2 without exactly one 'footprint: error' line: {o.err.strip()[-300:]!r}"
    bad = non_finite(o.out)
    if bad:
        return f"non-finite numbers in the output: {bad}"
    return None


def json_numbers(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every number in a JSON value, with where it is."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(path, float(value))]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in json_numbers(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in json_numbers(v, f"{path}[{i}]")]
    return []


def bad_numbers(value: Any, negative_ok: tuple[str, ...] = ()) -> list[str]:
    """Numbers in a JSON value that are not finite, or negative where no source makes them so."""
    out = []
    for where, x in json_numbers(value):
        if not math.isfinite(x) or x < 0 and not any(k in where for k in negative_ok):
            out.append(f"{where} = {x}")
    return out


# ---- a real run directory, made fast ------------------------------------------------------------------


def one_line_error(o: Outcome, *words: str) -> str:
    """The case ended as the contract says for bad input: no blow-up, exit 2, one `footprint: error` line holding
    ``words``; that line."""
    assert verdict(o) is None, (verdict(o), o.argv[:6], o.err[-400:])
    assert o.code == 2, (o.argv[:6], o.out[-300:], o.err[-300:])
    line = next(x for x in o.err.splitlines() if x.startswith("footprint: error"))
    for w in words:
        assert w in line, (w, line)
    return line


def journal_only(run: Path, dest: Path, **meta: Any) -> Path:
    """A copy of ``run`` as a crash leaves it (journals, no run.json or rank records), its first journal's header
    metadata updated with ``meta``: what `footprint recover` is given."""
    out = Path(shutil.copytree(run, dest))
    (out / "run.json").unlink()
    for p in (out / "ranks").glob("rank-*.json"):
        p.unlink()
    journal = next((out / "ranks").glob("rank-*.journal.jsonl"))
    lines = journal.read_text().splitlines()
    header = json.loads(lines[0])
    header.get("meta", header).update(meta)
    lines[0] = json.dumps(header)
    journal.write_text("\n".join(lines) + "\n")
    return out


def make_run(out: Path, name: str = "good", seconds: float = 12.0, gpus: str = "2xA100-SXM4-40GB") -> Path:
    """A run directory written by the real tracker, sampler, journal and segment writer over the fake NVML, on a
    manual clock (12 simulated seconds in ~0.1 s): run.json, rank record, journal tail, raw/1s/60s parts, last.json."""
    from footprint.tracking.tracker import Tracker
    from meters.fake_nvml import FakeNVML, ManualClock
    from meters.nvml import NvmlMeter
    from meters.segments import Retention

    clock = ManualClock(time.monotonic())
    nvml = FakeNVML(gpus, clock=clock)

    class Replayed(Tracker):
        def _new_sampler(self, sampler_cls: Any, meters: Any, journal: Any, meta: dict[str, Any], retention: Any) -> Any:
            meter = NvmlMeter(nvml=nvml, clock=clock, background_poll=False)
            return sampler_cls(
                [meter],
                period_s=0.1,
                journal_path=journal,
                meta={**meta, "t0": clock()},
                progress=self._progress,
                retention=retention,
                clock=clock,
                background=False,
            )

    t = Replayed(
        name=name,
        output_dir=out,
        host=False,
        nvml=nvml,
        site={"grid": "FRA"},
        retention=Retention(segment_s=2, second_part_s=60, minute_part_s=60),
    )
    t.start()
    for i in range(int(seconds / 0.1)):
        clock.advance(0.1)
        t._sampler.tick()
        if i % 10 == 0:
            t.step(tokens=100, flops=1e12)
    journal = t._sampler._journal
    if journal is not None and journal.segments is not None:
        journal.segments.wait_idle()
    run = t.stop()
    assert run is not None and run["energy"]["gpu_j"] > 0, t.notes
    return t.run_dir


if __name__ == "__main__":
    serve()
