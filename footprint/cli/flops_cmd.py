"""`footprint flops` and `footprint mfu`: analytical FLOP counts and utilisation against a card's peak."""

from __future__ import annotations

import argparse
import json
import sys

from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command, group

    _, fls = group(
        sub,
        "flops",
        "analytical FLOP counts",
        """
footprint flops transformer --params 7e9 --tokens 2e12
footprint flops transformer --params 175e9 --tokens 300e9 --layers 96 --hidden 12288 --seq-len 2048 --recompute full""",
    )
    tf = fls.add_parser("transformer", help="transformer training (or inference) FLOPs: 6N per token + attention")
    tf.add_argument("--params", type=number_arg(float, 0, lo_open=True), required=True, help="parameters N (e.g. 7e9)")
    tf.add_argument("--tokens", type=number_arg(float, 0, lo_open=True), required=True, help="tokens D (e.g. 2e12)")
    tf.add_argument("--active-params", type=number_arg(float, 0, lo_open=True), help="active parameters per token (MoE)")
    tf.add_argument(
        "--layers",
        type=number_arg(int, 1, 1_000_000),
        help="transformer layers L (with --hidden and --seq-len: the attention term)",
    )
    tf.add_argument("--hidden", type=number_arg(int, 1, 10_000_000), help="hidden size H")
    tf.add_argument("--seq-len", type=number_arg(int, 1, 1_000_000_000), help="sequence length S")
    tf.add_argument("--vocab", type=number_arg(int, 1, 1_000_000_000), help="vocabulary size (Megatron-LM variant)")
    tf.add_argument(
        "--recompute",
        choices=("none", "selective", "full"),
        default="none",
        help="activation recomputation, added to hardware FLOPs (default none)",
    )
    tf.add_argument(
        "--variant", choices=("palm", "megatron"), default="palm", help="PaLM 6N + 12LHS (default) or Megatron-LM formula"
    )
    tf.add_argument("--inference", action="store_true", help="forward only: 2N per token")
    tf.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    tf.set_defaults(handler=flops_transformer)

    mf = command(
        sub,
        "mfu",
        "model FLOPs utilisation against the card's dense peak",
        """
footprint mfu --flops 1.2e21 --gpu-hours 2000 --gpu A100-SXM4-40GB
footprint mfu --achieved-tflops 400 --gpu H100-SXM5-80GB --dtype fp8""",
        handler=mfu,
    )
    mf.add_argument("--gpu", required=True, help="catalogue id, alias or NVML name")
    mf.add_argument("--dtype", default="bf16", help="dtype of the dense peak: bf16 (default), fp16, fp32, tf32, fp8...")
    mf.add_argument("--flops", type=number_arg(float, 0, lo_open=True), help="total model FLOPs")
    mf.add_argument("--gpu-hours", type=number_arg(float, 0, lo_open=True), help="GPU-hours that did them")
    mf.add_argument("--achieved-tflops", type=number_arg(float, 0, lo_open=True), help="achieved TFLOP/s per GPU")
    mf.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")


def flops_transformer(args: argparse.Namespace) -> int:
    import math

    from footprint.bounds import check
    from footprint.cli.registry import args_of
    from footprint.errors import FootprintError
    from footprint.flops import transformer_flops

    check("model.parameters", args.params, label="--params")  # the plausibility table (footprint.bounds)
    check("model.tokens", args.tokens, label="--tokens")
    if args.active_params is not None:
        check("model.active_parameters", args.active_params, label="--active-params")
    names = ("active_params", "layers", "hidden", "seq_len", "recompute", "inference", "vocab", "variant")
    r = transformer_flops(args.params, args.tokens, **args_of(args, *names)).to_dict()
    if not all(math.isfinite(r[k]) for k in ("flops", "flops_per_token", "hardware_flops")):
        raise FootprintError("the FLOPs of this shape are beyond floating point: check --layers, --hidden and --seq-len")
    if args.format == "json":
        print(json.dumps(r, indent=2))
    else:
        print(
            f"FLOPs: {r['flops']:.4g} ({r['flops_per_token']:.4g} per token); hardware FLOPs: "
            f"{r['hardware_flops']:.4g}\nformula: {r['formula']}"
        )
    return 0


def mfu(args: argparse.Namespace) -> int:
    from footprint.errors import FootprintError
    from footprint.lca.catalogue import compute_mfu

    if args.achieved_tflops is None and (args.flops is None or args.gpu_hours is None):
        raise FootprintError("give --flops and --gpu-hours, or --achieved-tflops", key="mfu")
    from footprint.bounds import check

    if args.flops is not None:
        check("training.flops", args.flops, label="--flops")
    if args.gpu_hours is not None:
        check("training.gpu_hours", args.gpu_hours, label="--gpu-hours")
    m = compute_mfu(args.gpu, args.dtype, flops=args.flops, gpu_hours=args.gpu_hours, achieved_tflops=args.achieved_tflops)
    if args.format == "json":
        print(json.dumps(m.to_dict(), indent=2))
    else:
        print(f"MFU {m.mfu:.1%}: {m.achieved_tflops:.4g} of {m.peak_tflops:g} TFLOP/s dense {m.dtype} ({m.gpu})")
    for w in m.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
