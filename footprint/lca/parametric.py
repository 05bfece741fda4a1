"""The ADEME/Hubblo parametric model of a graphics card's embodied impacts.

manufacturing = casing mass x f_casing + heatsink mass x f_heatsink + board area x f_board
              + GPU die area incl. losses x f_die + VRAM die area incl. losses x f_vram
              + card mass x f_upstream_transport;  end of life = card mass x f_eol;
distribution  = card mass x distance x f_mode (defaults: 9,908 km by plane + 1,000 km by truck).

Die losses follow the calculator (lca_data/die_yield.py). The GPU die's per-mm2 factor is, by default (correction
die_factor_from_measured_dies), the one ADEME's own per-card dies imply (lca_data/ademe_die_factor.csv); the
calculator's average factor stays the "published" variant. With the published conventions (die factor, and VRAM
``all_dies=False``) it reproduces the public calculator's A100 PCIe 40GB page (181 kg CO2 eq, 2,445 MJ, 0.00690 kg Sb eq): see
tests/test_validation.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lca_data.die_yield import die_area_with_losses

DEFAULT_DISTANCES_KM = {"plane": 9908.0, "truck": 1000.0, "boat": 0.0}
__all__ = ["card_components", "die_area_with_losses", "distribution", "vram_area_with_losses"]


def vram_area_with_losses(inputs: Mapping[str, float], mm2_per_gb: float, all_dies: bool = True) -> float:
    """VRAM silicon incl. losses (mm2): each die's area with losses, times the number of dies.

    A documented die area gives each die's area; otherwise the average VRAM density of the documented
    cards (mm2/GB) x capacity / dies does. ``all_dies=False`` is the calculator's published convention,
    which counts a documented die area once (lca_data/embodied_corrections.yaml, memory_all_dies).
    """
    if inputs.get("vram_die_area_mm2"):
        one = die_area_with_losses(inputs["vram_die_area_mm2"])
        return one * inputs.get("vram_dies", 1) if all_dies else one
    dies, capacity = inputs.get("vram_dies", 0), inputs.get("vram_capacity_gb", 0)
    if not dies or not capacity:
        return 0.0
    return die_area_with_losses(round(mm2_per_gb * capacity / dies)) * dies


def card_components(
    inputs: Mapping[str, float], factors: Mapping[str, np.ndarray], mm2_per_gb: float, all_dies: bool = True
) -> dict[tuple[str, str], np.ndarray]:
    """Per-card impacts by (component, stage); ``inputs`` in kg, cm2, mm2, GB."""
    mass = inputs["total_mass_kg"]
    return {
        ("casing", "manufacturing"): factors["casing"] * inputs.get("casing_mass_kg", 0.0),
        ("heatsink", "manufacturing"): factors["heatsink"] * inputs.get("heatsink_mass_kg", 0.0),
        ("board", "manufacturing"): factors["board"] * inputs.get("board_area_cm2", 0.0),
        ("gpu_die", "manufacturing"): factors["gpu_die"] * die_area_with_losses(inputs["gpu_die_area_mm2"]),
        ("memory", "manufacturing"): factors["memory"] * vram_area_with_losses(inputs, mm2_per_gb, all_dies),
        ("upstream_transport", "manufacturing"): factors["upstream_transport"] * mass,
        ("end_of_life", "end_of_life"): factors["end_of_life"] * mass,
    }


def distribution(
    mass_kg: float, factors: Mapping[str, np.ndarray], distances_km: Mapping[str, float] | None = None
) -> np.ndarray:
    """Impacts of shipping one card to its data centre (per-kg.km factors x mass x distance)."""
    dist = dict(DEFAULT_DISTANCES_KM if distances_km is None else distances_km)
    total = np.zeros_like(next(iter(factors.values())))
    for mode, km in dist.items():
        if km:
            total = total + factors[mode] * mass_kg * km
    return total
