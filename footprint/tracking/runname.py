"""One run directory per run, whatever the number of processes: how a run's name is claimed and shared by its ranks.

Why: two `footprint run --name x` started together, four threads calling `track(name="x")`, or a torchrun rerun
under the same name must never share (or overwrite) one directory. A single process claims its directory with an
exclusive create (`footprint.outputs.claim_dir`: a taken name gets `-2`, `-3`...). In a distributed run rank 0
alone claims, and tells the other ranks the name it got, so that all ranks of one launch write into one directory
and a rerun gets its own:

1. under torchrun, through the elastic agent's key-value store (MASTER_ADDR:MASTER_PORT, the store every worker
   of this launch shares, fresh for each launch), when the script has imported torch;
2. otherwise through a small file in ``OUTPUT_DIR/.claims/`` keyed by the launch (SLURM job and step, or torchrun's
   run id and port), which the other ranks wait for (a file older than this process is a previous launch's).

A rank that hears nothing within the gather timeout writes into the unsuffixed name and says so in its notes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

CLAIMS_DIR = ".claims"
STORE_KEY = "footprint/run-name"
POLL_S = 0.05
_PROCESS_START = time.time()


def launch_key() -> str | None:
    """What identifies this launch (the same on every rank of it), or None outside a distributed launcher."""
    env = os.environ
    parts = [
        env.get(k, "")
        for k in (
            "SLURM_JOB_ID",
            "SLURM_STEP_ID",
            "TORCHELASTIC_RUN_ID",
            "MASTER_ADDR",
            "MASTER_PORT",
            "TORCHELASTIC_RESTART_COUNT",
        )
    ]
    if not any(parts[:3]) and not parts[4]:
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _store(timeout_s: float) -> Any:
    """The torchrun agent's store, when this is a torchrun worker whose script imported torch; else None."""
    torch = sys.modules.get("torch")
    env = os.environ
    if torch is None or env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return None
    try:
        return torch.distributed.TCPStore(
            env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=timeout_s)
        )
    except Exception:  # noqa: BLE001 - no store reachable: the file channel is used instead
        return None


def _key(name: str) -> str:
    return f"{STORE_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{name}"


def publish(output_dir: Path, wanted: str, chosen: str, timeout_s: float) -> None:
    """Rank 0: tell the other ranks the name it claimed for `wanted` ("" when it could not claim one)."""
    store = _store(timeout_s)
    if store is not None:
        with contextlib.suppress(Exception):
            store.set(_key(wanted), chosen)
            return
    key = launch_key()
    if key is None:
        return
    from footprint.outputs import write_text

    with contextlib.suppress(Exception):
        note = {"wanted": wanted, "chosen": chosen, "pid": os.getpid(), "time": time.time()}
        write_text(output_dir / CLAIMS_DIR / f"{_file_stem(wanted)}.{key}.json", json.dumps(note))


def learn(output_dir: Path, wanted: str, timeout_s: float) -> str | None:
    """Ranks other than 0: the name rank 0 claimed for `wanted`, or None if it did not say within `timeout_s`."""
    store = _store(timeout_s)
    if store is not None:
        with contextlib.suppress(Exception):
            return store.get(_key(wanted)).decode() or None
    key = launch_key()
    if key is None:
        return None
    path = output_dir / CLAIMS_DIR / f"{_file_stem(wanted)}.{key}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            note = json.loads(path.read_text())
            if note.get("wanted") == wanted and float(note.get("time", 0)) >= _PROCESS_START - 60:
                return str(note.get("chosen") or "") or None
        time.sleep(POLL_S)
    return None


def _file_stem(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]
