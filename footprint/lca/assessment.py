"""Assessment: the result of the LCA, and its plain renderings (JSON, table, CSV, Markdown).

JSON shape (ARCHITECTURE.md): {"name", "energy_kwh", "facility_energy_kwh", "gpu_hours",
"gpu_equivalents", "impacts": {<category>: {"unit", "total", "by_stage", "by_component", "low",
"high", "median", "iqr", "not_modelled", "sensitivity", "normalised", "use_scope", "dominant_stage",
"dominant_stage_draws", "characterisation", "use_long_term"}},
"single_score", "electricity_factors", "contested_data",
"materials", "by_gpu_model" (each GPU model's part of a mixed run, else null), "water_l": {"on_site", "off_site",
"total"}, "sources", "warnings"}.
"Not available" is ``null`` in JSON and "n/a" in text, never 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from footprint.lca import categories as cat
from footprint.lca import notebook
from footprint.lca.uncertainty import METHOD as SENSITIVITY_METHOD
from footprint.lca.units import compact, display_unit
from footprint.lca.workload_data import HOST_ONLY

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.electricity import UseFactors, Zone
    from footprint.lca.workload_data import Workload


DOMINANCE_SHARE = 0.9  # a stage is called dominant only where at least this share of the Monte Carlo draws agree


@dataclass(frozen=True)
class CategoryResult:
    key: str
    name: str
    unit: str
    total: float
    by_stage: dict[str, float | None]
    by_component: dict[str, float | None]
    low: float
    high: float
    not_available: tuple[str, ...] = ()
    not_modelled: tuple[str, ...] = ()  # stages without an open factor: null, never counted as a share or dominant
    median: float | None = None  # Monte Carlo median and interquartile range (None without a Monte Carlo)
    iqr: tuple[float, float] | None = None
    sensitivity: dict[str, Any] | None = None  # the inputs that drive the variance (footprint.lca.uncertainty)
    stage_votes: dict[str, float] | None = None  # per stage: share of the Monte Carlo draws in which it is largest
    characterisation: str = ""  # the characterisation method behind the use-phase factor (and the embodied data)
    use_long_term: dict[str, Any] | None = None  # use stage without and with long-term emissions, where they differ
    lower_bound: tuple[str, ...] = ()  # stages whose value is a labelled lower bound (an inventory covering part of
    # the chain): their share is a bound too, shown "≥", never as a plain (often 0 %) share

    def with_stats(
        self, q: Any, sensitivity: dict[str, Any] | None = None, stage_votes: dict[str, float] | None = None
    ) -> CategoryResult:
        """The Monte Carlo's percentiles (2.5, 25, 50, 75, 97.5), sensitivity table and stage votes; low-high always
        hold the total."""
        lo, q25, med, q75, hi = (float(x) for x in q)
        return replace(
            self,
            low=min(lo, self.total),
            high=max(hi, self.total),
            median=med,
            iqr=(q25, q75),
            sensitivity=sensitivity,
            stage_votes=stage_votes,
        )

    def share(self, stage: str) -> float | None:
        """The stage's share of the total; None where it is not available, or where any stage is not modelled
        (a share of an incomplete total would read as "manufacturing 100 %")."""
        v = self.by_stage.get(stage)
        if v is None or not self.total or self.not_modelled:
            return None
        return v / self.total

    @property
    def central_dominant_stage(self) -> str | None:
        """The stage with the largest share of the central values; None where a stage is not modelled."""
        if self.not_modelled:
            return None
        stages = {k: abs(v) for k, v in self.by_stage.items() if v is not None}
        return max(stages, key=stages.get) if stages and any(stages.values()) else None

    @property
    def dominant_stage_draws(self) -> float | None:
        """Share of the Monte Carlo draws in which the central values' dominant stage is also the largest (None
        without a Monte Carlo, or where no stage dominates the central values)."""
        stage = self.central_dominant_stage
        if stage is None or self.stage_votes is None:
            return None
        return self.stage_votes.get(stage, 0.0)

    @property
    def dominant_stage(self) -> str | None:
        """The dominant stage, robust to the uncertainty: the central values' largest stage, and with a Monte Carlo
        only where at least DOMINANCE_SHARE of the draws agree (else None, "not determined (split)")."""
        share = self.dominant_stage_draws
        if share is not None and share < DOMINANCE_SHARE:
            return None
        return self.central_dominant_stage

    @property
    def dominant_text(self) -> str:
        """The dominant stage for tables: the stage, "not determined (split)" where the draws disagree, "not
        determined" where a stage is not modelled, "n/a" where nothing is known."""
        if self.dominant_stage is not None:
            return self.dominant_stage.replace("_", " ")
        if self.central_dominant_stage is not None:
            return "not determined (split)"
        return "not determined" if self.not_modelled else "n/a"

    def stage_text(self, stage: str) -> str:
        """A stage's share for tables: a percentage, "not modelled", or "n/a"."""
        if stage in self.not_modelled:
            return "not modelled"
        share = self.share(stage)
        if stage in self.lower_bound and share is not None:
            return f"≥{pct_sig(share, 2)}"  # a bound, with its digits: never a bare "0%"
        return pct(share)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "total": self.total,
            "by_stage": dict(self.by_stage),
            "by_component": dict(self.by_component),
            "low": self.low,
            "high": self.high,
            "median": self.median,
            "iqr": list(self.iqr) if self.iqr is not None else None,
            "dominant_stage": self.dominant_stage,
            "dominant_stage_draws": self.dominant_stage_draws,
            "characterisation": self.characterisation or None,
            "use_long_term": self.use_long_term,
            "not_available": list(self.not_available),
            "not_modelled": list(self.not_modelled),
            "lower_bound_stages": list(self.lower_bound),
            "sensitivity": self.sensitivity,
        }


@dataclass(frozen=True)
class Assessment:
    workload: Workload
    impacts: dict[str, CategoryResult]
    facility_energy_kwh: float
    water_l: dict[str, float | None]
    materials: dict[str, Any]
    embodied_method: str
    zone: Zone
    samples: int
    warnings: tuple[str, ...]
    source_ids: tuple[str, ...]
    use_factors: UseFactors | None = None  # the per-kWh set the use phase used
    contested: tuple[dict[str, Any], ...] = ()  # factors whose sources disagree by more than 3x
    normalised: dict[str, dict[str, float]] = field(default_factory=dict)  # EF 3.1 person-equivalents, points
    single_score: dict[str, Any] = field(default_factory=dict)  # EF 3.1 single score (Pt)
    # Monte Carlo 2.5-97.5 percentiles of gpu_hours, it_energy_kwh, facility_energy_kwh, water_l (empty: one evaluation)
    activity_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    parts: tuple[Assessment, ...] = ()  # a run with several GPU models: each model's own assessment (footprint.lca.mixed)

    def __getitem__(self, key: str) -> CategoryResult:
        return self.impacts[key]

    def __repr__(self) -> str:
        """The headline numbers with their units, never the whole object (75 KB of arrays)."""
        w, s = self.workload, self.single_score or {}
        mc = f"Monte Carlo, {self.samples:,} samples" if self.samples > 1 else "single evaluation"
        lines = [
            f"Assessment: {w.name} ({mc})",
            f"  {key_figures_line(self)}",
            f"  Hardware: {gpus_text(self)}  |  grid {w.grid} ({self.zone.name}), {pue_text(w)}",
            f"  Energy: {w.energy_method}",
        ]
        if s.get("value") is not None:
            lines.append(f"  Single score: {num(s['value'])} Pt (EF 3.1 weighting)")
        lines.append(
            "  16 EF 3.1 categories: a['climate_change'], ...; a.to_dict() for everything; "
            "footprint.report(a, 'report.html') for the report"
        )
        return notebook.short(lines)

    def _repr_html_(self) -> str:
        """Jupyter and VS Code: the key figures, the 16-category table and the stage chart (`footprint.reports.notebook`)."""
        view = notebook.ASSESSMENT_HTML
        return view(self) if view is not None else notebook.text_html(repr(self))

    @property
    def sources(self) -> list[dict[str, Any]]:
        from footprint.lca.database import db

        return db().cite(self.source_ids)

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        keys = cat.keys()
        return {
            "name": w.name,
            "description": w.description,
            "scenario": w.source,
            "energy_kwh": w.it_energy_kwh,
            "facility_energy_kwh": self.facility_energy_kwh,
            "gpu_hours": w.gpu_hours,
            "gpu_lifetimes": w.gpu_lifetimes,
            "gpu_equivalents": w.gpu_equivalents,
            "mfu": w.mfu,
            "mfu_method": w.mfu_method,
            "flops": w.flops,
            "training": training_numbers(self),
            "hardware": {
                "gpu": w.gpu.id if w.gpu else None,
                "gpu_name": w.gpu.name if w.gpu else HOST_ONLY,
                "count": w.count,
                "host_hours": w.host_hours if w.host_only else None,
                "host_lifetimes": w.host_lifetimes if w.host_only else None,
                "lifetime_h": w.lifetime_h,
                "utilization": w.utilization,
                "host": w.host,
                "embodied_method": self.embodied_method,
                "embodied_data": w.embodied_variant or "default",
            },
            "site": {
                "grid": w.grid,
                "grid_name": self.zone.name,
                "grid_year": self.zone.year,
                "pue": w.pue,
                "pue_method": w.pue_method,
                "wue_l_per_kwh": w.wue_l_per_kwh,
                "ewif_l_per_kwh": w.ewif_l_per_kwh,
                "ewif_method": w.ewif_method,
                "electricity_factors": w.electricity_factors.path if w.electricity_factors is not None else None,
                "carbon_intensity_kg_per_kwh": w.carbon_intensity,
                "carbon_intensity_hourly": w.hourly.to_dict() if w.hourly is not None else None,
                "preset": w.site_preset,
            },
            "method": {
                "gpu_hours": w.gpu_hours_method,
                "energy": w.energy_method,
                "embodied": f"{self.embodied_method}; allocated by "
                + ("host-hours" if w.host_only else "GPU-hours")
                + " / (lifetime x utilisation)",
                "use": "facility energy (IT energy x PUE) x per-kWh factors of the electricity"
                + (f" ({self.use_factors.label})" if self.use_factors else "")
                + (f"; {w.hourly.method()}" if w.hourly is not None else "")
                + "; water use adds the site's cooling water (IT energy x WUE) x the zone's AWARE factor",
                "characterisation": characterisation_text(self),
                "long_term_emissions": long_term_text(self),
                "normalisation": (self.single_score or {}).get("method"),
                "uncertainty": f"Monte Carlo, {self.samples} samples: low-high the 2.5-97.5 percentiles, iqr the 25-75; "
                "each factor drawn by its stated distribution (lognormal, median at the central value, by default); "
                "sensitivity: " + SENSITIVITY_METHOD
                if self.samples > 1
                else "none (single evaluation)",
            },
            "impacts": {k: self._impact_dict(k) for k in keys},
            "extras": {c.key: self.impacts[c.key].to_dict() for c in cat.extras()},
            "single_score": self.single_score,
            "electricity_factors": self._factor_set_dict(),
            "contested_data": [dict(c) for c in self.contested],
            "materials": self.materials,
            "by_gpu_model": by_gpu_model(self),
            "energy_by_device": [dict(d) for d in w.energy_devices] or None,
            "water_l": dict(self.water_l),
            "activity_ranges": {k: list(v) for k, v in self.activity_ranges.items()},
            "sources": self.sources,
            "warnings": list(self.warnings),
        }

    def _impact_dict(self, key: str) -> dict[str, Any]:
        d = self.impacts[key].to_dict()
        if key in self.normalised:
            d["normalised"] = self.normalised[key]
        if self.use_factors is not None:
            d["use_scope"] = self.use_factors.scope[cat.keys().index(key)] or None
        return d

    def _factor_set_dict(self) -> dict[str, Any] | None:
        uf = self.use_factors
        if uf is None:
            return None
        fs = self.workload.electricity_factors
        return {
            "set": uf.label,
            "file": fs.path if fs is not None else None,
            "row_sources": dict(zip(cat.keys(), fs.row_sources, strict=True)) if fs is not None else None,
            "zone": self.workload.grid,
        }

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_json_default)


EMBODIED_METHOD = "EF (the PEF indicators of the ADEME GPU LCA; the EF version is not stated by the source)"
LONG_TERM_TEXT = {
    "exclude": "excluded (EF-compliant datasets carry none): a factor that includes them, with no open short-term value "
    "beside it, is left out and its technology's share of the mix is a labelled lower bound",
    "include": "included where a source gives them (coal-mining spoil phosphate in freshwater eutrophication); factors "
    "that do not state their treatment are counted as published",
}


def characterisation_text(a: Assessment) -> str:
    """The characterisation methods behind the use phase, in one line for the method table (per category in
    ``impacts.<category>.characterisation``)."""
    by: dict[str, list[str]] = {}
    for k in cat.keys():
        by.setdefault(a.impacts[k].characterisation or "n/a", []).append(a.impacts[k].name)
    use = "; ".join(f"{m}: {len(names)} categor{'y' if len(names) == 1 else 'ies'}" for m, names in by.items())
    return f"use phase: {use}; embodied: {EMBODIED_METHOD}"


def long_term_text(a: Assessment) -> str:
    """site.long_term_emissions as counted, in words."""
    setting = a.workload.long_term_emissions
    if a.workload.electricity_factors is not None:
        return f"{setting}: the practitioner's factor file carries its own treatment"
    return f"{setting}: long-term emissions (over 100 years: spoil heaps, tailings) {LONG_TERM_TEXT[setting]}"


def long_term_rows(a: Assessment) -> list[list[str]]:
    """Freshwater eutrophication and ionising radiation: the use stage without and with long-term emissions, which
    one is counted, and what each covers (empty for a practitioner's factor file)."""
    rows = []
    for r in a.impacts.values():
        lt = r.use_long_term
        if not lt:
            continue
        unit = display_unit(r.unit)
        cells = [f"{num(lt[s])} {unit}" if lt[s] is not None else "not modelled" for s in ("exclude", "include")]
        what = "; ".join(
            f"{s}: {lt[f'{s}_scope']} (factors' long-term emissions: {lt[f'{s}_long_term']})" for s in ("exclude", "include")
        )
        rows.append([r.name, *cells, lt["counted"], what])
    return rows


LONG_TERM_HEADERS = ["Category", "Use, long-term excluded", "Use, long-term included", "Counted", "What each covers"]


def partial_text(a: Assessment) -> str:
    """'partial (N of 16 categories ...)' beside the single score, or "" where every category is EF 3.1 and modelled."""
    n = len((a.single_score or {}).get("partial_categories") or [])
    if not n:
        return ""
    return f"partial: {n} of {len(cat.keys())} categories not EF 3.1-characterised or not modelled"


def by_gpu_model(a: Assessment) -> list[dict[str, Any]] | None:
    """Each GPU model's own part of a run with several models, for the JSON; None for a single-model run."""
    if not a.parts:
        return None
    return [
        {
            "gpu": s.workload.gpu.id,
            "gpu_name": s.workload.gpu.name,
            "count": s.workload.count,
            "gpu_hours": s.workload.gpu_hours,
            "gpu_lifetimes": s.workload.gpu_lifetimes,
            "energy_kwh": s.workload.it_energy_kwh,
            "facility_energy_kwh": s.facility_energy_kwh,
            "embodied_method": s.embodied_method,
            "impacts": {k: s.impacts[k].total for k in cat.keys()},
            "single_score": (s.single_score or {}).get("value"),
        }
        for s in a.parts
    ]


def parts_text(a: Assessment) -> str:
    """Each GPU model's part in one line (energy and climate change), for the text faces; "" for one model."""
    unit = cat.by_key("climate_change").unit
    return "; ".join(
        f"{s.workload.count:,} x {s.workload.gpu.name}: {amount(s.workload.it_energy_kwh, 'kWh')} IT, "
        f"{amount(s.impacts['climate_change'].total, unit)}"
        for s in a.parts
    )


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, tuple):
        return list(obj)
    return str(obj)


def num(v: float | None, digits: int = 3) -> str:
    """Compact number for text output (3 significant digits, thousands separators); None -> n/a."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-2 <= a < 1e9:
        rounded = float(f"{v:.{digits}g}")
        decimals = max(digits - 1 - int(math.floor(math.log10(a))), 0)
        return f"{rounded:,.{decimals}f}"
    return f"{v:.{digits - 1}e}"


def qty(v: float | None, unit: str, *others: float | None) -> tuple[str, ...]:
    """``v`` and ``others`` (its low, high...) written in the unit that reads best for ``v`` (`units.compact`: "0.21 g
    CO2 eq", never "2.10e-04 kg CO2 eq"), then that unit: ("0.21", "0.15", "0.30", "g CO2 eq")."""
    factor, shown_unit = compact(v, display_unit(unit))
    return (*(num(None if x is None else x * factor) for x in (v, *others)), shown_unit)


def amount(v: float | None, unit: str) -> str:
    """A value with its readable unit in one string: "0.21 g CO2 eq", "1.14 Wh", "n/a"."""
    number, shown_unit = qty(v, unit)
    return number if v is None else f"{number} {shown_unit}"


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.0f}%"


def pct_sig(v: float | None, digits: int = 3) -> str:
    """A fraction as a percentage with significant figures: 0.406 -> "40.6%", 6.7e-5 -> "0.0067%" (never "0.0%")."""
    if v is None:
        return "n/a"
    return "0%" if v == 0 else f"{v * 100:.{digits}g}%"


def mfu_text(w: Workload) -> str:
    """The MFU with the peak it was taken against: value, dense peak per GPU and dtype, then how it was obtained."""
    if w.mfu is None:
        return "n/a"
    try:
        peak = f"{w.gpu.peak_flops(w.dtype) / 1e12:g} TFLOP/s dense {w.dtype} per GPU"
    except Exception:
        peak = f"dense {w.dtype} peak"
    return f"{pct_sig(w.mfu)} of {peak} ({w.mfu_method})"


def training_numbers(a: Assessment) -> dict[str, Any] | None:
    """The run's training story (footprint.tracking.story) plus climate change per million tokens and per step."""
    story = a.workload.training
    if not story:
        return None
    co2 = a.impacts["climate_change"].total if "climate_change" in a.impacts else None
    tokens, steps = story.get("tokens"), story.get("steps")
    return {
        **story,
        "kg_co2eq_per_million_tokens": co2 / tokens * 1e6 if co2 is not None and tokens else None,
        "kg_co2eq_per_step": co2 / steps if co2 is not None and steps else None,
    }


def training_facts(a: Assessment) -> dict[str, str]:
    """The training story as label -> text: one wording for `assess`, reports and the dashboard."""
    t = training_numbers(a)
    if not t:
        return {}

    def count(v: float | None) -> str:
        return "n/a" if v is None else f"{int(v):,}"

    facts = {
        "Steps and tokens": f"{count(t['steps'])} optimizer steps, {count(t['tokens'])} tokens "
        f"({num(t['tokens_per_s'])} tokens/s; median step {num(t['median_step_s'])} s)",
        "Per million tokens": f"{amount(t['kwh_per_million_tokens'], 'kWh')} IT, "
        f"{amount(t['kg_co2eq_per_million_tokens'], 'kg CO2 eq')} (life cycle: use and embodied)",
        "Per step": f"{amount(t['kwh_per_step'], 'kWh')} IT, {amount(t['kg_co2eq_per_step'], 'kg CO2 eq')}",
    }
    if t.get("ranks") or t.get("world_size"):
        ranks, hosts = t.get("ranks"), t.get("hosts") or []
        named = f" ({', '.join(hosts[:8])}{', ...' if len(hosts) > 8 else ''})" if hosts else ""
        facts["Job"] = (
            f"{count(ranks)} rank{'s' if ranks != 1 else ''} recorded of world size {count(t.get('world_size'))}, "
            f"on {len(hosts)} host{'s' if len(hosts) != 1 else ''}{named}"
        )
    shares = t.get("gpu_energy_share")
    if shares:
        order = ["train", "eval", "checkpoint", "idle", "train_and_idle"]
        keys = sorted(shares, key=lambda k: (order.index(k) if k in order else len(order), k))
        facts["GPU energy by window"] = ", ".join(f"{k.replace('_', ' ')} {pct_sig(shares[k])}" for k in keys)
    return facts


def summary_facts(a: Assessment) -> dict[str, str]:
    """The assessment's key figures as label -> text: one wording for reports and the dashboard."""
    w = a.workload
    grid = f"{w.grid} ({a.zone.name}{', ' + str(a.zone.year) if a.zone.year else ''})"
    if w.carbon_intensity is not None:
        grid += f", carbon intensity set to {w.carbon_intensity * 1000:g} g/kWh"
    facts = {
        "Hardware": f"{gpus_text(a)}, lifetime {w.lifetime_years:.3g} years x utilisation "
        f"{w.utilization:.0%}; host share {'on' if w.host else 'off'}",
        "GPU-hours": f"0 ({HOST_ONLY}; {num(w.host_hours)} host-hours)"
        if w.host_only
        else f"{num(w.gpu_hours)} ({w.gpu_hours_method})",
        "MFU": mfu_text(w),
        "Total FLOPs": "n/a" if w.flops is None else f"{w.flops:.3g} FLOP",
        "Energy": f"{amount(w.it_energy_kwh, 'kWh')} IT, {amount(a.facility_energy_kwh, 'kWh')} facility ({pue_text(w)}); "
        f"{w.energy_method}",
        "Grid": grid,
        "GPU lifetimes": hardware_text(a),
        "Water": water_text(a),
        "Embodied data": a.embodied_method,
        "Card geometry": a.materials.get("geometry") or "n/a",
    }
    if a.parts:
        facts["By GPU model"] = parts_text(a)
    return facts


def gpus_text(a: Assessment) -> str:
    """The run's GPUs: "8 x NVIDIA H100", or each model's count for a run with several models."""
    w = a.workload
    if w.gpu is None:
        return HOST_ONLY
    return " + ".join(f"{p.workload.count:,} x {p.workload.gpu.name}" for p in a.parts) or f"{w.count:,} x {w.gpu.name}"


def pue_text(w: Workload) -> str:
    """The PUE and, unless the scenario stated it, where it came from: a default is never invisible."""
    return f"PUE {w.pue:g}" + (f", {w.pue_method}" if w.pue_method and w.pue_method != "stated" else "")


SCORE_NOTE = (
    "Below, all 16 EF 3.1 categories; person-equivalents divide each by one world citizen's annual impact in it, and "
    "points (Pt) weight them into one single score (the EF 3.1 weights: a value choice)."
)


def key_figures(a: Assessment) -> list[tuple[str, str, str, str]]:
    """(label, value, range, detail) of what most readers came for, led by every report and the dashboard before
    anything in Pt: climate change, facility energy, water and GPU-hours, each with its Monte Carlo 2.5-97.5
    percentile range ("low - high"; "" for a single evaluation)."""
    w, cc, water, r = a.workload, a.impacts["climate_change"], a.water_l, a.activity_ranges

    def figure(value: float | None, unit: str, key: str) -> tuple[str, str]:
        """The value with its readable unit, and its range in the same unit ("" for a single evaluation)."""
        lo, hi = (cc.low, cc.high) if key == "climate_change" else r.get(key, (None, None))
        v, low, high, shown_unit = qty(value, unit, lo, hi)
        text = v if value is None or not shown_unit else f"{v} {shown_unit}"
        return text, f"{low} - {high}" if lo is not None and hi is not None and lo != hi else ""

    on, off, _ = qty(water["on_site"], "L", water["off_site"])
    return [
        ("Climate change", *figure(cc.total, cc.unit, "climate_change"), "life cycle, all stages"),
        (
            "Energy",
            *figure(a.facility_energy_kwh, "kWh", "facility_energy_kwh"),
            f"facility: {amount(w.it_energy_kwh, 'kWh')} IT x {pue_text(w)}",
        ),
        ("Water", *figure(water["total"], "L", "water_l"), f"on-site {on}, off-site {off}"),
        ("Host-hours", num(w.host_hours), "", HOST_ONLY)
        if w.host_only
        else ("GPU-hours", *figure(w.gpu_hours, "", "gpu_hours"), f"{w.count:,} x {w.gpu.name}"),
    ]


def water_text(a: Assessment) -> str:
    """Water in one readable unit: "5.89 mL (on-site 1.71, off-site 4.18)"."""
    w = a.water_l
    total, on, off, unit = qty(w["total"], "L", w["on_site"], w["off_site"])
    return f"{total} {unit} (on-site {on}, off-site {off})" if w["total"] is not None else "n/a"


def key_figures_line(a: Assessment) -> str:
    """The key figures in one line, with their ranges: the text table's first line under the name."""
    return "  |  ".join(f"{label}: {value}" + (f" ({rng})" if rng else "") for label, value, rng, _ in key_figures(a))


def plain(x: float) -> str:
    """A small number a person reads at a glance: 24.2, 0.38, 0.00042 (`num`, without its exponent above 1e-4)."""
    return num(x) if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def lifetimes(x: float) -> str:
    """GPU lifetimes consumed, as every front end writes them: 2,514.13, 24.22, 0.38, 0.00042 (never rounded up)."""
    return f"{x:,.2f}" if x >= 1 else plain(x)


def hardware_text(a: Assessment) -> str:
    """The hardware a run uses up, one meaning everywhere: GPU lifetimes consumed (GPU-hours / (lifetime x
    utilisation)) and their mass (lifetimes x card mass); Falk et al.'s GPU-equivalents are that number rounded
    up, said as such, and only from one whole GPU on (a 19-second run is not "1 GPU-equivalent")."""
    w, m = a.workload, a.materials
    if w.host_only:
        return (
            f"{HOST_ONLY}: {lifetimes(w.host_lifetimes)} server lifetimes consumed "
            f"({num(w.host_hours)} host-hours / ({w.lifetime_years:.3g} years x {w.utilization:.0%}))"
        )
    text = f"{lifetimes(w.gpu_lifetimes)} GPU lifetimes consumed ({plain(m['mass_consumed_kg'])} kg of hardware)"
    if w.gpu_lifetimes >= 1:
        text += f"; {w.gpu_equivalents:,} GPU-equivalents when rounded up"
    return text


SENSITIVITY_NOTE = (
    "Which inputs drive each category's Monte Carlo variance: share = squared correlation of the input's draws with "
    "the total, normalised to 100 % over the inputs (from the same draws as low-high). IQR: 25th-75th percentiles."
)


def sensitivity_rows(a: Assessment, top: int = 3) -> list[dict[str, str]]:
    """Per category (then the single score): central value, median, IQR and the inputs that drive the variance,
    one wording for the reports and the dashboard; empty without a Monte Carlo."""

    def drivers(sens: dict[str, Any] | None) -> str:
        items = (sens or {}).get("inputs") or []

        def share(v: float) -> str:
            return f"{v:.0%}" if v >= 0.005 else "<1%"

        return "; ".join(f"{x['input']} {share(x['share'])} ({x['distribution']})" for x in items[:top]) or "n/a"

    rows = []
    for k in cat.keys():
        r = a.impacts[k]
        if r.iqr is None:
            continue
        central, median, q25, q75, unit = qty(r.total, r.unit, r.median, *r.iqr)
        rows.append(
            {
                "Category": r.name,
                "Central": central,
                "Median": median,
                "IQR": f"{q25} - {q75}",
                "Unit": unit,
                "Drivers of the variance": drivers(r.sensitivity),
            }
        )
    s = a.single_score
    if rows and s.get("iqr"):
        rows.append(
            {
                "Category": "Single score",
                "Central": num(s["value"]),
                "Median": num(s.get("median")),
                "IQR": f"{num(s['iqr'][0])} - {num(s['iqr'][1])}",
                "Unit": "Pt",
                "Drivers of the variance": drivers(s.get("sensitivity")),
            }
        )
    return rows


PE_NOTE = "Person-eq.: impact / EF 3.1 normalisation factor (a world citizen's annual impact = 1)."
