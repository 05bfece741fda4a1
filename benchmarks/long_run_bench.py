"""Long runs end to end: time, peak memory and disk from the first sample to the report, at 1 h, 10 h, 100 h.

For each run length a fresh process writes a synthetic run of 8 GPUs plus host CPU and RAM at 10 Hz
through the real tracker, sampler and journal writer (a manual clock and a synthetic meter stand in
for time and NVML, so 100 h take minutes, and `Tracker._new_sampler` is the seam), copies the run
directory as a kill -9 at that instant would leave it, then calls `Tracker.stop()`: its time and the
process's peak RSS during it (VmHWM reset just before). Then, each in a fresh process, timed over the
whole process with its peak RSS: `footprint recover` on the killed copy, `footprint assess` and
`footprint report` (HTML, with the power figure) on the stopped run, and the dashboard's Runs page
loaded with Streamlit's AppTest. Disk is the run directory after stop.

Goals (issue 11): stop < 1 s and < 200 MB at any length; recover, report and the Runs page within
200 MB peak at 100 h and growing sublinearly; disk < 50 MB per GPU per 30 days at the default retention.

    python benchmarks/long_run_bench.py [--hours 1,10,100] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "dashboard" / "app.py")
GPUS = 8
HZ = 10.0


# ---- the synthetic job (child process) -------------------------------------------------------------
class SyntheticHost:
    """8 GPUs at a training-like power (steps, dips, noise) plus CPU and RAM, as cumulative energy counters."""

    name = "synthetic"

    def __init__(self, clock: Any, gpus: int, seed: int = 0) -> None:
        from meters.base import DeviceInfo

        rng = random.Random(seed)
        self.clock = clock
        self.infos = [
            DeviceInfo(uuid=f"GPU-synthetic-{i:02d}", name="NVIDIA H100 80GB HBM3", index=i, method="energy_counter")
            for i in range(gpus)
        ]
        self.infos += [
            DeviceInfo(uuid="estimate:cpu", name="CPU (estimated)", method="estimated", component="cpu", measured=False),
            DeviceInfo(uuid="estimate:ram", name="RAM (estimated)", method="estimated", component="ram", measured=False),
        ]
        period = 10_007  # a prime number of ticks: the pattern never lines up with segment boundaries
        self.patterns = []
        for d in self.infos:
            base, swing, noise = (560.0, 140.0, 25.0) if d.component == "gpu" else (180.0, 40.0, 15.0)
            if d.component == "ram":
                base, swing, noise = 20.0, 0.0, 0.0
            phase = rng.random() * 6.28
            self.patterns.append(
                [
                    round(base + swing * (1 if math.sin(k / 3.7 + phase) > 0 else -1) + rng.gauss(0, noise), 3)
                    for k in range(period)
                ]
            )
        self.energy = [0.0] * len(self.infos)
        self.k = 0
        self.t = clock()

    def start(self) -> None:
        self.t = self.clock()

    def sample(self) -> list[Any]:
        from meters.base import DeviceSample

        t = self.clock()
        dt = t - self.t
        self.t = t
        k = self.k % len(self.patterns[0])
        self.k += 1
        out = []
        for i, d in enumerate(self.infos):
            p = self.patterns[i][k]
            self.energy[i] += p * dt
            out.append(DeviceSample(d.uuid, t, self.energy[i], p))
        return out

    def stop(self) -> None:
        pass

    @property
    def devices(self) -> list[Any]:
        return self.infos


def _vm(field: str) -> float | None:
    """A /proc/self/status memory field in MB (VmRSS, VmHWM)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def child_generate(hours: float, out: Path, gpus: int) -> None:
    from footprint.tracking.tracker import Tracker
    from meters.fake_nvml import ManualClock

    clock = ManualClock(time.monotonic())
    host = SyntheticHost(clock, gpus)

    class SyntheticTracker(Tracker):
        def _new_sampler(self, sampler_cls: Any, meters: Any, journal: Any, meta: Any, retention: Any) -> Any:
            return sampler_cls(
                [host],
                period_s=self.period_s,
                journal_path=journal,
                meta={**meta, "t0": clock()},  # samples count from the synthetic clock's start
                progress=self._progress,
                retention=retention,
                clock=clock,
                background=False,
            )

    os.environ["FOOTPRINT_FAKE_NVML"] = "1xH100-SXM5-80GB"  # the tracker builds an NVML meter that is never used
    t = SyntheticTracker(name="long", output_dir=out / "runs", host=False, period_s=1.0 / HZ, site={"grid": "FRA", "pue": 1.2})
    t.start()
    sampler = t._sampler
    ticks = int(hours * 3600 * HZ)
    w0 = time.perf_counter()
    for i in range(ticks):
        clock.advance(1.0 / HZ)
        sampler.tick()
        if i % int(HZ) == 0:
            t.step(tokens=4096)
    write_s = time.perf_counter() - w0
    sampler.flush()
    if sampler._journal is not None and sampler._journal.segments is not None:
        sampler._journal.segments.wait_idle()
    run_dir = t.run_dir
    shutil.copytree(run_dir, out / "killed" / "long")  # what kill -9 leaves at this instant
    t._start_unix = time.time() - hours * 3600  # the record's wall-clock duration matches the synthetic run
    rss_before = _vm("VmRSS")
    reset = False
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM: the peak measured is the stop's
        reset = True
    except OSError:
        pass
    s0 = time.perf_counter()
    run = t.stop()
    stop_s = time.perf_counter() - s0
    peak = _vm("VmHWM") if reset else None
    print(
        json.dumps(
            {
                "ticks": ticks,
                "write_s": write_s,
                "stop_s": stop_s,
                "rss_before_mb": rss_before,
                "stop_peak_mb": peak,
                "gpu_j": (run or {}).get("energy", {}).get("gpu_j"),
                "errors": list(sampler.error_log)[:5],
            }
        )
    )


def child_runs_page(run_root: str) -> None:
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.sidebar.radio(key="page").set_value("Runs").run()
    at.text_input(key="run_root").set_value(run_root).run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    charts = len(at.get("vega_lite_chart"))
    if problems or charts < 2:
        raise SystemExit(f"Runs page failed: {problems or 'no charts'}")


# ---- the parent: processes, timing, table -----------------------------------------------------------
def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... failed ({proc.returncode}): {err[-800:]}")
    return wall, usage.ru_maxrss / 1024, out


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def month_mb_per_gpu(run_dir: Path, gpus: int) -> float | None:
    """Disk per GPU for 30 days at the default retention, from each tier's measured MB per hour of run:
    raw for `raw_s`, per-second for `second_s`, per-minute for the whole month (plus the journal tail)."""
    from meters.segments import MINUTE, RAW, SECOND, Retention, list_parts

    ret = Retention()
    month_h = 30 * 24.0
    keep_h = {RAW: (ret.raw_s or math.inf) / 3600, SECOND: (ret.second_s or math.inf) / 3600, MINUTE: math.inf}
    total = 0.0
    for seg in (run_dir / "ranks").glob("rank-*.segments"):
        for tier in (RAW, SECOND, MINUTE):
            parts = list_parts(seg, tier)
            if not parts:
                continue
            hours = sum(b - a for _, (a, b) in parts) / 3.6e6
            size = sum(p.stat().st_size for p, _ in parts) / 1e6
            total += size / hours * min(keep_h[tier], month_h)
    tails = sum(p.stat().st_size for p in (run_dir / "ranks").glob("rank-*.journal.jsonl")) / 1e6
    return (total + tails) / gpus if total else None


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", default="1,10,100", help="run lengths in hours, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per reader measurement")
    ap.add_argument("--gpus", type=int, default=GPUS)
    ap.add_argument("--keep", type=Path, default=None, help="keep the run directories under this folder")
    ap.add_argument("--child", choices=["generate", "runs-page"], help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "generate":
        child_generate(float(args.hours), args.dir, args.gpus)
        return
    if args.child == "runs-page":
        child_runs_page(str(args.dir))
        return

    py = sys.executable
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("FOOTPRINT_FAKE_NVML", None)
    root = Path(args.keep or tempfile.mkdtemp(prefix="footprint-long-"))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.gpus} GPUs + CPU + RAM at {HZ:g} Hz; "
        f"readers: median (min-max) of {args.repeat} fresh processes; stop: n=1 per length (it ends the run)"
    )
    rows = []
    for hours in [float(h) for h in args.hours.split(",")]:
        base = root / f"{hours:g}h"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        child = [py, __file__, "--child", "generate", "--hours", str(hours), "--dir", str(base), "--gpus", str(args.gpus)]
        _, gen_rss, out = timed(child, env)
        g = json.loads(out.strip().splitlines()[-1])
        run_dir, killed = base / "runs" / "long", base / "killed" / "long"
        r: dict[str, Any] = {
            "hours": hours,
            **g,
            "gen_peak_mb": gen_rss,
            "disk_mb": disk_mb(run_dir),
            "month_mb": month_mb_per_gpu(run_dir, args.gpus),
        }
        for name, cmd in (
            ("recover", None),
            ("assess", [py, "-m", "footprint.cli", "assess", str(run_dir), "--samples", "1000"]),
            ("report", [py, "-m", "footprint.cli", "report", str(run_dir), "-o", str(base / "report.html"), "--quiet"]),
            ("runs_page", [py, __file__, "--child", "runs-page", "--dir", str(run_dir)]),
        ):
            walls, peaks = [], []
            for _ in range(args.repeat):
                if name == "recover":  # each try on a fresh copy of the killed directory
                    target = base / "recover" / "long"
                    shutil.rmtree(target.parent, ignore_errors=True)
                    shutil.copytree(killed, target)
                    cmd = [py, "-m", "footprint.cli", "recover", str(target)]
                assert cmd is not None
                w, p, _ = timed(cmd, env)
                walls.append(w)
                peaks.append(p)
            r[name] = (walls, peaks)
        rec = json.loads((base / "recover" / "long" / "run.json").read_text())
        r["recovered_gpu_j"] = (rec.get("energy") or {}).get("gpu_j")
        rows.append(r)
        print(
            f"{hours:g} h: wrote {g['ticks']:,} ticks in {g['write_s']:.0f} s ({g['write_s'] / g['ticks'] * 1e6:.0f} us per tick "
            f"of {args.gpus + 2} devices, sampler + writer), disk {r['disk_mb']:.1f} MB, stop {g['stop_s'] * 1000:.0f} ms, "
            f"GPU energy stopped {g['gpu_j'] / 3.6e6:.3f} kWh / recovered {r['recovered_gpu_j'] / 3.6e6:.3f} kWh"
            + (f"; errors: {g['errors']}" if g["errors"] else ""),
            flush=True,
        )
    _table(rows, args.gpus)
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


def _table(rows: list[dict[str, Any]], gpus: int) -> None:
    head = ["run", "disk", "MB/GPU/30 d", "stop", "recover", "assess", "report", "Runs page"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        per30 = r["month_mb"]
        stop_peak = f"{r['stop_peak_mb']:.0f} MB (before: {r['rss_before_mb']:.0f})" if r["stop_peak_mb"] else "n/a"
        cells = [
            f"{r['hours']:g} h",
            f"{r['disk_mb']:.1f} MB",
            f"{per30:.1f}" if per30 else "n/a",
            f"{r['stop_s']:.2f} s, {stop_peak}",
        ]
        for name in ("recover", "assess", "report", "runs_page"):
            walls, peaks = r[name]
            cells.append(f"{spread(walls)} s, {spread(peaks, '{:.0f}')} MB")
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        x = b["hours"] / a["hours"]
        cells = [f"growth x{x:g} run", f"x{b['disk_mb'] / a['disk_mb']:.1f}", "", f"time x{b['stop_s'] / a['stop_s']:.1f}"]
        for name in ("recover", "assess", "report", "runs_page"):
            ta, tb = statistics.median(a[name][0]), statistics.median(b[name][0])
            ma, mb = statistics.median(a[name][1]), statistics.median(b[name][1])
            cells.append(f"time x{tb / ta:.2f}, memory x{mb / ma:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print(
        "time: whole process (interpreter start included) except stop, which is Tracker.stop() inside the job; memory: "
        "peak RSS of that process (stop: VmHWM reset just before stop(), so the peak of stop itself). "
        "MB/GPU/30 d: each tier's measured MB per hour of run times the hours the default retention keeps it in 30 days "
        "(raw 1 day, per-second 7 days, per-minute all 30), per GPU."
    )


if __name__ == "__main__":
    main()
