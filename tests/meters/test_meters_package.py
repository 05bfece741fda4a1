"""Package-level contracts: standalone, cheap to import, and a fake NVML shaped like the real binding."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import meters
from meters.base import Meter
from meters.fake_nvml import ERROR_CLASSES, FakeNVML

REPO = Path(__file__).resolve().parents[2]
METERS_DIR = REPO / "meters"
HEAVY = ("numpy", "pandas", "pyarrow", "codecarbon", "pynvml", "psutil")


def test_meters_imports_nothing_from_the_rest_of_the_project() -> None:
    for path in METERS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in ("footprint", "lca_data", "dashboard"), f"{path.name}: {name}"


def test_heavy_modules_are_imported_lazily() -> None:
    code = (
        "import sys, meters, meters.sampler, meters.nvml, meters.fake_nvml, meters.rapl, "
        "meters.cpu_estimate, meters.replay, meters.importers, meters.journal, meters.segments, meters.store; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_attributes_and_protocol() -> None:
    assert meters.NvmlMeter.__name__ == "NvmlMeter" and callable(meters.read_journal)
    with pytest.raises(AttributeError):
        meters.NoSuchThing  # noqa: B018
    from meters.cpu_estimate import CpuEstimateMeter
    from meters.nvml import NvmlMeter
    from meters.rapl import RaplMeter

    for meter in (NvmlMeter(FakeNVML()), RaplMeter("/nonexistent"), CpuEstimateMeter(tdp_w=1, ram_power_w=1)):
        assert isinstance(meter, Meter)


def test_fake_matches_the_real_pynvml_shape() -> None:
    pynvml = pytest.importorskip("pynvml")
    fake = FakeNVML()
    for name, member in inspect.getmembers(fake):
        if name.startswith("nvml") and callable(member):
            real = getattr(pynvml, name, None)
            assert real is not None, f"pynvml has no {name}"
            n_real = len(inspect.signature(real).parameters)
            n_fake = len(inspect.signature(member).parameters)
            assert n_real == n_fake, f"{name}: pynvml takes {n_real} arguments, the fake {n_fake}"
        elif name.startswith("NVML_") and hasattr(pynvml, name):
            assert getattr(pynvml, name) == member, name
    for name in ERROR_CLASSES:
        assert issubclass(getattr(pynvml, name), pynvml.NVMLError), name
    from meters.fake_nvml import FieldValue

    assert {f[0] for f in pynvml.c_nvmlFieldValue_t._fields_} == set(FieldValue.__dataclass_fields__)
    value_union = set(FieldValue(0).value.__dataclass_fields__)
    assert {f[0] for f in pynvml.c_nvmlValue_t._fields_} == value_union
