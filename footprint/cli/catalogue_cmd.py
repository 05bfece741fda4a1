"""`footprint gpus` and `footprint data`: the catalogue and the sources behind the numbers."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import Parser, command, group

    g = command(
        sub,
        "gpus",
        "list the GPU catalogue, or show one card's specs and embodied impacts",
        """
footprint gpus
footprint gpus show H100-SXM5-80GB
footprint gpus --format json show "NVIDIA A100-SXM4-40GB"     NVML names and aliases work""",
        handler=gpus_list,
    )
    g.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    gs = g.add_subparsers(dest="gpus_command", parser_class=Parser, metavar="COMMAND")
    show = gs.add_parser("show", help="one card's specs and embodied impacts per stage and component")
    show.add_argument("name", help="catalogue id, alias or NVML name, e.g. a100-sxm4-40gb or 'NVIDIA H100 80GB HBM3'")
    # SUPPRESS: `gpus --format json show X` keeps the parent's choice instead of resetting it to the default
    show.add_argument("--format", choices=("table", "json"), default=argparse.SUPPRESS, help="table (default) or JSON")
    show.set_defaults(handler=gpus_show)

    _, ds = group(sub, "data", "the data behind the numbers", "footprint data sources\nfootprint data sources --format json")
    src = ds.add_parser("sources", help="every source and its licence")
    src.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    src.set_defaults(handler=sources)


def gpus_list(args: argparse.Namespace) -> int:
    from footprint.lca.catalogue import gpu_rows

    rows = gpu_rows()
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    head = f"{'id':<18} {'name':<30} {'TDP W':>6} {'bf16/fp16 TFLOP/s':>17} {'kg CO2 eq':>10}  embodied data"
    print(head)
    print("-" * len(head))
    for r in rows:
        peak = "n/a" if r["bf16_tflops"] is None else f"{r['bf16_tflops']:g}"
        print(
            f"{r['id']:<18} {r['name']:<30} {r['tdp_w']:>6g} {peak:>17} {r['climate_change_kg']:>10.1f}  {r['embodied_method']}"
        )
    return 0


def gpus_show(args: argparse.Namespace) -> int:
    from footprint.lca.assessment import num
    from footprint.lca.catalogue import gpu_card
    from footprint.lca.units import display_unit

    card = gpu_card(args.name)
    if args.format == "json":
        print(json.dumps(card, indent=2))
        return 0
    print(
        f"{card['name']} ({card['id']}): TDP {card['tdp_w']:g} W, "
        + ", ".join(f"{k} {v:g}" for k, v in card["peak_tflops_dense"].items())
        + " TFLOP/s dense"
    )
    print(f"Embodied ({card['embodied_method']}; {card['scope']}):")
    for v in card["impacts"].values():
        print(f"  {v['name']:<36} {num(v['total']):>10} {display_unit(v['unit'])}")
    for n in card["notes"]:
        print(f"  note: {n}")
    return 0


def sources(args: argparse.Namespace) -> int:
    from footprint.lca.database import db

    srcs = list(db().sources.values())
    if args.format == "json":
        print(json.dumps(srcs, indent=2, default=str))
        return 0
    for s in srcs:
        print(f"{s['id']}: {s['title']}")
        print(f"    licence: {s['licence']}; {s.get('url', '')}")
    return 0
