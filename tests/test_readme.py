"""The README as a newcomer runs it: its marked examples run and print what it shows, every repository path it
names exists, every link in docs/ resolves, and its test command is the one .ci/run runs.

Marked blocks (an HTML comment just above a fenced block):
    <!-- check: exact -->  a ```text block of `$ command` lines, each followed by its output: the output must match
                          line by line (a line `...` stands for any number of lines)
    <!-- check: shape -->  the same, numbers aside (timings and energies of a live run differ from run to run)
    <!-- check: runs -->   a ```bash block: every command must exit 0
Commands run in a scratch folder that links the repository's scenarios/, examples/, lca_data/ and docs/, so
what they write (runs/, reports) stays out of the repository.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO

README = (REPO / "README.md").read_text()
BLOCK = re.compile(r"<!-- check: (exact|shape|runs) -->\n```(text|bash)\n(.*?)```", re.S)
ROOTS = (
    "scenarios",
    "examples",
    "docs",
    "lca_data",
    "benchmarks",
    "footprint",
    "meters",
    "dashboard",
    "tests",
    ".ci",
    ".streamlit",
)
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(re.escape(r) for r in ROOTS) + r")/[\w./*-]*\w)")


def _blocks() -> list[tuple[str, list[tuple[str, list[str] | None]]]]:
    """(kind, [(command, expected output lines or None)]) per marked block, in README order."""
    out = []
    for kind, lang, body in BLOCK.findall(README):
        steps: list[tuple[str, list[str] | None]] = []
        if lang == "bash":
            for line in body.splitlines():
                cmd = re.sub(r"\s{2,}#.*$", "", line).strip()
                if cmd and not cmd.startswith("#"):
                    steps.append((cmd, None))
        else:
            for line in body.splitlines():
                if line.startswith("$ "):
                    steps.append((re.sub(r"\s{2,}#.*$", "", line[2:]), []))
                elif steps:
                    steps[-1][1].append(line)  # type: ignore[union-attr]
        out.append((kind, steps))
    return out


def _numbers(line: str) -> str:
    """Numbers as N, with the unit prefix a number's magnitude picks (0.114 g or 99.4 mg CO2 eq; 1.47 Wh or 0.9 kWh)."""
    line = re.sub(r"\d[\d,]*(\.\d+)?(e[+-]?\d+)?", "N", line)
    return re.sub(r"\bN (?:k|m|µ)?(g|Wh|L|mol|Bq|J|Pt)\b", r"N \1", line)


def _matches(got: list[str], want: list[str], shape: bool) -> bool:
    """Line by line; `...` matches any number of lines; with `shape`, numbers compare as N."""
    norm = _numbers if shape else (lambda s: s)
    got = [norm(g.rstrip()) for g in got]
    want = [norm(w.rstrip()) for w in want]

    def rec(i: int, j: int) -> bool:
        if j == len(want):
            return i == len(got)
        if want[j] == "...":
            return any(rec(k, j + 1) for k in range(i, len(got) + 1))
        return i < len(got) and got[i] == want[j] and rec(i + 1, j + 1)

    return rec(0, 0)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder with the repository's data folders linked in; commands write there."""
    root = tmp_path_factory.mktemp("readme")
    for name in ("scenarios", "examples", "lca_data", "docs"):
        (root / name).symlink_to(REPO / name, target_is_directory=True)
    return root


def _run(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOOTPRINT_FAKE")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "200"
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_readme_has_marked_examples() -> None:
    kinds = [k for k, _ in _blocks()]
    assert kinds.count("exact") >= 2 and kinds.count("shape") >= 2 and kinds.count("runs") >= 2, kinds


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_example_runs_as_shown(index: int, scratch: Path) -> None:
    kind, steps = _blocks()[index]
    for cmd, want in steps:
        proc = _run(cmd, scratch)
        assert proc.returncode == 0, f"$ {cmd}\nexit {proc.returncode}\n{proc.stderr[-2000:]}"
        if want is None or kind == "runs":
            continue
        got = (proc.stdout + proc.stderr).splitlines()
        assert _matches(got, want, kind == "shape"), f"$ {cmd}\n--- README\n" + "\n".join(want) + "\n--- got\n" + "\n".join(got)


def test_every_repository_path_the_readme_names_exists() -> None:
    missing = [p for p in dict.fromkeys(PATH.findall(README)) if not any(REPO.glob(p))]  # a pattern: some file matches
    assert not missing, f"README names paths the repository does not have: {missing}"


def test_every_link_in_the_readme_and_docs_resolves() -> None:
    bad = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            if not (page.parent / path).exists():
                bad.append(f"{page.relative_to(REPO)}: {target}")
    assert not bad, bad


def test_no_example_points_outside_the_repository() -> None:
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text()
        for bad in ("../shared", "ARCHITECTURE.md", "VALIDATION.md", "MEASUREMENT.md", "gpu.csv"):
            if page.name == "data.md" and bad == "../shared":
                continue  # rebuilding lca_data from the original downloads, which are not redistributed
            assert bad not in text, f"{page.name} mentions {bad}"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    line = next(x for x in README.splitlines() if "pytest" in x and x.startswith("python -m pip install"))
    command = re.sub(r"\s{2,}#.*$", "", line)
    ci = [re.sub(r"\s{2,}#.*$", "", x).strip() for x in (REPO / ".ci" / "run").read_text().splitlines()]
    assert command.strip() in ci, f"{command!r} is not a line of .ci/run"
    parts = [shlex.split(p) for p in command.split(" && ")]
    assert parts[0][:4] == ["python", "-m", "pip", "install"]


def test_the_readme_test_command_installs_torch_cpu_wheel_before_the_extras() -> None:
    """The dev extra pulls torch through Lightning and accelerate; PyPI's Linux torch is the CUDA build (several GB, a
    dozen nvidia-* wheels). Installed first from PyTorch's CPU index, torch is already there when the extras come."""
    line = next(x for x in README.splitlines() if "pytest" in x and x.startswith("python -m pip install"))
    parts = [shlex.split(p) for p in re.sub(r"\s{2,}#.*$", "", line).split(" && ")]
    extras = next(i for i, p in enumerate(parts) if any(".[dev]" in a for a in p))
    torch_first = [p for p in parts[:extras] if "torch" in p and "--index-url" in p]
    assert torch_first and torch_first[0][torch_first[0].index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
