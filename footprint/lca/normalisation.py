"""EF 3.1 normalisation and weighting: person-equivalents per category and a single score in Pt.

normalised_k  = impact_k / NF_k          (person-equivalents: a world citizen's annual impact = 1)
single score  = sum_k normalised_k x w_k (Pt; the 16 weights w_k sum to 1)

NF and w are the JRC EF 3.1 sets (lca_data/ef_normalisation_weighting.csv, source
jrc-ef31-normalisation-weighting). Normalisation makes the categories comparable in scale; weighting
is a value choice (the EF weights come from a panel and expert survey), so the person-equivalents
are always reported beside the single score, never replaced by it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from footprint.lca import categories as cat
from footprint.lca.database import db

SOURCE = "jrc-ef31-normalisation-weighting"
METHOD = "EF 3.1 normalisation (global, per person per year, reference 2010) and weighting (JRC, toxicity included)"
VALUE_CHOICE = (
    "Weighting is a value choice, not a natural-science result: the single score uses the EF 3.1 weights "
    "(panel and expert survey, Sala et al. 2018); the person-equivalents beside it are unweighted."
)


def factors() -> tuple[np.ndarray, np.ndarray]:
    """(normalisation factors, weights as fractions of 1) over the 16 categories in report order."""
    nw = db().normalisation
    keys = cat.keys()
    return np.array([nw[k][0] for k in keys]), np.array([nw[k][1] for k in keys])


def single_scores(totals: np.ndarray) -> np.ndarray:
    """Single score (Pt) of impact vectors over the 16 categories (last axis); NaN counted as 0."""
    nf, w = factors()
    return np.sum(np.nan_to_num(totals[..., : len(nf)], nan=0.0) / nf * w, axis=-1)


def normalise(
    impacts: dict[str, Any], score_stats: tuple[Any, dict[str, Any]] | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Per-category person-equivalents and points, and the single score, of an assessment's results;
    ``score_stats``: the Monte Carlo's percentiles of the score (2.5, 25, 50, 75, 97.5) and its sensitivity table."""
    nf, w = factors()
    per: dict[str, dict[str, float]] = {}
    by_stage: dict[str, float] = {s: 0.0 for s in cat.stages()}
    partial: list[str] = []
    reasons: dict[str, str] = {}
    for i, k in enumerate(cat.keys()):
        r = impacts[k]
        pe = float(r.total / nf[i])
        per[k] = {
            "person_equivalents": pe,
            "low": float(r.low / nf[i]),
            "high": float(r.high / nf[i]),
            "normalisation_factor": float(nf[i]),
            "weight_percent": float(w[i] * 100),
            "points": float(pe * w[i]),
        }
        for s, v in r.by_stage.items():
            if v is not None:
                by_stage[s] += float(v / nf[i] * w[i])
        why = partial_reason(r)
        if why:
            partial.append(r.name)
            reasons[r.name] = why
    total = float(sum(p["points"] for p in per.values()))
    for p in per.values():
        p["share_of_single_score"] = p["points"] / total if total else 0.0
    q, sens = score_stats if score_stats is not None else ((total, None, None, None, total), None)
    low, high = q[0], q[-1]
    score = {
        "value": total,
        "unit": "Pt",
        "low": float(min(low, total)),
        "high": float(max(high, total)),
        "median": None if q[2] is None else float(q[2]),
        "iqr": None if q[1] is None else [float(q[1]), float(q[3])],
        "sensitivity": sens,
        "by_stage": by_stage,
        "method": METHOD,
        "note": VALUE_CHOICE,
        "partial": bool(partial),
        "partial_categories": partial,
        "partial_reasons": reasons,
        "source": SOURCE,
    }
    return per, score


def partial_reason(r: Any) -> str:
    """Why a category makes the EF 3.1 single score partial ("" where it does not): a stage not modelled or not
    available, or a use-phase factor that is not EF 3.1-characterised (summing it would mix methods)."""
    if r.not_modelled:
        return f"{', '.join(r.not_modelled)} not modelled"
    if r.not_available:
        return f"{', '.join(r.not_available).replace('_', ' ')} not available"
    method = getattr(r, "characterisation", "")
    if method and method != cat.EF31:
        return f"use-phase factor: {method} (not EF 3.1)"
    return ""


def ranked(per: dict[str, dict[str, float]]) -> list[str]:
    """Categories by their share of the single score, largest first: which categories matter."""
    return sorted(per, key=lambda k: per[k]["points"], reverse=True)
