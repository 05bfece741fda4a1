"""Escaping user text for each place it is shown: a terminal line, a CSV cell, Markdown.

Why one module: a run name, a note or a server's error text is written by someone else. Printed raw, a terminal
escape can rewrite the screen; a CSV cell starting with `=` runs as a formula when the file is opened in a
spreadsheet (OWASP "CSV injection"); Markdown copies `<script>` and `javascript:` links into a page. Every renderer
passes user text through here. Imports nothing from footprint: every layer may use it.
"""

from __future__ import annotations

import os
import re
from typing import Any

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # OWASP; full-width forms


def unsafe_char(c: str) -> bool:
    """A control character, a terminal escape's introducer (C0, DEL, C1) or a bidirectional override."""
    return ord(c) < 32 or 127 <= ord(c) < 160 or c in _BIDI


def shown(text: str | os.PathLike[str]) -> str:
    """Text (a path, a run name, a server's error) as it is safe to print on one line: control characters, terminal
    escapes and bidirectional overrides become Python escapes (``\\x1b``, ``\\n``); everything else is kept."""
    s = os.fspath(text)
    if not any(unsafe_char(c) for c in s):
        return s
    return "".join(ascii(c)[1:-1] if unsafe_char(c) else c for c in s)


_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]|\r(?!\n)")


def terminal_text(text: str) -> str:
    """Text as it is safe to write to a terminal, lines and tabs kept: every other control character, terminal escape
    (ESC, CSI, OSC ...), lone CR and bidirectional override becomes its Python escape (``\\x1b``), so an op, model or
    run name cannot recolour, retitle or rewrite the screen."""
    return _TERMINAL_UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ tab or CR (or their full-width forms, which
    some spreadsheets also read), after any leading spaces, gets a leading single quote (OWASP's advice); numbers are
    left as numbers."""
    if isinstance(value, str) and value.lstrip(" ").startswith(FORMULA_START):
        return "'" + value
    return value


# what opens a tag, link, image, code, emphasis, a table cell, an entity or Streamlit's $...$ LaTeX; `_` is left
# alone (CommonMark never reads it inside a word, so `power_per_gpu` stays as typed)
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|~&$])")


# what opens a block when it starts a line or a list item: a heading, a quote, a list item, a setext underline
# What opens a block at a line's start in CommonMark: an ATX heading (# then a space or the end), a quote, a
# bullet (- or + then a space or the end), a thematic break (---) or setext underline (===) alone on the line,
# an ordered item (1. or 1) then a space or the end). "-0.3" or "4.0e+23" opens nothing and stays as typed.
_MD_BLOCK = re.compile(r"^(\s*)(#{1,6}(?=\s|$)|>|[-+](?=\s|$)|(?:-[ \t]*){3,}$|=+[ \t]*$|\d{1,9}(?=[.)](?:\s|$)))")


def md_text(value: Any) -> str:
    """Text as literal Markdown on one line: the characters that open a tag, a link, an image, code, emphasis or a
    table cell are backslash-escaped (a rendered page shows them as typed), so no `<script>`, `javascript:` link
    or outside image can come from a run name or a note."""
    s = shown(str(value)).replace("\n", " ")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    m = _MD_BLOCK.match(s)
    if m is None:
        return s
    at = m.end() if m.group(2)[0].isdigit() else m.start(2)  # `1.` is escaped as `1\.`, `#` as `\#`
    return s[:at] + "\\" + s[at:]
