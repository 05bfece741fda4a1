"""The input contract every entry point shares: files read as text, YAML and JSON parsed within limits.

Scenario files, ``--set`` values, dashboard uploads and pastes, run records, factor files, imported logs,
sacct files and traces all come in through these few functions, so the same mistakes get the same one
line (a :class:`~footprint.errors.FootprintError` naming the file and the key; the CLI prints it and exits
2, the dashboard shows it): a missing or unreadable file, a directory, a file over its size limit, bytes
that are not UTF-8 (a binary file, a Latin-1 export), YAML over the limits of ``lca_data.loader.safe_load``
(size, nesting, alias expansion: refused before anything is built), JSON nested too deep or not the
object expected. Numbers are checked where they are used (``footprint.lca.workload``), with
:func:`finite_number` for the common part: finite, in range.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

MAX_TEXT_BYTES = 50_000_000  # a log or record larger than this is not read whole (traces and sacct have their own)
#: The most Monte Carlo samples an assessment draws (`--samples`): 17 categories x 8 bytes x a few arrays per
#: sample, so 100,000 samples peak at ~0.1 GB; the 2.5-97.5 % percentiles are stable long before.
MAX_SAMPLES = 100_000
MAX_GPUS = 10_000_000  # GPUs in one job or scenario: more than any cluster has, within every integer type downstream
MAX_RECORD_DEVICES = 100_000  # devices a run record lists one by one (an import's --gpu-count, a sacct job's GPUs)


def _where(path: str | os.PathLike[str]) -> str:
    return str(path)


def _regular_file(p: Path, what: str, key: str | None) -> os.stat_result:
    """The stat of a regular file, or one clear error: missing, unreadable, a directory, a pipe or a device (a FIFO
    would block a read forever, a device never end)."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FootprintError("no such file", _where(p), key) from None
    except OSError as exc:
        raise FootprintError(f"cannot read it ({exc.strerror or exc})", _where(p), key) from None
    if stat.S_ISDIR(st.st_mode):
        raise FootprintError(f"is a directory, expected a {what}", _where(p), key)
    if not stat.S_ISREG(st.st_mode):
        raise FootprintError(f"not a regular file (a pipe or a device), expected a {what}", _where(p), key)
    return st


def check_file(path: str | os.PathLike[str], what: str = "file", key: str | None = None) -> Path:
    """`path` if it names a regular file, else one clear error (missing, unreadable, a directory, a FIFO or a
    device): for readers that open the file themselves, so that a named pipe never blocks them."""
    p = Path(path)
    _regular_file(p, what, key)
    return p


def read_bytes(
    path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_TEXT_BYTES, key: str | None = None
) -> bytes:
    """The bytes of a regular file, or one clear error: missing, a directory, too large, unreadable."""
    p = Path(path)
    st = _regular_file(p, what, key)
    if st.st_size > max_bytes:
        raise FootprintError(
            f"file is larger than {max_bytes:,} bytes ({st.st_size:,}): not a {what} this tool reads", _where(p), key
        )
    try:
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise FootprintError(f"cannot read it ({exc.strerror or exc})", _where(p), key) from None
    if len(data) > max_bytes:  # a device or a file that grew: never read past the limit
        raise FootprintError(f"larger than {max_bytes:,} bytes: not a {what} this tool reads", _where(p), key)
    return data


def decode(data: bytes, name: str, what: str = "file", key: str | None = None) -> str:
    """UTF-8 text (a leading BOM dropped), or one error saying it is binary or in another encoding."""
    if b"\0" in data[:8192]:
        raise FootprintError(f"a binary file, not a {what} (expected UTF-8 text)", name, key)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FootprintError(
            f"not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); expected a {what}: save it as UTF-8",
            name,
            key,
        ) from None


def sniff_text(path: str | os.PathLike[str], what: str = "file", key: str | None = None, head: int = 1 << 16) -> None:
    """Check that a file of any size is a readable, regular UTF-8 text file from its first ``head`` bytes (for
    logs too large to read whole here: their readers stream them)."""
    p = Path(path)
    _regular_file(p, what, key)
    try:
        with p.open("rb") as fh:
            data = fh.read(head)
    except OSError as exc:
        raise FootprintError(f"cannot read it ({exc.strerror or exc})", _where(p), key) from None
    if len(data) == head:  # a multi-byte character cut by the end of the sample is not an error
        data = data[: max(len(data) - 3, 0)] + data[max(len(data) - 3, 0) :].decode("utf-8", "ignore").encode()
    decode(data, _where(p), what, key)


def read_text(path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_TEXT_BYTES, key: str | None = None) -> str:
    """`read_bytes` then `decode`: the text of a file, or one line saying why not."""
    return decode(read_bytes(path, what, max_bytes, key), _where(path), what, key)


def load_yaml(text: str, file: str | None, key: str | None = None) -> Any:
    """``lca_data.loader.safe_load`` (limits checked before anything is built); errors name the file and line."""
    import yaml

    from lca_data.loader import YamlLimitError, safe_load

    try:
        return safe_load(text)
    except YamlLimitError as exc:
        raise FootprintError(f"YAML refused: {exc.problem}", file, key or _line(exc)) from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FootprintError(f"malformed YAML: {problem}", file, key or _line(exc)) from None


def _line(exc: Any) -> str | None:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None


def load_json(text: str | bytes, file: str, expect: type | None = dict, what: str = "JSON") -> Any:
    """``json.loads`` with every failure one error: invalid, nested past the interpreter's recursion limit, or not
    the ``expect``ed type (an object, by default)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise FootprintError(f"not valid {what} (nested too deep)", file) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise FootprintError(f"not valid {what} ({str(exc)[:160]})", file) from None
    if expect is not None and not isinstance(value, expect):
        kind = {dict: "an object", list: "an array"}.get(expect, expect.__name__)
        raise FootprintError(f"expected {kind} in this {what}, got {type(value).__name__}", file)
    return value


def finite_number(
    value: Any,
    key: str,
    file: str | None = None,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    what: str = "a number",
) -> float:
    """A finite float in [lo, hi] (or (lo, hi] with ``lo_open``) from a number or a numeric string ("1e3", "1_000")."""
    v: Any = value
    if isinstance(v, str):
        try:
            v = float(v.strip().replace("_", ""))
        except ValueError:
            raise FootprintError(f"expected {what}, got {value!r}", file, key) from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FootprintError(f"expected {what}, got {value!r}", file, key)
    try:
        v = float(v)
    except OverflowError:  # an integer beyond float range
        raise FootprintError(f"expected a finite number, got {value!r}", file, key) from None
    if not math.isfinite(v):
        raise FootprintError(f"expected a finite number, got {value!r}", file, key)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise FootprintError(f"must be {'>' if lo_open else '>='} {lo:g}, got {value!r}", file, key)
    if hi is not None and v > hi:
        raise FootprintError(f"must be <= {hi:g}, got {value!r}", file, key)
    return v


def number_arg(kind: type = float, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Any:
    """An argparse ``type=`` for a finite number in range: `--pue nan`, `--samples 1e8`, `--period inf` are refused
    by argparse itself (usage, one `footprint: error: argument ...` line, exit 2)."""
    import argparse

    def parse(text: str) -> Any:
        try:
            v = int(text) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise argparse.ArgumentTypeError(f"must be {'>' if lo_open else '>='} {lo:g}, got {text}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi:,g}, got {text}")
        return v

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse
