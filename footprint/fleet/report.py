"""`footprint fleet report`: totals and per-group footprints of a fleet import, in all 16 categories.

Every job of the index with a known GPU model and a measured energy is assessed with
`footprint.lca.batch` (the engine, once per GPU model and site; each job's numbers are what
`footprint assess jobs/<job>` gives, Monte Carlo aside). Groups are sums of their jobs (GPU-equivalents:
the ceiling of the group's summed GPU lifetimes). GPU time no job held (the unallocated share of the
telemetry) is assessed the same way and shown beside the jobs, never spread over them. Jobs that
cannot be assessed (unknown GPU model, no energy) are listed with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from footprint.errors import FootprintError
from footprint.fleet import store
from footprint.fleet.assess import _site, assess_index, template
from footprint.lca import DEFAULT_SAMPLES

GROUPS = ("user", "account", "partition", "gpu", "month")
REPORT_COLUMNS = ("job_id", "name", "user", "account", "partition", "month", "gpu_name", "gpu_model", "gpu_count",
                  "gpu_hours", "energy_j", "coverage", "grid", "pue", "run_dir")  # fmt: skip
FORMATS = ("table", "html", "csv", "json")
UNALLOCATED = "(unallocated)"


@dataclass
class Rows:
    """Numbers of a set of rows (a group, all jobs, the unallocated share): sums and per-category totals."""

    label: str
    jobs: int
    gpu_hours: float
    energy_kwh: float
    facility_energy_kwh: float
    gpu_lifetimes: float
    gpu_equivalents: int
    impacts: dict[str, float | None]
    by_stage: dict[str, dict[str, float | None]]
    partial: list[str] = field(default_factory=list)  # totals that leave something out (a stage not modelled)
    single_score_pt: float | None = None  # EF 3.1 weighted single score of the summed impacts
    ranges: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # low-high of the sums, per key
    not_modelled: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per key: stages some factor set lacks

    def status(self, key: str) -> str:
        """A total's status as a run's CSV writes it ("partial: use not modelled"; "" when whole)."""
        from footprint.lca.render import total_status

        nm = self.not_modelled.get(key, ())
        return total_status(nm) if nm or key not in self.partial else "partial"

    def to_dict(self, units: dict[str, str]) -> dict[str, Any]:
        return {
            "group": self.label,
            "jobs": self.jobs,
            "gpu_hours": self.gpu_hours,
            "energy_kwh": self.energy_kwh,
            "facility_energy_kwh": self.facility_energy_kwh,
            "gpu_lifetimes": self.gpu_lifetimes,
            "gpu_equivalents": self.gpu_equivalents,
            "single_score_pt": self.single_score_pt,
            "single_score_low_high": self.ranges.get("single_score"),
            "impacts": {
                k: {
                    "unit": units[k],
                    "total": v,
                    "low_high": self.ranges.get(k),
                    "by_stage": self.by_stage[k],
                    "not_modelled": list(self.not_modelled.get(k, ())),
                    **({"partial": True} if k in self.partial else {}),
                }
                for k, v in self.impacts.items()
            },
        }


@dataclass
class FleetReport:
    fleet: str
    by: str
    meta: dict[str, Any]
    totals: Rows
    groups: list[Rows]
    unallocated: Rows | None
    unallocated_share: dict[str, float | None]
    top_jobs: list[dict[str, Any]]
    not_assessed: list[dict[str, Any]]
    warnings: list[str]
    source_ids: list[str]
    units: dict[str, str]
    jobs_total: int

    @property
    def sources(self) -> list[dict[str, Any]]:
        from footprint.lca.database import db

        return db().cite(self.source_ids)

    def __repr__(self) -> str:
        """The headline lines (jobs, GPU-hours, energy, climate change with its range), never the whole object."""
        from footprint.lca.notebook import short

        return short([*summary_lines(self), "  All 16 categories: .to_dict(), or footprint fleet report -o fleet.html"])

    def _repr_html_(self) -> str:
        """Jupyter and VS Code: the headline, the 16 categories of the fleet's total and the groups."""
        from footprint.lca.notebook import html_table, text_html

        return (
            text_html("\n".join(summary_lines(self)))
            + html_table(*category_table(self.totals, self.units), "All 16 EF 3.1 categories (the fleet's total)")
            + html_table(*group_rows(self), f"By {self.by}")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fleet": self.fleet,
            "window": self.meta.get("window"),
            "group_by": self.by,
            "jobs": self.jobs_total,
            "assessed_jobs": self.totals.jobs,
            "method": METHOD,
            "totals": self.totals.to_dict(self.units),
            "unallocated": self.unallocated.to_dict(self.units) if self.unallocated else None,
            "unallocated_share": self.unallocated_share,
            "groups": [g.to_dict(self.units) for g in self.groups],
            "top_jobs": self.top_jobs,
            "not_assessed": self.not_assessed,
            "warnings": self.warnings,
            "sources": self.sources,
        }


METHOD = {
    "jobs": "one row per job in the fleet ledger (footprint fleet import); GPU energy from DCGM counters, "
    "evaluated by Prometheus/Thanos/Mimir (increase() over each job's window) or read sample by sample (--exact), "
    "GPU-hours = the job's window x its GPUs",
    "impacts": "footprint.lca engine per GPU model and site, linear in GPU-hours and energy (footprint.lca.batch)",
    "uncertainty": "low-high = 2.5th-97.5th percentiles of the Monte Carlo of the factors (embodied sources, "
    "per-kWh electricity factors, power measurement), summed over a group's jobs draw by draw with the same draws "
    "for every job: a shared factor moves all jobs at once, so sums are not narrowed by false independence; "
    "one job's range: `footprint assess <job>`",
    "groups": "sums of their jobs; GPU-equivalents = ceil(sum of GPU lifetimes consumed)",
    "unallocated": "GPU time and energy of the telemetry that no job held, assessed like a job of that GPU model",
}


# ---- assessing an index -------------------------------------------------------------------------------


# ---- the report ---------------------------------------------------------------------------------------


def _group_keys(df: Any, by: str) -> Any:
    col = {"gpu": "gpu_name"}.get(by, by)
    return df[col].astype(object).where(df[col].notna(), "(none)").astype(str)


def _rows(labels: list[str], sums: Any, jobs: list[int], keys: tuple[str, ...], samples: int = 0, seed: int = 0) -> list[Rows]:
    """One Rows per group of ``sums`` (every number computed once for all groups), with the low-high of each
    group's sums when ``samples`` (`GroupSums.ranges`)."""
    from footprint.lca import categories as cat

    def opt(x: float) -> float | None:
        return None if np.isnan(x) else float(x)

    totals = {k: sums.value("impacts", k, "total") for k in keys}
    stages = {(k, s): sums.value("impacts", k, "by_stage", s)[0] for k in keys for s in cat.stages()}
    fac, _ = sums.value("facility_energy_kwh")
    score = sums.single_score()
    ranges = sums.ranges(samples, seed) if samples > 1 else {}
    not_modelled = {k: sums.not_modelled(k) for k in keys}

    def low_high(key: str, g: int) -> tuple[float, float] | None:
        lo, hi = ranges[key][g] if key in ranges else (np.nan, np.nan)
        return None if np.isnan(lo) or np.isnan(hi) else (float(lo), float(hi))

    return [
        Rows(
            label,
            jobs[g],
            float(sums.gpu_hours[g]),
            float(sums.it_energy_kwh[g]),
            float(fac[g]),
            float(sums.gpu_lifetimes[g]),
            int(sums.gpu_equivalents[g]),
            {k: opt(totals[k][0][g]) for k in keys},
            {k: {s: opt(stages[(k, s)][g]) for s in cat.stages()} for k in keys},
            [k for k in keys if totals[k][1][g] or not_modelled[k][g]],
            float(score[g]),
            {k: low_high(k, g) for k in (*keys, "single_score")} if ranges else {},
            {k: not_modelled[k][g] for k in keys if not_modelled[k][g]},
        )
        for g, label in enumerate(labels)
    ]


def build_report(
    fleet: str | Path,
    by: str = "user",
    top: int = 10,
    sets: list[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> FleetReport:
    """Assess every job of a fleet directory and sum them by ``by``; low-high from ``samples`` Monte Carlo draws
    (0: central values only)."""
    import pandas as pd

    from footprint.lca import categories as cat

    if by not in GROUPS:
        raise FootprintError(f"unknown grouping {by!r}; allowed: {', '.join(GROUPS)}", key="--by")
    from footprint.fleet import ledger

    parts, left_df, site, counts = ledger.sums(fleet, by)
    meta = store.read_meta(fleet)
    batch, rows, _ = assess_index(parts, sets)
    keys = tuple(c.key for c in cat.categories() + cat.extras())
    units = {c.key: c.unit for c in cat.categories() + cat.extras()}
    sub = parts.iloc[rows]
    codes, uniques = pd.Series(sub["grp"].to_numpy(dtype=object)).factorize(sort=True)
    sums = batch.group_sums(codes, len(uniques))
    per_group = np.bincount(codes, weights=sub["jobs"].to_numpy(float), minlength=len(uniques)).astype(int).tolist()
    groups = _rows([str(u) for u in uniques], sums, per_group, keys, samples, seed)
    groups.sort(key=lambda r: -(r.impacts.get("climate_change") or 0.0))
    n_ok = int(sub["jobs"].sum())
    all_sums = batch.group_sums(np.zeros(len(sub), np.int64), 1)
    totals = _rows(["all jobs"], all_sums, [n_ok], keys, samples, seed)[0] if len(sub) else _empty_rows(keys)
    unallocated, share = _unallocated(fleet, pd.DataFrame([site]), sets, keys, samples, seed)
    top_jobs = [_top_row(r) for r in ledger.top_jobs(fleet, _coefficients(sub, sets), top).to_dict("records")]
    _, _, reasons = assess_index(left_df, sets)
    left = [
        {"job_id": str(j), "gpu_hours": 0.0 if h != h else float(h), "reason": r}
        for j, h, r in zip(left_df["job_id"], left_df["gpu_hours"], reasons, strict=True)
    ]
    warnings = list(meta.get("notes") or [])
    for b in batch.bases:
        warnings += [w for w in b.per_gpu_hour.warnings if "energy measured" not in w]
    if counts["low_coverage"]:
        warnings.append(
            f"{counts['low_coverage']} job(s) have GPU telemetry for less than 99 % of their allocated GPU-time: lower bounds"
        )
    if counts["left_out"]:
        more = f"; the first {len(left)} listed" if counts["left_out"] > len(left) else " (listed with the reason)"
        warnings.append(f"{counts['left_out']} job(s), {counts['left_hours'] or 0:,.1f} GPU-hours, not assessed{more}")
    if meta.get("skipped"):
        warnings.append(f"{len(meta['skipped'])} sacct line(s) left out at import (see fleet.json 'skipped')")
    source_ids = list(dict.fromkeys(s for b in batch.bases for s in b.per_gpu_hour.source_ids))
    return FleetReport(
        str(fleet),
        by,
        meta,
        totals,
        groups,
        unallocated,
        share,
        top_jobs,
        left,
        list(dict.fromkeys(warnings)),
        source_ids,
        units,
        int(counts["jobs"]),
    )


def _coefficients(sub: Any, sets: list[str] | None) -> Any:
    """Per factor set (gpu_model, grid, pue): kg CO2 eq of one GPU-hour (a) and of one kWh (b), so that any job's
    climate change is a x GPU-hours + b x kWh (the engine's central result is linear in both)."""
    import pandas as pd

    from footprint.lca.batch import assess_arrays

    sets_ = sub[["gpu_model", "grid", "pue"]].drop_duplicates().reset_index(drop=True)
    if sets_.empty:
        return sets_.assign(a=[], b=[])
    tpls = [template(m, _site(g, p), sets) for m, g, p in sets_.itertuples(index=False)]
    k = len(tpls)
    idx = np.repeat(np.arange(k), 2)
    unit = assess_arrays(tpls, idx, np.tile([1.0, 0.0], k), np.tile([0.0, 1.0], k)).total("climate_change")
    return pd.DataFrame({**{c: sets_[c] for c in sets_.columns}, "a": unit[0::2], "b": unit[1::2]})


def _top_row(r: dict[str, Any]) -> dict[str, Any]:
    def num(x: Any) -> float | None:
        return None if x is None or x != x else float(x)

    return {
        "job_id": r["job_id"],
        "name": r["name"],
        "user": r["user"],
        "account": r["account"],
        "gpu": r["gpu_name"],
        "gpus": int(r["gpu_count"]),
        "gpu_hours": float(r["gpu_hours"]),
        "energy_kwh": float(r["energy_j"]) / 3.6e6,
        "climate_change_kg": float(r["cc"]),
        "coverage": num(r["coverage"]),
        "run_dir": r["run_dir"],
    }


def _empty_rows(keys: tuple[str, ...]) -> Rows:
    return Rows("all jobs", 0, 0.0, 0.0, 0.0, 0.0, 0, dict.fromkeys(keys), {k: {} for k in keys})


def _unallocated(
    fleet: str | Path, df: Any, sets: list[str] | None, keys: tuple[str, ...], samples: int = 0, seed: int = 0
) -> tuple[Rows | None, dict[str, Any]]:
    """GPU time and energy no job held, per GPU model, assessed like jobs; (None, n/a) without telemetry."""
    import pandas as pd

    gpus = store.read_gpus(fleet)
    share: dict[str, Any] = {"gpu_time": None, "gpu_energy": None}
    if gpus is None or gpus.empty:
        return None, share
    g = gpus[gpus["component"] == "gpu"].copy()
    if g.empty or g["seconds"].sum() <= 0:
        return None, share
    g["idle_s"] = (g["seconds"] - g["allocated_seconds"]).clip(lower=0)
    g["idle_j"] = (g["energy_j"] - g["allocated_energy_j"]).clip(lower=0)
    share = {
        "gpu_time": float(g["idle_s"].sum() / g["seconds"].sum()),
        "gpu_energy": float(g["idle_j"].sum() / g["energy_j"].sum()) if g["energy_j"].sum() > 0 else None,
    }
    site = df[["grid", "pue"]].iloc[0].to_dict() if len(df) else {"grid": None, "pue": None}
    from footprint.fleet.importer import catalogue_id

    g["gpu_model"] = [catalogue_id(m) for m in g["model"]]
    known = g[g["gpu_model"].notna()]
    per = known.groupby("gpu_model")[["idle_s", "idle_j"]].sum().reset_index()
    pseudo = pd.DataFrame(
        {
            "energy_j": per["idle_j"],
            "gpu_hours": per["idle_s"] / 3600.0,
            "gpu_model": per["gpu_model"],
            "gpu_name": per["gpu_model"],
            "grid": site.get("grid"),
            "pue": site.get("pue"),
        }
    )
    pseudo = pseudo[(pseudo["energy_j"] > 0) & (pseudo["gpu_hours"] > 0)]
    if pseudo.empty:
        return None, share
    batch, rows, _ = assess_index(pseudo, sets)
    sums = batch.group_sums(np.zeros(len(rows), np.int64), 1)
    return _rows([UNALLOCATED], sums, [0], keys, samples, seed)[0], share


# ---- rendering --------------------------------------------------------------------------------------


def infer_format(output: str | None, fmt: str | None) -> str:
    if fmt:
        return fmt
    if not output:
        return "table"
    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix in ("html", "htm"):
        return "html"
    if suffix in FORMATS:
        return suffix
    raise FootprintError(f"cannot tell the format from {output!r}: use .html, .csv or .json (or --format)", key="-o")


def to_csv(r: FleetReport) -> str:
    import csv
    import io

    from footprint.escaping import csv_cell
    from footprint.lca import categories as cat
    from footprint.lca.units import display_unit

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cats = cat.categories() + cat.extras()
    w.writerow(
        ["row", csv_cell(r.by), "jobs", "gpu_hours", "energy_kwh", "facility_energy_kwh", "gpu_lifetimes", "gpu_equivalents"]
        + ["single_score [Pt]", "single_score low", "single_score high"]
        + [f"{c.key} [{display_unit(c.unit)}]" for c in cats]
        + [f"{c.key} {end}" for c in cats for end in ("low", "high")]
        + [f"{c.key} status" for c in cats]
    )

    def bounds(x: Rows, key: str) -> list[str]:
        lh = x.ranges.get(key)
        return ["", ""] if lh is None else [repr(lh[0]), repr(lh[1])]

    def row(kind: str, x: Rows) -> None:
        w.writerow(
            [
                kind,
                csv_cell(x.label),
                x.jobs,
                repr(x.gpu_hours),
                repr(x.energy_kwh),
                repr(x.facility_energy_kwh),
                repr(x.gpu_lifetimes),
            ]
            + [x.gpu_equivalents, "" if x.single_score_pt is None else repr(x.single_score_pt), *bounds(x, "single_score")]
            + ["" if x.impacts.get(c.key) is None else repr(x.impacts[c.key]) for c in cats]
            + [b for c in cats for b in bounds(x, c.key)]
            + [x.status(c.key) for c in cats]
        )

    for g in r.groups:
        row("group", g)
    row("total", r.totals)
    if r.unallocated:
        row("unallocated", r.unallocated)
    return buf.getvalue()


def to_table(r: FleetReport) -> str:
    """The report as text for a terminal: totals, groups with the headline categories, top jobs."""
    from footprint.lca.assessment import num

    lines = [*summary_lines(r), ""]
    heads, rows = group_rows(r)
    lines += _columns(heads, rows)
    if r.top_jobs:
        lines += ["", "Top jobs (climate change):"]
        lines += _columns(
            ["job", "user", "GPUs", "GPU-h", "kWh", "kg CO2 eq", "record"],
            [
                [
                    j["job_id"],
                    str(j["user"]),
                    str(j["gpus"]),
                    num(j["gpu_hours"]),
                    num(j["energy_kwh"]),
                    num(j["climate_change_kg"]),
                    str(j["run_dir"]) if j["run_dir"] else f"fleet job {j['job_id']}",
                ]
                for j in r.top_jobs
            ],
        )
    if r.not_assessed:
        lines += [
            "",
            f"Not assessed: {len(r.not_assessed)} job(s), e.g. {r.not_assessed[0]['job_id']}: {r.not_assessed[0]['reason']}",
        ]
    note = not_modelled_note(r)
    lines += [note] if note else []
    lines += ["", "All 16 categories: -o fleet.html | .csv | .json. Warnings:"] + [f"  - {w}" for w in r.warnings]
    return "\n".join(lines) + "\n"


def summary_lines(r: FleetReport) -> list[str]:
    """The fleet's headline lines: the table's top, and the notebook `repr`."""
    from footprint.lca.assessment import lifetimes, num

    t, win = r.totals, r.meta.get("window") or {}
    share = r.unallocated_share
    return [
        f"Fleet {r.fleet}: {win.get('start')} - {win.get('end')}",
        f"  Jobs assessed: {t.jobs:,} of {r.jobs_total:,}  |  GPU-hours: {num(t.gpu_hours)}  |  "
        f"GPU lifetimes consumed: {lifetimes(t.gpu_lifetimes)}",
        f"  Energy: {num(t.energy_kwh)} kWh IT, {num(t.facility_energy_kwh)} kWh facility",
        f"  Climate change: {num(t.impacts.get('climate_change'))} kg CO2 eq{_range_text(t, 'climate_change')}  |  "
        f"single score: {num(t.single_score_pt)} Pt{_range_text(t, 'single_score')}",
        f"  Unallocated: {_pct(share.get('gpu_time'))} of GPU time, {_pct(share.get('gpu_energy'))} of GPU energy "
        f"(idle GPUs; assessed apart, not spread over the jobs)",
    ]


def group_rows(r: FleetReport) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the groups, the total and the unallocated share, with the headline categories."""
    from footprint.lca import categories as cat
    from footprint.lca.assessment import lifetimes, num
    from footprint.lca.units import display_unit

    heads = [r.by, "jobs", "GPU-h", "kWh", "GPU lifetimes"] + [
        f"{cat.by_key(k).name} [{display_unit(cat.by_key(k).unit)}]" for k in cat.HEADLINE
    ]
    rows = [
        [g.label, str(g.jobs) if g.jobs else "", num(g.gpu_hours), num(g.energy_kwh), lifetimes(g.gpu_lifetimes)]
        + [num(g.impacts.get(k)) for k in cat.HEADLINE]
        for g in [*r.groups, r.totals, *([r.unallocated] if r.unallocated else [])]
    ]
    return heads, rows


def category_table(x: Rows, units: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of one row set's 16 categories: total, unit, low-high and status (partial, not modelled)."""
    from footprint.lca import categories as cat
    from footprint.lca.assessment import num
    from footprint.lca.units import display_unit

    rows = [
        [cat.by_key(k).name, num(x.impacts.get(k)), display_unit(units[k]), low_high(x, k) or "", x.status(k)]
        for k in cat.keys()
        if k in units
    ]
    return ["Category", "Total", "Unit", "Low - high", "Status"], rows


def not_modelled_note(r: FleetReport) -> str | None:
    """The categories whose totals leave a stage out (no open electricity factor for the grid mix), with what
    "not modelled" means in a run's report; None when every total is whole."""
    from footprint.lca import categories as cat
    from footprint.lca.render import NOT_MODELLED

    rows = [r.totals, *([r.unallocated] if r.unallocated else [])]
    status = {k: next((x.status(k) for x in rows if x.status(k)), "") for k in r.units}
    items = [f"{cat.by_key(k).name.lower()} ({v})" for k, v in status.items() if v]
    return f"Partial totals: {', '.join(items)}; not modelled = {NOT_MODELLED}." if items else None


def _columns(heads: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(heads)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return [line(heads), line(["-" * w for w in widths])] + [line(x) for x in rows]


def to_json(r: FleetReport) -> str:
    return json.dumps(r.to_dict(), indent=2, default=str) + "\n"


def low_high(x: Rows, key: str) -> str | None:
    """A row's low-high for ``key`` as "low - high" (None when it has none): the table, HTML and the Fleet page."""
    from footprint.lca.assessment import num

    lh = x.ranges.get(key)
    return None if lh is None else f"{num(lh[0])} - {num(lh[1])}"


def _range_text(x: Rows, key: str) -> str:
    text = low_high(x, key)
    return "" if text is None else f" (low-high {text})"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"
