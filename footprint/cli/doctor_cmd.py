"""`footprint doctor`: what this machine can measure (NVML, RAPL, estimates) and which extras work."""

from __future__ import annotations

import argparse
import json

MARK = {"ok": "ok  ", "warn": "warn", "missing": "--  "}


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command

    d = command(
        sub,
        "doctor",
        "check what this machine can measure (GPU, CPU, RAM) and which optional parts work",
        "footprint doctor\nFOOTPRINT_FAKE_NVML=2xH100-SXM5-80GB footprint doctor --format json\n"
        "FOOTPRINT_FAKE_AMDSMI=2xMI300X footprint doctor",
        handler=doctor,
    )
    d.add_argument("--output-dir", default="runs", help="where runs would be written (checked for write access)")
    d.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")


def doctor(args: argparse.Namespace) -> int:
    from footprint.cli.doctor import environment, run_checks

    env = environment()
    checks = run_checks(args.output_dir)
    if args.format == "json":
        print(json.dumps({**env, "checks": [c.to_dict() for c in checks]}, indent=2))
        return 0
    print(f"footprint {env['footprint']} on {env['host']} (Python {env['python']}, {env['platform']})")
    for k, v in env["env"].items():
        print(f"  {k}={v}")
    for c in checks:
        print(f"[{MARK[c.status]}] {c.name}: {c.summary}")
        for line in c.details:
            print(f"         {line}")
    return 0
