"""A run record as a person reads it: how each device's energy was obtained (measured, simulated or estimated), and
the record's notebook view (`RunRecord`: the dict `Tracker.run` is, with a short `repr` and an HTML device table).

Imports only the core's notebook helpers: `to_workload` and the tracker build on it.
"""

from __future__ import annotations

import math
from typing import Any

from footprint.lca.notebook import html_table, short, text_html

ENERGY_KINDS = ("measured", "simulated", "estimated")


def energy_kind(d: dict[str, Any]) -> str:
    """How one device's energy was obtained: measured (a real meter), simulated (a fake NVML: `measured: false`
    with a meter's method) or estimated (a model: TDP x load, codecarbon)."""
    if d.get("measured") is not False:
        return "measured"
    return "estimated" if d.get("method") in ("estimated", "not measured", "codecarbon") else "simulated"


def device_kwh(d: dict[str, Any]) -> float | None:
    """A device's energy in kWh; None where it has no finite positive reading (not measured, never 0)."""
    v = d.get("energy_j")
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return v / 3.6e6 if ok else None


class RunRecord(dict):
    """`Tracker.run`: the run.json dict, whose repr is its headline and whose HTML view is its device table."""

    def _devices(self) -> list[dict[str, Any]]:
        return [d for d in self.get("devices") or [] if isinstance(d, dict)]

    def summary_lines(self) -> list[str]:
        from footprint.lca.assessment import num

        energy = self.get("energy") or {}
        total = energy.get("total_j")
        kinds = [energy_kind(d) for d in self._devices()]
        how = ", ".join(f"{kinds.count(k)} device(s) {k}" for k in ENERGY_KINDS if k in kinds) or "no device"
        steps, tokens = self.get("steps"), self.get("tokens")
        return [
            f"Run: {self.get('name')} ({self.get('run_dir') or 'in memory'})",
            f"  {float(self.get('duration_s') or 0):,.1f} s  |  energy: "
            + ("n/a" if total is None else f"{num(total / 3.6e6)} kWh")
            + f" ({how})  |  steps: {'n/a' if steps is None else f'{int(steps):,}'}, tokens: "
            + ("n/a" if tokens is None else f"{int(tokens):,}"),
            "  footprint.assess(run) for its footprint; dict(run) for every field",
        ]

    def __repr__(self) -> str:
        return short(self.summary_lines())

    def _repr_html_(self) -> str:
        from footprint.lca.assessment import num

        rows = [
            [d.get("name"), d.get("component", "gpu"), num(device_kwh(d)), energy_kind(d), d.get("method")]
            for d in self._devices()
        ]
        table = html_table(["Device", "Component", "Energy (kWh)", "Obtained", "Method"], rows, "Devices")
        return text_html("\n".join(self.summary_lines())) + table
