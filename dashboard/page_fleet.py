"""Fleet: a directory written by `footprint fleet import`, summed by user, account, partition, GPU or month.

A thin view over `footprint.fleet.report.build_report` (the numbers of `footprint fleet report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import core, ui
from footprint.escaping import md_text
from footprint.lca import categories as cat
from footprint.lca.assessment import lifetimes, num
from footprint.lca.units import display_unit

GROUP_LABELS = {"user": "User", "account": "Account", "partition": "Partition", "gpu": "GPU model", "month": "Month"}


@st.cache_data(show_spinner="Assessing the fleet...", max_entries=16)
def fleet_report(fleet: str, by: str, mtime: float, samples: int) -> Any:
    """`footprint fleet report FLEET --by BY --samples SAMPLES`, cached until the index changes."""
    from footprint.fleet.report import build_report

    return build_report(fleet, by, samples=samples)


def _ledger(root: Path | None) -> Path | None:
    """The fleet's job rows (``ledger/``, or ``index.parquet`` in a fleet written before it), or None."""
    from footprint.errors import FootprintError
    from footprint.fleet.store import ledger_source

    try:
        return ledger_source(root) if root is not None else None
    except FootprintError:
        return None


def group_rows(rep: Any) -> list[dict[str, Any]]:
    """One row per group (then all jobs, then the unallocated share): sums and the headline categories."""
    rows = []
    for g in [*rep.groups, rep.totals, *([rep.unallocated] if rep.unallocated else [])]:
        row = {
            GROUP_LABELS[rep.by]: g.label,
            "Jobs": g.jobs or None,
            "GPU-hours": num(g.gpu_hours),
            "Energy (kWh)": num(g.energy_kwh),
            "GPU lifetimes": lifetimes(g.gpu_lifetimes),
        }
        for k in cat.HEADLINE:
            c = cat.by_key(k)
            row[f"{c.name} ({display_unit(c.unit)})"] = num(g.impacts.get(k))
        rows.append(row)
    return rows


def category_rows(rep: Any, shown: int = 8) -> list[dict[str, Any]]:
    """The 16 categories (rows) for the largest groups, all jobs and the unallocated share (columns)."""
    cols = [*rep.groups[:shown], rep.totals, *([rep.unallocated] if rep.unallocated else [])]
    return [
        {"Category": c.name, "Unit": display_unit(c.unit), **{g.label: num(g.impacts.get(c.key)) for g in cols}}
        for c in cat.categories()
    ]


def stage_rows(rep: Any) -> list[dict[str, Any]]:
    """Climate change by group and life-cycle stage, for the chart."""
    rows = []
    for g in [*rep.groups[:20], *([rep.unallocated] if rep.unallocated else [])]:
        for s, v in g.by_stage["climate_change"].items():
            rows.append({"group": g.label, "stage": core.STAGE_LABELS.get(s, s), "kg CO2 eq": v or 0.0})
    return rows


def render(samples: int) -> None:
    st.title("Fleet")
    st.caption(
        "Per-job footprints of a whole cluster, from `footprint fleet import prometheus|slurm` "
        "(DCGM energy evaluated by Prometheus/Thanos/Mimir, SLURM accounting), read from the fleet's job ledger with "
        "DuckDB. Low-high of the fleet: the sidebar's Monte Carlo samples, the same draws for every job; a job's own: "
        "`footprint fleet job FLEET JOB -o RUN` writes its record, then open RUN in Runs or `footprint assess RUN`."
    )
    root = ui.dir_input("Fleet directory", "fleet_dir", "fleet", "written by `footprint fleet import ... -o DIR`")
    by = st.radio("Group by", list(GROUP_LABELS), format_func=GROUP_LABELS.get, horizontal=True, key="fleet_by")
    src = _ledger(root)
    if src is None:
        st.info(
            f"No fleet index in {root or '(empty)'}. Write one with `footprint fleet import prometheus --url URL "
            "--start T --end T -o fleet` or `footprint fleet import slurm sacct.txt -o fleet`."
        )
        return
    try:
        rep = fleet_report(str(root), by, max(f.stat().st_mtime for f in [src, *src.rglob("*.parquet")]), samples)
    except core.USER_ERRORS as exc:
        ui.show_user_error(exc)
        return
    t = rep.totals
    win = rep.meta.get("window") or {}
    st.caption(f"Window {md_text(win.get('start'))} – {md_text(win.get('end'))}")
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.metric("Jobs assessed", f"{t.jobs:,} of {rep.jobs_total:,}", help="jobs with a known GPU model and measured energy")
    c2.metric("GPU-hours", num(t.gpu_hours), help=f"{lifetimes(t.gpu_lifetimes)} GPU lifetimes consumed (never rounded up)")
    c3.metric("Energy (kWh)", num(t.energy_kwh), help=f"IT energy; facility {num(t.facility_energy_kwh)} kWh")
    from footprint.fleet.report import low_high

    cc = low_high(t, "climate_change")
    c4.metric(
        "Climate change (kg CO2 eq)",
        num(t.impacts.get("climate_change")),
        help=None if cc is None else f"low-high {cc} (Monte Carlo of the factors, the same draws for every job)",
    )
    share = rep.unallocated_share
    c5.metric(
        "Unallocated GPU time",
        "n/a" if share.get("gpu_time") is None else f"{share['gpu_time']:.1%}",
        help="telemetry GPU time no job held"
        + ("" if share.get("gpu_energy") is None else f"; {share['gpu_energy']:.1%} of GPU energy"),
    )
    ui.vega(
        stage_rows(rep),
        {
            "mark": {"type": "bar"},
            "height": max(140, 26 * min(len(rep.groups) + 1, 21)),
            "encoding": {
                "y": {"field": "group", "type": "nominal", "sort": None, "title": None},
                "x": {"field": "kg CO2 eq", "type": "quantitative", "stack": "zero"},
                "color": {
                    "field": "stage",
                    "type": "nominal",
                    "scale": ui.STAGE_SCALE,
                    "legend": {"orient": "bottom"},
                },
                "tooltip": [{"field": "group"}, {"field": "stage"}, {"field": "kg CO2 eq", "format": ".4g"}],
            },
        },
    )
    st.subheader(f"By {GROUP_LABELS[by].lower()}")
    st.dataframe(group_rows(rep), hide_index=True, **ui.WIDE)
    with st.expander("All 16 categories"):
        st.dataframe(category_rows(rep), hide_index=True, **ui.WIDE)
    st.subheader("Top jobs")
    st.dataframe(
        [
            {
                "Job": j["job_id"],
                "Name": j["name"],
                "User": j["user"],
                "GPUs": j["gpus"],
                "GPU-hours": num(j["gpu_hours"]),
                "Energy (kWh)": num(j["energy_kwh"]),
                "Climate change (kg CO2 eq)": num(j["climate_change_kg"]),
                "Record": j["run_dir"] or f"footprint fleet job {root} {j['job_id']} -o run-{j['job_id']}",
            }
            for j in rep.top_jobs
        ],
        hide_index=True,
        **ui.WIDE,
    )
    if rep.not_assessed:
        with st.expander(f"Not assessed: {len(rep.not_assessed)} job(s)"):
            st.dataframe(rep.not_assessed, hide_index=True, **ui.WIDE)
    with st.expander("Warnings and method"):
        for w in rep.warnings:  # job names and users come from sacct: any user's job name could hold a link or image
            st.markdown(f"- {md_text(w)}")
