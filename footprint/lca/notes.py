"""An assessment's caveats in groups: one line per group to read, every item to look up.

An assessment carries dozens of caveats (warnings, the use phase's scope per category, contested data);
listed flat they are a wall nobody reads. `note_groups` sorts them into a few groups (the measurement
and inputs, embodied impacts, electricity and water, the use phase's scope, contested data), each with
a one-line summary and all its items. Every front end shows the same groups: `footprint assess` prints
the summaries (`--details` the items), reports fold the items under the summary (`<details>` in HTML),
the dashboard in expanders. The Assessment JSON keeps the flat lists (`warnings`, `use_scope`,
`contested_data`): this module only arranges them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from footprint.lca import categories as cat

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.assessment import Assessment

SUMMARY_CHARS = 170  # a summary line longer than this ends with "... (+N more)"
_EMBODIED = re.compile(r"embodied|parametric|geometry|distribution|correction|host share|vendor|per card|card ", re.I)
_USE = re.compile(r"use phase|electricity|water|grid|carbon intensity|per-kWh|EWIF|WUE", re.I)
_PARENS = re.compile(r"\s*\([^()]*\)")


@dataclass(frozen=True)
class NoteGroup:
    """One group of caveats: a title, a one-line summary and every item."""

    key: str  # inputs | embodied | electricity | scope | contested | other
    title: str
    summary: str
    items: tuple[str, ...]
    rows: tuple[dict[str, Any], ...] = ()  # contested data as table rows (factor, unit, value, other, ratio)

    def line(self) -> str:
        return f"{self.title} ({len(self.items)}): {self.summary}"


def note_groups(a: Assessment) -> list[NoteGroup]:
    """The assessment's caveats in display order; groups with no item are left out."""
    inputs, embodied, electricity, other = [], [], [], []
    own = set(a.workload.notes)
    for w in a.warnings:
        if w in own:
            inputs.append(w)
        elif _EMBODIED.search(w):
            embodied.append(w)
        elif _USE.search(w):
            electricity.append(w)
        else:
            other.append(w)
    gpu = a.workload.gpu.name if a.workload.gpu else "host"
    groups = [
        _plain("inputs", "Measurement and inputs", inputs, gpu),
        _plain("embodied", "Embodied impacts", embodied, gpu),
        _plain("electricity", "Electricity and water", electricity, gpu),
        _scope(a),
        _contested(a),
        _plain("other", "Other", other, gpu),
    ]
    return [g for g in groups if g is not None and g.items]


def note_count(groups: list[NoteGroup]) -> int:
    return sum(len(g.items) for g in groups)


def _short(item: str, gpu: str) -> str:
    """An item without its details in brackets and without the GPU's name in front (the summary's form)."""
    return _PARENS.sub("", item.removeprefix(f"{gpu}: ")).strip()


def summarise(parts: list[str], limit: int = SUMMARY_CHARS) -> str:
    """Parts joined with '; ' up to `limit` characters, then '... (+N more)'."""
    out: list[str] = []
    used = 0
    for i, p in enumerate(parts):
        if out and used + len(p) + 2 > limit:
            return "; ".join(out) + f"; ... (+{len(parts) - i} more)"
        out.append(p)
        used += len(p) + 2
    return "; ".join(out)


def _plain(key: str, title: str, items: list[str], gpu: str) -> NoteGroup | None:
    if not items:
        return None
    return NoteGroup(key, title, summarise([_short(x, gpu) for x in items]), tuple(items))


def scope_items(a: Assessment) -> list[str]:
    """Per category, what the use-phase value covers where it is not the whole life cycle of the grid mix."""
    if a.use_factors is None:
        return []
    return [f"{cat.by_key(k).name}: {s}" for k, s in zip(cat.keys(), a.use_factors.scope, strict=True) if s]


def _scope(a: Assessment) -> NoteGroup | None:
    items = scope_items(a)
    if not items:
        return None
    lower = sum("lower bound" in x for x in items)
    proxy = sum("proxy" in x for x in items)
    parts = [f"{len(items)} of {len(cat.keys())} categories cover less than the whole life cycle of the electricity"]
    if lower:
        parts.append(f"{lower} lower bounds (direct emissions or fuel burned only)")
    if proxy:
        parts.append(f"{proxy} with proxies for technologies without an open factor")
    return NoteGroup(
        "scope", "Scope of the use phase", ": ".join([parts[0], ", ".join(parts[1:])]) if parts[1:] else parts[0], tuple(items)
    )


def _ratio_text(c: dict[str, Any]) -> str:
    r = c.get("ratio")
    return "one of the two is zero" if r is None else f"ratio {r:.3g}"


def contested_items(a: Assessment) -> list[str]:
    """One line per contested factor: its value and each disagreeing source, with the ratio."""
    from footprint.lca.assessment import num

    groups: dict[str, list[dict[str, Any]]] = {}
    for c in a.contested:
        groups.setdefault(c["factor"], []).append(c)
    out = []
    for factor, cs in groups.items():
        first = cs[0]
        others = "; ".join(f"{num(c['second_value'])} ({c['second_source']}, {_ratio_text(c)})" for c in cs)
        why = "; ".join(dict.fromkeys(c["note"] for c in cs if "in_range" in c and c.get("note")))
        line = f"{factor} [{first.get('unit', '')}]: {num(first['value'])} ({first['source']}) vs {others}"
        out.append(line + (f" — {why}" if why else ""))
    return out


def contested_rows(a: Assessment) -> list[dict[str, str]]:
    """Contested factors as table rows (the report's and the dashboard's table)."""
    from footprint.lca.assessment import num

    return [
        {
            "factor": c["factor"],
            "unit": c.get("unit", ""),
            "value (source)": f"{num(c['value'])} ({c['source']})",
            "other source": f"{num(c['second_value'])} ({c['second_source']})",
            "ratio": "one is zero" if c.get("ratio") is None else f"{c['ratio']:.3g}",
        }
        for c in a.contested
    ]


def _contested(a: Assessment) -> NoteGroup | None:
    items = contested_items(a)
    if not items:
        return None
    ranked = sorted((c for c in a.contested if c.get("ratio")), key=lambda c: -abs(_log10(c["ratio"])))
    top = ", ".join(f"{_PARENS.sub('', c['factor'])} ({_fold(c['ratio'])})" for c in ranked[:2])
    outside = sum(1 for c in a.contested if c.get("in_range") is False)
    spans = (
        f"Monte Carlo ranges span both except {outside} ill-posed comparison{'s' if outside > 1 else ''}"
        if outside
        else "their Monte Carlo ranges span both"
    )
    summary = f"{len(items)} factors with sources more than 3x apart ({spans})"
    return NoteGroup(
        "contested", "Contested data", summary + (f"; largest: {top}" if top else ""), tuple(items), tuple(contested_rows(a))
    )


def _log10(x: float) -> float:
    import math

    return math.log10(x) if x > 0 else 0.0


def _fold(ratio: float) -> str:
    """A ratio as 'Nx' whichever source is larger."""
    r = ratio if ratio >= 1 else 1 / ratio
    return f"{r:,.0f}x" if r >= 10 else f"{r:.2g}x"
