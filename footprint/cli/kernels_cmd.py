"""`footprint kernels analyze|diff|bench|predict`: kernel-level efficiency from profiler traces and benchmarks."""

from __future__ import annotations

import argparse

from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import group

    _, ks = group(
        sub,
        "kernels",
        "kernel-level efficiency: analyse profiler traces, benchmark kernels",
        """
footprint kernels analyze trace.json --top 10
footprint kernels analyze trace.json.gz --power runs/demo --format json -o kernels.json
footprint kernels analyze examples/traces/cpu_training.json.gz --steps all
footprint kernels analyze traces/ --format json           # a directory: one trace per rank
footprint kernels diff before.json.gz after.json.gz --train-steps 100000 --gpus 64 --format html -o diff.html
footprint kernels bench --device cpu --quick -o cpu.yaml
footprint kernels predict --profile cpu.yaml --model example""",
    )
    ka = ks.add_parser("analyze", help="analyse a PyTorch profiler (Kineto) trace (.json or .json.gz)")
    ka.add_argument("trace", help="the trace: .json, .json.gz, or a .tar/.tar.gz holding one; a directory: one trace per rank")
    ka.add_argument(
        "--ranks",
        action="store_true",
        help="analyse every trace of a directory or tar archive as the ranks of one job (implied for a directory): "
        "per-rank step time, straggler, communication overlap, energy",
    )
    ka.add_argument(
        "--steps",
        default="steady",
        help="which profiler steps the summary covers: steady (default: all but the first active step), all, "
        "or N (the N-th step)",
    )
    ka.add_argument(
        "--include-unlinked",
        action="store_true",
        help="also count GPU events with no launch call in the recording (carried over from before it, or otherwise "
        "launchless); by default only launched events count, as in TraceLens",
    )
    ka.add_argument(
        "--power",
        help="run directory whose power samples (GPU, or RAPL CPU package for CPU traces) are aligned with the timeline",
    )
    ka.add_argument("--top", type=number_arg(int, 0, 1_000_000), default=20, help="top ops to list")
    ka.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    ka.add_argument("-o", "--output", help="write to this file instead of stdout")
    ka.set_defaults(handler=analyze)
    _register_diff(ks)
    kb = ks.add_parser("bench", help="benchmark GEMM (and attention on GPUs) into an efficiency profile")
    kb.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if available, else cpu")
    kb.add_argument("--quick", action="store_true", help="a small sweep (CI)")
    kb.add_argument("--dtypes", default=None, help="comma-separated, e.g. bf16,fp16,fp32")
    kb.add_argument(
        "--threads",
        type=number_arg(int, 1, 4096),
        default=None,
        help="CPU threads (default: the physical cores this process may run on)",
    )
    kb.add_argument("-o", "--output", default="profile.yaml", help="the efficiency profile to write (default profile.yaml)")
    kb.set_defaults(handler=bench)
    kp = ks.add_parser("predict", help="a CPU profile predicts a training step on this CPU, checked against a measured one")
    kp.add_argument("--profile", required=True, help="a CPU profile written by footprint kernels bench --device cpu")
    kp.add_argument(
        "--model", default="example", help="'example' or layers=2,hidden=128,heads=4,seq_len=64,batch_size=8,vocab_size=1000"
    )
    kp.add_argument("--steps", type=number_arg(int, 1, 100_000), default=10, help="training steps timed (after 3 warm-up steps)")
    kp.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    kp.set_defaults(handler=predict)


def _register_diff(ks: argparse._SubParsersAction) -> None:
    kd = ks.add_parser(
        "diff",
        help="compare two traces of the same model: time, FLOPs, %% of peak and energy per kernel class and op, "
        "down to a training run's footprint",
    )
    kd.add_argument("a", help="trace A (before)")
    kd.add_argument("b", help="trace B (after); figures are B - A")
    kd.add_argument("--steps", default="steady", help="the steps compared in each trace: steady (default), all, or N")
    kd.add_argument("--include-unlinked", action="store_true", help="also count GPU events with no launch call in the recording")
    kd.add_argument(
        "--power-a", metavar="RUN_DIR", help="run directory whose GPU power samples cover trace A (energy attributed)"
    )
    kd.add_argument("--power-b", metavar="RUN_DIR", help="the same for trace B")
    kd.add_argument(
        "--scenario",
        metavar="FILE",
        help="a scenario giving the run's hardware, power and site; its GPU time is replaced by each trace's "
        "(alone: A = the scenario's GPU-hours, B scaled by B's step time / A's)",
    )
    kd.add_argument(
        "--train-steps",
        type=number_arg(int, 1, 10**12),
        help="training steps of the run whose footprint is compared (GPU-hours = steps x step time x GPUs)",
    )
    kd.add_argument("--gpus", type=number_arg(int, 1, 10**7), help="GPUs of the run (default: the scenario's, else 1)")
    kd.add_argument("--gpu", metavar="NAME", help="catalogue GPU of the run (default: the scenario's, else trace A's device)")
    kd.add_argument(
        "--samples", type=number_arg(int, 0, 100_000), default=0, help="Monte Carlo samples (default 0: central values)"
    )
    kd.add_argument("--top", type=number_arg(int, 0, 1_000_000), default=20, help="ops listed (largest time change first)")
    kd.add_argument("--format", choices=("table", "json", "html"), default="table", help="table (default), JSON or HTML")
    kd.add_argument("-o", "--output", help="write to this file instead of stdout")
    kd.set_defaults(handler=diff)


def diff(args: argparse.Namespace) -> int:
    from footprint.cli.registry import args_of
    from footprint.kernels.diff import diff_traces
    from footprint.kernels.render import render_diff, to_json
    from footprint.kernels.trace import write_out

    names = ("steps", "include_unlinked", "power_a", "power_b", "scenario", "train_steps", "gpus", "gpu", "samples", "top")
    d = diff_traces(args.a, args.b, **args_of(args, *names))
    if args.format == "html":
        from footprint.reports.kernel_diff import to_html

        text = to_html(d)
    else:
        text = to_json(d) if args.format == "json" else render_diff(d)
    write_out(text, args.output)
    return 0


def analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.ranks or Path(args.trace).is_dir():
        from footprint.cli.registry import emit
        from footprint.kernels.multirank import analyze_ranks, render_ranks
        from footprint.kernels.render import to_json

        options = {"include_unlinked": True} if getattr(args, "include_unlinked", False) else {}
        result = analyze_ranks(args.trace, power=args.power, steps=args.steps, **options)
        emit(to_json(result) if args.format == "json" else render_ranks(result), args.output)
        return 0
    from footprint.kernels.trace import main_analyze

    return main_analyze(args)


def bench(args: argparse.Namespace) -> int:
    from footprint.kernels.bench import main_bench

    return main_bench(args)


def predict(args: argparse.Namespace) -> int:
    from footprint.kernels.selfcheck import main_predict

    return main_predict(args)
