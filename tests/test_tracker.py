"""The tracker end to end on the fake NVML: context manager, faults, kill -9, SIGTERM, ranks, CLI, imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from _paths import REPO
from _torchrun import clean_env, torchrun

import footprint
from footprint.tracking import runrecord
from footprint.tracking.tracker import DistInfo, gpus_for_rank
from meters.fake_nvml import FakeNVML, Faults

PY = sys.executable


def test_context_manager_measures_each_gpu_and_assesses(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "2xA100-SXM4-40GB")
    with footprint.track(name="cm", output_dir=tmp_path, site={"grid": "FRA", "pue": 1.1}, host=False) as t:
        for _ in range(5):
            time.sleep(0.05)
            t.step(tokens=512, flops=1e12)
        with t.window("eval"):
            time.sleep(0.2)
    run = t.run
    assert run is not None and (tmp_path / "cm" / "run.json").is_file()
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2 and all(d["method"] == "energy_counter" and d["energy_j"] > 0 for d in gpus)
    assert {"index", "name", "uuid", "method", "energy_j"} <= set(gpus[0])
    assert run["energy"]["gpu_j"] == pytest.approx(sum(d["energy_j"] for d in gpus))
    assert run["steps"] == 5 and run["tokens"] == 2560 and run["flops"] == pytest.approx(5e12)
    assert run["world_size"] == 1 and run["hosts"][0]["ranks"] == [0] and run["site"]["grid"] == "FRA"
    assert run["windows"][0]["name"] == "eval" and "shorter than 1 s" in run["windows"][0]["note"]
    samples = runrecord.read_samples(tmp_path / "cm")
    assert {"rank", "host", "uuid", "component", "t_s", "energy_j", "power_w"} <= set(samples.columns)
    last = samples.sort_values("t_s").groupby("uuid")["energy_j"].last()
    for d in gpus:  # the samples end on the energy the record reports (to the millijoule the segments keep)
        assert last[d["uuid"]] == pytest.approx(d["energy_j"], abs=1e-3)
    a = footprint.assess(run, samples=100)
    assert a.workload.count == 2 and a.workload.grid == "FRA"
    assert a.workload.it_energy_kwh == pytest.approx(run["energy"]["total_j"] / 3.6e6)
    assert a["climate_change"].by_stage["use"] > 0


def test_energy_matches_the_fake_devices_true_energy(tmp_path: Path) -> None:
    nvml = FakeNVML("1xH100-SXM5-80GB", power=[300.0])
    t = footprint.track(name="true", output_dir=tmp_path, nvml=nvml, host=False, period_s=0.05).start()
    time.sleep(1.0)
    run = t.stop()
    uuid = run["devices"][0]["uuid"]
    # energy from start to the last sample: within one period of 300 W
    assert run["devices"][0]["energy_j"] == pytest.approx(300 * run["duration_s"], abs=300 * 0.15)
    assert uuid.startswith("GPU-")


def test_decorator_and_start_stop_return_the_same_run(tmp_path: Path) -> None:
    tracker = footprint.track(name="deco", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False)

    @tracker
    def train() -> int:
        tracker.step()
        return 7

    assert train() == 7
    assert tracker.stop() is tracker.run and tracker.run["steps"] == 1


@pytest.mark.parametrize(
    "faults, expect",
    [
        (Faults(no_energy_counter=True), "instant_power"),
        (Faults(no_energy_counter=True, no_instant_power=True), "average_power"),
        (Faults(lost_after_s=0.2), "lost"),
        (Faults(error_rate=0.5), "energy_counter"),
        (Faults(wrap_at_mj=2000), "energy_counter"),
    ],
)
def test_faults_complete_the_run_and_say_what_is_missing(tmp_path: Path, faults: Faults, expect: str) -> None:
    nvml = FakeNVML("1xV100-SXM2-32GB" if faults.no_instant_power else "1xA100-SXM4-40GB", faults=faults)
    t = footprint.track(name="fault", output_dir=tmp_path, nvml=nvml, host=False, period_s=0.02).start()
    time.sleep(0.6)
    t.step(tokens="not a number")  # a bad argument is recorded, never raised
    run = t.stop()
    dev = run["devices"][0]
    text = json.dumps(dev).lower()
    assert expect in text
    assert any("step" in n for n in run["notes"])


def test_library_missing_still_writes_a_run(tmp_path: Path) -> None:
    t = footprint.track(
        name="nolib", output_dir=tmp_path, nvml=FakeNVML("1xA100-SXM4-40GB", library_missing=True), host=False
    ).start()
    t.step()
    run = t.stop()
    assert run["energy"]["gpu_j"] is None  # not available, never zero
    assert "library" in json.dumps(run).lower()


KILLED = textwrap.dedent("""
    import os, sys, time
    os.environ["FOOTPRINT_FAKE_NVML"] = "2xA100-SXM4-40GB"
    import footprint
    t = footprint.track(name="killed", output_dir=sys.argv[1], host=False).start()
    for i in range(10000):
        t.step(tokens=100)
        time.sleep(0.01)
""")


def test_sigkill_keeps_samples_and_recover_rebuilds_the_run(tmp_path: Path) -> None:
    proc = subprocess.Popen([PY, "-c", KILLED, str(tmp_path)], cwd=REPO, env=clean_env())
    time.sleep(2.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_dir = tmp_path / "killed"
    assert not (run_dir / "run.json").exists()
    out = subprocess.run([PY, "-m", "footprint.cli", "recover", str(run_dir)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["ranks"][0]["recovered"] is True
    assert len([d for d in run["devices"] if d["component"] == "gpu"]) == 2
    assert run["energy"]["gpu_j"] > 0 and run["steps"] > 0
    assert run["duration_s"] > 0.5  # samples up to about a second before the kill
    samples = runrecord.read_samples(run_dir, components=["gpu"])
    assert set(samples["uuid"]) == {d["uuid"] for d in run["devices"] if d["component"] == "gpu"}
    assert (
        subprocess.run(
            [PY, "-m", "footprint.cli", "assess", str(run_dir), "--samples", "0"], capture_output=True, cwd=REPO
        ).returncode
        == 0
    )


def test_sigterm_finalises_the_run(tmp_path: Path) -> None:
    proc = subprocess.Popen([PY, "-c", KILLED.replace("killed", "termed"), str(tmp_path)], cwd=REPO, env=clean_env())
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    run = json.loads((tmp_path / "termed" / "run.json").read_text())
    assert run["energy"]["gpu_j"] > 0 and any("SIGTERM" in n for n in run["notes"])


RANK = textwrap.dedent("""
    import sys, time
    import footprint
    t = footprint.track(output_dir=sys.argv[1], host=False).start()  # name from SLURM_JOB_ID
    for _ in range(5):
        time.sleep(0.05)
        t.step(tokens=10)
    t.stop()
""")


def test_ranks_without_process_group_then_merge(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [PY, "-c", RANK, str(tmp_path)],
            cwd=REPO,
            env=clean_env(
                FOOTPRINT_FAKE_NVML="2xA100-SXM4-40GB",
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE="2",
                LOCAL_WORLD_SIZE="2",
                SLURM_JOB_ID="4242",
            ),
        )
        for r in range(2)
    ]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    run_dir = tmp_path / "job-4242"
    assert len(list((run_dir / "ranks").glob("rank-*.json"))) == 2 and not (run_dir / "run.json").exists()
    assert subprocess.run([PY, "-m", "footprint.cli", "merge", str(run_dir)], cwd=REPO).returncode == 0
    run = json.loads((run_dir / "run.json").read_text())
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2 and len({d["uuid"] for d in gpus}) == 2  # each rank measured only its own GPU
    assert {d["rank"] for d in gpus} == {0, 1} and run["world_size"] == 2
    assert run["steps"] == 5 and run["tokens"] == 100 and run["slurm"]["job_id"] == "4242"
    # samples stay with each rank (run.json holds summaries only) and are read lazily across ranks
    assert "samples" in run and not (run_dir / "samples.parquet").exists()
    one = runrecord.read_samples(run_dir, uuids=[gpus[1]["uuid"]], columns=["rank", "uuid", "t_s", "energy_j"])
    assert list(one.columns) == ["rank", "uuid", "t_s", "energy_j"] and set(one["rank"]) == {gpus[1]["rank"]}
    timeline = runrecord.power_timeline(run_dir, buckets=50).to_pylist()
    assert {(r["rank"], r["uuid"]) for r in timeline} == {(d["rank"], d["uuid"]) for d in gpus}
    for d in gpus:  # the downsampled timeline ends on each GPU's energy in run.json
        last = max((r for r in timeline if r["uuid"] == d["uuid"]), key=lambda r: r["t_s"])
        assert last["energy_j"] == pytest.approx(d["energy_j"], abs=1e-3)


TORCHRUN = textwrap.dedent("""
    import sys, time
    import torch.distributed as dist
    import footprint
    dist.init_process_group("gloo")
    t = footprint.track(name="ddp", output_dir=sys.argv[1]).start()
    for _ in range(3):
        time.sleep(0.05)
        t.step(tokens=10)
    t.stop()
    dist.destroy_process_group()
""")


def test_torchrun_two_cpu_ranks_count_each_gpu_once(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN)
    proc = torchrun(script, tmp_path, 29533)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = list(tmp_path.glob("*/run.json"))
    assert len(runs) == 1
    run = json.loads(runs[0].read_text())
    gpus = [d for d in run["devices"] if d["component"] == "gpu"]
    assert len(gpus) == 2 and {d["rank"] for d in gpus} == {0, 1}
    assert run["world_size"] == 2 and len(run["ranks"]) == 2 and len(run["hosts"]) == 1
    host_meters = [d for d in run["devices"] if d["component"] != "gpu"]
    assert {d["rank"] for d in host_meters} <= {0}  # CPU/RAM once per node


def test_rank_to_gpu_mapping(monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    d = DistInfo(rank=3, local_rank=1, world_size=4, local_world_size=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert gpus_for_rank(d) == [5]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb")
    assert gpus_for_rank(d) == ["GPU-bbb"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus_for_rank(d) == [1]
    assert gpus_for_rank(d, gpus=[0, 2]) == [0, 2]


def test_footprint_run_wraps_a_command(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            PY,
            "-m",
            "footprint.cli",
            "run",
            "--name",
            "wrapped",
            "--output-dir",
            str(tmp_path),
            "--grid",
            "FRA",
            "--",
            PY,
            "-c",
            "import time; time.sleep(0.5); raise SystemExit(3)",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=clean_env(FOOTPRINT_FAKE_NVML="1xL4"),
    )
    assert proc.returncode == 3  # the command's exit code
    run = json.loads((tmp_path / "wrapped" / "run.json").read_text())
    assert run["energy"]["gpu_j"] > 0 and run["site"] == {"grid": "FRA"} and run["duration_s"] >= 0.5


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["run", "--name", "x"], "no command given"),
        (["run", "--grid", "Atlantis", "--", "true"], "unknown grid zone"),
        (["run", "--", "definitely-not-a-program-xyz"], "cannot start"),
        (["recover", "/nonexistent/run"], "no such run directory"),
        (["merge", "/nonexistent/run"], "no such run directory"),
        (["import", "nvidia-smi", "/nonexistent.csv", "-o", "/tmp/x"], "no such file"),
    ],
)
def test_bad_arguments_get_clear_errors(args: list[str], pattern: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(FOOTPRINT_FAKE_NVML="1xL4"),
    )
    assert proc.returncode == 2 and pattern in proc.stderr and "Traceback" not in proc.stderr


def test_import_nvidia_smi_real_log_and_reproject(shared: Path, tmp_path: Path) -> None:
    from meters.importers import integrate_energy, read_nvidia_smi_csv

    log = shared / "power" / "gpu-power-benchmark" / "plotting" / "data" / "5050" / "A100" / "gpudata.csv"
    out = tmp_path / "imported"
    proc = subprocess.run(
        [
            PY,
            "-m",
            "footprint.cli",
            "import",
            "nvidia-smi",
            str(log),
            "-o",
            str(out),
            "--utc-offset",
            "+1",
            "--gpu",
            "A100-PCIe-40GB",
            "--grid",
            "FRA",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "run.json").read_text())
    expected = integrate_energy(read_nvidia_smi_csv(log, utc_offset=1))["0"]["energy_j"]
    assert run["energy"]["gpu_j"] == pytest.approx(expected)
    assert run["devices"][0]["method"] == "nvidia-smi instant_power"
    fra = footprint.assess(out, samples=0)
    from footprint.tracking.to_workload import workload_from_run

    pol = footprint.assess(workload_from_run(out, ["site.grid=POL"]), samples=0)
    assert pol["climate_change"].by_stage["use"] > 5 * fra["climate_change"].by_stage["use"]


def test_import_codecarbon(tmp_path: Path) -> None:
    src = REPO / "tests" / "meters" / "data" / "codecarbon_emissions.csv"
    proc = subprocess.run(
        [
            PY,
            "-m",
            "footprint.cli",
            "import",
            "codecarbon",
            str(src),
            "-o",
            str(tmp_path / "cc"),
            "--gpu",
            "H100-SXM5-80GB",
            "--gpu-count",
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "cc" / "run.json").read_text())
    assert run["energy"]["cpu_j"] > 0 and len([d for d in run["devices"] if d["component"] == "gpu"]) == 2


def test_interpreter_exit_without_stop_finalises(tmp_path: Path) -> None:
    code = (
        "import sys, time, footprint\n"
        "t = footprint.track(name='atexit', output_dir=sys.argv[1], host=False).start()\n"
        "t.step(); time.sleep(0.3)\n"
    )
    proc = subprocess.run([PY, "-c", code, str(tmp_path)], cwd=REPO, env=clean_env(FOOTPRINT_FAKE_NVML="1xA100-SXM4-40GB"))
    assert proc.returncode == 0
    run = json.loads((tmp_path / "atexit" / "run.json").read_text())
    assert run["steps"] == 1 and run["energy"]["gpu_j"] > 0 and len(runrecord.read_samples(tmp_path / "atexit")) > 0


def test_retention_is_recorded_and_a_bad_one_is_a_note(tmp_path: Path) -> None:
    nvml = FakeNVML("1xA100-SXM4-40GB")
    t = footprint.track(name="ret", output_dir=tmp_path, nvml=nvml, host=False, retention={"raw_s": 3600}).start()
    run = t.stop()
    rank = json.loads((tmp_path / "ret" / "ranks" / "rank-00000.json").read_text())
    assert rank["retention"]["raw_s"] == 3600 and run["samples"]["retention"]["raw_s"] == 3600
    with pytest.warns(footprint.FootprintWarning, match="retention: unknown keys"):
        bad = footprint.track(name="bad", output_dir=tmp_path, nvml=FakeNVML("1xL4"), host=False, retention={"raw": 1}).start()
    run = bad.stop()
    assert any("unknown keys" in n for n in run["notes"]) and run["energy"]["gpu_j"] > 0


def _legacy_run(root: Path, killed: bool) -> Path:
    """A run directory as footprint wrote it before segments: a v1 journal, samples.parquet, run.json."""
    run_dir = root / "legacy"
    (run_dir / "ranks").mkdir(parents=True)
    header = {"type": "header", "format": "footprint-meters-journal", "version": 1, "t0": 50.0, "rank": 0, "host": "n1"}
    header.update({"start_unix": 1.7e9, "world_size": 1, "name": "legacy", "site": {"grid": "FRA"}})
    devices = [{"uuid": "GPU-a", "name": "NVIDIA A100-SXM4-40GB", "method": "energy_counter", "component": "gpu", "index": 0}]
    lines = [json.dumps(header), json.dumps({"type": "devices", "t": 50.0, "keys": ["GPU-a"], "devices": devices})]
    lines += [f"[{50 + k * 0.1:.4f},{k * 30.0:.4f},300.00]" for k in range(1, 1201)]
    lines.append(json.dumps({"type": "event", "t": 170.0, "kind": "progress", "steps": 9, "tokens": 90, "flops": 0}))
    (run_dir / "ranks" / "rank-00000.journal.jsonl").write_text("\n".join(lines) + "\n")
    if not killed:
        rows = {"rank": [0] * 1200, "host": ["n1"] * 1200, "uuid": ["GPU-a"] * 1200, "component": ["gpu"] * 1200}
        rows.update({"t_s": [k * 0.1 for k in range(1, 1201)], "energy_j": [k * 30.0 for k in range(1, 1201)]})
        rows["power_w"] = [300.0] * 1200
        pd.DataFrame(rows).to_parquet(run_dir / "samples.parquet", index=False)
        rec = {"rank": 0, "host": "n1", "start_unix": 1.7e9, "end_unix": 1.7e9 + 120, "duration_s": 120.0, "steps": 9}
        rec.update({"devices": [{**devices[0], "energy_j": 36000.0}], "complete": True, "world_size": 1})
        runrecord.write_json(run_dir / "ranks" / "rank-00000.json", rec)
        runrecord.merge(run_dir)
    return run_dir


def test_old_run_directories_still_read(tmp_path: Path) -> None:
    run_dir = _legacy_run(tmp_path, killed=False)
    samples = runrecord.read_samples(run_dir, t_range=(10.0, 20.0))
    assert len(samples) == 100 and samples["t_s"].between(10.0, 20.0).all()
    timeline = runrecord.power_timeline(run_dir, buckets=20).to_pylist()
    assert len(timeline) == 20 and timeline[-1]["energy_j"] == pytest.approx(36000.0)
    out = subprocess.run(
        [PY, "-m", "footprint.cli", "report", str(run_dir), "-o", str(tmp_path / "r.html"), "--quiet", "--samples", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "Power per device" in (tmp_path / "r.html").read_text()


def test_old_killed_run_recovers(tmp_path: Path) -> None:
    run_dir = _legacy_run(tmp_path, killed=True)
    out = subprocess.run([PY, "-m", "footprint.cli", "recover", str(run_dir)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["energy"]["gpu_j"] == pytest.approx(36000.0) and run["steps"] == 9
    assert run["duration_s"] == pytest.approx(120.0)
    assert len(runrecord.read_samples(run_dir)) == 1200


def test_import_codecarbon_sums_the_ranks_of_one_job_and_says_so(tmp_path: Path) -> None:
    """Under torchrun each rank's codecarbon tracker appends its own row (its own run_id) to one emissions.csv, and a
    tracker that flushes appends cumulative rows under its run_id: the import sums the ranks of the last job, keeps
    each tracker's last row, leaves an earlier job out, and says so."""
    from codecarbon.output_methods.emissions_data import EmissionsData
    from codecarbon.output_methods.file import FileOutput

    fields = dict.fromkeys(EmissionsData.__dataclass_fields__, "")
    writer = FileOutput("emissions.csv", str(tmp_path), on_csv_write="append")

    def row(run_id: str, project: str, end: str, gpu_kwh: float, duration: float = 60.0) -> None:
        data = {**fields, "timestamp": end, "project_name": project, "run_id": run_id, "experiment_id": "x"}
        data.update(duration=duration, emissions=0.0, emissions_rate=0.0, cpu_power=10.0, gpu_power=300.0, ram_power=5.0)
        data.update(cpu_energy=0.001, gpu_energy=gpu_kwh, ram_energy=0.0005, energy_consumed=gpu_kwh + 0.0015)
        data.update(country_iso_code="FRA", gpu_count=1, gpu_model="1 x NVIDIA A100-SXM4-40GB", pue=1.0)
        writer.out(EmissionsData(**data), None)

    row("old", "llm", "2026-11-24T08:00:00", 0.5)  # an earlier job of the same project: not this one
    row("r0", "llm", "2026-11-24T10:00:30", 0.004, 30.0)  # rank 0's first flush (cumulative)
    row("r0", "llm", "2026-11-24T10:01:00", 0.010)
    row("r1", "llm", "2026-11-24T10:01:01", 0.011)
    out = tmp_path / "cc"
    proc = subprocess.run(
        [PY, "-m", "footprint.cli", "import", "codecarbon", str(tmp_path / "emissions.csv"), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 GPUs + host CPU, RAM" in proc.stdout and "2 rows of one job summed" in proc.stdout, proc.stdout
    rec = json.loads((out / "run.json").read_text())
    assert rec["energy"]["gpu_j"] == pytest.approx((0.010 + 0.011) * 3.6e6)
    assert len([d for d in rec["devices"] if d["component"] == "gpu"]) == 2 and rec["duration_s"] == pytest.approx(60.0)
    assert any("2 rows of one job summed" in n for n in rec["notes"])


def test_a_fake_nvml_run_is_said_simulated_never_measured_and_estimated_at_once(tmp_path: Path) -> None:
    """The fake NVML's readings are `measured: false` with a meter's method: one note says simulated, none says
    measured; the host's model says estimated."""
    from footprint.tracking.to_workload import workload_from_run

    with footprint.track(name="fake", output_dir=tmp_path, nvml=FakeNVML("2xA100-SXM4-40GB"), site="FRA") as t:
        t.step(tokens=10)
    notes = [n for n in workload_from_run(tmp_path / "fake").notes if n.startswith("energy ")]
    assert any(n.startswith("energy simulated, not measured: 2 x NVIDIA A100") and "(a fake NVML's " in n for n in notes), notes
    assert not any(n.startswith("energy measured") for n in notes), notes


def test_the_default_pue_is_said_where_the_run_is_recorded_and_in_the_summary(tmp_path: Path) -> None:
    """An invisible 1.58 (the industry-average preset) multiplied every kWh: `footprint run` and the assessment's
    summary name it as the default; a stated PUE is shown as it is."""
    from footprint.lca.assessment import summary_facts
    from footprint.tracking.to_workload import workload_from_run

    env = {**os.environ, "FOOTPRINT_FAKE_NVML": "1xA100-SXM4-40GB"}
    lines = {}
    for name, extra in (("default", []), ("stated", ["--pue", "1.1"])):
        proc = subprocess.run(
            [PY, "-m", "footprint.cli", "run", "--name", name, "--output-dir", str(tmp_path), *extra, "--", PY, "-c", "pass"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        lines[name] = proc.stderr.strip().splitlines()[-1]
    assert "PUE 1.58 (default: the industry_average preset, no PUE given)" in lines["default"]
    assert "PUE 1.1 (exit code 0)" in lines["stated"]
    a = footprint.assess(workload_from_run(tmp_path / "default"), samples=0)
    assert "PUE 1.58, default: the industry_average preset, no PUE given" in summary_facts(a)["Energy"]
    b = footprint.assess(workload_from_run(tmp_path / "stated"), samples=0)
    assert "(PUE 1.1)" in summary_facts(b)["Energy"]
