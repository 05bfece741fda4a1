"""The tracker's training accounting on the fake NVML: windows and their kinds, one counted training step, the
dtype of the MFU peak, the training story in `assess` and reports, and `footprint run` with a child that counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _paths import REPO
from _torchrun import clean_env

import footprint
from footprint.lca.assessment import pct_sig
from footprint.lca.render import to_table
from footprint.tracking.story import training_story
from meters.fake_nvml import FakeNVML

torch = pytest.importorskip("torch")
PY = sys.executable


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))


def _train_step(m: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    m(x).sum().backward()
    opt.step()
    opt.zero_grad()


def test_watch_counts_exactly_one_training_step_and_ignores_evaluation(tmp_path: Path) -> None:
    m, x = _mlp(), torch.randn(32, 64)
    reference = footprint.measure_flops(lambda: m(x).sum().backward())
    m.zero_grad()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    t = footprint.track(name="watch", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB"), host=False).start()
    t.watch(m)
    m.eval()
    with torch.no_grad(), t.window("eval"):
        for _ in range(3):
            m(x)  # evaluation before training: never part of the counted step
    m.train()
    for _ in range(4):
        _train_step(m, opt, x)
        t.step(tokens=32)
        time.sleep(0.02)
    run = t.stop()
    assert run["flops"] == pytest.approx(4 * reference)  # the same counting as measure_flops, one step, reused
    assert run["mfu"]["dtype"] == "fp32" and run["mfu"]["dtype_source"] == "model parameters"  # not the bf16 default
    assert "FlopCounterMode over one training step" in run["flops_method"]


def test_watch_counts_every_micro_batch_of_an_accumulation_cycle(tmp_path: Path) -> None:
    m, x = _mlp(), torch.randn(8, 64)
    reference = footprint.measure_flops(lambda: m(x).sum().backward())
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    t = footprint.track(name="accum", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False, dtype="fp16").start()
    t.watch(m)
    for _ in range(3):
        t.begin_step()  # what the callbacks call at the framework's step boundary
        for _ in range(4):
            m(x).sum().backward()
        opt.step()
        opt.zero_grad()
        t.step(tokens=32)
    run = t.stop()
    assert run["flops"] == pytest.approx(3 * 4 * reference)
    assert run["mfu"]["dtype"] == "fp16" and run["mfu"]["dtype_source"] == "given"


def test_watch_on_a_wrapper_counts_its_submodules_and_says_so(tmp_path: Path) -> None:
    class Wrapped(torch.nn.Module):  # a LightningModule's shape: the framework calls training_step, not forward
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()

        def training_step(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x).sum()

    w, x = Wrapped(), torch.randn(16, 64)
    reference = footprint.measure_flops(lambda: w.training_step(x).backward())
    t = footprint.track(name="wrap", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB"), host=False).start()
    t.watch(w)
    w.training_step(x).backward()
    t.step()
    run = t.stop()
    assert run["flops"] == pytest.approx(reference)
    assert any("LightningModule" in n for n in run["notes"])


def test_watch_that_never_fires_says_so_and_the_mfu_says_its_peak(tmp_path: Path) -> None:
    m = _mlp()
    t = footprint.track(name="never", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB"), host=False).start()
    t.watch(m)
    for _ in range(3):
        t.step(tokens=10, flops=1e9)  # the model never ran a forward
    run = t.stop()
    assert any("no training step of the watched model was counted" in n for n in run["notes"])
    assert "assumed" in run["mfu"]["dtype_source"] and run["mfu"]["dtype"] == "bf16"
    a = footprint.assess(run, samples=0)
    line = next(x for x in to_table(a).splitlines() if x.strip().startswith("MFU"))
    assert "TFLOP/s dense bf16 per GPU" in line and "assumed" in line and "0.0%" not in line


def test_pct_sig_never_prints_zero_for_a_small_mfu() -> None:
    assert pct_sig(6.7e-5) == "0.0067%" and pct_sig(0.406) == "40.6%" and pct_sig(None) == "n/a" and pct_sig(0) == "0%"


def _story_run(tmp_path: Path, short_evals: int = 0) -> dict:
    t = footprint.track(
        name="story", output_dir=tmp_path, nvml=FakeNVML("2xA100-SXM4-40GB", power=[300.0, 300.0]), host=False, period_s=0.02
    ).start()
    time.sleep(0.3)  # set-up outside the training loop: idle
    t.begin_window("train")
    for i in range(6):
        time.sleep(0.05)
        t.step(tokens=1000)
        if i == 2:
            with t.window("eval"):
                time.sleep(0.3)
    for _ in range(short_evals):
        with t.window("eval"):
            time.sleep(0.01)
    t.begin_window("checkpoint")
    time.sleep(0.1)
    t.end_window("checkpoint")
    t.end_window("train")
    return t.stop()


def test_training_story_shares_by_window_kind(tmp_path: Path) -> None:
    run = _story_run(tmp_path)
    kinds = {w["name"]: w["kind"] for w in run["windows"]}
    assert kinds == {"eval": "eval", "checkpoint": "checkpoint", "train": "train"}
    story = training_story(run)
    shares = story["gpu_energy_share"]
    assert set(shares) == {"train", "eval", "checkpoint", "idle"}
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-6)
    gpus = {d["uuid"] for d in run["devices"]}
    eval_j = sum(v for w in run["windows"] if w["name"] == "eval" for u, v in w["energy_j"].items() if u in gpus)
    assert shares["eval"] == pytest.approx(eval_j / run["energy"]["gpu_j"])
    assert shares["idle"] > 0.1  # the 0.3 s before the training loop (of ~1.2 s)
    assert story["steps"] == 6 and story["tokens"] == 6000
    assert story["kwh_per_million_tokens"] == pytest.approx(run["energy"]["total_j"] / 3.6e6 / 6000 * 1e6)
    a = footprint.assess(tmp_path / "story", samples=0)
    d = a.to_dict()["training"]
    assert d["kg_co2eq_per_million_tokens"] == pytest.approx(a["climate_change"].total / 6000 * 1e6)
    text = to_table(a)
    assert "6 optimizer steps, 6,000 tokens" in text and "GPU energy by window: train" in text and "eval" in text


def test_many_short_windows_make_one_warning(tmp_path: Path) -> None:
    run = _story_run(tmp_path, short_evals=12)
    a = footprint.assess(run, samples=0)
    short = [w for w in a.warnings if "shorter than 1 s" in w]
    assert len(short) == 1 and "of 15 windows" in short[0] and "eval x" in short[0]


def test_report_api_tells_the_training_story(tmp_path: Path) -> None:
    run = _story_run(tmp_path)
    out = footprint.report(run, tmp_path / "r.md", samples=0)
    text = out.read_text()
    assert "Steps and tokens" in text and "Per million tokens" in text and "GPU energy by window" in text
    html = footprint.report(footprint.assess(run, samples=0), tmp_path / "r.html").read_text()
    assert "6 optimizer steps" in html


def test_callbacks_join_a_running_tracker(tmp_path: Path) -> None:
    from footprint.integrations.session import Session
    from footprint.tracking.tracker import current

    with footprint.track(name="outer", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False) as outer:
        s = Session("test")
        assert s.begin() is outer and current() is outer
        s.count(5)
        s.end_step()
        assert s.end() is None and not outer._stopped  # the owner stops it, not the joiner
    assert outer.run["tokens"] == 5 and any("joined" in n for n in outer.run["notes"])


def _run(tmp_path: Path, name: str, code: str, *flags: str) -> dict:
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", "run", "--name", name, "--output-dir", str(tmp_path), *flags, "--", PY, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=clean_env(FOOTPRINT_FAKE_NVML="1xA100-SXM4-40GB"),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((tmp_path / name / "run.json").read_text())


def test_footprint_run_leaves_steps_null_unless_measured(tmp_path: Path) -> None:
    run = _run(tmp_path, "bare", "import time; time.sleep(0.3)")
    assert run["steps"] is None and run["tokens"] is None and run["flops"] is None
    assert any("not measured" in n and "--count-steps" in n for n in run["notes"])
    assert training_story(run) is None


LOOP = textwrap.dedent("""
    import time, torch
    m = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(7):
        m(torch.randn(4, 16)).sum().backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.02)
""")


def test_footprint_run_count_steps_counts_the_childs_optimizer_steps(tmp_path: Path) -> None:
    run = _run(tmp_path, "counted", LOOP, "--count-steps")
    assert run["steps"] == 7 and run["tokens"] is None
    assert any("optimizer hook" in n for n in run["notes"])
    assert not (tmp_path / "optimizer-hook").exists()  # no second run directory


CHILD_TRACKER = textwrap.dedent("""
    import time, torch, footprint
    m = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with footprint.track(name="inner", host=False) as t:
        for i in range(5):
            m(torch.randn(4, 16)).sum().backward()
            opt.step()
            opt.zero_grad()
            t.step(tokens=64)
            time.sleep(0.02)
        with t.window("eval"):
            time.sleep(0.3)
    assert t.run is None  # attached: the parent writes the run
""")


def test_a_tracker_inside_footprint_run_merges_into_its_run(tmp_path: Path) -> None:
    run = _run(tmp_path, "merged", CHILD_TRACKER, "--count-steps")
    assert not (tmp_path / "inner").exists()  # one run over the GPUs, not two
    assert run["steps"] == 5 and run["tokens"] == 320  # the script's own tracker wins over the optimizer hook
    (ev,) = [w for w in run["windows"] if w["name"] == "eval"]
    gpu = next(d["uuid"] for d in run["devices"] if d["component"] == "gpu")
    assert ev["energy_j"][gpu] == pytest.approx(300 * ev["duration_s"], rel=0.35)  # filled in from the parent's samples
