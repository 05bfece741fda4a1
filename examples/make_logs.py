"""Make the example logs and run that the README's examples use, with footprint's own code (no GPU needed).

    python examples/make_logs.py [--out examples]

Writes, from the fake NVML (`meters.fake_nvml`, the NVML stand-in the tests use) driven by one training-like
power pattern (compute at ~90 % of TDP, a dip every 10 s for data loading and evaluation):

- ``logs/nvidia-smi.csv``: what ``nvidia-smi --query-gpu=timestamp,name,index,uuid,power.draw,power.draw.instant
  --format=csv -lms 500`` prints for two H100 SXM boards over two minutes (local time stamps, UTC+1): the same
  NVML calls nvidia-smi makes (``nvmlDeviceGetPowerUsage``, the 1 s average on Hopper; the instant-power field),
  on a manual clock, so the file is the same at every run;
- ``runs/two-gpus/``: a run recorded by ``footprint.track`` on two fake A100 40GB boards drawing the same power
  (6 s, 60 optimizer steps of 4,096 tokens, an evaluation window), site FRA with PUE 1.2;
- ``logs/emissions.csv``: that run in codecarbon's columns (``footprint export emissions-csv``).

``footprint import nvidia-smi examples/logs/nvidia-smi.csv ...`` and ``footprint import codecarbon
examples/logs/emissions.csv ...`` read them back; ``footprint report examples/runs/two-gpus -o run.html`` and the
dashboard's Runs page (``?run=examples/runs/two-gpus``) show the run.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = datetime(2025, 3, 3, 9, 0, 0, tzinfo=UTC)  # the log's first reading
LOCAL = timezone(timedelta(hours=1))  # the time zone its time stamps are printed in


def training_load(tdp_w: float, idle_w: float, phase_s: float = 0.0):  # noqa: ANN201 - a power function for FakeNVML
    """Power (W) at t seconds: compute at ~90 % of TDP with a small ripple, and every 10 s a 1.5 s dip to idle."""

    def power(t: float) -> float:
        x = (t + phase_s) % 10.0
        if x >= 8.5:
            return idle_w + 8.0 * math.sin(7.0 * t)
        return 0.9 * tdp_w + 0.03 * tdp_w * math.sin(2.1 * t) + 0.02 * tdp_w * math.sin(13.0 * t)

    return power


def nvidia_smi_log(out: Path, seconds: float = 120.0, period_s: float = 0.5) -> int:
    """Poll two fake H100 SXM boards as `nvidia-smi --query-gpu=... -lms 500` does; returns the rows written."""
    from meters import fake_nvml as nv

    clock = nv.ManualClock()
    fake = nv.FakeNVML("2xH100-SXM5-80GB", power=[training_load(700, 95), training_load(700, 95, 0.7)], clock=clock)
    fake.nvmlInit()
    handles = [fake.nvmlDeviceGetHandleByIndex(i) for i in range(fake.nvmlDeviceGetCount())]
    clock.advance(2.0)  # the boards were on before the log started: their 1 s averages have a full second behind them
    lines = ["timestamp, name, index, uuid, power.draw [W], power.draw.instant [W]"]
    for k in range(int(seconds / period_s) + 1):
        stamp = (START + timedelta(seconds=k * period_s)).astimezone(LOCAL).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        for h in handles:
            average = fake.nvmlDeviceGetPowerUsage(h) / 1000
            instant = fake.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_POWER_INSTANT])[0].value.uiVal / 1000
            name, index, uuid = fake.nvmlDeviceGetName(h), fake.nvmlDeviceGetIndex(h), fake.nvmlDeviceGetUUID(h)
            lines.append(f"{stamp}, {name}, {index}, {uuid}, {average:.2f} W, {instant:.2f} W")
        clock.advance(period_s)
    fake.nvmlShutdown()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return len(lines) - 1


def tracked_run(runs: Path, name: str = "two-gpus", seconds: float = 6.0) -> Path:
    """A run recorded by footprint.track on two fake A100 40GB boards with identical power."""
    import footprint
    from meters.fake_nvml import FakeNVML

    fake = FakeNVML("2xA100-SXM4-40GB", power=training_load(400, 60, 5.0))
    shutil.rmtree(runs / name, ignore_errors=True)
    runs.mkdir(parents=True, exist_ok=True)
    site = {"grid": "FRA", "pue": 1.2}
    with contextlib.chdir(runs.parent), footprint.track(name=name, output_dir=runs.name, site=site, nvml=fake, host=False) as t:
        step_s = seconds / 70
        for step in range(60):
            time.sleep(step_s)
            t.step(tokens=4096)
            if step == 40:
                with t.window("eval"):
                    time.sleep(10 * step_s)
    return runs / name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE, help="folder to write logs/ and runs/ into (default: examples/)")
    args = p.parse_args(argv)
    rows = nvidia_smi_log(args.out / "logs" / "nvidia-smi.csv")
    run = tracked_run(args.out / "runs")
    from footprint.integrations.codecarbon import write_emissions_csv

    emissions = args.out / "logs" / "emissions.csv"
    emissions.unlink(missing_ok=True)  # export appends a row, as codecarbon does: start from an empty file
    write_emissions_csv(run, emissions)
    print(f"wrote {args.out / 'logs' / 'nvidia-smi.csv'} ({rows} rows), {run}/, {emissions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
