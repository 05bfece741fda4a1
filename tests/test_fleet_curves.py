"""The counters as curves (`fleet.summaries`, `fleet.curves`) on a job mix like a real cluster's: single-GPU jobs
of 0.5-6 h (about ten a GPU over two days), one of two nodes without the job label, 30 s scrapes, on a real
Prometheus; every job against the synthetic truth, and what the import asked the server."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from footprint.fleet import promserver, synthetic
from footprint.fleet.dialects import DIALECTS, dialect
from footprint.fleet.importer import ImportOptions, import_fleet
from footprint.fleet.prometheus import PromConfig
from footprint.fleet.slurm import parse_sacct
from footprint.fleet.telemetry import DcgmNames

needs_prometheus = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))


@pytest.fixture(scope="module")
def mix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[synthetic.Cluster, Path]]:
    d = tmp_path_factory.mktemp("mix")
    start = datetime(2025, 2, 1, tzinfo=UTC).timestamp()
    c = synthetic.random_cluster(
        start, 2.0, 2, 8, synthetic.demo_profiles(), scrape_s=30.0, seed=5, fine_s=10.0, job_hours=(0.5, 6.0), job_gpus=(1,)
    )
    c.unlabelled_hosts = {"gpu-02"}
    synthetic.write_openmetrics(c, d / "m.om", power_gauge=False)
    tsdb = promserver.backfill(d / "m.om", d / "tsdb")
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    with promserver.serve(tsdb) as url:
        import_fleet(d / "fleet", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
        import_fleet(d / "labels", ImportOptions(c.start, c.end, PromConfig(url)))  # jobs from their labels alone
    yield c, d / "fleet"


@needs_prometheus
def test_every_job_of_30_minutes_or_more_within_1_percent_of_its_true_energy(mix: tuple[synthetic.Cluster, Path]) -> None:
    c, out = mix
    idx = pd.read_parquet(out / "ledger").set_index("job_id")
    truth = c.truth()
    long = [j for j in c.jobs if (j.end or c.end) - j.start >= 1800]
    hosts = {j.gpus[0][0] for j in long}
    assert hosts == {"gpu-01", "gpu-02"} and len(long) >= 100  # labelled and SLURM-only jobs, ~ten a GPU
    err = {j.job_id: abs(idx.loc[j.job_id, "gpu_energy_j"] / truth[j.job_id] - 1) for j in long}
    assert max(err.values()) < 0.01, sorted(err.items(), key=lambda x: -x[1])[:5]
    # on the node without labels each job's GPU was inferred from the power steps at its edges: the right one
    slurm_only = [j for j in long if j.gpus[0][0] == "gpu-02"]
    right = [j for j in slurm_only if f"gpu-02:gpu{j.gpus[0][1]})" in idx.loc[j.job_id, "notes"]]
    assert len(right) == len(slurm_only)


@needs_prometheus
def test_jobs_known_from_their_labels_alone_within_1_percent(mix: tuple[synthetic.Cluster, Path]) -> None:
    """Without SLURM's table a job's edges are placed inside their scrape intervals by the intervals' energy
    (`aggregate.label_edges`): half a scrape either side of its labelled samples, linearly interpolated, gave
    30-min jobs up to 1.4 % too little."""
    c, out = mix
    idx = pd.read_parquet(out.parent / "labels" / "ledger").set_index("job_id")
    truth = c.truth()
    long = [j for j in c.jobs if (j.end or c.end) - j.start >= 1800 and j.gpus[0][0] not in c.unlabelled_hosts]
    assert len(long) >= 50 and all(idx.loc[j.job_id, "source"] == "label" for j in long)
    err = {j.job_id: abs(idx.loc[j.job_id, "gpu_energy_j"] / truth[j.job_id] - 1) for j in long}
    assert max(err.values()) < 0.01, sorted(err.items(), key=lambda x: -x[1])[:5]


@needs_prometheus
def test_requests_do_not_grow_with_the_jobs(mix: tuple[synthetic.Cluster, Path]) -> None:
    """Per day a fixed handful of grouped queries (summaries, phases, the unlabelled node), and a raw read only for
    the hours where a GPU's series cannot be laid out from their summaries."""
    c, out = mix
    meta = json.loads((out / "fleet.json").read_text())
    agg = meta["sources"]["prometheus"]["aggregation"]
    labelled_gpu_hours = 8 * 49
    assert agg["raw_bins"] < 0.1 * labelled_gpu_hours
    assert agg["requests"] < len(c.jobs) / 4, (agg, len(c.jobs))
    gpus = pd.read_parquet(out / "gpus.parquet")
    idx = pd.read_parquet(out / "ledger")
    g = gpus[gpus["component"] == "gpu"]
    # what the jobs hold never exceeds what the GPUs metered; the rest is the idle line
    assert (g["allocated_energy_j"] <= g["energy_j"] * (1 + 1e-9)).all()
    assert idx["gpu_energy_j"].sum() == pytest.approx(g["allocated_energy_j"].sum(), rel=1e-9)
    assert (g["resets"] == 0).all() and (g["gaps"] == 0).all()


@needs_prometheus
def test_a_days_series_selected_by_its_job_labels_give_the_same_ledger(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Inside the days discovery listed, a day's summaries and phase queries select its series by the job labels
    listed for it (and those without one), and a raw read its GPUs, rather than every series of the TSDB block (or
    of a node): the same ledger, to the bit, as the queries over every series."""
    from footprint.fleet import promql, summaries
    from footprint.fleet.aggregate import Found

    c, out = mix
    asked: list[str] = []
    by_job = summaries.Summaries._by_job
    monkeypatch.setattr(summaries.Summaries, "_by_job", lambda self, *a: asked.append(a) or by_job(self, *a))
    instant: list[str] = []
    query = promql.Kept.query
    monkeypatch.setattr(promql.Kept, "query", lambda self, expr, *a, **k: instant.append(expr) or query(self, expr, *a, **k))
    with promserver.serve(out.parent / "tsdb") as url:
        sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
        import_fleet(tmp_path / "by-job", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
        metric = DcgmNames().energy_metric
        phases = [q for q in instant if q.startswith(f"timestamp({metric}")]
        assert phases and all("hpc_job=~" in q for q in phases), phases
        raw = [q for q in instant if q.startswith(metric) and q.endswith("]")]
        assert raw and all(",gpu=" in q or "{UUID=~" in q for q in raw), raw  # its GPUs, by labels or UUID
        monkeypatch.setattr(Found, "jobs_between", lambda self, a, b: None)
        import_fleet(tmp_path / "every", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
    assert [jobs for (jobs,) in asked if jobs] and [1 for (jobs,) in asked if not jobs]  # jobs listed that day; blank
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        every = pd.read_parquet(tmp_path / "every" / name)
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "by-job" / name), every, check_exact=True)


@needs_prometheus
@pytest.mark.parametrize("swapped", ["none", "half"])
def test_raw_reads_of_gpus_with_one_uuid_take_several_bins_in_one_request_and_give_the_same_ledger(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, swapped: str
) -> None:
    """The bins the summaries cannot lay out are read raw. GPUs whose series carry one UUID label are read several
    bins at once (their UUIDs over the group's span, each bin's samples taken from the answer); GPUs seen with
    several UUIDs (here: made so, as if swapped in the window) a bin at a time by node and GPU labels. Each bin is
    given the samples its own read returns, sample for sample, and the ledger is the same to the bit as every bin
    read alone by node and GPU labels, in fewer requests."""
    from footprint.fleet import promql, summaries
    from footprint.fleet.curves import points

    c, out = mix
    metric = DcgmNames().energy_metric
    raw: list[str] = []
    applied: list[tuple] = []  # each bin read raw: its GPUs and every sample it was given
    query, apply, reads = promql.Kept.query, summaries.Summaries._raw, summaries.Summaries._raw_reads
    probe = summaries.Summaries._increase_ok
    swap = {"mixed": swapped, "alone": "all"}
    probing: list[bool] = []

    def spy(self: promql.Kept, expr: str, *a: object, **k: object) -> object:
        if expr.startswith(metric) and expr.endswith("]") and not probing:  # a bin read raw (not the probe)
            raw.append(expr)
        return query(self, expr, *a, **k)  # type: ignore[arg-type]

    def probed(self: summaries.Summaries, ends: list[float]) -> bool:
        probing.append(True)
        try:
            return probe(self, ends)
        finally:
            probing.clear()

    def seen(self: summaries.Summaries, devs: list[int], series: list) -> None:
        samples = sorted((s["metric"].get("gpu"), *map(tuple, points(s))) for s in series if s["metric"].get("gpu"))
        applied.append((tuple(devs), [(g, [float(x) for x in t], [float(x) for x in v]) for g, t, v in samples]))
        apply(self, devs, series)

    def some_swapped(self: summaries.Summaries, ch: object, todo: list) -> list:
        devs, which = sorted(self.found.uuids), swap[run]
        for d in devs if which == "all" else devs[::2] if which == "half" else ():
            self.found.uuids[d] = {"GPU-a", "GPU-b"}  # two UUIDs: read a bin at a time by node and GPU labels
        return reads(self, ch, todo)  # type: ignore[arg-type]

    monkeypatch.setattr(promql.Kept, "query", spy)
    monkeypatch.setattr(summaries.Summaries, "_raw", seen)
    monkeypatch.setattr(summaries.Summaries, "_raw_reads", some_swapped)
    monkeypatch.setattr(summaries.Summaries, "_increase_ok", probed)
    asked, given = {}, {}
    with promserver.serve(out.parent / "tsdb") as url:
        sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
        for run in ("mixed", "alone"):
            import_fleet(tmp_path / run, ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
            asked[run], given[run], raw[:], applied[:] = list(raw), list(applied), [], []
    by_uuid = [q for q in asked["mixed"] if "{UUID=~" in q]
    several = [q for q in by_uuid if not q.endswith("[3600000ms]")]  # a group of several bins in one request
    assert by_uuid and (swapped == "none") == (by_uuid == asked["mixed"])
    assert (len(asked["mixed"]) < len(asked["alone"]) and several) if swapped == "none" else True, asked
    assert all(",gpu=" in q and q.endswith("[3600000ms]") for q in asked["alone"]), asked["alone"]  # one an hour
    assert given["mixed"] == given["alone"] and given["alone"]  # each bin's samples, sample for sample
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        alone = pd.read_parquet(tmp_path / "alone" / name)
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "mixed" / name), alone, check_exact=True)


@needs_prometheus
def test_a_chunks_summaries_ask_the_job_labels_of_one_day_listed(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Discovery lists the series a chunk's span at a time from the first chunk's start, so a chunk's summaries
    select the job labels of one listing: with days offset from the chunks (by the lookback, as before) the first
    chunk reached outside them (every series of the block selected) and each other was two days' labels."""
    from footprint.fleet import aggregate, curves

    c, out = mix
    calls: list[tuple[aggregate.Found, float, float, list[str] | None]] = []
    between = aggregate.Found.jobs_between
    monkeypatch.setattr(
        aggregate.Found, "jobs_between", lambda self, a, b: calls.append((self, a, b, got := between(self, a, b))) or got
    )
    with promserver.serve(out.parent / "tsdb") as url:
        sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
        import_fleet(tmp_path / "f", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
    found = calls[0][0]
    assert found.listed[0] == curves.first_chunk_start(c.start) and found.listed[2] == curves.CHUNK_S
    labels = found.fetch.t.labels
    days = [sorted({found.raw_last.get(i, labels[i]) for i in ids}) for _, ids in sorted(found.day_jobs.items())]
    chunks = [(a, got) for _, a, b, got in calls if abs(b - a - curves.CHUNK_S) < 1]
    spans = [sorted(got) for a, got in chunks if got is not None]
    assert len(spans) == 2 and all(span in days for span in spans), (len(chunks), [len(d) for d in days])
    assert [a for a, _ in chunks][:2] == pytest.approx([found.listed[0], found.listed[0] + curves.CHUNK_S], abs=1e-4)


@needs_prometheus
def test_the_series_without_a_job_label_asked_days_at_once_give_the_ledger_of_a_day_at_a_time(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The series without a job label are asked `IDLE_CHUNKS` days at once (each such query computes the job
    label's inverse over the block) and each day takes its bins: the same ledger, to the bit, as one day a query."""
    from footprint.fleet import promql, summaries

    c, out = mix
    blank: list[tuple[float, float]] = []
    query_range = promql.Kept.query_range

    def spy(self: promql.Kept, expr: str, start: float, end: float, *a: object, **k: object) -> object:
        if "\\\\s*" in expr:
            blank.append((start, end))
        return query_range(self, expr, start, end, *a, **k)

    monkeypatch.setattr(promql.Kept, "query_range", spy)
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    with promserver.serve(out.parent / "tsdb") as url:
        import_fleet(tmp_path / "days", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
        at_once = len(blank)
        monkeypatch.setattr(summaries, "IDLE_CHUNKS", 1)
        import_fleet(tmp_path / "one", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
    assert at_once == 3 and len(blank) - at_once == 3 * 2  # count, min, max: once, then once for each listed day
    raw = [
        json.loads((d / "fleet.json").read_text())["sources"]["prometheus"]["aggregation"]["raw_bins"]
        for d in (out, tmp_path / "days", tmp_path / "one")
    ]
    assert raw[0] == raw[1] == raw[2], raw  # the same hours laid out from the summaries
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        one = pd.read_parquet(tmp_path / "one" / name)
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "days" / name), one, check_exact=True)
        pd.testing.assert_frame_equal(pd.read_parquet(out / name), one, check_exact=True)


def test_a_span_of_the_days_listed_asks_the_days_it_meets_to_the_millisecond() -> None:
    """`Found.jobs_between` is closed at both ends and reads times to Prometheus' millisecond: a span whose ends are a
    day's (however their floats round) is that day; a millisecond past an end reaches the next."""
    from types import SimpleNamespace

    from footprint.fleet.aggregate import Found

    lo, day = 1_735_686_000.001, 86_400.0
    found = Found(SimpleNamespace(t=SimpleNamespace(labels=["a", "b", "c"])))  # type: ignore[arg-type]
    found.listed = (lo, lo + 3 * day, day)
    found.day_jobs = {lo + k * day: [k] for k in range(3)}
    ulp = np.spacing(lo)
    assert found.jobs_between(lo + day + ulp, lo + 2 * day - ulp) == ["b"]
    assert found.jobs_between(lo + day - ulp, lo + 2 * day + ulp) == ["b"]
    assert sorted(found.jobs_between(lo + day, lo + 2 * day + 0.001)) == ["b", "c"]
    assert found.jobs_between(lo + day - 0.001, lo + day) == ["a"]
    assert sorted(found.jobs_between(lo + day - 0.001, lo + day + 0.001)) == ["a", "b"]
    assert found.jobs_between(lo + day, lo + day) == ["b"]
    assert found.jobs_between(lo - 0.001, lo + day) is None


@needs_prometheus
def test_bins_laid_out_a_chunk_at_once_give_the_ledger_of_one_bin_at_a_time(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The GPUs whose bins all lay out without doubt are laid out for a whole chunk in numpy (`bins.Table.runs`);
    with that path turned off every bin goes through `Summaries._lay_out` one at a time: the same ledger, to the bit."""
    from footprint.fleet import bins

    c, out = mix
    runs, share = bins.Table.runs, []

    def counted(self: bins.Table, *a: object) -> bins.Runs:
        got = runs(self, *a)
        share.append(float((got.mode > 0).mean()))
        return got

    def none(self: bins.Table, *a: object) -> bins.Runs:
        got = runs(self, *a)
        return bins.Runs(*([] for _ in range(10)), np.zeros(len(got.mode), np.int8))

    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    with promserver.serve(out.parent / "tsdb") as url:
        monkeypatch.setattr(bins.Table, "runs", counted)
        import_fleet(tmp_path / "at-once", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
        monkeypatch.setattr(bins.Table, "runs", none)
        import_fleet(tmp_path / "one-by-one", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
    assert share and sum(share) / len(share) > 0.5, share  # most bins took the numpy path
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        a, b = (pd.read_parquet(tmp_path / d / name) for d in ("at-once", "one-by-one"))
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@needs_prometheus
def test_jobs_read_from_the_curves_a_block_of_chunks_at_once_give_the_ledger_of_one_chunk_at_a_time(
    mix: tuple[synthetic.Cluster, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Jobs are evaluated and written a chunk at a time; their energies are read from the curves `CURVE_BLOCK`
    chunks at once (one interpolation per GPU per block). Blocks of 7 chunks of 9 jobs (blocks and chunks that
    do not divide the jobs, GPUs met in another order in each chunk; jobs under 90 minutes read raw, the items
    the curves leave to each chunk) against blocks of one chunk: the same ledger, per-GPU rows and totals, row for
    row and to the bit."""
    from footprint.fleet import aggregate

    c, out = mix
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    monkeypatch.setattr(aggregate, "CHUNK_JOBS", 9)
    with promserver.serve(out.parent / "tsdb") as url:
        for name, block in (("blocks", 7), ("chunks", 1)):
            monkeypatch.setattr(aggregate, "CURVE_BLOCK", block)
            import_fleet(tmp_path / name, ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct, exact_below_s=5400))
    assert len(c.jobs) > 7 * 9 and sum((j.end or c.end) - j.start < 5400 for j in c.jobs) >= 5
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        a, b = (pd.read_parquet(tmp_path / d / name) for d in ("blocks", "chunks"))
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_a_chunks_summaries_join_by_group_and_bin() -> None:
    """The summaries side by side per (GPU, job label, bin): rows ordered by bin, GPU and label; a bin one summary
    did not answer is NaN; of two series of one group the later's value at a shared bin; a GPU without resets in
    the window reads 0 where its count answered."""
    from footprint.fleet.bins import NO_PART, Part, Table

    def part(keys: list, lens: list, bins: list, vals: list) -> Part:
        return Part(keys, np.array(lens), np.array(bins), np.array(vals, float))

    count = part([(1, "b"), (1, "a"), (0, "")], [2, 1, 2], [0, 1, 1, 0, 1], [120, 60, 60, 120, 120])
    low = part([(1, "b"), (1, "a"), (1, "a")], [2, 1, 1], [0, 1, 1, 1], [5, 9, 7, 8])
    high = part([(1, "b"), (1, "a")], [1, 1], [0, 1], [6, 10])
    t = Table([count, low, high, NO_PART], steady={0})
    got = list(zip(t.bin.tolist(), t.dev.tolist(), t.rows(), strict=True))
    nan = math.nan
    want = [  # (label, count, min, max, resets, increase: not asked)
        (0, 0, ("", 120.0, nan, nan, 0.0, nan)),
        (0, 1, ("b", 120.0, 5.0, 6.0, nan, nan)),
        (1, 0, ("", 120.0, nan, nan, 0.0, nan)),
        (1, 1, ("a", 60.0, 8.0, 10.0, nan, nan)),  # two series of group (1, "a") at bin 1: the later's minimum
        (1, 1, ("b", 60.0, 9.0, nan, nan, nan)),
    ]
    assert repr(got) == repr(want)
    assert t.start.tolist() == [0, 1, 2, 3] and t.stop.tolist() == [1, 2, 3, 5]
    assert t.after() == [True, True, False, False]


def test_the_job_label_selector_escapes_values_and_matches_blank_labels() -> None:
    """A job label is matched by its raw value (regex metacharacters escaped); a series without one by a blank
    label, as `_job_key` reads it (absent, empty or whitespace)."""
    from footprint.fleet.summaries import Summaries

    s = Summaries.__new__(Summaries)
    s.n, s.raw_hosts = DcgmNames(), ["gpu-08"]
    metric = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    jobs, idle = (s._sel(metric, s.raw_hosts, exclude=True, also=s._by_job(x)) for x in (["12.3", "a|b"], []))
    assert jobs == metric + '{Hostname!~"gpu-08",hpc_job=~"12\\\\.3|a\\\\|b"}'
    assert idle == metric + '{Hostname!~"gpu-08",hpc_job=~"\\\\s*"}'
    s.raw_hosts = []
    assert s._sel(metric, None, also=s._by_job([])) == metric + '{hpc_job=~"\\\\s*"}'


def test_dialect_table_gives_the_default_names() -> None:
    assert DcgmNames.of("dcgm") == DcgmNames()
    assert DcgmNames.of("dcgm", gpu_label="minor_number").gpu_label == "minor_number"
    assert DIALECTS["dcgm"].energy_unit_j == 1e-3
    with pytest.raises(KeyError, match="known: amd, dcgm"):
        dialect("nope")


def test_every_exporter_the_cli_offers_is_one_entry_of_the_dialect_table() -> None:
    """dcgm and AMD's device-metrics-exporter are rows of one table; --exporter's names are built from it."""
    from footprint.fleet.telemetry import EXPORTERS

    assert set(EXPORTERS) == set(DIALECTS) == {"dcgm", "amd"}
    amd = EXPORTERS["amd"]
    assert (amd.energy_metric, amd.energy_unit_j, amd.job_labels) == ("gpu_energy_consumed", 1e-6, ("job_id",))
    assert amd.instance_label == DIALECTS["amd"].instance_label == "gpu_partition_id"


def test_a_bad_sample_costs_its_own_reading_not_the_series() -> None:
    """Prometheus values of null, text or 1e300 (a broken exporter) are no reading; the series' other samples stay."""
    from footprint.fleet.curves import points

    t, v = points({"values": [[1, "2"], [2, None], [3, "abc"], [4, "1e300"], [5, "7"], ["x", "8"], [6]]})
    assert t.tolist() == [1.0, 5.0] and v.tolist() == [2.0, 7.0]


def _answer(values: list, labels: dict | None = None, **top: object) -> bytes:
    body = {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": labels or {"gpu": "0"}, "values": values}]},
    }
    return json.dumps(body | top).encode()


GOOD = [[1, "2"], [2.5, "NaN"], [3, "-Inf"], [4, "1e300"], [5, "-3"], [6, "1e17"], [7, "-0.0"], ["8", 9]]
JUNK = {
    "a null value": _answer([[1, "2"], [2, None]]),
    "text": _answer([[1, "2"], [2, "abc"]]),
    "+Inf": _answer([[1, "2"], [2, "+Inf"]]),
    "a three-element pair": _answer([[1, "2"], [2, "3", 4]]),
    "a short pair": _answer([[1, "2"], [6]]),
    "-0 (signed zero)": _answer([[1, "-0"], [2, "3"]]),
    "a number label": _answer([[1, "2"]], {"gpu": 0}),
    "warnings": _answer([[1, "2"]], warnings=["partial response"]),
    "an error status": _answer([[1, "2"]], status="error"),
    "a vector": json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode(),
    "values not a list": _answer({"a": 1}),  # type: ignore[arg-type]
    "a NaN literal": b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,NaN]]}]}}',
}


def test_a_matrix_decoded_typed_reads_as_the_untyped_path() -> None:
    """`answers.matrix_data` (msgspec, values straight to float arrays) gives `points` what the untyped JSON gave it,
    NaN, infinities, 1e300 and negative readings dropped alike; answers it does not take whole (junk values, wrong
    shapes, warnings, other results) are left to the untyped path: None, and `loads` reads them as json does."""
    from footprint.fleet.answers import loads, matrix_data
    from footprint.fleet.curves import points, points_many

    body = _answer(GOOD)
    typed = matrix_data(body)
    assert typed is not None and isinstance(typed["result"][0]["values"], np.ndarray)
    untyped = json.loads(body)["data"]
    for got, want in zip(points(typed["result"][0]), points(untyped["result"][0]), strict=True):
        assert got.tobytes() == want.tobytes()  # bit for bit, the sign of -0.0 too
    t, v = points(typed["result"][0])
    assert t.tolist() == [1.0, 6.0, 7.0, 8.0] and v.tolist() == [2.0, 1e17, 0.0, 9.0] and math.copysign(1, v[2]) == -1
    for why, junk in JUNK.items():
        assert matrix_data(junk) is None, why
        assert loads(junk) == json.loads(junk), why
    pieces = [*typed["result"], *json.loads(JUNK["text"])["data"]["result"]]  # a split request, half read untyped
    t, v, lens = points_many(pieces)
    assert t.tolist() == [1.0, 6.0, 7.0, 8.0, 1.0] and v.tolist() == [2.0, 1e17, 0.0, 9.0, 2.0] and lens == [4, 1]


PLAIN = [[1, "2"], [2.5, "1e17"], [3, "-0.0"], [4.125, "1e300"], [1735693200.001, "3650322400.5"], [6, "-3"]]
NOT_PLAIN = {  # answers shaped almost like plain pairs: each must be left to the typed decoder (or to json)
    "a pair of three and a pair of one": [[1, "2", "3"], ["4"]],
    "a time quoted, a value not": [["1", 2], [3, "4"]],
    "a value with a comma": [[1, "2,5"], [3, "4"]],
    "a value that is not a number": [[1, "2"], [2, "1e"]],
    "a value with a plus": [[1, "+2"], [3, "4"]],
    "an empty value": [[1, ""], [3, "4"]],
    "NaN": [[1, "NaN"], [3, "4"]],
    "an infinite value": [[1, "1e400"], [3, "4"]],
    "a pair nested in a pair": [[[1, "2"]], [3, "4"]],
}


def test_plain_answers_are_read_without_a_tuple_a_sample_and_read_alike() -> None:
    """`answers._plain` (values as raw text, one list of numbers) gives the arrays the typed decoder gives, bit for bit,
    over several series of different lengths; any answer not made only of ``[number, "number"]`` pairs of finite
    numbers is refused by it, and `matrix_data` then reads it exactly as the typed decoder alone would."""
    from footprint.fleet import answers

    series = [{"metric": {"gpu": str(i)}, "values": PLAIN[: i + 1]} for i in range(len(PLAIN))] + [
        {"metric": {"gpu": "empty"}, "values": []}
    ]
    data = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    body = json.dumps(data, separators=(",", ":")).encode()  # as Prometheus writes it
    plain = answers._plain(body, np)
    assert plain is not None
    spaced = answers.matrix_data(json.dumps(data).encode())  # whitespace: the typed decoder's, the same arrays
    assert spaced is not None and all(
        a["values"].tobytes() == b["values"].tobytes() for a, b in zip(plain["result"], spaced["result"], strict=True)
    )
    typed = answers._MATRIX.decode(body).data.result
    assert [s["metric"] for s in plain["result"]] == [s.metric for s in typed]
    for got, want in zip(plain["result"], typed, strict=True):
        assert got["values"].shape == (len(want.values), 2)
        assert got["values"].tobytes() == np.array(want.values, float).reshape(-1, 2).tobytes()  # -0.0 kept
    for why, values in NOT_PLAIN.items():
        body = json.dumps(json.loads(_answer(values)), separators=(",", ":")).encode()
        assert answers._plain(body, np) is None, why
        try:
            typed = answers._MATRIX.decode(body)
        except answers._ERRORS:
            typed = None
        got = answers.matrix_data(body)
        if typed is None or any(not np.isfinite(v).all() for s in typed.data.result for v in s.values):
            continue  # the typed decoder's own refusals and non-finite readings: `test_a_matrix_decoded_typed...`
        assert got is not None and got["result"][0]["values"].tolist() == [list(p) for p in typed.data.result[0].values], why


def test_kept_answers_read_back_typed(tmp_path: Path) -> None:
    """A resumed import reads a kept matrix through the same decoder as a fresh one: the same arrays."""
    from footprint.fleet.answers import matrix_data
    from footprint.fleet.promql import Kept

    answer = _answer(GOOD)

    class Server:
        asked = 0

        def query_range(self, expr: str, start: float, end: float, step: float, body: list, arrays: bool = False) -> dict:
            self.asked += 1
            body.append(answer)
            return matrix_data(answer) if arrays else json.loads(answer)["data"]

    server = Server()
    first = Kept(server, tmp_path).query_range("up", 0, 60, 30, arrays=True)  # type: ignore[arg-type]
    again = Kept(server, tmp_path)  # type: ignore[arg-type]
    second = again.query_range("up", 0, 60, 30, arrays=True)
    assert server.asked == 1 and again.reused == 1
    assert np.array_equal(first["result"][0]["values"], second["result"][0]["values"], equal_nan=True)
    assert again.query_range("up", 0, 60, 30)["result"][0]["values"] == json.loads(answer)["data"]["result"][0]["values"]


Drops = tuple[synthetic.Cluster, Path, Path, str, float]  # the cluster, aggregated and exact imports, the dip


@pytest.fixture(scope="module")
def drops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drops]:
    """Two labelled nodes: gpu-01:0 restarts its counter in the window's first hour (a driver reload), gpu-02:1's
    counter dips 1 J below its previous sample once, mid-hour, then goes on as before (invisible to a bin's count,
    min and max: only ``resets`` sees it). The import is run aggregated and ``--exact``."""
    d = tmp_path_factory.mktemp("drops")
    start = datetime(2025, 2, 1, tzinfo=UTC).timestamp()
    c = synthetic.random_cluster(
        start, 0.5, 2, 2, synthetic.demo_profiles(), scrape_s=30.0, seed=3, fine_s=10.0, job_hours=(0.5, 3.0), job_gpus=(1,)
    )
    c.gpus[0].reset_at = start + 1500.0
    held = next(j for j in c.jobs if j.gpus == [("gpu-02", 1)] and (j.end or c.end) - j.start > 2.5 * 3600)
    at = start + (math.ceil((held.start - start) / 3600) + 1) * 3600 - 1800  # mid-hour, inside the job
    samples, dipped_to = c.samples, []

    def dipped(g: synthetic.Gpu) -> tuple:
        t, counter, power, labels = samples(g)
        if g.key == ("gpu-02", 1):
            i = int(np.searchsorted(t, at))
            counter = counter.copy()
            counter[i] = counter[i - 1] - 1000.0  # mJ
            dipped_to.append(counter[i] / 1000.0)
        return t, counter, power, labels

    c.samples = dipped  # type: ignore[method-assign]
    synthetic.write_openmetrics(c, d / "m.om", power_gauge=False)
    tsdb = promserver.backfill(d / "m.om", d / "tsdb")
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    from footprint.fleet import promql

    query, asked = promql.Kept.query, []

    def other_engine(self: promql.Kept, expr: str, *a: object, **k: object) -> object:
        """A server whose ``increase`` does not extrapolate to the range's edges (as VictoriaMetrics' does not)."""
        got = query(self, expr, *a, **k)  # type: ignore[arg-type]
        if expr.startswith("increase("):
            raw = query(self, expr[len("increase(") : -1], *a, **k)  # type: ignore[arg-type]
            ends = {frozenset(s["metric"].items()) - {("__name__", s["metric"].get("__name__"))}: s for s in raw["result"]}
            for s in got["result"]:
                v = ends[frozenset(s["metric"].items())]["values"]
                s["value"][1] = str(float(v[-1][1]) - float(v[0][1]))
        return got

    def spy(self: promql.Kept, expr: str, *a: object, **k: object) -> object:
        asked.append(expr)
        return query(self, expr, *a, **k)  # type: ignore[arg-type]

    with promserver.serve(tsdb) as url, pytest.MonkeyPatch.context() as mp:
        for name, exact, engine in (("agg", False, spy), ("exact", True, query), ("other", False, other_engine)):
            mp.setattr(promql.Kept, "query", engine)
            import_fleet(d / name, ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct, exact=exact))
    (d / "agg" / "asked.json").write_text(json.dumps(asked))
    yield c, d / "agg", d / "exact", held.job_id, dipped_to[0]


@needs_prometheus
def test_a_counter_that_goes_down_inside_an_hour_is_read_raw_there(drops: Drops) -> None:
    """``resets`` is asked once over the window and per hour only on the nodes where it found one: both drops are
    still found and their hours read raw. Every job gets what ``--exact`` gives it, the job holding the dip too:
    PromQL's reset rule would count the counter's whole value after the 1 J dip (its whole lifetime's energy in one
    scrape); an interval that implies more than 10 kW is damage, left out and said, on both paths."""
    c, agg, exact, dip, dipped_to_j = drops
    a = pd.read_parquet(agg / "ledger").set_index("job_id")["gpu_energy_j"]
    e = pd.read_parquet(exact / "ledger").set_index("job_id")["gpu_energy_j"]
    long = [j.job_id for j in c.jobs if (j.end or c.end) - j.start >= 1800 and j.job_id != dip]
    err = {j: abs(a[j] / e[j] - 1) for j in long}
    assert len(long) >= 10 and max(err.values()) < 0.01, sorted(err.items(), key=lambda x: -x[1])[:5]
    assert dipped_to_j > 1e6  # the counter's value at the dip: what the reset rule would have added
    assert a[dip] == pytest.approx(e[dip], rel=0.01) and e[dip] == pytest.approx(c.truth()[dip], rel=0.01)
    notes = json.loads((agg / "fleet.json").read_text())["notes"]
    assert any("gpu-02" in n and "rose faster than 10000 W" in n for n in notes), notes
    g = pd.read_parquet(agg / "gpus.parquet").set_index(["host", "gpu_index"])
    assert g.loc[("gpu-01", 0), "resets"] >= 1 and g.loc[("gpu-02", 1), "resets"] >= 1
    assert (g.drop([("gpu-01", 0), ("gpu-02", 1)])["resets"] == 0).all()
    meta = json.loads((agg / "fleet.json").read_text())
    assert 2 <= meta["sources"]["prometheus"]["aggregation"]["raw_bins"] <= 6


@needs_prometheus
def test_a_groups_first_sample_comes_from_increase_where_the_server_computes_it_as_prometheus(drops: Drops) -> None:
    """Where the server's ``increase`` is Prometheus' (checked on one GPU's raw samples), the summaries read it in
    place of ``min`` (with the count and max it gives each group's first sample, and a drop leaves that at or below
    zero) and ``resets`` is not asked: one read of every sample less. A server that computes it otherwise (here:
    without the extrapolation) is read with ``min`` and ``resets`` as before. Both give the same ledger."""
    _, agg, _, _, _ = drops
    meta = {n: json.loads((agg.parent / n / "fleet.json").read_text()) for n in ("agg", "other")}
    assert [meta[n]["sources"]["prometheus"]["aggregation"]["first_sample"] for n in ("agg", "other")] == ["increase", "min"]
    asked = json.loads((agg / "asked.json").read_text())
    assert not any("resets(" in q for q in asked) and any(q.startswith("increase(") for q in asked)
    for name in ("ledger", "gpus.parquet", "job_gpus.parquet"):
        a, b = (pd.read_parquet(agg.parent / n / name) for n in ("agg", "other"))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_first_samples_come_back_from_prometheus_increase_on_any_grid() -> None:
    """`bins.first_values` undoes `bins.increase_of` (Prometheus' extrapolation to the range's edges) for a group
    anywhere in its bin (its start, middle or end, any phase, 2 to 240 samples): the first sample to 1e-12. A drop
    anywhere, or a counter whose zero point is nearer than the bin's start, gives NaN (read raw); one sample, the
    last."""
    from footprint.fleet.bins import first_values, increase_of

    rng = np.random.default_rng(7)
    end, s = 1_735_693_200.001, 30.0
    checked = 0
    for _ in range(400):
        n_grid = 120
        ph = round(float(rng.uniform(0, s)), 3)
        i0 = math.floor((end - 3600.0 - ph) / s + 1e-6) + 1
        a = int(rng.integers(0, n_grid - 1))
        k = int(rng.integers(1, n_grid - a + 1))
        t = ph + (i0 + a + np.arange(k)) * s
        v = rng.uniform(1e3, 1e9) + np.cumsum(rng.uniform(0, 500, k))
        kind = rng.random()
        if kind < 0.2 and k > 2:
            j = int(rng.integers(1, k))
            v[j:] -= v[j] - v[j - 1] + rng.uniform(0.001, 2.0)  # a dip below the sample before, then on from there
        inc = increase_of(t, v, end, 3600.0)
        got = first_values(
            np.array([math.nan if inc is None else inc]), v[-1:], np.array([k]), t[:1], t[-1:], np.array([end]), 3600.0
        )[0]
        dropped = bool(np.any(np.diff(v) < 0))
        if k == 1:
            assert got == v[-1]
        elif dropped:
            assert math.isnan(got), (k, v[0], got)
        else:
            assert got == pytest.approx(v[0], rel=1e-12, abs=1e-6)
            checked += 1
    assert checked > 200
    near_zero = np.array([0.5, 400.0, 800.0])  # rising 400 a scrape from 0.5: the zero point is 0.04 s before it
    t = end - 3600.0 + 10.0 + np.arange(3) * s
    inc = increase_of(t, near_zero, end, 3600.0)
    assert inc is None  # Prometheus 2 and 3 extrapolate this one differently
    rise, span = 800.0 - 0.5, 2 * s  # what both compute here: the start at the zero point, the end half a scrape on
    server = rise * ((span + span * 0.5 / rise + s / 2) / span)
    first = first_values(np.array([server]), near_zero[-1:], np.array([3]), t[:1], t[-1:], np.array([end]), 3600.0)
    assert math.isnan(first[0])


def test_an_import_runs_with_the_cyclic_collector_paused_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full collections walk every object an import holds, again and again; it pauses the collector, and leaves
    it as it found it, on error too."""
    import gc

    from footprint.fleet import importer

    seen: list[bool] = []

    def fake(out: object, opts: object, progress: object) -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("stop")

    monkeypatch.setattr(importer, "_import", fake)
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            with pytest.raises(RuntimeError):
                importer.import_fleet("x", ImportOptions(0.0, 1.0))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert seen == [False, False]


@needs_prometheus
def test_an_import_leaves_nothing_for_the_collector_to_free(mix: tuple[synthetic.Cluster, Path], tmp_path: Path) -> None:
    """With the collector paused, what the import built is freed as it goes out of use, not left in reference cycles
    for the collection that follows re-enabling it (a 4,096-GPU month: 2 s walking the curves' job spans, one
    cycle a request). After an import with the collector off, no curves, summaries or request deadline is alive."""
    import gc

    from footprint.fleet.curves import Curves
    from footprint.fleet.summaries import Summaries
    from footprint.http import Deadline

    c, out = mix
    sacct = parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt")
    kinds = (Curves, Summaries, Deadline)
    with promserver.serve(out.parent / "tsdb") as url:
        gc.collect()
        gc.disable()
        try:
            import_fleet(tmp_path / "f", ImportOptions(c.start, c.end, PromConfig(url), sacct=sacct))
            alive = [type(o).__name__ for o in gc.get_objects() if isinstance(o, kinds)]
        finally:
            gc.enable()
    assert alive == []


def _random_chunks(
    rng: np.random.Generator, lo: float, days: int, gpus: int, by_increase: bool = False
) -> list[tuple[list[float], list]]:
    """Days of per-hour summaries as a GPU's series would give them: each hour's 120 scrapes split among up to
    three series (job labels, blank when idle; a label twice in an hour is one group, as `max by` makes it), the
    counter rising (flat at a fifth of the scrapes), with the doubts the layout must catch: a scrape missing, a
    reset, a value not answered, a drop between hours, an hour without samples. ``by_increase``: the second
    summary is PromQL's ``increase`` of each group's samples (on the grid from phase 0) instead of its min."""
    from footprint.fleet.bins import Part, increase_of

    out, value = [], rng.uniform(0, 1e6, gpus)
    for day in range(days):
        ends = [lo + (day * 24 + i) * 3600.0 + 0.001 for i in range(24)]
        keys, rows = [], {f: ([], [], []) for f in range(4)}
        series: dict[tuple[int, str], list[tuple[int, list[float]]]] = {}
        for dev in range(gpus):
            for b in range(24):
                if rng.random() < 0.03:
                    continue  # no samples this hour
                if rng.random() < 0.02:
                    value[dev] *= 0.5  # a drop between hours
                cuts = sorted(rng.choice(np.arange(1, 120), size=rng.integers(0, 3), replace=False).tolist())
                points = value[dev] + np.cumsum(np.where(rng.random(120) < 0.2, 0.0, rng.uniform(100, 300, 120)))
                value[dev] = points[-1]
                for a, z in zip([0, *cuts], [*cuts, 120], strict=True):
                    job = rng.choice(["", "a", "b", "c"]) if (a or rng.random() < 0.3) else "a"
                    k, vmin, vmax, r = z - a, points[a], points[z - 1], 0.0
                    doubt = rng.random()
                    k, r = (k - 1, r) if doubt < 0.02 else (k, 1.0) if doubt < 0.04 else (k, r)
                    vmax = math.nan if 0.04 <= doubt < 0.05 else vmax
                    grid = (math.floor((ends[b] - 3600.0) / 30.0 + 1e-6) + 1 + np.arange(a, a + k)) * 30.0
                    got = increase_of(grid, points[a : a + k], ends[b], 3600.0) if by_increase else None
                    low = vmin if not by_increase else math.nan if got is None and k > 1 else got
                    series.setdefault((dev, str(job)), []).append((b, [k, low, vmax, r]))
        for (dev, job), got in series.items():
            merged: dict[int, list[float]] = {}
            for b, (k, vmin, vmax, r) in got:  # one group per label and hour (increase: of its last piece)
                m = merged.setdefault(b, [0, math.inf, -math.inf, 0.0])
                low = vmin if by_increase else min(m[1], vmin)
                m[0], m[1], m[2], m[3] = m[0] + k, low, max(m[2], vmax), m[3] + r
            keys.append((dev, job))
            for f in range(4):
                at = [b for b in sorted(merged) if f != 2 or not math.isnan(merged[b][2])]
                rows[f][0].append(len(at))
                rows[f][1].extend(at)
                rows[f][2].extend(merged[b][f] for b in at)
        parts = [Part(keys, np.array(n), np.array(b, np.int64), np.array(v, float)) for n, b, v in rows.values()]
        out.append((ends, parts))
    return out


@pytest.mark.parametrize("by_increase", [False, True], ids=["min", "increase"])
@pytest.mark.parametrize("seed", range(6))
def test_the_numpy_layout_is_the_one_bin_at_a_time_layout_on_random_hours(
    seed: int, by_increase: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a server: random days of summaries (gaps, resets, drops, unanswered values, GPUs without a phase)
    laid out with the numpy blocks and one hour at a time give the same curves, spans, raw reads and state, with
    each group's first sample from ``min`` or from ``increase``."""
    from footprint.fleet import bins
    from footprint.fleet.curves import Curves
    from footprint.fleet.summaries import Summaries, _Chunk

    rng = np.random.default_rng(seed)
    lo = 1_735_689_600.0
    chunks = _random_chunks(rng, lo, 3, 12, by_increase)
    runs = bins.Table.runs

    def layout(numpy: bool) -> tuple:
        sm = Summaries.__new__(Summaries)
        sm.s, sm.bin_s, sm.window, sm.concurrency, sm.stats = 30.0, 3600.0, (lo, lo + 3 * 86400), 2, {}
        sm.curves, sm._open, sm._last_v, sm._seen, sm._phase = Curves(120.0), {}, {}, {}, {}
        sm._done = ([], [], [], [], [])
        sm.by_increase = by_increase
        raw: list[tuple[float, list[int]]] = []
        sm._raw_series = lambda devs, end: raw.append((end, list(devs))) or []  # type: ignore[method-assign]
        sm.n, sm.found = SimpleNamespace(uuid_label=""), SimpleNamespace(uuids={})  # no UUID: a raw read a bin
        off = (lambda self, *a: bins.Runs(*([] for _ in range(10)), np.zeros(len(self), np.int8))) if not numpy else runs
        monkeypatch.setattr(bins.Table, "runs", off)
        for ends, parts in chunks:
            c = _Chunk(ends)
            c.table = bins.Table(parts, set(), by_increase)
            c.phase = {d: 0.0 for d in range(12) if d % 5}  # GPUs 0, 5 and 10 without a phase
            sm._consume(c)
        for dev in list(sm._open):
            sm._close(dev)
        sm._flush()
        sm.curves.finish({})
        curves = {d: (c.t.tolist(), c.e.tolist(), c.s.tolist(), c.gaps) for d, c in sorted(sm.curves.curves.items())}
        return curves, sorted(sm.curves.spans.items()), sorted(raw), sorted(sm._last_v.items()), sorted(sm._seen.items())

    numpy, one_by_one = layout(True), layout(False)
    assert numpy[2], "no hour was read raw: the random hours hold no doubt"
    assert repr(numpy) == repr(one_by_one)
    assert sum(len(c[0]) for c in numpy[0].values()) > 100  # most hours laid out, not read raw
