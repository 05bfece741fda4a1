"""The LCA database as typed objects: GPUs, embodied impacts, host share, sites, materials, sources.

Built once per process from lca_data/ (validated there, units checked here with the project's pint
registry) and cached: the dashboard and the Monte Carlo re-use it for free.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from footprint.errors import UnknownGpuError
from footprint.lca import categories as cat
from footprint.lca.units import Q

if TYPE_CHECKING:  # numpy (and parametric, which needs it) are imported where used: the GPU catalogue alone
    import numpy as np  # (kernels analyze) needs neither


# Columns of every impact vector: the 16 categories then the extras (primary energy).
INDICATORS: tuple[str, ...] = cat.keys() + tuple(c.key for c in cat.extras())
N_IND = len(INDICATORS)
IDX = {k: i for i, k in enumerate(INDICATORS)}
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")

# Parametric inputs: catalogue key -> (canonical name, unit of its magnitude)
_PARAM_UNITS = {
    "total_mass": ("total_mass_kg", "kg"),
    "casing_mass": ("casing_mass_kg", "kg"),
    "heatsink_mass": ("heatsink_mass_kg", "kg"),
    "board_area": ("board_area_cm2", "cm**2"),
    "vram_capacity": ("vram_capacity_gb", "GB"),
    "vram_dies": ("vram_dies", None),
    "vram_die_area": ("vram_die_area_mm2", "mm**2"),
    "gpu_die_area": ("gpu_die_area_mm2", "mm**2"),
}


@dataclass(frozen=True)
class Gpu:
    """One catalogue card: specs for MFU and power, inputs of the embodied model, sources."""

    id: str
    name: str
    vendor: str
    aliases: tuple[str, ...]
    tdp_w: float
    peak_tflops: dict[str, float]
    memory_gb: float | None
    memory_bandwidth_bps: float | None  # datasheet peak DRAM bandwidth, bytes/s
    die_area_mm2: float | None
    process_node: str | None
    architecture: str | None
    form_factor: str | None
    parametric: dict[str, float]
    proxy_of: str | None
    notes: tuple[str, ...]
    sources: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, compare=False, hash=False)
    devices_per_card: int = 1  # GPUs software enumerates per catalogue card: 2 for an MI250X (one per GCD)

    @property
    def mass_kg(self) -> float:
        return self.parametric["total_mass_kg"]

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for ``dtype`` (never the sparse figure)."""
        key = dtype.lower()
        if key not in self.peak_tflops:
            known = ", ".join(sorted(self.peak_tflops)) or "none"
            raise KeyError(f"{self.name} has no dense {dtype} peak in lca_data (known: {known})")
        return self.peak_tflops[key] * 1e12


@dataclass(frozen=True)
class Embodied:
    """One card's embodied impacts by (component, stage): arrays over INDICATORS, per card."""

    gpu_id: str
    method: str
    parts: dict[tuple[str, str], np.ndarray]
    sources: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def total(self) -> np.ndarray:
        import numpy as np

        return np.sum(list(self.parts.values()), axis=0)

    def by_stage(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for (_, stage), v in self.parts.items():
            out[stage] = out.get(stage, 0) + v
        return out

    def by_component(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for (comp, _), v in self.parts.items():
            out[comp] = out.get(comp, 0) + v
        return out


@dataclass(frozen=True)
class HostShare:
    """Per-GPU host share over INDICATORS: central, 95 % interval, pedigree sigma, EF data-quality rating."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sigma: np.ndarray
    dqr: tuple[dict[str, int] | None, ...]
    sources: list[str]
    notes: list[str]
    per_server: float = 1.0  # GPUs the server holds: value x per_server is the whole server's impacts


def _vectors(rows: list[dict[str, str]], key: str) -> dict[str, np.ndarray]:
    """One impact vector per value of ``key`` from one-value-per-row CSV rows."""
    import numpy as np

    out: dict[str, np.ndarray] = {}
    for r in rows:
        out.setdefault(r[key], np.zeros(N_IND))[IDX[r["category"]]] = float(r["value"])
    return out


def _num(entry: Any, unit: str | None) -> float:
    value = entry["value"] if isinstance(entry, dict) else entry
    if unit is None:
        return float(value)
    return float(Q(value, unit).magnitude) if isinstance(value, str) else float(value)


class Database:
    """Typed, cached view of lca_data."""

    def __init__(self) -> None:
        from lca_data import loader

        self._loader = loader

    # ---- sources -------------------------------------------------------------------------------
    @cached_property
    def sources(self) -> dict[str, dict[str, Any]]:
        return self._loader.load_sources()

    def cite(self, ids: Any) -> list[dict[str, Any]]:
        """Source records for ``ids`` (unique, in order)."""
        out, seen = [], set()
        for sid in ids:
            if sid and sid not in seen and sid in self.sources:
                seen.add(sid)
                src = self.sources[sid]
                out.append({k: src.get(k) for k in ("id", "title", "author", "year", "url", "licence", "kind")})
        return out

    # ---- GPUs ----------------------------------------------------------------------------------
    @cached_property
    def gpus(self) -> dict[str, Gpu]:
        """The catalogue, from the on-disk cache while gpus.yaml, the sources and the code that checks them
        are unchanged (footprint.lca.diskcache), else built and checked afresh."""
        from footprint.lca.diskcache import cached

        return cached("gpu-catalogue", self._gpu_inputs(), self._build_gpus)

    def _build_gpus(self) -> dict[str, Gpu]:
        return {g["id"]: self._gpu(g) for g in self._loader.load_gpus(parse=Q)}

    def _gpu_inputs(self) -> list[Path]:
        """Every file the catalogue's value depends on: the data, and the code that reads and checks it."""
        import importlib.util

        import yaml

        from footprint.lca import diskcache, units

        data = self._loader.DATA_DIR
        code = [Path(m.__file__ or "") for m in (self._loader, units, diskcache, yaml)] + [Path(__file__)]
        spec = importlib.util.find_spec("pint")
        if spec is None or spec.origin is None:
            raise OSError("pint is not installed")  # no cache; the build reports it
        pint_dir = Path(spec.origin).parent
        code += [pint_dir / "__init__.py", pint_dir / "default_en.txt"]
        return [data / "gpus.yaml", *sorted((data / "sources").glob("*.yaml")), *code]

    @staticmethod
    def _gpu(g: dict[str, Any]) -> Gpu:
        from lca_data.loader import iter_values

        params: dict[str, float] = {}
        p = g.get("parametric") or {}
        for key, (name, unit) in _PARAM_UNITS.items():
            if key in p:
                params[name] = _num(p[key], unit)
        proxy = p.get("proxy_of")
        if proxy:  # a proxied geometry never inherits a documented single-die VRAM area
            params.pop("vram_die_area_mm2", None)
        peaks = {k.lower(): _num(v, None) for k, v in (g.get("peak_tflops") or {}).items()}
        bw = g.get("memory_bandwidth")
        return Gpu(
            id=g["id"],
            name=g["name"],
            vendor=g["vendor"],
            aliases=tuple(g.get("aliases", [])),
            tdp_w=_num(g["tdp"], "W"),
            peak_tflops=peaks,
            memory_gb=_num(g["memory"], "GB") if "memory" in g else None,
            memory_bandwidth_bps=_num(bw, "byte/s") if isinstance(bw, dict) and bw.get("value") else None,
            die_area_mm2=_num(g["die_area"], "mm**2") if "die_area" in g else None,
            process_node=(g.get("process_node") or {}).get("value"),
            architecture=g.get("architecture"),
            form_factor=g.get("form_factor"),
            parametric=params,
            proxy_of=proxy,
            notes=tuple(g.get("notes") or ()),
            sources=tuple(dict.fromkeys(e["source"] for _, e in iter_values(g))),
            raw=g,
            devices_per_card=int(_num(g["devices_per_card"], None)) if "devices_per_card" in g else 1,
        )

    @cached_property
    def _names(self) -> dict[str, str]:
        norm = self._loader.normalise_name
        out: dict[str, str] = {}
        for g in self.gpus.values():
            for name in (g.id, g.name, *g.aliases):
                out[norm(name)] = g.id
        return out

    def find_gpu(self, name: str, file: str | None = None, key: str | None = None) -> Gpu:
        """Resolve a card leniently ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "a100 sxm4 40gb")."""
        norm = self._loader.normalise_name(str(name))
        if norm in self._names:
            return self.gpus[self._names[norm]]
        # A unique catalogue name containing every character run the user typed.
        hits = {gid for n, gid in self._names.items() if norm and norm in n}
        if len(hits) == 1:
            return self.gpus[hits.pop()]
        close = difflib.get_close_matches(norm, list(self._names), n=5, cutoff=0.5)
        suggestions = list(dict.fromkeys(self.gpus[self._names[c]].id for c in close))
        if hits:
            suggestions = sorted(hits)[:6]
        hint = f"; closest known: {', '.join(suggestions)}" if suggestions else ""
        raise UnknownGpuError(f"unknown GPU {name!r}{hint} (see `footprint gpus`)", file, key)

    # ---- embodied impacts ----------------------------------------------------------------------
    @cached_property
    def _ademe_rows(self) -> dict[str, list[dict[str, str]]]:
        rows: dict[str, list[dict[str, str]]] = {}
        for r in self._loader.load_ademe_components():
            rows.setdefault(r["card"], []).append(r)
        return rows

    @cached_property
    def parametric_factors(self) -> dict[str, np.ndarray]:
        """Per-unit factors by component (per kg, cm2 or mm2 as the component's basis)."""
        return _vectors(self._loader.load_parametric_factors(), "component")

    @cached_property
    def measured_die_factor(self) -> np.ndarray:
        """Per-mm2 GPU-die factor (incl. losses) implied by ADEME's per-card dies (correction die_factor_from_measured_dies)."""
        return _vectors(self._loader.load_die_factor(), "component")["gpu_die"]

    @cached_property
    def distribution_factors(self) -> dict[str, np.ndarray]:
        """Per kg.km factors by transport mode."""
        return _vectors(self._loader.load_distribution_factors(), "mode")

    @cached_property
    def vram_mm2_per_gb(self) -> float:
        """Average VRAM density of the cards with a documented VRAM die (GH200 excluded, as upstream)."""
        import numpy as np

        vals = [
            g.parametric["vram_die_area_mm2"] * g.parametric["vram_dies"] / g.parametric["vram_capacity_gb"]
            for g in self.gpus.values()
            if g.parametric.get("vram_die_area_mm2") and g.id != "gh200"
        ]
        return float(np.mean(vals)) if vals else 0.0

    @cached_property
    def corrections(self) -> dict[str, Any]:
        """lca_data/embodied_corrections.yaml: the default variant and each correction with its reason."""
        return self._loader.load_embodied_corrections()

    def resolve_variant(self, variant: str | None) -> str:
        v = variant or self.corrections["default"]
        if v not in self.corrections["variants"]:
            raise KeyError(f"unknown embodied data variant {v!r}; known: {', '.join(self.corrections['variants'])}")
        return v

    def embodied_parametric(self, gpu: Gpu, variant: str | None = None) -> Embodied:
        return self._embodied_parametric(gpu.id, self.resolve_variant(variant))

    @lru_cache(maxsize=128)  # noqa: B019 - one Database per process
    def _embodied_parametric(self, gpu_id: str, variant: str) -> Embodied:
        from footprint.lca import parametric

        gpu = self.gpus[gpu_id]
        corrected = self.resolve_variant(variant) != "published"
        factors = self.parametric_factors
        notes = ["ADEME parametric model (modelled, not measured)"]
        if corrected:  # the die factor ADEME's own per-card dies imply, in place of the calculator's average
            factors = {**factors, "gpu_die": self.measured_die_factor}
            notes.append("GPU die per mm2 from ADEME's per-card dies (correction die_factor_from_measured_dies)")
        parts = parametric.card_components(gpu.parametric, factors, self.vram_mm2_per_gb, all_dies=corrected)
        if gpu.proxy_of:
            notes.append(f"card geometry proxied from {gpu.proxy_of} (estimate)")
        method = "ADEME parametric model" + ("" if corrected else " (as published)")
        emb = Embodied(gpu.id, method, parts, ("ademe-gpu-lca", *gpu.sources), tuple(notes))
        return self._eol_water(emb) if corrected else emb

    @lru_cache(maxsize=128)  # noqa: B019 - one Database per process
    def embodied(self, gpu_id: str, variant: str | None = None) -> Embodied:
        """Per-card impacts: ADEME per-card rows, else the parametric model; ``variant`` is "corrected"
        (default: lca_data/embodied_corrections.yaml) or "published" (the ADEME data exactly as published)."""
        import numpy as np

        variant = self.resolve_variant(variant)
        gpu = self.gpus[gpu_id]
        rows = self._ademe_rows.get(gpu.name)
        if not rows:
            return self.embodied_parametric(gpu, variant)
        parts: dict[tuple[str, str], np.ndarray] = {}
        for r in rows:
            key = (r["component"], r["stage"])
            parts.setdefault(key, np.zeros(N_IND))[IDX[r["category"]]] += float(r["value"])
        full = "A100" in gpu.name
        method = "ADEME per-card LCA" + (" (full, primary data)" if full else " (simplified)")
        if variant == "published":
            return Embodied(gpu.id, method + " as published", parts, ("ademe-gpu-lca",), (method,))
        emb = Embodied(gpu.id, method, parts, ("ademe-gpu-lca",), (method,))
        dies = gpu.parametric.get("vram_dies", 1)
        if gpu.parametric.get("vram_die_area_mm2") and dies > 1 and ("memory", "manufacturing") in parts:
            parts[("memory", "manufacturing")] = parts[("memory", "manufacturing")] * dies
            emb = replace(emb, notes=(*emb.notes, f"memory counted for all {dies:g} VRAM dies (correction memory_all_dies)"))
        return self._eol_water(emb)

    def _eol_water(self, emb: Embodied) -> Embodied:
        """End-of-life water use read as litres (correction end_of_life_water_litres)."""
        c = self.corrections["corrections"]["end_of_life_water_litres"]
        key = (c["component"], c["stage"])
        if key not in emb.parts:
            return emb
        parts = dict(emb.parts)
        parts[key] = parts[key].copy()
        parts[key][IDX[c["category"]]] /= float(c["divide_by"])
        note = f"end-of-life water use / {c['divide_by']:g} (correction end_of_life_water_litres)"
        return replace(emb, parts=parts, notes=(*emb.notes, note), sources=(*emb.sources, c["source"]))

    @cached_property
    def card_vs_model_ratios(self) -> list[np.ndarray]:
        """Per-card ADEME data / parametric model for every card the study covers: how far the model strays,
        category by category (the embodied uncertainty of modelled cards). Computed once per process."""
        import numpy as np

        out = []
        for g in self.gpus.values():
            emb = self.embodied(g.id)
            if emb.method.startswith("ADEME per-card"):
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = emb.total() / self.embodied_parametric(g).total()
                out.append(np.where(np.isfinite(r) & (r > 0), r, 1.0))
        return out

    def distribution(self, gpu: Gpu) -> np.ndarray:
        """Per-card distribution (plane 9,908 km + truck 1,000 km, the calculator's defaults)."""
        from footprint.lca import parametric

        return parametric.distribution(gpu.mass_kg, self.distribution_factors)

    # ---- other tables ----------------------------------------------------------------------------
    @cached_property
    def ranges(self) -> dict[str, Any]:
        return self._loader.load_yaml_checked("embodied_ranges.yaml", parse=Q)

    @cached_property
    def host(self) -> dict[str, Any]:
        return self._loader.load_yaml_checked("host.yaml", parse=Q)

    @cached_property
    def host_rows(self) -> dict[str, list[dict[str, str]]]:
        """lca_data/host_impacts.csv (written by lca_data/tools/build_host.py), rows by host model."""
        out: dict[str, list[dict[str, str]]] = {}
        for r in self._loader.load_host_impacts():
            out.setdefault(r["host"], []).append(r)
        return out

    def host_share(self, name: str | None) -> HostShare:
        """The per-GPU host share of a host model (NaN where a category is not available), its spread and sources."""
        import numpy as np

        data = self.host
        key = data["default"] if name in (None, "default") else name
        if key not in data["hosts"]:
            raise KeyError(key)
        h = data["hosts"][key]
        per = float(h["gpus_per_server"]["value"])
        vec, lo, hi, sigma = (np.full(N_IND, np.nan) for _ in range(4))
        dqr: list[dict[str, int] | None] = [None] * N_IND
        srcs = [h["gpus_per_server"]["source"]]
        for r in self.host_rows.get(key, []):
            i = IDX[r["category"]]
            vec[i], lo[i], hi[i] = (float(r[c]) / per for c in ("value", "low", "high"))
            q = {k: int(r[f"dqr_{k}"]) for k in ("ter", "ger", "tir", "p") if r.get(f"dqr_{k}")}
            dqr[i] = q or None
            sigma[i] = self.pedigree_sigma(q)
            srcs += [s for s in r["source"].split(";") if s]
        sigma = np.nan_to_num(sigma)
        notes = [h["description"], *h.get("notes", [])]
        return HostShare(vec, lo, hi, sigma, tuple(dqr), list(dict.fromkeys(srcs)), notes, per)

    # ---- data quality ----------------------------------------------------------------------------
    @cached_property
    def pedigree_factors(self) -> dict[str, list[float]]:
        """EF data-quality criterion (ter, ger, tir, p) -> pedigree uncertainty factors for scores 1..5."""
        ped = self._loader.load_data_quality()["pedigree"]
        return {k: [float(x) for x in ped[k]] for k in ("ter", "ger", "tir", "p")}

    def pedigree_sigma(self, dqr: dict[str, int] | None) -> float:
        from footprint.lca.uncertainty import pedigree_sigma

        return pedigree_sigma(dqr, self.pedigree_factors)

    def embodied_dqr(self, gpu: Gpu, emb: Embodied) -> dict[str, int]:
        """The EF data-quality rating of a card's embodied dataset (lca_data/embodied_ranges.yaml, data_quality)."""
        ratings = self.ranges["data_quality"]["embodied"]
        if emb.method.startswith("ADEME per-card"):
            key = "per_card_full" if "full" in emb.method else "per_card_simplified"
        else:
            key = "parametric_proxy" if gpu.proxy_of else "parametric"
        return {k: int(ratings[key][k]) for k in ("ter", "ger", "tir", "p")}

    @cached_property
    def sites(self) -> dict[str, Any]:
        return self._loader.load_yaml_checked("sites.yaml", parse=Q)

    @cached_property
    def materials(self) -> dict[str, Any]:
        return self._loader.load_yaml_checked("materials.yaml", parse=None)

    @cached_property
    def electricity_rows(self) -> list[dict[str, str]]:
        return self._loader.load_electricity_technologies()

    @cached_property
    def electricity_not_modelled_rows(self) -> list[dict[str, str]]:
        """Technology x category without an open life-cycle factor (lca_data/electricity_not_modelled.csv)."""
        name = "electricity_not_modelled.csv"
        rows = self._loader.read_csv(name, None, ("technology", "codecarbon_field", "category", "unit", "scope", "source"))
        sources = self._loader.load_sources()
        for i, r in enumerate(rows, start=2):
            if r["source"] not in sources or r["scope"] != "not_modelled":
                raise self._loader.LcaDataError(name, f"row {i}", "expected scope not_modelled and a registered source")
        return rows

    @cached_property
    def electricity_zone_technology_rows(self) -> list[dict[str, str]]:
        return self._loader.load_electricity_zone_technologies()

    @cached_property
    def electricity_zone_rows(self) -> list[dict[str, str]]:
        return self._loader.load_electricity_zones()

    @cached_property
    def electricity_zone_cited_rows(self) -> list[dict[str, str]]:
        return self._loader.load_electricity_zone_cited()

    @cached_property
    def electricity_crosscheck_rows(self) -> list[dict[str, str]]:
        return self._loader.load_electricity_crosscheck()

    @cached_property
    def normalisation(self) -> dict[str, tuple[float, float]]:
        """EF 3.1 category -> (normalisation factor per person per year, weight as a fraction of 1)."""
        return {
            r["category"]: (float(r["normalisation"]), float(r["weight_percent"]) / 100)
            for r in self._loader.load_normalisation()
        }


@lru_cache(maxsize=1)
def db() -> Database:
    """The process-wide database."""
    return Database()
