"""A fleet's jobs as the engine's batch: the Workload a job of one GPU model and site amounts to, and every
assessable ledger row grouped by factor set (`assess_index`). Read by the ledger (per-job ranges) and the report.

Layer: producers (`footprint.fleet`); imports the core (`footprint.lca`) only.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def template(gpu: str, site: dict[str, Any], sets: list[str] | None = None) -> Any:
    """The Workload a job of this GPU model and site amounts to, built as `workload_from_run` builds it."""
    from footprint.lca.workload import apply_overrides, run_scenario, workload_from_dict

    record = {"name": "fleet", "devices": [{"name": gpu, "component": "gpu"}], "duration_s": 3600.0, "site": site}
    record["energy"] = {"total_j": 3.6e6}
    return workload_from_dict(apply_overrides(run_scenario(record), sets or [], "--set"), "--set")


def _site(grid: Any, pue: Any) -> dict[str, Any]:
    site: dict[str, Any] = {}
    if isinstance(grid, str) and grid:
        site["grid"] = grid
    if pue is not None and not (isinstance(pue, float) and np.isnan(pue)):
        site["pue"] = float(pue)
    return site


def assess_index(
    df: Any, sets: list[str] | None = None, bases: dict[tuple[Any, ...], Any] | None = None
) -> tuple[Any, np.ndarray, list[str | None]]:
    """(BatchAssessment over the assessable rows, their positions in ``df``, a reason for every row left out).
    ``bases``: the engine's per-factor-set results kept from chunk to chunk (each is one engine run)."""
    import pandas as pd

    from footprint.lca.batch import Basis, BatchAssessment

    reasons: list[str | None] = [None] * len(df)
    energy = df["energy_j"].to_numpy(dtype=float, na_value=np.nan)
    hours = df["gpu_hours"].to_numpy(dtype=float, na_value=np.nan)
    model = df["gpu_model"].to_numpy(dtype=object)
    name = df["gpu_name"].to_numpy(dtype=object)
    ok = np.ones(len(df), bool)

    def leave_out(mask: np.ndarray, why: Any) -> None:
        for i in np.nonzero(mask)[0].tolist():
            ok[i] = False
            text = why(i) if callable(why) else why
            reasons[i] = text if reasons[i] is None else f"{reasons[i]}; {text}"

    leave_out(~(energy > 0), "no energy measured")
    leave_out(~(hours > 0), "no GPU time in the window")
    unknown = np.array([m is None or m != m for m in model], bool)
    leave_out(unknown, lambda i: f"GPU model {name[i]!r} is not in the catalogue (see `footprint gpus`, or --gpu-type at import)")
    rows = np.nonzero(ok)[0]
    grid = np.array([g if isinstance(g, str) and g else None for g in df["grid"].to_numpy(dtype=object)[rows]], object)
    pue = pd.to_numeric(pd.Series(df["pue"].to_numpy(dtype=object)[rows]), errors="coerce").to_numpy(float)
    keys = pd.DataFrame({"m": model[rows], "g": grid, "p": pue})
    codes = keys.groupby(["m", "g", "p"], dropna=False, sort=False).ngroup().to_numpy()
    first = pd.Series(np.arange(len(rows))).groupby(codes).first().to_numpy()
    cache = {} if bases is None else bases
    used = []
    for i in first:
        m, g, p = keys["m"].iloc[i], keys["g"].iloc[i], keys["p"].iloc[i]
        k = (m, g, None if p != p else float(p))
        if k not in cache:
            cache[k] = Basis.of(template(m, _site(g, p), sets))
        used.append(cache[k])
    return BatchAssessment(used, codes.astype(np.int64), hours[rows], energy[rows] / 3.6e6), rows, reasons
