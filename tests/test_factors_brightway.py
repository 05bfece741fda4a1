"""`footprint factors brightway`: Brightway's own LCIA of 1 kWh, written as a factor file site.electricity_factors reads.

Each test module builds its own small Brightway project (tests/_brightway_project.py) in a temporary BRIGHTWAY2_DIR;
no ecoinvent is needed. Brightway reads BRIGHTWAY2_DIR on import, so the project and the command run in subprocesses.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO, SCENARIOS

from footprint.lca import categories as cat
from footprint.lca.brightway import find_methods, long_term_of, unit_matches
from footprint.lca.factorfile import load

pytest.importorskip("bw2data")
pytest.importorskip("bw2calc")

MIX = "market for electricity, low voltage"


def _env(bw_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "BRIGHTWAY2_DIR": str(bw_dir)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """The project's directory and bw2calc's own score per category for 1 kWh of the mix."""
    bw_dir = tmp_path_factory.mktemp("bw")
    out = subprocess.run(
        [sys.executable, str(REPO / "tests" / "_brightway_project.py")],
        env=_env(bw_dir),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return bw_dir, json.loads(out.stdout.strip().splitlines()[-1])


def _factors(bw_dir: Path, out: Path, *extra: str, activity: str = MIX) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "footprint.cli", "factors", "brightway", "--project", "tiny", "--database", "grid"]
    return subprocess.run(
        [*cmd, "--activity", activity, *extra, "-o", str(out)],
        env=_env(bw_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _rows(path: Path) -> dict[str, dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    return {r["category"]: r for r in csv.DictReader(lines)}


def test_the_file_reproduces_brightways_lcia_in_all_16_categories(project, tmp_path: Path) -> None:
    bw_dir, ref = project
    out = tmp_path / "grid.csv"
    proc = _factors(bw_dir, out, "--location", "XX", "--method-family", "EF v3.1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr.strip() == f"wrote {out}"
    rows = _rows(out)
    assert tuple(rows) == tuple(cat.keys())
    fs = load(out)  # the reader takes the file as written
    for i, k in enumerate(cat.keys()):
        assert ref[k] > 0, k  # the project gives every category a score: a 0 would prove nothing
        assert fs.value[i] == pytest.approx(ref[k], rel=1e-3), k
        r = rows[k]
        assert r["characterisation"] == "EF 3.1" and r["long_term"] == "included"  # ecoinvent's family name, read as EF 3.1
        assert "Brightway project tiny, database grid, activity 'market for electricity, low voltage' [XX]" in r["source"]
        assert "method ('EF v3.1', " in r["source"]
    # the sub-indicator "climate change: fossil" (CF 100) was not taken for climate change
    assert "'climate change', 'climate change indicator'" in rows["climate_change"]["source"]


def test_activity_in_megajoules_and_the_no_lt_family(project, tmp_path: Path) -> None:
    bw_dir, ref = project
    mj = tmp_path / "mj.csv"
    assert _factors(bw_dir, mj, activity="market for electricity, per MJ").returncode == 0
    nolt = tmp_path / "nolt.csv"
    assert _factors(bw_dir, nolt, "--method-family", "EF v3.1 no LT").returncode == 0
    a, b = load(mj), load(nolt)
    for i, k in enumerate(cat.keys()):
        assert a.value[i] == pytest.approx(ref[k], rel=1e-3), k  # 3.6 MJ of the per-MJ market is 1 kWh of the mix
        assert b.value[i] == pytest.approx(0.5 * ref[k], rel=1e-3), k  # the test family's CFs are halved
    assert {r["long_term"] for r in _rows(nolt).values()} == {"excluded (no LT)"}


def test_assess_uses_the_file(project, tmp_path: Path) -> None:
    bw_dir, ref = project
    out = tmp_path / "grid.csv"
    assert _factors(bw_dir, out).returncode == 0
    cmd = [sys.executable, "-m", "footprint.cli", "assess", str(SCENARIOS / "gpt-4-falk.yaml"), "--format", "json"]
    runs = {}
    for label, extra in (("file", ["--set", f"site.electricity_factors={out}"]), ("zone", [])):
        proc = subprocess.run([*cmd, "--samples", "0", *extra], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[label] = json.loads(proc.stdout)
    d = runs["file"]
    assert d["electricity_factors"]["set"] == "practitioner-supplied factors, grid.csv"
    assert d["electricity_factors"]["row_sources"]["ozone_depletion"].startswith("Brightway project tiny")
    # the electricity of the use phase is the facility's energy times the file's factor, in every category
    energy = d["facility_energy_kwh"]
    for k in cat.keys():
        assert d["impacts"][k]["by_component"]["electricity"] == pytest.approx(energy * ref[k], rel=1e-3), k
    assert runs["zone"]["impacts"]["climate_change"]["by_component"]["electricity"] != pytest.approx(
        energy * ref["climate_change"], rel=1e-2
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--project", "nope", "--project: no Brightway project 'nope'"),
        ("--database", "nope", "--database: no database 'nope' in project 'tiny' (databases: bio, grid)"),
        ("--activity", "market for electricity, low voltag", "did you mean 'market for electricity, low voltage'?"),
        ("--location", "FR", "has no location 'FR' in 'grid' (it has: XX)"),
        ("--method-family", "ReCiPe", "no LCIA method family 'ReCiPe' in this project"),
        ("--method-family", "EF", "matches 'EF v3.1', 'EF v3.1 no LT': give one exactly"),
    ],
)
def test_unknowns_are_one_line_exit_2_and_no_file(project, tmp_path: Path, option: str, value: str, message: str) -> None:
    bw_dir, _ = project
    out = tmp_path / "x.csv"
    args = {"--project": "tiny", "--database": "grid", "--activity": MIX, option: value}
    extra = [a for kv in args.items() for a in kv if kv[0] not in ("--project", "--database", "--activity")]
    cmd = [sys.executable, "-m", "footprint.cli", "factors", "brightway"]
    cmd += ["--project", args["--project"], "--database", args["--database"], "--activity", args["--activity"], *extra]
    proc = subprocess.run([*cmd, "-o", str(out)], env=_env(bw_dir), capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()


def test_a_missing_brightway_dir_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    proc = _factors(tmp_path / "absent", out)
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().splitlines() == [
        f"footprint: error: BRIGHTWAY2_DIR: Brightway cannot start: BRIGHTWAY2_DIR variable is {tmp_path / 'absent'}, "
        "but this is not a valid directory"
    ]


def test_method_matching_and_units() -> None:
    methods = [
        ("EF v3.1", "climate change", "GWP100"),
        ("EF v3.1", "climate change: fossil", "GWP100"),
        ("EF v3.1", "human toxicity: carcinogenic, inorganics", "CTUh"),
        ("EF v3.1 no LT", "climate change", "GWP100"),
        ("ReCiPe 2016", "climate change", "GWP100"),
    ]
    fam, found = find_methods(methods, "ef v3.1")  # an exact family wins over the longer one it prefixes
    assert fam == "EF v3.1" and found == {"climate_change": ("EF v3.1", "climate change", "GWP100")}
    assert find_methods(methods, "ReCiPe")[0] == "ReCiPe 2016"
    assert long_term_of("EF v3.1 no LT") == "excluded (no LT)" and long_term_of("EF v3.1") == "included"
    assert unit_matches("climate_change", "kg CO2-Eq") and unit_matches("ozone_depletion", "kg CFC-11-Eq")
    assert unit_matches("water_use", "m3 world eq. deprived") and unit_matches("land_use", "dimensionless")
    assert not unit_matches("climate_change", "kg CFC-11-Eq") and not unit_matches("acidification", "kg SO2-Eq")


def test_the_core_does_not_import_brightway() -> None:
    code = (
        "import sys, footprint, footprint.cli.app as app\n"
        "app.build_parser()\n"
        "import footprint.lca.brightway\n"
        "print(sorted(m for m in sys.modules if m.startswith(('bw2', 'bw_'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(REPO), check=True)
    assert out.stdout.strip() == "[]"
    text = (REPO / "pyproject.toml").read_text()
    core = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "bw2" not in core and 'lca = ["bw2data' in text
