"""Scenario files into Workloads: the scenario parser (one parser per section) and `--set` overrides.

A measured run and a hypothetical scenario become the same thing before the LCA is computed. The Workload itself is
plain data (`footprint.lca.workload_data`, re-exported here); a run record becomes one in
`footprint.tracking.to_workload`, from the scenario mapping it amounts to (`run_scenario`, here).
Scenario files are read through the input contract (``footprint.inputs``: UTF-8 text, ``yaml.safe_load``
within size, nesting and alias-expansion limits) and validated key by key: every number finite and in
its domain, every error naming the file, the key and what was expected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from footprint import bounds
from footprint.errors import FootprintError, ScenarioError
from footprint.escaping import shown
from footprint.inputs import MAX_GPUS, finite_number, load_yaml, read_text
from footprint.lca.database import DTYPES, Gpu, db
from footprint.lca.units import Q, UnitParseError, display_unit
from footprint.lca.workload_data import HOST_ONLY, Workload
from lca_data.loader import YamlLimitError, safe_load

if TYPE_CHECKING:  # pragma: no cover
    from footprint.flops import TransformerFlops
    from footprint.lca.factorset import FactorSet

__all__ = ["DURATION_METHOD", "Workload", "load_scenario", "model_flops", "workload_from_dict"]

#: The GPU-hours method of a scenario that states its wall-clock time (training.duration).
DURATION_METHOD = "duration x GPU count"

LONG_TERM = ("exclude", "include")  # site.long_term_emissions: EF datasets carry no long-term flows (the default)
ALLOWED: dict[str, tuple[str, ...]] = {
    "": ("name", "description", "model", "hardware", "training", "site", "uncertainty"),
    "model": ("parameters", "tokens", "active_parameters", "layers", "hidden", "heads", "seq_len", "vocab_size"),
    "hardware": ("gpu", "count", "lifetime", "utilization", "host", "embodied", "embodied_data"),
    "training": (
        "gpu_hours",
        "flops",
        "mfu",
        "dtype",
        "duration",
        "power_per_gpu",
        "power_fraction_of_tdp",
        "energy",
        "kernel_profile",
    ),
    "site": (
        "preset",
        "grid",
        "pue",
        "wue",
        "ewif",
        "carbon_intensity",
        "carbon_intensity_hourly",
        "electricity_factors",
        "long_term_emissions",
    ),
    "uncertainty": ("gpu_hours", "mfu", "power_per_gpu", "lifetime", "utilization", "pue", "carbon_intensity"),
}
NO_GPU = "none"  # hardware.gpu of a run without GPU: the host only
DEFAULT_LIFETIME = "3 years"  # Boavizta / EcoLogits GPU default; see README "Method"
DEFAULT_UTILIZATION = 1.0
MAX_SCENARIO_BYTES = 1_000_000


# ---- reading ------------------------------------------------------------------------------------


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A scenario file read under the input contract (UTF-8, at most 1 MB, YAML within limits); errors name file and line."""
    p = Path(path)
    if p.exists() and not p.is_file():
        raise ScenarioError("not a scenario file (a directory or a device)", str(p))
    try:
        text = read_text(p, "scenario YAML", MAX_SCENARIO_BYTES)
    except ScenarioError:
        raise
    except FootprintError as exc:
        raise ScenarioError(exc.detail.replace("no such file", "no such scenario file"), exc.file, exc.key) from None
    return parse_yaml_text(text, str(p))


def parse_yaml_text(text: str, file: str) -> dict[str, Any]:
    try:
        data = load_yaml(text, file)
    except FootprintError as exc:
        raise ScenarioError(exc.detail, exc.file, exc.key) from None
    if not isinstance(data, dict):
        raise ScenarioError("expected a mapping of sections (name, hardware, training, site)", file)
    return data


def _shipped_dir() -> Path:
    import scenarios  # package data: the YAML files beside it (see pyproject.toml)

    return Path(scenarios.__file__).resolve().parent


SHIPPED_SCENARIOS = _shipped_dir()


def apply_overrides(data: dict[str, Any], sets: list[str], file: str | None = None, flag: str = "--set") -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (values parsed as YAML scalars): the CLI's ``--set`` and the Python API's
    ``set=`` (``flag`` names which in the errors, so a Python user is not told to pass a command-line option)."""
    out = _deepcopy(data)
    for item in sets or []:
        if "=" not in item:
            raise FootprintError(f"{flag} {item!r}: expected key=value, e.g. training.mfu=0.5", file, flag)
        path, raw = item.split("=", 1)
        keys = [k for k in path.strip().split(".") if k]
        if not keys:
            raise FootprintError(f"{flag} {item!r}: empty key", file, flag)
        try:
            value = safe_load(raw) if raw.strip() else None
        except YamlLimitError as exc:
            raise FootprintError(f"{flag} {path.strip()}=...: YAML refused: {exc.problem}", file, flag) from None
        except yaml.YAMLError:
            value = raw
        node = out
        for k in keys[:-1]:
            if not isinstance(node.get(k, {}), dict):
                raise FootprintError(f"{flag} {item!r}: {k!r} is not a section", file, flag)
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return out


def _deepcopy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deepcopy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deepcopy(v) for v in d]
    return d


def scenario_path(target: str | Path) -> Path:
    """``target`` as given where it exists; else a bare name (``bloom-176b`` or ``bloom-176b.yaml``) of a scenario
    shipped with the package (the ``scenarios`` package data), so names work outside the repository too; as does
    ``scenarios/NAME.yaml``, the README's spelling, from any folder."""
    p = Path(target)
    if p.exists() or not (len(p.parts) == 1 or (len(p.parts) == 2 and p.parts[0] == "scenarios")):
        return p
    for cand in (SHIPPED_SCENARIOS / p.name, SHIPPED_SCENARIOS / f"{p.name}.yaml"):
        if cand.is_file():
            return cand
    return p


def shipped_scenarios() -> list[str]:
    """The bare names `scenario_path` resolves (bloom-176b, ...)."""
    return sorted(p.stem for p in SHIPPED_SCENARIOS.glob("*.yaml"))


#: What a scenario's ``training.kernel_profile`` resolves to, injected by the layer that reads kernel profiles
#: (`footprint.builders` passes `footprint.kernels.profile.predict_for_scenario`): called with the profile's path,
#: the model section, the GPU and the dtype; returns a prediction with flops, mfu, gpu_hours, notes and method.
ProfileResolver = Callable[[Path, dict[str, float], Gpu, str], Any]


def load_scenario(
    path: str | Path, sets: list[str] | None = None, flag: str = "--set", kernel_profile: ProfileResolver | None = None
) -> Workload:
    """Read, validate and resolve a scenario YAML (a path, or a shipped scenario's name) into a Workload
    (``kernel_profile``: see ProfileResolver; `footprint.load_scenario` passes the kernels package's)."""
    path = scenario_path(path)
    data = read_yaml(path)
    if sets:
        data = apply_overrides(data, sets, str(path), flag)
    return workload_from_dict(data, str(path), kernel_profile)


# ---- validation helpers -------------------------------------------------------------------------


class _Ctx:
    """The file being read, and the notes and sources its sections add (each section's parser appends)."""

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.notes: list[str] = []
        self.srcs: list[str] = []

    def err(self, key: str, msg: str) -> ScenarioError:
        return ScenarioError(msg, self.file, key)

    def section(self, data: dict[str, Any], name: str) -> dict[str, Any]:
        sec = data.get(name)
        sec = {} if sec is None else sec  # absent or null: the defaults; `[]`, `''` or 0 is a mistake, not "none"
        if not isinstance(sec, dict):
            raise self.err(name, f"expected a mapping, got {type(sec).__name__} {_short(sec)}")
        allowed = ALLOWED[name]
        for k in sec:
            if k not in allowed:
                raise self.err(f"{name}.{k}", f"unknown key; allowed: {', '.join(allowed)}")
        return sec

    def quantity(
        self, key: str, value: Any, unit: str, bare_unit: str | None = None, lo: float | None = None, lo_open: bool = False
    ) -> float:
        """Finite magnitude in ``unit`` (>= ``lo``, or > with ``lo_open``); bare numbers, also written as strings
        ("1e3", which YAML 1.1 reads as text), are read in ``bare_unit`` (default: ``unit``)."""
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            raise self.err(key, f"expected a quantity in {display_unit(unit)}, got {value!r}")
        if isinstance(value, str) and _NUMERIC.match(value):
            value = self.number(key, value)
        try:
            if isinstance(value, (int, float)):
                q = Q(value, bare_unit or unit)
                v = float(q.to(Q(1, unit).units).magnitude)
            else:
                v = float(Q(value, unit).magnitude)
        except UnitParseError as exc:
            raise self.err(key, f"{exc}") from None
        if not math.isfinite(v):
            raise self.err(key, f"{value!r} is beyond floating point in {display_unit(unit)}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise self.err(key, f"must be {'positive' if lo_open and lo == 0 else ('>= ' + format(lo, 'g'))}, got {value!r}")
        return bounds.check(key, v, self.file)

    def number(
        self, key: str, value: Any, lo: float | None = None, hi: float | None = None, lo_open: bool = False, integer: bool = False
    ) -> float:
        v = finite_number(value, key, self.file, lo, hi, lo_open)
        if integer and v != int(v):
            raise self.err(key, f"expected a whole number, got {value!r}")
        return bounds.check(key, v, self.file)

    def text(self, key: str, value: Any, allowed: Any = None, max_chars: int = 200) -> str:
        """A name (a string, or a number written bare) of at most ``max_chars``; with ``allowed``, one of them."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            shown = f"; allowed: {', '.join(map(str, allowed))}" if allowed is not None else ""
            raise self.err(key, f"expected a name, got {type(value).__name__} {_short(value)}{shown}")
        text = str(value)
        if len(text) > max_chars:
            raise self.err(key, f"longer than {max_chars} characters: {_short(text)}")
        if allowed is not None and text not in allowed:
            raise self.err(key, f"unknown {text!r}; allowed: {', '.join(map(str, allowed))}")
        return text

    def fraction(self, key: str, value: Any) -> float:
        """A share in (0, 1]; "50 %" strings are accepted."""
        if isinstance(value, str) and value.strip().endswith("%"):
            value = self.number(key, value.strip()[:-1]) / 100
        v = self.number(key, value)
        if not 0 < v <= 1:
            raise self.err(key, f"must be in (0, 1], got {value!r}")
        return v


_NUMERIC = re.compile(r"^\s*[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$|^\s*[-+]?(?:inf|infinity|nan)\s*$", re.I)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def workload_from_dict(
    data: dict[str, Any],
    file: str | None = None,
    kernel_profile: ProfileResolver | None = None,
    energy_by_hour: dict[float, float] | None = None,
) -> Workload:
    """Validate a scenario mapping (see ARCHITECTURE.md) and resolve it into a Workload: one parser per section,
    each with its error messages; ``kernel_profile`` resolves ``training.kernel_profile`` (see ProfileResolver);
    ``energy_by_hour`` (UTC hour start -> J, from timed samples) is matched to ``site.carbon_intensity_hourly``."""
    ctx = _Ctx(file)
    _check_sections(ctx, data)
    hw, tr, site = ctx.section(data, "hardware"), ctx.section(data, "training"), ctx.section(data, "site")
    site = {k: v for k, v in site.items() if v is not None}  # `--set site.key=null` unsets a key
    hardware = _hardware(ctx, hw)
    model = {k: ctx.number(f"model.{k}", v, lo=0, lo_open=True) for k, v in ctx.section(data, "model").items()}
    if hardware["gpu"] is None:
        time, energy = _host_only(ctx, tr)
    else:
        time = _gpu_time(ctx, tr, hardware["gpu"], hardware["count"], model, kernel_profile)
        energy = _energy(ctx, tr, hardware["gpu"], time.pop("gpu_hours"), time.pop("gpu_hours_method"))
    where = _site(ctx, site)
    ranges = _ranges(ctx, ctx.section(data, "uncertainty"))
    if hardware["gpu"] is not None and time["mfu"] is None and (f := model_flops(model)) is not None:
        time.update(_derived_mfu(ctx, f, hardware["gpu"], time["dtype"], energy["gpu_hours"]))
    name = shown(str(data.get("name") or (Path(file).stem if file else "scenario")))  # no terminal escape rides along
    _check_derived(ctx, energy, hardware)
    w = Workload(
        name=name,
        **hardware,
        **time,
        **energy,
        **where,
        model=model,
        ranges=ranges,
        source=file,
        description=str(data.get("description") or ""),
        notes=tuple(ctx.notes),
        sources=tuple(dict.fromkeys(ctx.srcs)),
    )
    return _hourly(w, energy_by_hour, file)


def _hourly(w: Workload, energy_by_hour: dict[float, float] | None, file: str | None) -> Workload:
    """site.carbon_intensity_hourly matched to the job's energy per hour: the climate-change use factor becomes the
    energy-weighted intensity (the hour-by-hour sum). A scenario of totals has no hours to match: refused."""
    if w.hourly_intensity is None:
        return w
    from footprint.lca import hourly

    if energy_by_hour is None:
        raise ScenarioError(
            "needs the energy's timing (a run record or an imported log with its samples, or a fleet job of an --exact "
            "import: footprint assess RUN_DIR --set site.carbon_intensity_hourly=FILE); a scenario of totals, or a fleet "
            "report's linear batch, has no hours to match",
            file,
            hourly.KEY,
        )
    m = hourly.match(energy_by_hour, w.hourly_intensity, w.it_energy_kwh)
    return w.with_(carbon_intensity=m.weighted_g_per_kwh / 1000, hourly=m, notes=(*w.notes, m.method()))


def _check_sections(ctx: _Ctx, data: Any) -> None:
    """The top level: a mapping of known sections; name and description are text."""
    if not isinstance(data, dict):
        raise ctx.err("", "expected a mapping of sections (name, hardware, training, site)")
    for k in data:
        if k not in ALLOWED[""]:
            raise ctx.err(str(k), f"unknown section; allowed: {', '.join(ALLOWED[''])}")
    for k in ("name", "description"):
        if data.get(k) is not None:
            ctx.text(k, data[k], max_chars=10_000)


def _hardware(ctx: _Ctx, hw: dict[str, Any]) -> dict[str, Any]:
    """hardware: the GPU, how many, their lifetime and utilisation, the host share, embodied data: Workload fields."""
    if "gpu" not in hw:
        raise ctx.err(
            "hardware.gpu", "missing; give a GPU name such as A100-SXM4-40GB (see `footprint gpus`), or none (host only)"
        )
    gpu, count = None, 0
    if isinstance(hw["gpu"], str) and hw["gpu"].strip().lower() == NO_GPU:
        if "count" in hw:
            raise ctx.err("hardware.count", "a GPU count needs a GPU: give hardware.gpu (see `footprint gpus`)")
    else:
        gpu = db().find_gpu(ctx.text("hardware.gpu", hw["gpu"]), ctx.file, "hardware.gpu")
        count = int(ctx.number("hardware.count", hw.get("count", 1), lo=0, hi=MAX_GPUS, lo_open=True, integer=True))
    lifetime_h = ctx.quantity("hardware.lifetime", hw.get("lifetime", DEFAULT_LIFETIME), "hour", "year", lo=0, lo_open=True)
    utilization = ctx.fraction("hardware.utilization", hw.get("utilization", DEFAULT_UTILIZATION))
    host = hw.get("host", "default")
    if host in (None, False, "none", "None"):
        host = None
    elif host != "default":
        host = ctx.text("hardware.host", host, ["default", "none", *db().host["hosts"]])
    embodied = _embodied_override(ctx, hw.get("embodied"), ctx.srcs)
    variant = hw.get("embodied_data")
    if variant is not None:
        variant = ctx.text("hardware.embodied_data", variant, list(db().corrections["variants"]))
    _check_embodied(ctx, gpu, variant, embodied)
    return {
        "gpu": gpu,
        "count": count,
        "lifetime_h": lifetime_h,
        "utilization": utilization,
        "host": host,
        "embodied_override": embodied,
        "embodied_variant": variant,
    }


def _gpu_time(
    ctx: _Ctx, tr: dict[str, Any], gpu: Gpu, count: int, model: dict[str, float], kernel_profile: ProfileResolver | None
) -> dict[str, Any]:
    """training: GPU time, exactly one way (gpu_hours, flops + mfu, kernel_profile or duration; else energy / power
    below). gpu_hours is None when only energy and a power give it."""
    dtype = ctx.text("training.dtype", tr.get("dtype", "bf16")).lower()
    if dtype not in DTYPES:
        raise ctx.err("training.dtype", f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    ways = [w for w in ("gpu_hours", "flops", "duration", "kernel_profile") if w in tr]
    if "mfu" in tr and "flops" not in tr:
        ways.append("mfu")
    if len(ways) > 1:
        raise ctx.err(
            "training",
            f"give exactly one way to get GPU time, got {', '.join(ways)} "
            "(gpu_hours, or flops + mfu, or duration; or energy + a power)",
        )
    out: dict[str, Any] = {"dtype": dtype, "flops": None, "mfu": None, "mfu_method": None}
    if "gpu_hours" in tr:
        gpu_hours = ctx.quantity("training.gpu_hours", tr["gpu_hours"], "hour", lo=0, lo_open=True)
        return {**out, "gpu_hours": gpu_hours, "gpu_hours_method": "stated GPU-hours"}
    if "flops" in tr:
        flops = ctx.number("training.flops", tr["flops"], lo=0, lo_open=True)
        if "mfu" not in tr:
            raise ctx.err("training.mfu", "missing: flops needs mfu (model FLOPs utilisation, in (0, 1])")
        mfu = ctx.fraction("training.mfu", tr["mfu"])
        try:
            peak = gpu.peak_flops(dtype)
        except KeyError as exc:
            raise ctx.err("training.dtype", str(exc.args[0])) from None
        ctx.srcs.extend(gpu.sources)
        return {
            **out,
            "flops": flops,
            "mfu": mfu,
            "mfu_method": "stated (training.mfu)",
            "gpu_hours": flops / (peak * mfu) / 3600,
            "gpu_hours_method": f"flops / ({dtype} dense peak {peak / 1e12:g} TFLOP/s x MFU {mfu:g})",
        }
    if "kernel_profile" in tr:
        return {**out, **_kernel_profile(ctx, tr["kernel_profile"], gpu, model, dtype, kernel_profile)}
    if "duration" in tr:
        hours = ctx.quantity("training.duration", tr["duration"], "hour", lo=0, lo_open=True) * count
        return {**out, "gpu_hours": hours, "gpu_hours_method": DURATION_METHOD}
    return {**out, "gpu_hours": None, "gpu_hours_method": ""}  # maybe from energy / power below


def _host_only(ctx: _Ctx, tr: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """training of a run without GPU (hardware.gpu: none): its duration (the host-hours that allocate the server's
    embodied impacts) and its energy, both required; nothing GPU-specific (FLOPs, MFU, power per GPU) applies."""
    gpu_only = [k for k in ("gpu_hours", "flops", "mfu", "kernel_profile", "power_per_gpu", "power_fraction_of_tdp") if k in tr]
    if gpu_only:
        raise ctx.err(f"training.{gpu_only[0]}", "needs a GPU: hardware.gpu is none (host only); give duration and energy")
    for key in ("duration", "energy"):
        if key not in tr:
            raise ctx.err(f"training.{key}", "missing: a run without GPU (host only) needs its duration and its energy")
    dtype = ctx.text("training.dtype", tr.get("dtype", "bf16")).lower()
    host_hours = ctx.quantity("training.duration", tr["duration"], "hour", lo=0, lo_open=True)
    time = {"dtype": dtype, "flops": None, "mfu": None, "mfu_method": None}
    energy = {
        "gpu_hours": 0.0,
        "gpu_hours_method": HOST_ONLY,
        "host_hours": host_hours,
        "it_energy_kwh": ctx.quantity("training.energy", tr["energy"], "kWh", lo=0, lo_open=True),
        "energy_method": "stated energy (training.energy)",
        "power_per_gpu_w": None,
    }
    return time, energy


def _kernel_profile(
    ctx: _Ctx, value: Any, gpu: Gpu, model: dict[str, float], dtype: str, resolve: ProfileResolver | None
) -> dict[str, Any]:
    """training.kernel_profile: FLOPs, MFU and GPU-hours predicted from a kernel efficiency profile (read by the
    kernels package, whose resolver the caller passes: the core never imports it)."""
    prof = Path(ctx.text("training.kernel_profile", value))
    if not prof.is_absolute() and ctx.file:
        prof = Path(ctx.file).resolve().parent / prof
    if not model.get("parameters") or not model.get("tokens"):
        raise ctx.err(
            "model",
            "training.kernel_profile needs model.parameters and model.tokens (and the shape: "
            "layers, hidden, seq_len) to compose the op mix",
        )
    if resolve is None:
        raise ctx.err(
            "training.kernel_profile",
            "kernel profiles are read by footprint.kernels: load this scenario with footprint.load_scenario, "
            "footprint.assess or `footprint assess`",
        )
    pred = resolve(prof, model, gpu, dtype)
    ctx.notes.extend(pred.notes)
    return {
        "flops": pred.flops,
        "mfu": pred.mfu,
        "mfu_method": pred.method,
        "gpu_hours": pred.gpu_hours,
        "gpu_hours_method": f"model FLOPs / (dense peak x MFU {pred.mfu:.1%} predicted from the kernel profile {prof.name})",
    }


def _energy(ctx: _Ctx, tr: dict[str, Any], gpu: Gpu, gpu_hours: float | None, gh_method: str) -> dict[str, Any]:
    """training: the power per GPU and the IT energy (stated, or GPU time x power), and GPU time from energy / power
    where nothing else gave it."""
    powers = [k for k in ("power_per_gpu", "power_fraction_of_tdp") if k in tr]
    if len(powers) > 1:
        raise ctx.err("training", "give one of power_per_gpu or power_fraction_of_tdp, not both")
    power_w: float | None = None
    if "power_per_gpu" in tr:
        power_w = ctx.quantity("training.power_per_gpu", tr["power_per_gpu"], "W", lo=0, lo_open=True)
    elif "power_fraction_of_tdp" in tr:
        frac = ctx.number("training.power_fraction_of_tdp", tr["power_fraction_of_tdp"], lo=0, hi=1.5, lo_open=True)
        power_w = frac * gpu.tdp_w
        ctx.notes.append(f"power per GPU = {frac:g} x TDP {gpu.tdp_w:g} W (modelled)")
        ctx.srcs.extend(gpu.sources)
    if "energy" in tr and powers and gpu_hours is not None:
        raise ctx.err(
            "training",
            f"give energy or {powers[0]}, not both: the energy is used as stated, and a power is only needed with it "
            "when GPU time is missing (energy / power)",
        )
    if "energy" in tr:
        it_kwh = ctx.quantity("training.energy", tr["energy"], "kWh", lo=0, lo_open=True)
        e_method = "stated energy (training.energy)"
        if gpu_hours is None:
            if power_w is None:
                raise ctx.err(
                    "training",
                    "energy alone does not give GPU time: add gpu_hours, duration, "
                    "or a power (power_per_gpu / power_fraction_of_tdp)",
                )
            gpu_hours, gh_method = it_kwh * 1000 / power_w, "energy / power per GPU"
    else:
        if power_w is None:
            raise ctx.err(
                "training",
                "missing a power: give power_per_gpu (e.g. 400 W), power_fraction_of_tdp (e.g. 0.8) or energy (e.g. 433196 kWh)",
            )
        if gpu_hours is None:
            raise ctx.err("training", "missing GPU time: give gpu_hours, flops + mfu, or duration")
        it_kwh, e_method = gpu_hours * power_w / 1000, "estimated (GPU-hours x power per GPU)"
    return {
        "gpu_hours": gpu_hours,
        "gpu_hours_method": gh_method,
        "it_energy_kwh": it_kwh,
        "energy_method": e_method,
        "power_per_gpu_w": power_w,
    }


def _site(ctx: _Ctx, site: dict[str, Any]) -> dict[str, Any]:
    """site: a preset and what the scenario states over it (PUE, WUE, EWIF, the grid or a carbon intensity, a
    practitioner's factor file): Workload fields."""
    from footprint.lca.electricity import WORLD, intensity_override, resolve_zone, zone_ewif

    presets = db().sites.get("sites", {})
    preset_name = ctx.text("site.preset", site.get("preset") or db().sites.get("default"), list(presets))
    preset = presets[preset_name]

    def site_value(key: str, unit: str | None) -> float | None:
        if key in site:
            if unit is None:
                return ctx.number(f"site.{key}", site[key], lo=1.0)
            return ctx.quantity(f"site.{key}", site[key], unit, lo=0)
        if key in preset:
            ctx.srcs.append(preset[key]["source"])
            val = preset[key]["value"]
            return float(val) if unit is None else float(Q(val, unit).magnitude)
        return None

    pue = site_value("pue", None)
    if pue is None:
        raise ctx.err("site.pue", f"missing and the preset {preset_name!r} has none")
    wue = site_value("wue", "L/kWh")
    ewif = site_value("ewif", "L/kWh")
    grid = resolve_zone(site.get("grid", WORLD), ctx.file)
    ci = intensity_override(site["carbon_intensity"], ctx.file) if "carbon_intensity" in site else None
    if ci is not None:
        bounds.check("site.carbon_intensity", ci, ctx.file)
    hourly = _hourly_intensity(ctx, site)
    ewif_stated, ewif_method = ewif is not None, "stated (site.ewif)" if "ewif" in site else f"site preset {preset_name}"
    if ewif is None:
        q = zone_ewif(grid)
        if q is not None:
            ewif, ewif_method = q.value, q.method
            ctx.srcs.extend(q.sources)
    return {
        "pue": pue,
        "grid": grid,
        "wue_l_per_kwh": wue,
        "ewif_l_per_kwh": ewif,
        "carbon_intensity": ci,
        "ewif_stated": ewif_stated,
        "ewif_method": ewif_method if ewif is not None else "",
        "pue_method": _pue_method(site, preset_name),
        "electricity_factors": _factor_set(ctx, site, ci, grid),
        "hourly_intensity": hourly,
        "site_preset": preset_name,
        "long_term_emissions": ctx.text("site.long_term_emissions", site.get("long_term_emissions", "exclude"), LONG_TERM),
    }


def _hourly_intensity(ctx: _Ctx, site: dict[str, Any]) -> Any:
    """site.carbon_intensity_hourly read and validated now (a bad file fails before anything is computed)."""
    if "carbon_intensity_hourly" not in site:
        return None
    from footprint.lca import hourly

    other = next((k for k in ("carbon_intensity", "electricity_factors") if k in site), None)
    if other:
        raise ctx.err(hourly.KEY, f"give either carbon_intensity_hourly or {other} (both set the climate factor), not both")
    return hourly.read_intensity(hourly.resolve_path(site["carbon_intensity_hourly"], ctx.file), ctx.file)


def model_flops(model: dict[str, float]) -> TransformerFlops | None:
    """The training FLOPs of a scenario's model section (6ND, with attention when it gives the shape); None without
    model.parameters and model.tokens. The one derivation the assessment and the disclosures share."""
    from footprint.flops import transformer_flops

    if not model.get("parameters") or not model.get("tokens"):
        return None
    shape = {k: int(model[k]) for k in ("layers", "hidden", "seq_len") if k in model}
    return transformer_flops(
        model["parameters"],
        model["tokens"],
        active_params=model.get("active_parameters"),
        **(shape if len(shape) == 3 else {}),
    )


def _derived_mfu(ctx: _Ctx, f: TransformerFlops, gpu: Gpu, dtype: str, gpu_hours: float) -> dict[str, Any]:
    """FLOPs and MFU derived from the model's shape when the scenario states neither (none when beyond physics)."""
    try:
        derived = f.flops / (gpu_hours * 3600 * gpu.peak_flops(dtype)) if math.isfinite(f.flops) else None
    except KeyError:
        derived = None
    if not math.isfinite(f.flops):
        ctx.notes.append("model.parameters x model.tokens is beyond floating point: FLOPs and MFU not derived (check them)")
    if derived is not None and 0 < derived <= 1:
        return {"flops": f.flops, "mfu": derived, "mfu_method": f"derived: {f.formula} over GPU-hours x dense {dtype} peak"}
    if derived is not None:
        ctx.notes.append(
            f"MFU derived from the model shape would be {derived:.0%} (> 100 %): check parameters, tokens, GPU-hours and dtype"
        )
    return {}


def site_pue(site: dict[str, Any] | str | None) -> str:
    """'PUE 1.2' or 'PUE 1.58 (default: ...)': the PUE a run's site will be assessed with, said where it is recorded."""
    site = {"grid": site} if isinstance(site, str) else dict(site or {})
    sites = db().sites
    preset = str(site.get("preset") or sites.get("default"))
    if "pue" in site:
        return f"PUE {site['pue']}"
    pue = ((sites.get("sites", {}).get(preset) or {}).get("pue") or {}).get("value")
    return f"PUE {pue} ({_pue_method(site, preset)})"


def _pue_method(site: dict[str, Any], preset: str) -> str:
    """Where the PUE came from, so a default (the industry average) is never invisible."""
    if "pue" in site:
        return "stated"
    return f"preset {preset}" if "preset" in site else f"default: the {preset} preset, no PUE given"


def _check_derived(ctx: _Ctx, energy: dict[str, Any], hardware: dict[str, Any]) -> None:
    """Inputs that are each plausible can still give an impossible result: past floating point (1e300 GPU-hours at
    1e300 W), or more GPU time than the job's GPUs have in the longest service life of the plausibility table
    (1e33 FLOP at MFU 0.01, MFU 1e-9, 5 GWh at 400 W: thousands of GPU-years per GPU)."""
    # a run without GPU (hardware.gpu: none) is its host: its hours are the host's, one machine's worth of life
    gpu_hours, it_kwh = energy.get("host_hours") or energy["gpu_hours"], energy["it_energy_kwh"]
    busy_h = hardware["lifetime_h"] * hardware["utilization"]
    for key, v in (("training", gpu_hours), ("training.energy", it_kwh), ("hardware", gpu_hours / busy_h)):
        if not math.isfinite(v) or v <= 0:
            raise ctx.err(
                key, "the stated numbers give a GPU time, energy or lifetime share beyond floating point: check their units"
            )
    most = max(hardware["count"], 1) * bounds.BOUNDS["hardware.lifetime"].hi
    if gpu_hours > most:
        raise ctx.err(
            "training",
            f"{energy['gpu_hours_method'] or 'the GPU time'} gives {gpu_hours:.4g} GPU-hours, more than "
            f"{hardware['count']:,} GPU(s) x 20 years ({most:.4g} GPU-hours, the longest service life of the plausibility "
            "table): check the units and the MFU, utilisation or power it was derived from",
        )


#: An embodied override this many times the card's own catalogue value (or more) is refused: a unit slip of 10^3
#: (t for kg, m3 for L), the plausibility table's rule (footprint/bounds.py).
EMBODIED_OVERRIDE_MAX_RATIO = 1000.0


def _check_embodied(ctx: _Ctx, gpu: Gpu, variant: str | None, override: dict[str, float]) -> None:
    """hardware.embodied per GPU against the card's catalogue value: 1e12 kg CO2 eq or 1e30 m3 of water per GPU is a
    slip, not a card (a category the catalogue has no value for is kept as stated)."""
    if not override:
        return
    from footprint.lca import categories as cat
    from footprint.lca.database import INDICATORS

    total = db().embodied(gpu.id, variant).total()
    for c, v in override.items():
        ref = float(total[INDICATORS.index(c)])
        if ref > 0 and v > EMBODIED_OVERRIDE_MAX_RATIO * ref:
            unit = display_unit(cat.by_key(c).unit)
            raise ctx.err(
                f"hardware.embodied.{c}",
                f"{v:.4g} {unit} per GPU is more than {EMBODIED_OVERRIDE_MAX_RATIO:g} x the catalogue's {ref:.4g} {unit} "
                f"for a {gpu.name}: check the unit (per GPU, not per fleet)",
            )


def _factor_set(ctx: _Ctx, site: dict[str, Any], ci: float | None, grid: str) -> FactorSet | None:
    """site.electricity_factors: a practitioner's per-kWh factor file, relative to the scenario file, or
    ``ademe``: ADEME's national mix of the site's grid as an installed boaviztapi carries it."""
    if "electricity_factors" not in site:
        return None
    if ci is not None:
        raise ctx.err(
            "site.electricity_factors",
            "give either carbon_intensity or electricity_factors (the file's climate change row), not both",
        )
    from footprint.lca.factorfile import load

    raw = site["electricity_factors"]
    if not isinstance(raw, str) or not raw.strip():
        raise ctx.err("site.electricity_factors", f"expected the path of a CSV file or 'ademe', got {raw!r}")
    if raw.strip().lower() == "ademe":
        from footprint.lca.ademe_mix import load as ademe

        return ademe(grid, ctx.file)
    path = Path(raw)
    if not path.is_absolute() and ctx.file and not path.is_file():
        path = Path(ctx.file).resolve().parent / path
    return load(path, ctx.file)


def _embodied_override(ctx: _Ctx, value: Any, srcs: list[str]) -> dict[str, float]:
    """hardware.embodied: {category: quantity per GPU} or {vendor_pcf: name}."""
    from footprint.lca import categories as cat

    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ctx.err(
            "hardware.embodied",
            "expected a mapping of category: quantity per GPU, "
            "e.g. {climate_change: 164 kg CO2 eq} or {vendor_pcf: nvidia-hgx-h100}",
        )
    out: dict[str, float] = {}
    pcfs = db().ranges.get("vendor_pcf", {})
    for k, v in value.items():
        if k == "vendor_pcf":
            v = ctx.text("hardware.embodied.vendor_pcf", v, list(pcfs))
            for c, q in pcfs[v]["per_gpu"].items():
                out[c] = float(Q(q, cat.by_key(c).unit).magnitude)
            srcs.append(pcfs[v]["source"])
            continue
        if k not in cat.keys():
            raise ctx.err(f"hardware.embodied.{k}", f"unknown category; allowed: vendor_pcf, {', '.join(cat.keys())}")
        out[k] = ctx.quantity(f"hardware.embodied.{k}", v, cat.by_key(k).unit, lo=0)
    return out


def _ranges(ctx: _Ctx, unc: dict[str, Any]) -> dict[str, tuple[float, float]]:
    units = {
        "gpu_hours": None,
        "mfu": None,
        "power_per_gpu": "W",
        "lifetime": "hour",
        "utilization": None,
        "pue": None,
        "carbon_intensity": "kgCO2eq/kWh",
    }
    # each bound's domain: (lowest, open?, highest), as for the scenario key it varies
    domains = {"gpu_hours": (0, True, None), "mfu": (0, True, 1), "utilization": (0, True, 1), "pue": (1, False, None)}
    out: dict[str, tuple[float, float]] = {}
    for k, v in unc.items():
        key = f"uncertainty.{k}"
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ctx.err(key, "expected [low, high]")
        if units[k] is None:
            low, open_, high = domains[k]
            lo, hi = (ctx.number(key, x, lo=low, hi=high, lo_open=open_) for x in v)
        elif k == "carbon_intensity":
            from footprint.lca.electricity import intensity_override

            lo, hi = (intensity_override(x, ctx.file, key) for x in v)
        else:
            lo, hi = (ctx.quantity(key, x, units[k], "year" if k == "lifetime" else None, lo=0, lo_open=True) for x in v)
        if lo > hi:
            raise ctx.err(key, f"low {v[0]!r} is above high {v[1]!r}")
        out[k] = (lo, hi)
    return out


# ---- measured runs ------------------------------------------------------------------------------


def run_scenario(record: dict[str, Any]) -> dict[str, Any]:
    """The scenario a run record amounts to: its GPUs, measured energy and duration, and its site."""
    gpus = [d for d in record.get("devices", []) if d.get("component", "gpu") == "gpu"]
    data: dict[str, Any] = {"name": record.get("name") or "run", "hardware": {}, "training": {}, "site": {}}
    groups = gpu_groups(gpus)
    if groups:  # the largest group's model; a tie goes to the first name in sorted order (never to hash order)
        data["hardware"] = {"gpu": groups[0][0], "count": sum(cards(name, n)[0] for name, n in groups)}
    duration = float(record.get("duration_s") or 0.0)
    if duration > 0:
        data["training"]["duration"] = f"{duration} s"
    total = (record.get("energy") or {}).get("total_j")
    if total:
        data["training"]["energy"] = f"{total} J"
    site = record.get("site")
    if isinstance(site, str):
        site = {"grid": site}
    data["site"] = {k: v for k, v in (site or {}).items() if k in ALLOWED["site"]}
    return data


def cards(name: str, devices: int) -> tuple[int, str | None]:
    """The catalogue cards ``devices`` GPUs of model ``name`` amount to, and a note where they differ: an MI250X is
    two GPUs to software (one per GCD) but one card in the catalogue, whose embodied impacts, peaks and power are
    the module's. An odd number of GCDs rounds up (the half-used module counted whole: an upper bound)."""
    try:
        gpu = db().find_gpu(name)
    except FootprintError:
        return devices, None
    per = gpu.devices_per_card
    if per <= 1:
        return devices, None
    n = -(-devices // per)
    note = (
        f"{devices} x {name} are {devices / per:g} x {gpu.name} ({per} GPUs per module, one per GCD, in amdsmi and "
        "Slurm; the catalogue card is the module): embodied impacts, GPU-hours and peaks counted per module"
    )
    if devices % per:
        note += f"; the odd GCD's module counted whole ({n} modules): an upper bound on embodied impacts"
    return n, note


def gpu_groups(gpus: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(model name, devices) per GPU model of a run, largest group first, ties in name order: deterministic whatever
    the hash seed. A device whose name is not a usable string (missing, empty, a number such as NaN, which a cleaned
    record holds as "nan") is left out of the groups."""
    counts: dict[str, int] = {}
    for d in gpus:
        name = d.get("name")
        if isinstance(name, str) and name.strip() and len(name) <= 200 and not _is_number(name):
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
