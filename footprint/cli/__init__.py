"""The `footprint` command line: a thin layer over the library, one module per group of commands.

Owns: argument parsing, dispatch, and turning every user mistake into one line on stderr naming the
file and key, exit code 2, no traceback, nothing written.
May import: everything in `footprint` (lazily, inside handlers, so `footprint --help` stays fast).
Each command module has `register(sub)`, which adds its parsers and sets `handler` on each.
"""

from footprint.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
