"""The dashboard's Kernels page: the launchless-event rule and the trace diff, as the CLI computes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from _paths import REPO
from test_kernels_diff import BERT, HTA, _stretch

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from footprint.kernels.diff import diff_traces  # noqa: E402
from footprint.kernels.trace import analyze_trace  # noqa: E402

APP = str(REPO / "dashboard" / "app.py")


def _kernels() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.sidebar.radio(key="page").set_value("Kernels").run()
    assert not at.exception, at.exception
    return at


def test_carried_over_events_are_shown_and_can_be_counted(shared: Path) -> None:
    trace = shared / HTA / "test" / "test.json.gz"
    at = _kernels()
    at.radio(key="k_source").set_value("Path on this machine").run()
    at.text_input(key="k_path").set_value(str(trace)).run()
    assert not at.exception and not at.error
    r = at.session_state["k_result"]
    assert r["busy_time_us"] == analyze_trace(trace)["busy_time_us"]
    shown = [w.value for w in at.warning]
    assert any("614 GPU events carried over from before the recording" in w and "not counted" in w for w in shown)
    at.checkbox(key="k_unlinked").check().run()
    counted = at.session_state["k_result"]
    assert counted["busy_time_us"] == analyze_trace(trace, include_unlinked=True)["busy_time_us"] > r["busy_time_us"]
    assert any("counted, as asked" in w.value for w in at.warning)


def test_two_traces_compared(shared: Path, tmp_path: Path) -> None:
    a = shared / BERT
    b = _stretch(a, tmp_path / "slow.json.gz", 2.0)
    at = _kernels()
    at.radio(key="k_mode").set_value("Compare two traces").run()
    at.text_input(key="k_diff_a").set_value(str(a)).run()
    at.text_input(key="k_diff_b").set_value(str(b)).run()
    at.number_input(key="k_diff_steps").set_value(1000).run()
    at.number_input(key="k_diff_gpus").set_value(8).run()
    assert not at.exception and not at.error
    d = at.session_state["k_diff"]
    expected = diff_traces(a, b, train_steps=1000, gpus=8)
    assert d["totals"] == expected["totals"] and d["footprint"]["categories"] == expected["footprint"]["categories"]
    cats = at.dataframe[0].value
    gemm = cats[cats["Kernel class"] == "gemm"].iloc[0]
    assert gemm["Change"] == "100.0 %"
    footprint = at.dataframe[2].value
    assert "Climate change" in list(footprint[""]) and len(footprint) >= 18
    at.text_input(key="k_diff_b").set_value(str(tmp_path / "missing.json")).run()
    assert not at.exception and "no such trace file" in at.error[0].value
