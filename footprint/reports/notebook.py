"""The HTML view of an Assessment in Jupyter and VS Code (`Assessment._repr_html_`): key figures, the 16-category
table and the stage chart. Registered with the core (`footprint.lca.notebook.ASSESSMENT_HTML`) on import; `footprint`'s
API imports it, so every `footprint.assess` result renders this way.
"""

from __future__ import annotations

import html

from footprint.lca import notebook
from footprint.lca.assessment import Assessment, key_figures
from footprint.lca.render import HEADERS, SHARES_NOTE, table_rows
from footprint.reports import figures


def assessment_html(a: Assessment) -> str:
    """Key figures with their ranges, the 16 categories (total, unit, stage shares, low-high, person-equivalents),
    what n/a and not modelled mean, and the stage chart (left out where matplotlib cannot draw it)."""
    try:
        chart = f"<div style='max-width:640px'>{figures.stage_matrix(a)}</div>"
    except Exception:  # no usable matplotlib backend: the table alone
        chart = ""
    return (
        f"<div><h3>{html.escape(a.workload.name)}</h3>"
        + notebook.html_table(["", "Value", "Range", ""], [list(k) for k in key_figures(a)])
        + notebook.html_table(HEADERS, table_rows(a), "All 16 EF 3.1 categories")
        + f"<p style='color:#666'>{html.escape(SHARES_NOTE)}</p>{chart}</div>"
    )


notebook.ASSESSMENT_HTML = assessment_html
