"""What a notebook shows: a short repr (the headline numbers with their units, under 2,000 characters, never the
object's arrays) and an HTML view (the 16-category table, the stage chart) for an Assessment, a run record, a fleet
report and a serving report; user text escaped in both."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from _html import Tables
from _paths import REPO, SCENARIOS

import footprint
from footprint.lca import categories as cat
from footprint.lca.assessment import num, qty
from footprint.lca.notebook import MAX_REPR_CHARS


def _page(html: str) -> Tables:
    p = Tables()
    p.feed(html)
    return p


def _short(text: str) -> None:
    assert len(text) < MAX_REPR_CHARS and "array(" not in text and "CategoryResult(" not in text, text[:300]


def test_an_assessment_repr_is_its_headline_and_its_html_the_16_categories_and_the_stage_chart() -> None:
    a = footprint.assess(SCENARIOS / "bloom-176b.yaml", samples=300)
    text = repr(a)
    _short(text)
    cc = a["climate_change"]
    assert text.startswith("Assessment: BLOOM-176B final training") and f"{num(cc.total)} kg CO2 eq" in text
    assert f"({num(cc.low)} - {num(cc.high)})" in text and "kWh" in text and "384 x NVIDIA A100" in text
    page = _page(a._repr_html_())
    table = next(t for t in page.tables if t and t[0][0] == "Category")
    assert [r[0] for r in table[1:]] == [c.name for c in cat.categories()]  # all 16, in order
    shown = [qty(a[c.key].total, a[c.key].unit) for c in cat.categories()]  # each in its readable unit
    assert [(r[1], r[2]) for r in table[1:]] == shown and any(unit == "g CFC11 eq" for _, unit in shown)  # a prefixed small unit
    assert page.svgs == 1  # the stage chart


def test_user_text_is_escaped_in_the_notebook_views(tmp_path: Path) -> None:
    scenario = (SCENARIOS / "finetune-small.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(scenario.replace("name:", 'name: "<script>alert(1)</script>\\x1b[2J" #', 1))
    a = footprint.assess(bad, samples=0)
    assert "<script>" in a.workload.name
    page = _page(a._repr_html_())
    assert "script" not in page.tags and "\x1b" not in repr(a)


def test_a_run_records_repr_says_how_its_energy_was_obtained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from meters.fake_nvml import FakeNVML

    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    with footprint.track(name="cpu", output_dir=tmp_path, gpus=[]) as t:
        t.step(tokens=5)
    text = repr(t.run)
    _short(text)
    assert text.startswith("Run: cpu") and "device(s) estimated" in text and "measured" not in text
    rows = _page(t.run._repr_html_()).tables[0]
    assert rows[0] == ["Device", "Component", "Energy (kWh)", "Obtained", "Method"]
    assert {r[3] for r in rows[1:]} == {"estimated"}
    with footprint.track(name="sim", output_dir=tmp_path, host=False, nvml=FakeNVML("1xA100-SXM4-40GB")) as t:
        t.step(tokens=5)
    assert "1 device(s) simulated" in repr(t.run)  # a fake NVML is never called measured


def test_fleet_and_serving_reports_have_a_short_repr_and_a_table(tmp_path: Path) -> None:
    import numpy as np

    from footprint.cli import main
    from footprint.fleet import synthetic
    from footprint.fleet.importer import ImportOptions, import_fleet
    from footprint.fleet.report import build_report
    from footprint.fleet.slurm import parse_sacct

    start = datetime(2025, 1, 25, tzinfo=UTC).timestamp()
    c = synthetic.random_cluster(start, 3.0, 2, 2, synthetic.demo_profiles(), seed=3)
    rng = np.random.default_rng(1)
    for j in c.jobs:
        j.gres_type = "a100"
        j.consumed_energy_j = float(rng.uniform(2e5, 5e6)) * len(j.gpus)
    opts = ImportOptions(
        end=c.end,
        sacct=parse_sacct(synthetic.sacct_text(c), UTC, "sacct.txt"),
        slurm_energy_scope="gpu",
        gpu_types={"a100": "NVIDIA A100-SXM4-80GB"},
        site={"grid": "DEU", "pue": 1.3},
    )
    import_fleet(tmp_path / "fleet", opts)
    rep = build_report(tmp_path / "fleet", by="user")
    text = repr(rep)
    _short(text)
    assert text.startswith("Fleet ") and f"{num(rep.totals.impacts['climate_change'])} kg CO2 eq" in text
    page = _page(rep._repr_html_())
    assert [r[0] for r in page.tables[0][1:]] == [c.name for c in cat.categories()]
    assert page.tables[1][0][0] == "user"
    examples = REPO / "examples" / "serving"
    files = [str(p) for p in sorted(examples.glob("*.prom"))]
    assert main(["serving", "import", "metrics", *files, "--map", str(examples / "map.yaml"), "-o", str(tmp_path / "s")]) == 0
    srep = footprint.serving_report(tmp_path / "s")
    text = repr(srep)
    _short(text)
    assert text.startswith("Serving ") and "GPU energy metered" in text and isinstance(srep, dict)
    rows = _page(srep._repr_html_()).tables[0]
    assert rows[0][0] == "model" and len(rows) == 1 + len(srep["models"])
