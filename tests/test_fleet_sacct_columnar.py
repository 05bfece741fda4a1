"""The columnar sacct reader (`footprint.fleet.sacct_batch`) against the rules read line by line (`sacct_rules._line`):
the same jobs, notes and order on the fixture, on tricky lines of every kind, in several time zones, and across
batch boundaries."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from footprint.errors import FootprintError
from footprint.fleet import slurm
from footprint.fleet.slurm import parse_sacct
from tests.test_fleet_slurm import SACCT

HEAD = "JobID|JobIDRaw|JobName|User|Account|Partition|Start|End|Elapsed|AllocTRES|NodeList|State|ConsumedEnergyRaw"
GPU = "billing=8,cpu=8,gres/gpu=1,mem=32G,node=1"


def _line(job: str, start: str = "2025-03-03T08:00:00", end: str = "2025-03-03T09:00:00", **kw: str) -> str:
    f = {"raw": job, "name": "train", "user": "ann", "account": "acc", "part": "gpu", "elapsed": "01:00:00"}
    f.update(tres=GPU, nodes="gpu-01", state="COMPLETED", energy="")
    f.update(kw)
    return "|".join([job, f["raw"], f["name"], f["user"], f["account"], f["part"], start, end, f["elapsed"],
                     f["tres"], f["nodes"], f["state"], f["energy"]])  # fmt: skip


TRICKY = [
    HEAD,
    _line("2001"),
    _line("2001.batch", energy="500"),
    _line("2001.0", energy="700"),
    _line("2001.1", energy="700.0"),  # a tie: the first step keeps it
    _line("2001.2", energy="7e2"),  # not plain: by the rules, a tie too
    _line("2002", energy="123.5", state="CANCELLED by 99"),
    _line("2002", name="again"),  # twice: the first line is kept
    _line("2003", start="2025-02-30T08:00:00"),  # no such day: one-line note by the rules
    _line("2004", end="2025-03-03T08:00:60"),  # a leap second Python refuses
    _line("2005", start="1999-12-30T23:00:00"),  # before 2000
    _line("2006", start="0001-01-01T00:00:00"),
    _line("2007", end="9999-12-31T23:59:59"),
    _line("2008", end="2025-03-03T07:00:00"),  # ends before it starts
    _line("2009", start="Unknown", state="PENDING"),
    _line("2010", start=" 2025-03-03T08:00:00 ", end="2025-03-03T09:00:00+01:00"),  # padded, an offset
    _line("2011", start="2025-03-03T08:00:00.5"),
    _line("2012", start="2025-03-03 08:00:00"),
    _line("2013", name="tab\there", user="zoë"),  # not ASCII printable: by the rules
    "2014|2014|a|b|ann|acc|gpu|2025-03-03T08:00:00|2025-03-03T09:00:00|01:00:00|" + GPU + "|gpu-02|COMPLETED|",
    _line("2015+0", nodes="gpu-03"),
    _line("2015+1", nodes="gpu-04", tres="gres/gpu:v100=2", end="Unknown", state="RUNNING"),
    _line("2016_[1-4%2]", start="Unknown", end="Unknown", tres="", nodes="None assigned", state="PENDING"),
    _line("2017_3", raw="2020"),
    _line("2018", tres="billing=4,cpu=4,mem=16G,node=1", nodes="cpu-01"),  # CPU-only
    _line("2019", tres="gres/gpu=x"),  # damaged TRES
    _line("2021", nodes="gpu-[03-01]"),  # a range running backwards
    _line("2022", tres="gres/gpu=3", nodes="gpu-[05-06]"),  # 3 over 2 nodes: a note on the job
    _line("2023", tres="gres/gpu:a100=2,gres/gpu:v100=2,gres/gpu=4", nodes="gpu-[07-08]"),
    _line("2024", elapsed="1-02:03:04.5"),
    _line("2025", elapsed="banana", end="Unknown", state="RUNNING"),
    _line("2026", elapsed="99999999-00:00:00"),
    _line("2027", energy="0"),
    _line("2028", energy="18446744073709551615"),
    _line("2029", energy="nan"),
    _line("2030", energy="-5"),
    _line("2031", energy=" 42 "),
    _line("2032", state="", user=" ", account=""),
    _line("2033", start="2025-03-30T02:30:00", end="2025-03-30T03:30:00"),  # no such hour in Paris
    _line("2034", start="2025-10-26T02:30:00", end="2025-10-26T03:30:00"),  # twice in Paris
    _line("2035", start="2025-11-02T01:30:00", end="2025-11-02T02:30:00"),  # twice in New York
    _line("abc"),
    "2036|too|few",
    "",
    "   ",
    _line("2037", end="None", state="RUNNING", elapsed="00:10:00") + "\r",
    _line("2038.batch"),  # a step whose job is not listed
    _line("2039", raw=""),
    _line("2040", nodes="rack[0-1]_blade[0-2]", tres="gres/gpu=6"),
    _line("2041", start="2000-01-01T06:00:00", end="2199-12-31T12:00:00"),
]
ZONES = [UTC, ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York"), timezone(timedelta(hours=5, minutes=30))]


def _same(text: str, tz, batch: int | None = None) -> None:  # noqa: ANN001
    if batch:
        old, slurm.BATCH_LINES = slurm.BATCH_LINES, batch
    try:
        a = parse_sacct(text, tz, "s.txt", columnar=True)
        b = parse_sacct(text, tz, "s.txt", columnar=False)
    finally:
        if batch:
            slurm.BATCH_LINES = old
    assert list(a.jobs) == list(b.jobs)
    assert a.skipped == b.skipped
    assert a.taken_at == b.taken_at and a.fields == b.fields


@pytest.mark.parametrize("tz", ZONES, ids=str)
def test_columnar_reader_agrees_with_the_rules_on_tricky_lines(tz) -> None:  # noqa: ANN001
    text = "\n".join(TRICKY) + "\n"
    _same(text, tz)
    _same(SACCT, tz)
    r = parse_sacct(text, tz, "s.txt")
    jobs = {j.job_id: j for j in r.jobs}
    assert {"2001", "2002", "2013", "2014", "2015", "2017_3", "2022", "2040", "2041"} <= set(jobs)
    assert jobs["2001"].consumed_energy_j == 700 and jobs["2001"].consumed_energy_from == "step 2001.0 (the largest of its steps)"
    assert jobs["2002"].name == "train" and jobs["2002"].state == "CANCELLED" and jobs["2002"].consumed_energy_j == 123.5
    assert jobs["2014"].name == "a|b" and jobs["2013"].user == "zoë" and jobs["2017_3"].raw_id == "2020"
    assert len(jobs["2040"].allocations[0].nodes) == 6
    notes = "\n".join(r.skipped)
    for job in ("2003", "2004", "2005", "2006", "2007", "2008", "2009", "2018", "2019", "2021", "2036", "abc"):
        n = next(i for i, x in enumerate(TRICKY, start=1) if x.startswith(f"{job}|"))
        assert f"line {n}: " in notes  # each line left out says so, once
    assert "job 2002 appears twice" in notes and "CPU-only" in notes and "pending" in notes


def test_columnar_reader_agrees_across_batches_and_with_carriage_returns() -> None:
    """Duplicates, steps and notes that fall in different batches; CRLF line ends; every batch size."""
    lines = TRICKY[1:] * 3
    text = "\r\n".join([HEAD, *lines]) + "\r\n"
    for batch in (1, 2, 7, 64):
        _same(text, ZoneInfo("Europe/Paris"), batch)


def test_columnar_reader_keeps_the_row_cap_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap on jobs and notes held is checked at the same line as a line-by-line reader does."""
    text = "\n".join([HEAD] + [_line(str(3000 + i)) for i in range(40)] + [_line("3000")])
    monkeypatch.setattr(slurm, "MAX_SACCT_ROWS", 25)
    errors = []
    for columnar in (True, False):
        with pytest.raises(FootprintError) as e:
            parse_sacct(text, UTC, "s.txt", columnar=columnar)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "by line 27" in errors[0]


def test_columnar_reader_with_other_delimiters() -> None:
    text = "\n".join(TRICKY).replace("|", "\t")
    a = parse_sacct(text, UTC, "s.txt", delimiter="\t")
    b = parse_sacct(text, UTC, "s.txt", delimiter="\t", columnar=False)
    assert list(a.jobs) == list(b.jobs) and a.skipped == b.skipped and len(a.jobs) > 5
