"""How `footprint run` runs its command: signals passed on once, the shell's exit code, no orphan left unmeasured.

- **Signals.** SIGTERM, SIGHUP, SIGUSR1/2, SIGQUIT and SIGINT that someone *sends* to `footprint run` (``kill``,
  a scheduler, systemd) are forwarded to the command once, and `footprint run` waits for it to finish (a
  checkpoint save is not cut short). Ctrl-C and the terminal's other signals are not forwarded: the terminal
  already delivers them to the whole foreground process group, command included, and a second SIGINT would
  interrupt the command's own clean-up. On Linux the two are told apart by the signal's origin
  (``siginfo.si_code``: SI_KERNEL for the terminal, SI_USER for a process), read with ``sigtimedwait`` on
  signals blocked before any thread starts; elsewhere SIGINT is assumed to come from the terminal.
  A signal sent to the whole process group (``kill -- -PGID``, SLURM's signalling of every process of a
  step) reaches the command directly as well: send it to `footprint run`'s PID to have it delivered once.
- **Exit code.** The command's own; 128 + N when a signal N killed it (SIGTERM 143, SIGINT 130), as a shell reports it.
- **If `footprint run` dies** (even ``kill -9``), the command is not left running unmeasured: on Linux it is
  started with the parent-death signal ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` (through ctypes), so it receives
  SIGTERM at once; the journal of what was measured until then is on disk for ``footprint recover``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

FORWARDED = tuple(
    getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2") if hasattr(signal, n)
)
SI_KERNEL = 0x80  # siginfo.si_code of a signal the kernel raised (the terminal's Ctrl-C, Ctrl-\, hang-up)
PR_SET_PDEATHSIG = 1
PDEATHSIG = signal.SIGTERM
_PRECISE = sys.platform.startswith("linux") and hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")


def exit_code(returncode: int) -> int:
    """The shell's convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _libc_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


class Supervisor:
    """Start with ``with Supervisor() as sup:`` *before* any thread (the tracker's sampler) starts, so that the
    forwarded signals stay blocked in every thread and reach `wait` with their origin; then `spawn` and `wait`."""

    def __init__(self) -> None:
        self.precise = _PRECISE
        self.forwarded: list[int] = []  # signals passed on, in order (for tests and the run's notes)
        self.from_terminal: list[int] = []  # signals the terminal delivered to the command itself
        self._watched = (*FORWARDED, signal.SIGCHLD) if self.precise else ()
        self._previous: dict[int, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._prctl = _libc_prctl() if sys.platform.startswith("linux") else None

    def __enter__(self) -> Supervisor:
        if self.precise:
            signal.pthread_sigmask(signal.SIG_BLOCK, self._watched)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.precise:
            with contextlib.suppress(Exception):
                while signal.sigtimedwait(FORWARDED, 0) is not None:  # drained: none reaches Python as an exception
                    pass
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self._watched)
        for signum, handler in self._previous.items():
            with contextlib.suppress(Exception):
                signal.signal(signum, handler)

    # ---- the child ------------------------------------------------------------------------------------
    def _in_child(self) -> None:  # pragma: no cover - runs between fork and exec
        """Unblock what the parent blocked (a signal mask survives exec) and ask for SIGTERM when the parent dies."""
        if self.precise:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self._watched)
        if self._prctl is not None:
            parent = self._parent
            self._prctl(PR_SET_PDEATHSIG, int(PDEATHSIG), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl: act as if the signal had come
                os.kill(os.getpid(), PDEATHSIG)

    def spawn(self, cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        self._parent = os.getpid()
        self._proc = subprocess.Popen(list(cmd), env=env, preexec_fn=self._in_child)  # noqa: PLW1509 - see module docstring
        if not self.precise:
            self._install_handlers()
        return self._proc

    # ---- waiting ------------------------------------------------------------------------------------
    def wait(self, proc: subprocess.Popen[bytes]) -> int:
        """Wait for the command, passing signals on as the module docstring says; its exit code, shell-style."""
        if not self.precise:
            while True:
                try:
                    return exit_code(proc.wait())
                except KeyboardInterrupt:  # pragma: no cover - handlers replace the default one
                    continue
        while proc.poll() is None:
            info = signal.sigtimedwait(self._watched, 1.0)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            self._received(proc, info.si_signo, terminal=info.si_code == SI_KERNEL)
        return exit_code(proc.returncode)

    def _received(self, proc: subprocess.Popen[bytes], signum: int, terminal: bool) -> None:
        if terminal:
            self.from_terminal.append(signum)  # the command has its own copy: a second one would cut its clean-up short
            return
        self.forwarded.append(signum)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    def _install_handlers(self) -> None:  # pragma: no cover - platforms without sigtimedwait
        proc = self._proc

        def handler(signum: int, _frame: Any) -> None:
            if proc is not None:
                self._received(proc, signum, terminal=signum == signal.SIGINT)

        for signum in FORWARDED:
            with contextlib.suppress(Exception):
                self._previous[signum] = signal.signal(signum, handler)
