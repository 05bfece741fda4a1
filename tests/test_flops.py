"""FLOP and MFU accounting against VALIDATION.md's published cases and torch's FlopCounterMode."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from _paths import REPO, SCENARIOS

from footprint.errors import FootprintError
from footprint.flops import measure_flops, transformer_flops
from footprint.lca.catalogue import compute_mfu

PY = sys.executable


@pytest.mark.parametrize(
    "achieved, gpu, dtype, expected",
    [
        (225, "A100-SXM4-40GB", "bf16", 0.72),  # FlashAttention-2
        (740, "H100-SXM5-80GB", "fp16", 0.75),  # FlashAttention-3
        (502e3 / 3072, "A100-SXM4-80GB", "fp16", 0.52),  # Megatron-LM 2021, 502 PFLOP/s on 3,072 A100
        (25e3 / 512, "V100-SXM2-32GB", "fp16", 0.39),  # ZeRO-Infinity, 25 PFLOP/s on 512 V100 ("40 %")
    ],
)
def test_published_mfu_cases(achieved: float, gpu: str, dtype: str, expected: float) -> None:
    assert compute_mfu(gpu, dtype, achieved_tflops=achieved).mfu == pytest.approx(expected, abs=0.01)


def test_mfu_from_flops_and_gpu_hours_and_the_guards() -> None:
    m = compute_mfu("A100-SXM4-40GB", flops=312e12 * 3600 * 0.5, gpu_hours=1)
    assert m.mfu == pytest.approx(0.5) and m.peak_tflops == 312 and not m.warnings
    assert compute_mfu("A100-SXM4-40GB", achieved_tflops=280).warnings  # > 80 % warns
    with pytest.raises(FootprintError, match="sparse peak.*wrong dtype"):
        compute_mfu("A100-SXM4-40GB", achieved_tflops=400)
    with pytest.raises(FootprintError, match="no dense fp8 peak"):
        compute_mfu("A100-SXM4-40GB", "fp8", achieved_tflops=100)


def test_six_nd_frontier_case() -> None:
    r = transformer_flops(1e12, 20e12)
    assert r.flops == pytest.approx(1.2e26)  # 120 million exaFLOPs
    assert r.flops / 1e18 == pytest.approx(120e6)


def test_palm_attention_term_moe_and_recompute() -> None:
    base = transformer_flops(7e9, 1, layers=32, hidden=4096, seq_len=4096)
    assert base.flops_per_token == pytest.approx(6 * 7e9 + 12 * 32 * 4096 * 4096)
    moe = transformer_flops(141e9, 1, active_params=39e9)
    assert moe.flops_per_token == pytest.approx(6 * 39e9)
    full = transformer_flops(7e9, 1, layers=32, hidden=4096, seq_len=4096, recompute="full")
    assert full.hardware_flops_per_token == pytest.approx(8 * 7e9 + 16 * 32 * 4096 * 4096)
    sel = transformer_flops(7e9, 1, layers=32, hidden=4096, seq_len=4096, recompute="selective")
    assert sel.hardware_flops_per_token - sel.flops_per_token == pytest.approx(4 * 32 * 4096 * 4096)
    assert transformer_flops(7e9, 1, inference=True).flops_per_token == 14e9


def test_megatron_variant_matches_its_published_formula() -> None:
    nl, h, s, v = 96, 12288, 2048, 51200  # GPT-3 175B shape
    r = transformer_flops(175e9, s, layers=nl, hidden=h, seq_len=s, vocab=v, variant="megatron", recompute="full")
    per_iter = 96 * 1 * s * nl * h**2 * (1 + s / (6 * h) + v / (16 * nl * h))
    assert r.hardware_flops == pytest.approx(per_iter)
    assert r.flops == pytest.approx(per_iter * 3 / 4)
    assert r.flops / transformer_flops(175e9, s).flops == pytest.approx(1.0, abs=0.06)  # ~6N


def _mlp(d: int = 256):
    import torch

    return torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))


def test_measure_flops_mlp_agrees_with_6n() -> None:
    torch = pytest.importorskip("torch")
    mlp = _mlp()
    x = torch.randn(512, 256, requires_grad=True)  # as inside a network: the input needs its gradient
    f = measure_flops(lambda: mlp(x).sum().backward())
    n = sum(p.numel() for p in mlp.parameters() if p.dim() == 2)
    assert f == pytest.approx(6 * n * 512, rel=0.02)


def test_measure_flops_gpt_block_agrees_with_palm() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.h = heads
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, 2))
            # explicit attention (nanoGPT's non-flash path): torch's CPU flash SDPA kernel is not seen by
            # FlopCounterMode in torch 2.13, which would drop the 12 L H S term
            att = F.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    blk = Block(256, 4)
    x = torch.randn(4, 128, 256, requires_grad=True)
    f = measure_flops(lambda: blk(x).sum().backward())
    n = sum(p.numel() for p in blk.parameters() if p.dim() == 2)
    assert f == pytest.approx(transformer_flops(n, 4 * 128, layers=1, hidden=256, seq_len=128).flops, rel=0.02)


def test_measure_flops_warns_on_fast_paths() -> None:
    torch = pytest.importorskip("torch")
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, batch_first=True), 2).eval()
    x = torch.randn(2, 16, 64)
    with warnings.catch_warnings(record=True) as w, torch.no_grad():
        warnings.simplefilter("always")
        measure_flops(enc, x)
    assert any("no_grad" in str(m.message) for m in w) and any("eval mode" in str(m.message) for m in w)


def _resnet50():
    """torchvision's ResNet-50 layout (no CPU torchvision wheel here): bottlenecks [3, 4, 6, 3]."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            out = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.Conv2d(width, out, 1, bias=False),
                nn.BatchNorm2d(out),
            )
            self.down = (
                nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                if stride != 1 or cin != out
                else nn.Identity()
            )

        def forward(self, x):
            return torch.relu(self.body(x) + self.down(x))

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


def test_resnet50_forward_matches_published_count(shared: Path) -> None:
    torch = pytest.importorskip("torch")
    rows = list(csv.DictReader((shared / "flop-reference" / "published_model_flops.csv").open()))
    macs = [float(r["value"]) * 1e9 for r in rows if r["model"] == "resnet50"]
    model = _resnet50().eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = measure_flops(model, torch.randn(1, 3, 224, 224))
    # Profiler convention: 2 FLOPs per MAC -> ~8.2 GFLOP; published MACs 4.089-4.14 G
    assert min(macs) * 2 * 0.99 <= f <= max(macs) * 2 * 1.01


def test_cli_flops_and_mfu() -> None:
    out = subprocess.run(
        [
            PY,
            "-m",
            "footprint.cli",
            "flops",
            "transformer",
            "--params",
            "7e9",
            "--tokens",
            "2e12",
            "--layers",
            "32",
            "--hidden",
            "4096",
            "--seq-len",
            "4096",
            "--recompute",
            "full",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    d = json.loads(out.stdout)
    assert set(d) >= {"flops", "flops_per_token", "hardware_flops", "formula"}
    assert d["hardware_flops"] > d["flops"]
    out = subprocess.run(
        [
            PY,
            "-m",
            "footprint.cli",
            "mfu",
            "--flops",
            "1.2e21",
            "--gpu-hours",
            "2000",
            "--gpu",
            "A100-SXM4-40GB",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    d = json.loads(out.stdout)
    assert d["mfu"] == pytest.approx(1.2e21 / (2000 * 3600 * 312e12)) and d["peak_tflops"] == 312
    bad = subprocess.run(
        [PY, "-m", "footprint.cli", "mfu", "--achieved-tflops", "700", "--gpu", "A100-SXM4-40GB"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert bad.returncode == 2 and "sparse peak" in bad.stderr and "Traceback" not in bad.stderr


def test_scenarios_derive_mfu_from_the_model_shape() -> None:
    from footprint.lca.workload import load_scenario

    w = load_scenario(SCENARIOS / "llama-3.1-405b.yaml")
    assert 0.3 < w.mfu < 0.45 and w.mfu_method.startswith("derived")  # Meta reports 38-43 % MFU
    assert load_scenario(SCENARIOS / "gpt-4-falk.yaml").mfu_method.startswith("stated")


def test_tracker_per_step_mfu_on_a_cpu_training_loop(tmp_path: Path) -> None:
    """Plausible, not meaningful: a CPU does ~0.1 TFLOP/s against a fake H100's 989 TFLOP/s peak."""
    torch = pytest.importorskip("torch")
    import footprint
    from footprint.lca.database import db
    from meters.fake_nvml import FakeNVML

    model = _mlp(512)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512)
    t = footprint.track(name="mfu", output_dir=tmp_path, nvml=FakeNVML("1xH100-SXM5-80GB"), host=False).start()
    t.watch(model)
    for _ in range(20):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        t.step(tokens=256)
    run = t.stop()
    m = run["mfu"]
    assert run["flops_method"].startswith("measured") and run["flops"] > 0
    assert 0 < m["steady_state_mfu"] < 0.01 and 0 < m["run_mfu"] <= m["steady_state_mfu"] * 1.5
    # an fp32 model is measured against the fp32 peak (watch reads the dtype from the parameters), never bf16's
    assert m["dtype"] == "fp32" and m["dtype_source"] == "model parameters"
    assert m["peak_tflops_per_gpu"] == pytest.approx(db().find_gpu("H100-SXM5-80GB").peak_flops("fp32") / 1e12)
    analytical = footprint.track(
        name="mfu2", output_dir=tmp_path, nvml=FakeNVML("1xH100-SXM5-80GB"), host=False, model={"params": 1e6}
    ).start()
    analytical.step(tokens=100)
    analytical.step(tokens=100)
    assert analytical.stop()["flops"] == pytest.approx(2 * 6e6 * 100)
    a = footprint.assess(run, samples=0)
    assert a.workload.mfu == pytest.approx(m["run_mfu"])


def test_cpu_flash_attention_is_counted_like_torch_counts_it_on_gpu() -> None:
    """FlopCounterMode misses torch's CPU flash-attention kernel; ours adds torch's own SDPA formulas
    (forward 4 b h s^2 d; backward 10 b h s^2 d, which includes flash attention's score recomputation)."""
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(4, 4, 128, 64, requires_grad=True) for _ in range(3))
    f = measure_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward())
    fwd = 4 * 4 * 4 * 128 * 128 * 64
    assert f == fwd + 2.5 * fwd
