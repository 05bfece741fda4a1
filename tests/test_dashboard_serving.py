"""The dashboard's Serving page, driven with AppTest over a record imported from the recorded examples; its numbers
are those of `footprint serving report`."""

from __future__ import annotations

from pathlib import Path

import pytest
from _paths import REPO

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from footprint.cli.app import main  # noqa: E402
from footprint.lca.assessment import num  # noqa: E402
from footprint.serving import report, store  # noqa: E402
from footprint.serving.store import site_of  # noqa: E402

APP = str(REPO / "dashboard" / "app.py")
EXAMPLES = REPO / "examples" / "serving"


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dash") / "rec"
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    assert (
        main(["serving", "import", "metrics", *files, "--map", str(EXAMPLES / "map.yaml"), "--grid", "FRA", "-o", str(out)]) == 0
    )
    return out


def test_serving_page_shows_the_report(record: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.sidebar.radio(key="page").set_value("Serving").run()
    assert not at.exception
    at.text_input(key="serving_dir").set_value(str(record)).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    meta, a = store.read(record)
    rep = report.build(meta, a, site_of(meta, None, None, None))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPU energy metered (kWh)"] == num(rep["metered_gpu_j"] / 3.6e6)
    assert metrics["Models"] == str(len(rep["models"]))
    table = at.dataframe[0].value
    assert list(table["Model"])[:-1] == [m["model"] for m in rep["models"]]
    llama = next(m for m in rep["models"] if m["model"].startswith("meta-llama"))
    row = table[table["Model"] == llama["model"]].iloc[0]
    per = llama["per_unit"]["+pue"]["per_1000_requests"]["climate_change"] * 1000
    assert row["g CO2e / 1k requests, + PUE (facility)"] == num(per)
    at.radio(key="serving_boundary").set_value("accelerators").run()
    assert not at.exception
    at.text_input(key="serving_training").set_value(str(REPO / "scenarios" / "finetune-small.yaml")).run()
    assert not at.exception and not at.error
    assert "Serving overtakes training" in {m.label for m in at.metric}


def test_notes_from_the_served_models_are_shown_as_typed(record: Path, tmp_path: Path) -> None:
    """A note carries model names and server warnings: Markdown in one (an outside image, a link) is shown as text,
    never rendered (the image would be fetched when the page opens)."""
    from _dashboard_notes import assert_notes_shown_as_typed

    assert_notes_shown_as_typed(record, tmp_path, "serving.json", "Serving", "serving_dir", "model")
