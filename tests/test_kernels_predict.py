"""`footprint kernels predict`: a CPU profile predicts a training step on its own CPU, checked against a measured one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from footprint.cli import main
from footprint.errors import FootprintError
from footprint.kernels.profile import profile_from_dict
from footprint.kernels.selfcheck import EXAMPLE, build_model, parameters, parse_model, predict_step


def _cpu_profile(tflops: float = 0.05, gbs: float = 5.0) -> dict[str, Any]:
    """A CPU profile whose every GEMM and attention result runs at `tflops`, elementwise at `gbs`."""
    gemms = [{"M": n, "N": n, "K": n} for n in (64, 512, 2048)]
    res: list[dict[str, Any]] = [
        {"op": "gemm", "shape": g, "dtype": "fp32", "verified": True, "achieved_tflops": tflops} for g in gemms
    ]
    for p in ("fwd", "bwd"):
        res.append(
            {
                "op": "attention",
                "pass": p,
                "shape": {"b": 1, "h": 4, "s": 64, "d": 32},
                "dtype": "fp32",
                "verified": True,
                "achieved_tflops": tflops,
            }
        )
    res.append({"op": "elementwise", "shape": {"n": 1 << 20}, "dtype": "fp32", "verified": True, "achieved_gbs": gbs})
    res.append({"op": "gemm", "shape": {"M": 8, "N": 8, "K": 8}, "dtype": "fp32", "verified": False, "achieved_tflops": 1e3})
    return {"device": {"name": "test CPU", "kind": "cpu", "threads": 1}, "results": res}


def test_prediction_is_flops_over_measured_rates() -> None:
    shape = dict(EXAMPLE)
    pred = predict_step(profile_from_dict(_cpu_profile(tflops=0.05, gbs=5.0)), shape)
    T, h, L, V, s = 8 * 64, 128, 2, 1000, 64
    gemm_flops = 3 * 2 * T * (L * (3 * h * h + h * h + 4 * h * h + 4 * h * h) + h * V)  # fwd, dX, dW
    attn_flops = 3 * 4.0 * 8 * h * s * s * L  # forward, and backward 2x
    bytes_ = ((54 * h * L + 4 * V) * T + 10 * parameters(shape)) * 4
    want = (gemm_flops + attn_flops) / 0.05e12 + bytes_ / 5e9
    assert pred["step_time_s"] == pytest.approx(want, rel=1e-9)  # the unverified 1000 TFLOP/s result is never used
    assert pred["tokens_per_step"] == 512 and sum(o["share"] for o in pred["ops"]) == pytest.approx(1.0)


def test_example_parameters_match_the_model() -> None:
    pytest.importorskip("torch")
    assert parameters(EXAMPLE) == sum(p.numel() for p in build_model(EXAMPLE).parameters())


def test_model_spec() -> None:
    assert parse_model("example") == EXAMPLE
    assert parse_model("layers=1,hidden=64,heads=2,seq_len=16,batch_size=2,vocab_size=50")["hidden"] == 64
    for bad, pattern in (
        ("layers=1", "missing"),
        ("depth=3", "unknown key"),
        ("layers=x,hidden=1", "integer"),
        ("layers=1,hidden=64,heads=3,seq_len=16,batch_size=2,vocab_size=50", "multiple of heads"),
    ):
        with pytest.raises(FootprintError, match=pattern):
            parse_model(bad)


def test_cli_self_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    prof = tmp_path / "cpu.yaml"
    prof.write_text(yaml.safe_dump(_cpu_profile()))
    small = "layers=1,hidden=32,heads=2,seq_len=16,batch_size=2,vocab_size=50"
    assert main(["kernels", "predict", "--profile", str(prof), "--model", small, "--steps", "3", "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["measured"]["median_s"] > 0 and r["predicted"]["step_time_s"] > 0
    assert r["error"] == pytest.approx(r["predicted"]["step_time_s"] / r["measured"]["median_s"] - 1)
    gpu = tmp_path / "gpu.yaml"
    gpu.write_text(yaml.safe_dump({**_cpu_profile(), "device": {"name": "H100", "kind": "cuda", "peak_tflops": {"fp32": 67}}}))
    assert main(["kernels", "predict", "--profile", str(gpu), "--model", small]) == 2
    assert "give a CPU profile" in capsys.readouterr().err
    assert main(["kernels", "predict", "--profile", str(prof), "--model", "layers=1"]) == 2
