"""`footprint fleet report` and the dashboard's Fleet page on a fleet imported from SLURM accounting alone
(energy from ConsumedEnergyRaw declared as GPU energy), so that they run where Prometheus is not installed."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from _paths import REPO

import footprint
from footprint.errors import FootprintError
from footprint.fleet import synthetic
from footprint.fleet.importer import ImportOptions, import_fleet
from footprint.fleet.report import build_report, to_csv, to_json, to_table
from footprint.fleet.slurm import parse_sacct
from footprint.fleet.store import read_index
from footprint.reports.fleet import write_report


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    start = datetime(2025, 1, 25, tzinfo=UTC).timestamp()
    c = synthetic.random_cluster(start, 14.0, 3, 4, synthetic.demo_profiles(), seed=3)
    rng = np.random.default_rng(1)
    for j in c.jobs:
        j.gres_type = "h100" if j.gpus[0][0] == "gpu-02" else "a100"
        j.consumed_energy_j = float(rng.uniform(2e5, 5e6)) * len(j.gpus)
    c.jobs[0].gres_type = "rtx3090"  # a GPU the catalogue does not know
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    out = tmp_path_factory.mktemp("fleet") / "fleet"
    opts = ImportOptions(
        end=c.end,
        sacct=sacct,
        slurm_energy_scope="gpu",
        gpu_types={"a100": "NVIDIA A100-SXM4-80GB", "h100": "NVIDIA H100 80GB HBM3"},
        site={"grid": "DEU", "pue": 1.3},
        records=True,
    )
    import_fleet(out, opts)
    return out


def test_report_sums_equal_assess_on_every_record(fleet: Path) -> None:
    idx = read_index(fleet)
    rep = build_report(fleet, by="month")
    assessable = idx[idx["gpu_model"].notna() & (idx["energy_j"] > 0)]
    assert rep.totals.jobs == len(assessable) and len(rep.not_assessed) == len(idx) - len(assessable) >= 1
    per_job = {
        j: footprint.assess(fleet / d, samples=0) for j, d in zip(assessable["job_id"], assessable["run_dir"], strict=True)
    }
    for k in ("climate_change", "particulate_matter", "resource_use_minerals_metals"):
        assert rep.totals.impacts[k] == pytest.approx(sum(a[k].total for a in per_job.values()), rel=1e-9)
    assert rep.totals.gpu_hours == pytest.approx(sum(a.workload.gpu_hours for a in per_job.values()), rel=1e-12)
    assert rep.totals.single_score_pt == pytest.approx(sum(a.single_score["value"] for a in per_job.values()), rel=1e-9)
    assert rep.totals.energy_kwh == pytest.approx(sum(a.workload.it_energy_kwh for a in per_job.values()), rel=1e-12)
    months = {g.label for g in rep.groups}
    assert months == set(assessable["month"])  # January and February 2025
    assert sum(g.jobs for g in rep.groups) == rep.totals.jobs
    assert rep.unallocated is None and rep.unallocated_share == {"gpu_time": None, "gpu_energy": None}
    assert any("rtx3090" in x["reason"] for x in rep.not_assessed)
    one = rep.top_jobs[0]
    assert one["climate_change_kg"] == pytest.approx(max(a["climate_change"].total for a in per_job.values()), rel=1e-12)


def test_every_grouping_and_format(fleet: Path, tmp_path: Path) -> None:
    for by in ("user", "account", "partition", "gpu", "month"):
        rep = build_report(fleet, by)
        assert rep.totals.impacts["climate_change"] == pytest.approx(sum(g.impacts["climate_change"] for g in rep.groups))
    write_report(fleet, str(tmp_path / "r.json"), "user")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert set(doc) >= {"totals", "groups", "unallocated", "unallocated_share", "top_jobs", "not_assessed", "warnings", "sources"}
    assert all(len(g["impacts"]) == 17 for g in doc["groups"])
    assert doc["unallocated"] is None  # no telemetry: not available, never zero
    write_report(fleet, str(tmp_path / "r.csv"), "gpu")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0].startswith("row,gpu,jobs,gpu_hours,energy_kwh") and "climate_change [kg CO2 eq]" in lines[0]
    assert lines[-1].startswith("total,all jobs,")
    write_report(fleet, str(tmp_path / "r.html"), "account", top=3)
    html = (tmp_path / "r.html").read_text()
    assert "Not assessed" in html and "Top jobs" in html and "<svg" in html


def test_groups_and_totals_carry_low_high_in_every_format(fleet: Path, tmp_path: Path) -> None:
    """Every group's and the totals' low-high hold their central sums, the totals' do not depend on the grouping
    (tests/test_batch.py checks a one-job group against `assess`); JSON, CSV and HTML show the ranges;
    samples=0 leaves them out."""
    rep = build_report(fleet, by="user", samples=300, seed=2)
    for g in rep.groups + [rep.totals]:
        for k, v in g.impacts.items():
            if v is not None:
                lo, hi = g.ranges[k]
                assert lo <= v * (1 + 1e-12) and hi >= v * (1 - 1e-12), (g.label, k)
        assert g.ranges["single_score"][0] <= g.single_score_pt <= g.ranges["single_score"][1]
    cc = rep.totals.ranges["climate_change"]
    assert cc[0] < rep.totals.impacts["climate_change"] < cc[1]
    assert build_report(fleet, by="account", samples=300, seed=2).totals.ranges == rep.totals.ranges  # any grouping
    write_report(fleet, str(tmp_path / "r.json"), "user", samples=300)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["totals"]["impacts"]["climate_change"]["low_high"][0] < doc["totals"]["impacts"]["climate_change"]["total"]
    assert "uncertainty" in doc["method"] and doc["totals"]["single_score_low_high"]
    write_report(fleet, str(tmp_path / "r.csv"), "user", samples=300)
    head = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "climate_change low" in head and "climate_change high" in head and "single_score high" in head
    write_report(fleet, str(tmp_path / "r.html"), "user", samples=300)
    assert "All jobs low-high" in (tmp_path / "r.html").read_text()
    assert build_report(fleet, by="user", samples=0).totals.ranges == {}


def test_reprojection_with_set(fleet: Path) -> None:
    base = build_report(fleet, "user")
    pol = build_report(fleet, "user", sets=["site.grid=POL"])
    assert pol.totals.impacts["climate_change"] > base.totals.impacts["climate_change"]
    assert pol.totals.gpu_hours == base.totals.gpu_hours
    with pytest.raises(FootprintError, match="unknown grid zone"):
        build_report(fleet, "user", sets=["site.grid=ATLANTIS"])


@pytest.mark.parametrize("sets", [None, ["site.grid=PRY"]])  # PRY: 100 % hydro, most categories' use not modelled
def test_a_stage_not_modelled_is_marked_as_a_runs_assessment_marks_it(
    fleet: Path, tmp_path: Path, sets: list[str] | None
) -> None:
    """A total without its use stage (no open factor for the grid mix) is the same "partial: use not modelled" in
    the fleet's JSON, CSV, table and page as in `footprint assess` of one of its jobs, never a bare hardware total."""
    import csv

    from footprint.lca import render
    from footprint.reports.fleet import to_html

    idx = read_index(fleet)
    one = idx[idx["gpu_model"].notna() & (idx["energy_j"] > 0)]["run_dir"].iloc[0]
    run = footprint.assess(fleet / one, samples=0, set=sets)
    want = {k: list(r.not_modelled) for k, r in run.impacts.items()}
    assert ("use" in want["ozone_depletion"]) == bool(sets)  # the default grid's fuels have USLCI's factors
    rep = build_report(fleet, "user", sets=sets, samples=0)
    doc = json.loads(to_json(rep))
    for row in [doc["totals"], *doc["groups"]]:
        for k, v in row["impacts"].items():
            assert v["not_modelled"] == want[k] and v.get("partial", False) == bool(want[k]), (row["group"], k)
            assert all(v["by_stage"][s] is None for s in want[k])
    run_csv = {(x["category"], x["stage"]): x["status"] for x in csv.DictReader(render.to_csv(run).splitlines())}
    total = [x for x in csv.DictReader(to_csv(rep).splitlines()) if x["row"] == "total"][0]
    for k in want:
        assert total[f"{k} status"] == run_csv.get((k, "total"), render.total_status(want[k])), k
    if sets:
        assert total["ozone_depletion status"] == "partial: use not modelled"
        for text in (to_table(rep), to_html(rep)):
            assert "ozone depletion (partial: use not modelled)" in text and render.NOT_MODELLED in text


def test_report_errors(fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from footprint.cli.app import main

    assert main(["fleet", "report", str(tmp_path), "-o", str(tmp_path / "x.html")]) == 2
    assert "not a fleet directory written by" in capsys.readouterr().err
    assert main(["fleet", "report", str(fleet), "-o", str(tmp_path / "x.pdf")]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it (footprint.inputs.number_arg): usage, one line, exit 2
        main(["fleet", "report", str(fleet), "--top", "-1", "-o", str(tmp_path / "x.html")])
    assert exit_.value.code == 2 and "argument --top: must be >= 0" in capsys.readouterr().err
    assert not list(tmp_path.glob("x.*"))
    with pytest.raises(SystemExit):
        main(["fleet", "report", str(fleet), "--by", "colour", "-o", "x.html"])


# ---- the dashboard's Fleet page -----------------------------------------------------------------------


def test_fleet_page_shows_the_report_numbers(fleet: Path) -> None:
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from footprint.lca.assessment import num

    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.sidebar.radio(key="page").set_value("Fleet").run()
    assert not at.exception and "No fleet index" in at.info[0].value
    at.text_input(key="fleet_dir").set_value(str(fleet)).run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    rep = build_report(fleet, "user")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Jobs assessed"] == f"{rep.totals.jobs:,} of {rep.jobs_total:,}"
    assert metrics["Climate change (kg CO2 eq)"] == num(rep.totals.impacts["climate_change"])
    cc = next(m for m in at.metric if m.label == "Climate change (kg CO2 eq)")
    lo, hi = rep.totals.ranges["climate_change"]
    assert f"low-high {num(lo)} - {num(hi)}" in cc.help
    assert metrics["GPU-hours"] == num(rep.totals.gpu_hours)
    assert metrics["Unallocated GPU time"] == "n/a"
    table = at.dataframe[0].value
    assert list(table["User"]) == [g.label for g in rep.groups] + ["all jobs"]
    at.radio(key="fleet_by").set_value("gpu").run()
    assert not at.exception
    by_gpu = build_report(fleet, "gpu")
    assert list(at.dataframe[0].value["GPU model"]) == [g.label for g in by_gpu.groups] + ["all jobs"]
    # the page keeps its folder when the user visits another page and comes back
    at.sidebar.radio(key="page").set_value("Hardware").run()
    at.sidebar.radio(key="page").set_value("Fleet").run()
    assert at.text_input(key="fleet_dir").value == str(fleet)


def test_fleet_page_shows_warnings_as_typed(fleet: Path, tmp_path: Path) -> None:
    """A warning can carry a job name or user from sacct, which any cluster user chooses: Markdown in it (an outside
    image fetched when an administrator opens the page, a link) is shown as text, never rendered."""
    pytest.importorskip("streamlit")
    from _dashboard_notes import assert_notes_shown_as_typed

    assert_notes_shown_as_typed(fleet, tmp_path, "fleet.json", "Fleet", "fleet_dir", "job")


def test_without_duckdb_pandas_gives_the_same_report(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where DuckDB cannot start (a process short of address space), the sums and top jobs come from pandas:
    the same report."""
    from footprint.fleet import ledger

    for by in ("user", "gpu", "month"):
        a = json.loads(to_json(build_report(fleet, by, samples=200)))

        def refuse() -> None:
            raise ledger.NoDuckDB("no DuckDB here")

        monkeypatch.setattr(ledger, "_connect", refuse)
        b = json.loads(to_json(build_report(fleet, by, samples=200)))
        monkeypatch.undo()
        for key in ("totals", "groups", "top_jobs", "not_assessed", "jobs", "assessed_jobs", "warnings"):
            assert _rounded(a[key]) == _rounded(b[key]), key  # the engines add in different orders: 1e-9


def _rounded(x: object) -> object:
    if isinstance(x, float):
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def test_the_ledger_is_partitioned_by_month_and_read_whole(fleet: Path) -> None:
    import duckdb
    import pandas as pd

    parts = sorted(p.name for p in (fleet / "ledger").iterdir())
    assert parts == ["month=2025-01", "month=2025-02"] and not (fleet / "index.parquet").exists()
    idx = read_index(fleet)
    assert (idx["month"].astype(str) == idx["start"].dt.strftime("%Y-%m")).all()  # the month from the directory
    glob = str(fleet / "ledger" / "*" / "*.parquet")
    got = duckdb.sql(f"SELECT month, count(*) n FROM read_parquet('{glob}', hive_partitioning=true) GROUP BY ALL").df()
    want = idx.groupby(idx["month"].astype(str)).size()
    assert dict(zip(got["month"].astype(str), got["n"], strict=True)) == want.to_dict()
    assert len(pd.read_parquet(fleet / "ledger")) == len(idx)  # pandas reads the partitions as one table


def _legacy_fleet(fleet: Path, out: Path) -> Path:
    """The layout `footprint fleet import` wrote before the ledger was partitioned by month (commit c46cd72; the
    same format version, 1): every job row in one ``index.parquet`` with the index schema, ``month`` a column, and
    no ``ledger/``; ``fleet.json`` and ``job_gpus.parquet`` as today. Made here from today's import, the old
    writer being gone. Its records are left out, as an aggregated import writes none: `fleet job` rebuilds one
    from the rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from footprint.fleet.store import index_schema

    shutil.copytree(fleet, out, ignore=shutil.ignore_patterns("ledger", "jobs"))
    rows = read_index(fleet).assign(run_dir=None)
    pq.write_table(pa.Table.from_pandas(rows, schema=index_schema(), preserve_index=False), out / "index.parquet")
    return out


def test_a_fleet_written_before_the_partitioned_ledger_stays_readable(fleet: Path, tmp_path: Path) -> None:
    import pandas as pd

    from footprint.cli.app import main
    from footprint.fleet import ledger
    from footprint.fleet.store import FleetWriter

    legacy = _legacy_fleet(fleet, tmp_path / "fleet_v1")
    old = pd.read_parquet(legacy / "index.parquet")
    months = sorted(old["month"].unique())
    assert not (legacy / "ledger").exists() and len(old) == len(read_index(fleet)) >= 10 and len(months) == 2
    rep = build_report(legacy, "month", samples=0)
    assessed = old[old["gpu_model"].notna() & (old["energy_j"] > 0)]
    assert rep.totals.jobs == len(assessed) and rep.totals.energy_kwh == pytest.approx(assessed["energy_j"].sum() / 3.6e6)
    assert sorted(g.label for g in rep.groups) == months
    assert main(["fleet", "report", str(legacy), "--by", "job", "-o", str(tmp_path / "jobs.csv")]) == 0
    jobs = pd.read_csv(tmp_path / "jobs.csv", dtype={"job_id": str})
    assert sorted(jobs["job_id"]) == sorted(old["job_id"])
    one = assessed["job_id"].iloc[0]
    assert main(["fleet", "job", str(legacy), one, "-o", str(tmp_path / "run")]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["energy"]["total_j"] == pytest.approx(old.set_index("job_id").loc[one, "energy_j"])
    assert any("rebuilt from the fleet ledger" in n for n in record["notes"])  # from the rows, not a stored record
    # the same rows written as today's ledger: partitioned, and the same report
    new = tmp_path / "fleet"
    with FleetWriter(new) as w:
        w.add_jobs_frame(old)
        w.close_ledger()
        for name in ("job_gpus.parquet", "fleet.json"):
            w.path(name).write_bytes((legacy / name).read_bytes())
        w.commit()
    assert sorted(p.name for p in (new / "ledger").iterdir()) == [f"month={m}" for m in months]
    again = build_report(new, "month", samples=0)
    assert again.totals.energy_kwh == pytest.approx(rep.totals.energy_kwh, rel=1e-12)
    assert again.totals.impacts["climate_change"] == pytest.approx(rep.totals.impacts["climate_change"], rel=1e-12)
    a, b = (ledger.job_table(f).sort_values("job_id", ignore_index=True) for f in (legacy, new))
    pd.testing.assert_series_equal(a["climate_change [kg CO2 eq]"], b["climate_change [kg CO2 eq]"], rtol=1e-12)


def test_every_jobs_low_high_is_its_own_draws_percentiles(fleet: Path) -> None:
    """`row_ranges` interpolates between nodes 5 W apart: checked against each job's exact draws (gpu_hours x A +
    kWh x B, the 2.5th and 97.5th percentiles) for every job of the fleet."""
    from footprint.fleet import ledger
    from footprint.fleet.assess import assess_index
    from footprint.lca.database import IDX

    idx = read_index(fleet, ledger.JOB_COLUMNS)
    table = ledger.job_table(fleet, samples=500, seed=3)
    batch, rows, _ = assess_index(idx)
    assert len(rows) >= 20
    worst = 0.0
    for i, r in enumerate(rows.tolist()):
        a, b = batch.bases[batch.template_index[i]].draws(500, 3)
        draws = batch.gpu_hours[i] * a + batch.it_energy_kwh[i] * b
        for key in ("climate_change", "land_use", "water_use"):
            lo, hi = np.percentile(draws[:, IDX[key]], (2.5, 97.5))
            got = [table.loc[r, c] for c in table.columns if c.startswith((f"{key} low [", f"{key} high ["))]
            worst = max(worst, abs(got[0] / lo - 1), abs(got[1] / hi - 1))
    assert worst < 1e-3, worst
    assert table.filter(like=" low [").loc[rows].notna().all().all()
    assert table.filter(like=" low [").drop(index=rows).isna().all().all()  # not assessed: no range either


def test_every_jobs_partial_totals_are_named_as_its_assessment_names_them(fleet: Path) -> None:
    """The job table's ``partial`` column lists the categories whose totals leave a stage out for that job (the
    engine's `not_modelled` of the job's own assessment), as a run's CSV words them; "" where all are whole, and
    never for a job that was not assessed."""
    from footprint.fleet import ledger
    from footprint.fleet.assess import assess_index
    from footprint.lca.render import total_status

    idx = read_index(fleet, ledger.JOB_COLUMNS)
    table = ledger.job_table(fleet, samples=0)
    batch, rows, _ = assess_index(idx)
    named = 0
    for i, r in enumerate(rows.tolist()):
        a = batch.assessment(i)
        want = "; ".join(f"{k}: {total_status(c.not_modelled)}" for k, c in a.impacts.items() if c.not_modelled)
        assert table.loc[r, "partial"] == want
        named += bool(want)
    assert named == len(rows)  # DEU's primary energy of use is not modelled: every job says so
    assert (table.drop(index=rows)["partial"] == "").all()
    csv_head = ledger.render_jobs(table.head(2), "csv")[0].splitlines()[0]
    assert '"partial"' in csv_head.split(",")


@pytest.mark.parametrize("limit_mb", [1500, 1800])
def test_a_fleet_report_runs_under_an_address_space_limit(fleet: Path, tmp_path: Path, limit_mb: int) -> None:
    """`ulimit -v` as login nodes set it: Arrow's 1 GiB allocator arena would take the room DuckDB needs (a 9-job
    report ended with an out-of-memory error at 1.5 GB and aborted at 1.8 GB); the CLI allocates Arrow's memory
    from the system there, and the report is the one written without a limit."""
    import os
    import resource
    import subprocess
    import sys

    def limit() -> None:  # pragma: no cover - in the child
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    def report(name: str, preexec: object) -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "footprint.cli", "fleet", "report", str(fleet), "--format", "json", "-o", name],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=preexec,  # type: ignore[arg-type]
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-500:]
        doc = json.loads((tmp_path / name).read_text())
        doc.pop("created_utc", None)
        return doc

    assert report("limited.json", limit) == report("free.json", None)
