"""Kernel benchmarks (footprint kernels bench), efficiency profiles and the MFU predicted from them."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _paths import REPO

from footprint.errors import FootprintError
from footprint.flops import transformer_flops
from footprint.kernels.profile import (
    REMAINDER_ELEMENTS_PER_LAYER,
    interpolate,
    load_profile,
    predict,
    predict_for_scenario,
    profile_from_dict,
)
from footprint.lca.database import db

H100 = "H100-SXM5-80GB"
H100_BF16 = 989.4  # dense, lca_data/gpus.yaml
MODEL = {"parameters": 7.0e9, "tokens": 1.0e12, "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096}


# ---- the bench, through the real CLI ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("bench") / "profile.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "kernels", "bench", "--device", "cpu", "--quick", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return out, proc


def test_cli_quick_cpu_bench_writes_a_valid_verified_profile(cpu_profile: Any) -> None:
    out, proc = cpu_profile
    # 1 only when some timings were noise on a busy machine (they are kept, marked, never used)
    assert proc.returncode == 0 or (proc.returncode == 1 and "are noise" in proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"wrote {out}" in proc.stdout
    raw = yaml.safe_load(out.read_text())
    assert raw["device"]["kind"] == "cpu" and raw["torch"]
    assert raw["meter"]["method"] in ("rapl", "estimated")
    assert raw["meter"]["measured"] is (raw["meter"]["method"] == "rapl")
    results = raw["results"]
    ops = {r["op"] for r in results}
    assert {"gemm", "attention", "elementwise"} <= ops
    assert sum(r["op"] == "gemm" for r in results) >= 5
    assert raw["settings"]["threads"] >= 1 and "loaded" in raw["machine"]
    for r in results:
        assert r["correct"] is True, r
        assert r["verified"] is (r.get("timing_note") is None)
        assert r["max_rel_error"] <= r["tolerance"]
        assert r["median_s"] > 0 and r["iqr_s"] >= 0 and r["reps"] >= 3
        assert r["pct_of_peak"] is None  # no CPU peak in the catalogue: not available, never 0
        if r["op"] != "elementwise":
            assert r["achieved_tflops"] == pytest.approx(r["flops"] / r["median_s"] / 1e12, rel=1e-3)
            if r["energy_j"] is not None:
                assert r["j_per_tflop"] == pytest.approx(r["energy_j"] / (r["flops"] / 1e12), rel=1e-3)
    gemm = next(r for r in results if r["op"] == "gemm" and r["shape"] == {"M": 512, "N": 512, "K": 512})
    assert gemm["flops"] == 2 * 512**3
    prof = load_profile(out)  # the loader accepts what the bench writes
    assert len(prof.results) == len(results) and prof.kind == "cpu"


def test_cpu_profile_applied_to_a_gpu_scenario_is_an_error(cpu_profile: Any) -> None:
    out, proc = cpu_profile
    assert proc.returncode in (0, 1)
    with pytest.raises(FootprintError, match="measured on a CPU") as exc:
        predict_for_scenario(out, MODEL, db().find_gpu(H100), "fp32")
    assert exc.value.file == str(out) and exc.value.key == "device.kind"


def _bench_args(out: Path, **kw: Any) -> argparse.Namespace:
    return argparse.Namespace(device="cpu", quick=True, dtypes=None, output=str(out), **({"threads": 1} | kw))


QUIET = {"cpus": 2, "load1": 0.0, "busy_processes": [], "loaded": False, "reasons": []}


@pytest.fixture
def fast_bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The quick CPU sweep cut to a few shapes, and no codecarbon lookup (a fixed 10 W TDP)."""
    pytest.importorskip("torch")
    from footprint.kernels import bench
    from meters import cpu_estimate

    fixed = lambda include_ram=True: cpu_estimate.HostEstimate(cpu_model="test CPU", tdp_w=10.0)  # noqa: E731
    monkeypatch.setattr(cpu_estimate, "fast_estimate", fixed)  # the default resolver
    monkeypatch.setattr(cpu_estimate, "codecarbon_estimate", fixed)
    small = {
        "gemm": [{"M": 64, "N": 64, "K": 64}, {"M": 128, "N": 256, "K": 64}],
        "attention": [{"b": 1, "h": 2, "s": 64, "d": 32, "causal": True}],
        "elementwise": [{"n": 4096}],
    }
    monkeypatch.setattr(bench, "sweep", lambda device, quick: small)
    # these tests are about correctness: a shared CI machine's noise must not make them flaky
    monkeypatch.setattr(bench, "CI_TARGET", 1e9)
    monkeypatch.setattr(bench, "NOISY_IQR", 1e9)
    monkeypatch.setattr(bench, "load", lambda window=0.5: QUIET)
    return bench


def test_verification_gate_catches_a_wrong_matmul(
    fast_bench: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    def wrong(a: Any, b: Any) -> Any:
        c = torch.matmul(a, b)
        c[0, 0] += 0.01 * float(c.abs().max())  # one element off by 1 % of the largest
        return c

    monkeypatch.setattr(fast_bench, "_matmul", wrong)
    out = tmp_path / "p.yaml"
    rc = fast_bench.main_bench(_bench_args(out))
    assert rc == 1  # written, but flagged
    assert "failed verification" in capsys.readouterr().err
    prof = load_profile(out)
    gemms = [r for r in prof.results if r.op == "gemm"]
    assert gemms and all(not r.verified for r in gemms)
    assert all(r.verified for r in prof.results if r.op != "gemm")  # SDPA and add are not patched
    raw = yaml.safe_load(out.read_text())
    assert all(r["max_rel_error"] > r["tolerance"] for r in raw["results"] if r["op"] == "gemm")
    assert prof.usable("gemm", "fp32") == []  # never used for prediction


def test_correct_small_bench_in_process_and_causal_attention(fast_bench: Any, tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    assert fast_bench.main_bench(_bench_args(out)) == 0
    raw = yaml.safe_load(out.read_text())
    att = [r for r in raw["results"] if r["op"] == "attention"]
    assert [r["pass"] for r in att] == ["fwd", "bwd"]
    assert att[0]["flops"] == 0.5 * 4 * 1 * 2 * 64 * 64 * 32  # causal: half of 4 b h s^2 d
    assert att[1]["flops"] == 2 * att[0]["flops"]
    assert raw["meter"]["method"] == "rapl" or raw["meter"]["tdp_w"] == 10.0


def test_bad_bench_arguments_exit_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "kernels", "bench", "--dtypes", "bf16,int4", "-o", "never.yaml"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--dtypes: unknown dtype 'int4'" in proc.stderr
    assert not (REPO / "never.yaml").exists()


def test_bad_bench_arguments_in_process() -> None:
    torch = pytest.importorskip("torch")
    from footprint.kernels import bench

    with pytest.raises(FootprintError, match="tf32 is a CUDA"):
        bench.resolve_dtypes("tf32", "cpu", False)
    if not torch.cuda.is_available():
        with pytest.raises(FootprintError, match="no CUDA GPU") as exc:
            bench.main_bench(argparse.Namespace(device="cuda", quick=True, dtypes=None, output="never.yaml"))
        assert exc.value.key == "--device"
    assert bench.tolerance("bf16", 4096) == pytest.approx(2e-2)
    assert bench.tolerance("fp32", 256) == 1e-5


# ---- the composition, on profiles of known numbers ---------------------------------------------------


def _gemm(
    m: int, n: int, k: int, pct: float, dtype: str = "bf16", peak: float = H100_BF16, verified: bool = True
) -> dict[str, Any]:
    return {
        "op": "gemm",
        "shape": {"M": m, "N": n, "K": k},
        "dtype": dtype,
        "verified": verified,
        "achieved_tflops": peak * pct / 100,
    }


def _attn(pass_: str, s: int, pct: float, causal: bool = False, peak: float = H100_BF16) -> dict[str, Any]:
    return {
        "op": "attention",
        "pass": pass_,
        "shape": {"b": 16384 // s, "h": 16, "s": s, "d": 128, "causal": causal},
        "dtype": "bf16",
        "verified": True,
        "achieved_tflops": peak * pct / 100,
    }


def _profile(results: list[dict[str, Any]], name: str = "NVIDIA H100 80GB HBM3", peak: float = H100_BF16) -> dict[str, Any]:
    return {
        "footprint_profile": 1,
        "device": {"name": name, "kind": "cuda", "peak_tflops": {"bf16": peak}},
        "meter": {"method": "energy_counter", "measured": True},
        "results": results,
    }


def _known(causal: bool = False, gemm_pct: float = 50.0, attn_pct: float = 25.0) -> dict[str, Any]:
    """Every GEMM at exactly gemm_pct % of peak (over a wide range of shapes), attention at attn_pct %."""
    gemms = [_gemm(n, n, n, gemm_pct) for n in (64, 256, 1024, 8192, 32768)]
    gemms += [_gemm(4096, 16384, 4096, gemm_pct), _gemm(4096, 4096, 16384, gemm_pct)]
    atts = [_attn(p, s, attn_pct, causal) for p in ("fwd", "bwd") for s in (512, 4096, 16384)]
    return _profile(gemms + atts)


def test_mfu_is_the_flop_weighted_harmonic_mean_of_the_efficiencies() -> None:
    gpu = db().find_gpu(H100)
    pred = predict(profile_from_dict(_known()), MODEL, gpu, "bf16")
    n, L, h, s = MODEL["parameters"], MODEL["layers"], MODEL["hidden"], MODEL["seq_len"]
    f_gemm, f_attn = 6 * n, 12 * L * h * s  # per token
    by_hand = (f_gemm + f_attn) / (f_gemm / 0.50 + f_attn / 0.25)
    assert pred.mfu == pytest.approx(by_hand, rel=1e-12)
    assert pred.mfu == pytest.approx(0.44131, abs=1e-5)
    fl = transformer_flops(n, MODEL["tokens"], layers=L, hidden=h, seq_len=s)
    assert pred.flops == fl.flops
    assert pred.gpu_hours == pytest.approx(fl.flops / (H100_BF16 * 1e12 * pred.mfu) / 3600, rel=1e-12)
    # the step: 4096 tokens; its time is the sum over ops; shares rank the limiting ops
    assert pred.tokens_per_step == s
    assert pred.step_time_s == pytest.approx((f_gemm / 0.5 + f_attn / 0.25) * s / (H100_BF16 * 1e12), rel=1e-12)
    assert sum(pred.time_by_op.values()) == pytest.approx(pred.step_time_s)
    shares = [x["time_share"] for x in pred.limiting]
    assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(1.0)
    att = next(x for x in pred.limiting if x["op"] == "attention")
    assert att["time_share"] == pytest.approx((f_attn / 0.25) / (f_gemm / 0.5 + f_attn / 0.25))
    assert {x["op"] for x in pred.limiting} == {"qkv", "attn_proj", "mlp_up", "mlp_down", "attention"}
    assert "GEMM 50% of peak, attention 25%" in pred.method
    assert pred.efficiency_by_kind == pytest.approx({"gemm": 0.5, "attention": 0.25})
    assert any("non-matmul remainder" in x and "not counted" in x for x in pred.notes)


def test_causal_attention_executes_half_the_model_flops() -> None:
    pred = predict(profile_from_dict(_known(causal=True)), MODEL, db().find_gpu(H100), "bf16")
    f_gemm, f_attn = 6 * MODEL["parameters"], 12 * 32 * 4096 * 4096
    assert pred.mfu == pytest.approx((f_gemm + f_attn) / (f_gemm / 0.5 + 0.5 * f_attn / 0.25), rel=1e-12)


def test_non_matmul_remainder_uses_the_measured_bandwidth() -> None:
    data = _known()
    gbs = 2000.0
    data["results"].append({"op": "elementwise", "shape": {"n": 1 << 26}, "dtype": "bf16", "verified": True, "achieved_gbs": gbs})
    model = dict(MODEL, vocab_size=32000)
    pred = predict(profile_from_dict(data), model, db().find_gpu(H100), "bf16")
    n, L, h, s, V = 7.0e9, 32, 4096, 4096, 32000
    peak = H100_BF16 * 1e12
    t_kernels = (6 * n / 0.5 + 12 * L * h * s / 0.25) * s / peak  # GEMMs scaled to 6N (the LM head included)
    t_rem = (REMAINDER_ELEMENTS_PER_LAYER * h * L + 4 * V) * s * 2 / (gbs * 1e9)
    assert pred.time_by_op["non_matmul"] == pytest.approx(t_rem, rel=1e-12)
    assert pred.step_time_s == pytest.approx(t_kernels + t_rem, rel=1e-12)
    assert pred.mfu == pytest.approx((6 * n + 12 * L * h * s) * s / ((t_kernels + t_rem) * peak), rel=1e-12)
    assert "lm_head" in pred.time_by_op


def test_interpolation_in_log_arithmetic_intensity() -> None:
    pts = [(10.0, 0.4, "a"), (1000.0, 0.6, "b")]
    assert interpolate(pts, 100.0).value == pytest.approx(0.5)
    assert not interpolate(pts, 100.0).extrapolated
    lo, hi = interpolate(pts, 1.0), interpolate(pts, 1e6)
    assert (lo.value, lo.extrapolated, hi.value, hi.extrapolated) == (0.4, True, 0.6, True)
    assert interpolate(pts, 1000.0).extrapolated is False
    assert interpolate([(10.0, 0.2, "x"), (10.0, 0.4, "y")], 10.0).value == pytest.approx(0.3)
    # a GEMM op lands between two measured shapes: 50 % and 70 % around it
    data = _profile([_gemm(256, 256, 256, 50.0), _gemm(16384, 16384, 16384, 70.0)])
    pred = predict(
        profile_from_dict(data), {"parameters": 7e9, "tokens": 1e12, "layers": 32, "hidden": 4096}, db().find_gpu(H100), "bf16"
    )
    effs = {o.efficiency for o in pred.ops}
    assert all(0.5 < e < 0.7 for e in effs)
    assert any("seq_len not given" in x for x in pred.notes)


def test_failed_results_are_never_used() -> None:
    data = _profile(
        [_gemm(n, n, n, 50.0) for n in (256, 4096, 16384)] + [_gemm(n, n, n, 99.0, verified=False) for n in (256, 4096, 16384)]
    )
    pred = predict(profile_from_dict(data), MODEL, db().find_gpu(H100), "bf16")
    assert pred.efficiency_by_kind["gemm"] == pytest.approx(0.5)
    only_bad = _profile([_gemm(4096, 4096, 4096, 99.0, verified=False)])
    with pytest.raises(FootprintError, match="no verified result in bf16"):
        predict(profile_from_dict(only_bad), MODEL, db().find_gpu(H100), "bf16")


def test_profile_from_another_gpu_carries_efficiencies_over_and_says_so() -> None:
    a100 = 312.0
    data = _known()
    for r in data["results"]:
        r["achieved_tflops"] *= a100 / H100_BF16
    data["device"] = {"name": "NVIDIA A100-SXM4-80GB", "kind": "cuda", "peak_tflops": {"bf16": a100}}
    on_h100 = predict(profile_from_dict(data), MODEL, db().find_gpu(H100), "bf16")
    same = predict(profile_from_dict(_known()), MODEL, db().find_gpu(H100), "bf16")
    assert on_h100.mfu == pytest.approx(same.mfu, rel=1e-9)
    note = next(x for x in on_h100.notes if "applied to NVIDIA H100" in x)
    assert "ratio of dense peaks 3.17x" in note
    assert not any("applied to" in x for x in same.notes)


def test_no_attention_measured_falls_back_to_batched_gemms() -> None:
    data = _profile([_gemm(n, n, n, 40.0) for n in (64, 1024, 16384)])
    pred = predict(profile_from_dict(data), MODEL, db().find_gpu(H100), "bf16")
    assert pred.mfu == pytest.approx(0.40, rel=1e-9)
    assert any("modelled as its batched GEMMs" in x for x in pred.notes)


# ---- scenarios, end to end ---------------------------------------------------------------------------


def _write_scenario(tmp_path: Path, profile: dict[str, Any] | str, extra_training: str = "") -> Path:
    (tmp_path / "profiles").mkdir(exist_ok=True)
    p = tmp_path / "profiles" / "h100.yaml"
    p.write_text(profile if isinstance(profile, str) else yaml.safe_dump(profile))
    sc = tmp_path / "scenario.yaml"
    sc.write_text(f"""name: kernel-profile test
model: {{parameters: 7.0e+9, tokens: 1.0e+12, layers: 32, hidden: 4096, heads: 32, seq_len: 4096}}
hardware: {{gpu: {H100}, count: 64}}
training:
  kernel_profile: profiles/h100.yaml
  dtype: bf16
  power_per_gpu: 600 W
{extra_training}site: {{grid: FRA, pue: 1.2}}
""")
    return sc


def test_scenario_with_kernel_profile_assesses_end_to_end(tmp_path: Path) -> None:
    from footprint.builders import load_scenario
    from footprint.lca.engine import assess

    sc = _write_scenario(tmp_path, _known())
    w = load_scenario(sc)
    fl = transformer_flops(7.0e9, 1.0e12, layers=32, hidden=4096, seq_len=4096).flops
    f_gemm, f_attn = 6 * 7.0e9, 12 * 32 * 4096 * 4096
    mfu = (f_gemm + f_attn) / (f_gemm / 0.5 + f_attn / 0.25)
    assert w.mfu == pytest.approx(mfu, rel=1e-12)
    assert w.flops == fl
    assert w.gpu_hours == pytest.approx(fl / (H100_BF16 * 1e12 * mfu) / 3600, rel=1e-12)
    assert w.it_energy_kwh == pytest.approx(w.gpu_hours * 0.6)
    assert w.mfu_method.startswith("predicted from kernel profile h100.yaml")
    a = assess(w, samples=0)
    assert a["climate_change"].total > 0
    assert any("kernel-level prediction" in x for x in a.warnings)
    proc = subprocess.run([sys.executable, "-m", "footprint.cli", "assess", str(sc)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert f"MFU: {mfu:.1%}" in proc.stdout and "kernel profile" in proc.stdout


@pytest.mark.parametrize(
    "mutate, key, pattern",
    [
        (lambda d: d.pop("results"), "results", "missing or empty"),
        (lambda d: d["device"].update(kind="tpu"), "device.kind", "must be one of cuda, cpu"),
        (lambda d: d["results"][0].update(op="conv"), "results[0].op", "must be one of gemm"),
        (lambda d: d["results"][1]["shape"].update(M=-4), "results[1].shape.M", "positive integer"),
        (lambda d: d["results"][2]["shape"].pop("K"), "results[2].shape.K", "missing"),
        (lambda d: d["results"][0].pop("verified"), "results[0].verified", "true or false"),
        (lambda d: d["results"][0].update(dtype="bf17"), "results[0].dtype", "unknown dtype"),
        (lambda d: d["results"][0].update(achieved_tflops="fast"), "results[0].achieved_tflops", "must be a number"),
        (lambda d: d["results"][0].update(pct_of_peak=80.0), "results[0].pct_of_peak", "disagrees"),
        (lambda d: d["results"][0].update(achieved_tflops=1978.9), "results[0].pct_of_peak", "above 100 %"),
        (lambda d: d["results"][-1].update({"pass": "both"}), "results[12].pass", "fwd or bwd"),
        (lambda d: d.update(footprint_profile=7), "footprint_profile", "unsupported profile format"),
    ],
)
def test_bad_profiles_name_the_file_and_key(tmp_path: Path, mutate: Any, key: str, pattern: str) -> None:
    data = _known()
    mutate(data)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(FootprintError, match=pattern) as exc:
        load_profile(p)
    assert exc.value.file == str(p) and exc.value.key == key
    assert str(exc.value).startswith(f"{p}: {key}: ")


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("results: [unclosed", "line 2, column 1: malformed YAML"),
        ("", "empty file"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
def test_unreadable_profiles(tmp_path: Path, text: str, pattern: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(FootprintError, match=pattern):
        load_profile(p)


def test_scenario_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    from footprint.builders import load_scenario

    sc = _write_scenario(tmp_path, _known())
    (tmp_path / "profiles" / "h100.yaml").unlink()
    proc = subprocess.run([sys.executable, "-m", "footprint.cli", "assess", str(sc)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "h100.yaml: training.kernel_profile: no such kernel profile file" in proc.stderr

    sc = _write_scenario(tmp_path, _known())
    fp16 = tmp_path / "fp16.yaml"
    fp16.write_text(sc.read_text().replace("dtype: bf16", "dtype: fp16"))
    with pytest.raises(FootprintError, match="no verified result in fp16; the profile has bf16"):
        load_scenario(fp16)
    both = _write_scenario(tmp_path, _known(), extra_training="  mfu: 0.4\n")
    with pytest.raises(FootprintError, match="exactly one way"):
        load_scenario(both)


def test_mfu_above_one_is_refused() -> None:
    # causal attention at 100 % of peak on half the FLOPs reads as 200 % in model FLOPs
    data = _profile([_gemm(n, n, n, 100.0) for n in (256, 16384)] + [_attn(p, 4096, 100.0, causal=True) for p in ("fwd", "bwd")])
    with pytest.raises(FootprintError, match="outside"):
        predict(profile_from_dict(data), MODEL, db().find_gpu(H100), "bf16")
    assert math.isfinite(predict(profile_from_dict(_known()), MODEL, db().find_gpu(H100), "bf16").mfu)


def test_prediction_is_bounded_by_the_kernel_efficiencies() -> None:
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    gpu = db().find_gpu(H100)
    pct = st.floats(min_value=1.0, max_value=100.0)

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(pct, min_size=3, max_size=3), st.lists(pct, min_size=2, max_size=2), st.integers(min_value=512, max_value=32768)
    )
    def check(gemm_pcts: list[float], attn_pcts: list[float], seq: int) -> None:
        data = _profile(
            [_gemm(n, n, n, p) for n, p in zip((128, 2048, 32768), gemm_pcts, strict=True)]
            + [_attn(ps, 4096, p) for ps, p in zip(("fwd", "bwd"), attn_pcts, strict=True)]
        )
        pred = predict(profile_from_dict(data), dict(MODEL, seq_len=seq), gpu, "bf16")
        effs = [p / 100 for p in gemm_pcts + attn_pcts]
        assert min(effs) * (1 - 1e-9) <= pred.mfu <= max(effs) * (1 + 1e-9)
        assert pred.gpu_hours == pytest.approx(pred.flops / (H100_BF16 * 1e12 * pred.mfu) / 3600, rel=1e-12)
        json.dumps(pred.to_dict())

    check()


# ---- a busy machine ------------------------------------------------------------------------------------


def test_a_loaded_machine_is_detected() -> None:
    from footprint.kernels import machine

    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 20: pass"])
    try:
        state = machine.load(window=1.0)
    finally:
        spin.kill()
        spin.wait()
    assert state["loaded"] is True
    assert any(b["pid"] == spin.pid and b["cpu_percent"] > machine.BUSY_PROCESS_CPU for b in state["busy_processes"])
    assert any("busy process" in r for r in state["reasons"])
    assert 1 <= machine.physical_cores() <= len(machine.affinity())


def test_median_confidence_interval() -> None:
    from footprint.kernels.machine import ci_rel, median_ci

    tight = [1.0 + 0.001 * (i % 5) for i in range(50)]
    assert median_ci(tight)[0] == pytest.approx(1.002) and ci_rel(tight) < 0.01
    spread = [1.0, 3.0] * 25
    assert ci_rel(spread) >= 0.5  # half the calls three times slower: the median is not known
    assert median_ci([2.0, 1.0, 3.0]) == (2.0, 1.0, 3.0)  # too few: the whole range


def test_noise_is_never_written_as_verified(
    fast_bench: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import itertools
    import time

    import torch

    from footprint.kernels import machine

    monkeypatch.setattr(fast_bench, "CI_TARGET", machine.CI_TARGET)
    monkeypatch.setattr(fast_bench, "NOISY_IQR", 0.25)
    loaded = {**QUIET, "load1": 7.5, "loaded": True, "reasons": ["load average 7.50 on 2 usable CPUs"]}
    monkeypatch.setattr(fast_bench, "load", lambda window=0.5: loaded)
    delays = itertools.cycle([0.0, 0.0, 0.004, 0.0, 0.008])  # another process taking the CPU now and then

    def jittery(a: Any, b: Any) -> Any:
        time.sleep(next(delays))
        return torch.matmul(a, b)

    monkeypatch.setattr(fast_bench, "_matmul", jittery)
    out = tmp_path / "p.yaml"
    assert fast_bench.main_bench(_bench_args(out, threads=1)) == 1
    err = capsys.readouterr().err
    assert "the machine is loaded (load average 7.50" in err and "are noise" in err
    raw = yaml.safe_load(out.read_text())
    gemms = [r for r in raw["results"] if r["op"] == "gemm"]
    assert all(r["correct"] and not r["verified"] and "noise" in r["timing_note"] for r in gemms)
    assert raw["machine"]["loaded"] is True and raw["settings"]["threads"] == 1
    assert load_profile(out).usable("gemm", "fp32") == []


def test_threads_argument() -> None:
    from footprint.kernels import bench, machine

    assert bench.resolve_threads(None) == machine.physical_cores()
    assert bench.resolve_threads(3) == 3
    for bad in (0, -2, True):
        with pytest.raises(FootprintError, match="--threads"):
            bench.resolve_threads(bad)
