"""Silent nonsense, injection and damaged records (issue 33, second half), fuzzed through the real CLI in the fuzz
harness (tests/_fuzz.py) or through the library: each input class gets one line and exit 2 (or a note), never a
traceback, a silent change or an injected link."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _fuzz import FUZZ, REPO, CliServer, journal_only, one_line_error, verdict
from _paths import SCENARIOS
from hypothesis import given
from hypothesis import strategies as st

import footprint
from footprint.errors import FootprintError

pytestmark = pytest.mark.timeout(300)
SCENARIO = SCENARIOS / "finetune-small.yaml"
EXAMPLES = REPO / "examples" / "serving"


# ---- the Python API: objects, bytes, NaN where numbers go ----------------------------------------------------

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**30), 10**30),
    st.binary(max_size=4),
    st.builds(object),
    st.text(max_size=12),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@FUZZ
@given(key=st.sampled_from(["hardware.count", "hardware.lifetime", "training.gpu_hours", "site.pue", "site"]), value=_VALUES)
def test_fuzz_the_api_takes_any_value_and_answers_or_refuses_in_one_error(key: str, value: Any) -> None:
    try:
        a = footprint.assess(SCENARIO, samples=0, set={key: value})
    except FootprintError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000
        return
    assert all(math.isfinite(r.total) and r.total >= 0 for r in a.impacts.values() if r.total is not None)


@pytest.mark.parametrize("target", [{"hardware": 5}, {"hardware": {"count": float("nan")}}, {}])
def test_a_mapping_that_is_no_run_record_is_one_error(target: dict[str, Any]) -> None:
    with pytest.raises(FootprintError, match="read as a run record"):
        footprint.assess(target)


@pytest.mark.parametrize("fmt", ["exe", "HTML ", "pdf2", ""])
def test_report_refuses_a_format_it_does_not_write(tmp_path: Path, fmt: str) -> None:
    with pytest.raises(FootprintError):
        footprint.report(SCENARIO, tmp_path / "r.html", format=fmt or "x", samples=0)
    assert not (tmp_path / "r.html").exists()


def test_reading_a_run_that_is_not_there_is_an_error_not_an_empty_frame(tmp_path: Path, good_run: Path) -> None:
    with pytest.raises(FootprintError, match="no such run directory"):
        footprint.read_samples(tmp_path / "nope")
    with pytest.raises(FootprintError, match="buckets"):
        footprint.power_timeline(good_run, buckets=10**12)
    assert footprint.power_timeline(good_run, buckets=10).num_rows > 0


# ---- silent nonsense in scenarios: derived GPU time, embodied overrides, quantities, YAML ---------------------


@FUZZ
@given(
    flops=st.floats(1, 1e33),
    mfu=st.floats(1e-12, 1),
    count=st.integers(1, 10_000),
)
def test_fuzz_derived_gpu_time_never_exceeds_count_x_20_years(
    tmp_path_factory: pytest.TempPathFactory, flops: float, mfu: float, count: int
) -> None:
    text = (
        SCENARIO.read_text().replace("gpu_hours: 24", f"flops: {flops!r}\n  mfu: {mfu!r}").replace("count: 8", f"count: {count}")
    )
    p = tmp_path_factory.mktemp("s") / "s.yaml"
    p.write_text(text)
    try:
        w = footprint.assess(p, samples=0).workload
    except FootprintError as exc:
        assert "GPU-hours" in str(exc) or "plausible" in str(exc), exc
        return
    assert w.gpu_hours <= count * 20 * 8766


@FUZZ
@given(factor=st.floats(0, 1e40), category=st.sampled_from(["climate_change", "water_use", "resource_use_minerals_metals"]))
def test_fuzz_embodied_overrides_are_held_to_1000x_the_card(factor: float, category: str) -> None:
    from footprint.lca import categories as cat
    from footprint.lca.database import INDICATORS, db

    w0 = footprint.assess(SCENARIO, samples=0).workload
    ref = float(db().embodied(w0.gpu.id).total()[INDICATORS.index(category)])
    unit = cat.by_key(category).unit
    try:
        footprint.assess(SCENARIO, samples=0, set={f"hardware.embodied.{category}": f"{factor * ref!r} {unit}"})
    except FootprintError as exc:
        assert factor * ref > 1000 * ref or "plausible" in str(exc) or "quantity" in str(exc), exc
        return
    assert factor <= 1000 * (1 + 1e-9)


@FUZZ
@given(parts=st.lists(st.integers(0, 99), min_size=2, max_size=4), unit=st.sampled_from(["years", "year", "h"]))
def test_fuzz_a_version_like_number_is_never_read_as_a_product(parts: list[int], unit: str) -> None:
    from footprint.lca.units import Q, UnitParseError

    text = ".".join(map(str, parts)) + f" {unit}"
    if len(parts) == 2:
        assert Q(text).magnitude == float(".".join(map(str, parts)))
        return
    with pytest.raises(UnitParseError, match="two numbers in a row"):
        Q(text)


@FUZZ
@given(n=st.integers(2, 5))
def test_fuzz_several_merge_keys_are_refused(n: int) -> None:
    from footprint.inputs import load_yaml

    anchors = "".join(f"a{i}: &a{i} {{x: {i}}}\n" for i in range(n))
    merges = "".join(f"  <<: *a{i}\n" for i in range(n))
    with pytest.raises(FootprintError, match="merge key '<<' is given twice"):
        load_yaml(anchors + "c:\n" + merges, "f.yaml")
    assert load_yaml(anchors + "c:\n  <<: [" + ", ".join(f"*a{i}" for i in range(n)) + "]\n", "f.yaml")["c"]["x"] == 0


@pytest.mark.parametrize("value", ["[]", "''", "0", "5", "[1]"])
def test_a_section_that_is_not_a_mapping_is_refused(cli: CliServer, value: str) -> None:
    one_line_error(cli.run(["assess", str(SCENARIO), "--samples", "0", "--set", f"site={value}"]), "site", "expected a mapping")


# ---- injection: CSV, Markdown, the terminal ---------------------------------------------------------------------

_HOSTILE = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["=1+1", ' =HYPERLINK("x")', "\uff1dcmd", "# head", "1. item", "[x](javascript:alert(1))", "\x1b[2J\x1b]0;t\x07"]
    ),
)


@FUZZ
@given(text=_HOSTILE)
def test_fuzz_md_text_opens_no_block_link_or_tag(text: str) -> None:
    from footprint.escaping import md_text

    out = md_text(text)
    assert "\n" not in out and "\x1b" not in out
    assert not out.lstrip().startswith(("#", ">", "- ", "+ ", "* ")), out
    for c in "[]<>`":
        assert out.count(c) == out.count("\\" + c), out


@FUZZ
@given(text=_HOSTILE)
def test_fuzz_terminal_text_keeps_lines_and_drops_every_escape(text: str) -> None:
    from footprint.escaping import terminal_text, unsafe_char

    out = terminal_text(text)
    assert not [c for c in out if unsafe_char(c) and c not in "\n\t\r"]
    assert out.count("\n") == text.count("\n")


def test_a_scenario_name_is_literal_in_markdown_and_on_the_terminal(cli: CliServer, tmp_path: Path) -> None:
    name = "# \x1b[31mevil [x](javascript:alert(1)) <img src=x onerror=alert(1)>"
    p = tmp_path / "s.yaml"
    body = "\n".join(x for x in SCENARIO.read_text().splitlines() if not x.startswith("name:"))
    p.write_text(f"name: {json.dumps(name)}\n{body}\n")
    md = cli.run(["assess", str(p), "--samples", "0", "--format", "md"])
    assert md.code == 0, md.err
    first = md.out.splitlines()[0]
    assert first.startswith("# \\# ") and "\x1b" not in md.out
    assert "\\](javascript" in first and "\\<img" in first  # shown as typed: the bracket and the tag escaped
    table = cli.run(["assess", str(p), "--samples", "0"])
    assert table.code == 0 and "\x1b" not in table.out


def test_fleet_and_serving_csvs_carry_no_formula(cli: CliServer, tmp_path: Path) -> None:
    head = "JobID|JobIDRaw|JobName|User|Account|Partition|Start|End|Elapsed|AllocTRES|NodeList|State|ConsumedEnergyRaw\n"
    when = "2025-03-01T00:24:02|2025-03-01T01:49:55|01:25:53"
    row = f'5000|5000|=HYPERLINK("x")|@carol|+proj|gpu|{when}|gres/gpu=2|gpu-01|COMPLETED|\n'
    (tmp_path / "sacct.txt").write_text(head + row)
    assert cli.run(["fleet", "import", "slurm", str(tmp_path / "sacct.txt"), "-o", str(tmp_path / "fl"), "--quiet"]).code == 0
    o = cli.run(["fleet", "report", str(tmp_path / "fl"), "--by", "job", "-o", str(tmp_path / "x.csv")])
    assert o.code == 0, o.err
    import csv

    cells = [c for r in csv.reader((tmp_path / "x.csv").open()) for c in r]
    assert not [c for c in cells if c.lstrip().startswith(("=", "+", "@"))], cells


# ---- damaged records: sacct dates, Prometheus samples, serving records, windows, maps ----------------------


@FUZZ
@given(
    start=st.sampled_from(["0001-01-01T00:00:00", "9999-12-31T23:59:59", "2025-03-01T00:24:02", "1969-12-31T23:59:59"]),
    end=st.sampled_from(["0001-01-01T00:00:00", "9999-12-31T23:59:59", "2025-03-01T01:49:55", "Unknown"]),
)
def test_fuzz_sacct_dates_at_the_ends_of_time(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, start: str, end: str
) -> None:
    d = tmp_path_factory.mktemp("sacct")
    head = "JobID|JobIDRaw|JobName|User|Account|Partition|Start|End|Elapsed|AllocTRES|NodeList|State|ConsumedEnergyRaw\n"
    (d / "s.txt").write_text(head + f"5000|5000|t|u|a|gpu|{start}|{end}|01:25:53|gres/gpu=2|gpu-01|COMPLETED|\n")
    o = cli.run(["fleet", "import", "slurm", str(d / "s.txt"), "-o", str(d / "fl"), "--quiet"])
    assert verdict(o) is None, (verdict(o), o.err[-300:])


_SAMPLE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=5), st.just("1e300"))


@FUZZ
@given(values=st.lists(st.tuples(st.floats(0, 1e4), _SAMPLE), max_size=8))
def test_fuzz_counter_samples_of_any_kind_give_finite_energy(values: list[tuple[float, Any]]) -> None:
    import numpy as np

    from footprint.fleet.telemetry import _column

    pts = [[t, v if not isinstance(v, float) else repr(v)] for t, v in values]
    col = _column(pts, 1)
    assert len(col) == len(pts) and col.dtype == np.float64


def test_an_energy_counter_jump_is_left_out_with_a_note() -> None:
    import numpy as np

    from footprint.fleet.telemetry import GPU_COUNTER, DcgmNames, Device, Fetcher

    f = Fetcher.__new__(Fetcher)  # its interval arithmetic alone, without a server
    f._carry, f.max_gap_s, f.names = {}, 600.0, DcgmNames()
    f.t = type("T", (), {"notes": []})()
    d = Device(0, GPU_COUNTER, "h", "h:0")
    t = np.array([0.0, 15.0, 30.0, 45.0])
    v = np.array([1e9, 1e9 + 6e6, 1e16, 1e16 + 6e6])  # mJ: 400 W, a jump of 10^7 x, 400 W again
    chunk = f._intervals(d, [(t, v, 0)])
    assert chunk is not None and float(np.sum(chunk.energy_j)) == pytest.approx(12e3)
    assert d.jumps == 1 and any("rose faster" in n for n in f.t.notes)


@pytest.fixture(scope="module")
def serving_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sv") / "sv"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    subprocess.run(
        [sys.executable, "-m", "footprint.cli", "serving", "import", "metrics", *files, "-o", str(out)], env=env, check=True
    )
    return out


_META = st.fixed_dictionaries(
    {},
    optional={
        "window_s": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.integers(-5, 10**10)),
        "site": st.one_of(st.text(max_size=8), st.lists(st.integers(), max_size=2), st.none()),
        "start_s": st.one_of(st.text(max_size=4), st.floats()),
        "notes": st.one_of(st.text(max_size=4), st.integers()),
    },
)


@FUZZ
@given(
    meta=_META,
    table=st.sampled_from(["models.csv", "gpus.csv", "model_windows.csv", "usage.csv"]),
    content=st.one_of(st.just(""), st.just('"' + "a" * 1000), st.text(max_size=40), st.just("model\n")),
)
def test_fuzz_damaged_serving_records_are_one_line(
    cli: CliServer, serving_record: Path, tmp_path_factory: pytest.TempPathFactory, meta: dict[str, Any], table: str, content: str
) -> None:
    d = tmp_path_factory.mktemp("svd") / "sv"
    shutil.copytree(serving_record, d)
    m = json.loads((d / "serving.json").read_text())
    m.update(meta)
    (d / "serving.json").write_text(json.dumps(m))
    (d / table).write_text(content)
    o = cli.run(["serving", "report", str(d), "--format", "json"])
    assert verdict(o) is None, (verdict(o), meta, table, content[:40], o.err[-300:])


_COUNT = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**30), st.just(1e300))


@FUZZ
@given(joules=_COUNT, tokens=_COUNT, requests=_COUNT)
def test_fuzz_windows_journal_values_are_refused_or_plausible(
    tmp_path_factory: pytest.TempPathFactory, joules: Any, tokens: Any, requests: Any
) -> None:
    from footprint.serving.watch import MAX_COUNT, read_windows

    d = tmp_path_factory.mktemp("w")
    line = {
        "start": 1000.0,
        "end": 1060.0,
        "window_s": 60.0,
        "scrape_s": 15.0,
        "host": "h",
        "gpus": {"GPU-0": [0, "NVIDIA A100-SXM4-40GB", joules]},
        "engines": {"vllm|m": {"tokens_out": tokens, "requests": requests}},
    }
    (d / "windows.jsonl").write_text(json.dumps(line) + "\n")
    try:
        (w,) = read_windows(d / "windows.jsonl")
    except FootprintError:
        return
    assert 0 <= w["gpus"]["GPU-0"][2] <= 10_000 * 60
    assert all(0 <= v <= MAX_COUNT for v in w["engines"]["vllm|m"].values())


def test_one_gpu_mapped_to_two_models_is_refused(cli: CliServer, tmp_path: Path) -> None:
    (tmp_path / "map.yaml").write_text("gpus:\n  - {host: h, gpus: [0, 1], model: a}\n  - {host: h, gpus: [1], model: b}\n")
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    o = cli.run(["serving", "import", "metrics", *files, "--map", str(tmp_path / "map.yaml"), "-o", str(tmp_path / "o")])
    one_line_error(o, "GPU 1", "mapped to")


@pytest.mark.parametrize(
    "window",
    [
        ["--end", "2025-03-02T07:00:00Z"],
        ["--start", "2025-03-04T00:00:00Z"],
        ["--start", "2025-03-03T09:00:00Z", "--end", "2025-03-03T08:00:00Z"],
    ],
)
def test_a_window_without_samples_writes_no_record(cli: CliServer, tmp_path: Path, window: list[str]) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    o = cli.run(["serving", "import", "metrics", *files, *window, "-o", str(tmp_path / "o")])
    one_line_error(o, "--start/--end")
    assert not (tmp_path / "o").exists()


# ---- run records: the journal is the evidence; a run that never started leaves nothing ---------------------------


@FUZZ
@given(
    tokens=st.one_of(st.integers(-5, 10**6), st.none(), st.floats(allow_nan=True)),
    duration=st.one_of(st.floats(0, 1e9), st.none()),
)
def test_fuzz_run_json_contradicting_its_journal(
    good_run: Path, tmp_path_factory: pytest.TempPathFactory, tokens: Any, duration: Any
) -> None:
    run = shutil.copytree(good_run, tmp_path_factory.mktemp("r") / "run")
    rec = json.loads((run / "run.json").read_text())
    rec["tokens"], rec["duration_s"] = tokens, duration
    (run / "run.json").write_text(json.dumps(rec))
    try:
        w = footprint.assess(run, samples=0).workload
    except FootprintError:
        return
    fixed = json.loads((run / "run.json").read_text())  # the file itself is not rewritten
    assert fixed["tokens"] == tokens or (tokens != tokens and fixed["tokens"] != fixed["tokens"])
    if isinstance(duration, float) and duration > 12 * 1.1 + 60:
        assert any("samples cover" in n for n in w.notes)
    if tokens is None or (isinstance(tokens, int | float) and tokens < 1200):
        assert any("journals counted" in n for n in w.notes)


@pytest.mark.parametrize("program", ["./nope", "nope-not-on-path", "/etc/hostname"])
def test_a_command_that_cannot_start_leaves_no_run_record(cli: CliServer, tmp_path: Path, program: str) -> None:
    o = cli.run(["run", "--name", "x", "--output-dir", str(tmp_path / "runs"), "--", program], cwd=tmp_path)
    one_line_error(o, "cannot start")
    assert not (tmp_path / "runs" / "x").exists()


@pytest.mark.parametrize("address", ["bad host!", "a" * 300, "8.8.8.8", "::g"])
def test_a_bad_dashboard_address_is_one_line(cli: CliServer, address: str) -> None:
    one_line_error(cli.run(["dashboard", "--address", address, "--headless"]), "--address")


def test_a_closed_stdout_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = f"{sys.executable} -m footprint.cli assess {SCENARIO} --samples 0 >&-"
    p = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("footprint: error: standard output is closed"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@FUZZ
@given(value=_VALUES, where=st.sampled_from(["params", "tokens", "layers", "flops", "gpu_hours", "achieved"]))
def test_fuzz_the_flop_and_mfu_api_takes_any_value(value: Any, where: str) -> None:
    try:
        if where in ("params", "tokens", "layers"):
            args = {"params": 7e9, "tokens": 1e9, "layers": 32, "hidden": 4096, "seq_len": 2048} | {where: value}
            r = footprint.transformer_flops(args.pop("params"), args.pop("tokens"), **args)
            assert math.isfinite(r.flops) and r.flops > 0
        else:
            kw = {"flops": 1e21, "gpu_hours": 10.0} if where != "achieved" else {}
            kw |= {{"flops": "flops", "gpu_hours": "gpu_hours", "achieved": "achieved_tflops"}[where]: value}
            m = footprint.compute_mfu("A100-SXM4-40GB", **kw)
            assert math.isfinite(m.mfu)
    except FootprintError as exc:
        assert "\n" not in str(exc)


_HEADER = st.one_of(
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


@FUZZ
@given(
    fields=st.fixed_dictionaries(
        {}, optional={k: _HEADER for k in ("rank", "local_rank", "world_size", "pid", "host", "name", "slurm")}
    )
)
def test_fuzz_recover_copies_only_what_a_journal_header_can_mean(
    cli: CliServer, good_run: Path, tmp_path_factory: pytest.TempPathFactory, fields: dict[str, Any]
) -> None:
    from footprint.outputs import check_name

    run = journal_only(good_run, tmp_path_factory.mktemp("rec") / "r", **fields)
    o = cli.run(["recover", str(run)])
    assert verdict(o) is None, (verdict(o), fields, o.err[-300:])
    if o.code != 0:
        return
    rec = json.loads(next((run / "ranks").glob("rank-*.json")).read_text())
    assert rec["name"] is None or check_name(rec["name"]) is None
    assert rec["host"] is None or (isinstance(rec["host"], str) and len(rec["host"]) <= 253 and "<" not in rec["host"])
    for k in ("rank", "local_rank", "world_size", "pid"):  # a pid that is no pid is left out (None)
        ok = rec[k] is None and k == "pid" or isinstance(rec[k], int) and not isinstance(rec[k], bool) and 0 <= rec[k] <= 1 << 22
        assert ok, (k, rec[k])


@FUZZ
@given(values=st.lists(st.tuples(st.one_of(st.floats(allow_nan=True), st.none(), st.text(max_size=3)), _SAMPLE), max_size=8))
def test_fuzz_serving_prometheus_samples_of_any_kind_are_readings_or_left_out(values: list[tuple[Any, Any]]) -> None:
    from footprint.serving.promsource import MAX_SAMPLE, _points

    pts = _points([[t, v] for t, v in values])
    assert pts.shape == (pts.shape[0], 2) and pts.shape[0] <= len(values)
    assert all(math.isfinite(t) and math.isfinite(v) and abs(v) <= MAX_SAMPLE for t, v in pts)
