"""Child processes for the multi-rank tests: an environment without the launcher's rank variables (a test run under
torchrun, or a tracker's parent run, must not leak into the ranks a test starts), and torchrun with two CPU ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _paths import REPO

LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "FOOTPRINT_PARENT_RUN")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the launcher's variables, this checkout first on the path, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def torchrun(
    script: Path, out: Path, port: int, *, cwd: Path = REPO, timeout: float = 180, **env: str
) -> subprocess.CompletedProcess[str]:
    """``torch.distributed.run`` of ``script out`` on two ranks (fake NVML: two A100s unless ``env`` says)."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={port}", str(script), str(out)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(**{"FOOTPRINT_FAKE_NVML": "2xA100-SXM4-40GB", **env}),
    )
