"""The framework integrations with the real libraries on the fake NVML, models built from configs (no downloads).

A GPT-2 of 2 layers x 64 hidden (~110 k parameters) trains for 6 optimizer steps of 2 micro-batches of
4 x 32 tokens under transformers.Trainer, Lightning and accelerate; each test checks steps, this rank's
tokens, FLOPs per optimizer step against FlopCounterMode (footprint.measure_flops) and 6N + 12LHS,
the eval / checkpoint windows, and the live metrics in a local MLflow store (sqlite).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO
from _torchrun import torchrun

import footprint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e '.[integrations]'")

B, S, ACCUM, STEPS = 4, 32, 2, 6
TOKENS = STEPS * ACCUM * B * S


def _gpt2() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=S, vocab_size=128, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.fixture(scope="module")
def reference() -> dict[str, float]:
    """FLOPs of one optimizer step (ACCUM micro-batches, forward + backward) as FlopCounterMode counts them, and 6N + 12LHS."""
    m = _gpt2()
    m.train()
    ids = torch.randint(0, 128, (B, S))
    micro = footprint.measure_flops(lambda: m(input_ids=ids, labels=ids).loss.backward())
    n = sum(p.numel() for name, p in m.named_parameters() if "wpe" not in name)  # position embeddings do no matmul
    palm = footprint.transformer_flops(n, ACCUM * B * S, layers=2, hidden=64, seq_len=S).flops
    return {"step": ACCUM * micro, "palm": palm}


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("mlflow")
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "FOOTPRINT_PARENT_RUN"):
        monkeypatch.delenv(k, raising=False)


def _history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return [(m.step, m.value) for m in sorted(MlflowClient(uri).get_metric_history(run_id, key), key=lambda m: m.step)]


def _check_run(run: dict, reference: dict[str, float]) -> None:
    assert run["steps"] == STEPS and run["tokens"] == TOKENS
    per_step = run["flops"] / STEPS
    assert per_step == pytest.approx(reference["step"], rel=1e-9)  # exactly FlopCounterMode's count of one step
    assert per_step == pytest.approx(reference["palm"], rel=0.03)  # and 6N + 12LHS within 3 %
    assert run["mfu"]["dtype"] == "fp32" and run["mfu"]["dtype_source"] == "model parameters"
    kinds = {w["kind"] for w in run["windows"]}
    assert {"train", "eval", "checkpoint"} <= kinds


def test_huggingface_trainer_callback(tmp_path: Path, fake_gpu: None, reference: dict, mlflow_uri: str, monkeypatch) -> None:
    from footprint.integrations.huggingface import FootprintCallback

    monkeypatch.chdir(tmp_path)  # MLflow puts a sqlite store's artifacts under ./mlruns
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "hf")
    data = [{"input_ids": (x := torch.randint(0, 128, (S,))), "labels": x} for _ in range(STEPS * ACCUM * B)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=B,
        gradient_accumulation_steps=ACCUM,
        max_steps=STEPS,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="steps",
        save_steps=3,
        report_to=["mlflow"],
        use_cpu=True,
        disable_tqdm=True,
    )
    cb = FootprintCallback(name="hf", output_dir=tmp_path, site={"grid": "FRA"}, report=True)
    trainer = transformers.Trainer(model=_gpt2(), args=args, train_dataset=data, eval_dataset=data[:8], callbacks=[cb])
    trainer.train()
    run = cb.run
    _check_run(run, reference)
    names = [w["name"] for w in run["windows"]]
    assert names.count("eval") == 2 and names.count("checkpoint") == 2 and names.count("train") == 1
    assert (tmp_path / "hf" / "run.json").is_file()
    assert cb.session.dashboard_link == f"footprint dashboard {tmp_path / 'hf'}"  # opens the dashboard on this run
    report = (tmp_path / "hf" / "report.html").read_text()
    assert f"{STEPS} optimizer steps, {TOKENS:,} tokens" in report and "GPU energy by window" in report
    # live metrics went through Trainer.log to the MLflow integration, at each logging step
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_uri)
    (mrun,) = client.search_runs([client.get_experiment_by_name("hf").experiment_id])
    rid = mrun.info.run_id
    assert _history(mlflow_uri, rid, "footprint/tokens") == [(2, TOKENS / 3), (4, 2 * TOKENS / 3), (6, TOKENS)]
    energy = [v for _, v in _history(mlflow_uri, rid, "footprint/gpu_energy_kwh")]
    assert len(energy) == 3 and energy == sorted(energy) and energy[-1] <= run["energy"]["gpu_j"] / 3.6e6
    assert [s for s, _ in _history(mlflow_uri, rid, "footprint/co2eq_kg_use_phase")] == [2, 4, 6]
    assert all(0 < v < 1 for _, v in _history(mlflow_uri, rid, "footprint/mfu"))
    # the final record after training: into the Trainer's run, at its own step, never a second value at a live step
    from footprint.integrations.mlflow import log_run

    assert log_run(cb, report=False, samples=0) == rid
    final = footprint.assess(tmp_path / "hf", samples=0).workload.it_energy_kwh
    assert _history(mlflow_uri, rid, "footprint/energy_kwh")[-1] == (STEPS + 1, pytest.approx(final))
    for key in (k for k in client.get_run(rid).data.metrics if k.startswith("footprint/")):
        values: dict[int, set[float]] = {}
        for step, v in _history(mlflow_uri, rid, key):
            values.setdefault(step, set()).add(v)
        assert all(len(v) == 1 for v in values.values()), f"{key}: two values at one step: {values}"


def test_huggingface_live_metrics_reach_tensorboard(tmp_path: Path, fake_gpu: None) -> None:
    """report_to=["tensorboard"]: the callback's live metrics are scalars in the Trainer's TensorBoard event file,
    beside the loss, at each logging step."""
    pytest.importorskip("tensorboard", reason="TensorBoard is a test extra: pip install -e '.[integrations]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from footprint.integrations.huggingface import FootprintCallback

    data = [{"input_ids": (x := torch.randint(0, 128, (S,))), "labels": x} for _ in range(STEPS * B)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=B,
        max_steps=STEPS,
        logging_steps=2,
        save_strategy="no",
        report_to=["tensorboard"],
        use_cpu=True,
        disable_tqdm=True,
    )
    cb = FootprintCallback(name="tb", output_dir=tmp_path)
    transformers.Trainer(model=_gpt2(), args=args, train_dataset=data, callbacks=[cb]).train()
    (events,) = (tmp_path / "hf").glob("runs/*/events.out.tfevents.*")
    acc = EventAccumulator(str(events.parent)).Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/footprint/tokens", "train/footprint/gpu_energy_kwh", "train/footprint/mfu"} <= tags
    tokens = [(e.step, e.value) for e in acc.Scalars("train/footprint/tokens")]
    assert tokens == [(2, 2 * B * S), (4, 4 * B * S), (6, 6 * B * S)]
    energy = [e.value for e in acc.Scalars("train/footprint/gpu_energy_kwh")]
    assert len(energy) == 3 and energy == sorted(energy) and 0 < energy[-1] <= cb.run["energy"]["gpu_j"] / 3.6e6


def test_lightning_callback(tmp_path: Path, fake_gpu: None, reference: dict, mlflow_uri: str, monkeypatch) -> None:
    pl = pytest.importorskip("pytorch_lightning", reason="Lightning is a test extra: pip install -e '.[integrations]'")
    from pytorch_lightning.loggers import MLFlowLogger

    from footprint.integrations.lightning import FootprintCallback

    class LM(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = _gpt2()

        def training_step(self, batch: torch.Tensor, i: int) -> torch.Tensor:
            return self.model(input_ids=batch, labels=batch).loss

        def validation_step(self, batch: torch.Tensor, i: int) -> None:
            self.log("val_loss", self.model(input_ids=batch, labels=batch).loss)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    monkeypatch.chdir(tmp_path)
    loader = torch.utils.data.DataLoader(torch.randint(0, 128, (STEPS * ACCUM * B, S)), batch_size=B)
    logger = MLFlowLogger(experiment_name="lightning", tracking_uri=mlflow_uri)
    cb = FootprintCallback(name="pl", output_dir=tmp_path)
    trainer = pl.Trainer(
        max_steps=STEPS,
        accumulate_grad_batches=ACCUM,
        log_every_n_steps=2,
        val_check_interval=6,
        limit_val_batches=2,
        num_sanity_val_steps=2,  # forwards before training: never counted as a training step
        logger=logger,
        callbacks=[cb],
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=str(tmp_path),
    )
    trainer.fit(LM(), loader, loader)
    run = cb.run
    _check_run(run, reference)
    assert [w["name"] for w in run["windows"]][0] == "sanity_check" and run["windows"][0]["kind"] == "eval"
    assert any("LightningModule" in n for n in run["notes"])
    assert _history(mlflow_uri, logger.run_id, "footprint/tokens") == [(2, TOKENS / 3), (4, 2 * TOKENS / 3), (6, TOKENS)]
    assert "save_checkpoint" not in vars(trainer)  # the checkpoint-window wrapper is gone
    import mlflow

    from footprint.integrations.mlflow import log_run

    mlflow.set_tracking_uri(mlflow_uri)  # after training, the 16 categories land in the logger's run (found by its tag)
    assert log_run(run, samples=0, report=False) == logger.run_id
    assert "footprint/climate_change" in mlflow.MlflowClient(mlflow_uri).get_run(logger.run_id).data.metrics


def test_accelerate_helper(tmp_path: Path, fake_gpu: None, reference: dict, mlflow_uri: str, monkeypatch) -> None:
    accelerate = pytest.importorskip("accelerate", reason="accelerate is a test extra: pip install -e '.[integrations]'")
    from footprint.integrations.accelerate import FootprintAccelerate

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM, log_with="mlflow", project_dir=str(tmp_path))
    acc.init_trackers("accelerate")
    model = _gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.randint(0, 128, (STEPS * ACCUM * B, S)), batch_size=B)
    model, opt, loader = acc.prepare(model, opt, loader)
    fp = FootprintAccelerate(acc, model, name="acc", output_dir=tmp_path, log_every=2)
    with fp.window("eval"), torch.no_grad():
        model.eval()
        model(input_ids=next(iter(loader)))  # evaluation before training: not a training step
        model.train()
    for batch in loader:
        with acc.accumulate(model):
            acc.backward(model(input_ids=batch, labels=batch).loss)
            opt.step()
            opt.zero_grad()
        fp.step(batch)
    with fp.window("checkpoint"):
        acc.save_state(str(tmp_path / "ckpt"))
    run = fp.finish()
    acc.end_training()
    _check_run(run, reference)
    rid = acc.get_tracker("mlflow").tracker.info.run_id
    assert _history(mlflow_uri, rid, "footprint/tokens") == [(2, TOKENS / 3), (4, 2 * TOKENS / 3), (6, TOKENS)]


def test_mlflow_log_run_logs_all_16_categories_and_artifacts(tmp_path: Path, mlflow_uri: str, monkeypatch) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    from footprint.integrations.mlflow import log_run
    from footprint.lca import categories as cat
    from meters.fake_nvml import FakeNVML

    with footprint.track(name="logged", output_dir=tmp_path, nvml=FakeNVML("1xH100-SXM5-80GB"), host=False) as t:
        for _ in range(3):
            t.step(tokens=1000, flops=1e12)
    monkeypatch.chdir(tmp_path)  # MLflow puts a sqlite store's artifacts under ./mlruns
    mlflow.set_tracking_uri(mlflow_uri)
    rid = log_run(t, report=True, samples=0)
    a = footprint.assess(tmp_path / "logged", samples=0)
    client = MlflowClient(mlflow_uri)
    got = client.get_run(rid).data
    for c in cat.categories():
        assert got.metrics[f"footprint/{c.key}"] == pytest.approx(a[c.key].total)
    assert got.metrics["footprint/tokens"] == 3000 and got.metrics["footprint/energy_kwh"] == pytest.approx(
        a.workload.it_energy_kwh
    )
    assert got.params["footprint.gpu"] == "NVIDIA H100 SXM5 80GB"
    assert got.params["footprint.energy_method"] == "simulated energy (run record), not measured"  # a fake NVML
    files = {f.path for f in client.list_artifacts(rid, "footprint")}
    assert files == {"footprint/run.json", "footprint/assessment.json", "footprint/footprint-report.html"}


def test_wandb_log_run_offline(tmp_path: Path, monkeypatch) -> None:
    wandb = pytest.importorskip("wandb", reason="wandb is a test extra: pip install -e '.[integrations]'")
    from footprint.integrations.wandb import log_run

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    a = footprint.assess(REPO / "scenarios" / "bloom-176b.yaml", samples=0)
    run = wandb.init(project="footprint-test", mode="offline")
    try:
        assert log_run(a, samples=0) == run.id
        assert run.summary["footprint/climate_change"] == pytest.approx(a["climate_change"].total)
        assert run.config["footprint.gpu"] == a.workload.gpu.name
        assert sorted(os.listdir(Path(run.dir) / "footprint")) == ["assessment.json", "footprint-report.html"]
    finally:
        run.finish()
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))  # written offline, nothing sent


def test_prometheus_endpoint_and_textfile_serve_live_metrics(tmp_path: Path) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    from footprint.integrations.prometheus import PrometheusExporter
    from meters.fake_nvml import FakeNVML

    t = footprint.track(name="prom", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB"), host=False, period_s=0.02)
    t.start()
    for _ in range(3):
        t.step(tokens=100, flops=1e12)
    exporter = PrometheusExporter(t, port=0, textfile=tmp_path / "fp.prom", interval_s=0.05).start()
    try:
        assert exporter._server.server_address[0] == "127.0.0.1"  # loopback unless told otherwise
        body = urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5).read().decode()
    finally:
        exporter.stop()
        t.stop()
    fams = {f.name: f for f in parser.text_string_to_metric_families(body)}
    assert fams["footprint_tokens"].samples[0].value == 300
    assert fams["footprint_tokens"].samples[0].labels == {"run": "prom", "rank": "0"}
    assert fams["footprint_gpu_energy_kwh"].samples[0].value > 0 and "footprint_co2eq_kg_use_phase" in fams
    fams = {f.name for f in parser.text_string_to_metric_families((tmp_path / "fp.prom").read_text())}
    assert "footprint_gpu_power_w" in fams


def test_a_real_prometheus_scrapes_the_live_endpoint(tmp_path: Path) -> None:
    """`prometheus_port=`: Debian's Prometheus scrapes the tracker's endpoint every second and answers queries on
    what it stored, the tokens exactly and the GPU energy growing between scrapes."""
    from footprint.fleet import promserver

    if promserver.missing():
        pytest.skip(promserver.missing())
    from footprint.integrations.prometheus import PrometheusExporter
    from meters.fake_nvml import FakeNVML

    def query(url: str, q: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(q)}", timeout=5) as r:
            return json.loads(r.read())["data"]["result"]

    t = footprint.track(name="live", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB"), host=False, period_s=0.05)
    t.start()
    exporter = PrometheusExporter(t, port=promserver.free_port(), interval_s=0.2).start()
    try:
        t.step(tokens=128)
        t.step(tokens=128)
        with promserver.serve(tmp_path / "tsdb", scrape=[f"127.0.0.1:{exporter.port}"]) as url:
            deadline, energies = time.monotonic() + 45, []
            while time.monotonic() < deadline and len(set(energies)) < 2:
                time.sleep(1)
                energies += [float(s["value"][1]) for s in query(url, "footprint_gpu_energy_kwh")]
            tokens = query(url, "footprint_tokens")
            up = query(url, 'up{job="footprint"}')
    finally:
        exporter.stop()
        t.stop()
    assert up and up[0]["value"][1] == "1"
    assert tokens and float(tokens[0]["value"][1]) == 256 and tokens[0]["metric"]["run"] == "live"
    assert len(set(energies)) >= 2 and energies == sorted(energies) and energies[0] > 0  # growing, scrape by scrape


def test_emissions_csv_has_codecarbons_columns_and_round_trips(tmp_path: Path) -> None:
    import pandas as pd
    from codecarbon.output_methods.emissions_data import EmissionsData

    from meters.fake_nvml import FakeNVML

    with footprint.track(name="cc", output_dir=tmp_path, nvml=FakeNVML("2xA100-SXM4-40GB"), host=False, site="FRA") as t:
        t.step(tokens=10)
    out = tmp_path / "emissions.csv"
    for _ in range(2):  # a second export appends a row, as codecarbon does
        proc = subprocess.run(
            [sys.executable, "-m", "footprint.cli", "export", "emissions-csv", str(tmp_path / "cc"), "-o", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out)
    assert list(df.columns) == list(EmissionsData.__dataclass_fields__) and len(df) == 2
    a = footprint.assess(tmp_path / "cc", samples=0)
    assert df["emissions"][0] == pytest.approx(a["climate_change"].by_stage["use"])
    assert df["gpu_energy"][0] == pytest.approx(t.run["energy"]["gpu_j"] / 3.6e6)
    # footprint's own codecarbon importer reads it back
    back = tmp_path / "back"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "import", "codecarbon", str(out), "-o", str(back)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads((back / "run.json").read_text())
    assert rec["energy"]["gpu_j"] == pytest.approx(t.run["energy"]["gpu_j"]) and rec["site"] == {"grid": "FRA"}
    assert len([d for d in rec["devices"] if d["component"] == "gpu"]) == 2


def test_export_bad_target_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "export", "emissions-csv", str(tmp_path / "nope")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no such run directory" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "emissions.csv").exists()


TORCHRUN_HF = textwrap.dedent("""
    import json, sys, torch, transformers
    from footprint.integrations.huggingface import FootprintCallback
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=64, bos_token_id=0, eos_token_id=0)
    data = [{"input_ids": (x := torch.randint(0, 64, (16,))), "labels": x} for _ in range(64)]
    args = transformers.TrainingArguments(output_dir=sys.argv[1] + "/out", per_device_train_batch_size=4, max_steps=4,
        report_to=[], use_cpu=True, include_num_input_tokens_seen="all", save_strategy="no", disable_tqdm=True,
        ddp_backend="gloo")
    cb = FootprintCallback(name="ddp", output_dir=sys.argv[1])
    trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(cfg), args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    if trainer.args.process_index == 0:
        json.dump({"seen": trainer.state.num_input_tokens_seen}, open(sys.argv[1] + "/seen.json", "w"))
    torch.distributed.destroy_process_group()
    # torch 2.13's gloo on CPU aborts ~1 exit in 4 ("terminate called without an active exception"), with or
    # without footprint (measured: 2 of 8 bare Trainer runs): the records are written by now, so leave at once
    import os; sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
""")


@pytest.mark.slow
def test_torchrun_trainer_counts_each_gpu_once_and_the_true_tokens(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_HF)
    proc = torchrun(script, tmp_path, 29541, timeout=300, OMP_NUM_THREADS="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "ddp" / "run.json").read_text())
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2 and {d["rank"] for d in gpus} == {0, 1} and len({d["uuid"] for d in gpus}) == 2
    true_tokens = 2 * 4 * 4 * 16  # 2 ranks x 4 steps x 4 sequences x 16 tokens
    assert run["tokens"] == true_tokens and run["steps"] == 4
    seen = json.loads((tmp_path / "seen.json").read_text())["seen"]
    assert seen == true_tokens  # the Trainer's own count is already the sum over ranks: adding it per rank would double it


TORCHRUN_LOGGERS = textwrap.dedent("""
    import json, os, sys, torch, transformers
    from footprint.integrations.huggingface import FootprintCallback
    from footprint.integrations.mlflow import log_run
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=64, bos_token_id=0, eos_token_id=0)
    data = [{"input_ids": (x := torch.randint(0, 64, (16,))), "labels": x} for _ in range(64)]
    args = transformers.TrainingArguments(output_dir=sys.argv[1] + "/out", per_device_train_batch_size=4, max_steps=4,
        logging_steps=2, report_to=["mlflow", "tensorboard", "wandb"], use_cpu=True, save_strategy="no",
        disable_tqdm=True, ddp_backend="gloo")
    cb = FootprintCallback(name="ddp", output_dir=sys.argv[1], site={"grid": "FRA"})
    trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(cfg), args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    if trainer.args.process_index == 0:  # after training: the 16 categories into the Trainer's MLflow run
        json.dump({"mlflow_run": log_run(cb.run, samples=0, report=False)}, open(sys.argv[1] + "/logged.json", "w"))
        import wandb; wandb.finish()  # flushed before os._exit below skips the atexit hook that would
    torch.distributed.destroy_process_group()
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)  # gloo on CPU may abort at exit (see TORCHRUN_HF)
""")


def _wandb_history(path: Path) -> list[dict[str, Any]]:
    """The history rows of an offline W&B run file (its LevelDB-style log of protobuf records: 32 KiB blocks,
    7-byte record headers, records split FIRST/MIDDLE/LAST across blocks)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, buf, rows = path.read_bytes(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
        buf, pos = buf + data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # FULL or LAST
            rec = pb.Record()
            rec.ParseFromString(buf)
            if rec.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
            buf = b""
        elif n == 0:
            break
    return rows


@pytest.mark.slow
def test_torchrun_trainer_logs_job_wide_metrics_to_mlflow_tensorboard_and_wandb(tmp_path: Path) -> None:
    """2 ranks (gloo, CPU) under torchrun, report_to MLflow (SQLite store), TensorBoard and W&B offline: the live
    tokens and energy are the job's (all-reduced), not rank 0's half; log_run after training lands the 16 categories
    in the Trainer's MLflow run, not a second one."""
    pytest.importorskip("torch.distributed")
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from footprint.lca import categories as cat

    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_LOGGERS)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = torchrun(
        script,
        tmp_path,
        29543,
        cwd=tmp_path,  # MLflow puts a sqlite store's artifacts under ./mlruns
        timeout=400,
        OMP_NUM_THREADS="1",
        MLFLOW_TRACKING_URI=uri,
        MLFLOW_EXPERIMENT_NAME="ddp",
        WANDB_MODE="offline",
        WANDB_DIR=str(tmp_path),
        WANDB_SILENT="true",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "ddp" / "run.json").read_text())
    job_tokens = 2 * 4 * 4 * 16  # 2 ranks x 4 steps x 4 sequences x 16 tokens
    assert run["tokens"] == job_tokens
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2
    job_kwh = run["energy"]["gpu_j"] / 3.6e6
    # MLflow: one run, the Trainer's, with the job's tokens and energy live and the 16 categories after training
    client = MlflowClient(uri)
    (mrun,) = client.search_runs([client.get_experiment_by_name("ddp").experiment_id])
    rid = mrun.info.run_id
    assert json.loads((tmp_path / "logged.json").read_text())["mlflow_run"] == rid
    live_and_final = [(2, job_tokens / 2), (4, job_tokens), (5, job_tokens)]  # live, then log_run's at its own step
    assert _history(uri, rid, "footprint/tokens") == live_and_final
    energy = [v for _, v in _history(uri, rid, "footprint/gpu_energy_kwh")]
    # energy goes through the same all-reduce as the tokens (summed over both ranks, checked just above); how much of
    # a GPU's final energy is already spent at the last logged step depends on how long the run goes on after it
    assert len(energy) == 2 and 0 < energy[0] <= energy[-1] <= job_kwh
    assert _history(uri, rid, "footprint/energy_kwh")[-1] == (5, pytest.approx(run["energy"]["total_j"] / 3.6e6))
    metrics = client.get_run(rid).data.metrics
    assert all(f"footprint/{c.key}" in metrics for c in cat.categories()) and "train_loss" in metrics
    # TensorBoard (rank 0's writer) and W&B offline: the same job-wide values
    (events,) = (tmp_path / "out").glob("runs/*/events.out.tfevents.*")
    acc = EventAccumulator(str(events.parent)).Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train/footprint/tokens")] == [(2, job_tokens / 2), (4, job_tokens)]
    assert [(e.step, e.value) for e in acc.Scalars("train/footprint/gpu_energy_kwh")] == [
        (2, pytest.approx(energy[0])),
        (4, pytest.approx(energy[-1])),
    ]
    (wandb_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    rows = [r for r in _wandb_history(wandb_file) if "train/footprint/tokens" in r]
    assert [r["train/footprint/tokens"] for r in rows] == [job_tokens / 2, job_tokens]
    assert [r["train/footprint/gpu_energy_kwh"] for r in rows] == [pytest.approx(energy[0]), pytest.approx(energy[-1])]


def test_live_metrics_of_a_multi_rank_job_without_a_process_group_are_named_per_rank() -> None:
    """No torch process group to reduce over (ranks launched without one): each rank's values under its own name,
    never rank 0's share under the job-wide name; a single process keeps the plain names."""
    from footprint.integrations.live import job_wide

    assert not torch.distributed.is_initialized()
    values = {"footprint/tokens": 256.0, "footprint/gpu_energy_kwh": 1e-4}
    assert job_wide(values, rank=1, world=2) == {"footprint/rank1/tokens": 256.0, "footprint/rank1/gpu_energy_kwh": 1e-4}
    assert job_wide(values, rank=0, world=1) == values


def test_a_callbacks_report_of_a_cpu_only_run_is_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The callbacks' `report=True` on a machine without GPU: the report is written (no GPU: host only), and the line
    printed at the end names the command that opens the dashboard on the run."""
    from footprint.integrations.session import Session

    monkeypatch.delenv("FOOTPRINT_FAKE_NVML", raising=False)
    s = Session("test", name="cpu", output_dir=tmp_path, report=True, gpus=[])
    s.begin()
    sum(i * i for i in range(100_000))
    s.end()
    assert s.report_path == tmp_path / "cpu" / "report.html"
    assert "no GPU: host only" in s.report_path.read_text()
    assert f"open it: footprint dashboard {tmp_path / 'cpu'}" in capsys.readouterr().err
