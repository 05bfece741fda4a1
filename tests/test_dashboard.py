"""The Streamlit dashboard, driven page by page with AppTest, its numbers checked against footprint.assess;
and once through the real server with a headless Chromium screenshot."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _html import Tables as _Tables
from _paths import REPO, SCENARIOS, SHARED

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

import footprint  # noqa: E402
from footprint.lca import categories as cat  # noqa: E402
from footprint.lca.assessment import num, pct, pct_sig, qty  # noqa: E402
from footprint.lca.workload import apply_overrides, load_scenario, read_yaml, workload_from_dict  # noqa: E402
from footprint.tracking.to_workload import workload_from_run  # noqa: E402

APP = str(REPO / "dashboard" / "app.py")
from footprint.lca import DEFAULT_SAMPLES as SAMPLES  # noqa: E402 - the dashboard's default, the CLI's

CHROMIUM = "/usr/bin/chromium"


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _page(at: AppTest, name: str) -> AppTest:
    at.sidebar.radio(key="page").set_value(name).run()
    return at


def _scenario(at: AppTest, file: str) -> AppTest:
    box = at.sidebar.selectbox(key="ex_scenario")
    label = next(o for o in box.options if o.endswith(f"({file})"))
    box.set_value(label).run()
    return at


def _metrics(at: AppTest) -> dict[str, tuple[str, str]]:
    """First metric of each label: (value, delta)."""
    out: dict[str, tuple[str, str]] = {}
    for m in at.metric:
        out.setdefault(m.label, (m.value, m.delta))
    return out


def _label(a: footprint.Assessment, key: str) -> str:
    """A headline metric's label: the category and the unit its value reads best in."""
    return f"{a[key].name} ({qty(a[key].total, a[key].unit)[1]})"


def _same_totals(shown: dict[str, float], a: footprint.Assessment) -> None:
    for k in cat.keys():
        assert shown[k] == pytest.approx(a[k].total, rel=1e-12, abs=0.0), k


# ---- Scenario explorer ------------------------------------------------------------------------


def test_explorer_base_scenario_matches_assess() -> None:
    at = _app()
    _ok(at)
    res = at.session_state["ex_result"]
    assert res["file"] == "scenarios/bloom-176b.yaml" and res["sets"] == []
    a = footprint.assess(load_scenario(SCENARIOS / "bloom-176b.yaml"), samples=SAMPLES)
    _same_totals(res["totals"], a)
    shown = _metrics(at)
    assert shown["Climate change (kg CO2 eq)"] == (num(a["climate_change"].total), "")  # no change from the base yet
    for k in cat.HEADLINE[1:]:
        assert shown[_label(a, k)] == (qty(a[k].total, a[k].unit)[0], "")
    assert shown["GPU lifetimes consumed"][0] == f"{a.workload.gpu_lifetimes:,.2f}"  # never rounded up
    table = at.table[0].value.reset_index()  # a static table: it wraps, never scrolls sideways
    shown_rows = [qty(a[k].total, a[k].unit) for k in cat.keys()]  # each row in its readable unit
    assert len(table) == 16 and list(zip(table["Total"], table["Unit"], strict=True)) == shown_rows
    assert table.loc[0, "Manuf."] == pct(a["climate_change"].share("manufacturing"))
    assert "n/a" not in set(table["Use"])  # a use phase wherever one is modelled...
    not_modelled = [i for i, k in enumerate(cat.keys()) if "use" in a[k].not_modelled]
    # ...and said where not (France's mix has an open factor in every category since the open inventory; an
    # all-hydro grid's "not modelled" is checked in test_electricity and test_report)
    assert all(table.loc[i, "Use"] == "not modelled" for i in not_modelled)
    assert all(table.loc[i, "Manuf."] == "n/a" for i in not_modelled)  # no "manufacturing 100 %"
    sens = [d.value for d in at.dataframe if "Drivers of the variance" in d.value.columns]
    assert sens and list(sens[0]["Category"])[-1] == "Single score"  # the sensitivity table
    assert len(at.get("vega_lite_chart")) >= 1  # the stacked stage-share chart
    labels = [s.label for s in at.sidebar.slider]
    assert any("MFU" in label for label in labels)


def test_first_screen_leads_with_kg_co2_kwh_water_and_gpu_hours_before_any_pt() -> None:
    """What most readers came for, with its range, before the single score, person-equivalents or CTUh."""
    at = _app()
    _ok(at)
    a = footprint.assess(load_scenario(SCENARIOS / "bloom-176b.yaml"), samples=SAMPLES)
    labels = [m.label for m in at.metric]
    assert labels[:4] == ["Climate change (kg CO2 eq)", "Energy (kWh)", "Water (L)", "GPU-hours"], labels
    first = [m.value for m in at.metric][:4]
    assert first == [
        num(a["climate_change"].total),
        num(a.facility_energy_kwh),
        num(a.water_l["total"]),
        num(a.workload.gpu_hours),
    ]
    lo, hi = a.activity_ranges["facility_energy_kwh"]
    captions = [c.value for c in at.caption]
    assert any(f"range {num(lo)} - {num(hi)}" in c for c in captions), captions
    assert any("person-equivalents" in c and "(Pt)" in c for c in captions)
    assert labels.index("EF 3.1 single score (Pt)") > 3


def test_one_move_what_if_mfu_lifetime_grid() -> None:
    """'What if MFU were 50 %, the GPU lived 5 years, the grid were Poland's?' in one click."""
    at = _scenario(_app(), "gpt-4-falk.yaml")
    at.button(key="btn_one_move").click().run()
    _ok(at)
    res = at.session_state["ex_result"]
    assert res["sets"] == ["training.mfu=0.5", "hardware.lifetime=5 years", "site.grid=POL"]
    expected = footprint.assess(load_scenario(SCENARIOS / "gpt-4-falk.yaml", res["sets"]), samples=SAMPLES)
    base = footprint.assess(load_scenario(SCENARIOS / "gpt-4-falk.yaml"), samples=SAMPLES)
    _same_totals(res["totals"], expected)
    _same_totals(res["base_totals"], base)
    assert res["gpu_equivalents"] == expected.workload.gpu_equivalents
    shown = _metrics(at)
    cc = expected["climate_change"]
    change = (cc.total - base["climate_change"].total) / base["climate_change"].total
    assert shown["Climate change (kg CO2 eq)"] == (num(cc.total), f"{change:+.1%}")
    assert at.sidebar.slider(key="ex_mfu").value == 0.5 and at.sidebar.selectbox(key="ex_grid").value == "POL"
    assert any("--set site.grid=POL" in c.value for c in at.code)  # the equivalent CLI command


def test_every_control_reaches_the_assessment() -> None:
    """BLOOM states GPU-hours: MFU restates it as the derived FLOPs + MFU; the stated carbon intensity
    follows its own grid only."""
    at = _app()
    side = at.sidebar
    side.slider(key="ex_mfu").set_value(0.5)
    side.selectbox(key="ex_gpu").set_value("h100-sxm5-80gb")
    side.number_input(key="ex_count").set_value(512)
    side.slider(key="ex_lifetime_years").set_value(4.0)
    side.slider(key="ex_utilization").set_value(0.6)
    side.selectbox(key="ex_grid").set_value("DEU")
    side.slider(key="ex_pue").set_value(1.35)
    side.number_input(key="ex_wue").set_value(1.5)
    side.number_input(key="ex_ewif").set_value(2.5)
    at.run()
    _ok(at)
    res = at.session_state["ex_result"]
    data = read_yaml(SCENARIOS / "bloom-176b.yaml")
    base_w = workload_from_dict(data)
    sets = res["sets"]
    assert sets[0].startswith("site=") and "carbon_intensity" not in sets[0] and "grid: DEU" in sets[0]
    assert sets[1].startswith("training=") and "gpu_hours" not in sets[1] and "mfu: 0.5" in sets[1]
    assert sets[2:] == [
        "hardware.gpu=h100-sxm5-80gb",
        "hardware.count=512",
        "hardware.lifetime=4 years",
        "hardware.utilization=0.6",
        "site.pue=1.35",
        "site.wue=1.5 L/kWh",
        "site.ewif=2.5 L/kWh",
    ]
    w = workload_from_dict(apply_overrides(data, sets))
    a = footprint.assess(w, samples=SAMPLES)
    _same_totals(res["totals"], a)
    assert w.flops == pytest.approx(base_w.flops) and w.mfu == 0.5 and w.grid == "DEU" and w.carbon_intensity is None
    assert res["gpu_hours"] == pytest.approx(base_w.flops / (w.gpu.peak_flops("bf16") * 0.5) / 3600)
    assert w.count == 512 and w.pue == 1.35 and w.wue_l_per_kwh == 1.5 and w.ewif_l_per_kwh == 2.5
    assert any("describes its own grid" in c.value for c in at.caption)
    # and back: Reset restores the scenario as stated
    at.button(key="btn_reset").click().run()
    assert at.session_state["ex_result"]["sets"] == []


def test_mfu_disabled_where_the_scenario_has_no_flops() -> None:
    at = _scenario(_app(), "finetune-small.yaml")  # parameters but no tokens, GPU-hours stated
    _ok(at)
    slider = at.sidebar.slider(key="ex_mfu")
    assert slider.disabled
    assert any("MFU disabled" in c.value for c in at.sidebar.caption)
    at.button(key="btn_one_move").click().run()  # lifetime and grid only
    assert at.session_state["ex_result"]["sets"] == ["hardware.lifetime=5 years", "site.grid=POL"]


def test_bad_uploads_get_the_clis_one_line_errors() -> None:
    at = _app()
    at.sidebar.radio(key="ex_source").set_value("Upload or paste YAML").run()
    _ok(at)
    cases = [
        (b"name: x\nhardware: [unclosed\n", "bad.yaml: line 3, column 1: malformed YAML"),
        (
            b"name: x\nhardware: {gpu: A100-SXM9}\ntraining: {gpu_hours: 10, power_per_gpu: 400 W}\n",
            "bad.yaml: hardware.gpu: unknown GPU 'A100-SXM9'",
        ),
        (
            b"hardware: {gpu: A100-SXM4-40GB}\ntraining: {gpu_hours: 10, power_per_gpu: 400 kg}\n",
            "bad.yaml: training.power_per_gpu: '400 kg' is not a W quantity",
        ),
        (b"- just\n- a list\n", "bad.yaml: expected a mapping"),
        (b"1: one\nname: x\n", "bad.yaml: 1: unknown section"),
        (b"\xff\xfe\x00binary", "bad.yaml: a binary file, not a scenario YAML"),
        (b"name: caf\xe9\n", "bad.yaml: not UTF-8 text (byte 9"),
        (b"name: big\n" + b"# padding\n" * 110_000, "bad.yaml: file is larger than 1000000 bytes"),
    ]
    for content, message in cases:
        at.sidebar.file_uploader[0].set_value(("bad.yaml", content, "application/x-yaml"))
        at.run()
        assert not at.exception
        assert len(at.error) == 1 and at.error[0].value.startswith(f"footprint: error: {message}"), at.error[0].value
        assert "Traceback" not in at.error[0].value
    good = (SCENARIOS / "llama-2-70b.yaml").read_bytes()
    at.sidebar.file_uploader[0].set_value(("llama.yaml", good, "application/x-yaml"))
    at.run()
    _ok(at)
    a = footprint.assess(load_scenario(SCENARIOS / "llama-2-70b.yaml"), samples=SAMPLES)
    _same_totals(at.session_state["ex_result"]["totals"], a)
    # pasted YAML goes through the same checks
    at.sidebar.file_uploader[0].set_value(None)
    at.sidebar.text_area(key="ex_paste").set_value("hardware: {gpu: H100-SXM5-80GB}\ntraining: {gpu_hours: 5}\n").run()
    assert at.error[0].value.startswith("footprint: error: pasted.yaml: training: missing a power")


def test_widget_values_survive_page_switches() -> None:
    at = _app()
    at.sidebar.slider(key="ex_pue").set_value(1.5).run()
    _page(at, "Hardware")
    _page(at, "Scenario explorer")
    _ok(at)
    assert at.sidebar.slider(key="ex_pue").value == 1.5
    assert at.session_state["ex_result"]["sets"] == ["site.pue=1.5"]


def test_more_monte_carlo_samples_toggle() -> None:
    at = _app()
    at.sidebar.toggle(key="mc_more").set_value(True).run()
    _ok(at)
    assert at.session_state["ex_result"]["samples"] == 10_000


def test_a_link_opens_a_what_if() -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"scenario": "gpt-4-falk.yaml", "mfu": "0.5", "lifetime_years": "5", "grid": "pol", "pue": "9"})
    at.run()
    assert not at.exception
    assert at.session_state["ex_result"]["sets"] == ["training.mfu=0.5", "hardware.lifetime=5 years", "site.grid=POL"]
    assert "pue: 9 is outside 1-3" in at.warning[0].value
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = "Hardware"
    at.run()
    _ok(at)
    assert at.title[0].value == "Hardware"


# ---- Compare ----------------------------------------------------------------------------------


def test_compare_scenarios_and_a_what_if() -> None:
    at = _scenario(_app(), "gpt-4-falk.yaml")
    at.button(key="btn_one_move").click().run()
    _page(at, "Compare")
    _ok(at)
    ms = at.multiselect(key="cmp_items")
    whatif = next(o for o in ms.options if o.startswith("What-if"))
    olmo = next(o for o in ms.options if o.endswith("(olmo-2-7b.yaml)"))
    gpt4 = next(o for o in ms.options if o.endswith("(gpt-4-falk.yaml)"))
    ms.set_value([gpt4, whatif, olmo]).run()
    _ok(at)
    res = at.session_state["cmp_result"]
    assert len(res) == 3
    names = list(res)
    sets = ["training.mfu=0.5", "hardware.lifetime=5 years", "site.grid=POL"]
    for name, a in zip(
        names,
        [
            footprint.assess(load_scenario(SCENARIOS / "gpt-4-falk.yaml"), samples=SAMPLES),
            footprint.assess(load_scenario(SCENARIOS / "gpt-4-falk.yaml", sets), samples=SAMPLES),
            footprint.assess(load_scenario(SCENARIOS / "olmo-2-7b.yaml"), samples=SAMPLES),
        ],
        strict=True,
    ):
        _same_totals(res[name], a)
    table = at.dataframe[0].value
    assert list(table.columns) == ["", "Unit", *names] and len(table) == 5 + 16
    row = table[table[""] == "Climate change"].iloc[0]
    assert row[names[2]] == num(res[names[2]]["climate_change"])
    assert len([m for m in at.metric if m.label == "Climate change (kg CO2 eq)"]) == 3
    ms.set_value([gpt4]).run()
    assert "at least two" in at.info[-1].value


# ---- Runs -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    old = os.environ.get("FOOTPRINT_FAKE_NVML")
    os.environ["FOOTPRINT_FAKE_NVML"] = "2xA100-SXM4-40GB"
    try:
        with footprint.track(
            name="demo", output_dir=root, site={"grid": "FRA", "pue": 1.1}, host=False, period_s=0.05, model={"params": 1e9}
        ) as t:
            for _ in range(25):
                time.sleep(0.02)
                t.step(tokens=256)
    finally:
        if old is None:
            os.environ.pop("FOOTPRINT_FAKE_NVML", None)
        else:
            os.environ["FOOTPRINT_FAKE_NVML"] = old
    assert (root / "demo" / "ranks" / "rank-00000.journal.jsonl").is_file()  # samples stay with the rank
    return root


def test_runs_page_power_energy_mfu_and_reprojection(runs_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "secret"
    shutil.copytree(runs_dir / "demo", outside)
    (runs_dir / "link").symlink_to(outside, target_is_directory=True)  # points outside the chosen folder
    at = _page(_app(), "Runs")
    at.text_input(key="run_root").set_value(str(runs_dir)).run()
    _ok(at)
    assert at.selectbox(key="run_pick").options == ["demo"]  # the symlink out of the folder is not offered
    run_dir = runs_dir / "demo"
    rec = json.loads((run_dir / "run.json").read_text())
    shown = _metrics(at)
    assert shown["GPU energy"][0] == f"{num(rec['energy']['gpu_j'] / 3.6e6)} kWh"
    assert shown["Run MFU"][0] == pct_sig(rec["mfu"]["run_mfu"])  # significant figures, never "0.0%"
    story = next(str(df.value) for df in at.dataframe if "Steps and tokens" in str(df.value))  # the Training tab
    assert "25 optimizer steps, 6,400 tokens" in story
    assert len(at.get("vega_lite_chart")) >= 3  # power panels, energy per device, per-step MFU (+ stage shares)
    measured = footprint.assess(workload_from_run(run_dir), samples=SAMPLES)
    _same_totals(at.session_state["run_result"]["totals"], measured)
    at.selectbox(key="run_grid").set_value("POL")
    at.selectbox(key="run_gpu").set_value("h100-sxm5-80gb")
    at.slider(key="run_lifetime_years").set_value(5.0)
    at.slider(key="run_pue").set_value(1.4)
    at.run()
    _ok(at)
    res = at.session_state["run_result"]
    assert res["sets"] == ["site.grid=POL", "site.pue=1.4", "hardware.gpu=h100-sxm5-80gb", "hardware.lifetime=5 years"]
    _same_totals(res["totals"], footprint.assess(workload_from_run(run_dir, res["sets"]), samples=SAMPLES))
    # the opened run can be compared with a scenario
    _page(at, "Compare")
    ms = at.multiselect(key="cmp_items")
    run_label = next(o for o in ms.options if o.startswith("Run: demo"))
    ms.set_value([run_label, ms.options[0]]).run()
    _ok(at)
    _same_totals(next(iter(at.session_state["cmp_result"].values())), measured)


def test_runs_page_bad_inputs(tmp_path: Path) -> None:
    at = _page(_app(), "Runs")
    at.text_input(key="run_root").set_value(str(tmp_path / "nope")).run()
    assert not at.exception and "is not a folder" in at.info[0].value
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    at.text_input(key="run_root").set_value(str(tmp_path / "broken")).run()
    assert not at.exception and "not valid JSON" in at.error[0].value


# ---- Hardware ---------------------------------------------------------------------------------


def test_hardware_page_components_and_sources() -> None:
    from footprint.lca.catalogue import gpu_card
    from footprint.lca.database import db

    at = _page(_app(), "Hardware")
    _ok(at)
    at.selectbox(key="hw_gpu").set_value("a100-sxm4-40gb").run()
    _ok(at)
    card = gpu_card("a100-sxm4-40gb")
    table = at.dataframe[0].value
    cc = table[table["Category"] == "Climate change"].iloc[0]
    assert cc["Total"] == num(card["impacts"]["climate_change"]["total"]) == "210"  # corrected data (all memory dies)
    assert cc["gpu die"] == num(card["impacts"]["climate_change"]["by_component"]["gpu_die"])
    assert len(table) == 16 + len(cat.extras())
    sources = at.dataframe[-1].value
    assert len(sources) == len(db().sources) and "licence" in sources.columns
    at.text_input(key="hw_filter").set_value("CC BY-SA").run()
    assert 0 < len(at.dataframe[-1].value) < len(db().sources)
    catalogue = at.dataframe[-2].value
    assert len(catalogue) == len(db().gpus)


# ---- Kernels ----------------------------------------------------------------------------------


def test_kernels_page_says_when_the_analysis_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "footprint.kernels.trace", None)  # import fails
    at = _page(_app(), "Kernels")
    assert not at.exception
    assert "not available" in at.warning[0].value


def test_kernels_page_analyses_a_real_trace() -> None:
    pytest.importorskip("footprint.kernels.trace")
    traces = sorted((SHARED / "data" / "traces" / "tracelens" / "tests" / "traces" / "h100").glob("*.json.gz"))
    if not traces:
        pytest.skip("no TraceLens H100 traces beside the repository")
    from footprint.kernels.trace import analyze_trace

    trace = min(traces, key=lambda p: p.stat().st_size)
    at = _page(_app(), "Kernels")
    at.radio(key="k_source").set_value("Path on this machine").run()
    at.text_input(key="k_path").set_value(str(trace)).run()
    _ok(at)
    expected = analyze_trace(trace, top=20)
    assert at.session_state["k_result"]["by_category"] == expected["by_category"]
    cats = at.dataframe[0].value
    gemm = expected["by_category"]["gemm"]
    row = cats[cats["Category"] == "gemm"].iloc[0]
    assert row["Kernels"] == f"{gemm['count']:,}" and row["% of peak"] == f"{gemm['pct_of_peak']:.1f} %"
    ops = at.dataframe[1].value
    assert list(ops["Op"]) == [o["name"] for o in expected["ops"]]
    assert any(m.label == "% of peak (whole trace)" for m in at.metric)
    at.text_input(key="k_path").set_value(str(trace.parent / "missing.json.gz")).run()
    assert not at.exception and "no such trace file" in at.error[0].value


def test_kernels_page_shows_the_example_cpu_trace() -> None:
    """From a fresh clone: the default source is the example CPU training trace in examples/."""
    pytest.importorskip("footprint.kernels.trace")
    from footprint.kernels.trace import analyze_trace

    at = _page(_app(), "Kernels")
    _ok(at)
    expected = analyze_trace(REPO / "examples" / "traces" / "cpu_training.json.gz", top=20)
    assert at.session_state["k_result"]["cpu"]["by_category"] == expected["cpu"]["by_category"]
    steps = at.dataframe[0].value
    assert len(steps) == 5 and "GFLOP/s over wall" in steps.columns
    ops = at.dataframe[1].value
    assert list(ops["Op"]) == [o["name"] for o in expected["cpu"]["ops"]]


# ---- the report and the dashboard agree, number for number --------------------------------------------


def test_report_and_dashboard_agree_number_for_number(tmp_path: Path) -> None:
    """`footprint report` with its defaults and the dashboard's explorer on the same scenario: the same numbers."""
    out = tmp_path / "bloom.html"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "report", str(SCENARIOS / "bloom-176b.yaml"), "-o", str(out), "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    parser = _Tables()
    parser.feed(out.read_text())
    cats = next(t for t in parser.tables if t and t[0][:3] == ["Category", "Total", "Unit"])
    report = {r[0]: r for r in cats[1:]}
    summary = {r[0]: r[1] for r in next(t for t in parser.tables if t and t[0] == ["", ""])[1:]}
    at = _app()
    _ok(at)
    shown = at.table[0].value.reset_index()
    assert len(report) == len(shown) == 16
    for _, row in shown.iterrows():
        r = report[row["Category"]]  # Category, Total, Unit, Low, High, Person-eq., 4 stages, dominant stage
        assert [row["Total"], row["Unit"], row["Low - high"]] == [r[1], r[2], f"{r[3]} - {r[4]}"], row["Category"]
        assert [row["Manuf."], row["Transp."], row["Use"], row["EoL"]] == r[6:10], row["Category"]
    metrics = _metrics(at)
    a = footprint.assess(SCENARIOS / "bloom-176b.yaml")  # the API's default: the same samples and seed
    assert summary["GPU lifetimes"].startswith(f"{metrics['GPU lifetimes consumed'][0]} GPU lifetimes consumed")
    assert f"({_metrics(at)['Water (L)'][0]} L" in f"({summary['Water']}"
    assert metrics["Climate change (kg CO2 eq)"][0] == report["Climate change"][1] == num(a["climate_change"].total)
    score = next(m for m in at.metric if m.label == "EF 3.1 single score (Pt)").value
    assert f"{score} Pt" in out.read_text()
    mass = next(m for m in at.metric if m.label == "Hardware consumed").value
    assert f"({mass} of hardware)" in summary["GPU lifetimes"]
    normalised = next(t for t in parser.tables if t and t[0][:2] == ["Category", "Person-equivalents"])
    pe = next(d.value for d in at.dataframe if "Person-equivalents" in d.value.columns)  # the person-equivalents tab
    assert list(pe["Person-equivalents"]) == [r[1] for r in normalised[1:]]
    # the sensitivity table: the same rows in the report and the dashboard
    sens_report = next(t for t in parser.tables if t and t[0][:3] == ["Category", "Central", "Median"])
    sens_shown = next(d.value for d in at.dataframe if "Drivers of the variance" in d.value.columns)
    assert [list(r) for r in sens_shown.itertuples(index=False)] == sens_report[1:]


def test_a_link_opens_a_run_and_identical_gpus_get_a_panel_each(tmp_path: Path) -> None:
    from meters.fake_nvml import FakeNVML

    with footprint.track(name="twins", output_dir=tmp_path, host=False, nvml=FakeNVML("2xA100-SXM4-40GB", power=250.0)) as t:
        for _ in range(6):
            time.sleep(0.05)
            t.step(tokens=10)
    run = tmp_path / "twins"
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = str(run)
    at.run()
    _ok(at)
    assert at.title[0].value == "Runs" and at.text_input(key="run_root").value == str(run)
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    panels = next(s for s in specs if "facet" in s)
    devices = panels["facet"]["row"]["sort"]
    assert devices[:2] == [f"GPU {i} · NVIDIA A100-SXM4-40GB · {socket.gethostname()}" for i in (0, 1)]
    assert not any("GPU-" in d for d in devices)  # readable labels, no UUID fragments
    # a run name in a runs folder, and one that is not there
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"run": "twins", "runs": str(tmp_path)})
    at.run()
    _ok(at)
    assert at.selectbox(key="run_pick").value == "twins"
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"run": "nope", "runs": str(tmp_path)})
    at.run()
    assert not at.exception and "No run 'nope'" in at.warning[0].value


def test_the_runs_page_draws_an_imported_nvidia_smi_log(tmp_path: Path) -> None:
    """`footprint import nvidia-smi` writes the log's readings as samples: the Runs page draws a panel per GPU."""
    run = tmp_path / "smi"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "import", "nvidia-smi", str(REPO / "examples" / "logs" / "nvidia-smi.csv")]
        + ["-o", str(run), "--utc-offset", "+1"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = str(run)
    at.run()
    _ok(at)
    assert not any("no power samples" in i.value for i in at.info)
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    devices = next(s for s in specs if "facet" in s)["facet"]["row"]["sort"]
    assert devices == [f"GPU {i} · NVIDIA H100 80GB HBM3 · nvidia-smi.csv" for i in (0, 1)]


# ---- the real server and a browser --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ink(png: Path) -> float:
    """Share of the main area (right of the sidebar) that is not background."""
    from PIL import Image

    img = Image.open(png).convert("L")
    w, h = img.size
    main = img.crop((int(w * 0.25), 0, w, h))
    hist = main.histogram()
    return 1.0 - sum(hist[235:]) / (main.size[0] * main.size[1])


MAIN = "[data-testid=stMain]"
TABLE_FIT = """(() => {
  const t = document.querySelector('[data-testid=stTable] table');
  if (!t) return {error: 'the 16 categories are not an HTML table'};
  const wrap = t.closest('[data-testid=stTable]'), main = document.querySelector('[data-testid=stMain]');
  return {
    rows: t.querySelectorAll('tbody tr').length,
    sideways: wrap.scrollWidth - wrap.clientWidth,
    right_edge_past_main: Math.round(t.getBoundingClientRect().right - main.getBoundingClientRect().right),
    cut: [...t.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent),
  };
})()"""


def _fits(b: object) -> None:
    fit = b.evaluate(TABLE_FIT)
    assert fit.get("rows") == 16 and fit["sideways"] <= 1 and fit["right_edge_past_main"] <= 0 and not fit["cut"], fit


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
def test_real_server_first_load_and_layout_in_chromium(tmp_path: Path) -> None:
    """The real server, from the repository root (its .streamlit/config.toml applies), in headless Chromium at 1,400 px:
    the first (cold) load shows content within 15 s, the 16-category table never scrolls sideways, with or without a
    what-if's extra columns, no Deploy button, and the page is drawn."""
    pytest.importorskip("PIL")
    pytest.importorskip("websockets")
    from footprint.reports.browser import Browser

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port), "--server.headless", "true"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else "server exited"
            assert time.monotonic() < deadline, "the dashboard server did not start in 60 s"
            time.sleep(0.3)
        with Browser(width=1400, height=1000) as b:
            first = b.open(url, ready=f"document.querySelector('{MAIN} h1') !== null", timeout_s=15)  # the cold load
            full = first + b.wait_for("document.querySelectorAll('[data-testid=stMetric]').length >= 7", 60)
            print(f"cold first load: content after {first:.1f} s, headline metrics after {full:.1f} s")
            b.wait_for("document.querySelector('[data-testid=stTable] table, [data-testid=stDataFrame]') !== null", 30)
            time.sleep(0.5)  # the table's layout
            assert b.evaluate("document.querySelector('[data-testid=stAppDeployButton]')") is None
            _fits(b)
            png = b.screenshot(tmp_path / "explorer.png", full_page=True)
            assert _ink(png) > 0.05, f"the screenshot's main area is blank ({_ink(png):.1%} ink)"
            b.open(
                f"{url}?scenario=gpt-4-falk.yaml&mfu=0.5&lifetime_years=5&grid=POL", ready=f"document.querySelector('{MAIN} h1')"
            )
            b.wait_for("[...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.textContent.includes('%'))", 60)
            # the table can render after the metrics (a fresh venv's CI run read it 0.5 s after them: not there yet)
            b.wait_for("document.querySelector('[data-testid=stTable] thead') !== null", 30)
            time.sleep(0.5)
            assert "Change" in b.evaluate("document.querySelector('[data-testid=stTable] thead').textContent")
            _fits(b)
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=10)
        if server.stdout:
            server.stdout.close()
    assert server.poll() is not None


def test_sigterm_to_footprint_dashboard_stops_its_streamlit_server(tmp_path: Path) -> None:
    """A service manager's stop (SIGTERM to `footprint dashboard`) used to leave Streamlit holding the port."""
    import signal

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "footprint.cli", "dashboard", "--headless", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # the server is up once its health endpoint answers
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read()
                break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None and time.monotonic() < deadline, "the dashboard did not start"
                time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # nothing listens on the port any more
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) != 0:
                    break
            time.sleep(0.3)
        else:
            pytest.fail(f"port {port} still served after SIGTERM to footprint dashboard")
    finally:
        if proc.poll() is None:
            proc.kill()


def _cpu_run(root: Path, name: str) -> Path:
    """A CPU-only tracked run (no GPU in it), as the README's track() example records on a laptop."""
    with footprint.track(name=name, output_dir=root, site={"grid": "FRA", "pue": 1.2}, gpus=[]) as t:
        for _ in range(3):
            sum(i * i for i in range(10_000))
            t.step(tokens=10)
    return root / name


def test_footprint_dashboard_run_opens_on_that_run_a_cpu_only_one_as_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`footprint dashboard [RUN]` passes the run to the app after `--`: a given run directory, else the newest run
    under ./runs, else nothing (the explorer's shipped scenario). A CPU-only run opens on the Runs page as its host."""
    from footprint.cli.dashboard_cmd import start_on

    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    runs = tmp_path / "runs"
    assert start_on(None, runs) == []  # no ./runs: the explorer
    old = _cpu_run(runs, "older")
    new = _cpu_run(runs, "laptop")
    os.utime(old / "run.json", (time.time() + 60, time.time() + 60))  # written last: the newest, whatever its name
    assert start_on(None, runs) == ["--run", "older", "--runs", str(runs.resolve())]
    assert start_on(str(new), runs) == ["--run", str(new.resolve())]
    with pytest.raises(footprint.FootprintError, match="no run.json"):
        start_on(str(tmp_path), runs)
    monkeypatch.setattr(sys, "argv", [APP, "--run", "laptop", "--runs", str(runs)])  # what the command passes
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    _ok(at)
    assert at.sidebar.radio(key="page").value == "Runs" and at.selectbox(key="run_pick").value == "laptop"
    a = footprint.assess(workload_from_run(new), samples=SAMPLES)
    assert a.workload.host_only
    _same_totals(at.session_state["run_result"]["totals"], a)  # all 16 categories, the CLI's numbers
    shown = _metrics(at)
    assert "Host-hours" in shown and "Server lifetimes consumed" in shown
    assert at.selectbox(key="run_gpu").value == "none"  # naming a GPU is the what-if
    at.selectbox(key="run_gpu").set_value("a100-sxm4-40gb").run()
    _ok(at)
    assert at.session_state["run_result"]["sets"] == ["hardware.gpu=a100-sxm4-40gb"]
    _page(at, "Compare")  # the opened CPU-only run beside a scenario
    ms = at.multiselect(key="cmp_items")
    ms.set_value([next(o for o in ms.options if o.startswith("Run: laptop")), ms.options[0]]).run()
    _ok(at)
    assert any("no GPU: host only" in c.value for c in at.caption)
    # a bad RUN: one line, exit 2, before any server starts
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bad = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "dashboard", str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no run.json" in bad.stderr
