"""Is this machine fit to time kernels on? Threads to use, how loaded it is, and when a median is trustworthy.

- `physical_cores()`: the physical cores among the CPUs this process may run on (its affinity), the
  default number of threads of the CPU bench (hyper-threads share a core's FPUs: more threads than
  cores slows GEMMs down and makes timings noisy).
- `load()`: the 1-minute load average against those CPUs, and the other processes using a CPU now
  (psutil, sampled over `window` seconds). A machine is *loaded* when the load average is at least half
  the usable CPUs or another process uses more than a quarter of a CPU.
- `median_ci(times)`: the distribution-free 95 % confidence interval of the median (order statistics of
  the binomial(n, 1/2)); the bench repeats a configuration until this interval is within
  `CI_TARGET` of the median or its time budget runs out, and a timing that is still wider (or whose
  IQR exceeds 25 % of the median) is noise: it is kept, marked, and never used for prediction.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Any

CI_TARGET = 0.05  # half-width of the median's 95 % CI, as a share of the median
LOADED_SHARE = 0.5  # load average / usable CPUs at or above which the machine is loaded
BUSY_PROCESS_CPU = 25.0  # % of one CPU above which another process counts as busy


def affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def physical_cores() -> int:
    """Physical cores among the CPUs of this process's affinity (Linux topology; else psutil; else the CPUs)."""
    cpus = affinity()
    cores = set()
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology"
        try:
            with open(f"{base}/core_id") as f1, open(f"{base}/physical_package_id") as f2:
                cores.add((f2.read().strip(), f1.read().strip()))
        except OSError:
            cores = set()
            break
    if cores:
        return len(cores)
    try:
        import psutil

        phys = psutil.cpu_count(logical=False)
        logical = psutil.cpu_count(logical=True) or len(cpus)
        if phys:
            return max(1, round(len(cpus) * phys / logical))
    except ImportError:
        pass
    return len(cpus)


def load(window: float = 0.5) -> dict[str, Any]:
    """The machine's load now: load average, other busy processes, and whether it is too loaded to time on."""
    cpus = len(affinity())
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = None
    busy: list[dict[str, Any]] = []
    try:
        import psutil

        me = os.getpid()
        procs = [p for p in psutil.process_iter(["pid", "name"]) if p.info["pid"] != me]
        for p in procs:
            with contextlib.suppress(psutil.Error, OSError):
                p.cpu_percent(None)
        time.sleep(window)
        for p in procs:
            try:
                pct = p.cpu_percent(None)
            except (psutil.Error, OSError):
                continue
            if pct > BUSY_PROCESS_CPU:
                busy.append({"pid": p.info["pid"], "name": p.info["name"], "cpu_percent": round(pct, 1)})
    except ImportError:
        pass
    busy.sort(key=lambda b: -b["cpu_percent"])
    reasons = []
    if load1 is not None and load1 >= LOADED_SHARE * cpus:
        reasons.append(f"load average {load1:.2f} on {cpus} usable CPU{'s' if cpus != 1 else ''}")
    if busy:
        reasons.append(
            f"{len(busy)} other busy process{'es' if len(busy) != 1 else ''} ("
            + ", ".join(f"{b['name']} {b['cpu_percent']:.0f}%" for b in busy[:3])
            + ")"
        )
    return {"cpus": cpus, "load1": load1, "busy_processes": busy[:10], "loaded": bool(reasons), "reasons": reasons}


def median_ci(times: list[float]) -> tuple[float, float, float]:
    """(median, low, high): the distribution-free 95 % confidence interval of the median."""
    xs = sorted(times)
    n = len(xs)
    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    if n < 6:  # too few for a 95 % interval: the whole range
        return med, xs[0], xs[-1]
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return med, xs[lo], xs[hi]


def ci_rel(times: list[float]) -> float:
    """Half-width of the median's 95 % CI as a share of the median (inf when the median is 0)."""
    med, lo, hi = median_ci(times)
    return (hi - lo) / 2 / med if med > 0 else math.inf
