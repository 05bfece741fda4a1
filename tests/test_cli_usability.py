"""The CLI as a newcomer meets it: help everywhere, examples, typos, version, stdout reports, doctor."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from _paths import REPO

from footprint.cli import build_parser, main


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def test_every_option_has_help_and_every_command_an_example() -> None:
    missing, no_example = [], []
    for path, parser in _walk(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue
            if not action.help:
                missing.append(f"{' '.join(path)} {action.dest}")
        top_level_command = len(path) == 1
        if top_level_command and not (parser.epilog or "").startswith("examples:"):
            no_example.append(path[0])
    assert not missing, f"options without help: {missing}"
    assert not no_example, f"commands without examples: {no_example}"


def test_no_arguments_shows_help_and_exits_0(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: footprint" in out and "examples:" in out and "doctor" in out


def test_mistyped_command_suggests_the_right_one(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["asess", "scenarios/bloom-176b.yaml"])
    assert exc.value.code == 2
    assert "did you mean 'assess'?" in capsys.readouterr().err


def test_version_names_the_tool_and_python(capsys) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("footprint 0.") and "Python 3." in out


def test_gpus_format_given_before_show_is_kept(capsys) -> None:
    assert main(["gpus", "--format", "json", "show", "a100-sxm4-40gb"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "a100-sxm4-40gb"
    assert main(["gpus", "show", "a100-sxm4-40gb"]) == 0  # default stays the table
    assert capsys.readouterr().out.startswith("NVIDIA A100 SXM4 40GB")


def test_report_json_to_stdout_is_the_assess_json(capsys) -> None:
    sc = str(REPO / "scenarios" / "olmo-2-7b.yaml")
    assert main(["report", sc, "--format", "json", "-o", "-", "--samples", "200", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["assess", sc, "--format", "json", "--samples", "200"]) == 0
    assert report == json.loads(capsys.readouterr().out)


def test_report_markdown_to_stdout_is_refused(capsys) -> None:
    assert main(["report", str(REPO / "scenarios" / "olmo-2-7b.yaml"), "--format", "md", "-o", "-"]) == 2
    assert "Markdown and PDF need a file" in capsys.readouterr().err


def test_report_to_a_file_keeps_stdout_clean_when_not_a_terminal(tmp_path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "report", "scenarios/olmo-2-7b.yaml", "-o", str(out), "--samples", "100"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0 and proc.stdout == "" and out.exists()
    assert proc.stderr.strip() == f"wrote {out}"


def _doctor(env_value: str) -> dict:
    env = {**os.environ, "FOOTPRINT_FAKE_NVML": env_value}
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "doctor", "--format", "json"], capture_output=True, text=True, cwd=REPO, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_doctor_reports_each_gpu_and_its_method() -> None:
    report = _doctor("2xH100-SXM5-80GB")
    gpu = next(c for c in report["checks"] if c["name"].startswith("GPU"))
    assert gpu["status"] == "ok" and "2 GPU(s), 2 with the total-energy counter" in gpu["summary"]
    assert sum("energy_counter" in d for d in gpu["details"]) == 2
    assert {c["name"] for c in report["checks"]} >= {"CPU/DRAM energy (RAPL)", "torch", "Chromium (PDF reports)"}


def test_doctor_says_why_when_nvml_is_missing() -> None:
    gpu = next(c for c in _doctor("missing")["checks"] if c["name"].startswith("GPU"))
    assert gpu["status"] == "missing" and gpu["details"], gpu
