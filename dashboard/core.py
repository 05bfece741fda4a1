"""What the pages share: cached reads of the bundled data, what-if overrides, tables.

No LCA here: every number comes from ``footprint.assess`` (through ``workload_from_dict`` /
``workload_from_run``) or ``footprint.lca.database``. What-ifs are ``--set`` overrides applied with
``footprint.lca.workload.apply_overrides``, exactly as ``footprint assess --set`` applies them.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st
import yaml

from footprint.errors import FootprintError, ScenarioError
from footprint.lca import DEFAULT_SAMPLES
from footprint.lca import categories as cat
from footprint.lca.assessment import Assessment, amount, lifetimes, num, pct, plain, qty, summary_facts
from footprint.lca.units import UnitParseError, display_unit
from footprint.lca.workload import (
    MAX_SCENARIO_BYTES,
    NO_GPU,
    SHIPPED_SCENARIOS,
    Workload,
    apply_overrides,
    parse_yaml_text,
    workload_from_dict,
)

REPO = Path(__file__).resolve().parents[1]
SCENARIO_DIR = SHIPPED_SCENARIOS  # the package's scenarios, as `footprint assess NAME` finds them
MAX_UPLOAD_BYTES = MAX_SCENARIO_BYTES  # 1 MB, the CLI's limit for a scenario file
SAMPLES = DEFAULT_SAMPLES  # Monte Carlo samples by default: the CLI's, so the same scenario shows the same range
MORE_SAMPLES = 10_000  # with the "more samples" toggle
USER_ERRORS = (FootprintError, UnitParseError)
STAGE_LABELS = {"manufacturing": "Manufacturing", "transport": "Transport", "use": "Use", "end_of_life": "End of life"}


def user_error_message(exc: BaseException) -> str:
    """The one-line message the CLI prints for a user mistake (without its 'footprint: error:' prefix)."""
    return str(exc)


# ---- cached reads of the bundled data -------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def database() -> Any:
    from footprint.lca.database import db

    return db()


@st.cache_data(show_spinner=False)
def gpu_options() -> dict[str, str]:
    """Catalogue id -> display name, in catalogue order."""
    return {g.id: g.name for g in database().gpus.values()}


@st.cache_data(show_spinner=False)
def zone_options() -> dict[str, str]:
    """codecarbon zone code -> 'CODE - Country' label (plus WORLD): names only, no zone's factors computed."""
    from footprint.lca.electricity import zone_names

    return {code: f"{code} - {name}" for code, name in zone_names().items()}


@st.cache_data(show_spinner=False)
def shipped_scenarios() -> dict[str, str]:
    """Label ('BLOOM-176B final training (bloom-176b.yaml)') -> path relative to the repository."""
    out = {}
    for p in sorted(SCENARIO_DIR.glob("*.yaml")):
        try:
            name = parse_yaml_text(p.read_text(), p.name).get("name") or p.stem
        except FootprintError:
            name = p.stem
        out[f"{name} ({p.name})"] = str(p.relative_to(REPO))
    return out


@st.cache_data(show_spinner=False, max_entries=64)
def read_scenario(path: str) -> dict[str, Any]:
    """A shipped scenario's mapping (a fresh copy on every call: cache_data returns copies)."""
    p = REPO / path
    if p.stat().st_size > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"file is larger than {MAX_SCENARIO_BYTES} bytes", path)
    return parse_yaml_text(p.read_text(), path)


def parse_upload(name: str, content: bytes) -> dict[str, Any]:
    """An uploaded or pasted scenario under the CLI's input contract: size-limited, UTF-8 (``footprint.inputs``),
    YAML within the loader's limits (an alias bomb is refused before it is built), then validated as a scenario
    (``workload_from_dict``) before anything serialises it (the caches key on its JSON)."""
    from footprint.inputs import decode

    if len(content) > MAX_UPLOAD_BYTES:
        raise ScenarioError(f"file is larger than {MAX_UPLOAD_BYTES} bytes ({len(content):,} bytes uploaded)", name)
    try:
        text = decode(content, name, "scenario YAML")
    except FootprintError as exc:
        raise ScenarioError(exc.detail, name) from None
    data = parse_yaml_text(text, name)
    workload_from_dict(data, name)  # a ScenarioError here names the key, as the CLI does
    return data


def data_key(data: dict[str, Any]) -> str:
    """A canonical, hashable form of a scenario mapping (the cache key of its assessment)."""
    return json.dumps(data, sort_keys=True, default=str)


@st.cache_resource(show_spinner=False, max_entries=512)
def _assess_key(key: str, file: str | None, samples: int) -> Assessment:
    from footprint.lca.engine import assess

    return assess(workload_from_dict(json.loads(key), file), samples=samples, seed=0)


def assess_data(data: dict[str, Any], file: str | None, samples: int) -> Assessment:
    """footprint.assess of a scenario mapping, cached (Assessments are frozen, shared read-only)."""
    try:
        key = data_key(data)
    except (TypeError, ValueError):  # keys JSON cannot sort (e.g. a number beside names): validate uncached
        from footprint.lca.engine import assess

        return assess(workload_from_dict(data, file), samples=samples, seed=0)
    return _assess_key(key, file, samples)


@st.cache_resource(show_spinner=False, max_entries=64)
def _workload_key(key: str, file: str | None) -> Workload:
    return workload_from_dict(json.loads(key), file)


def workload_of(data: dict[str, Any], file: str | None) -> Workload:
    """workload_from_dict, cached (the explorer's base scenario)."""
    try:
        key = data_key(data)
    except (TypeError, ValueError):
        return workload_from_dict(data, file)
    return _workload_key(key, file)


def assess_whatif(data: dict[str, Any], sets: list[str], file: str | None, samples: int) -> Assessment:
    """The scenario with ``--set`` overrides, through apply_overrides + workload_from_dict + assess."""
    return assess_data(apply_overrides(data, sets, file), file, samples)


@st.cache_resource(show_spinner=False, max_entries=128)
def _assess_run_key(run_dir: str, sets: tuple[str, ...], samples: int, mtime: float) -> Assessment:
    from footprint.lca.engine import assess
    from footprint.tracking.to_workload import workload_from_run

    return assess(workload_from_run(Path(run_dir), list(sets)), samples=samples, seed=0)


def assess_run(run_dir: str | Path, sets: list[str], samples: int) -> Assessment:
    """footprint.assess(workload_from_run(run_dir, sets)), cached until run.json changes."""
    p = Path(run_dir)
    return _assess_run_key(str(p), tuple(sets), samples, (p / "run.json").stat().st_mtime)


# ---- what-ifs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MfuMode:
    """How an MFU change reaches the scenario: 'stated' (training.mfu), 'derived' (restated as
    training.flops + training.mfu) or 'disabled' (no FLOPs to divide)."""

    kind: str
    explanation: str


def mfu_mode(data: dict[str, Any], w: Workload) -> MfuMode:
    tr = data.get("training") or {}
    if "kernel_profile" in tr:
        return MfuMode(
            "disabled",
            "MFU is predicted from the kernel efficiency profile (training.kernel_profile): change the profile, not the MFU.",
        )
    if "flops" in tr and "mfu" in tr:
        return MfuMode(
            "stated",
            "The scenario states training FLOPs and MFU: GPU-hours = FLOPs / (dense peak x MFU), "
            "so MFU changes GPU-hours (and with them energy, unless energy is stated, and GPU lifetimes).",
        )
    if w.mfu is not None and w.flops:
        return MfuMode(
            "derived",
            f"MFU {w.mfu:.1%} is derived from model.parameters and model.tokens over the stated "
            f"GPU time. Moving the slider restates the run as training.flops = {w.flops:.4g} (derived) + "
            "training.mfu, so GPU-hours = FLOPs / (dense peak x MFU).",
        )
    return MfuMode(
        "disabled",
        "This scenario states neither training FLOPs + MFU nor model.parameters and model.tokens, "
        "so there is no FLOP count for an MFU to divide: add them to the scenario to explore MFU.",
    )


CONTROL_KEYS = ("mfu", "gpu", "count", "lifetime_years", "utilization", "grid", "pue", "wue", "ewif")


def _snap(value: float, step: float, lo: float, hi: float) -> float:
    return round(min(max(round(value / step) * step, lo), hi), 6)


def base_controls(w: Workload) -> dict[str, Any]:
    """The controls' values that reproduce the scenario as stated (sliders snapped to their steps)."""
    return {
        "mfu": _snap(w.mfu, 0.01, 0.01, 1.0) if w.mfu is not None else 0.4,
        "gpu": w.gpu.id if w.gpu else NO_GPU,
        "count": int(w.count),
        "lifetime_years": _snap(w.lifetime_years, 0.25, 0.25, 10.0),
        "utilization": _snap(w.utilization, 0.05, 0.05, 1.0),
        "grid": w.grid,
        "pue": _snap(w.pue, 0.01, 1.0, 3.0),
        "wue": None if w.wue_l_per_kwh is None else round(w.wue_l_per_kwh, 3),
        "ewif": None if w.ewif_l_per_kwh is None else round(w.ewif_l_per_kwh, 3),
    }


CONTROL_RANGES = {
    "mfu": (0.01, 1.0),
    "lifetime_years": (0.25, 10.0),
    "utilization": (0.05, 1.0),
    "pue": (1.0, 3.0),
    "wue": (0.0, 20.0),
    "ewif": (0.0, 50.0),
    "count": (1, 10_000_000),
}
CONTROL_STEPS = {"mfu": 0.01, "lifetime_years": 0.25, "utilization": 0.05, "pue": 0.01}


def parse_controls(raw: dict[str, str], gpus: dict[str, str], zones: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Control values from text (a link's query parameters); (values, what was ignored and why)."""
    values: dict[str, Any] = {}
    bad: list[str] = []
    for k, text in raw.items():
        if k not in CONTROL_KEYS:
            continue
        text = str(text).strip()
        if k == "gpu":
            try:
                values[k] = database().find_gpu(text).id
            except FootprintError as exc:
                bad.append(f"gpu: {exc.detail}")
            continue
        if k == "grid":
            if text.upper() in zones:
                values[k] = text.upper()
            else:
                bad.append(f"grid: unknown zone {text!r}")
            continue
        try:
            v = float(text)
        except ValueError:
            bad.append(f"{k}: expected a number, got {text!r}")
            continue
        lo, hi = CONTROL_RANGES[k]
        if not lo <= v <= hi:
            bad.append(f"{k}: {text} is outside {lo:g}-{hi:g}")
            continue
        values[k] = int(v) if k == "count" else _snap(v, CONTROL_STEPS[k], lo, hi) if k in CONTROL_STEPS else v
    return values, bad


def _changed(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False  # an emptied field keeps the scenario's value
    if isinstance(a, float) or isinstance(b, float):
        return not math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a != b


def flow_yaml(mapping: dict[str, Any]) -> str:
    """A mapping as a one-line YAML flow mapping, read back identically by apply_overrides."""
    return yaml.safe_dump(mapping, default_flow_style=True, sort_keys=False, width=1_000_000).strip()


def build_sets(
    data: dict[str, Any], w: Workload, chosen: dict[str, Any], base: dict[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """``--set`` overrides for the controls that differ from the scenario, and notes on what they mean."""
    base = base or base_controls(w)
    tr, site = dict(data.get("training") or {}), dict(data.get("site") or {})
    sets: list[str] = []
    notes: list[str] = []
    grid_changed = _changed(chosen.get("grid"), base["grid"])
    if grid_changed and "carbon_intensity" in site:
        restated_site = {k: v for k, v in site.items() if k != "carbon_intensity"}
        restated_site["grid"] = chosen["grid"]
        sets.append("site=" + flow_yaml(restated_site))
        notes.append(
            f"The scenario's carbon intensity ({site['carbon_intensity']}) describes its own grid "
            f"({base['grid']}); with {chosen['grid']} the zone's own intensity is used."
        )
    if _changed(chosen.get("mfu"), base["mfu"]):
        mode = mfu_mode(data, w)
        mfu = round(float(chosen["mfu"]), 6)
        if mode.kind == "stated":
            sets.append(f"training.mfu={mfu:g}")
        elif mode.kind == "derived":
            restated = {k: v for k, v in tr.items() if k not in ("gpu_hours", "duration")}
            restated.update(flops=float(w.flops or 0.0), mfu=mfu)
            sets.append("training=" + flow_yaml(restated))
            notes.append(
                f"MFU {mfu:.0%}: GPU time restated as training.flops {w.flops:.4g} (derived from the model) "
                "/ (dense peak x MFU) instead of the stated GPU time."
            )
    if _changed(chosen.get("gpu"), base["gpu"]):
        sets.append(f"hardware.gpu={chosen['gpu']}")
    if _changed(chosen.get("count"), base["count"]):
        sets.append(f"hardware.count={int(chosen['count'])}")
    if _changed(chosen.get("lifetime_years"), base["lifetime_years"]):
        sets.append(f"hardware.lifetime={float(chosen['lifetime_years']):g} years")
    if _changed(chosen.get("utilization"), base["utilization"]):
        sets.append(f"hardware.utilization={float(chosen['utilization']):g}")
    if grid_changed and "carbon_intensity" not in site:
        sets.append(f"site.grid={chosen['grid']}")
    if _changed(chosen.get("pue"), base["pue"]):
        sets.append(f"site.pue={float(chosen['pue']):g}")
    for key in ("wue", "ewif"):
        value = chosen.get(key)
        if value is not None and (base[key] is None or _changed(value, base[key])):
            sets.append(f"site.{key}={float(value):g} L/kWh")
    return sets, notes


def cli_command(target: str, sets: list[str]) -> str:
    """The equivalent ``footprint assess`` command line."""
    return " ".join(["footprint", "assess", shlex.quote(target), *(f"--set {shlex.quote(s)}" for s in sets)])


# ---- tables -------------------------------------------------------------------------------------


def quantity(value: float | None, unit: str) -> str:
    """A value in the unit that reads best for it ("0.210 g CO2 eq"); n/a where there is none."""
    return amount(value, unit)


def change(new: float | None, old: float | None) -> str | None:
    """Relative change for st.metric's delta ('+12.3 %'); None where there is nothing to compare."""
    if new is None or old is None:
        return None
    if old == 0:
        return None if new == 0 else f"{new:+.3g} (from 0)"
    return f"{(new - old) / abs(old):+.1%}"


def categories_table(a: Assessment, base: Assessment | None = None) -> list[dict[str, Any]]:
    """The 16 categories: total, unit, low-high, stage shares (and the base's total and the change)."""
    rows = []
    for k in cat.keys():
        r = a.impacts[k]
        b = base.impacts[k] if base is not None else None
        total, low, high, base_total, unit = qty(r.total, r.unit, r.low, r.high, b.total if b else None)  # one unit
        row: dict[str, Any] = {"Category": r.name, "Total": total, "Unit": unit}
        if b is not None:
            row["Base"] = base_total
            row["Change"] = change(r.total, b.total) or "0.0%"
        row["Low - high"] = f"{low} - {high}"
        for stage, label in STAGE_LABELS.items():
            row[label] = r.stage_text(stage)
        share = r.dominant_stage_draws
        row["Dominant stage"] = r.dominant_text + (f" ({share:.0%} of draws)" if share is not None else "")
        row["Characterisation"] = r.characterisation or "n/a"
        rows.append(row)
    return rows


def normalised_rows(a: Assessment, base: Assessment | None = None) -> list[dict[str, Any]]:
    """EF 3.1 person-equivalents and weighted points per category, largest share of the single score first."""
    rows = []
    for k in sorted(a.normalised, key=lambda k: a.normalised[k]["points"], reverse=True):
        n, r = a.normalised[k], a.impacts[k]
        row: dict[str, Any] = {
            "Category": r.name,
            "Person-equivalents": num(n["person_equivalents"]),
            "Low - high": f"{num(n['low'])} - {num(n['high'])}",
            "Weight": f"{n['weight_percent']:.2f}%",
            "Points (Pt)": num(n["points"]),
            "Share of single score": pct(n["share_of_single_score"]),
        }
        if base is not None and k in base.normalised:
            row["Change"] = change(n["person_equivalents"], base.normalised[k]["person_equivalents"]) or "0.0%"
        rows.append(row)
    return rows


def contested_rows(a: Assessment) -> list[dict[str, str]]:
    """Factors whose sources disagree by more than 3x (the Monte Carlo range spans them), as the report's table."""
    from footprint.lca.notes import contested_rows

    return contested_rows(a)


def stage_shares(a: Assessment) -> list[dict[str, Any]]:
    """Long-form stage shares (percent of each category's total) for the stacked bar chart; n/a left out."""
    out = []
    for k in cat.keys():
        r = a.impacts[k]
        for stage, label in STAGE_LABELS.items():
            s = r.share(stage)
            if s is not None:
                out.append({"category": r.name, "stage": label, "share": 100.0 * s})
    return out


def summary_rows(a: Assessment) -> list[dict[str, str]]:
    """The assessment's key figures (GPU-hours, MFU, energy, water, GPU lifetimes) as label/value rows."""
    return [{"": k, "value": v} for k, v in summary_facts(a).items()]


def materials_rows(a: Assessment) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(hardware mass rows, element range rows) from the assessment's materials: one meaning of the hardware mass,
    the GPU lifetimes consumed x each part's mass (as the report's figure)."""
    m = a.materials
    life = m["gpu_lifetimes"]
    mass = [
        {"item": "card mass (one GPU)", "kg": num(m["card_mass_kg"])},
        *({"item": f"  {k.replace('_', ' ')} (one GPU)", "kg": num(v)} for k, v in m["components_kg"].items()),
        {"item": "hardware consumed (GPU lifetimes x card mass)", "kg": plain(m["mass_consumed_kg"])},
        *({"item": f"  {k.replace('_', ' ')} consumed", "kg": plain(v * life)} for k, v in m["components_kg"].items() if v),
    ]
    elements = []
    est = m.get("elements_estimate") or {}
    for el, r in (est.get("elements") or {}).items():
        single = r["high_kg"] <= r["low_kg"]
        elements.append(
            {
                "element": el,
                "low kg": plain(r["low_kg"]),
                "high kg": plain(r["high_kg"]),
                "sources": "one value" if single else "range",
            }
        )
    return mass, elements


def compare_table(items: list[tuple[str, Assessment]]) -> list[dict[str, str]]:
    """Rows: key figures then the 16 categories; one column per assessment."""
    rows: list[dict[str, str]] = []

    def add(label: str, unit: str, values: list[float | None]) -> None:
        row = {"": label, "Unit": display_unit(unit) if unit else ""}
        for (name, _), v in zip(items, values, strict=True):
            row[name] = "n/a" if v is None else lifetimes(v) if label.startswith("GPU lifetimes") else num(v)
        rows.append(row)

    add("GPU-hours", "h", [a.workload.gpu_hours for _, a in items])
    add("IT energy", "kWh", [a.workload.it_energy_kwh for _, a in items])
    add("GPU lifetimes consumed", "", [a.workload.gpu_lifetimes for _, a in items])
    add("Hardware consumed", "kg", [a.materials["mass_consumed_kg"] for _, a in items])
    add("Water", "L", [a.water_l["total"] for _, a in items])
    for k in cat.keys():
        add(items[0][1].impacts[k].name, items[0][1].impacts[k].unit, [a.impacts[k].total for _, a in items])
    return rows


def relative_to_max(items: list[tuple[str, Assessment]]) -> list[dict[str, Any]]:
    """Each category's total as a percentage of the largest among the compared assessments (chart only)."""
    out = []
    for k in cat.keys():
        totals = [a.impacts[k].total for _, a in items]
        top = max((abs(t) for t in totals), default=0.0)
        for (name, a), t in zip(items, totals, strict=True):
            out.append({"category": a.impacts[k].name, "scenario": name, "percent of max": 100.0 * t / top if top else 0.0})
    return out


# ---- run directories ----------------------------------------------------------------------------


def find_runs(root: Path) -> list[Path]:
    """Run directories (with a run.json) at ``root`` itself or one level below it, never outside it."""
    if (root / "run.json").is_file():
        return [root]
    try:
        subdirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    base = root.resolve()
    return [p for p in subdirs if (p / "run.json").is_file() and p.resolve().is_relative_to(base)]


TIMELINE_BUCKETS = 1000  # time buckets per device on the Runs page (about one per pixel of a wide chart)


@st.cache_data(show_spinner=False, max_entries=32)
def read_run(run_dir: str, mtime: float) -> dict[str, Any]:
    """run.json, the power timeline (downsampled: min/mean/max per time bucket, never the raw samples) and the
    per-rank per-step MFU of a run directory. Cached on run.json's mtime: what is cached is O(buckets x devices),
    whatever the run's length, so a slider move never re-reads the samples."""
    from footprint.tracking import runrecord

    p = Path(run_dir)
    record = runrecord.read_record(p / "run.json")
    timeline = None
    note = None
    skipped: list[str] = []  # damaged parts and rank records, left out: said under the chart
    try:
        timeline = power_timeline(
            runrecord.power_timeline(p, buckets=TIMELINE_BUCKETS, notes=skipped), runrecord.device_labels(record)
        )
    except Exception as exc:  # damaged samples must not hide the rest of the run
        note = f"the power samples could not be read: {type(exc).__name__}: {exc}"
    if note is None and (timeline is None or timeline.empty):
        note = "no power samples in the run directory (no power timeline)"
    per_step: list[dict[str, Any]] = []
    for rec in runrecord.rank_records(p, skipped):
        values = ((rec.get("mfu") or {}).get("per_step_mfu")) or []
        for i, v in enumerate(values if isinstance(values, list) else []):
            if isinstance(v, (int, float)) and math.isfinite(v):
                per_step.append({"rank": f"rank {rec.get('rank')}", "step": i + 1, "MFU %": 100.0 * v})
    if skipped:
        note = "; ".join(([note] if note else []) + skipped)
    return {"record": record, "timeline": timeline, "samples_note": note, "per_step_mfu": per_step}


def power_timeline(timeline: Any, labels: dict[tuple[Any, str], str] | None = None) -> Any:
    """Long-form rows for the charts from ``runrecord.power_timeline`` (an Arrow table, already one row per
    device and time bucket): a readable device label (``runrecord.device_labels``: index, model, host), time,
    mean/min/max power and the cumulative energy."""
    import pandas as pd

    from footprint.tracking.runrecord import DEVICE_ORDER, device_label

    cols = ["device", "t_s", "power_w", "power_min_w", "power_max_w", "energy_j"]
    if timeline is None or timeline.num_rows == 0:
        return pd.DataFrame(columns=cols)
    df = timeline.to_pandas()
    keys = df[["host", "uuid", "component"]].astype(object).to_dict("records")
    df["device"] = [(labels or {}).get((k["host"], str(k["uuid"]))) or device_label(k) for k in keys]
    df["order"] = df["component"].astype(object).map(DEVICE_ORDER).fillna(len(DEVICE_ORDER))  # GPUs first, as the report
    return df.sort_values(["order", "device", "t_s"])[cols].reset_index(drop=True)
