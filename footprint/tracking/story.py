"""The training story of a measured run: steps, tokens, throughput, energy per token and where it went.

From a run record (``run.json``) alone, so reports, ``footprint assess``, the dashboard and the
experiment-tracker loggers tell it the same way. Shares are of the run's GPU energy, by window kind:

- ``eval``, ``checkpoint`` (and any other named kind): the windows of that kind;
- ``train``: the "train" windows the callbacks open around the training loop, less the windows inside them;
- ``idle``: GPU energy outside any train window (start-up, model loading, teardown).

Without a train window (a hand-written loop with ``footprint.track``) train and idle cannot be told
apart and are reported together as ``train_and_idle``. Nothing here is estimated: a figure that
cannot be computed is None (not available).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from footprint.tracking.tracker import SHORT_WINDOW_S, WINDOW_KINDS

J_PER_KWH = 3.6e6


def _gpu_j(window: dict[str, Any], gpus: set[str]) -> float:
    return sum(float(v) for u, v in (window.get("energy_j") or {}).items() if u in gpus)


def _inside(w: dict[str, Any], outer: dict[str, Any]) -> bool:
    s, o = float(w.get("start_s", 0.0)), float(outer.get("start_s", 0.0))
    return (
        w.get("rank") == outer.get("rank")
        and o <= s
        and s + float(w.get("duration_s", 0.0)) <= o + float(outer.get("duration_s", 0.0)) + 1e-6
    )


def energy_by_kind(record: dict[str, Any]) -> dict[str, float] | None:
    """GPU energy (J) per window kind; see the module docstring. None without a GPU energy reading."""
    gpus = {d["uuid"] for d in record.get("devices", []) if d.get("component", "gpu") == "gpu" and d.get("uuid")}
    total = (record.get("energy") or {}).get("gpu_j")
    if not gpus or not total:
        return None
    windows = record.get("windows") or []
    kind = lambda w: w.get("kind") or WINDOW_KINDS.get(str(w.get("name")), str(w.get("name")))  # noqa: E731
    trains = [w for w in windows if kind(w) == "train"]
    out: dict[str, float] = {}
    inside_train = 0.0
    for w in windows:
        if kind(w) == "train":
            continue
        e = _gpu_j(w, gpus)
        out[kind(w)] = out.get(kind(w), 0.0) + e
        if any(_inside(w, t) for t in trains):
            inside_train += e
    others = sum(out.values())
    if trains:
        train = sum(_gpu_j(t, gpus) for t in trains)
        out["train"] = max(train - inside_train, 0.0)
        out["idle"] = max(float(total) - train - (others - inside_train), 0.0)
    else:
        out["train_and_idle"] = max(float(total) - others, 0.0)
    return out


def short_windows(record: dict[str, Any]) -> str | None:
    """One warning for every window shorter than 1 s, however many there are."""
    windows = record.get("windows") or []
    short = [w for w in windows if float(w.get("duration_s") or 0.0) < SHORT_WINDOW_S]
    if not short:
        return None
    names = Counter(str(w.get("name")) for w in short)
    listed = ", ".join(f"{n} x {c}" for n, c in names.most_common(5))
    return (
        f"{len(short)} of {len(windows)} windows are shorter than 1 s ({listed}): NVML energy over such windows is "
        "unreliable (the sensor averages ~25 ms of every 100 ms on A100/H100); their shares are indicative"
    )


def _train_seconds(record: dict[str, Any]) -> float | None:
    """Wall time of the training loop on rank 0 without its eval/checkpoint windows; else the run's duration."""
    windows = [w for w in record.get("windows") or [] if w.get("rank", 0) == 0]
    trains = [w for w in windows if (w.get("kind") or w.get("name")) == "train"]
    if trains:
        inner = sum(float(w["duration_s"]) for w in windows if w not in trains and any(_inside(w, t) for t in trains))
        return sum(float(t["duration_s"]) for t in trains) - inner
    duration = float(record.get("duration_s") or 0.0)
    return duration or None


def training_story(record: dict[str, Any]) -> dict[str, Any] | None:
    """The story of a run that counted steps or tokens (None for runs that did not: imports, bare `footprint run`)."""
    steps, tokens = record.get("steps"), record.get("tokens")
    if not steps and not tokens:
        return None
    energy = record.get("energy") or {}
    total_j, gpu_j = energy.get("total_j"), energy.get("gpu_j")
    train_s = _train_seconds(record)
    by_kind = energy_by_kind(record)
    step_stats = record.get("step_times") or {}
    kwh = total_j / J_PER_KWH if total_j else None
    story: dict[str, Any] = {
        "steps": steps or None,
        "tokens": tokens or None,
        "train_seconds": train_s,
        "tokens_per_s": tokens / train_s if tokens and train_s else None,
        "median_step_s": step_stats.get("median_s"),
        "energy_kwh": kwh,
        "gpu_energy_kwh": gpu_j / J_PER_KWH if gpu_j else None,
        "kwh_per_million_tokens": kwh / tokens * 1e6 if kwh and tokens else None,
        "kwh_per_step": kwh / steps if kwh and steps else None,
        "gpu_energy_share": {k: v / gpu_j for k, v in by_kind.items()} if by_kind and gpu_j else None,
        "windows": len(record.get("windows") or []),
        "world_size": record.get("world_size"),
        "ranks": len(record.get("ranks") or []) or None,
        "hosts": [str(h.get("host")) for h in record.get("hosts") or [] if isinstance(h, dict)] or None,
        "flops": record.get("flops"),
        "short_windows": short_windows(record),
        "definitions": {
            "tokens_per_s": "tokens (all ranks) / training-loop wall time without eval and checkpoint windows",
            "energy": "IT energy of the run (GPU + CPU + RAM as measured), per million tokens and per optimizer step",
            "gpu_energy_share": "GPU energy by window kind; idle = outside the training loop (set-up, teardown)",
        },
    }
    return story
