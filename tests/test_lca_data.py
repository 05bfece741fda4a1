"""The LCA database: every datum sourced, ADEME figures carried over exactly, malformed data fails loudly."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from footprint.lca.database import db
from footprint.lca.units import Q
from lca_data import loader
from lca_data.loader import LcaDataError
from lca_data.tools.convert_ademe import COMPONENTS, EXCLUDED_CARDS, convert

REQUIRED_CARDS = [
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "A100-PCIe-40GB",
    "A100-PCIe-80GB",
    "H100-SXM5-80GB",
    "H100 PCIe",
    "H200",
    "B200",
    "GH200",
    "L4",
    "T4",
    "V100-SXM2-32GB",
    "V100-SXM2-16GB",
    "V100-PCIe-16GB",
    "V100-PCIe-32GB",
    "P100",
    "A40",
    "RTX 4090",
    "RTX A4500",
    "TITAN RTX",
    "GTX 1080 Ti",
    "MI250X",
    "MI300X",
]


@pytest.mark.parametrize("name", REQUIRED_CARDS)
def test_required_cards_present_with_specs(name: str) -> None:
    g = db().find_gpu(name)
    assert g.tdp_w > 0 and g.peak_tflops and all(v > 0 for v in g.peak_tflops.values())
    assert g.parametric["total_mass_kg"] > 0 and g.parametric["gpu_die_area_mm2"] > 0
    assert g.die_area_mm2 and g.process_node and g.memory_gb


@pytest.mark.parametrize(
    "alias, gid",
    [
        ("A100-SXM4-40GB", "a100-sxm4-40gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
        ("a100 sxm4 40gb", "a100-sxm4-40gb"),
        ("H100-SXM5-80GB", "h100-sxm5-80gb"),
        ("V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"),
    ],
)
def test_lenient_names(alias: str, gid: str) -> None:
    assert db().find_gpu(alias).id == gid


def test_unknown_gpu_suggests_closest() -> None:
    from footprint.errors import UnknownGpuError

    with pytest.raises(UnknownGpuError, match="closest known: .*a100"):
        db().find_gpu("A100-SXM9-40GB")


def test_dense_peaks_never_sparse() -> None:
    d = db()
    assert d.find_gpu("A100-SXM4-40GB").peak_tflops["bf16"] == 312
    assert d.find_gpu("H100-SXM5-80GB").peak_tflops["bf16"] == pytest.approx(989.4, rel=0.01)
    assert "fp8" not in d.find_gpu("A100-SXM4-40GB").peak_tflops


def test_every_source_has_a_licence_and_every_value_a_source() -> None:
    srcs = loader.load_sources()
    assert "ademe-gpu-lca" in srcs and "CC BY-SA" in srcs["ademe-gpu-lca"]["licence"]
    for name in ("gpus.yaml", "sites.yaml", "host.yaml", "embodied_ranges.yaml", "materials.yaml"):
        tree = loader.read_yaml(name)
        entries = list(loader.iter_values(tree))
        assert entries, name
        assert all(e["source"] in srcs for _, e in entries)
    for rows in (
        loader.load_ademe_components(),
        loader.load_parametric_factors(),
        loader.load_distribution_factors(),
        loader.load_electricity_technologies(),
        loader.load_electricity_zones(),
        loader.load_electricity_cited(),
        loader.load_electricity_zone_cited(),
        loader.load_normalisation(),
    ):
        assert rows and all(r["source"] in srcs for r in rows)
    assert all(r["second_source"] in srcs for r in loader.load_electricity_crosscheck())
    corrections = loader.load_embodied_corrections()["corrections"]
    assert corrections and all(c["source"] in srcs and c["reason"] for c in corrections.values())


def test_ademe_figures_carried_over_exactly(ademe_dir: Path) -> None:
    ours = {(r["card"], r["component"], r["stage"], r["category"]): float(r["value"]) for r in loader.load_ademe_components()}
    cats = {c["ademe"]: c["key"] for c in loader.load_categories()["categories"]}
    n = 0
    with (ademe_dir / "gpus_impact_factors.csv").open() as fh:
        for rec in csv.DictReader(fh):
            if rec["graphics_card"] in EXCLUDED_CARDS or rec["component"] not in COMPONENTS:
                continue
            for stage in ("manufacturing", "transport", "end_of_life"):
                for acr, key in cats.items():
                    raw = rec.get(f"{stage}_{acr}", "").replace(",", ".")
                    if raw and float(raw) != 0:
                        assert ours[(rec["graphics_card"], COMPONENTS[rec["component"]], stage, key)] == float(raw)
                        n += 1
    assert n == len([k for k in ours if k[3] != "primary_energy"])


def test_conversion_is_reproducible(ademe_dir: Path, tmp_path: Path) -> None:
    shutil.copy(loader.DATA_DIR / "categories.yaml", tmp_path)
    convert(ademe_dir, tmp_path)
    for name in ("ademe_gpu_components.csv", "ademe_parametric_factors.csv", "ademe_distribution_factors.csv"):
        assert (tmp_path / name).read_text() == (loader.DATA_DIR / name).read_text()


def test_electricity_build_is_reproducible(shared: Path, tmp_path: Path) -> None:
    """lca_data/electricity_*.csv are exactly what lca_data/tools/build_electricity.py derives from the open data."""
    from lca_data.tools.build_electricity import write

    src = shared.parent / "reference" / "electricity"
    if not (src / "open-factors").is_dir():
        pytest.skip("../shared/reference/electricity/open-factors is not beside the repository")
    counts = write(src, tmp_path)
    for name in counts:
        assert (tmp_path / name).read_text() == (loader.DATA_DIR / name).read_text(), name


def test_parametric_factors_are_average_model(ademe_dir: Path) -> None:
    avg = json.loads((ademe_dir / "average_model.json").read_text())["components"]
    f = db().parametric_factors
    assert f["gpu_die"][0] == avg["graphics_processing_unit"]["manufacturing_GWP"]
    assert f["end_of_life"][0] == avg["end_of_life"]["end_of_life_GWP"]


def _broken_copy(tmp_path: Path) -> Path:
    root = tmp_path / "lca_data"
    shutil.copytree(loader.DATA_DIR, root, ignore=shutil.ignore_patterns("*.py", "__pycache__", "tools"))
    return root


def test_malformed_entries_fail_loudly(tmp_path: Path) -> None:
    root = _broken_copy(tmp_path)
    text = (root / "sites.yaml").read_text()
    (root / "sites.yaml").write_text(text.replace("source:", "src:", 1))
    with pytest.raises(LcaDataError, match=r"sites.yaml: .* has no source"):
        loader.load_yaml_checked("sites.yaml", root=root)


def test_unregistered_source_and_bad_unit_fail(tmp_path: Path) -> None:
    root = _broken_copy(tmp_path)
    (root / "host.yaml").write_text((root / "host.yaml").read_text().replace("5700 kg CO2 eq", "5700 kg CO2 wat"))
    with pytest.raises(LcaDataError, match=r"host.yaml: hosts.boavizta_p5.published\[0\]: cannot read"):
        loader.load_yaml_checked("host.yaml", parse=Q, root=root)
    rows = (root / "electricity_technologies.csv").read_text().replace("unece-2022-lca-electricity", "nowhere", 1)
    (root / "electricity_technologies.csv").write_text(rows)
    with pytest.raises(LcaDataError, match="not registered"):
        loader.load_electricity_technologies(root=root)


@pytest.mark.parametrize(
    "file, old, new, loader_name, match",
    [
        ("electricity_technologies.csv", ",0.97,0.8134,", ",0.97,0.99,", "load_electricity_technologies", "low <= value <= high"),
        ("electricity_crosscheck.csv", ",false,", ",maybe,", "load_electricity_crosscheck", "expected true or false"),
        ("electricity_crosscheck.csv", "benportner-ecoinvent-ilcd", "nowhere", "load_electricity_crosscheck", "not registered"),
        ("ef_normalisation_weighting.csv", ",21.06,", ",22.06,", "load_normalisation", "weights sum to 101"),
        ("electricity_cited.csv", ",crosscheck,", ",guess,", "load_electricity_cited", "expected factor or crosscheck"),
        ("embodied_corrections.yaml", "reason: >-", "why: >-", "load_embodied_corrections", "needs its reason"),
    ],
)
def test_new_electricity_files_fail_loudly(tmp_path: Path, file: str, old: str, new: str, loader_name: str, match: str) -> None:
    root = _broken_copy(tmp_path)
    text = (root / file).read_text()
    assert old in text
    (root / file).write_text(text.replace(old, new, 1))
    loader.load_sources.cache_clear()
    with pytest.raises(LcaDataError, match=match):
        getattr(loader, loader_name)(root=root)


def test_duplicate_alias_is_rejected(tmp_path: Path) -> None:
    root = _broken_copy(tmp_path)
    text = (root / "gpus.yaml").read_text()
    (root / "gpus.yaml").write_text(text.replace("id: a100-pcie-40gb", "id: a100-sxm4-40gb", 1))
    with pytest.raises(LcaDataError, match="gpus.yaml"):
        loader.load_gpus(root=root)
