"""One palette for every figure: the report's matplotlib figures, the fleet report and the dashboard's charts.

A colour means the same thing wherever it appears: the use phase is green and the GPU die red in the
report, the fleet report and every dashboard page. Colours are Tableau 10 (distinguishable in print and
under the common colour-vision deficiencies). Keys are the engine's (`footprint.lca.categories`): stages
`manufacturing, transport, use, end_of_life`; components `gpu_die, memory, board, heatsink, casing,
upstream_transport, distribution, end_of_life, host_share, electricity, on_site_water`.
"""

from __future__ import annotations

BLUE, ORANGE, RED, TEAL, GREEN = "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F"
YELLOW, PURPLE, PINK, BROWN, GREY = "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F", "#BAB0AC"
LIGHT_ORANGE, DARK_TEAL = "#FFBE7D", "#499894"

#: Life-cycle stages.
STAGES: dict[str, str] = {"manufacturing": BLUE, "transport": ORANGE, "use": GREEN, "end_of_life": PURPLE}

#: Components of an assessment's `by_component` (embodied parts, then the use phase's).
COMPONENTS: dict[str, str] = {
    "gpu_die": RED,
    "memory": TEAL,
    "board": YELLOW,
    "heatsink": BROWN,
    "casing": GREY,
    "upstream_transport": ORANGE,
    "distribution": LIGHT_ORANGE,
    "end_of_life": PURPLE,
    "host_share": PINK,
    "electricity": GREEN,
    "on_site_water": DARK_TEAL,
    "board_and_chips": YELLOW,  # the materials breakdown: board, GPU package, memory and other parts
}

#: Series without a meaning of their own (scenarios compared, devices of a run), in order.
SERIES: tuple[str, ...] = (BLUE, ORANGE, GREEN, RED, PURPLE, TEAL, YELLOW, BROWN, PINK, GREY)

#: Neutrals: "not available" hatching, element ranges, muted text, error whiskers.
NOT_AVAILABLE, MATERIAL, MUTED, WHISKER = "#BBBBBB", BROWN, "#777777", "#444444"


def label(key: str) -> str:
    """A stage or component key as people read it: 'end_of_life' -> 'end of life'."""
    return key.replace("_", " ")


def stage(key: str) -> str:
    return STAGES.get(key, GREY)


def component(key: str) -> str:
    return COMPONENTS.get(key, GREY)


def series(i: int) -> str:
    return SERIES[i % len(SERIES)]


def vega_scale(colours: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, list[str]]:
    """A Vega-Lite colour scale with the palette's colours; its domain is each key's label (`labels`, else `label`)."""
    keys = list(labels or colours)
    return {"domain": [(labels or {}).get(k) or label(k) for k in keys], "range": [colours.get(k, GREY) for k in keys]}
