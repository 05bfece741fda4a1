"""What a newcomer reads: `assess` short by default, notes grouped, the headline once, sources as links, figures
that do not overlap or hide data, one palette, a PDF that prints on A4; checked on the rendered output."""

from __future__ import annotations

import html
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO, SCENARIOS

import footprint
from footprint.api import build_sections
from footprint.lca.assessment import num
from footprint.lca.notes import SUMMARY_CHARS, note_groups
from footprint.lca.render import to_table
from footprint.reports import figures, palette
from footprint.reports.report import Section, headline, summary_rows, to_html, to_markdown

BLOOM = SCENARIOS / "bloom-176b.yaml"
PY = sys.executable


@pytest.fixture(scope="module")
def bloom() -> footprint.Assessment:
    return footprint.assess(BLOOM, samples=300)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120)


# ---- assess: short by default, everything with --details or JSON -------------------------------------------


def test_assess_table_is_short_and_details_lists_every_note(bloom: footprint.Assessment) -> None:
    short = _cli("assess", str(BLOOM), "--samples", "300")
    assert short.returncode == 0, short.stderr
    lines = short.stdout.splitlines()
    assert len(lines) <= 40, f"{len(lines)} lines: the default table should fit a screen"
    groups = note_groups(bloom)
    assert {g.title for g in groups} >= {"Embodied impacts", "Scope of the use phase", "Contested data"}
    for g in groups:  # one line per group, none of its items
        assert sum(line.strip().startswith(f"{g.title} (") for line in lines) == 1
        assert len(g.summary) <= SUMMARY_CHARS + 60
    assert not any(line.startswith("  - ") for line in lines)
    full = _cli("assess", str(BLOOM), "--samples", "300", "--details")
    assert full.returncode == 0, full.stderr
    for item in [*bloom.warnings, *(x for g in groups for x in g.items)]:
        assert f"  - {item}" in full.stdout
    d = footprint.assess(BLOOM, samples=0).to_dict()  # the JSON keeps the flat lists
    assert d["warnings"] and d["contested_data"] and all("use_scope" in v for v in d["impacts"].values())


def test_every_caveat_lands_in_exactly_one_group() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        a = footprint.assess(path, samples=0)
        groups = note_groups(a)
        items = [x for g in groups for x in g.items]
        scope = [s for s in a.use_factors.scope if s]
        assert len(items) == len(a.warnings) + len(scope) + len({c["factor"] for c in a.contested}), path.name
        assert set(a.warnings) <= set(items), path.name
        assert len({g.key for g in groups}) == len(groups)


def test_a_tiny_run_is_not_rounded_up_to_a_gpu() -> None:
    """'0.0011 GPU lifetimes', never '1 GPU-equivalent' for a 24 GPU-hour fine-tune."""
    out = _cli("assess", str(SCENARIOS / "finetune-small.yaml"), "--samples", "0").stdout
    line = next(x for x in out.splitlines() if x.strip().startswith("Hardware:"))
    assert "0.0011 GPU lifetimes consumed" in line and "GPU-equivalent" not in line
    big = _cli("assess", str(BLOOM), "--samples", "0").stdout
    assert "24.22 GPU lifetimes consumed (37.8 kg of hardware); 25 GPU-equivalents when rounded up" in big


# ---- HTML and Markdown ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sections(bloom: footprint.Assessment) -> list[Section]:
    return build_sections([bloom], None, 300, None)


def test_headline_numbers_appear_once(sections: list[Section]) -> None:
    a = sections[0].assessment
    text = re.sub(r"<svg.*?</svg>", "", to_html(sections), flags=re.S)  # the text, not the figures' titles
    score = headline(a)[0][1]
    assert score.endswith(" Pt") and text.count(html.escape(score)) == 1
    labels = [label for label, _ in summary_rows(a)]
    assert not {"EF 3.1 single score", "Climate change", "Human toxicity, cancer"} & set(labels)


def test_reports_lead_with_kg_co2_kwh_water_and_gpu_hours_before_anything_in_pt(sections: list[Section], tmp_path: Path) -> None:
    """HTML, Markdown and the text table: the key figures with their Monte Carlo ranges come first; then the single
    score, with one sentence on what Pt and person-equivalents mean; FLOPs in the summary."""
    a = sections[0].assessment
    cc, (elo, ehi) = a["climate_change"], a.activity_ranges["facility_energy_kwh"]
    wlo, whi = a.activity_ranges["water_l"]
    page = re.sub(r"<svg.*?</svg>", "", to_html(sections), flags=re.S)
    md = to_markdown(sections, tmp_path / "r.md")
    table = to_table(a)
    for text, dash in ((page, " – "), (md, " – "), (table, " - ")):
        first_pt = min(text.index(" Pt"), text.index("erson-eq"), text.index("CTUh"))
        for want in (
            f"{num(cc.total)} kg CO2 eq",
            f"{num(cc.low)}{dash}{num(cc.high)}",
            f"{num(a.facility_energy_kwh)} kWh",
            f"{num(elo)}{dash}{num(ehi)}",
            f"{num(a.water_l['total'])} L",
            f"{num(wlo)}{dash}{num(whi)}",
            "GPU-hours",
        ):
            assert 0 <= text.index(want) < first_pt, (want, text[:first_pt][-400:])
    assert "points (Pt) weight them into one single score" in page
    assert "points (Pt) weight them into one single score" in md
    assert f"{a.workload.flops:.3g} FLOP" in dict(summary_rows(a))["Total FLOPs"]


def test_notes_are_folded_one_block_per_group_and_sources_are_links(sections: list[Section]) -> None:
    a = sections[0].assessment
    text = to_html(sections)
    groups = note_groups(a)
    assert text.count("<details") == len(groups) and "<details open" not in text
    assert to_html(sections, printed=True).count('<details class="warn" open>') >= 1  # a PDF shows every item
    for src in a.sources:
        if (src.get("url") or "").startswith("http"):
            assert f'<a href="{html.escape(src["url"], quote=True)}">' in text, src["id"]
    assert "<h2>Warnings</h2>" not in text and "<h2>Contested data</h2>" not in text


def test_markdown_folds_notes_and_links_sources(sections: list[Section], tmp_path: Path) -> None:
    text = to_markdown(sections, tmp_path / "r.md")
    assert text.count("<details>") == len(note_groups(sections[0].assessment))
    assert re.search(r"^- \[[^\]]+\]\(https?://[^)]+\) — ", text, re.M)


# ---- figures: rendered, then measured ---------------------------------------------------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The matplotlib figures the report functions build, drawn, instead of their SVG text."""
    figs: list[Any] = []

    def keep(fig: Any) -> str:
        fig.canvas.draw()
        figs.append(fig)
        return "<svg/>"

    monkeypatch.setattr(figures, "_svg", keep)
    return figs


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _texts(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in [*ax.get_yticklabels(), *ax.get_xticklabels(), ax.title]]


def test_material_figure_titles_apart_readable_ticks_no_empty_columns(bloom: footprint.Assessment, captured: list[Any]) -> None:
    figures.materials(bloom)
    fig = captured[0]
    r = fig.canvas.get_renderer()
    titles = [ax.title.get_window_extent(r) for ax in fig.axes if ax.get_title(loc="left")]
    assert len(titles) == 2 and not _overlap(*titles)
    texts = _texts(fig)
    assert "board and chips" in texts and not any("_" in t for t in texts)
    elements = bloom.materials["elements_estimate"]["elements"]
    single = [e for e, v in elements.items() if v["high_kg"] <= v["low_kg"]]
    assert {"Cr", "Cd", "Mg"} <= set(single)  # the columns that used to be empty
    ax = fig.axes[1]
    drawn = {t.get_text() for t in ax.get_yticklabels()}
    assert set(elements) == drawn
    markers = [line for line in ax.get_lines() if line.get_marker() == "D"]
    assert markers and len(markers[0].get_xdata()) == len(single)  # each single value is drawn as a diamond


def test_compare_headline_log_scale_every_bar_visible_names_whole(captured: list[Any]) -> None:
    cases = [footprint.assess(SCENARIOS / f, samples=200) for f in ("bloom-176b.yaml", "gpt-4-falk.yaml", "llama-2-70b.yaml")]
    figures.compare_headline(cases)
    fig = captured[0]
    for ax in fig.axes:
        assert ax.get_xscale() == "log"
        lo, hi = ax.get_xlim()
        for bar in ax.patches:
            right = bar.get_x() + bar.get_width()
            share = (math.log10(right) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
            assert share > 0.1, f"a bar covers only {share:.0%} of its axis"
    names = [t.get_text().replace("\n", " ") for t in fig.axes[0].get_yticklabels()]
    assert names == [a.workload.name for a in cases]  # whole names, wrapped, never cut
    r = fig.canvas.get_renderer()
    fig_box = fig.get_window_extent(r)
    for t in fig.axes[0].get_yticklabels():
        box = t.get_window_extent(r)
        assert box.x0 >= fig_box.x0 - 1  # inside the figure (the SVG is cut to its bounding box anyway)


def test_power_of_two_identical_gpus_draws_two_labelled_panels(tmp_path: Path, captured: list[Any]) -> None:
    from footprint.tracking import runrecord
    from meters.fake_nvml import FakeNVML

    fake = FakeNVML("2xA100-SXM4-40GB", power=250.0)  # exactly the same power on both
    with footprint.track(name="same", output_dir=tmp_path, host=False, nvml=fake, period_s=0.05) as t:
        for _ in range(8):
            time.sleep(0.05)
            t.step(tokens=10)
    run = tmp_path / "same"
    figures.power_timeline(
        runrecord.power_timeline(run, buckets=50), runrecord.device_labels(runrecord.read_json(run / "run.json"))
    )
    fig = captured[0]
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == ["GPU 0 · NVIDIA A100-SXM4-40GB · " + runrecord.host_info()["host"], titles[0].replace("GPU 0", "GPU 1")]
    assert all(len(ax.get_lines()) == 1 for ax in fig.axes)  # one line per panel: never two drawn as one
    assert not any("GPU-" in x for x in titles)  # no UUID fragments


def test_one_palette_for_report_figures_and_dashboard(bloom: footprint.Assessment) -> None:
    svg = figures.stage_matrix(bloom).lower()
    assert palette.STAGES["use"].lower() in svg and palette.STAGES["manufacturing"].lower() in svg
    svg = figures.components(bloom).lower()
    assert palette.COMPONENTS["gpu_die"].lower() in svg
    # no colour literal outside the palette in the figure code and the dashboard
    for path in [REPO / "footprint" / "reports" / "figures.py", *sorted((REPO / "dashboard").glob("*.py"))]:
        found = re.findall(r"[\"']#[0-9a-fA-F]{6}[\"']", path.read_text())
        assert not found, f"{path.name} has its own colours {found}: use footprint.reports.palette"


# ---- the PDF, printed and read back --------------------------------------------------------------------------


@pytest.mark.skipif(not shutil.which("chromium") or not shutil.which("pdftotext"), reason="needs chromium and poppler-utils")
def test_pdf_licence_column_reads_in_phrases(tmp_path: Path) -> None:
    out = tmp_path / "bloom.pdf"
    proc = _cli("report", str(BLOOM), "-o", str(out), "--samples", "200", "--quiet")
    assert proc.returncode == 0, proc.stderr
    text = subprocess.run(["pdftotext", "-layout", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert "factual values, cited" in text  # a licence on one line, not one word per line
    pages = subprocess.run(["pdfinfo", str(out)], capture_output=True, text=True, check=True).stdout
    n = int(re.search(r"Pages:\s+(\d+)", pages).group(1))
    # BLOOM's report: 11 pages since the method tables (characterisation, long-term emissions) joined it
    assert n <= 12, f"{n} pages"
    png = tmp_path / "p"
    subprocess.run(["pdftoppm", "-r", "40", "-png", "-f", "1", "-l", "1", str(out), str(png)], check=True)
    assert any(tmp_path.glob("p*.png"))


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed")
def test_the_html_report_fits_the_window_at_1400_and_800_px(tmp_path: Path) -> None:
    """No sideways scroll in headless Chromium at 1,400 and 800 px: the sensitivity table's drivers wrap; a wide
    element is named when one does not fit."""
    pytest.importorskip("websockets")
    from footprint.reports.browser import Browser

    pages = [
        footprint.report(BLOOM, tmp_path / "bloom.html"),
        footprint.report(REPO / "examples/runs/two-gpus", tmp_path / "run.html"),
    ]
    overflow = (
        "[document.documentElement.scrollWidth - document.documentElement.clientWidth,"
        " [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >"
        " document.documentElement.clientWidth + 1 && !e.closest('.cmp')).slice(0, 3).map(e => e.tagName + ':' +"
        " e.textContent.slice(0, 60))]"
    )
    with Browser(width=1400, height=900) as b:
        for width, out in ((w, p) for w in (1400, 800) for p in pages):
            b.resize(width, 900)
            b.open(Path(out).as_uri(), ready="document.querySelector('h1') !== null")
            sideways, wide = b.evaluate(overflow)
            assert sideways <= 0 and not wide, f"{out} at {width} px: scrolls {sideways} px sideways; too wide: {wide}"
            drivers = b.evaluate(
                "[...document.querySelectorAll('table')].find(t => t.textContent.includes('Drivers of the variance'))"
                ".querySelector('tbody td:last-child').getClientRects().length"
            )
            assert drivers >= 1
