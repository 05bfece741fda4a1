"""Kernel efficiency profiles (profile.yaml) and the MFU they predict for a transformer training run.

`load_profile(path)` reads and validates a profile written by `footprint kernels bench` (or by hand:
only ``device`` and ``results`` are required). `predict(profile, model, gpu, dtype)` composes one
training step of a decoder transformer from the op mix below, gives every op the efficiency (fraction
of the dense peak) of the measured kernels closest to it, and sums the times:

- per layer, the GEMMs of QKV (h -> 3h), the attention projection (h -> h), MLP up (h -> 4h) and down
  (4h -> h), each three times: forward Y = X W (M x N x K, M = tokens of the step), input gradient
  dX = dY W^T (M x K x N) and weight gradient dW = X^T dY (K x N x M);
- the LM head (h -> vocab) likewise, when ``vocab_size`` is given;
- attention: QK^T and AV, forward 4 s h FLOPs per token per layer, backward 2x (12 L h s in all,
  PaLM's term), at the efficiency of the measured SDPA kernels (forward and backward separately);
- a non-matmul remainder (layer norms, activations, residual adds, softmax/cross-entropy of the logits),
  memory-bound: bytes moved / the measured elementwise bandwidth (54 h elements per token per layer,
  + 4 V with a vocabulary; an estimate, see `REMAINDER_ELEMENTS_PER_LAYER`).

Efficiency of an op = piecewise-linear interpolation, in log arithmetic intensity (FLOP per byte), of
the verified results of the same op and dtype (clamped to the nearest result outside the measured
range, and noted). The GEMM FLOPs are scaled so that they sum to 6 N per token (N = active parameters),
so that the model FLOPs are exactly `footprint.flops.transformer_flops` (6 N + 12 L h s per token):

    time per step  T = sum_op F_op / (e_op x P) + bytes_rem / BW
    MFU            = F_model / (T x P)       (with no remainder: the FLOP-weighted harmonic mean of e_op)
    GPU-hours      = training FLOPs / (P x MFU) / 3600

P is the dense peak of the scenario's GPU for the dtype. A profile measured on another catalogue GPU is
applied by carrying its efficiencies (fractions of that GPU's own dense peak) over, i.e. scaling its
achieved TFLOP/s by the ratio of the dense peaks, and says so in the notes. A CPU profile has no % of
peak, so applying it to a GPU scenario is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

OPS = ("gemm", "attention", "elementwise")
SHAPE_KEYS = {"gemm": ("M", "N", "K"), "attention": ("b", "h", "s", "d"), "elementwise": ("n",)}
PASSES = ("fwd", "bwd")
KINDS = ("cuda", "cpu")
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5, "int8": 1}
MAX_PROFILE_BYTES = 10_000_000
PCT_CONSISTENCY = 0.02  # stated pct_of_peak vs achieved / peak: relative tolerance

# Non-matmul traffic of a pre-LN block, in activation elements per token per layer (unfused eager
# ops, flash attention): forward LN1 2h + residual add 3h + LN2 2h + GeLU on 4h 8h + residual add 3h
# = 18 h; backward about twice that. An estimate (documented, not measured).
REMAINDER_ELEMENTS_PER_LAYER = 54
REMAINDER_ELEMENTS_PER_VOCAB = 4  # logits softmax / cross-entropy: read + write, forward and backward
DEFAULT_TOKENS_PER_STEP = 2048
DEFAULT_HEAD_DIM = 128
HIDDEN_PER_LAYER = 128  # h / L of GPT-3 175B and Llama 7B, to infer a shape from N alone


# ---- the profile ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelResult:
    """One validated result of a profile."""

    index: int
    op: str
    shape: dict[str, int]
    dtype: str
    verified: bool
    pass_: str = "fwd"
    causal: bool = False
    achieved_tflops: float | None = None
    pct_of_peak: float | None = None
    achieved_gbs: float | None = None
    median_s: float | None = None
    energy_j: float | None = None
    j_per_tflop: float | None = None

    @property
    def efficiency(self) -> float | None:
        """Fraction of the profile device's dense peak (None where no peak is known)."""
        return None if self.pct_of_peak is None else self.pct_of_peak / 100.0

    @property
    def intensity(self) -> float:
        """Arithmetic intensity (FLOP per byte) of the shape; elements for elementwise ops."""
        el = DTYPE_BYTES.get(self.dtype, 2)
        s = self.shape
        if self.op == "gemm":
            return gemm_intensity(s["M"], s["N"], s["K"], el)
        if self.op == "attention":
            return attention_intensity(s["s"], el, self.causal)
        return float(s["n"])

    def label(self) -> str:
        s = self.shape
        if self.op == "gemm":
            text = f"GEMM {s['M']}x{s['N']}x{s['K']}"
        elif self.op == "attention":
            text = f"attention {self.pass_} b{s['b']} h{s['h']} s{s['s']} d{s['d']}{' causal' if self.causal else ''}"
        else:
            text = f"elementwise n={s['n']}"
        return f"{text} {self.dtype}"


def gemm_intensity(m: float, n: float, k: float, el: float) -> float:
    return 2.0 * m * n * k / ((m * k + k * n + m * n) * el)


def attention_intensity(s: float, el: float, causal: bool = False) -> float:
    """FLOP per byte of Q, K, V, O for one head: 4 s^2 d / (4 s d el) = s / el (halved when causal);
    the backward pass (2x FLOPs, about 2x bytes) has the same."""
    return s / el * (0.5 if causal else 1.0)


@dataclass(frozen=True)
class Profile:
    path: Path | None
    device: dict[str, Any]
    meter: dict[str, Any]
    results: tuple[KernelResult, ...]
    created: str | None = None
    torch: str | None = None

    @property
    def kind(self) -> str:
        return str(self.device["kind"])

    @property
    def name(self) -> str:
        return str(self.device["name"])

    @property
    def peak_tflops(self) -> dict[str, float]:
        return dict(self.device.get("peak_tflops") or {})

    @property
    def label(self) -> str:
        return self.path.name if self.path is not None else "(in memory)"

    def usable(self, op: str, dtype: str, pass_: str | None = None) -> list[KernelResult]:
        """Verified results of `op` and `dtype` with a rate (failed verification is never used)."""
        out = []
        for r in self.results:
            if not r.verified or r.op != op or r.dtype != dtype:
                continue
            if pass_ is not None and r.pass_ != pass_:
                continue
            if (r.achieved_gbs if op == "elementwise" else r.efficiency) is None:
                continue
            out.append(r)
        return out


class _V:
    """Validation helpers: every error names the file and the key."""

    def __init__(self, file: str | None) -> None:
        self.file = file

    def err(self, key: str | None, message: str) -> FootprintError:
        return FootprintError(message, self.file, key)

    def mapping(self, key: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.err(key, f"must be a mapping, got {type(value).__name__}")
        return value

    def number(
        self, key: str, value: Any, *, positive: bool = False, optional: bool = False, hi: float | None = None
    ) -> float | None:
        if value is None:
            if optional:
                return None
            raise self.err(key, "missing (a number is required)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.err(key, f"must be a number, got {value!r}")
        v = float(value)
        if positive and v <= 0:
            raise self.err(key, f"must be > 0, got {value!r}")
        if v < 0:
            raise self.err(key, f"must not be negative, got {value!r}")
        if hi is not None and v > hi:
            raise self.err(key, f"must be <= {hi:g}, got {value!r}")
        return v

    def integer(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.err(key, f"must be a positive integer, got {value!r}")
        return int(value)


def profile_from_dict(data: Any, file: str | None = None) -> Profile:
    """Validate a profile mapping (as written by `footprint kernels bench`)."""
    from footprint.lca.database import DTYPES

    v = _V(file)
    data = v.mapping("(top level)", data)
    fmt = data.get("footprint_profile", 1)
    if fmt != 1:
        raise v.err("footprint_profile", f"unsupported profile format {fmt!r} (this version reads 1)")
    if "device" not in data:
        raise v.err("device", "missing: {name, kind: cuda|cpu, peak_tflops: {dtype: dense TFLOP/s}}")
    dev = dict(v.mapping("device", data["device"]))
    if not isinstance(dev.get("name"), str) or not dev["name"].strip():
        raise v.err("device.name", f"missing or not a string: {dev.get('name')!r}")
    if dev.get("kind") not in KINDS:
        raise v.err("device.kind", f"must be one of {', '.join(KINDS)}, got {dev.get('kind')!r}")
    peaks_in = dev.get("peak_tflops") or {}
    peaks = {}
    for k, val in v.mapping("device.peak_tflops", peaks_in).items():
        if str(k) not in DTYPES:
            raise v.err(f"device.peak_tflops.{k}", f"unknown dtype; allowed: {', '.join(DTYPES)}")
        peaks[str(k)] = v.number(f"device.peak_tflops.{k}", val, positive=True)
    dev["peak_tflops"] = peaks
    meter = data.get("meter") or {}
    v.mapping("meter", meter)
    rows = data.get("results")
    if not isinstance(rows, list) or not rows:
        raise v.err("results", "missing or empty: a list of measured kernels is required")
    results = tuple(_result(v, i, r, peaks, DTYPES) for i, r in enumerate(rows))
    return Profile(
        Path(file) if file else None,
        dev,
        dict(meter),
        results,
        str(data["created"]) if data.get("created") is not None else None,
        str(data["torch"]) if data.get("torch") is not None else None,
    )


def _result(v: _V, i: int, r: Any, peaks: dict[str, float | None], dtypes: tuple[str, ...]) -> KernelResult:
    key = f"results[{i}]"
    r = v.mapping(key, r)
    op = r.get("op")
    if op not in OPS:
        raise v.err(f"{key}.op", f"must be one of {', '.join(OPS)}, got {op!r}")
    shape_in = v.mapping(f"{key}.shape", r.get("shape"))
    shape = {}
    for s in SHAPE_KEYS[op]:
        if s not in shape_in:
            raise v.err(f"{key}.shape.{s}", f"missing ({op} shapes need {', '.join(SHAPE_KEYS[op])})")
        shape[s] = v.integer(f"{key}.shape.{s}", shape_in[s])
    causal = shape_in.get("causal", False)
    if not isinstance(causal, bool):
        raise v.err(f"{key}.shape.causal", f"must be true or false, got {causal!r}")
    dtype = str(r.get("dtype", "")).lower()
    if dtype not in dtypes:
        raise v.err(f"{key}.dtype", f"unknown dtype {r.get('dtype')!r}; allowed: {', '.join(dtypes)}")
    verified = r.get("verified")
    if not isinstance(verified, bool):
        raise v.err(f"{key}.verified", f"must be true or false, got {verified!r}")
    pass_ = r.get("pass", "fwd")
    if op == "attention" and pass_ not in PASSES:
        raise v.err(f"{key}.pass", f"must be fwd or bwd, got {pass_!r}")
    opt = {k: v.number(f"{key}.{k}", r.get(k), optional=True) for k in ("median_s", "energy_j", "j_per_tflop")}
    tflops = pct = gbs = None
    if op == "elementwise":
        gbs = v.number(f"{key}.achieved_gbs", r.get("achieved_gbs"), positive=True, optional=not verified)
    else:
        tflops = v.number(f"{key}.achieved_tflops", r.get("achieved_tflops"), positive=True, optional=not verified)
        pct = v.number(f"{key}.pct_of_peak", r.get("pct_of_peak"), positive=True, optional=True)
        peak = peaks.get(dtype)
        if peak and tflops:
            implied = 100.0 * tflops / peak
            if pct is None:
                pct = implied
            elif abs(pct - implied) > PCT_CONSISTENCY * implied + 0.05:
                raise v.err(
                    f"{key}.pct_of_peak",
                    f"{pct:g} % disagrees with achieved_tflops {tflops:g} / "
                    f"device.peak_tflops.{dtype} {peak:g} = {implied:.4g} %",
                )
        if pct is not None and pct > 100.0 and verified:
            raise v.err(
                f"{key}.pct_of_peak",
                f"{pct:.4g} % is above 100 % of the dense {dtype} peak: a sparse "
                "(2x) peak, a wrong FLOP count or the wrong dtype",
            )
    return KernelResult(
        i,
        op,
        shape,
        dtype,
        verified,
        pass_ if op == "attention" else "fwd",
        causal,
        tflops,
        pct,
        gbs,
        opt["median_s"],
        opt["energy_j"],
        opt["j_per_tflop"],
    )


def load_profile(path: str | Path, key: str | None = None) -> Profile:
    """Read and validate a profile YAML under the input contract (``footprint.inputs``). Errors name the file and the key."""
    from footprint.inputs import load_yaml, read_text

    p = Path(path)
    if not p.is_file():
        where = " (a relative kernel_profile is relative to the scenario file)" if key else ""
        raise FootprintError(f"no such kernel profile file{where}", str(p), key)
    data = load_yaml(read_text(p, "kernel profile YAML", MAX_PROFILE_BYTES), str(p))
    if data is None:
        raise FootprintError("empty file (expected a profile YAML with device and results)", str(p))
    return profile_from_dict(data, str(p))


# ---- interpolation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    value: float  # efficiency (fraction of peak) or bandwidth (GB/s)
    basis: str  # which measured kernels it comes from
    extrapolated: bool


def interpolate(points: list[tuple[float, float, str]], x: float) -> Match:
    """Piecewise-linear in log(x) through (x_i, y_i); clamped (and flagged) outside the range.
    Points at the same x are averaged."""
    if not points:
        raise ValueError("no points")
    by_x: dict[float, list[tuple[float, str]]] = {}
    for xi, yi, label in points:
        by_x.setdefault(math.log(xi), []).append((yi, label))
    xs = sorted(by_x)
    ys = [sum(y for y, _ in by_x[k]) / len(by_x[k]) for k in xs]
    labels = [" + ".join(lab for _, lab in by_x[k]) for k in xs]
    lx = math.log(x)
    if lx <= xs[0] or lx >= xs[-1]:
        j = 0 if lx <= xs[0] else len(xs) - 1
        exact = math.isclose(lx, xs[j], rel_tol=0, abs_tol=1e-9)
        return Match(ys[j], labels[j], extrapolated=not exact)
    for j in range(1, len(xs)):
        if lx <= xs[j]:
            w = (lx - xs[j - 1]) / (xs[j] - xs[j - 1])
            if w >= 1 - 1e-9:
                return Match(ys[j], labels[j], False)
            return Match(ys[j - 1] + w * (ys[j] - ys[j - 1]), f"between {labels[j - 1]} and {labels[j]}", False)
    raise AssertionError("unreachable")


# ---- the prediction ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpTime:
    """One op of the training step."""

    name: str  # e.g. "mlp_up fwd"
    group: str  # qkv, attn_proj, mlp_up, mlp_down, lm_head, attention, non_matmul
    kind: str  # gemm, attention, elementwise
    shape: str
    flops: float  # model FLOPs of the step for this op (0 for the remainder)
    efficiency: float | None  # fraction of the dense peak (None for the remainder)
    time_s: float
    basis: str
    extrapolated: bool = False
    executed: float = 1.0  # executed FLOPs per model FLOP: 0.5 for a causal attention kernel

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "kind": self.kind,
            "shape": self.shape,
            "flops": self.flops,
            "executed_flops": self.flops * self.executed,
            "efficiency": self.efficiency,
            "time_s": self.time_s,
            "basis": self.basis,
            "extrapolated": self.extrapolated,
        }


@dataclass
class Prediction:
    """MFU predicted from a kernel profile, and the GPU-hours it implies."""

    mfu: float
    flops: float  # model FLOPs of the whole training (transformer_flops)
    gpu_hours: float
    method: str
    notes: list[str]
    step_time_s: float  # one step = tokens_per_step tokens on one GPU
    tokens_per_step: int
    time_by_op: dict[str, float]  # seconds per step, by group (qkv, attn_proj, mlp_up, ..., non_matmul)
    limiting: list[dict[str, Any]]  # groups ranked by time share
    ops: list[OpTime] = field(default_factory=list)
    efficiency_by_kind: dict[str, float] = field(default_factory=dict)
    gpu: str = ""
    dtype: str = "bf16"
    peak_tflops: float = 0.0
    profile: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mfu": self.mfu,
            "flops": self.flops,
            "gpu_hours": self.gpu_hours,
            "method": self.method,
            "notes": list(self.notes),
            "step_time_s": self.step_time_s,
            "tokens_per_step": self.tokens_per_step,
            "time_by_op": dict(self.time_by_op),
            "limiting": list(self.limiting),
            "efficiency_by_kind": dict(self.efficiency_by_kind),
            "gpu": self.gpu,
            "dtype": self.dtype,
            "peak_tflops": self.peak_tflops,
            "profile": self.profile,
            "ops": [o.to_dict() for o in self.ops],
        }


def _shape_of_model(model: dict[str, float], notes: list[str]) -> dict[str, Any]:
    """Integer shape from the model mapping; what is missing is inferred, and said."""
    n = float(model.get("active_parameters") or model["parameters"])
    layers = int(model["layers"]) if model.get("layers") else None
    hidden = int(model["hidden"]) if model.get("hidden") else None
    seq = int(model["seq_len"]) if model.get("seq_len") else None
    vocab = int(model["vocab_size"]) if model.get("vocab_size") else None
    attention = bool(layers and hidden and seq)  # as transformer_flops: the 12 L h s term needs all three
    if hidden is None:
        if layers:
            hidden = max(64, int(round(math.sqrt(n / (12 * layers)) / 64)) * 64)
        else:
            hidden = max(64, int(round((HIDDEN_PER_LAYER * n / 12) ** (1 / 3) / 64)) * 64)
        notes.append(
            f"model.hidden not given: GEMM shapes use hidden {hidden} inferred from the parameters "
            f"(12 L h^2 = N{'' if layers else f', h / L = {HIDDEN_PER_LAYER}'})"
        )
    if layers is None:
        layers = max(1, int(round(n / (12 * hidden * hidden))))
        notes.append(f"model.layers not given: {layers} inferred from the parameters (12 L h^2 = N)")
    heads = int(model["heads"]) if model.get("heads") else None
    if heads is None or hidden % heads:
        head_dim = DEFAULT_HEAD_DIM if hidden % DEFAULT_HEAD_DIM == 0 else 64
        if attention:
            notes.append(
                f"model.heads {'not given' if heads is None else 'does not divide hidden'}: "
                f"head dim {head_dim} assumed for attention"
            )
        heads = max(1, hidden // head_dim)
    tokens = seq or DEFAULT_TOKENS_PER_STEP
    if seq is None:
        notes.append(
            f"model.seq_len not given: a step of {tokens} tokens (the GEMMs' M) assumed"
            + ("" if attention else "; no attention term (as in the FLOP formula)")
        )
    return {
        "n": n,
        "layers": layers,
        "hidden": hidden,
        "seq": seq,
        "vocab": vocab,
        "heads": heads,
        "head_dim": hidden // heads,
        "tokens": tokens,
        "attention": attention,
    }


def _check_target(profile: Profile, gpu: Any, dtype: str, notes: list[str]) -> tuple[float, float]:
    """Dense peaks (FLOP/s) of the scenario GPU and of the profile device for `dtype`; device notes."""
    file = str(profile.path) if profile.path else None
    if profile.kind == "cpu":
        raise FootprintError(
            f"measured on a CPU ({profile.name}): CPUs have no dense peak in the catalogue, so the profile has no "
            f"% of peak to carry over to {gpu.name}; run `footprint kernels bench --device cuda` on a GPU "
            "(a CPU profile is a plumbing check only)",
            file,
            "device.kind",
        )
    try:
        peak = gpu.peak_flops(dtype)
    except KeyError as exc:
        raise FootprintError(str(exc.args[0]), None, "training.dtype") from None
    dev_peak = profile.peak_tflops.get(dtype)
    have = sorted({r.dtype for r in profile.results if r.verified})
    if dtype not in have:
        raise FootprintError(
            f"no verified result in {dtype}; the profile has {', '.join(have) or 'none'} "
            "(set training.dtype, or bench that dtype)",
            file,
            "results",
        )
    if not dev_peak and not any(r.efficiency for r in profile.usable("gemm", dtype)):
        raise FootprintError(
            f"no dense {dtype} peak for the profile device {profile.name!r} (device.peak_tflops), "
            "so no % of peak: add it, or bench on a catalogue GPU",
            file,
            "device.peak_tflops",
        )
    from footprint.errors import UnknownGpuError
    from footprint.lca.database import db

    dev_id = profile.device.get("catalogue_id")
    if not dev_id:
        try:
            dev_id = db().find_gpu(profile.name).id
        except UnknownGpuError:
            dev_id = None
    if dev_id != gpu.id:
        ratio = f"{peak / 1e12 / dev_peak:.3g}x ({peak / 1e12:g} / {dev_peak:g} TFLOP/s)" if dev_peak else "unknown"
        notes.append(
            f"kernel profile measured on {profile.name}, applied to {gpu.name}: efficiencies (fractions "
            f"of each card's dense {dtype} peak) carried over, i.e. achieved TFLOP/s scaled by the ratio "
            f"of dense peaks {ratio}; attainable efficiency differs between architectures"
        )
    return peak, (dev_peak or 0.0) * 1e12


def predict(profile: Profile, model: dict[str, float], gpu: Any, dtype: str = "bf16") -> Prediction:
    """Compose the op mix of one training step with the profile's efficiencies (module docstring): the GEMMs, the
    attention, the non-matmul remainder, each timed at its measured efficiency; MFU = model FLOPs / (time x peak)."""
    from footprint.flops import transformer_flops

    file = str(profile.path) if profile.path else None
    dtype = dtype.lower()
    if not model.get("parameters") or not model.get("tokens"):
        raise FootprintError("model.parameters and model.tokens are needed to predict from a kernel profile", None, "model")
    notes: list[str] = []
    peak, _ = _check_target(profile, gpu, dtype, notes)
    sh = _shape_of_model(model, notes)
    el = DTYPE_BYTES[dtype]
    gemm_pts = [(r.intensity, r.efficiency, r.label()) for r in profile.usable("gemm", dtype)]
    if not gemm_pts:
        raise FootprintError(
            f"no verified GEMM result in {dtype} (results that failed verification are never used)", file, "results"
        )
    extrapolated: list[str] = []
    ops = _gemm_ops(sh, el, gemm_pts, bool(model.get("active_parameters")), notes, extrapolated)
    if sh["attention"]:
        ops.extend(_attention_ops(profile, dtype, sh, el, gemm_pts, notes, extrapolated))
    ops = [replace(o, time_s=o.flops * o.executed / (o.efficiency * peak)) for o in ops]  # type: ignore[operator]
    rem = _remainder(profile, dtype, sh, el, notes)
    if rem is not None:
        ops.append(rem)
    if extrapolated:
        notes.append(
            "outside the measured range (nearest measured efficiency used): "
            + ", ".join(extrapolated[:6])
            + (f" and {len(extrapolated) - 6} more" if len(extrapolated) > 6 else "")
        )
    T = sh["tokens"]
    fl = transformer_flops(
        model["parameters"],
        model["tokens"],
        active_params=model.get("active_parameters"),
        **({"layers": sh["layers"], "hidden": sh["hidden"], "seq_len": sh["seq"]} if sh["attention"] else {}),
    )
    step_flops = fl.flops_per_token * T
    step_time = sum(o.time_s for o in ops)
    mfu = _step_mfu(step_flops, step_time, peak, file)
    time_by_op: dict[str, float] = {}
    for o in ops:
        time_by_op[o.group] = time_by_op.get(o.group, 0.0) + o.time_s
    limiting = _limiting(ops, time_by_op, step_time, step_flops)
    eff_kind = {
        kind: _kernel_efficiency(members)
        for kind in ("gemm", "attention")
        if (members := [o for o in ops if o.kind == kind and o.flops > 0])
    }
    notes.append(
        "kernel-level prediction: an upper bound that leaves out communication, pipeline bubbles, data "
        "loading, checkpointing, stragglers and restarts (real MFU is lower); GEMM shapes are the "
        f"whole layer's on one GPU (no tensor-parallel sharding), {T} tokens per step"
    )
    return Prediction(
        mfu=mfu,
        flops=fl.flops,
        gpu_hours=fl.flops / (peak * mfu) / 3600,
        method=_method(profile, dtype, eff_kind, time_by_op.get("non_matmul", 0.0) / step_time, rem is not None, limiting),
        notes=notes,
        step_time_s=step_time,
        tokens_per_step=T,
        time_by_op=time_by_op,
        limiting=limiting,
        ops=ops,
        efficiency_by_kind=eff_kind,
        gpu=gpu.name,
        dtype=dtype,
        peak_tflops=peak / 1e12,
        profile=str(profile.path) if profile.path else "",
    )


def _gemm_ops(
    sh: dict[str, Any],
    el: float,
    gemm_pts: list[tuple[float, float, str]],
    active: bool,
    notes: list[str],
    extrapolated: list[str],
) -> list[OpTime]:
    """The step's GEMMs (QKV, attention projection, MLP up and down, the LM head; forward and both backward
    passes) at the profile's interpolated efficiency, FLOPs scaled to the 6 N per token of the MFU convention."""
    L, h, T, V = sh["layers"], sh["hidden"], sh["tokens"], sh["vocab"]
    ops: list[OpTime] = []

    def gemm_op(group: str, pass_: str, m: int, n: int, k: int, count: float) -> None:
        match = interpolate(gemm_pts, gemm_intensity(m, n, k, el))
        if match.extrapolated:
            extrapolated.append(f"{group} {pass_} ({m}x{n}x{k})")
        f = 2.0 * m * n * k * count
        ops.append(
            OpTime(f"{group} {pass_}", group, "gemm", f"{m}x{n}x{k}", f, match.value, 0.0, match.basis, match.extrapolated)
        )

    def linear(group: str, n_out: int, k_in: int, count: float) -> None:
        gemm_op(group, "fwd", T, n_out, k_in, count)
        gemm_op(group, "bwd dX", T, k_in, n_out, count)
        gemm_op(group, "bwd dW", k_in, n_out, T, count)

    linear("qkv", 3 * h, h, L)
    linear("attn_proj", h, h, L)
    linear("mlp_up", 4 * h, h, L)
    linear("mlp_down", h, 4 * h, L)
    if V:
        linear("lm_head", V, h, 1)
    # Scale the GEMM FLOPs to 6 N per token: the model-FLOP convention the MFU is defined with.
    n_gemm = sum(o.flops for o in ops)
    scale = 6.0 * sh["n"] * T / n_gemm
    if abs(scale - 1) > 0.1:
        notes.append(
            f"the GEMM shapes (12 L h^2{' + V h' if V else ''} = {n_gemm / 6 / T:.3g} parameters) differ "
            f"from the {'active ' if active else ''}parameters {sh['n']:.3g} by "
            f"{scale - 1:+.0%}: GEMM FLOPs scaled to 6 N per token, shapes kept"
        )
    return [replace(o, flops=o.flops * scale) for o in ops]


def _step_mfu(step_flops: float, step_time: float, peak: float, file: str | None) -> float:
    """Model FLOPs over the step's time at peak, refused outside (0, 100 %] (a profile's convention slip)."""
    mfu = step_flops / (step_time * peak)
    if 1 < mfu <= 1 + 1e-9:
        mfu = 1.0
    if not 0 < mfu <= 1:
        raise FootprintError(
            f"predicted MFU {mfu:.0%} is outside (0, 100 %]: check the profile's pct_of_peak and FLOP conventions",
            file,
            "results",
        )
    return mfu


def _limiting(ops: list[OpTime], time_by_op: dict[str, float], step_time: float, step_flops: float) -> list[dict[str, Any]]:
    """Per op group, slowest first: its share of the step's time and FLOPs, efficiency and slowest kernel."""
    limiting = []
    for group, t in sorted(time_by_op.items(), key=lambda kv: -kv[1]):
        members = [o for o in ops if o.group == group]
        f = sum(o.flops for o in members)
        worst = min((o for o in members if o.efficiency), key=lambda o: o.efficiency, default=None)
        limiting.append(
            {
                "op": group,
                "time_share": t / step_time,
                "time_s": t,
                "flop_share": f / step_flops,
                "efficiency": _kernel_efficiency(members),
                "slowest": f"{worst.name} {worst.shape} at {worst.efficiency:.0%} ({worst.basis})" if worst else members[0].basis,
            }
        )
    return limiting


def _method(
    profile: Profile,
    dtype: str,
    eff_kind: dict[str, float | None],
    rem_share: float,
    counted_rem: bool,
    limiting: list[dict[str, Any]],
) -> str:
    """The prediction's method line: the profile, the kernels' efficiencies, the remainder and the time by op."""
    kernels = f"GEMM {eff_kind['gemm']:.0%} of peak" + (
        f", attention {eff_kind['attention']:.0%}" if "attention" in eff_kind else ""
    )
    rest = f"non-matmul {rem_share:.0%} of step time" if counted_rem else "non-matmul not counted"
    top = ", ".join(f"{x['op']} {x['time_share']:.0%}" for x in limiting[:3])
    return (
        f"predicted from kernel profile {profile.label} ({profile.name}, {dtype}): {kernels} "
        f"(FLOP-weighted), {rest}; time by op: {top}"
    )


def _kernel_efficiency(ops: list[OpTime]) -> float | None:
    """FLOP-weighted harmonic mean of the kernels' efficiencies (executed FLOPs, as measured)."""
    ops = [o for o in ops if o.flops > 0 and o.efficiency]
    if not ops:
        return None
    return sum(o.flops * o.executed for o in ops) / sum(o.flops * o.executed / o.efficiency for o in ops)  # type: ignore[operator]


def _attention_ops(
    profile: Profile,
    dtype: str,
    sh: dict[str, Any],
    el: float,
    gemm_pts: list[tuple[float, float, str]],
    notes: list[str],
    extrapolated: list[str],
) -> list[OpTime]:
    L, h, s, d = sh["layers"], sh["hidden"], sh["seq"], sh["head_dim"]
    T = sh["tokens"]
    fwd_flops = 4.0 * L * h * s * T  # QK^T and AV, per step of T tokens (PaLM's 4 L h s per token)
    shape = f"s{s} d{d} x{sh['heads']} heads"
    have = profile.usable("attention", dtype)
    if not have:
        # Unfused: the two batched GEMMs per head, QK^T (s x s x d) and AV (s x d x s), at GEMM efficiency.
        notes.append(
            f"no verified attention result in {dtype}: attention modelled as its batched GEMMs QK^T "
            f"({s}x{s}x{d}) and AV ({s}x{d}x{s}) at the GEMM efficiencies (unfused attention)"
        )
        m1 = interpolate(gemm_pts, gemm_intensity(s, s, d, el))
        m2 = interpolate(gemm_pts, gemm_intensity(s, d, s, el))
        eff = 2.0 / (1.0 / m1.value + 1.0 / m2.value)
        basis = f"QK^T {m1.basis}; AV {m2.basis}"
        if m1.extrapolated or m2.extrapolated:
            extrapolated.append("attention (as GEMMs)")
        return [
            OpTime("attention fwd", "attention", "gemm", shape, fwd_flops, eff, 0.0, basis),
            OpTime("attention bwd", "attention", "gemm", shape, 2 * fwd_flops, eff, 0.0, basis),
        ]
    causal = [r for r in have if r.causal]
    pool = causal or have
    if causal:
        notes.append(
            "attention from the causal SDPA results (decoder training); model FLOPs count the full "
            "12 L h s (PaLM), the causal kernel executes half"
        )
    else:
        notes.append(
            "attention from non-causal SDPA results only: timed as full attention (conservative for a "
            "causal decoder, whose kernel skips the masked half)"
        )
    out = []
    for pass_, mult in (("fwd", 1.0), ("bwd", 2.0)):
        pts = [r for r in pool if r.pass_ == pass_]
        if not pts:
            pts = [r for r in pool if r.pass_ == "fwd"]
            notes.append(f"no attention {pass_} result: the forward efficiency is used for the backward pass")
        match = interpolate(
            [(attention_intensity(r.shape["s"], el, r.causal), r.efficiency, r.label()) for r in pts],
            attention_intensity(s, el, bool(causal)),
        )
        if match.extrapolated:
            extrapolated.append(f"attention {pass_} (s {s})")
        out.append(
            OpTime(
                f"attention {pass_}",
                "attention",
                "attention",
                shape + (" causal" if causal else ""),
                mult * fwd_flops,
                match.value,
                0.0,
                match.basis,
                match.extrapolated,
                0.5 if causal else 1.0,
            )
        )
    return out


def _remainder(profile: Profile, dtype: str, sh: dict[str, Any], el: float, notes: list[str]) -> OpTime | None:
    pool = profile.usable("elementwise", dtype) or [r for d in DTYPE_BYTES for r in profile.usable("elementwise", d)]
    elements = (
        REMAINDER_ELEMENTS_PER_LAYER * sh["hidden"] * sh["layers"]
        + (REMAINDER_ELEMENTS_PER_VOCAB * sh["vocab"] if sh["vocab"] else 0)
    ) * sh["tokens"]
    nbytes = elements * el
    if not pool:
        notes.append(
            "no verified elementwise result: the non-matmul remainder (norms, activations, residuals) is "
            "not counted, so the predicted MFU is optimistic"
        )
        return None
    match = interpolate(
        [(float(r.shape["n"]), float(r.achieved_gbs or 0), r.label()) for r in pool], float(sh["tokens"] * sh["hidden"])
    )
    notes.append(
        f"non-matmul remainder: {REMAINDER_ELEMENTS_PER_LAYER} h elements per token per layer"
        + (f" + {REMAINDER_ELEMENTS_PER_VOCAB} V" if sh["vocab"] else "")
        + f" moved at the measured elementwise bandwidth {match.value:.4g} GB/s (an estimate; the "
        "bandwidth is the profile device's, not scaled to another GPU)"
    )
    return OpTime(
        "non_matmul",
        "non_matmul",
        "elementwise",
        f"{nbytes / 1e9:.3g} GB per step",
        0.0,
        None,
        nbytes / (match.value * 1e9),
        match.basis,
    )


def predict_for_scenario(profile_path: Path, model: dict[str, float], gpu: Any, dtype: str) -> Prediction:
    """What a scenario's ``training.kernel_profile`` resolves to: the resolver `footprint.builders` hands the parser."""
    profile = load_profile(profile_path, key="training.kernel_profile")
    return predict(profile, model, gpu, dtype)
