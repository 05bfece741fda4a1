"""The CLI registry: the command table and the helpers every command module uses to add its parsers.

The app (`footprint.cli.app`) and the command modules import this module; it imports none of them (the table names
them), so no command imports the app. A new command group is one line in `COMMAND_MODULES` and a module
`footprint/cli/NAME_cmd.py` with `register(sub)` that calls `command(...)` / `group(...)` from here.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Callable
from typing import Any

#: Command modules (in `footprint.cli`) in the order their commands appear in `footprint --help`.
COMMAND_MODULES = (
    "assess_cmd",
    "catalogue_cmd",
    "factors_cmd",
    "tracking_cmd",
    "export_cmd",
    "disclose_cmd",
    "fleet_cmd",
    "serving_cmd",
    "flops_cmd",
    "kernels_cmd",
    "dashboard_cmd",
    "doctor_cmd",
)

Handler = Callable[[argparse.Namespace], int]


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


def register_all(sub: argparse._SubParsersAction) -> None:
    """Every command module's `register(sub)`, in the table's order."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"footprint.cli.{name}").register(sub)


def emit(text: str, output: str | None) -> None:
    """Write to a file (saying so on stderr), or to stdout when there is no file or it is '-'."""
    if output is not None and output != "-":
        from footprint.outputs import shown, write_text

        write_text(output, text)
        print(f"wrote {shown(output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def args_of(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The named options as keyword arguments, for a command that hands its options on to one function unchanged."""
    return {n: getattr(args, n) for n in names}
