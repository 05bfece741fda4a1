"""The `footprint` command line: a thin layer over the library, one module per group of commands.

Owns: argument parsing, dispatch, and turning every user mistake into one line on stderr naming the
file and key, exit code 2, no traceback, nothing written.
May import: everything in `footprint` (lazily, inside handlers, so `footprint --help` stays fast).
Each command module has `register(sub)`, which adds its parsers and sets `handler` on each, and is listed by name
in `registry.COMMAND_MODULES`; commands import `footprint.cli.registry` (command, group, emit, args_of), never the app
or each other; the commands that read Prometheus share `footprint.cli.prom_options` (connection options, PromConfig).
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import errno
import io
import os
import signal
import sys
import threading
from typing import Any

INTERRUPTED = "footprint: interrupted; nothing half-written was left"
_interrupted: list[bool] = []


@atexit.register  # registered first, so it runs last: after every other exit handler has done its work
def _exit_130() -> None:
    """A handled Ctrl-C ends with 130. CPython may still end such a process by re-raising SIGINT (exit -2) when the
    interrupt landed inside an extension's `PyRun_*` call, even though it was caught; this keeps 130."""
    if _interrupted:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
                stream.flush()
        os._exit(130)


def _redeliver_interrupt(unraisable: Any, default: Any = sys.unraisablehook) -> None:
    """A Ctrl-C that lands inside a garbage-collector or weakref callback cannot propagate from there: CPython would
    print it as "Exception ignored" with a traceback and carry on, losing the interrupt. Deliver it again to the
    main thread a moment later (from a helper thread, once this hook has returned), where it stops the work like
    any other Ctrl-C."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        threading.Timer(0.01, _thread.interrupt_main).start()
        return
    default(unraisable)


def main(argv: list[str] | None = None) -> int:
    """The console script. The command modules are imported inside, so that a Ctrl-C while they load is the same
    one line and exit 130 as a Ctrl-C during the work (never a KeyboardInterrupt traceback)."""
    sys.unraisablehook = _redeliver_interrupt
    out, err = sys.stdout, sys.stderr
    sys.stdout = _Terminal(out)  # None when started with stdout closed (`>&-`): each write is then one error line
    sys.stderr = err if err is not None else open(os.devnull, "w")  # noqa: SIM115 - nowhere to say anything
    _sigint_seen.clear()  # an interrupt of an earlier main() in this process (a notebook, a test) is not this one's
    _interrupted.clear()
    previous = _note_interrupts()
    try:
        _fit_address_space_limit()
        _steady_memory()
        from footprint.cli.app import main as run

        return run(argv)
    except Exception as exc:  # an extension that was running when Ctrl-C came may turn it into its own error
        if not (_sigint_seen or _from_interrupt(exc)):
            raise
        return _stopped()
    except KeyboardInterrupt:  # Ctrl-C: one line, exit 130 as a shell would; a file being written was not renamed
        return _stopped()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout, sys.stderr = out, err
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


_sigint_seen: list[bool] = []


def _on_sigint(signum: int, frame: Any) -> None:
    """Python's own SIGINT handler, remembering that it ran: a C extension may swallow the KeyboardInterrupt and
    raise an error of its own with no trace of it (matplotlib's pybind11 path conversion: "ValueError: Invalid
    affine transformation matrix" in a report interrupted at 0.6 s), so the exception alone cannot tell."""
    _sigint_seen.append(True)
    signal.default_int_handler(signum, frame)


def _note_interrupts() -> Any:
    """Install `_on_sigint` where SIGINT has Python's default handler (a caller's own handler is left alone);
    returns the handler to put back, None when nothing was installed (not the main thread, or another handler)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return None
    signal.signal(signal.SIGINT, _on_sigint)
    return previous


def _stopped() -> int:
    print(INTERRUPTED, file=sys.stderr)
    _interrupted.append(True)
    return 130


def _from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a KeyboardInterrupt was being handled (one raised by code, not the signal,
    leaves `_sigint_seen` empty): a C extension whose initialisation the interrupt cut short raises its own
    error in its place (matplotlib's `_image`: "ImportError: initialization failed", the KeyboardInterrupt as its
    context), which would otherwise end the command with a traceback."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


def _fit_address_space_limit() -> None:
    """Under an address-space limit (`ulimit -v`, as HPC login nodes and batch systems set), Arrow's default
    allocator (mimalloc) reserves a 1 GiB arena at its first allocation, which such a limit refuses part-way through
    a command (a 9-job `fleet report` peaked at 2.05 GB of address space, 1.03 GB with the system allocator). There
    Arrow allocates with the system allocator even where the user chose another: same results, nothing reserved
    ahead (`_steady_memory` makes it the default elsewhere)."""
    try:
        import resource
    except ImportError:  # Windows: no such limit
        return
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"  # read when pyarrow is first imported, after this


M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks this large are mapped on their own, and unmapped when freed


def _steady_memory() -> None:
    """A long command's resident memory held to what it uses, not to what its threads and allocators kept: Arrow
    allocates with the system allocator (mimalloc keeps the pages it used), and glibc's malloc gets one arena for
    all threads and a fixed 1 MiB threshold above which a block is mapped on its own (by default each thread gets an
    arena, and the threshold grows with the largest block freed, so a freed answer's pages stay). A fleet import's
    peak RSS at 32 and 256 GPUs x 2 days: 147 and 171 MB with the defaults, 138 and 147 MB so; a 4,096-GPU month
    1.01-1.03 GB -> 775 MB (a 64 KiB threshold held 146 MB at 256 GPUs, at 13 % more client CPU). Settings the user
    made (``ARROW_DEFAULT_MEMORY_POOL``, ``MALLOC_*``, ``GLIBC_TUNABLES``) are left as they are."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # read when pyarrow is first imported
    if sys.platform != "linux" or any(k.startswith(("MALLOC_", "GLIBC_TUNABLES")) for k in os.environ):
        return
    with contextlib.suppress(Exception):  # not glibc (musl has no mallopt): its defaults stand
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


class _Terminal(io.TextIOBase):
    """stdout as the commands see it: what they print passes `footprint.escaping.terminal_text` (a name holding a
    terminal escape is printed as its Python escape, lines and tabs kept); a closed stdout is an OSError on the first
    write, which the CLI prints as one line, exit 2."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        from footprint.escaping import terminal_text

        if self._stream is None:
            raise OSError(errno.EBADF, "standard output is closed: nothing can be printed (use -o FILE)")
        return self._stream.write(terminal_text(text))

    def flush(self) -> None:
        if self._stream is not None:
            self._stream.flush()

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError(errno.EBADF, "standard output is closed")
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"


def __getattr__(name: str) -> Any:
    if name == "build_parser":
        from footprint.cli.app import build_parser

        return build_parser
    raise AttributeError(name)


def console() -> int:
    """The `footprint` console script and `python -m footprint.cli`: main(), then Ctrl-C ignored until the exit.
    The work is over and every file is whole, so an interrupt landing between the return and the exit changes
    nothing (it would otherwise end a successful process by SIGINT, exit -2). A caller of main() keeps its signals."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


__all__ = ["build_parser", "console", "main"]
