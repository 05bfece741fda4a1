"""`footprint kernels analyze`: what the GPU (or, without GPU events, the CPU) did in a PyTorch profiler trace.

This module is the entry point and keeps the public names; the work is split by concern:

- `reader`: streaming reader (msgspec on event slices, standard-library fallback), archives, the one pass;
- `parallel`: that pass split over worker processes for a big plain .json (one per idle core);
- `multirank`: a directory (or archive) of per-rank traces analysed together (`kernels analyze DIR`);
- `opmodels`: FLOP and byte models of ops (TraceLens' formulas), kernel-name classes, dtypes;
- `intervals`: timeline interval arithmetic (union, difference, busy time);
- `linking`: the CPU op tree, kernel -> launching op -> modelled op;
- `gpu`: per-event classification and aggregation (timeline, categories, ops, launch overhead);
- `steps`: ProfilerStep spans, step membership, the `--steps all|steady|N` choice;
- `cpu`: CPU operators of a trace without GPU events;
- `energy`: a run's GPU or CPU (RAPL) energy attributed to the timeline;
- `analysis`: `analyze_trace`, which ties them together;
- `render`: the text table and JSON.

Conventions (the README's "Kernel traces" section says the same) are in `CONVENTIONS`.
"""

from __future__ import annotations

from typing import Any

from footprint.errors import FootprintError
from footprint.kernels.analysis import analyze_trace
from footprint.kernels.energy import attribute_energy
from footprint.kernels.gpu import CONVENTIONS
from footprint.kernels.opmodels import CATEGORIES, MATRIX_CATEGORIES, SHORT_KERNEL_US
from footprint.kernels.render import fmt_count, format_us, render_table, to_json
from footprint.kernels.steps import STEP_CHOICES


def main_analyze(args: Any) -> int:
    """`footprint kernels analyze TRACE [--steps all|steady|N] [--include-unlinked] [--power RUN_DIR] [--top N]
    [--format table|json] [-o FILE]`."""
    top = getattr(args, "top", 20)
    if top is None or top < 0:
        raise FootprintError(f"--top must be >= 0, got {top}", key="--top")
    result = analyze_trace(
        args.trace,
        power=getattr(args, "power", None),
        top=top,
        steps=getattr(args, "steps", "steady"),
        include_unlinked=getattr(args, "include_unlinked", False),
    )
    text = to_json(result) if getattr(args, "format", "table") == "json" else render_table(result)
    write_out(text, getattr(args, "output", None))
    return 0


def write_out(text: str, output: str | None) -> None:
    """To a file through the one safe writer (saying so on stderr), or to stdout (no file, or '-')."""
    import sys

    if output and output != "-":
        from footprint.outputs import shown, write_text

        write_text(output, text)
        print(f"wrote {shown(output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)


__all__ = [
    "CATEGORIES",
    "CONVENTIONS",
    "MATRIX_CATEGORIES",
    "SHORT_KERNEL_US",
    "STEP_CHOICES",
    "analyze_trace",
    "attribute_energy",
    "fmt_count",
    "format_us",
    "main_analyze",
    "render_table",
    "to_json",
]
