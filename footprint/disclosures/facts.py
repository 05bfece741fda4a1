"""One disclosed figure and where it came from; a form as sections of them; its JSON, YAML and Markdown renderings.

Every figure a form carries is a `Fact`: its value (rounded to the significant figures the form states), its unit,
its origin (measured, stated or modelled), the method and the boundary. A figure the target cannot give is a Fact
with no value and the reason, shown as "not available (reason)", never a made-up number.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

ORIGINS = ("measured", "stated", "modelled")


def sig(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` significant figures (2.5e23 for 2.4583e23 at 2)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits - 1}e}")


@dataclass(frozen=True)
class Fact:
    """A disclosed value with its provenance; ``value`` None means not available, and ``reason`` says why."""

    value: Any
    unit: str = ""
    origin: str = ""
    method: str = ""
    boundary: str = ""
    digits: int | None = None  # significant figures the value was rounded to
    reason: str = ""

    def __post_init__(self) -> None:
        if self.value is not None and self.origin not in ORIGINS:
            raise ValueError(f"a disclosed figure is measured, stated or modelled, not {self.origin!r}")
        if self.value is None and not self.reason:
            raise ValueError("a figure that is not available needs its reason")

    @property
    def available(self) -> bool:
        return self.value is not None

    def provenance(self) -> dict[str, Any]:
        if not self.available:
            return {"not_available": self.reason}
        out = {"unit": self.unit, "origin": self.origin, "method": self.method, "boundary": self.boundary}
        if self.digits:
            out["significant_figures"] = self.digits
        return {k: v for k, v in out.items() if v not in ("", None)}

    def text(self) -> str:
        """The value as a reader sees it: "2.5e+23 FLOP", "433 MWh", or "not available (reason)"."""
        if not self.available:
            return f"not available ({self.reason})"
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            shown = str(v)
        elif v != 0 and (abs(v) >= 1e7 or abs(v) < 1e-3):
            shown = f"{v:.{(self.digits or 3) - 1}e}"
        elif abs(v) >= 1000:
            shown = f"{v:,.0f}"
        else:
            shown = f"{v:.{self.digits or 3}g}"
        return f"{shown} {self.unit}".strip()


def fact(value: Any, unit: str, origin: str, method: str, boundary: str = "", digits: int | None = 3, reason: str = "") -> Fact:
    """A Fact, rounded to ``digits`` significant figures when it is a number; None (with ``reason``) when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return Fact(None, unit, reason=reason or "not recorded")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and digits:
        value = sig(float(value), digits)
    return Fact(value, unit, origin, method, boundary, digits if isinstance(value, float) else None)


def missing(reason: str, unit: str = "") -> Fact:
    return Fact(None, unit, reason=reason)


#: A form: its title, what it is about, sections of (key -> Fact), and lines of text said once (notes, the link).
Form = dict[str, Any]


def to_data(form: Form) -> dict[str, Any]:
    """The form as plain data: each section's values under their keys, then its ``provenance`` and
    ``not_available`` (key -> reason) beside them; the section named "_" sits at the top level."""
    out: dict[str, Any] = {k: v for k, v in form.items() if k != "sections"}
    for name, facts in form["sections"].items():
        sec: dict[str, Any] = {k: f.value for k, f in facts.items()}
        sec["provenance"] = {k: f.provenance() for k, f in facts.items() if f.available}
        sec["not_available"] = {k: f.reason for k, f in facts.items() if not f.available}
        if name == "_":
            out.update(sec)
        else:
            out[name] = sec
    return out


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, allow_nan=False, default=str) + "\n"


def to_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False, allow_unicode=True, width=110)


def md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell (pipes escaped, one line)."""
    from footprint.escaping import md_text

    return md_text(str(text)).replace("|", "\\|").replace("\n", " ")


def md_rows(facts: dict[str, Fact], labels: dict[str, str]) -> list[str]:
    """A section as the form's rows: the field, its value, and where the value came from."""
    lines = ["| Field | Value | Origin | Method and boundary |", "| --- | --- | --- | --- |"]
    for key, f in facts.items():
        how = "; ".join(x for x in (f.method, f"boundary: {f.boundary}" if f.boundary else "") if x)
        lines.append(f"| {md_cell(labels.get(key, key))} | {md_cell(f.text())} | {f.origin or '-'} | {md_cell(how) or '-'} |")
    return lines


URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"  # RFC 3986 reserved and unreserved characters; the rest is encoded


def full_assessment(form: Form) -> str:
    """The line that links the full assessment: an address as a link, a command as code."""
    link = str(form["full_assessment"])
    if link.startswith(("http://", "https://")):  # an autolink: what could close it or start markup is percent-encoded
        shown = f"<{quote(link, safe=URL_SAFE)}>"
    else:  # a code span longer than any run of backticks inside it, so the text cannot leave it
        fence = "`" * (max((len(r) for r in re.findall(r"`+", link)), default=0) + 1)
        shown = f"{fence} {link} {fence}" if "`" in link else f"`{link}`"
    return f"Full assessment (every category, stage, source and warning): {shown}"
