"""FLOP and byte models of the ops a trace records, and the classes of the kernels that no model covers.

`op_model(name, dims, types, concrete)` gives an op's FLOPs (2 per multiply-accumulate), bytes, dtype and
parameters from its recorded shapes, with TraceLens' formulas (GEMM, convolution, scaled-dot-product
attention); `estimate` gives the 1-FLOP-per-element estimates of elementwise and reduction ops;
`kernel_class` puts a kernel name in a category when no modelled op launched it. The same formulas
serve GPU kernels (through the op that launched them) and CPU operators (their own time).
Imports nothing of ours.
"""

from __future__ import annotations

import re
from typing import Any

CATEGORIES = ("gemm", "attention", "convolution", "elementwise", "reduction", "communication", "memcpy", "other")
MATRIX_CATEGORIES = ("gemm", "attention", "convolution")
SHORT_KERNEL_US = 10.0
NUM = (int, float)

# ---- dtypes ------------------------------------------------------------------------------------------
DTYPES: dict[str, tuple[str, int]] = {
    "c10::BFloat16": ("bf16", 2),
    "BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("fp8", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "short int": ("int16", 2),
    "int": ("int32", 4),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
}

# ---- event kinds ------------------------------------------------------------------------------------
OP, RT, KERNEL, MEMCPY, MEMSET, ANNOTATION = 1, 2, 3, 4, 5, 6
CAT_KIND = {
    "user_annotation": ANNOTATION,  # ProfilerStep#N (and record_function ranges) on the CPU
    "cpu_op": OP,
    "operator": OP,
    "cuda_runtime": RT,
    "runtime": RT,
    "cuda_driver": RT,
    "hip_runtime": RT,
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
}

# ---- the ops with a FLOP model: name -> (family, rank, leaf_only) -------------------------------------
# Walking up from the op that launched a kernel, the outermost family wins (so a GEMM inside a
# convolution counts once, as the convolution), and within it the lowest rank (the op whose arguments
# the formulas read, as TraceLens: aten::convolution, aten::_scaled_dot_product_flash_attention).
MODEL_OPS: dict[str, tuple[str, int, bool]] = {
    "aten::mm": ("gemm", 0, False),
    "aten::addmm": ("gemm", 0, False),
    "aten::bmm": ("gemm", 0, False),
    "aten::baddbmm": ("gemm", 0, False),
    "aten::_scaled_mm": ("gemm", 0, False),
    "aten::linear": ("gemm", 1, True),
    "aten::matmul": ("gemm", 1, True),
    "aten::convolution": ("convolution", 0, False),
    "aten::_convolution": ("convolution", 1, False),
    "aten::cudnn_convolution": ("convolution", 2, False),
    "aten::conv2d": ("convolution", 3, False),
    "aten::conv1d": ("convolution", 3, False),
    "aten::conv3d": ("convolution", 3, False),
    "aten::convolution_backward": ("convolution", 0, False),
    "aten::_scaled_dot_product_flash_attention": ("attention", 0, False),
    "aten::_scaled_dot_product_efficient_attention": ("attention", 0, False),
    "aten::_scaled_dot_product_cudnn_attention": ("attention", 0, False),
    "aten::_flash_attention_forward": ("attention", 1, False),
    "aten::_efficient_attention_forward": ("attention", 1, False),
    "aten::scaled_dot_product_attention": ("attention", 2, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("attention", 0, False),
    "aten::_scaled_dot_product_efficient_attention_backward": ("attention", 0, False),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("attention", 0, False),
    "aten::_flash_attention_backward": ("attention", 1, False),
    "aten::_efficient_attention_backward": ("attention", 1, False),
    # CPU kernels (CPU-only traces): flash attention for CPU; convolutions end in aten::convolution above
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("attention", 0, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": ("attention", 0, False),
}
# Ops whose formulas read "Concrete Inputs" (stride, padding, causal flags): only these keep them.
NEEDS_CONCRETE = frozenset(n for n, (fam, _, _) in MODEL_OPS.items() if fam != "gemm")

# ---- kernel-name classes (for kernels not under a modelled op) ----------------------------------------
_K_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv", re.I)
_K_ATTN = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)
_K_NORM = re.compile(r"norm(?!al)|softmax|bn_fw|bn_bw", re.I)
_K_CONV = re.compile(r"conv|scudnn|cudnn|implicit_?gemm|dgrad|wgrad|fprop|miopen|winograd|igemm", re.I)
_K_GEMM = re.compile(r"gemm|cutlass|cublas|xmma|wgmma|Cijk_|matmul|triton_tem|splitk|sgemm|hgemm", re.I)
_K_RED = re.compile(
    r"reduce|reduction|triton_red|triton_per|sum_|mean|argmax|argmin|cross_entropy|nll_loss|"
    r"scan|cub::|topk|sort|max_|min_",
    re.I,
)
_K_EW = re.compile(
    r"elementwise|vectorized|unrolled|pointwise|triton_poi|fill|copy|catarray|where|clamp|gelu|"
    r"relu|silu|sigmoid|tanh|dropout|distribution|add|mul|div",
    re.I,
)
# Views, allocations and bookkeeping: they launch no kernel, so their shapes are not kept.
NO_SHAPE_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::as_strided",
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::expand_as",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::unbind",
        "aten::split",
        "aten::split_with_sizes",
        "aten::chunk",
        "aten::detach",
        "aten::detach_",
        "aten::alias",
        "aten::lift_fresh",
        "aten::resize_",
        "aten::record_stream",
        "aten::size",
        "aten::stride",
        "aten::numel",
        "aten::result_type",
        "aten::set_",
        "aten::is_nonzero",
        "aten::item",
        "aten::flatten",
        "aten::view_as",
        "aten::unflatten",
        "aten::_reshape_alias",
        "aten::movedim",
        "aten::pin_memory",
        "detach",
    }
)


# Runtime calls that can start GPU work (kernels, copies, sets, graphs); the others (stream queries,
# events, attribute calls) are not kept.
LAUNCH = re.compile(r"launch|memcpy|memset|prefetch", re.I)


def wants_shapes(name: str) -> bool:
    return (
        name not in NO_SHAPE_OPS
        and not name.startswith("autograd::")
        and not name.endswith(("Backward0", "Backward1", "AccumulateGrad"))
    )


COPY_OPS = frozenset(
    {
        "aten::copy_",
        "aten::clone",
        "aten::contiguous",
        "aten::to",
        "aten::_to_copy",
        "aten::cat",
        "aten::fill_",
        "aten::zero_",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::index_select",
        "aten::embedding",
        "aten::gather",
        "aten::scatter",
        "aten::index",
        "aten::index_put_",
    }
)


# first match wins, in this order (an implicit-GEMM convolution is a convolution, a norm kernel is not elementwise)
_K_CLASSES = (
    (_K_COMM, "communication"),
    (_K_ATTN, "attention"),
    (_K_NORM, "reduction"),
    (_K_CONV, "convolution"),
    (_K_GEMM, "gemm"),
    (_K_RED, "reduction"),
    (_K_EW, "elementwise"),
)


def kernel_class(name: str) -> str:
    """The category of a kernel no modelled op launched, from its name (`_K_CLASSES`, in order); else "other"."""
    return next((cls for pattern, cls in _K_CLASSES if pattern.search(name)), "other")


def numel(shape: Any) -> int | None:
    if not isinstance(shape, list):
        return None
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _dtype(types: Any, i: int) -> tuple[str | None, int | None]:
    if isinstance(types, list) and i < len(types):
        return DTYPES.get(types[i], (None, None))
    return None, None


def _int_list(text: Any) -> list[int] | None:
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        return [int(x) for x in text.strip("[]").split(",") if x.strip()]
    except ValueError:
        return None


def _conc(conc: Any, i: int) -> Any:
    return conc[i] if isinstance(conc, list) and i < len(conc) else None


def _gemm(name: str, dims: list[Any], types: Any) -> dict[str, Any] | None:
    bias = False
    if name in ("aten::mm", "aten::_scaled_mm"):
        a, b = dims[0], dims[1]
        if len(a) != 2 or len(b) != 2:
            return None
        batch, m, k, n = 1, a[0], a[1], b[1]
        dt, size = _dtype(types, 0)
        if name == "aten::_scaled_mm":
            bias = len(dims) > 4 and bool(dims[4])
            out_size = 2 if size == 1 else size
        else:
            out_size = size
    elif name == "aten::addmm":
        a, b = dims[1], dims[2]
        if len(a) != 2 or len(b) != 2:
            return None
        batch, m, k, n, bias = 1, a[0], a[1], b[1], True
        dt, size = _dtype(types, 1)
        out_size = size
    elif name == "aten::bmm":
        a, b = dims[0], dims[1]
        if len(a) != 3 or len(b) != 3:
            return None
        batch, m, k, n = a[0], a[1], a[2], b[2]
        dt, size = _dtype(types, 0)
        out_size = size
    elif name == "aten::baddbmm":
        a, b = dims[1], dims[2]
        if len(a) != 3 or len(b) != 3:
            return None
        batch, m, k, n, bias = a[0], a[1], a[2], b[2], True
        dt, size = _dtype(types, 1)
        out_size = size
    elif name == "aten::linear":
        x, w = dims[0], dims[1]
        if not x or len(w) != 2:
            return None
        batch, m, k, n = 1, numel(x[:-1]) or 1, x[-1], w[0]
        bias = len(dims) > 2 and bool(dims[2])
        dt, size = _dtype(types, 0)
        out_size = size
    elif name == "aten::matmul":
        a, b = dims[0], dims[1]
        if not a or not b:
            return None
        a2 = [1, a[0]] if len(a) == 1 else a
        b2 = [b[0], 1] if len(b) == 1 else b
        m, k, n = a2[-2], a2[-1], b2[-1]
        ba, bb = a2[:-2], b2[:-2]
        width = max(len(ba), len(bb))
        ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
        batch = numel([max(x, y) for x, y in zip(ba, bb, strict=True)]) or 1
        dt, size = _dtype(types, 0)
        out_size = size
    else:
        return None
    if not all(isinstance(v, int) for v in (batch, m, n, k)):
        return None
    matmul = 2 * batch * m * n * k
    flops = matmul + (batch * m * n if bias else 0)
    nbytes = None
    if size:
        nbytes = batch * (m * k * size + k * n * size + m * n * out_size + (n * size if bias else 0))
    return {
        "params": {"B": batch, "M": m, "N": n, "K": k, "bias": bias},
        "flops": flops,
        "matmul_flops": matmul,
        "bytes": nbytes,
        "dtype": dt,
        "model": "gemm",
    }


def _conv_out(
    x: list[int],
    w: list[int],
    stride: list[int],
    pad: list[int],
    dil: list[int],
    transposed: bool,
    out_pad: list[int],
    groups: int,
) -> list[int]:
    spatial = []
    for i in range(len(x) - 2):
        if transposed:
            spatial.append((x[i + 2] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w[i + 2] - 1) + out_pad[i] + 1)
        else:
            spatial.append((x[i + 2] + 2 * pad[i] - dil[i] * (w[i + 2] - 1) - 1) // stride[i] + 1)
    c_out = w[1] * groups if transposed else w[0]
    return [x[0], c_out, *spatial]


def _conv(name: str, dims: list[Any], types: Any, conc: Any) -> dict[str, Any] | None:
    backward = name == "aten::convolution_backward"
    off = 1 if backward else 0
    x, w = dims[off], dims[off + 1]
    if not isinstance(x, list) or not isinstance(w, list) or len(x) < 3 or len(x) != len(w):
        return None
    nd = len(x) - 2
    dt, size = _dtype(types, off)

    def arg(i: int, default: int) -> list[int] | None:
        v = _int_list(_conc(conc, i))
        if v is None:
            return None
        v = v or [default]
        return v * nd if len(v) == 1 else v

    if name in ("aten::convolution", "aten::_convolution", "aten::convolution_backward"):
        b = 3 + off
        stride, pad, dil = arg(b, 1), arg(b + 1, 0), arg(b + 2, 1)
        transposed = _conc(conc, b + 3) == "True"
        out_pad, g = arg(b + 4, 0), _conc(conc, b + 5)
        bias = (
            (len(dims) > 2 + off and bool(dims[2 + off]))
            if not backward
            else (_conc(conc, 10) or "").replace(" ", "").endswith("True]")
        )
    elif name == "aten::cudnn_convolution":  # (self, weight, padding, stride, dilation, groups, ...)
        pad, stride, dil = arg(2, 0), arg(3, 1), arg(4, 1)
        transposed, out_pad, g, bias = False, [0] * nd, _conc(conc, 5), False
    elif name in ("aten::conv1d", "aten::conv2d", "aten::conv3d"):  # (input, weight, bias, stride, padding, dil, g)
        stride, pad, dil = arg(3, 1), arg(4, 0), arg(5, 1)
        transposed, out_pad, g = False, [0] * nd, _conc(conc, 6)
        bias = len(dims) > 2 and bool(dims[2])
    else:
        return None
    try:
        groups = int(g) if g not in (None, "") else 1
    except ValueError:
        return None
    if backward:
        out = dims[0] if isinstance(dims[0], list) and len(dims[0]) == len(x) else None
        mask = [t.strip() == "True" for t in (_conc(conc, 10) or "[True, True, True]").strip("[]").split(",")]
        mask = (mask + [True, True, True])[:3]
    else:
        if stride is None or pad is None or dil is None or out_pad is None:
            return None  # no Concrete Inputs (older traces): the output shape is unknown
        out = _conv_out(x, w, stride, pad, dil, transposed, out_pad, groups)
        mask = [True, False, False]
    if out is None:
        return None
    per = 2 * (numel(w[1:]) or 0)
    base = (numel(x) if transposed else numel(out)) or 0
    conv = base * per
    out_n, x_n, w_n = numel(out) or 0, numel(x) or 0, numel(w) or 0
    if backward:
        flops = conv * (int(mask[0]) + int(mask[1])) + (out_n if mask[2] else 0)
        nbytes = (
            (out_n + x_n + w_n + (x_n if mask[0] else 0) + (w_n if mask[1] else 0) + (out[1] if mask[2] else 0)) * size
            if size
            else None
        )
    else:
        flops = conv + (out_n if bias else 0)
        nbytes = (x_n + w_n + out_n + (out[1] if bias else 0)) * size if size else None
    params = {
        "input": x,
        "weight": w,
        "output": out,
        "groups": groups,
        "bias": bool(bias),
        "direction": "backward" if backward else "forward",
    }
    if not backward:
        params.update(stride=stride, padding=pad, dilation=dil, transposed=transposed)
    return {
        "params": params,
        "flops": flops,
        "matmul_flops": conv * (2 if backward and mask[0] and mask[1] else 1),
        "bytes": nbytes,
        "dtype": dt,
        "model": "convolution",
    }


# name -> (index of q in Input Dims (k, v follow), layout, index of is_causal in Concrete Inputs, backward)
_SDPA = {
    "aten::_scaled_dot_product_flash_attention": (0, "bhsd", 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, "bhsd", 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, "bhsd", 6, False),
    "aten::scaled_dot_product_attention": (0, "bhsd", 5, False),
    "aten::_flash_attention_forward": (0, "bshd", 8, False),
    "aten::_efficient_attention_forward": (0, "bshd", 9, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, "bhsd", 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, "bhsd", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", 14, True),
    "aten::_flash_attention_backward": (1, "bshd", 11, True),
    "aten::_efficient_attention_backward": (1, "bshd", 14, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, "bhsd", 4, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (1, "bhsd", 7, True),
}


def _sdpa(name: str, dims: list[Any], types: Any, conc: Any) -> dict[str, Any] | None:
    q_i, layout, causal_i, backward = _SDPA[name]
    if len(dims) < q_i + 3:
        return None
    q, k, v = dims[q_i], dims[q_i + 1], dims[q_i + 2]
    if not all(isinstance(t, list) and len(t) == 4 for t in (q, k, v)):
        return None
    if layout == "bhsd":
        b, hq, sq, d = q
        hkv, skv, dv = k[1], k[2], v[3]
    else:
        b, sq, hq, d = q
        skv, hkv, dv = k[1], k[2], v[3]
    flag = _conc(conc, causal_i)
    causal = flag == "True" or (name.startswith("aten::_efficient_attention") and flag not in (None, "", "0"))
    fwd = 2 * b * hq * sq * skv * (d + dv)
    if causal:
        fwd //= 2
    flops = fwd * 5 // 2 if backward else fwd
    dt, size = _dtype(types, q_i)
    q_n, kv_n, o_n = b * hq * sq * d, b * hkv * skv * (d + dv), b * hq * sq * dv
    nbytes = None
    if size:
        nbytes = (q_n + kv_n + o_n) * size if not backward else (2 * q_n + 2 * kv_n + o_n) * size
    return {
        "params": {
            "B": b,
            "H_Q": hq,
            "H_KV": hkv,
            "N_Q": sq,
            "N_KV": skv,
            "d_qk": d,
            "d_v": dv,
            "causal": causal,
            "direction": "backward" if backward else "forward",
        },
        "flops": flops,
        "matmul_flops": flops,
        "bytes": nbytes,
        "dtype": dt,
        "model": "attention",
    }


def op_model(name: str, dims: Any, types: Any, conc: Any) -> dict[str, Any] | None:
    """FLOPs, bytes, dtype and parameters of a modelled op; None when its shapes are not recorded."""
    if not isinstance(dims, list) or not dims:
        return None
    try:
        fam = MODEL_OPS[name][0]
        if fam == "gemm":
            return _gemm(name, dims, types)
        if fam == "convolution":
            return _conv(name, dims, types, conc)
        return _sdpa(name, dims, types, conc)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return None


def estimate(cat: str, name: str, dims: Any, types: Any) -> dict[str, Any] | None:
    """Elementwise / reduction estimates (1 FLOP per output / input element) from the launching op's shapes."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    tensors = []
    for shape, t in zip(dims, types, strict=False):
        dt = DTYPES.get(t)
        n = numel(shape)
        if dt and n is not None:
            tensors.append((shape, n, dt))
    if not tensors:
        return None
    read = sum(n * dt[1] for _, n, dt in tensors)
    dtype, size = tensors[0][2]
    big = max(n for _, n, _ in tensors)
    if cat == "elementwise":
        shapes = [s for s, _, _ in tensors]
        width = max(len(s) for s in shapes)
        out = 1
        for i in range(width):
            out *= max((s[len(s) - width + i] if len(s) - width + i >= 0 else 1) for s in shapes)
        copy = name in COPY_OPS
        flops = 0 if copy else out
        nbytes = read + (big if copy else out) * size
        model = "copy" if copy else "elementwise"
    else:
        flops = big
        nbytes = read + (big * size if re.search(r"norm|softmax", name) else 0)
        model = "reduction"
    return {"params": {}, "flops": flops, "matmul_flops": None, "bytes": nbytes, "dtype": dtype, "model": model}
