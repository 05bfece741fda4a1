"""`footprint disclose`: the footprint in the forms users are asked for: EU AI Act, Hugging Face model card, SCI."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command
    from footprint.disclosures import FORMATS, FORMS, PER, TRAINING_TYPES

    p = command(
        sub,
        "disclose",
        "fill in a disclosure form: EU AI Act model documentation, a Hugging Face model card, or the SCI",
        """
footprint disclose bloom-176b --as eu-ai-act                      the Annex XI energy and compute rows (Markdown)
footprint disclose runs/llama-ft --as hf --training-type fine-tuning --merge README.md
footprint disclose runs/llama-ft --as sci --per m-tokens --format json
footprint disclose serving --model meta-llama/Llama-3.1-8B-Instruct --as sci --per 1k-requests
footprint disclose fleet --job 1001 --as eu-ai-act -o job-1001.md
footprint disclose serving --model meta-llama/Llama-3.1-8B-Instruct --as eu-ai-act --parameters 8.03e9""",
        handler=disclose,
    )
    p.add_argument(
        "target",
        help="scenario .yaml or a shipped scenario's name (bloom-176b), run directory, fleet directory (with --job), "
        "or serving record (with --model when it serves several)",
    )
    p.add_argument("--as", dest="form", required=True, choices=FORMS, help="the form: eu-ai-act, hf (model card) or sci")
    p.add_argument(
        "--per",
        choices=PER,
        help="SCI's functional unit R: token, m-tokens, step, pflop, run (training; default m-tokens, or run without tokens); "
        "request, 1k-requests, token, m-tokens, run (served model; default request)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="md",
        help="md (default: the form's rows; the card with its front matter), json or yaml",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--merge", metavar="README", help="--as hf: update this model card's metadata (co2_eq_emissions), its text untouched"
    )
    p.add_argument("--job", metavar="ID", help="the job of a fleet directory (`footprint fleet report DIR --by job` lists them)")
    p.add_argument("--model", metavar="NAME", help="the model of a serving record that serves several")
    p.add_argument(
        "--training-type",
        choices=TRAINING_TYPES,
        help="--as hf: the card's training_type (not written unless given; --merge keeps the card's own)",
    )
    p.add_argument(
        "--parameters",
        type=float,
        metavar="N",
        help="--as eu-ai-act: the model's parameter count where the target records none (a serving record, a run "
        "tracked without model=), for the inference FLOP per token (2N)",
    )
    p.add_argument(
        "--active-parameters", type=float, metavar="N", help="with --parameters: the active parameters of a mixture of experts"
    )
    p.add_argument("--link", metavar="URL", help="where the full assessment is published (default: the command that writes it)")


def disclose(args: argparse.Namespace) -> int:
    from footprint.cli.registry import emit
    from footprint.disclosures import disclose as fill
    from footprint.errors import FootprintError
    from footprint.outputs import check_file_target, shown

    if args.merge is not None and args.output is not None:
        raise FootprintError("--merge updates the card in place; leave out -o", key="--merge")
    if args.merge is not None and args.form != "hf":
        raise FootprintError("--merge updates a model card: it needs --as hf", key="--merge")
    if args.output not in (None, "-"):
        check_file_target(args.output)  # refused before any work: a pipe, a device, a directory, a symlink out
    d = fill(
        args.target,
        args.form,
        per=args.per,
        job=args.job,
        model=args.model,
        link=args.link,
        training_type=args.training_type,
        parameters=args.parameters,
        active_parameters=args.active_parameters,
    )
    if args.merge is not None:
        print(f"updated {shown(d.merge(args.merge))} (metadata: co2_eq_emissions; text untouched)", file=sys.stderr)
        return 0
    emit(d.text(args.format), args.output)
    return 0
