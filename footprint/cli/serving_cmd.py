"""`footprint serving import|report|life|watch`: what serving a model costs, per request and per million tokens."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from footprint.cli.prom_options import add_connection_args, add_window_args, parse_duration, prom_config, window_args
from footprint.errors import FootprintError
from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command, group

    _, sv = group(
        sub,
        "serving",
        "serving footprints per model, request and million tokens from DCGM and vLLM/TGI/SGLang/llama.cpp telemetry",
        """
footprint serving import prometheus --url http://prometheus:9090 --start now-7d --end now -o serving
footprint serving import metrics examples/serving/*.prom --map map.yaml -o serving
footprint serving report serving --grid FRA --pue 1.2
footprint serving report serving --training runs/llama-ft --format json -o life.json
footprint serving watch --metrics-url http://127.0.0.1:8000/metrics -o serving-live""",
    )
    _, imp = group(sv, "import", "write a serving record from Prometheus or recorded /metrics files")
    pr = command(imp, "prometheus", "DCGM and engine series aggregated by Prometheus (Thanos, Mimir): increase() per window")
    g = pr.add_argument_group("Prometheus")
    add_connection_args(g, required=True)
    add_window_args(pr)
    pr.add_argument(
        "--scrape-interval",
        help="the exporters' scrape interval, for gap detection (default: read from the data's sample spacing)",
    )
    _common(pr)
    pr.set_defaults(handler=import_prometheus)
    me = command(imp, "metrics", "recorded /metrics files (timestamped samples of DCGM, node and engine series)")
    me.add_argument("files", nargs="+", help="files in the Prometheus text format or OpenMetrics")
    add_window_args(me, "the first sample", "the last sample")
    me.add_argument("--scrape-interval", help="the exporters' scrape interval (default: the files' median sample spacing)")
    _common(me)
    me.set_defaults(handler=import_metrics)

    rp = command(sv, "report", "per-model footprints of a serving record: a table, HTML, CSV or JSON")
    rp.add_argument("record", help="directory written by `footprint serving import` or `watch`")
    rp.add_argument("-o", "--output", help="serving.html | .csv | .json (default: a table on stdout)")
    rp.add_argument("--format", choices=("table", "html", "csv", "json"), help="default: from -o")
    rp.add_argument(
        "--boundary",
        choices=("accelerators", "+host", "+idle", "+pue"),
        default="+pue",
        help="boundary of the 16-category table (all four are always shown side by side; default +pue)",
    )
    _site_args(rp)
    _life_args(rp)
    rp.set_defaults(handler=report)

    lf = command(
        sv,
        "life",
        "a model's whole life: its training record beside its serving record",
        """
footprint serving life --serving serving --training runs/my-finetune --model meta-llama/Llama-3.1-8B-Instruct
footprint serving life --serving serving --training scenarios/llama-2-70b.yaml --horizon 730 --format json""",
    )
    lf.add_argument("--serving", required=True, help="serving record directory")
    lf.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format (default table)")
    lf.add_argument("-o", "--output", help="file to write (default stdout)")
    lf.add_argument(
        "--boundary", choices=("accelerators", "+host", "+idle", "+pue"), default="+pue", help="serving's boundary (default +pue)"
    )
    _site_args(lf)
    _life_args(lf, required=True)
    lf.set_defaults(handler=life)

    wa = command(sv, "watch", "sample NVML and one server's /metrics live, journalled, into a serving record")
    wa.add_argument("--metrics-url", required=True, help="the server's /metrics, e.g. http://127.0.0.1:8000/metrics")
    wa.add_argument("-o", "--output", required=True, help="directory for the journal, windows.jsonl and record/")
    wa.add_argument("--interval", type=number_arg(float, 0.05, 3600), default=15.0, help="seconds between scrapes (default 15)")
    wa.add_argument("--window", default="5m", help="window of every figure (default 5m)")
    wa.add_argument("--duration", help="stop after this long (30s, 10m, 2h; default: until Ctrl-C)")
    _site_args(wa)
    wa.set_defaults(handler=watch)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="serving record directory to write")
    p.add_argument("--force", action="store_true", help="replace an existing record directory (atomically)")
    p.add_argument("--window", "--step", dest="window", default="5m", help="window of every figure (default 5m)")
    p.add_argument("--map", help="YAML: gpus: [{host, gpus: [0, 1], model}] and/or pods: {pod: model}")
    p.add_argument(
        "--pod-label",
        help="the DCGM series' pod label (default: pod or exported_pod, whichever the engines' pods match; exported_pod "
        "when dcgm-exporter is scraped through a Service without honor_labels)",
    )
    p.add_argument("--namespace-label", help="the DCGM series' namespace label (default: the one beside --pod-label)")
    _site_args(p)


def _site_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", help="grid zone of the site (ISO3, e.g. FRA; default: the record's, else world average)")
    p.add_argument("--pue", type=number_arg(float, 1, 100), help="PUE of the site (>= 1; default the record's, else 1.2)")
    p.add_argument("--lifetime", help="GPU lifetime for the embodied share (default 3 years)")
    p.add_argument(
        "--carbon-intensity-hourly",
        dest="hourly",
        metavar="FILE.csv",
        help="hourly carbon intensity (Electricity Maps' hourly export or datetime_utc,g_per_kwh) matched to each model's "
        "windows: climate change only",
    )


def _life_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--training", required=required, help="the model's training: a run directory, run.json or scenario YAML")
    p.add_argument("--model", help="which served model the training made (default: the one with most output tokens)")
    p.add_argument(
        "--horizon",
        type=number_arg(float, 0, 36500, lo_open=True),
        default=365.0,
        help="days of serving for the inference share of the life cycle (default 365)",
    )


def _site(args: argparse.Namespace, meta: dict[str, Any] | None = None) -> Any:
    """The site, checked now: an unknown --grid or --lifetime was accepted by an import or a day-long watch and
    refused only by the first report."""
    from footprint.serving.assess import template
    from footprint.serving.store import site_of

    site = site_of(meta or {}, args.grid, args.pue, args.lifetime, getattr(args, "hourly", None))
    if site.hourly:
        from footprint.lca.hourly import read_intensity

        site = replace(site, hourly=str(Path(site.hourly).resolve()))  # the record keeps it: absolute
        read_intensity(site.hourly)  # a bad file fails now, not after a day-long watch
    try:
        template("H100-SXM5-80GB", site, True, site.pue)
    except FootprintError as exc:
        flag = {"site.grid": "--grid", "hardware.lifetime": "--lifetime"}.get(exc.key or "", exc.key)
        raise FootprintError(exc.detail, key=flag) from None
    return site


def _done(path: Any, a: Any) -> int:
    kwh = a.metered_gpu_j / 3.6e6
    un = (a.residual_w["idle_j"].sum() + a.residual_w["unused_j"].sum()) / 3.6e6 if len(a.residual_w) else 0.0
    print(
        f"wrote {path}: {a.models['model'].nunique()} models on {len(a.gpus)} GPUs, GPU energy {kwh:,.2f} kWh "
        f"({un / kwh * 100 if kwh else 0:.1f}% unattributed)",
        file=sys.stderr,
    )
    return 0


def import_prometheus(args: argparse.Namespace) -> int:
    from footprint.fleet.prometheus import PrometheusClient
    from footprint.serving.importer import import_prometheus as run
    from footprint.serving.importer import load_map

    start, end = window_args(args)
    window = parse_duration(args.window, "--window")
    scrape = parse_duration(args.scrape_interval, "--scrape-interval") if args.scrape_interval else None
    path, a = run(
        args.output,
        PrometheusClient(prom_config(args)),
        start,
        end,
        window,
        scrape,
        _site(args),
        args.selector,
        load_map(args.map),
        args.force,
        args.pod_label,
        args.namespace_label,
    )
    return _done(path, a)


def import_metrics(args: argparse.Namespace) -> int:
    from footprint.serving.importer import import_files, load_map

    start, end = window_args(args)
    scrape = parse_duration(args.scrape_interval, "--scrape-interval") if args.scrape_interval else None
    window = parse_duration(args.window, "--window")
    path, a = import_files(
        args.output,
        args.files,
        window,
        _site(args),
        load_map(args.map),
        start,
        end,
        args.force,
        args.pod_label,
        args.namespace_label,
        scrape,
    )
    return _done(path, a)


def _report(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    from footprint.serving.report import load

    record = args.record if hasattr(args, "record") else args.serving
    return load(record, args.grid, args.pue, args.lifetime, args.boundary, args.training, args.model, args.horizon, args.hourly)


def report(args: argparse.Namespace) -> int:
    from footprint.cli.registry import emit
    from footprint.serving import report as rp

    fmt = args.format or _fmt_of(args.output)
    rep, a = _report(args)
    text = {"table": rp.table, "json": rp.to_json, "csv": rp.to_csv}[fmt](rep) if fmt != "html" else rp.to_html(rep, a)
    emit(text, args.output)
    return 0


def life(args: argparse.Namespace) -> int:
    import json

    from footprint.cli.registry import emit
    from footprint.serving import report as rp

    rep, _ = _report(args)
    lf = rep["life"]
    if args.format == "json":
        text = json.dumps(lf, indent=1) + "\n"
    elif args.format == "csv":
        rows = ["category,training,serving_per_day,marginal_per_request,inference_share_of_life"]
        per = lf["marginal_per_request"] or {}
        for k, v in lf["training"]["impacts"].items():
            rows.append(f"{k},{v},{lf['serving_per_day'][k]},{per.get(k, '')},{lf['inference_share_of_life'][k]}")
        text = "\n".join(rows).replace("None", "") + "\n"
    else:
        text = "\n".join(rp.life_lines(lf)).lstrip("\n") + "\n"
    emit(text, args.output)
    return 0


def watch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from footprint.serving.watch import watch as run

    duration = parse_duration(args.duration, "--duration") if args.duration else None
    path = run(args.metrics_url, Path(args.output), parse_duration(args.window, "--window"), args.interval, duration, _site(args))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _fmt_of(output: str | None) -> str:
    if output and output != "-":
        for ext, fmt in ((".html", "html"), (".csv", "csv"), (".json", "json")):
            if output.lower().endswith(ext):
                return fmt
    return "table"
