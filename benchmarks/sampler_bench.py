"""Sampler overhead on 8 fake GPUs at 10 Hz: import and start time, per-tick cost, CPU share.

    python benchmarks/sampler_bench.py [--seconds 5] [--gpus 8] [--period 0.1] [--latency-us 0]

The fake NVML's own work (locks, power-model integration) is inside the tick cost; `--latency-us`
adds a real sleep per NVML call to mimic a driver (it lengthens ticks but costs no CPU).
"""

from __future__ import annotations

import time

_t_import = time.perf_counter()
from meters.fake_nvml import FakeNVML  # noqa: E402
from meters.nvml import NvmlMeter  # noqa: E402
from meters.sampler import Sampler  # noqa: E402

IMPORT_S = time.perf_counter() - _t_import

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--period", type=float, default=0.1)
    ap.add_argument("--latency-us", type=float, default=0.0)
    args = ap.parse_args()
    spec = f"{args.gpus}xH100-SXM5-80GB"
    heavy = sorted(m for m in ("numpy", "pandas", "pyarrow", "codecarbon", "pynvml") if m in sys.modules)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, bytecode cache {'off' if sys.dont_write_bytecode else 'on'}")
    print(f"import meters.sampler+nvml+fake_nvml: {IMPORT_S * 1e3:.1f} ms (heavy modules loaded: {heavy or 'none'})")

    with tempfile.TemporaryDirectory() as tmp:
        starts = []
        for i in range(10):
            meter = NvmlMeter(FakeNVML(spec))
            t0 = time.perf_counter()
            sampler = Sampler([meter], period_s=args.period, journal_path=os.path.join(tmp, f"s{i}.jsonl")).start()
            starts.append(time.perf_counter() - t0)
            sampler.stop()
        print(
            f"Sampler.start() incl. NVML init of {args.gpus} fake GPUs and journal open: "
            f"median {statistics.median(starts) * 1e3:.2f} ms, max {max(starts) * 1e3:.2f} ms (10 runs)"
        )

        fake = FakeNVML(spec, latency_s=args.latency_us / 1e6)
        journal = os.path.join(tmp, "bench.jsonl")
        sampler = Sampler([NvmlMeter(fake)], period_s=args.period, journal_path=journal)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        sampler.start()
        time.sleep(args.seconds)
        totals = sampler.stop()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stats = sampler.tick_stats()
        size = os.path.getsize(journal)
    print(
        f"{args.gpus} fake GPUs at {1 / args.period:g} Hz for {wall:.1f} s: {int(stats['ticks'])} ticks, "
        f"{int(stats['missed_ticks'])} missed, {int(stats['errors'])} errors"
    )
    print(
        f"tick cost: mean {stats['mean_s'] * 1e6:.0f} us, median {stats['median_s'] * 1e6:.0f} us, "
        f"p99 {stats['p99_s'] * 1e6:.0f} us, max {stats['max_s'] * 1e6:.0f} us (NVML latency "
        f"{args.latency_us:g} us/call)"
    )
    print(
        f"sampler CPU use: {cpu:.3f} s CPU over {wall:.2f} s wall = {100 * cpu / wall:.2f} % of one core "
        "(process CPU time; the main thread only sleeps)"
    )
    print(
        f"journal: {size / wall / 1024:.1f} KiB/s ({size / max(stats['ticks'], 1):.0f} B per tick); "
        f"total energy {sum(t.energy_j or 0 for t in totals.values()) / 1e3:.2f} kJ"
    )


if __name__ == "__main__":
    main()
