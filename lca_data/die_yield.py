"""Silicon consumed per good die: the ADEME/Hubblo calculator's loss model (hubblo-org/gpu-calculator,
src/lib/gpu/calculations.ts): dies per 300 mm wafer with 0.2 mm kerf and edge loss, times the usable share
exp(-sqrt(A/100 x 0.1)) (Murphy-like yield at 0.1 defects/cm2).

In the data layer because two places use it: the parametric model (footprint.lca.parametric) and
lca_data/tools/convert_ademe.py, which derives the per-mm2 die factor from ADEME's per-card dies.
"""

from __future__ import annotations

import math

WAFER_DIAMETER_MM = 300.0
KERF_MM = 0.2
DEFECT_DENSITY_PER_CM2 = 0.1


def die_area_with_losses(area_mm2: float) -> float:
    """Silicon consumed per good die (mm2): wafer-edge, kerf and defect losses included."""
    if area_mm2 < 1:
        return 0.0
    with_kerf = (math.sqrt(area_mm2) + KERF_MM) ** 2
    radius = WAFER_DIAMETER_MM / 2
    dies = round(math.pi * radius * radius / with_kerf - math.pi * WAFER_DIAMETER_MM / math.sqrt(2 * with_kerf))
    covered = area_mm2 * dies / (math.pi * radius * radius)
    usable = math.exp(-math.sqrt(area_mm2 / 100 * DEFECT_DENSITY_PER_CM2))
    return area_mm2 / (covered * usable)
