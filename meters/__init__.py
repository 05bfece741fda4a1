"""Power and energy meters for AI training jobs (standalone: imports nothing from footprint/lca_data).

Submodules are imported lazily so that `import meters` stays cheap:

- `meters.nvml.NvmlMeter`: GPU energy via NVML (counter, instant-power polling, fallbacks)
- `meters.fake_nvml.FakeNVML`: in-process pynvml stand-in for tests and demos
- `meters.amd.AmdMeter`: AMD Instinct GPU energy via amdsmi (energy accumulator, socket-power polling);
  `meters.fake_amdsmi.FakeAmdSmi` its stand-in (FOOTPRINT_FAKE_AMDSMI=2xMI300X)
- `meters.rapl.RaplMeter`, `meters.cpu_estimate.CpuEstimateMeter`: CPU/DRAM energy
- `meters.replay.ReplayMeter`: a recorded power log played back as a live meter
- `meters.importers`: nvidia-smi / codecarbon / PMD log readers and integration
- `meters.sampler.Sampler`, `meters.journal.read_journal`: background sampling, crash-safe journal
- `meters.segments.Retention`, `meters.store.Store`: the journal's Parquet segments, written as the run
  goes and read lazily (`Store.batches`, `meters.store.downsample`)
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import DeviceInfo, DeviceSample, Meter

_LAZY = {
    "NvmlMeter": "nvml",
    "FakeNVML": "fake_nvml",
    "Faults": "fake_nvml",
    "AmdMeter": "amd",
    "FakeAmdSmi": "fake_amdsmi",
    "RaplMeter": "rapl",
    "CpuEstimateMeter": "cpu_estimate",
    "host_meters": "cpu_estimate",
    "ReplayMeter": "replay",
    "read_nvidia_smi_csv": "importers",
    "integrate_energy": "importers",
    "read_codecarbon_csv": "importers",
    "read_pmd_log": "importers",
    "Sampler": "sampler",
    "DeviceTotal": "sampler",
    "read_journal": "journal",
    "Retention": "segments",
    "Store": "store",
}

__all__ = ["DeviceInfo", "DeviceSample", "Meter", *_LAZY]


def __getattr__(name: str) -> Any:
    """PEP 562 lazy attributes: the submodule is imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'meters' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
