"""EF 3.1 person-equivalents and single score, checked by hand against the cited factors, in every output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from _paths import SCENARIOS, SHARED

from footprint.lca import categories as cat
from footprint.lca.engine import assess
from footprint.lca.render import to_csv, to_markdown, to_table
from footprint.lca.workload import load_scenario
from lca_data import loader

CITED = SHARED / "reference" / "ef_normalisation_weighting.csv"


def _cited() -> dict[str, tuple[float, float]]:
    if not CITED.is_file():
        pytest.skip("../shared/reference/ef_normalisation_weighting.csv is not beside the repository")
    with CITED.open() as fh:
        return {r["category_key"]: (float(r["nf_per_person"]), float(r["weighting_percent"])) for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def bloom():
    return assess(load_scenario(SCENARIOS / "bloom-176b.yaml"), samples=1000)


def test_shipped_set_is_the_cited_set() -> None:
    cited = _cited()
    ours = {r["category"]: (float(r["normalisation"]), float(r["weight_percent"])) for r in loader.load_normalisation()}
    assert ours == cited
    assert sum(w for _, w in ours.values()) == pytest.approx(100.0)


def test_shipped_file_is_the_tools_output(tmp_path: Path) -> None:
    """lca_data/ef_normalisation_weighting.csv is exactly what lca_data/tools/build_normalisation.py writes from the
    cited table: no hand edit."""
    from lca_data.tools import build_normalisation as build
    from lca_data.tools import write_csv

    _cited()  # skips without ../shared
    out = tmp_path / "ef_normalisation_weighting.csv"
    write_csv(out, build.HEADER, build.FIELDS, build.rows(CITED))
    assert out.read_text() == build.OUT.read_text()


def test_person_equivalents_and_single_score_by_hand(bloom) -> None:
    cited = _cited()
    d = json.loads(bloom.to_json())
    score = 0.0
    for k in cat.keys():
        nf, weight = cited[k]
        total = d["impacts"][k]["total"]
        n = d["impacts"][k]["normalised"]
        assert n["person_equivalents"] == pytest.approx(total / nf, rel=1e-12)
        assert n["points"] == pytest.approx(total / nf * weight / 100, rel=1e-12)
        assert n["low"] == pytest.approx(d["impacts"][k]["low"] / nf) and n["high"] == pytest.approx(d["impacts"][k]["high"] / nf)
        score += total / nf * weight / 100
    s = d["single_score"]
    assert s["value"] == pytest.approx(score, rel=1e-12) and s["unit"] == "Pt"
    assert s["low"] <= s["value"] <= s["high"] and s["high"] > s["low"]
    assert sum(s["by_stage"].values()) == pytest.approx(score, rel=1e-9)
    assert "value choice" in s["note"]
    # climate change by hand: 53,100 kg CO2 eq / 7,553.08 kg per person-year
    assert d["impacts"]["climate_change"]["normalised"]["person_equivalents"] == pytest.approx(
        d["impacts"]["climate_change"]["total"] / 7553.08
    )


def test_table_markdown_and_csv_show_them(bloom) -> None:
    text = to_table(bloom)
    assert "Person-eq." in text and "Single score" in text and "value choice" in text
    pe = bloom.normalised["climate_change"]["person_equivalents"]
    from footprint.lca.assessment import num

    row = next(line for line in text.splitlines() if line.startswith("Climate change  "))  # the category table's row
    assert num(pe) in row
    md = to_markdown(bloom)
    assert "Single score" in md and "Person-eq." in md
    rows = list(csv.DictReader(to_csv(bloom).splitlines()))
    total = next(r for r in rows if r["category"] == "climate_change" and r["stage"] == "total")
    assert float(total["person_equivalents"]) == pytest.approx(pe)


def test_report_headline_uses_them(tmp_path: Path) -> None:
    from footprint.api import build_sections
    from footprint.reports.report import to_html, top_categories

    sections = build_sections([str(SCENARIOS / "bloom-176b.yaml")], None, 300, None)
    html = to_html(sections)
    a = sections[0].assessment
    assert "EF 3.1 single score" in html and "person-equivalents" in html and "value choice" in html
    assert "Which categories matter" in html and "Contested data" in html and "Scope of the use phase" in html
    top = top_categories(a)
    assert top[0] == max(a.normalised, key=lambda k: a.normalised[k]["points"])
    headline = html.split('<div class="cards">', 1)[1].split("</div></div></div>", 1)[0]
    assert a.impacts[top[0]].name in headline


def test_dashboard_explorer_shows_single_score() -> None:
    pytest.importorskip("streamlit")
    from _paths import REPO
    from streamlit.testing.v1 import AppTest

    from footprint.lca.assessment import num

    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    a = assess(load_scenario(SCENARIOS / "bloom-176b.yaml"), samples=500)
    metric = next(m for m in at.metric if m.label == "EF 3.1 single score (Pt)")
    assert metric.value == num(a.single_score["value"])
    table = next(df.value for df in at.dataframe if "Person-equivalents" in df.value.columns)
    assert len(table) == 16
    row = table[table["Category"] == "Climate change"].iloc[0]
    assert row["Person-equivalents"] == num(a.normalised["climate_change"]["person_equivalents"])
    assert any("value choice" in c.value for c in at.caption)
