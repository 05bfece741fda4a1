"""The top-level parser and error handling: every command's mistakes end here as one line, exit 2.

The commands and their shared helpers live in `footprint.cli.registry`; `command`, `group` and `emit` are
re-exported here for command modules written before it (`from footprint.cli.app import command`), which should
import them from the registry.
"""

from __future__ import annotations

import argparse
import sys

from footprint.cli.registry import Handler, Parser, command, emit, group, register_all

__all__ = ["Parser", "build_parser", "command", "emit", "group", "main"]

DESCRIPTION = """\
Life-cycle footprint of AI training in the 16 EU Environmental Footprint (EF 3.1) categories:
measured GPU energy, FLOPs and MFU, and an open GPU LCA database, offline.

examples:
  footprint assess scenarios/bloom-176b.yaml
  footprint assess scenarios/gpt-4-falk.yaml --set training.mfu=0.5 --set site.grid=POL
  footprint run --name demo --grid FRA -- python train.py
  footprint report runs/demo -o report.html
  footprint doctor                      what this machine can measure

`footprint COMMAND --help` shows each command's options and examples.
"""


def _version() -> str:
    import platform

    from footprint import __version__

    return f"footprint {__version__} (Python {platform.python_version()}, {platform.system()} {platform.machine()})"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="footprint", description=DESCRIPTION)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    register_all(sub)
    return p


MAX_ERROR_CHARS = 2000


def _line(text: str) -> str:
    """An error as one printable line of bounded length (a 5,000-digit value is cut, not printed whole)."""
    from footprint.outputs import shown

    text = shown(text)
    return text if len(text) <= MAX_ERROR_CHARS else f"{text[: MAX_ERROR_CHARS - 40]}... ({len(text):,} characters)"


def main(argv: list[str] | None = None) -> int:
    from footprint.errors import FootprintError
    from footprint.lca.units import UnitParseError
    from lca_data.loader import LcaDataError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(_version())
        return 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:  # `footprint` alone: what it does and how to start
        parser.print_help()
        return 0
    from footprint.outputs import os_reason

    try:
        return handler(args)
    except (FootprintError, UnitParseError) as exc:
        print(f"footprint: error: {_line(str(exc))}", file=sys.stderr)
        return 2
    except LcaDataError as exc:
        print(f"footprint: error in lca_data: {_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a writer or reader that met the disk (full, read-only, size limit): one line, exit 2
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"footprint: error: {_line(where + os_reason(exc))}", file=sys.stderr)
        return 2
