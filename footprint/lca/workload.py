"""Workload: what a training run used, whether stated in a scenario YAML or measured.

A measured run and a hypothetical scenario become the same thing before the LCA is computed.
Scenario files are read through the input contract (``footprint.inputs``: UTF-8 text, ``yaml.safe_load``
within size, nesting and alias-expansion limits) and validated key by key: every number finite and in
its domain, every error naming the file, the key and what was expected.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from footprint import bounds
from footprint.errors import FootprintError, ScenarioError
from footprint.escaping import shown
from footprint.inputs import MAX_GPUS, finite_number, load_yaml, read_text
from footprint.lca.database import DTYPES, Gpu, db
from footprint.lca.units import Q, UnitParseError, display_unit
from lca_data.loader import YamlLimitError, safe_load

if TYPE_CHECKING:  # pragma: no cover
    from footprint.lca.factorfile import FactorSet

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
    "site": ("preset", "grid", "pue", "wue", "ewif", "carbon_intensity", "electricity_factors"),
    "uncertainty": ("gpu_hours", "mfu", "power_per_gpu", "lifetime", "utilization", "pue", "carbon_intensity"),
}
DEFAULT_LIFETIME = "3 years"  # Boavizta / EcoLogits GPU default; see README "Method"
DEFAULT_UTILIZATION = 1.0
MAX_SCENARIO_BYTES = 1_000_000


@dataclass(frozen=True)
class Workload:
    """Everything the LCA needs, in canonical units (hours, kWh, W, L/kWh, kg CO2 eq/kWh)."""

    name: str
    gpu: Gpu
    count: int
    lifetime_h: float
    utilization: float
    gpu_hours: float
    gpu_hours_method: str
    it_energy_kwh: float
    energy_method: str
    power_per_gpu_w: float | None
    pue: float
    grid: str
    wue_l_per_kwh: float | None = None
    ewif_l_per_kwh: float | None = None
    carbon_intensity: float | None = None  # kg CO2 eq / kWh override
    ewif_stated: bool = False  # True when site.ewif (or a preset) gave the EWIF, False for the zone's
    ewif_method: str = ""
    electricity_factors: FactorSet | None = None  # site.electricity_factors: a practitioner's per-kWh set
    embodied_variant: str | None = None  # hardware.embodied_data: corrected (default) or published
    host: str | None = "default"
    embodied_override: dict[str, float] = field(default_factory=dict)
    flops: float | None = None
    mfu: float | None = None
    mfu_method: str | None = None
    dtype: str = "bf16"
    model: dict[str, float] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    site_preset: str | None = None
    source: str | None = None
    description: str = ""
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    training: dict[str, Any] = field(default_factory=dict)  # a measured run's story (footprint.tracking.story)

    @property
    def lifetime_years(self) -> float:
        """Hardware lifetime in the registry's years (365.25 days), the unit of "N years" in scenarios."""
        return float(Q(self.lifetime_h, "hour").to("year").magnitude)

    @property
    def gpu_lifetimes(self) -> float:
        """Lifetimes of hardware the run consumes: GPU-hours / (lifetime x utilisation)."""
        return self.gpu_hours / (self.lifetime_h * self.utilization)

    @property
    def gpu_equivalents(self) -> int:
        """ceil of gpu_lifetimes (Falk et al.'s GPU-equivalents); float noise below 1e-9 ignored."""
        return math.ceil(self.gpu_lifetimes - 1e-9)

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes)


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


def apply_overrides(data: dict[str, Any], sets: list[str], file: str | None = None) -> dict[str, Any]:
    """Apply ``--set key.path=value`` overrides (values parsed as YAML scalars)."""
    out = _deepcopy(data)
    for item in sets or []:
        if "=" not in item:
            raise FootprintError(f"--set {item!r}: expected key=value, e.g. training.mfu=0.5", file, "--set")
        path, raw = item.split("=", 1)
        keys = [k for k in path.strip().split(".") if k]
        if not keys:
            raise FootprintError(f"--set {item!r}: empty key", file, "--set")
        try:
            value = safe_load(raw) if raw.strip() else None
        except YamlLimitError as exc:
            raise FootprintError(f"--set {path.strip()}=...: YAML refused: {exc.problem}", file, "--set") from None
        except yaml.YAMLError:
            value = raw
        node = out
        for k in keys[:-1]:
            if not isinstance(node.get(k, {}), dict):
                raise FootprintError(f"--set {item!r}: {k!r} is not a section", file, "--set")
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return out


def _deepcopy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deepcopy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deepcopy(v) for v in d]
    return d


def load_scenario(path: str | Path, sets: list[str] | None = None) -> Workload:
    """Read, validate and resolve a scenario YAML into a Workload."""
    data = read_yaml(path)
    if sets:
        data = apply_overrides(data, sets, str(path))
    return workload_from_dict(data, str(path))


# ---- validation helpers -------------------------------------------------------------------------


class _Ctx:
    def __init__(self, file: str | None) -> None:
        self.file = file

    def err(self, key: str, msg: str) -> ScenarioError:
        return ScenarioError(msg, self.file, key)

    def section(self, data: dict[str, Any], name: str) -> dict[str, Any]:
        sec = data.get(name) or {}
        if not isinstance(sec, dict):
            raise self.err(name, "expected a mapping")
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


def workload_from_dict(data: dict[str, Any], file: str | None = None) -> Workload:
    """Validate a scenario mapping (see ARCHITECTURE.md) and resolve it into a Workload."""
    ctx = _Ctx(file)
    if not isinstance(data, dict):
        raise ctx.err("", "expected a mapping of sections (name, hardware, training, site)")
    for k in data:
        if k not in ALLOWED[""]:
            raise ctx.err(str(k), f"unknown section; allowed: {', '.join(ALLOWED[''])}")
    for k in ("name", "description"):
        if data.get(k) is not None:
            ctx.text(k, data[k], max_chars=10_000)
    hw, tr, site = ctx.section(data, "hardware"), ctx.section(data, "training"), ctx.section(data, "site")
    site = {k: v for k, v in site.items() if v is not None}  # `--set site.key=null` unsets a key
    model_in, unc = ctx.section(data, "model"), ctx.section(data, "uncertainty")
    notes: list[str] = []
    srcs: list[str] = []
    kernel_prediction = None

    if "gpu" not in hw:
        raise ctx.err("hardware.gpu", "missing; give a GPU name such as A100-SXM4-40GB (see `footprint gpus`)")
    gpu = db().find_gpu(ctx.text("hardware.gpu", hw["gpu"]), file, "hardware.gpu")
    count = int(ctx.number("hardware.count", hw.get("count", 1), lo=0, hi=MAX_GPUS, lo_open=True, integer=True))
    lifetime_h = ctx.quantity("hardware.lifetime", hw.get("lifetime", DEFAULT_LIFETIME), "hour", "year", lo=0, lo_open=True)
    utilization = ctx.fraction("hardware.utilization", hw.get("utilization", DEFAULT_UTILIZATION))
    host = hw.get("host", "default")
    if host in (None, False, "none", "None"):
        host = None
    elif host != "default":
        host = ctx.text("hardware.host", host, ["default", "none", *db().host["hosts"]])
    embodied = _embodied_override(ctx, hw.get("embodied"), srcs)
    variant = hw.get("embodied_data")
    if variant is not None:
        variant = ctx.text("hardware.embodied_data", variant, list(db().corrections["variants"]))

    model = {k: ctx.number(f"model.{k}", v, lo=0, lo_open=True) for k, v in model_in.items()}

    # ---- GPU time: exactly one way ----
    dtype = ctx.text("training.dtype", tr.get("dtype", "bf16")).lower()
    if dtype not in DTYPES:
        raise ctx.err("training.dtype", f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    ways = [w for w in ("gpu_hours", "flops", "duration", "kernel_profile") if w in tr]
    if "mfu" in tr and "flops" not in tr:
        ways.append("mfu")
    flops = mfu = None
    if len(ways) > 1:
        raise ctx.err(
            "training",
            f"give exactly one way to get GPU time, got {', '.join(ways)} "
            "(gpu_hours, or flops + mfu, or duration; or energy + a power)",
        )
    if "gpu_hours" in tr:
        gpu_hours = ctx.quantity("training.gpu_hours", tr["gpu_hours"], "hour", lo=0, lo_open=True)
        gh_method = "stated GPU-hours"
    elif "flops" in tr:
        flops = ctx.number("training.flops", tr["flops"], lo=0, lo_open=True)
        if "mfu" not in tr:
            raise ctx.err("training.mfu", "missing: flops needs mfu (model FLOPs utilisation, in (0, 1])")
        mfu = ctx.fraction("training.mfu", tr["mfu"])
        try:
            peak = gpu.peak_flops(dtype)
        except KeyError as exc:
            raise ctx.err("training.dtype", str(exc.args[0])) from None
        gpu_hours = flops / (peak * mfu) / 3600
        gh_method = f"flops / ({dtype} dense peak {peak / 1e12:g} TFLOP/s x MFU {mfu:g})"
        srcs.extend(gpu.sources)
    elif "kernel_profile" in tr:
        from footprint.kernels.profile import predict_for_scenario

        prof = Path(ctx.text("training.kernel_profile", tr["kernel_profile"]))
        if not prof.is_absolute() and file:
            prof = Path(file).resolve().parent / prof
        if not model.get("parameters") or not model.get("tokens"):
            raise ctx.err(
                "model",
                "training.kernel_profile needs model.parameters and model.tokens (and the shape: "
                "layers, hidden, seq_len) to compose the op mix",
            )
        pred = predict_for_scenario(prof, model, gpu, dtype)
        flops, mfu, gpu_hours = pred.flops, pred.mfu, pred.gpu_hours
        gh_method = f"model FLOPs / (dense peak x MFU {mfu:.1%} predicted from the kernel profile {prof.name})"
        notes.extend(pred.notes)
        kernel_prediction = pred
    elif "duration" in tr:
        gpu_hours = ctx.quantity("training.duration", tr["duration"], "hour", lo=0, lo_open=True) * count
        gh_method = "duration x GPU count"
    else:
        gpu_hours = None  # maybe from energy / power below
        gh_method = ""

    # ---- power and energy ----
    powers = [k for k in ("power_per_gpu", "power_fraction_of_tdp") if k in tr]
    if len(powers) > 1:
        raise ctx.err("training", "give one of power_per_gpu or power_fraction_of_tdp, not both")
    power_w: float | None = None
    if "power_per_gpu" in tr:
        power_w = ctx.quantity("training.power_per_gpu", tr["power_per_gpu"], "W", lo=0, lo_open=True)
    elif "power_fraction_of_tdp" in tr:
        frac = ctx.number("training.power_fraction_of_tdp", tr["power_fraction_of_tdp"], lo=0, hi=1.5, lo_open=True)
        power_w = frac * gpu.tdp_w
        notes.append(f"power per GPU = {frac:g} x TDP {gpu.tdp_w:g} W (modelled)")
        srcs.extend(gpu.sources)
    if "energy" in tr and powers and gpu_hours is not None:
        raise ctx.err(
            "training",
            f"give energy or {powers[0]}, not both: the energy is used as stated, and a power is only needed with it "
            "when GPU time is missing (energy / power)",
        )
    if "energy" in tr:
        it_kwh = ctx.quantity("training.energy", tr["energy"], "kWh", lo=0, lo_open=True)
        e_method = "stated/measured energy"
        if gpu_hours is None:
            if power_w is None:
                raise ctx.err(
                    "training",
                    "energy alone does not give GPU time: add gpu_hours, duration, "
                    "or a power (power_per_gpu / power_fraction_of_tdp)",
                )
            gpu_hours = it_kwh * 1000 / power_w
            gh_method = "energy / power per GPU"
    else:
        if power_w is None:
            raise ctx.err(
                "training",
                "missing a power: give power_per_gpu (e.g. 400 W), power_fraction_of_tdp (e.g. 0.8) or energy (e.g. 433196 kWh)",
            )
        if gpu_hours is None:
            raise ctx.err("training", "missing GPU time: give gpu_hours, flops + mfu, or duration")
        it_kwh = gpu_hours * power_w / 1000
        e_method = "GPU-hours x power per GPU"
    assert gpu_hours is not None

    # ---- site ----
    presets = db().sites.get("sites", {})
    preset_name = ctx.text("site.preset", site.get("preset") or db().sites.get("default"), list(presets))
    preset = presets[preset_name]

    def site_value(key: str, unit: str | None) -> float | None:
        if key in site:
            if unit is None:
                return ctx.number(f"site.{key}", site[key], lo=1.0)
            return ctx.quantity(f"site.{key}", site[key], unit, lo=0)
        if key in preset:
            srcs.append(preset[key]["source"])
            val = preset[key]["value"]
            return float(val) if unit is None else float(Q(val, unit).magnitude)
        return None

    pue = site_value("pue", None)
    if pue is None:
        raise ctx.err("site.pue", f"missing and the preset {preset_name!r} has none")
    wue = site_value("wue", "L/kWh")
    ewif = site_value("ewif", "L/kWh")
    from footprint.lca.electricity import WORLD, intensity_override, resolve_zone, zone_ewif

    grid = resolve_zone(site.get("grid", WORLD), file)
    ci = intensity_override(site["carbon_intensity"], file) if "carbon_intensity" in site else None
    if ci is not None:
        bounds.check("site.carbon_intensity", ci, file)
    ewif_stated, ewif_method = ewif is not None, "stated (site.ewif)" if "ewif" in site else f"site preset {preset_name}"
    if ewif is None:
        q = zone_ewif(grid)
        if q is not None:
            ewif, ewif_method = q.value, q.method
            srcs.extend(q.sources)
    factor_set = _factor_set(ctx, site, ci)

    ranges = _ranges(ctx, unc)
    mfu_method = "stated (training.mfu)" if mfu is not None else None
    if kernel_prediction is not None:
        mfu_method = kernel_prediction.method
    if mfu is None and model.get("parameters") and model.get("tokens"):
        from footprint.flops import transformer_flops

        shape = {k: int(model[k]) for k in ("layers", "hidden", "seq_len") if k in model}
        f = transformer_flops(
            model["parameters"],
            model["tokens"],
            active_params=model.get("active_parameters"),
            **(shape if len(shape) == 3 else {}),
        )
        try:
            derived = f.flops / (gpu_hours * 3600 * gpu.peak_flops(dtype)) if math.isfinite(f.flops) else None
        except KeyError:
            derived = None
        if not math.isfinite(f.flops):
            notes.append("model.parameters x model.tokens is beyond floating point: FLOPs and MFU not derived (check them)")
        if derived is not None and 0 < derived <= 1:
            flops, mfu, mfu_method = f.flops, derived, f"derived: {f.formula} over GPU-hours x dense {dtype} peak"
        elif derived is not None:
            notes.append(
                f"MFU derived from the model shape would be {derived:.0%} (> 100 %): check parameters, "
                "tokens, GPU-hours and dtype"
            )
    name = shown(str(data.get("name") or (Path(file).stem if file else "scenario")))  # no terminal escape rides along
    _check_derived(ctx, gpu_hours, it_kwh, lifetime_h * utilization)
    return Workload(
        name=name,
        gpu=gpu,
        count=count,
        lifetime_h=lifetime_h,
        utilization=utilization,
        gpu_hours=gpu_hours,
        gpu_hours_method=gh_method,
        it_energy_kwh=it_kwh,
        energy_method=e_method,
        power_per_gpu_w=power_w,
        pue=pue,
        grid=grid,
        wue_l_per_kwh=wue,
        ewif_l_per_kwh=ewif,
        carbon_intensity=ci,
        ewif_stated=ewif_stated,
        ewif_method=ewif_method if ewif is not None else "",
        electricity_factors=factor_set,
        embodied_variant=variant,
        host=host,
        embodied_override=embodied,
        flops=flops,
        mfu=mfu,
        mfu_method=mfu_method,
        dtype=dtype,
        model=model,
        ranges=ranges,
        site_preset=preset_name,
        source=file,
        description=str(data.get("description") or ""),
        notes=tuple(notes),
        sources=tuple(dict.fromkeys(srcs)),
    )


def _check_derived(ctx: _Ctx, gpu_hours: float, it_kwh: float, busy_h: float) -> None:
    """Inputs that are each finite can still multiply past floating point (1e300 GPU-hours at 1e300 W)."""
    for key, v in (("training", gpu_hours), ("training.energy", it_kwh), ("hardware", gpu_hours / busy_h)):
        if not math.isfinite(v) or v <= 0:
            raise ctx.err(
                key, "the stated numbers give a GPU time, energy or lifetime share beyond floating point: check their units"
            )


def _factor_set(ctx: _Ctx, site: dict[str, Any], ci: float | None) -> FactorSet | None:
    """site.electricity_factors: a practitioner's per-kWh factor file, relative to the scenario file."""
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
        raise ctx.err("site.electricity_factors", f"expected the path of a CSV file, got {raw!r}")
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
        data["hardware"] = {"gpu": groups[0][0], "count": len(gpus)}
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


def gpu_groups(gpus: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(model name, devices) per GPU model of a run, largest group first, ties in name order: deterministic whatever
    the hash seed. A device whose name is not a usable string (missing, NaN, empty) is left out of the groups."""
    counts: dict[str, int] = {}
    for d in gpus:
        name = d.get("name")
        if isinstance(name, str) and name.strip() and len(name) <= 200:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def workload_from_run(target: str | Path | dict[str, Any], sets: list[str] | None = None) -> Workload:
    """A Workload from a run directory (or its run.json record); ``sets`` re-project it (grid, GPU, lifetime)."""
    from footprint.tracking.runrecord import clean_record, read_record

    if isinstance(target, dict):
        file = str(target.get("run_dir") or "run.json")
        record = clean_record(target, file)
    else:
        path = Path(target)
        path = path / "run.json" if path.is_dir() else path
        record, file = read_record(path), str(path)
    data = apply_overrides(run_scenario(record), sets or [], file)
    gpus = [d for d in record.get("devices", []) if d.get("component", "gpu") == "gpu"]
    if not data["hardware"].get("gpu"):
        raise ScenarioError(
            "the run has no GPU device record; give one with --set hardware.gpu=NAME --set hardware.count=N", file, "devices"
        )
    if not data["training"].get("energy"):
        raise ScenarioError("the run has no energy reading (energy.total_j); nothing measured to assess", file, "energy")
    w = workload_from_dict(data, file)
    methods = sorted({str(d.get("method")) for d in record.get("devices", [])})
    estimated = [d.get("name") for d in record.get("devices", []) if d.get("measured") is False]
    notes = [f"energy measured by the tracker ({', '.join(methods)})"]
    if estimated:
        notes.append("estimated, not measured: " + ", ".join(str(e) for e in estimated))
    groups = gpu_groups(gpus)
    if len(groups) > 1:
        energy = {name: sum(float(d.get("energy_j") or 0) for d in gpus if d.get("name") == name) for name, _ in groups}
        parts = ", ".join(f"{n} x {name} ({energy[name] / 3.6e6:.4g} kWh measured)" for name, n in groups)
        notes.append(
            f"mixed GPU models: {parts}. The energy is every device's, as measured; embodied impacts count all "
            f"{len(gpus)} GPUs as {groups[0][0]} (the largest group). Assess another group's embodied share with "
            f"--set hardware.gpu=NAME --set hardware.count=N"
        )
    unnamed = len(gpus) - sum(n for _, n in groups)
    if unnamed and groups:
        notes.append(f"{unnamed} GPU device(s) without a usable model name counted as {groups[0][0]}")
    notes += [str(n) for n in record.get("notes", [])]
    from footprint.tracking.story import training_story

    story = training_story(record) or {}
    if story.get("short_windows"):
        notes.append(story["short_windows"])  # one warning, however many short windows
    if 0 < float(record.get("duration_s") or 0) < 10:
        notes.append(
            f"short measurement: {float(record['duration_s']):.1f} s; NVML energy over short windows is "
            "coarse (the sensor averages ~25 ms of every 100 ms on A100/H100)"
        )
    from footprint.lca.assessment import pct_sig

    mfu = record.get("mfu") or {}
    extra: dict[str, Any] = {}
    if mfu.get("run_mfu"):
        extra = {
            "mfu": mfu["run_mfu"],
            "mfu_method": f"measured run MFU ({mfu.get('method')}); steady state {pct_sig(mfu.get('steady_state_mfu'))}; "
            f"dtype {mfu.get('dtype', w.dtype)}: {mfu.get('dtype_source') or 'given'}",
            "flops": record.get("flops"),
            "dtype": mfu.get("dtype", w.dtype),
        }
    return w.with_(
        energy_method="measured energy (run record)",
        gpu_hours_method="measured duration x GPUs",
        notes=tuple(notes) + w.notes,
        training=story,
        **extra,
    )
