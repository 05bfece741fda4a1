"""The top-level parser, error handling and the helpers every command module shares."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable

from footprint.cli import (
    assess_cmd,
    catalogue_cmd,
    dashboard_cmd,
    doctor_cmd,
    export_cmd,
    fleet_cmd,
    flops_cmd,
    kernels_cmd,
    tracking_cmd,
)

#: Command modules in the order their commands appear in `footprint --help`.
COMMAND_MODULES = (
    assess_cmd,
    catalogue_cmd,
    tracking_cmd,
    export_cmd,
    fleet_cmd,
    flops_cmd,
    kernels_cmd,
    dashboard_cmd,
    doctor_cmd,
)

Handler = Callable[[argparse.Namespace], int]

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


class Parser(argparse.ArgumentParser):
    """One-line errors (exit 2, as argparse; the usage is left to --help, which the line points to), with a "did
    you mean" for a mistyped choice."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
            close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.5)
            if close:
                message += f"; did you mean '{close[0]}'?"
        self.exit(2, f"footprint: error: {message} (see: {self.prog} --help)\n")


def command(
    sub: argparse._SubParsersAction, name: str, help: str, examples: str = "", handler: Handler | None = None
) -> argparse.ArgumentParser:
    """A subcommand whose --help shows its purpose and a few examples."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples.strip().splitlines()) if examples else None
    p = sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".", epilog=epilog)
    if handler is not None:
        p.set_defaults(handler=handler)
    return p


def group(
    sub: argparse._SubParsersAction, name: str, help: str, examples: str = ""
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """A command with subcommands (`footprint kernels analyze`); alone, it prints its help."""
    p = command(sub, name, help, examples)
    p.set_defaults(handler=lambda _args: _print_help(p))
    return p, p.add_subparsers(dest=f"{name}_command", parser_class=Parser, metavar="COMMAND")


def _print_help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 0


def _version() -> str:
    import platform

    from footprint import __version__

    return f"footprint {__version__} (Python {platform.python_version()}, {platform.system()} {platform.machine()})"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="footprint", description=DESCRIPTION)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def emit(text: str, output: str | None) -> None:
    """Write to a file (saying so on stderr), or to stdout when there is no file or it is '-'."""
    if output is not None and output != "-":
        from footprint.outputs import shown, write_text

        write_text(output, text)
        print(f"wrote {shown(output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)


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
