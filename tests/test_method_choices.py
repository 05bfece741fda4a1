"""Issue 29: one characterisation method named per category, the sources' consensus at the centre with ranges that
span every source, long-term emissions as a stated choice, robust dominance."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from _paths import REPO, SCENARIOS

from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.database import db
from footprint.lca.engine import assess
from footprint.lca.factorfile import load, template
from footprint.lca.workload import load_scenario, workload_from_dict
from lca_data import loader

BASE = {
    "name": "method",
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 8, "host": "none"},
    "training": {"gpu_hours": 5000, "power_per_gpu": "600 W"},
    "site": {"grid": "POL", "pue": 1.1},
}


def _cli_json(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "assess", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_bloom_names_a_method_for_every_category_and_its_partial_score() -> None:
    """`footprint assess bloom-176b --format json`: a characterisation per category; the single score lists every
    category not EF 3.1-characterised or not modelled, with why."""
    d = _cli_json("bloom-176b")
    partial = set(d["single_score"]["partial_categories"])
    assert d["single_score"]["partial"] is True
    for k, r in d["impacts"].items():
        assert r["characterisation"], k
        should = r["characterisation"] != "EF 3.1" or bool(r["not_modelled"]) or bool(r["not_available"])
        assert (r["name"] in partial) is should, k
        assert (r["name"] in d["single_score"]["partial_reasons"]) is should
    assert d["impacts"]["ozone_depletion"]["characterisation"] == "EF 3.1"  # the open inventory (USLCI x EF 3.1)
    assert d["impacts"]["human_toxicity_cancer"]["characterisation"] == "ILCD 2.0 (2018)"
    assert d["impacts"]["land_use"]["characterisation"] == "EF 3.1"
    assert "characterisation" in d["method"] and d["method"]["long_term_emissions"].startswith("exclude")


def test_the_method_is_read_per_factor_row() -> None:
    """A zone's method is its rows' (so EF 3.1 rows replacing ILCD rows make the category EF 3.1, no code change)."""
    rows = electricity._rows_of("FRA")["ionising_radiation"]
    shares = electricity._mix_of("FRA")[0]
    relabelled = {f: {**r, "characterisation": "EF 3.1"} for f, r in rows.items()}
    f = electricity._mixed_factor(cat.by_key("ionising_radiation"), relabelled, shares, {}, "FRA")
    assert f.characterisation == "EF 3.1"
    mixed = {**relabelled, "nuclear_TWh": rows["nuclear_TWh"]}
    mixed_f = electricity._mixed_factor(cat.by_key("ionising_radiation"), mixed, shares, {}, "FRA")
    assert mixed_f.characterisation.startswith("mixed")
    assert {r["characterisation"] for r in loader.load_electricity_technologies()} >= {"EF 3.1", "ILCD 2.0 (2018)"}


def test_long_term_emissions_on_a_coal_grid() -> None:
    """POL: including long-term emissions (coal-mining spoil phosphate) raises freshwater eutrophication of the use
    phase; the JSON says which was counted, and both are shown side by side."""
    ex = assess(workload_from_dict(BASE, "s.yaml"), samples=300)
    inc = assess(workload_from_dict({**BASE, "site": {**BASE["site"], "long_term_emissions": "include"}}, "s.yaml"), 300)
    fe_ex, fe_in = ex["eutrophication_freshwater"], inc["eutrophication_freshwater"]
    assert fe_in.by_stage["use"] > 10 * fe_ex.by_stage["use"]
    assert "coal" in ex.use_factors.scope[cat.keys().index("eutrophication_freshwater")]  # left out, said
    for a, counted in ((ex, "exclude"), (inc, "include")):
        d = a.to_dict()
        lt = d["impacts"]["eutrophication_freshwater"]["use_long_term"]
        assert lt["counted"] == counted and d["method"]["long_term_emissions"].startswith(counted)
        assert lt["exclude"] == pytest.approx(fe_ex.by_stage["use"]) and lt["include"] == pytest.approx(fe_in.by_stage["use"])
        assert d["impacts"]["ionising_radiation"]["use_long_term"] is not None
    with pytest.raises(Exception, match="long_term_emissions"):
        workload_from_dict({**BASE, "site": {**BASE["site"], "long_term_emissions": "sometimes"}}, "s.yaml")


def test_french_radiation_and_every_zone_s_minerals_span_ademe_and_ecoinvent() -> None:
    """The range of France's ionising radiation and of every zone's minerals and metals contains ADEME's national
    value and the mix of ecoinvent's per-technology values (the open factor where ecoinvent has none)."""
    cited = loader.load_electricity_cited()
    eco = {(r["technology"], r["category"]): float(r["value"]) for r in cited if r["source"] == "benportner-ecoinvent-ilcd"}
    ademe = {(r["zone"], r["category"]): float(r["value"]) for r in db().electricity_zone_cited_rows}
    cells = [("FRA", "ionising_radiation")] + [(z, "resource_use_minerals_metals") for z in electricity.zone_codes()]
    for code, k in cells:
        z = electricity.zone(code)
        f = z.factors[k]
        if f.value is None:
            continue
        rows = electricity._rows_of(code)[k]
        mix = sum(s * eco.get((rows[t]["technology"], k), rows[t]["value"]) for t, s in z.mix.items() if t in rows)
        assert f.low <= mix <= f.high, (code, k, mix)
        if (code, k) in ademe:
            assert f.low <= ademe[(code, k)] <= f.high, (code, k)


def test_every_dominant_stage_holds_in_90_percent_of_the_draws() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        a = assess(load_scenario(path), samples=2000)
        for k in cat.keys():
            r = a[k]
            if r.dominant_stage is not None:
                assert r.dominant_stage_draws >= 0.9, (path.stem, k)
            elif r.central_dominant_stage is not None:
                assert r.dominant_stage_draws < 0.9 and r.dominant_text == "not determined (split)"
            assert sum((r.stage_votes or {"x": 1.0}).values()) == pytest.approx(1.0)


def test_a_practitioner_file_states_its_method(tmp_path) -> None:
    text = template("FRA")
    assert "characterisation" in text.splitlines()[4]  # the template carries the open factors' methods
    path = tmp_path / "mine.csv"
    path.write_text(text)
    assert load(path).methods[cat.keys().index("land_use")] == "EF 3.1"
    body = [line for line in text.splitlines() if not line.startswith("#")]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([*r[:6], r[7]] for r in csv.reader(body))
    path.write_text(out.getvalue())
    methods = load(path).methods
    assert set(methods) == {"not stated (user's factor file)"}
