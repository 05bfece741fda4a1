"""The top-level parser, error handling and the helpers every command module shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from footprint.cli import assess_cmd, catalogue_cmd, dashboard_cmd, export_cmd, flops_cmd, kernels_cmd, tracking_cmd

#: Command modules in the order their commands appear in `footprint --help`.
COMMAND_MODULES = (assess_cmd, catalogue_cmd, tracking_cmd, export_cmd, flops_cmd, kernels_cmd, dashboard_cmd)

Handler = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on a bad argument too; keep its one-line style."""

    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        self.exit(2, f"footprint: error: {message}\n")


def group(sub: argparse._SubParsersAction, name: str, help: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """A command with subcommands (`footprint kernels analyze`); alone, it prints its help."""
    p = sub.add_parser(name, help=help)
    p.set_defaults(handler=lambda _args: _print_help(p))
    return p, p.add_subparsers(dest=f"{name}_command", parser_class=Parser)


def _print_help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="footprint", description="Life-cycle footprint of AI training (16 EF 3.1 categories).")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def emit(text: str, output: str | None) -> None:
    """Write to a file (saying so on stderr) or to stdout."""
    if output:
        Path(output).write_text(text)
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> int:
    from footprint.errors import FootprintError
    from footprint.lca.units import UnitParseError
    from lca_data.loader import LcaDataError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from footprint import __version__

        print(__version__)
        return 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except (FootprintError, UnitParseError) as exc:
        print(f"footprint: error: {exc}", file=sys.stderr)
        return 2
    except LcaDataError as exc:
        print(f"footprint: error in lca_data: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
