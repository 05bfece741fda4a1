"""The one safe writer: every file and directory footprint writes goes through here.

Why one module: a report, an export or a run record written over a device node, into `/`, through a symlink planted
in the target directory, or half-written on a full disk loses or corrupts what a user measured. Here every write
goes to a temporary file in the target's own directory, is fsynced, and is renamed over the target only when it is
complete; what is not a regular file (a directory, a pipe, a device, a socket) is refused before anything is opened
(opening a pipe would hang); a symlink is followed only to a regular file inside its own directory; and every
OSError becomes one `FootprintError` line naming the path and the reason. Nothing partial is left behind.

Directories (run records, fleet ledgers) are claimed with an exclusive `mkdir` (`claim_dir`), so two processes asking
for the same name never share one, or built whole beside their target and renamed into place (`atomic_dir`).

Imports only `footprint.errors` and `footprint.escaping`: every layer may write through it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from footprint.errors import FootprintError
from footprint.escaping import shown, unsafe_char

MAX_SUFFIX = 10_000  # claim_dir tries name, name-2, ... name-MAX_SUFFIX before giving up


def check_name(name: object) -> str | None:
    """Why `name` cannot name a run or an output inside a directory (one plain name: 1 to 200 characters, no path
    separator, no control character or terminal escape, not '.' or '..'), or None when it can."""
    if not isinstance(name, str):
        return f"name {name!r} is not a string"
    if not 0 < len(name) <= 200 or "/" in name or "\\" in name or name.strip() in ("", ".", ".."):
        return f"name '{shown(name[:60])}' is not a plain name (1 to 200 characters, no '/', '\\', '.' or '..')"
    if any(unsafe_char(c) for c in name):
        return f"name '{shown(name[:60])}' holds control characters or terminal escapes"
    return None


def _fail(path: str | os.PathLike[str], reason: str) -> FootprintError:
    return FootprintError(f"cannot write {shown(path)}: {reason}")


def write_error(path: str | os.PathLike[str], e: OSError) -> FootprintError:
    """The one-line error for an OSError met while writing `path` (for writers that own their own files, such as
    a fleet directory filled by pyarrow)."""
    return _fail(path, _reason(e))


def os_reason(e: OSError) -> str:
    """An OSError's reason in words, safe to print."""
    return _reason(e)


def _reason(e: OSError) -> str:
    """The system's own words (what a user searches for), with the cause named where the words do not say it."""
    words = shown(e.strerror or type(e).__name__)
    if e.errno == errno.EFBIG:
        return f"{words} (the file size limit, ulimit -f)"
    return words


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_file_target(path: str | os.PathLike[str], *, replace: bool = True, make_parents: bool = True) -> Path:
    """The path a file will really be written to, or a FootprintError saying why not (before any work is done).

    A symlink is followed only when it names an existing regular file in its own directory; anything else at the
    path that is not a regular file is refused, and so is an existing file when `replace` is false."""
    raw = os.fspath(path)
    if not raw or not raw.strip():
        raise _fail(raw, "the path is empty")
    p = Path(raw)
    if raw.endswith(os.sep) or p.name in ("", ".", ".."):
        raise _fail(raw, "names a directory, not a file")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _fail(raw, _reason(e)) from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        p = _follow(p)
        st = os.stat(p)
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise _fail(raw, f"{_kind(st.st_mode)} is there, not a regular file")
        if not replace:
            raise _fail(raw, "it exists (pass --force to replace it)")
    _check_parent(p, raw, make_parents)
    return p


def _follow(link: Path) -> Path:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        raise _fail(link, "a symlink that leads nowhere (dangling or looping)") from None
    if target.parent != link.parent.resolve():
        raise _fail(link, f"a symlink out of its directory (to {shown(target)}); refusing to follow it")
    return target


def _check_parent(p: Path, raw: str, make_parents: bool) -> None:
    parent = p.parent
    try:
        if make_parents and not parent.exists():
            parent.mkdir(parents=True)
        if not parent.is_dir():
            raise _fail(raw, f"its directory {shown(parent)} is not a directory")
    except FileExistsError:
        raise _fail(raw, f"a part of {shown(parent)} is a file, not a directory") from None
    except NotADirectoryError:
        raise _fail(raw, f"a part of {shown(parent)} is a file, not a directory") from None
    except OSError as e:
        raise _fail(raw, _reason(e)) from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, replace: bool = True) -> Iterator[Path]:
    """A temporary path beside `path` to write to (for libraries that take a file name: pyarrow, matplotlib,
    DuckDB's COPY); renamed over `path` when the block ends without error, removed otherwise."""
    target = check_file_target(path, replace=replace)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:80]}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _file_mode(target))
    finally:
        os.close(fd)
    try:
        yield tmp
        _fsync_file(tmp)
        if replace:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target, path)
        _fsync_dir(target.parent)
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _file_mode(target: Path) -> int:
    """The mode the written file gets: the replaced file's, else what `open` would give (0666 less the umask), not
    mkstemp's owner-only 0600."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(target).st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux says it without changing it (os.umask would, for a moment, for every thread)
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0o022


def _link_new(tmp: Path, target: Path, path: str | os.PathLike[str]) -> None:
    """Put `tmp` at `target` only if nothing is there: a hard link fails rather than replace (no check-then-rename
    race); file systems without hard links fall back to a check and a rename."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise _fail(path, "it exists (pass --force to replace it)") from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        if target.exists():
            raise _fail(path, "it exists (pass --force to replace it)") from None
        os.replace(tmp, target)


def write_bytes(path: str | os.PathLike[str], data: bytes, *, replace: bool = True) -> Path:
    """Write `data` to `path` whole or not at all; returns the path written."""
    with atomic_path(path, replace=replace) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
    return Path(os.fspath(path))


def write_text(path: str | os.PathLike[str], text: str, *, replace: bool = True) -> Path:
    """Write `text` as UTF-8 to `path` whole or not at all; returns the path written."""
    return write_bytes(path, text.encode("utf-8"), replace=replace)


def _fsync_file(p: Path) -> None:
    with open(p, "rb+") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems refuse a directory fsync; the rename stands
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_dir_target(path: str | os.PathLike[str]) -> Path:
    """A directory path footprint may create or fill: not empty, not `/`, not a symlink, not a non-directory."""
    raw = os.fspath(path)
    if not raw or not raw.strip():
        raise _fail(raw, "the path is empty")
    p = Path(raw)
    if p.resolve() == Path(p.anchor or "/").resolve():
        raise _fail(raw, "refusing to write into the root directory; name a directory for the output")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise _fail(raw, _reason(e)) from None
    if stat.S_ISLNK(st.st_mode):
        raise _fail(raw, "a symlink; name the directory itself")
    if not stat.S_ISDIR(st.st_mode):
        raise _fail(raw, f"{_kind(st.st_mode)} is there, not a directory")
    return p


def claim_dir(parent: str | os.PathLike[str], name: str) -> Path:
    """Create and return a new directory `parent/name`, or `name-2`, `name-3`, ... if taken: an exclusive mkdir (or
    an empty directory made beforehand) owned by exclusively creating its claim mark, so processes and threads that
    ask for one name at the same moment each get their own. The parent may be a symlink
    to a directory (`runs -> /scratch/runs`); inside it nothing is followed (a planted link counts as taken)."""
    why = check_name(name)
    if why:
        raise _fail(Path(os.fspath(parent)) / shown(str(name)), why)
    raw = os.fspath(parent)
    base = Path(raw) if raw and os.path.isdir(raw) and os.path.islink(raw) else check_dir_target(parent)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(parent, _reason(e)) from None
    for i in range(1, MAX_SUFFIX + 1):
        candidate = base / (name if i == 1 else f"{name}-{i}")
        try:
            candidate.mkdir()
        except FileExistsError:
            if not _empty_real_dir(candidate):
                continue
        except OSError as e:
            raise _fail(candidate, _reason(e)) from None
        if _take(candidate):
            return candidate
    raise _fail(base / name, f"{MAX_SUFFIX} directories of that name already exist")


CLAIM_MARK = ".footprint-claim"  # created exclusively in a claimed directory: whoever creates it owns the directory


def _empty_real_dir(p: Path) -> bool:
    """An empty directory made beforehand (`mkdir -p runs/x` in a job script) may be claimed; a symlink may not."""
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode) and not any(os.scandir(p))
    except OSError:
        return False


def _take(d: Path) -> bool:
    """Own `d` by creating its claim mark exclusively: of two claimants of one empty directory, one wins."""
    try:
        fd = os.open(d / CLAIM_MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return False
    except OSError as e:
        raise _fail(d, _reason(e)) from None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    return True


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], *, replace: bool = False) -> Iterator[Path]:
    """A temporary directory beside `path` to fill; renamed to `path` when the block ends without error (an existing
    directory is replaced only when `replace` is true), removed otherwise.

    Without `replace` the target is claimed before the block runs (an exclusive mkdir, or the claim mark of an empty
    directory made beforehand): of several processes writing one new directory, one wins and the others fail in one
    line before doing any work, instead of each replacing the one before (a check-then-rename race)."""
    target = check_dir_target(path)
    if target.exists() and not replace and not _empty_real_dir(target):
        raise _fail(path, "it exists (pass --force to replace it)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    made = False if replace else _claim_new(target, path)
    done = False
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name[:80]}.", suffix=".tmp", dir=target.parent))
    except OSError as e:
        _unclaim(target, made, replace)
        raise _fail(path, _reason(e)) from None
    try:
        yield tmp
        old = None
        if not replace:  # ours, empty but for the claim mark: the rename replaces an empty directory
            (target / CLAIM_MARK).unlink()
        elif target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name[:80]}.", suffix=".old", dir=target.parent))
            os.replace(target, old / "x")
        os.replace(tmp, target)
        done = True
        _fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if not done:
            _unclaim(target, made, replace)


def claim_new(path: str | os.PathLike[str]) -> bool:
    """Claim a new (or empty) output directory for a writer that builds it elsewhere and renames it in at the end
    (the fleet store): True if it was made here. Release it with `release_claim`, or remove the claim mark just before
    the rename (the rename then replaces an empty directory that is this writer's)."""
    target = check_dir_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return _claim_new(target, path)


def release_claim(path: str | os.PathLike[str], made: bool) -> None:
    """Give back a directory claimed with `claim_new` (its mark removed, the directory too if it was made)."""
    _unclaim(Path(path), made, False)


def _claim_new(target: Path, path: str | os.PathLike[str]) -> bool:
    """Claim `target` for `atomic_dir`: True if made here, False if an empty directory made beforehand was taken."""
    made = True
    try:
        target.mkdir()
    except FileExistsError:
        made = False
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    if not _take(target):
        raise _fail(path, "another process is writing it (it was claimed first); choose another directory")
    return made


def _unclaim(target: Path, made: bool, replace: bool) -> None:
    """Give a claimed directory back as it was: its mark removed, and the directory too if it was made here."""
    if replace:
        return
    with contextlib.suppress(OSError):
        (target / CLAIM_MARK).unlink()
        if made:
            target.rmdir()


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive lock, among footprint's writers, on the directory holding `path` (flock on the directory itself:
    no lock file is left behind): a read-modify-write of `path` in the block (an append) loses no other writer's
    update."""
    import fcntl

    parent = Path(os.path.abspath(os.fspath(path))).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise _fail(path, _reason(e)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
