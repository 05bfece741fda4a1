"""SLURM accounting: hostlists (SLURM's documented examples), `sacct --parsable2` fixtures, `footprint fleet import slurm`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from footprint.errors import FootprintError
from footprint.fleet.slurm import expand_hostlist, parse_elapsed, parse_sacct, parse_tres

# `sacct --allusers --parsable2 --format=JobID,JobIDRaw,JobName,...,ConsumedEnergyRaw` as SLURM 23.x prints it: steps after
# their job, array tasks as ArrayJobID_TaskID with their own raw id, pending array ranges in brackets, het-job components as
# ID+offset, End=Unknown while running, a CPU-only job, a job cancelled before it started, a pipe in a JobName.
SACCT = (Path(__file__).parent / "data" / "sacct_parsable2.txt").read_text()


def _jobs(text: str = SACCT, tz=UTC):  # noqa: ANN001, ANN202
    r = parse_sacct(text, tz, "sacct.txt")
    return r, {j.job_id: j for j in r.jobs}


# ---- hostlists: SLURM's own documented examples ------------------------------------------------------


def test_sacct_jobs_held_in_columns_give_back_the_jobs_they_hold() -> None:
    """The parsed jobs are columns (`SacctJobs`): indexing, slicing and iterating give `SlurmJob`s equal to those
    the columns were filled from; repeated values (users, allocations) are held once; a plan's SLURM job reads its
    GPUs per node and types from them."""
    from footprint.fleet.attribution import Activity, LabelStats, Plan
    from footprint.fleet.sacct_jobs import SacctJobs
    from footprint.fleet.telemetry import Telemetry

    r, jobs = _jobs()
    rows = list(r.jobs)
    again = SacctJobs.of(rows)
    assert list(again) == rows and again[-1] == rows[-1] and again[1:3] == rows[1:3]
    assert SacctJobs.of(r.jobs) is r.jobs and len(again) == len(rows) == len(jobs)
    assert again[rows.index(jobs["1008"])].allocations == jobs["1008"].allocations  # a het job: two allocations
    assert len(r.jobs.codes["user"].values) == len({j.user for j in rows} | {None})
    assert len(r.jobs.allocs.values) <= len(rows) + 1
    with pytest.raises(IndexError):
        r.jobs[len(rows)]
    window = (min(j.start for j in rows) - 1, max(j.end or j.start for j in rows) + 1)
    plan = Plan(Telemetry(), window)
    plan.build(rows, LabelStats(), Activity(*window), now=window[1])
    for job in plan.jobs:
        sj = jobs[job.key]
        want = {h: sum(k for k, _ in a) for h, a in sj.gpus_on().items()}
        assert dict(job.gpus_by_host) == want and job.slurm == sj and set(job.ids) == sj.ids
    assert dict(plan.jobs[rows.index(jobs["1008"])].types_by_host) == {"gpu-04": "a100", "gpu-05": "v100"}


@pytest.mark.parametrize(
    "expr,hosts",
    [
        # slurm_hostlist_create(3): "linux[1-3,6]" represents linux1, linux2, linux3 and linux6
        ("linux[1-3,6]", ["linux1", "linux2", "linux3", "linux6"]),
        # Slurm::Hostlist(3pm): "node1,node[2-5,12]" and "tux[0-5,12,20-25]"
        ("node1,node[2-5,12]", ["node1", "node2", "node3", "node4", "node5", "node12"]),
        ("node21,node[27-34]", ["node21"] + [f"node{i}" for i in range(27, 35)]),
        ("tux[0-5,12,20-25]", [f"tux{i}" for i in [*range(6), 12, *range(20, 26)]]),
        # scontrol(1): show hostnames tux[1-3]
        ("tux[1-3]", ["tux1", "tux2", "tux3"]),
        # slurm.conf(5), NodeName: "alpha,beta,gamma", "linux[0-64,128]", "lx[15,18,32-33]", leading zeros fix the width
        ("alpha,beta,gamma", ["alpha", "beta", "gamma"]),
        ("linux[0-64,128]", [f"linux{i}" for i in [*range(65), 128]]),
        ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),
        ("linux[0000-1023]", [f"linux{i:04d}" for i in range(1024)]),
        # slurm.conf(5): "rack[0-63]_blade[0-41]", one or more pairs of brackets (a product)
        ("rack[0-63]_blade[0-41]", [f"rack{i}_blade{j}" for i in range(64) for j in range(42)]),
        # the example and what sacct prints for a job never started
        ("gpu-[01-03,07]", ["gpu-01", "gpu-02", "gpu-03", "gpu-07"]),
        ("None assigned", []),
        ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ],
)
def test_hostlist_expansion_matches_slurm_docs(expr: str, hosts: list[str]) -> None:
    assert expand_hostlist(expr) == hosts


@pytest.mark.parametrize("bad", ["gpu-[01-03", "gpu-01]", "gpu-[a-b]", "gpu-[5-1]"])
def test_bad_hostlists_are_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(bad)


def test_fields() -> None:
    assert parse_tres("billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1").count == 4
    assert parse_tres("cpu=8,gres/gpu:a100=2,gres/gpu:v100=1").count == 3  # typed entries summed
    assert parse_tres("billing=4,cpu=4,mem=16G,node=1").count == 0
    assert parse_elapsed("1-02:03:04") == 93784 and parse_elapsed("05:06") == 306 and parse_elapsed("INVALID") is None


# ---- sacct --parsable2 ----------------------------------------------------------------------------------


def test_steps_arrays_running_cancelled_and_het_jobs() -> None:
    r, jobs = _jobs()
    assert set(jobs) == {"1001", "1002", "1003_1", "1003_2", "1004", "1005", "1008", "1012", "1013"}
    j = jobs["1001"]
    assert (j.user, j.account, j.partition, j.state, j.gpu_count) == ("alice", "proj-a", "gpu", "COMPLETED", 4)
    assert j.start == datetime(2025, 3, 3, 8, 10, tzinfo=UTC).timestamp() and j.end - j.start == 2400
    # steps fold into the job; the job line says 0 (no plugin on the allocation): the largest step is kept
    assert j.consumed_energy_j == 2901233 and "extern" in j.consumed_energy_from
    assert jobs["1002"].nodes == ["gpu-01", "gpu-02"] and jobs["1002"].gpus_on() == {
        "gpu-01": [(4, "a100")],
        "gpu-02": [(4, "a100")],
    }
    # array tasks are jobs of their own; the label the exporter carries is the raw id
    assert jobs["1003_1"].ids == {"1003_1", "1010"} and jobs["1003_2"].state == "FAILED"
    assert jobs["1004"].end is None and jobs["1004"].state == "RUNNING"
    assert jobs["1005"].state == "CANCELLED"  # "CANCELLED by 1000"
    het = jobs["1008"]
    assert het.gpu_count == 6 and het.nodes == ["gpu-04", "gpu-05"]
    assert het.gpus_on() == {"gpu-04": [(4, "a100")], "gpu-05": [(2, "v100")]}  # heterogeneous GPU types
    assert het.end - het.start == 31 * 60
    assert jobs["1012"].name == "a|b"  # a pipe in JobName (sacct does not escape it)
    assert jobs["1013"].gpus_on() == {"gpu-07": [(1, None)], "gpu-09": [(1, None)]}  # untyped gres
    text = "\n".join(r.skipped)
    assert "1003_[3-5%2]" in text and "pending" in text
    assert "1006" in text and "never started" in text
    assert "1007" in text and "CPU-only" in text


def test_time_zone_of_the_file() -> None:
    _, utc = _jobs()
    _, paris = _jobs(tz=ZoneInfo("Europe/Paris"))
    assert utc["1001"].start - paris["1001"].start == 3600  # CET = UTC+1 in March


@pytest.mark.parametrize(
    "line,reason",
    [
        ("2001|2001|x|u|a|gpu|2025-03-03T08:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=1", "fields"),
        ("20x1|20x1|x|u|a|gpu|2025-03-03T08:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=1|n1|COMPLETED|", "JobID"),
        ("2002|2002|x|u|a|gpu|2025-13-03T08:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=1|n1|COMPLETED|", "month"),
        ("2003|2003|x|u|a|gpu|2025-03-03T08:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=two|n1|COMPLETED|", "gres/gpu"),
        ("2004|2004|x|u|a|gpu|2025-03-03T08:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=1|n[1-|COMPLETED|", "unbalanced"),
        ("2005|2005|x|u|a|gpu|2025-03-03T10:00:00|2025-03-03T09:00:00|01:00:00|gres/gpu=1|n1|COMPLETED|", "before Start"),
    ],
)
def test_malformed_lines_become_notes_and_the_rest_is_read(line: str, reason: str) -> None:
    r, jobs = _jobs(SACCT + line + "\n")
    assert len(jobs) == 9
    assert any(reason in s and f"line {SACCT.count(chr(10)) + 1}" in s for s in r.skipped), r.skipped


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "empty"),
        ("1001|x|y\n", "header line"),
        ("JobID|JobName|State\n1|x|COMPLETED\n", "lacks Start, End, AllocTRES, NodeList"),
    ],
)
def test_not_sacct_output_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(FootprintError, match=message):
        parse_sacct(text, UTC, "f.txt")


# ---- footprint fleet import slurm ----------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "footprint.cli", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def test_import_slurm_alone_writes_records_and_index(tmp_path: Path) -> None:
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT)
    out = tmp_path / "fleet"
    args = ["fleet", "import", "slurm", str(f), "--tz", "UTC", "--end", "2025-03-03T12:00:00Z", "-o", str(out), "--quiet"]
    args += [
        "--records",
        "--slurm-energy-scope",
        "gpu",
        "--gpu-type",
        "a100=A100-SXM4-80GB",
        "--gpu-type",
        "v100=V100-SXM2-32GB",
        "--grid",
        "FRA",
    ]
    p = _cli(*args)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stdout and "skipped: line" in p.stderr
    idx = pd.read_parquet(out / "ledger")
    assert len(idx) == 9
    row = idx.set_index("job_id").loc["1001"]
    assert row.gpu_hours == pytest.approx(4 * 40 / 60) and row.gpu_energy_j == pytest.approx(2901233)
    assert row.gpu_model == "a100-sxm4-80gb" and row.energy_method == "slurm ConsumedEnergyRaw (gpu)"
    running = idx.set_index("job_id").loc["1004"]
    assert running.duration_s == pytest.approx(3600 * 3 + 40 * 60)  # cut at --end
    assert pd.isna(running.energy_j)  # no energy: not available, never zero
    rec = json.loads((out / "jobs" / "1001" / "run.json").read_text())
    assert rec["format"] == "footprint-run" and len([d for d in rec["devices"] if d["component"] == "gpu"]) == 4
    assert rec["slurm"]["user"] == "alice" and rec["site"] == {"grid": "FRA"}
    a = _cli("assess", str(out / "jobs" / "1001"), "--format", "json", "--samples", "0")
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["energy_kwh"] == pytest.approx(2901233 / 3.6e6)
    no_energy = _cli("assess", str(out / "jobs" / "1004"))
    assert no_energy.returncode == 2 and "no energy reading" in no_energy.stderr


def test_run_sacct_uses_utc_and_the_standard_time_format(tmp_path: Path) -> None:
    """--run-sacct runs the real command line; a stand-in sacct on PATH prints the fixture and what it was given."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "fixture.txt").write_text(SACCT)
    script = bindir / "sacct"
    script.write_text(f'#!/bin/sh\necho "$TZ $SLURM_TIME_FORMAT $*" > {tmp_path}/called.txt\ncat {tmp_path}/fixture.txt\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "TZ": "Asia/Tokyo", "SLURM_TIME_FORMAT": "relative"}
    out = tmp_path / "fleet"
    p = _cli(
        "fleet",
        "import",
        "slurm",
        "--run-sacct",
        "--start",
        "2025-03-03",
        "--end",
        "2025-03-04",
        "-o",
        str(out),
        "--quiet",
        env=env,
    )
    assert p.returncode == 0, p.stderr
    called = (tmp_path / "called.txt").read_text()
    assert called.startswith("UTC standard --allusers --parsable2 --format=JobID,JobIDRaw,")
    assert "--starttime=2025-03-03T00:00:00 --endtime=2025-03-04T00:00:00" in called
    assert len(pd.read_parquet(out / "ledger")) == 9


@pytest.mark.parametrize(
    "args,pattern",
    [
        (["fleet", "import", "slurm", "missing.txt", "-o", "OUT"], "missing.txt: no such file"),
        (["fleet", "import", "slurm", "--run-sacct", "-o", "OUT"], "--run-sacct needs --start and --end"),
        (["fleet", "import", "slurm", "SACCT", "--tz", "Mars/Olympus", "-o", "OUT"], "unknown time zone"),
        (["fleet", "import", "slurm", "SACCT", "--gpu-type", "a100", "-o", "OUT"], "expected TYPE=GPU"),
        (["fleet", "import", "slurm", "SACCT", "--start", "yesterday", "-o", "OUT"], "expected a time"),
        (
            ["fleet", "import", "slurm", "SACCT", "--tz", "UTC", "--start", "2025-03-04", "--end", "2025-03-03", "-o", "OUT"],
            "not after",
        ),
        (["fleet", "import", "slurm", "SACCT", "--delimiter", "", "-o", "OUT"], "the delimiter sacct wrote"),  # a traceback
        # connection options without --url were ignored: the user believed the server was read
        (["fleet", "import", "slurm", "SACCT", "--ca-file", "ca.pem", "-o", "OUT"], "--ca-file: it is for the Prometheus"),
        (["fleet", "import", "slurm", "SACCT", "--header", "X-Scope-OrgID: t", "-o", "OUT"], "add --url"),
        (["fleet", "import", "slurm", "SACCT", "--selector", 'cluster="a"', "-o", "OUT"], "--selector: it is for the"),
    ],
)
def test_bad_arguments_exit_2_and_write_nothing(args: list[str], pattern: str, tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text(SACCT)
    args = [a.replace("OUT", str(tmp_path / "out")).replace("SACCT", str(tmp_path / "s.txt")) for a in args]
    p = subprocess.run([sys.executable, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert pattern in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_run_sacct_without_sacct_is_a_clear_error(tmp_path: Path) -> None:
    p = _cli(
        "fleet",
        "import",
        "slurm",
        "--run-sacct",
        "--start",
        "now-1d",
        "--end",
        "now",
        "-o",
        str(tmp_path / "o"),
        env={"PATH": "/nonexistent"},
    )
    assert p.returncode == 2 and "sacct is not on PATH" in p.stderr


def test_running_jobs_end_when_sacct_ran_and_an_empty_report_still_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --end, a running job lasts until sacct ran (its last End, or a running job's Start + Elapsed), not until
    today; without energy nothing is assessed, and the report says why for each job."""
    from footprint.cli.app import main

    f = tmp_path / "sacct.txt"
    f.write_text(SACCT)
    assert main(["fleet", "import", "slurm", str(f), "--tz", "UTC", "-o", str(tmp_path / "fleet"), "--quiet"]) == 0
    idx = pd.read_parquet(tmp_path / "fleet" / "ledger").set_index("job_id")
    assert idx.loc["1004", "duration_s"] == pytest.approx(3 * 3600 + 40 * 60)  # 08:20 -> 12:00, the last End in the file
    capsys.readouterr()
    assert main(["fleet", "report", str(tmp_path / "fleet")]) == 0
    out = capsys.readouterr().out
    assert "Jobs assessed: 0 of 9" in out and "no energy measured" in out
