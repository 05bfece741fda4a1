"""The on-disk cache of validated lca_data: a value built from data files is kept while they are unchanged.

Why: the GPU catalogue's build (gpus.yaml and every source file parsed, every number's source and unit
checked with pint) costs ~0.3 s of CPU, paid by every command; read back from here it costs a few
milliseconds, and a command that needs only the catalogue (`footprint kernels analyze`) never imports
pint. Nothing is checked less: a cached value is one that passed every check, and it is used only while
its key matches: the size and modification time of each data file it was built from and of each code
file that shapes or checks it (pint's and PyYAML's included), and the Python version. A missing, stale,
damaged or foreign cache file (not owned by this user, or writable by others) is rebuilt; a cache folder
that cannot be written is skipped; neither is ever an error.

The folder is ``$FOOTPRINT_CACHE_DIR`` (empty: no cache), default the user cache folder (e.g.
``~/.cache/footprint``); pint's own cache of parsed unit definitions lives in its ``pint`` subfolder.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MAX_BYTES = 64 * 2**20  # a cache file larger than this is not ours (the GPU catalogue pickles to ~0.2 MB)
_MISS = object()


def cache_root() -> Path | None:
    """The project's cache folder (None: caching is off)."""
    text = os.environ.get("FOOTPRINT_CACHE_DIR")
    if text is not None:
        return Path(text) if text.strip() else None
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("footprint"))
    except Exception:
        return None


def stamp(paths: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime in ns, size) of each file: the part of a cache key that changes when a file is edited.
    Raises OSError if one is missing (the caller builds afresh, so the loader reports it as it always does)."""
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def cached(name: str, inputs: Iterable[Path], build: Callable[[], T]) -> T:
    """``build()``, or the value it returned in an earlier process while every file of ``inputs`` is unchanged."""
    root = cache_root()
    try:
        key = (sys.version_info[:3], stamp(inputs))
    except OSError:
        return build()
    path = root / f"{name}.pickle" if root is not None else None
    if path is not None:
        hit = _read(path, key)
        if hit is not _MISS:
            return hit
    value = build()
    if path is not None:
        _write(path, key, value)
    return value


def _read(path: Path, key: Any) -> Any:
    """The value stored under ``key`` at ``path``, or _MISS (absent, stale, damaged, foreign, too large)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return _MISS
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            own = not hasattr(os, "getuid") or st.st_uid == os.getuid()
            if not own or st.st_mode & 0o022 or st.st_size > MAX_BYTES:
                return _MISS
            stored_key, value = pickle.load(fh)  # noqa: S301 - this user's own cache file, checked above
    except Exception:  # truncated, garbage, written by another version of the classes...
        return _MISS
    return value if stored_key == key else _MISS


def _write(path: Path, key: Any, value: Any) -> None:
    """Store atomically (a temporary file renamed over the old one); any failure leaves no cache."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            pickle.dump((key, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        tmp = None
    except Exception:  # unwritable folder, full disk, an unpicklable value: run without the cache
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
