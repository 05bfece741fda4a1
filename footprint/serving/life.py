"""A model's whole life: its training record beside its serving records.

Mistral's Large 2 LCA (2025) proposes three indicators, reported here for any model footprint has both
records of: the absolute training impact, the marginal inference impact per request, and inference's
share of the life cycle (over a serving horizon, default one year at the measured traffic). The date
serving overtakes training is the import's end plus training / (serving per day at the measured traffic):
a projection of the measured rate, labelled so, not a forecast.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError
from footprint.lca import categories as cat


def training_workload(target: str | Path) -> Any:
    """A run directory or run.json (measured) or a scenario YAML (stated)."""
    from footprint.lca.workload import load_scenario
    from footprint.tracking.to_workload import workload_from_run

    p = Path(target)
    if p.is_dir() or p.name.endswith(".json"):
        return workload_from_run(p)
    if p.suffix in (".yaml", ".yml"):
        return load_scenario(p)
    raise FootprintError("expected a run directory, a run.json or a scenario .yaml", str(p), "--training")


def life(report: dict[str, Any], training: Any, model: str | None, horizon_days: float = 365.0) -> dict[str, Any]:
    """Training vs serving for one model of a serving report (the one with most output tokens by default)."""
    from footprint.lca.engine import assess

    models = report["models"]
    if model is None:
        chosen = max(models, key=lambda m: m.get("tokens_out") or 0.0)
    else:
        found = [m for m in models if m["model"] == model]
        if not found:
            raise FootprintError(
                f"no model {model!r} in the serving record; models: {', '.join(m['model'] for m in models)}", key="--model"
            )
        chosen = found[0]
    b = report["boundary"]
    a = assess(training, samples=0)
    train = {k: a.impacts[k].total for k in cat.keys()}
    days = max(report["days"], 1e-9)
    serve = chosen["impacts"][b]
    per_day = {k: (serve[k] or 0.0) / days for k in cat.keys()}
    cc_day = per_day["climate_change"]
    over = train["climate_change"] / cc_day if cc_day > 0 else None
    end = datetime.fromisoformat(report["end"].replace("Z", "+00:00"))
    horizon = {k: per_day[k] * horizon_days for k in cat.keys()}
    ratio = {k: (horizon[k] / (horizon[k] + train[k]) if (horizon[k] + (train[k] or 0)) > 0 else None) for k in cat.keys()}
    per_req = (chosen["per_unit"][b] or {}).get("per_request")
    return {
        "model": chosen["model"],
        "training": {
            "name": training.name,
            "gpu_hours": training.gpu_hours,
            "energy_kwh": training.it_energy_kwh,
            "method": training.energy_method,
            "impacts": train,
        },
        "serving_per_day": per_day,
        "marginal_per_request": per_req,
        "horizon_days": horizon_days,
        "inference_share_of_life": ratio,
        "overtakes_after_days": over,
        "overtakes_on": (end + timedelta(days=over)).date().isoformat() if over is not None and over < 365 * 200 else None,
        "boundary": b,
        "note": "serving per day = the measured window's impact / its length; the overtaking date projects that rate "
        "(no growth or decay of traffic assumed)",
        "end": report["end"],
    }


def cumulative(lf: dict[str, Any], days: float | None = None) -> tuple[list[float], list[float], float]:
    """(days since the record's end, cumulative serving kg CO2 eq) and training's kg CO2 eq, for the plot."""
    train = lf["training"]["impacts"]["climate_change"]
    d = lf["overtakes_after_days"]
    span = days or max(30.0, 1.5 * d if d else lf["horizon_days"])
    xs = [span * i / 50 for i in range(51)]
    return xs, [x * lf["serving_per_day"]["climate_change"] for x in xs], train
