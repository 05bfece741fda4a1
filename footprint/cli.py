"""The `footprint` command line.

Every user mistake (bad YAML, unknown GPU, wrong unit, bad argument) ends as one line on stderr
naming the file and key, exit code 2, no traceback, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FORMATS = ("table", "json", "csv", "md")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its one-line style
        self.print_usage(sys.stderr)
        self.exit(2, f"footprint: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="footprint", description="Life-cycle footprint of AI training (16 EF 3.1 categories).")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    a = sub.add_parser("assess", help="assess a scenario YAML (or a run directory)")
    a.add_argument("target", help="scenario .yaml file or run directory")
    a.add_argument("--format", choices=FORMATS, default="table")
    a.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set training.mfu=0.5 --set site.grid=POL",
    )
    a.add_argument("--samples", type=int, default=2000, help="Monte Carlo samples for low-high (0: none)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("-o", "--output", help="write to this file instead of stdout")

    rp = sub.add_parser("report", help="write a report: HTML, Markdown, JSON, CSV, PDF or BoAmps JSON")
    rp.add_argument("target", help="scenario .yaml or run directory")
    rp.add_argument("--compare", nargs="+", default=[], metavar="OTHER", help="more scenarios or runs, side by side")
    rp.add_argument("-o", "--output", required=True, help="report.html | .md | .json | .csv | .pdf | .boamps.json")
    rp.add_argument("--format", choices=("html", "md", "json", "csv", "pdf", "boamps"), help="default: from -o")
    rp.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    rp.add_argument("--samples", type=int, default=2000)
    rp.add_argument("--trace", help="a profiler trace to analyse into the report's kernel section")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")

    g = sub.add_parser("gpus", help="list the GPU catalogue, or show one card")
    g.add_argument("--format", choices=("table", "json"), default="table")
    gs = g.add_subparsers(dest="gpus_command", parser_class=_Parser)
    show = gs.add_parser("show", help="one card's specs and embodied impacts")
    show.add_argument("name")
    show.add_argument("--format", choices=("table", "json"), default="table")

    r = sub.add_parser("run", help="run a command under the tracker: footprint run [opts] -- python train.py")
    r.add_argument("--name", help="run name (directory under --output-dir)")
    r.add_argument("--output-dir", default="runs")
    r.add_argument("--grid", help="grid zone of the site (ISO3, e.g. FRA)")
    r.add_argument("--pue", type=float, help="PUE of the site")
    r.add_argument("--period", type=float, default=0.1, help="sampling period in seconds (default 0.1)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")

    rc = sub.add_parser("recover", help="rebuild run.json and samples.parquet from the journal of a killed run")
    rc.add_argument("run_dir")
    mg = sub.add_parser("merge", help="merge per-rank records of a distributed run into one run.json")
    mg.add_argument("run_dir")

    im = sub.add_parser("import", help="turn existing power logs into a run record")
    ims = im.add_subparsers(dest="import_kind", parser_class=_Parser)
    smi = ims.add_parser("nvidia-smi", help="an `nvidia-smi --query-gpu=... --format=csv` log")
    smi.add_argument("file")
    smi.add_argument("-o", "--output", required=True, help="run directory to write")
    smi.add_argument("--utc-offset", help="offset of the log's local timestamps, e.g. +1 or +01:00")
    smi.add_argument("--grid", help="grid zone of the site (ISO3)")
    smi.add_argument("--gpu", help="GPU model when the log has no `name` column, e.g. A100-PCIe-40GB")
    cc = ims.add_parser("codecarbon", help="a codecarbon emissions.csv")
    cc.add_argument("file")
    cc.add_argument("-o", "--output", required=True, help="run directory to write")
    cc.add_argument("--gpu", help="GPU model (codecarbon does not record it), e.g. A100-SXM4-40GB")
    cc.add_argument("--gpu-count", type=int, default=1)

    fl = sub.add_parser("flops", help="analytical FLOP counts")
    fls = fl.add_subparsers(dest="flops_kind", parser_class=_Parser)
    tf = fls.add_parser("transformer", help="transformer training (or inference) FLOPs: 6N per token + attention")
    tf.add_argument("--params", type=float, required=True, help="parameters N (e.g. 7e9)")
    tf.add_argument("--tokens", type=float, required=True, help="tokens D (e.g. 2e12)")
    tf.add_argument("--active-params", type=float, help="active parameters per token (MoE)")
    tf.add_argument("--layers", type=int)
    tf.add_argument("--hidden", type=int)
    tf.add_argument("--seq-len", type=int)
    tf.add_argument("--vocab", type=int, help="vocabulary size (Megatron-LM variant)")
    tf.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    tf.add_argument("--variant", choices=("palm", "megatron"), default="palm")
    tf.add_argument("--inference", action="store_true", help="forward only: 2N per token")
    tf.add_argument("--format", choices=("table", "json"), default="table")

    mf = sub.add_parser("mfu", help="model FLOPs utilisation against the card's dense peak")
    mf.add_argument("--gpu", required=True)
    mf.add_argument("--dtype", default="bf16")
    mf.add_argument("--flops", type=float, help="total model FLOPs")
    mf.add_argument("--gpu-hours", type=float, help="GPU-hours that did them")
    mf.add_argument("--achieved-tflops", type=float, help="achieved TFLOP/s per GPU")
    mf.add_argument("--format", choices=("table", "json"), default="table")

    k = sub.add_parser("kernels", help="kernel-level efficiency: analyse profiler traces, benchmark kernels")
    ks = k.add_subparsers(dest="kernels_command", parser_class=_Parser)
    ka = ks.add_parser("analyze", help="analyse a PyTorch profiler (Kineto) trace (.json or .json.gz)")
    ka.add_argument("trace")
    ka.add_argument("--power", help="run directory whose power samples are aligned with the kernel timeline")
    ka.add_argument("--top", type=int, default=20, help="top ops to list")
    ka.add_argument("--format", choices=("table", "json"), default="table")
    ka.add_argument("-o", "--output", help="write to this file instead of stdout")
    kb = ks.add_parser("bench", help="benchmark GEMM (and attention on GPUs) into an efficiency profile")
    kb.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if available, else cpu")
    kb.add_argument("--quick", action="store_true", help="a small sweep (CI)")
    kb.add_argument("--dtypes", default=None, help="comma-separated, e.g. bf16,fp16,fp32")
    kb.add_argument("-o", "--output", default="profile.yaml")

    db_ = sub.add_parser("dashboard", help="open the Streamlit dashboard (streamlit run dashboard/app.py)")
    db_.add_argument("--port", type=int, default=8501)
    db_.add_argument("--headless", action="store_true", help="do not open a browser")
    db_.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default: this machine only; the Runs page reads local paths)",
    )

    d = sub.add_parser("data", help="the data behind the numbers")
    ds = d.add_subparsers(dest="data_command", parser_class=_Parser)
    src = ds.add_parser("sources", help="every source and its licence")
    src.add_argument("--format", choices=("table", "json"), default="table")
    return p


def main(argv: list[str] | None = None) -> int:
    from footprint.errors import FootprintError
    from footprint.units import UnitParseError
    from lca_data.loader import LcaDataError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from footprint import __version__

        print(__version__)
        return 0
    if not args.command:
        parser.print_help()
        return 2
    try:
        return _dispatch(parser, args)
    except (FootprintError, UnitParseError) as exc:
        print(f"footprint: error: {exc}", file=sys.stderr)
        return 2
    except LcaDataError as exc:
        print(f"footprint: error in lca_data: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from footprint.errors import FootprintError

    if args.command == "assess":
        from footprint.assessment import render
        from footprint.lca import assess
        from footprint.workload import load_scenario

        if args.samples < 0:
            raise FootprintError(f"--samples must be >= 0, got {args.samples}", key="--samples")
        target = Path(args.target)
        if target.is_dir() or target.name == "run.json":
            from footprint.workload import workload_from_run

            workload = workload_from_run(target, args.sets)
        else:
            workload = load_scenario(target, args.sets)
        text = render(assess(workload, samples=args.samples, seed=args.seed), args.format)
        _emit(text, args.output)
        return 0
    if args.command == "report":
        from footprint.report import write_report

        if args.samples < 0:
            raise FootprintError(f"--samples must be >= 0, got {args.samples}", key="--samples")
        for t in [args.target, *args.compare]:
            if not Path(t).exists():
                raise FootprintError("no such scenario file or run directory", t)
        out = write_report(
            [args.target, *args.compare], args.output, args.format, args.sets, args.samples, args.trace, args.quiet
        )
        print(f"wrote {out}", file=sys.stderr)
        return 0
    if args.command == "gpus":
        if getattr(args, "gpus_command", None) == "show":
            return _gpus_show(args.name, args.format)
        return _gpus_list(args.format)
    if args.command == "run":
        from footprint.runcmd import run_command

        return run_command(args)
    if args.command in ("recover", "merge"):
        from footprint import runrecord

        rec = (runrecord.recover if args.command == "recover" else runrecord.merge)(args.run_dir)
        e = rec["energy"]
        print(
            f"{args.run_dir}/run.json: {len(rec['devices'])} devices, {rec['duration_s']:.1f} s, "
            f"GPU energy {e['gpu_j'] if e['gpu_j'] is not None else 'n/a'} J"
        )
        return 0
    if args.command == "import":
        from footprint.runcmd import import_log

        if not getattr(args, "import_kind", None):
            parser.parse_args(["import", "--help"])
        return import_log(args)
    if args.command == "flops":
        if getattr(args, "flops_kind", None) != "transformer":
            parser.parse_args(["flops", "--help"])
        from footprint.flops import transformer_flops

        r = transformer_flops(
            args.params,
            args.tokens,
            active_params=args.active_params,
            layers=args.layers,
            hidden=args.hidden,
            seq_len=args.seq_len,
            recompute=args.recompute,
            inference=args.inference,
            vocab=args.vocab,
            variant=args.variant,
        ).to_dict()
        if args.format == "json":
            print(json.dumps(r, indent=2))
        else:
            print(
                f"FLOPs: {r['flops']:.4g} ({r['flops_per_token']:.4g} per token); hardware FLOPs: "
                f"{r['hardware_flops']:.4g}\nformula: {r['formula']}"
            )
        return 0
    if args.command == "mfu":
        from footprint.flops import compute_mfu

        if args.achieved_tflops is None and (args.flops is None or args.gpu_hours is None):
            raise FootprintError("give --flops and --gpu-hours, or --achieved-tflops", key="mfu")
        m = compute_mfu(args.gpu, args.dtype, flops=args.flops, gpu_hours=args.gpu_hours, achieved_tflops=args.achieved_tflops)
        if args.format == "json":
            print(json.dumps(m.to_dict(), indent=2))
        else:
            print(f"MFU {m.mfu:.1%}: {m.achieved_tflops:.4g} of {m.peak_tflops:g} TFLOP/s dense {m.dtype} ({m.gpu})")
        for w in m.warnings:
            print(f"warning: {w}", file=sys.stderr)
        return 0
    if args.command == "kernels":
        sub_cmd = getattr(args, "kernels_command", None)
        if sub_cmd == "analyze":
            from footprint.kernels.trace import main_analyze

            return main_analyze(args)
        if sub_cmd == "bench":
            from footprint.kernels.bench import main_bench

            return main_bench(args)
        parser.parse_args(["kernels", "--help"])
    if args.command == "dashboard":
        import importlib.util
        import subprocess

        if importlib.util.find_spec("streamlit") is None:
            raise FootprintError("the dashboard needs streamlit: pip install streamlit", key="dashboard")
        app = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
        cmd = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(app),
            "--server.port",
            str(args.port),
            "--server.address",
            args.address,
            "--browser.gatherUsageStats",
            "false",
        ]
        if args.headless:
            cmd += ["--server.headless", "true"]
        return subprocess.call(cmd)
    if args.command == "data":
        if getattr(args, "data_command", None) == "sources":
            return _sources(args.format)
        parser.parse_args(["data", "--help"])
    return 2


def _gpus_list(fmt: str) -> int:
    from footprint.database import db

    d = db()
    rows = []
    for g in d.gpus.values():
        emb = d.embodied(g.id)
        rows.append(
            {
                "id": g.id,
                "name": g.name,
                "vendor": g.vendor,
                "tdp_w": g.tdp_w,
                "bf16_tflops": g.peak_tflops.get("bf16") or g.peak_tflops.get("fp16"),
                "memory_gb": g.memory_gb,
                "embodied_method": emb.method,
                "climate_change_kg": float(emb.total()[0]),
            }
        )
    if fmt == "json":
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


def gpu_card(name: str) -> dict[str, Any]:
    """One card as JSON: specs, and embodied impacts as the data source gives them (no distribution, no use)."""
    from footprint import categories as cat
    from footprint.database import IDX, db

    d = db()
    g = d.find_gpu(name)
    emb = d.embodied(g.id)
    by_stage, by_comp = emb.by_stage(), emb.by_component()
    impacts = {}
    for c in cat.categories() + cat.extras():
        i = IDX[c.key]
        impacts[c.key] = {
            "name": c.name,
            "unit": c.unit,
            "total": float(emb.total()[i]),
            "by_stage": {s: float(v[i]) for s, v in by_stage.items()},
            "by_component": {k: float(v[i]) for k, v in by_comp.items()},
        }
    return {
        "id": g.id,
        "name": g.name,
        "vendor": g.vendor,
        "aliases": list(g.aliases),
        "tdp_w": g.tdp_w,
        "memory_gb": g.memory_gb,
        "die_area_mm2": g.die_area_mm2,
        "process_node": g.process_node,
        "peak_tflops_dense": g.peak_tflops,
        "parametric_inputs": g.parametric,
        "proxy_of": g.proxy_of,
        "embodied_method": emb.method,
        "scope": "manufacturing + upstream transport + end of life, per card; no distribution, no use",
        "impacts": impacts,
        "notes": list(g.notes) + list(emb.notes),
        "sources": d.cite((*emb.sources, *g.sources)),
    }


def _gpus_show(name: str, fmt: str) -> int:
    from footprint.assessment import num
    from footprint.units import display_unit

    card = gpu_card(name)
    if fmt == "json":
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


def _sources(fmt: str) -> int:
    from footprint.database import db

    srcs = list(db().sources.values())
    if fmt == "json":
        print(json.dumps(srcs, indent=2, default=str))
        return 0
    for s in srcs:
        print(f"{s['id']}: {s['title']}")
        print(f"    licence: {s['licence']}; {s.get('url', '')}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
