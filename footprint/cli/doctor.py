"""`footprint doctor`: what this machine can measure, and how, before a long run depends on it.

Each check opens the real meter the tracker would use (NVML, RAPL, codecarbon's estimate) and says
what it found; nothing is written and nothing leaves the machine.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, WARN, MISSING = "ok", "warn", "missing"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | missing
    summary: str
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gpu_check() -> Check:
    """Open NVML as the tracker does and report each GPU's energy method."""
    from meters.base import ENERGY_COUNTER, UNAVAILABLE
    from meters.nvml import ENV_FAKE, NvmlMeter, load_nvml

    nvml, notes = load_nvml()
    fake = os.environ.get(ENV_FAKE, "").strip()
    if nvml is None:
        return Check("GPU energy (NVML)", MISSING, "no GPU energy will be measured", notes)
    meter = NvmlMeter(nvml, background_poll=False)
    meter.start()
    try:
        devices = [d for d in meter.devices if d.component == "gpu"]
        details = [
            f"GPU {d.index}: {d.name}: {d.method}"
            + (f", {d.power_scope} power" if d.power_scope else "")
            + (f", driver {d.driver_version}" if d.driver_version else "")
            + ("".join(f"; {n}" for n in d.notes[:2]))
            for d in devices
        ]
        details += meter.notes
    finally:
        meter.stop()
    source = f"fake NVML ({ENV_FAKE}={fake})" if fake else "NVML"
    measured = [d for d in devices if d.method != UNAVAILABLE]
    if not measured:
        return Check("GPU energy (NVML)", MISSING, f"{source}: no GPU can be measured", details)
    counters = sum(d.method == ENERGY_COUNTER for d in measured)
    status = OK if counters == len(measured) else WARN
    summary = f"{source}: {len(measured)} GPU(s), {counters} with the total-energy counter"
    if status == WARN:
        summary += " (the others: polled power, integrated at 10 Hz)"
    return Check("GPU energy (NVML)", status, summary, details)


def amd_check() -> Check | None:
    """Open amdsmi as the tracker does and report each AMD GPU, its catalogue card and energy method (None where
    neither amdsmi with /dev/kfd nor FOOTPRINT_FAKE_AMDSMI is there: an NVIDIA or CPU machine)."""
    from meters import amd
    from meters.base import ENERGY_COUNTER, UNAVAILABLE

    if not amd.wanted():
        return None
    lib, notes = amd.load_amdsmi()
    if lib is None:
        return Check("GPU energy (AMD SMI)", MISSING, "no AMD GPU energy will be measured", notes)
    meter = amd.AmdMeter(lib, background_poll=False)
    meter.start()
    try:
        devices = meter.devices
        details = [
            f"GPU {d.index}: {d.name} ({_catalogue(d.name)}): {d.method}"
            + (f", driver {d.driver_version}" if d.driver_version else "")
            + (f", power cap {d.power_limit_w:g} W" if d.power_limit_w else "")
            + "".join(f"; {n}" for n in d.notes[:2])
            for d in devices
        ] + meter.notes
    finally:
        meter.stop()
    fake = os.environ.get(amd.ENV_FAKE, "").strip()
    source = f"fake amdsmi ({amd.ENV_FAKE}={fake})" if fake else "amdsmi"
    measured = [d for d in devices if d.method != UNAVAILABLE]
    if not measured:
        return Check("GPU energy (AMD SMI)", MISSING, f"{source}: no AMD GPU can be measured", details)
    counters = sum(d.method == ENERGY_COUNTER for d in measured)
    summary = f"{source}: {len(measured)} GPU(s), {counters} with the energy accumulator"
    return Check("GPU energy (AMD SMI)", OK if counters == len(measured) else WARN, summary, details)


def _catalogue(name: str) -> str:
    """The LCA catalogue card a device name maps to, or why none."""
    from footprint.errors import FootprintError
    from footprint.lca.database import db

    try:
        return f"catalogue: {db().find_gpu(name).name}"
    except FootprintError:
        return "not in the LCA catalogue: give --set hardware.gpu=NAME to assess"


def cpu_check() -> Check:
    """RAPL when readable; otherwise codecarbon's TDP x load estimate (modelled)."""
    from meters.rapl import RaplMeter

    rapl = RaplMeter()
    domains = rapl.discover()
    if rapl.available:
        return Check(
            "CPU/DRAM energy (RAPL)",
            OK,
            f"RAPL: {len(domains)} domain(s) measured",
            [f"{d.name}: {d.component}" for d in domains] + rapl.notes,
        )
    details = list(rapl.notes)
    if importlib.util.find_spec("codecarbon") is not None:
        details.append("fallback: codecarbon's TDP x CPU load estimate, recorded as measured: false")
        return Check("CPU/DRAM energy (RAPL)", WARN, "RAPL not readable: CPU and RAM energy will be estimated", details)
    return Check("CPU/DRAM energy (RAPL)", MISSING, "RAPL not readable and codecarbon not installed", details)


def _module_check(name: str, module: str, purpose: str, hint: str) -> Check:
    if importlib.util.find_spec(module) is None:
        return Check(name, MISSING, f"not installed: {purpose} unavailable", [hint])
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version(module)
    except PackageNotFoundError:
        v = "installed"
    return Check(name, OK, f"{module} {v}: {purpose}")


def torch_check() -> Check:
    c = _module_check("torch", "torch", "measured FLOPs (t.watch, measure_flops), kernel bench", "pip install torch")
    if c.status == OK:
        import torch

        cuda = torch.cuda.is_available()
        c.details.append(f"CUDA available: {cuda}" + (f" ({torch.cuda.device_count()} device(s))" if cuda else ""))
    return c


def chromium_check() -> Check:
    from footprint.reports.report import find_chromium

    browser = find_chromium()
    if browser is None:
        return Check("Chromium (PDF reports)", MISSING, "PDF reports unavailable", ["apt-get install chromium"])
    return Check("Chromium (PDF reports)", OK, browser)


def output_check(output_dir: str = "runs") -> Check:
    """Can run records be written where `footprint run` writes them by default?"""
    target = Path(output_dir)
    probe_dir = target if target.is_dir() else next((p for p in target.resolve().parents if p.is_dir()), Path("."))
    try:
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".footprint-doctor-"):
            pass
    except OSError as exc:
        return Check("run records", MISSING, f"cannot write in {probe_dir}: {exc.strerror}")
    return Check("run records", OK, f"writable: {target.resolve()}")


def environment() -> dict[str, Any]:
    from footprint import __version__

    keys = (
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "SLURM_JOB_ID",
        "CUDA_VISIBLE_DEVICES",
        "FOOTPRINT_FAKE_NVML",
        "FOOTPRINT_FAKE_AMDSMI",
    )
    return {
        "footprint": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "host": platform.node(),
        "env": {k: os.environ[k] for k in keys if k in os.environ},
    }


def run_checks(output_dir: str = "runs") -> list[Check]:
    amd = amd_check()
    return [
        gpu_check(),
        *([amd] if amd is not None else []),
        cpu_check(),
        torch_check(),
        _module_check("streamlit", "streamlit", "footprint dashboard", "pip install 'footprint[dashboard]'"),
        chromium_check(),
        output_check(output_dir),
    ]
