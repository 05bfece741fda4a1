"""`footprint kernels analyze`: PyTorch profiler (Kineto) traces.

Agreement with TraceLens' reference results beside the H100 traces (per-op GFLOPs, kernel time and
TFLOP/s of GEMM rows, GEMM totals, attention and convolution rows, GPU busy/idle/total time), every
other shared trace analysed without error, FLOP formulas and format variants on small synthetic
traces, energy attribution from a synthetic run directory, and the CLI.
"""

from __future__ import annotations

import gzip
import json
import math
import tarfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from footprint.cli import main
from footprint.errors import FootprintError
from footprint.kernels import intervals as IV
from footprint.kernels import reader as R
from footprint.kernels.trace import CATEGORIES, analyze_trace, render_table, to_json

H100 = [
    "gaunernst_bert-small-uncased__1016001",
    "Falconsai_nsfw_image_detection__1016002",
    "facebook_timesformer-base-finetuned-k400__1016002",
]
OTHERS = [
    "hta/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/tests/data/df_index_resolver/df_index_resolver.json.gz",
    "hta/tests/data/nccl_parser_config/nccl_data.json.gz",
    "hta/tests/data/negative_queue_length_values_check/rank0.json.gz",
    "hta/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/tests/data/trace_diff/control/control.json.gz",
    "hta/tests/data/trace_diff/test/test.json.gz",
    "hta/tests/data/trace_filter/sampled_rank-0.json.gz",
    "hta/tests/data/triton_example/triton_example.json.gz",
    "kineto-tbplugin/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto-tbplugin/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "param/et_replay/tests/inputs/linear_kineto.json.gz",
    "param/et_replay/tests/inputs/resnet_kineto.json.gz",
    "param/et_replay/tests/inputs/dlrm_kineto.tar.gz",
    "param/et_replay/tests/inputs/dlrm_kineto.tar.gz::worker5_step_12.1694128201549.pt.trace.json",
    "tracelens/tests/traces/b200/eager_trace.json.gz",
]


def _h100(shared: Path, name: str) -> tuple[Path, Path]:
    base = shared / "traces" / "tracelens" / "tests" / "traces" / "h100"
    return base / f"{name}.json.gz", base / f"{name}_perf_report_csvs"


def _analyse(path: str) -> dict[str, Any]:
    return analyze_trace(path, top=10_000)


@pytest.fixture(scope="module")
def analysed(shared: Path) -> dict[str, dict[str, Any]]:
    """Every shared trace analysed once, two at a time (2-core CI)."""
    paths = [str(_h100(shared, n)[0]) for n in H100] + [str(shared / "traces" / p) for p in OTHERS]
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_analyse, paths))
    return dict(zip(paths, results, strict=True))


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# ---------------------------------------------------------------------------------------------------
# Agreement with TraceLens
# ---------------------------------------------------------------------------------------------------
def test_bert_addmm_example(analysed: dict[str, dict[str, Any]], shared: Path) -> None:
    """VALIDATION.md: addmm M=141 N=30522 K=512 bf16 = 4.41119205 GFLOP in 41.28 us = 106.86 TFLOP/s."""
    r = analysed[str(_h100(shared, H100[0])[0])]
    row = next(o for o in r["ops"] if o["name"] == "aten::addmm" and o["params"]["N"] == 30522)
    assert (row["params"]["M"], row["params"]["K"], row["dtype"], row["count"]) == (141, 512, "bf16", 1)
    assert row["flops"] == 2 * 141 * 30522 * 512 + 141 * 30522 == 4_411_192_050  # TraceLens: 2MNK + MN
    assert row["matmul_flops"] == 2 * 141 * 30522 * 512
    assert row["kernel_time_us"] == pytest.approx(41.28, rel=1e-3)
    assert row["tflops_per_s"] == pytest.approx(106.86, rel=1e-3)
    assert row["bytes"] / 2**20 == pytest.approx(38.211021423339844, rel=1e-9)  # TraceLens' Data Moved (MB)
    assert row["pct_of_peak"] == pytest.approx(100 * 106.86 / 989.4, rel=1e-3)
    assert r["total_time_us"] / 1e3 == pytest.approx(3.9078, rel=1e-4)
    assert r["device"]["catalogue_id"] == "h100-sxm5-80gb" and r["device"]["peak_tflops"] == pytest.approx(989.4)


@pytest.mark.parametrize("name", H100)
def test_gpu_timeline_agrees_with_tracelens(analysed: dict[str, dict[str, Any]], shared: Path, name: str) -> None:
    path, csvs = _h100(shared, name)
    r = analysed[str(path)]
    ref = pd.read_csv(csvs / "gpu_timeline.csv").set_index("type")["time ms"] * 1e3
    assert _rel(r["busy_time_us"], ref["busy_time"]) < 0.01
    assert _rel(r["total_time_us"], ref["total_time"]) < 0.01
    assert _rel(r["idle_time_us"], ref["idle_time"]) < 0.01
    assert _rel(r["timeline"]["computation_us"], ref["computation_time"]) < 0.01
    assert abs(r["timeline"]["exposed_memcpy_us"] - ref["exposed_memcpy_time"]) <= 0.01 * ref["busy_time"]
    assert r["idle_time_us"] == pytest.approx(r["total_time_us"] - r["busy_time_us"])


@pytest.mark.parametrize("name", H100)
def test_gemm_rows_agree_with_tracelens(analysed: dict[str, dict[str, Any]], shared: Path, name: str) -> None:
    path, csvs = _h100(shared, name)
    r = analysed[str(path)]
    ref = pd.read_csv(csvs / "GEMM.csv")
    ref["key"] = list(zip(ref["name"], ref["param: M"], ref["param: N"], ref["param: K"], ref["param: B"], strict=True))
    ours: dict[tuple[Any, ...], list[float]] = {}
    for o in r["ops"]:
        if o["category"] == "gemm" and o["params"]:
            p = o["params"]
            acc = ours.setdefault((o["name"], p["M"], p["N"], p["K"], p["B"]), [0, 0.0, 0.0])
            acc[0] += o["count"]
            acc[1] += o["kernel_time_us"]
            acc[2] += o["flops"]
    assert set(ours) == set(ref["key"])
    for key, g in ref.groupby("key"):
        count, time_us, flops = ours[key]
        assert count == g["name_count"].sum()
        assert flops / count == pytest.approx(g["GFLOPS_first"].iloc[0] * 1e9, rel=1e-9)
        assert _rel(time_us, g["Kernel Time (µs)_sum"].sum()) < 0.01
        tl_tflops = g["GFLOPS_first"].iloc[0] * 1e9 * count / (g["Kernel Time (µs)_sum"].sum() * 1e-6) / 1e12
        assert _rel(flops / time_us / 1e6, tl_tflops) < 0.01
        if count == 1:
            assert _rel(flops / time_us / 1e6, g["TFLOPS/s_mean"].iloc[0]) < 0.01
    # GEMM totals
    tl_flops = (ref["GFLOPS_first"] * 1e9 * ref["name_count"]).sum()
    assert _rel(r["by_category"]["gemm"]["flops"], tl_flops) < 0.01
    assert _rel(r["by_category"]["gemm"]["time_with_flops_us"], ref["Kernel Time (µs)_sum"].sum()) < 0.01


@pytest.mark.parametrize("name", H100)
def test_attention_and_convolution_rows_agree_with_tracelens(
    analysed: dict[str, dict[str, Any]], shared: Path, name: str
) -> None:
    path, csvs = _h100(shared, name)
    r = analysed[str(path)]
    checked = 0
    for file, cat in (("SDPA_fwd.csv", "attention"), ("CONV_fwd.csv", "convolution")):
        if not (csvs / file).exists():
            continue
        ref = pd.read_csv(csvs / file)
        rows = [o for o in r["ops"] if o["category"] == cat and o["flops"] is not None]
        assert len(rows) == len(ref)
        for (_, want), got in zip(ref.iterrows(), sorted(rows, key=lambda o: -o["kernel_time_us"]), strict=True):
            assert got["name"] == want["name"] and got["count"] == want["name_count"]
            # TraceLens does not count the bias of aten::convolution; matmul_flops leaves it out too.
            assert got["matmul_flops"] / got["count"] == pytest.approx(want["GFLOPS_first"] * 1e9, rel=1e-9)
            assert _rel(got["kernel_time_us"], want["Kernel Time (µs)_sum"]) < 0.01
            assert got["bytes"] / got["count"] / 2**20 == pytest.approx(want["Data Moved (MB)_first"], rel=0.01)
            checked += 1
    assert checked >= 1


# ---------------------------------------------------------------------------------------------------
# Every other shared trace
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rel", OTHERS)
def test_every_shared_trace_is_analysed(analysed: dict[str, dict[str, Any]], shared: Path, rel: str) -> None:
    r = analysed[str(shared / "traces" / rel)]
    assert r["busy_time_us"] > 0 and r["busy_time_us"] <= r["total_time_us"] + 1e-6
    assert r["idle_time_us"] == pytest.approx(r["total_time_us"] - r["busy_time_us"])
    assert set(r["by_category"]) == set(CATEGORIES)
    kernel_time = sum(c["kernel_time_us"] for c in r["by_category"].values())
    assert kernel_time >= r["busy_time_us"] * 0.999  # the union never exceeds the sum
    for c in r["by_category"].values():
        if c["pct_of_peak"] is not None:
            assert 0 < c["pct_of_peak"] <= 100
    if r["device"]["catalogue_id"] is None:  # peaks "not available": null, never 0
        assert r["device"]["peak_tflops"] is None
        assert all(c["pct_of_peak"] is None for c in r["by_category"].values())
        assert all(o["pct_of_peak"] is None for o in r["ops"])
    json.loads(to_json(r))
    assert "GPU time" in render_table(r)


def test_device_is_the_kernels_device(analysed: dict[str, dict[str, Any]], shared: Path) -> None:
    base = shared / "traces"
    amd = analysed[str(base / OTHERS[0])]
    assert amd["device"]["index"] == 2 and amd["device"]["name"] == "AMD Radeon Graphics"
    assert amd["device"]["peak_tflops"] is None and amd["device"]["dtype_peaks"] is None
    assert any("not in the GPU catalogue" in w for w in amd["warnings"])
    v100 = analysed[str(base / "hta/tests/data/trace_diff/test/test.json.gz")]
    assert v100["device"]["index"] == 1 and v100["device"]["catalogue_id"] == "v100-sxm2-16gb"
    assert analysed[str(base / "hta/tests/data/trace_diff/control/control.json.gz")]["device"]["index"] == 3
    b200 = analysed[str(base / "tracelens/tests/traces/b200/eager_trace.json.gz")]
    assert b200["device"]["catalogue_id"] == "b200" and b200["by_category"]["gemm"]["flops"] > 0
    nodev = analysed[str(base / "hta/tests/data/trace_filter/sampled_rank-0.json.gz")]
    assert nodev["device"]["name"] is None and any("deviceProperties" in w for w in nodev["warnings"])


def test_legacy_and_archive_formats(analysed: dict[str, dict[str, Any]], shared: Path) -> None:
    base = shared / "traces"
    legacy = analysed[str(base / OTHERS[10])]  # 2021: Kernel/Runtime/Operator, lower-case 'external id'
    assert legacy["device"]["name"] == "Tesla V100-DGXS-32GB"
    assert legacy["by_category"]["convolution"]["count"] > 1000  # kernels linked to aten::convolution
    assert legacy["launch_overhead"]["launches_linked"] == legacy["launch_overhead"]["kernels"]
    assert any("Concrete Inputs" in w for w in legacy["warnings"])  # no stride/padding recorded: FLOPs n/a
    first = analysed[str(base / "param/et_replay/tests/inputs/dlrm_kineto.tar.gz")]
    assert "worker0" in first["trace"]["source"] and any("8 traces" in w for w in first["warnings"])
    picked = analysed[str(base / OTHERS[15])]
    assert "worker5" in picked["trace"]["source"]


# ---------------------------------------------------------------------------------------------------
# Small synthetic traces: formulas and format variants
# ---------------------------------------------------------------------------------------------------
BF16 = "c10::BFloat16"


def _op(
    name: str,
    ts: float,
    dur: float,
    dims: list[Any] | None = None,
    types: list[Any] | None = None,
    conc: list[Any] | None = None,
    ext: int = 0,
    tid: int = 1,
    cat: str = "cpu_op",
) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": ext}
    if dims is not None:
        args["Input Dims"] = dims
        args["Input type"] = types if types is not None else [BF16] * len(dims)
    if conc is not None:
        args["Concrete Inputs"] = conc
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launch(ts: float, corr: int, tid: int = 1, dur: float = 2.0, cat: str = "cuda_runtime") -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def _kernel(
    name: str,
    ts: float,
    dur: float,
    corr: int | None,
    device: int = 0,
    cat: str = "kernel",
    ext: int | None = None,
    ext_key: str = "External id",
) -> dict[str, Any]:
    args: dict[str, Any] = {"device": device, "stream": 7}
    if corr is not None:
        args["correlation"] = corr
    if ext is not None:
        args[ext_key] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": 7, "ts": ts, "dur": dur, "args": args}


H100_PROPS = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]


def _write(
    path: Path,
    events: list[dict[str, Any]],
    props: list[dict[str, Any]] | None = None,
    *,
    indent: int | None = None,
    tail: bool = False,
    extra: dict[str, Any] | None = None,
) -> Path:
    meta = {"schemaVersion": 1, "deviceProperties": H100_PROPS if props is None else props, **(extra or {})}
    doc = {**({} if tail else meta), "traceEvents": events, **(meta if tail else {})}
    text = json.dumps(doc, indent=indent)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _one(op: dict[str, Any], kernel: str = "sm90_xmma_gemm_bf16", children: list[dict[str, Any]] = ()) -> list:
    """An op that launches one 10 us kernel at ts + 1 (through its innermost child, if any)."""
    ts = op["ts"]
    return [op, *children, _launch(ts + 1, corr=int(ts) + 1), _kernel(kernel, ts + 5, 10.0, corr=int(ts) + 1)]


def _ops_by_name(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in r["ops"]}


def test_gemm_formulas_and_each_gemm_counted_once(tmp_path: Path) -> None:
    events = []
    events += _one(_op("aten::mm", 0, 20, [[64, 32], [32, 16]]))
    events += _one(_op("aten::bmm", 100, 20, [[4, 64, 32], [4, 32, 16]]))
    events += _one(_op("aten::baddbmm", 200, 20, [[4, 64, 16], [4, 64, 32], [4, 32, 16], [], []]))
    # aten::linear -> aten::addmm: the leaf (addmm) is counted, linear is not counted again
    events += _one(
        _op("aten::linear", 300, 30, [[64, 32], [16, 32], [16]]),
        children=[_op("aten::addmm", 300.5, 25, [[16], [64, 32], [32, 16], [], []])],
    )
    # aten::matmul launching its kernel itself (a leaf): counted with the matmul formula (batch broadcast)
    events += _one(_op("aten::matmul", 400, 20, [[2, 3, 64, 32], [32, 16]]))
    r = analyze_trace(_write(tmp_path / "g.json", events), top=100)
    ops = _ops_by_name(r)
    assert ops["aten::mm"]["flops"] == 2 * 64 * 16 * 32
    assert ops["aten::bmm"]["flops"] == 4 * 2 * 64 * 16 * 32
    assert ops["aten::baddbmm"]["flops"] == 4 * (2 * 64 * 16 * 32 + 64 * 16)
    assert ops["aten::addmm"]["flops"] == 2 * 64 * 16 * 32 + 64 * 16
    assert ops["aten::addmm"]["matmul_flops"] == 2 * 64 * 16 * 32
    assert "aten::linear" not in ops
    assert ops["aten::matmul"]["flops"] == 6 * 2 * 64 * 16 * 32
    g = r["by_category"]["gemm"]
    assert g["count"] == 5 and g["kernel_time_us"] == pytest.approx(50.0)
    assert g["flops"] == sum(ops[n]["flops"] for n in ("aten::mm", "aten::bmm", "aten::baddbmm", "aten::addmm", "aten::matmul"))
    assert g["flops_without_bias"] == g["flops"] - 64 * 16 - 4 * 64 * 16
    assert ops["aten::mm"]["bytes"] == (64 * 32 + 32 * 16 + 64 * 16) * 2
    assert ops["aten::mm"]["tflops_per_s"] == pytest.approx(2 * 64 * 16 * 32 / 10e-6 / 1e12)
    ridge = 989.4e12 / 3.35e12
    assert r["device"]["ridge_point_flops_per_byte"] == pytest.approx(ridge)
    assert ops["aten::mm"]["roofline"] == "memory-bound"


def test_linear_leaf_is_counted(tmp_path: Path) -> None:
    r = analyze_trace(_write(tmp_path / "l.json", _one(_op("aten::linear", 0, 20, [[8, 128, 64], [32, 64], [32]]))))
    (row,) = r["ops"]
    assert row["name"] == "aten::linear" and row["flops"] == 2 * 1024 * 32 * 64 + 1024 * 32


def test_convolution_and_attention_formulas(tmp_path: Path) -> None:
    conv = _op(
        "aten::convolution",
        0,
        50,
        [[4, 3, 224, 224], [768, 3, 16, 16], [768], [], [], [], [], [], []],
        conc=["", "", "", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    inner = _op(
        "aten::cudnn_convolution",
        1,
        40,
        [[4, 3, 224, 224], [768, 3, 16, 16], [], [], [], []],
        conc=["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1"],
    )
    events = _one(conv, kernel="cutlass_tensorop_bf16_s16816fprop_optimized", children=[inner])
    grad = _op(
        "aten::convolution_backward",
        100,
        50,
        [[4, 768, 14, 14], [4, 3, 224, 224], [768, 3, 16, 16], [], [], [], [], [], [], [], []],
        conc=["", "", "", "[768]", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, True]"],
    )
    events += _one(grad, kernel="sm90_xmma_wgrad_implicit_gemm")
    q = [2, 8, 1024, 64]
    fwd = _op(
        "aten::_scaled_dot_product_flash_attention",
        200,
        30,
        [q, q, q, [], [], [], []],
        conc=["", "", "", "0.", "True", "False", ""],
    )
    events += _one(
        fwd, kernel="flash_fwd_kernel", children=[_op("aten::_flash_attention_forward", 201, 25, [[2, 1024, 8, 64]] * 3)]
    )
    bwd = _op(
        "aten::_scaled_dot_product_flash_attention_backward",
        300,
        30,
        [q, q, q, q, q, [2, 8, 1024]] + [[]] * 9,
        conc=[""] * 11 + ["True"] + [""] * 3,
    )
    events += _one(bwd, kernel="flash_bwd_dq_dk_dv_loop_kernel")
    r = analyze_trace(_write(tmp_path / "c.json", events), top=100)
    ops = _ops_by_name(r)
    out = 4 * 768 * 14 * 14
    c = ops["aten::convolution"]
    assert c["params"]["output"] == [4, 768, 14, 14]
    assert c["matmul_flops"] == 2 * out * 3 * 16 * 16 == 924_844_032  # TraceLens' GFLOPS for this conv
    assert c["flops"] == c["matmul_flops"] + out  # bias
    assert "aten::cudnn_convolution" not in ops  # counted once, as aten::convolution
    cb = ops["aten::convolution_backward"]
    assert cb["flops"] == 2 * out * 3 * 16 * 16 + out  # weight grad + bias grad (no input grad: mask False)
    a = ops["aten::_scaled_dot_product_flash_attention"]
    assert a["params"]["causal"] is True and a["flops"] == 4 * 2 * 8 * 1024 * 1024 * 64 // 2
    assert "aten::_flash_attention_forward" not in ops
    b = ops["aten::_scaled_dot_product_flash_attention_backward"]
    assert b["flops"] == a["flops"] * 5 // 2
    assert r["by_category"]["attention"]["count"] == 2 and r["by_category"]["convolution"]["count"] == 2


def test_categories_and_estimates(tmp_path: Path) -> None:
    events = []
    events += _one(
        _op("aten::add", 0, 10, [[4, 1024], [1, 1024], []], [BF16, BF16, "Scalar"]),
        kernel="void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>",
    )
    events += _one(_op("aten::sum", 100, 10, [[4, 1024], []], [BF16, ""]), kernel="void at::native::reduce_kernel<512>")
    events += _one(_op("nccl:all_reduce", 200, 10, cat="user_annotation"), kernel="ncclDevKernel_AllReduce_Sum_f32")
    events += _one(_op("aten::index_select", 300, 10, [[10, 4], [3]], [BF16, "long int"]), kernel="indexSelectLargeIndex")
    events += [
        _op("aten::copy_", 400, 10),
        _launch(401, 999),
        _kernel("Memcpy HtoD (Pageable -> Device)", 405, 4.0, 999, cat="gpu_memcpy"),
    ]
    events[-1]["args"]["bytes"] = 4_000_000
    r = analyze_trace(_write(tmp_path / "e.json", events), top=100)
    cats = {c: v["count"] for c, v in r["by_category"].items() if v["count"]}
    assert cats == {"elementwise": 1, "reduction": 1, "communication": 1, "other": 1, "memcpy": 1}
    ops = _ops_by_name(r)
    assert ops["aten::add"]["flops"] == 4 * 1024 and ops["aten::add"]["bytes"] == (4096 + 1024 + 4096) * 2
    assert ops["aten::add"]["roofline"] == "memory-bound"
    assert ops["aten::sum"]["flops"] == 4096
    assert r["by_category"]["memcpy"]["tbytes_per_s"] == pytest.approx(4e6 / 4e-6 / 1e12)
    assert r["by_category"]["communication"]["flops"] is None  # not modelled: null, never 0
    assert r["timeline"]["total_communication_us"] == pytest.approx(10.0)


def test_launch_overhead(tmp_path: Path) -> None:
    events = []
    for i in range(5):  # 5 kernels of 3 us, each launched by a 6 us call: launch-bound and short
        ts = 100.0 * i
        events += [
            _op("aten::relu", ts, 20, [[8]]),
            _launch(ts + 1, 10 + i, dur=6.0),
            _kernel("vectorized_elementwise_kernel", ts + 10, 3.0, 10 + i),
        ]
    lo = analyze_trace(_write(tmp_path / "k.json", events))["launch_overhead"]
    assert lo["kernels"] == 5 and lo["launches_linked"] == 5 and lo["launch_bound_kernels"] == 5
    assert lo["short_kernels"] == 5 and lo["cpu_launch_time_us"] == pytest.approx(30.0)
    assert lo["launch_to_kernel_time_ratio"] == pytest.approx(2.0)
    assert lo["median_launch_to_start_us"] == pytest.approx(9.0) and lo["idle_gaps"] == 4


def test_legacy_names_fallback_and_device_choice(tmp_path: Path) -> None:
    # 2021 format: Operator / Runtime / Kernel, lower-case 'external id'; string tids
    legacy = [
        _op("aten::mm", 0, 20, [[64, 32], [32, 16]], ["float", "float"], cat="Operator", ext=5),
        _launch(1, 77, cat="Runtime"),
        _kernel("volta_sgemm_128x64_nn", 5, 10.0, 77, cat="Kernel", ext=5, ext_key="external id"),
    ]
    for e in legacy[:2]:
        e["tid"] = "1"
    r = analyze_trace(_write(tmp_path / "legacy.json.gz", legacy, [{"id": 0, "name": "Tesla V100-SXM2-16GB"}]))
    assert r["ops"][0]["name"] == "aten::mm" and r["ops"][0]["dtype"] == "fp32"
    assert r["device"]["catalogue_id"] == "v100-sxm2-16gb"
    # no launch event at all: the kernel is linked through its External id
    alone = [_op("aten::mm", 0, 20, [[64, 32], [32, 16]], ext=42), _kernel("gemm", 5, 10.0, None, ext=42)]
    assert analyze_trace(_write(tmp_path / "ext.json", alone))["ops"][0]["name"] == "aten::mm"
    # kernels on device 1: the second deviceProperties entry, not the first
    props = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"id": 1, "name": "NVIDIA H100 80GB HBM3"}]
    two = _one(_op("aten::mm", 0, 20, [[64, 32], [32, 16]]))
    two[-1]["args"]["device"] = 1
    two.append(_kernel("other_device_kernel", 50, 5.0, None, device=0))
    r = analyze_trace(_write(tmp_path / "dev.json", two, props))
    assert r["device"]["index"] == 1 and r["device"]["catalogue_id"] == "h100-sxm5-80gb"
    assert any("other devices" in w for w in r["warnings"])


def test_metadata_after_events_chunks_and_bare_arrays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _one(_op("aten::mm", 0, 20, [[64, 32], [32, 16]]))
    base = {"baseTimeNanoseconds": 1_751_410_836_000_000_000}
    want = analyze_trace(_write(tmp_path / "a.json", events, extra=base))
    monkeypatch.setattr(R, "_CHUNK", 7)  # every value straddles buffer refills
    for path in (
        _write(tmp_path / "b.json", events, extra=base, tail=True, indent=2),
        _write(tmp_path / "c.json.gz", events, extra=base, tail=True),
    ):
        got = analyze_trace(path)
        assert got["trace"]["base_time_ns"] == base["baseTimeNanoseconds"]
        assert got["device"]["catalogue_id"] == "h100-sxm5-80gb"
        assert got["ops"][0]["flops"] == want["ops"][0]["flops"] and got["busy_time_us"] == want["busy_time_us"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    r = analyze_trace(bare)
    assert r["ops"][0]["name"] == "aten::mm" and r["device"]["name"] is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["ph", "cat", "name", "ts", "x"]),
            st.one_of(
                st.integers(-(10**18), 10**18),
                st.floats(allow_nan=False),
                st.text(max_size=8),
                st.lists(st.integers(), max_size=3),
            ),
            max_size=5,
        ),
        max_size=12,
    ),
    st.dictionaries(st.text(min_size=1, max_size=5).filter(lambda k: k != "traceEvents"), st.integers(), max_size=3),
    st.sampled_from([None, 0, 3]),
    st.integers(1, 40),
    st.booleans(),
)
def test_reader_streams_any_layout(
    events: list[dict[str, Any]], meta: dict[str, Any], indent: int | None, chunk: int, tail: bool
) -> None:
    """Any layout and buffer size: the reader yields each event's fields as written, and the metadata."""
    import io

    doc = {**({} if tail else meta), "traceEvents": events, **(meta if tail else {})}
    old = R._CHUNK
    R._CHUNK = chunk
    try:
        reader = R.Reader(io.BytesIO(json.dumps(doc, indent=indent).encode()))
        got = list(reader.events())
    finally:
        R._CHUNK = old
    fields = ("ph", "cat", "name", "ts")
    assert [tuple(getattr(e, f) for f in fields) for e in got] == [tuple(e.get(f) for f in fields) for e in events]
    assert reader.meta == meta


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30)), max_size=30))
def test_union_and_subtract(spans: list[tuple[int, int]]) -> None:
    ivs = [(float(a), float(a + d)) for a, d in spans]
    merged = IV.union(ivs)
    covered = {t for a, b in ivs for t in range(int(a), int(b))}
    assert IV.length(merged) == len(covered)
    cut = [(10.0, 40.0), (60.0, 70.0)]
    rest = IV.subtract(cut, merged)
    assert IV.length(rest) == len({t for t in covered if not (10 <= t < 40 or 60 <= t < 70)})


# ---------------------------------------------------------------------------------------------------
# Energy attribution
# ---------------------------------------------------------------------------------------------------
def _run_dir(tmp: Path, r: dict[str, Any], period: float, watts: float = 300.0, offset_s: float = 0.0) -> Path:
    """A footprint run directory whose fake-NVML samples cover the trace's time span."""
    from meters.fake_nvml import FakeNVML, ManualClock

    base = r["trace"]["base_time_ns"] / 1e9
    w0, w1 = base + r["trace"]["start_us"] / 1e6, base + r["trace"]["end_us"] / 1e6
    clock = ManualClock(0.0)
    nvml = FakeNVML("1xH100-SXM5-80GB", clock=clock, power=watts)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    uuid = nvml.nvmlDeviceGetUUID(h)
    start = w0 - 0.25 + offset_s
    rows, e0, t = [], None, 0.0
    while start + t < w1 + 0.25 + offset_s:
        e = nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000
        e0 = e if e0 is None else e0
        rows.append(
            {
                "rank": 0,
                "host": "node",
                "uuid": uuid,
                "component": "gpu",
                "t_s": t,
                "energy_j": e - e0,
                "power_w": nvml.nvmlDeviceGetPowerUsage(h) / 1000,
            }
        )
        clock.advance(period)
        t += period
    (tmp / "ranks").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(tmp / "samples.parquet", index=False)
    (tmp / "ranks" / "rank-00000.json").write_text(json.dumps({"rank": 0, "start_unix": start}))
    (tmp / "run.json").write_text(
        json.dumps(
            {
                "devices": [
                    {"index": 0, "uuid": uuid, "component": "gpu", "name": "NVIDIA H100 80GB HBM3", "method": "energy_counter"}
                ]
            }
        )
    )
    return tmp


def test_energy_attribution(analysed: dict[str, dict[str, Any]], shared: Path, tmp_path: Path) -> None:
    path = str(_h100(shared, H100[2])[0])  # timesformer: 160 ms of kernels on one stream
    r0 = analysed[path]
    fine = analyze_trace(path, power=_run_dir(tmp_path / "fine", r0, period=0.001))
    p = fine["power"]
    span = r0["total_time_us"] / 1e6
    assert p["energy_in_trace_window_j"] == pytest.approx(300 * span, rel=1e-3)
    assert p["idle_j"] == pytest.approx(300 * r0["idle_time_us"] / 1e6, rel=0.01)
    for c in CATEGORIES:  # constant power: energy follows kernel time
        assert p["by_category_j"][c] == pytest.approx(300 * r0["by_category"][c]["kernel_time_us"] / 1e6, rel=1e-3, abs=1e-4)
        assert fine["by_category"][c]["energy_j"] == p["by_category_j"][c]
    assert fine["by_category"]["gemm"]["gflops_per_j"] > 0
    assert p["sample_period_s"] == pytest.approx(0.001, rel=1e-3) and p["sample_period_over_median_kernel"] > 10
    coarse = analyze_trace(path, power=_run_dir(tmp_path / "coarse", r0, period=0.1))["power"]
    assert coarse["energy_in_trace_window_j"] == pytest.approx(300 * span, rel=1e-3)
    assert coarse["sample_period_over_median_kernel"] > 1000 and "every 100 ms" in coarse["coarseness"]
    assert coarse["outside_trace_j"] > 0
    with pytest.raises(FootprintError, match="do not overlap"):
        analyze_trace(path, power=_run_dir(tmp_path / "late", r0, period=0.1, offset_s=3600))
    with pytest.raises(FootprintError, match="samples.parquet"):
        analyze_trace(path, power=tmp_path)
    rel = analyze_trace(_write(tmp_path / "rel.json", _one(_op("aten::mm", 0, 20, [[4, 4], [4, 4]]))))
    with pytest.raises(FootprintError, match="baseTimeNanoseconds"):
        analyze_trace(tmp_path / "rel.json", power=tmp_path / "fine")
    assert rel["ops"]


# ---------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------
def test_cli(shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_h100(shared, H100[0])[0])
    assert main(["kernels", "analyze", path, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "aten::addmm" in out and "gemm" in out and "Launch overhead" in out
    assert main(["kernels", "analyze", path, "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["ops"]) == min(20, data["ops_total"]) == 16 and data["busy_time_us"] > 0
    assert not any(isinstance(v, float) and math.isnan(v) for v in data["by_category"]["gemm"].values())
    capsys.readouterr()
    assert main(["kernels", "analyze", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "notatrace.json").write_text('{"name": "run"}')
    assert main(["kernels", "analyze", str(tmp_path / "notatrace.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.json: no such file" in err and "traceEvents" in err and len(err.strip().splitlines()) == 2


def test_archive_member_errors(tmp_path: Path) -> None:
    inner = _write(tmp_path / "w0.json", _one(_op("aten::mm", 0, 20, [[4, 4], [4, 4]])))
    with tarfile.open(tmp_path / "a.tar.gz", "w:gz") as tf:
        tf.add(inner, arcname="traces/w0.json")
    assert analyze_trace(f"{tmp_path / 'a.tar.gz'}::w0.json")["ops"][0]["name"] == "aten::mm"
    with pytest.raises(FootprintError, match="no trace named"):
        analyze_trace(f"{tmp_path / 'a.tar.gz'}::w9.json")
    trunc = tmp_path / "trunc.json"
    trunc.write_text(json.dumps({"traceEvents": _one(_op("aten::mm", 0, 20, [[4, 4], [4, 4]]))})[:-40])
    r = analyze_trace(trunc)
    assert any("ends early" in w for w in r["warnings"])
