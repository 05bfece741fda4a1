"""What Jupyter and VS Code show of a result: a short text `repr` (the headline numbers with their units) and an HTML
view (`_repr_html_`), the helpers each result's own module builds them with.

A leaf of the core (it imports only `footprint.escaping`): the Assessment's HTML view, the 16-category table and the
stage chart, is drawn by `footprint.reports.notebook`, a consumer the core may not import; it registers itself here
(`ASSESSMENT_HTML`) when loaded, as `footprint.assess` does. Without it the HTML view is the text `repr`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from footprint.escaping import shown

#: Draws an Assessment's HTML view; set by `footprint.reports.notebook` when it is imported.
ASSESSMENT_HTML: Callable[[Any], str] | None = None
MAX_REPR_CHARS = 2000  # a repr is a glance, never a dump


def short(lines: Sequence[str], limit: int = MAX_REPR_CHARS) -> str:
    """Lines joined, each on one line (user text made safe for a terminal), cut to ``limit`` characters."""
    text = "\n".join(shown(str(x)).replace("\\n", " ") for x in lines)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A plain HTML table, every cell escaped; numbers right-aligned as a notebook's DataFrame shows them."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td style="text-align:{"left" if i == 0 else "right"}">{html.escape(str(c))}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def text_html(text: str) -> str:
    """A text repr as HTML (escaped, preformatted): the view where no richer one is registered."""
    return f"<pre>{html.escape(text)}</pre>"
