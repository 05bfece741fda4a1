"""site.electricity_factors: a practitioner's per-kWh factors in all 16 categories, validated like any input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _paths import REPO, SCENARIOS

from footprint.errors import ScenarioError
from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.engine import assess
from footprint.lca.factorfile import load, template
from footprint.lca.workload import workload_from_dict

TEMPLATE = REPO / "lca_data" / "templates" / "electricity_factors.csv"
BASE = {
    "name": "practitioner",
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 8, "host": "none"},
    "training": {"gpu_hours": 5000, "power_per_gpu": "600 W"},
    "site": {"grid": "FRA", "pue": 1.1},
}


def _w(path: Path | str, **site):
    return workload_from_dict({**BASE, "site": {**BASE["site"], "electricity_factors": str(path), **site}}, "s.yaml")


def test_shipped_template_is_valid_and_is_the_open_fra_factors() -> None:
    fs = load(TEMPLATE)
    uf = electricity.use_factors(workload_from_dict(BASE, "s.yaml"))
    np.testing.assert_allclose(fs.value, uf.value, rtol=1e-5)
    np.testing.assert_allclose(fs.low, uf.low, rtol=1e-5)
    np.testing.assert_allclose(fs.high, uf.high, rtol=1e-5)


def test_a_lower_bound_travels_with_the_file(tmp_path: Path) -> None:
    """The template marks the open factors' lower bounds (column bound: lower): assessed from the file, ozone depletion
    is drawn as from the zone (uniform from the bound up), with its use stage a bound; a bad bound is one line."""
    fs = load(TEMPLATE)
    i = cat.keys().index("ozone_depletion")
    assert fs.lower_bound[i] and sum(fs.lower_bound) == 1
    a, b = assess(_w(TEMPLATE), samples=400), assess(workload_from_dict(BASE, "s.yaml"), samples=400)
    assert a["ozone_depletion"].lower_bound == b["ozone_depletion"].lower_bound == ("use",)
    assert (a["ozone_depletion"].low, a["ozone_depletion"].high) == pytest.approx(
        (b["ozone_depletion"].low, b["ozone_depletion"].high), rel=1e-6
    )
    bad = tmp_path / "bad.csv"
    bad.write_text(TEMPLATE.read_text().replace(",lower\n", ",upper\n"))
    with pytest.raises(ScenarioError, match="column 'bound': expected 'lower' or empty, got 'upper'"):
        load(bad)


def test_assessing_with_the_file_equals_the_zone() -> None:
    a = assess(_w(TEMPLATE), samples=0)
    b = assess(workload_from_dict(BASE, "s.yaml"), samples=0)
    for k in cat.keys():
        mine, zone = a[k].by_component["electricity"], b[k].by_component["electricity"]
        assert (mine is None and zone is None) or mine == pytest.approx(zone, rel=1e-5), k  # None: n/a in both
    d = json.loads(a.to_json())
    assert d["electricity_factors"]["set"] == "practitioner-supplied factors, electricity_factors.csv"
    assert d["electricity_factors"]["row_sources"]["climate_change"].startswith("footprint open factors for FRA")
    assert d["site"]["electricity_factors"].endswith("electricity_factors.csv")


def test_units_are_converted_and_ranges_read(tmp_path: Path) -> None:
    text = template("FRA").replace("\nclimate_change,", "\n#", 1)
    text += "climate_change,79,g CO2 eq/kWh,60,100,ecoinvent 3.10 FR market (licensed),\n"
    path = tmp_path / "mine.csv"
    path.write_text(text)
    fs = load(path)
    i = cat.keys().index("climate_change")
    assert fs.value[i] == pytest.approx(0.079) and fs.low[i] == pytest.approx(0.06) and fs.high[i] == pytest.approx(0.1)
    assert fs.row_sources[i] == "ecoinvent 3.10 FR market (licensed)"
    a = assess(_w(path), samples=300)
    assert a["climate_change"].by_component["electricity"] == pytest.approx(a.facility_energy_kwh * 0.079)
    assert "mine.csv" in a.use_factors.label


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = template("FRA")
    assert old in text
    if new.endswith("1e999"):  # replace the whole value cell
        head, rest = text.split(old, 1)
        text = head + new + rest[rest.index(",") :]
    else:
        text = text.replace(old, new, 1)
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "old, new, where, message",
    [
        ("\nland_use,", "\nland_us,", "row 20, column 'category'", "unknown category 'land_us'"),
        ("\nwater_use,", "\nland_use,", "row 21, column 'category'", "given twice (first in row 20)"),
        ("\nland_use,0.", "\nland_use,abc", "row 20, column 'value'", "expected a number or n/a"),
        ("Pt/kWh", "kg/kWh", "row 20, column 'unit'", "not convertible to Pt/kWh"),
        ("kg CO2 eq/kWh", "kg CO2 eq", "row 8, column 'unit'", "not convertible"),
        ("category,value,unit", "category,val,unit", "header", "missing column(s) value"),
        ("\nland_use,0.", "\nland_use,1e999", "row 20, column 'value'", "finite"),
    ],
)
def test_bad_files_name_file_row_and_column(tmp_path: Path, old: str, new: str, where: str, message: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ScenarioError) as exc:
        load(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: {where}: ") and message in text, text


def test_missing_rows_low_above_high_and_empty_source(tmp_path: Path) -> None:
    lines = template("FRA").splitlines()
    path = tmp_path / "short.csv"
    path.write_text("\n".join(line for line in lines if not line.startswith("land_use,")) + "\n")
    with pytest.raises(ScenarioError, match="category: no row for land_use"):
        load(path)
    i = next(n for n, line in enumerate(lines) if line.startswith("land_use,"))
    cells = lines[i].split(",")
    bad = lines[:]
    bad[i] = ",".join([cells[0], cells[1], cells[2], "9", "10", *cells[5:]])
    path.write_text("\n".join(bad) + "\n")
    with pytest.raises(ScenarioError, match="columns 'low'/'high': expected low <= value <= high"):
        load(path)
    bad[i] = "land_use,0.3,Pt/kWh,,,,"
    path.write_text("\n".join(bad) + "\n")
    with pytest.raises(ScenarioError, match="column 'source': empty"):
        load(path)


def test_scenario_errors_for_the_key(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"s.yaml: site.electricity_factors: no such electricity factor file"):
        _w(tmp_path / "nope.csv")
    with pytest.raises(ScenarioError, match="either carbon_intensity or electricity_factors"):
        _w(TEMPLATE, carbon_intensity="57 g/kWh")
    path = tmp_path / "latin1.csv"
    path.write_bytes("category,value,unit,source\nclimate_change,1,kg CO2 eq/kWh,caf\xe9\n".encode("latin-1"))
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load(path)


def test_cli_bad_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = _broken(tmp_path, "\nland_use,", "\nland_us,")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "footprint.cli",
            "assess",
            str(SCENARIOS / "gpt-4-falk.yaml"),
            "--set",
            f"site.electricity_factors={path}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.csv: row 20, column 'category': unknown category 'land_us'" in lines[0]
