"""site.electricity_factors: ademe — ADEME's national mixes as an installed boaviztapi carries them."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

from footprint.errors import ScenarioError
from footprint.lca import categories as cat
from footprint.lca import electricity
from footprint.lca.engine import assess
from footprint.lca.workload import workload_from_dict

BASE = {
    "name": "ademe",
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 8, "host": "none"},
    "training": {"gpu_hours": 5000, "power_per_gpu": "600 W"},
    "site": {"grid": "FRA", "pue": 1.1, "electricity_factors": "ademe"},
}
#: our key -> the names of boaviztapi's CSV rows (name column) whose ADEME values it sums (read independently here)
ROWS = {
    "climate_change": ("gwpf", "gwpb", "gwplu"),
    "ozone_depletion": ("odp",),
    "acidification": ("ap",),
    "ionising_radiation": ("ir",),
    "resource_use_fossils": ("adpf",),
    "eutrophication_marine": ("epm",),
}


def _w(grid: str):
    return workload_from_dict({**BASE, "site": {**BASE["site"], "grid": grid}}, "s.yaml")


def _csv_values(zone: str) -> dict[str, float]:
    """boaviztapi's source table (data/crowdsourcing/electrical_mix.csv), ADEME rows only."""
    import boaviztapi

    path = Path(boaviztapi.data_dir) / "crowdsourcing" / "electrical_mix.csv"
    rows = [r for r in csv.DictReader(path.open(encoding="utf-8")) if r["source"].startswith("ADEME Base IMPACTS")]
    return {r["name"]: float(r[zone]) for r in rows}


def test_without_boaviztapi_one_line_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boaviztapi", None)  # import boaviztapi now raises ImportError
    monkeypatch.setitem(sys.modules, "boaviztapi.data.factor_provider", None)
    with pytest.raises(ScenarioError, match=r"site.electricity_factors: .*not installed.*pip install boaviztapi"):
        _w("FRA")


def test_values_are_boaviztapis_ademe_rows_and_gaps_are_not_modelled() -> None:
    pytest.importorskip("boaviztapi")
    keys = cat.keys()
    for zone in ("FRA", "DEU", "USA", "POL", "CHN", "IND"):
        uf = electricity.use_factors(_w(zone))
        ref = _csv_values(zone)
        for key, names in ROWS.items():
            want = sum(ref[n] for n in names)
            got = uf.value[keys.index(key)]
            if want > 0:
                assert got == pytest.approx(want, rel=1e-9), (zone, key)
            else:  # ADEME's 0 is no data: not modelled, never 0
                assert np.isnan(got) and uf.not_modelled[keys.index(key)], (zone, key)
        for key in ("human_toxicity_cancer", "human_toxicity_non_cancer", "ecotoxicity_freshwater", "land_use"):
            assert np.isnan(uf.value[keys.index(key)]) and uf.not_modelled[keys.index(key)], (zone, key)
            assert uf.scope[keys.index(key)].startswith("not modelled: ADEME Base IMPACTS")
        assert np.isnan(uf.value[keys.index("water_use")]) and not uf.not_modelled[keys.index("water_use")]
    fra, deu = electricity.use_factors(_w("FRA")), electricity.use_factors(_w("DEU"))
    i = keys.index("ozone_depletion")
    assert fra.value[i] > 0 and np.isnan(deu.value[i])  # ADEME has ODP for France, 0 (nothing) for Germany
    assert fra.label.startswith("ADEME Base IMPACTS national mix of FRA via boaviztapi")


def test_the_assessment_reports_not_modelled_not_zero() -> None:
    pytest.importorskip("boaviztapi")
    a = assess(_w("DEU"), samples=0)
    assert a["ozone_depletion"].not_modelled == ("use",) and a["ozone_depletion"].by_component["electricity"] is None
    assert a["land_use"].not_modelled == ("use",)
    assert a["climate_change"].by_component["electricity"] == pytest.approx(
        a.facility_energy_kwh * sum(_csv_values("DEU")[n] for n in ROWS["climate_change"]), rel=1e-6
    )
    assert a["water_use"].by_stage["use"] > 0  # the site's own cooling water stays counted
    d = a.to_dict()["electricity_factors"]
    assert "carries 0 for odp, which means no data" in d["row_sources"]["ozone_depletion"]


def test_a_zone_boaviztapi_lacks_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("boaviztapi")
    from boaviztapi.data import factor_provider

    monkeypatch.delitem(factor_provider.impact_factors["electricity"], "FRA")
    with pytest.raises(ScenarioError, match="has no ADEME electricity mix for zone 'FRA'"):
        _w("FRA")
