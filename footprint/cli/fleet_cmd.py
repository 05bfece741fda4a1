"""`footprint fleet import prometheus|slurm` and `footprint fleet report`: a whole cluster's jobs."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from footprint import bounds
from footprint.cli.prom_options import add_connection_args, add_window_args, parse_duration, prom_config, window_args
from footprint.errors import FootprintError
from footprint.inputs import number_arg


def register(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.app import command, group

    _, fl = group(
        sub,
        "fleet",
        "a whole cluster: per-job records from Prometheus/DCGM and SLURM, fleet reports",
        """
footprint fleet import prometheus --url http://prometheus:9090 --start 2025-03-01 --end 2025-04-01 --sacct sacct.txt -o fleet
footprint fleet import slurm sacct.txt --url http://prometheus:9090 --grid FRA --pue 1.2 -o fleet
footprint fleet import slurm --run-sacct --start now-30d --end now -o fleet
footprint fleet report fleet --by account
footprint fleet report fleet --by month -o fleet.html
footprint assess fleet/jobs/1001""",
    )
    _, imp = group(
        fl,
        "import",
        "write one run record per job and a fleet index",
        """
footprint fleet import prometheus --url http://127.0.0.1:9090 --start 2025-03-03T08:00:00Z --end 2025-03-03T14:00:00Z -o fleet
footprint fleet import slurm sacct.txt --tz Europe/Paris --gpu-type a100=A100-SXM4-80GB -o fleet""",
    )

    pr = command(
        imp,
        "prometheus",
        "jobs from DCGM-exporter series in Prometheus (Thanos, Mimir)",
        """
footprint fleet import prometheus --url http://prometheus:9090 --start 2025-03-01 --end 2025-04-01 -o fleet
footprint fleet import prometheus --url https://mimir/prometheus --header 'X-Scope-OrgID: hpc' --bearer-token-file tok \\
    --start now-7d --end now --sacct sacct.txt -o fleet
footprint fleet import prometheus --url http://prometheus:9090 --job-label namespace,pod --start now-1d --end now -o fleet""",
    )
    _prometheus_args(pr, required=True)
    add_window_args(pr)
    pr.add_argument("--sacct", metavar="FILE", help="also join this `sacct --parsable2` output (user, account, windows)")
    _common(pr)
    pr.set_defaults(handler=import_prometheus)

    sl = command(
        imp,
        "slurm",
        "jobs from SLURM accounting (`sacct --parsable2`), joined with Prometheus if --url",
        """
sacct --allusers --parsable2 --starttime 2025-03-01 --endtime 2025-04-01 \\
    --format=JobID,JobIDRaw,JobName,User,Account,Partition,Start,End,Elapsed,AllocTRES,NodeList,State,ConsumedEnergyRaw \\
    > sacct.txt
footprint fleet import slurm sacct.txt --url http://prometheus:9090 -o fleet
footprint fleet import slurm sacct.txt --slurm-energy-scope gpu --gpu-type a100=A100-SXM4-80GB -o fleet
footprint fleet import slurm --run-sacct --start now-30d --end now -o fleet""",
    )
    sl.add_argument("sacct", nargs="?", help="sacct output file (or --run-sacct)")
    sl.add_argument(
        "--run-sacct", action="store_true", help="run `sacct --allusers --parsable2` for the window (needs --start/--end)"
    )
    _prometheus_args(sl, required=False)
    add_window_args(sl, "the first job's start", "the last job's end, or now")
    sl.add_argument(
        "--slurm-energy-scope",
        choices=("gpu", "cpu"),
        help="what ConsumedEnergyRaw measures at this site (AcctGatherEnergyType): use it as GPU or CPU energy",
    )
    _common(sl)
    sl.set_defaults(handler=import_slurm)

    rp = command(
        fl,
        "report",
        "totals and per-group footprints of a fleet directory: a table, HTML, CSV or JSON",
        """
footprint fleet report fleet
footprint fleet report fleet --by gpu -o fleet.html
footprint fleet report fleet --by month -o fleet.csv
footprint fleet report fleet --set site.grid=POL --format json -o fleet-pol.json""",
    )
    rp.add_argument("fleet", help="directory written by `footprint fleet import`")
    rp.add_argument(
        "--by",
        choices=("user", "account", "partition", "gpu", "month", "job"),
        default="user",
        help="how jobs are grouped (default user); job: every job, one row each (table, csv, json)",
    )
    rp.add_argument("-o", "--output", help="fleet.html | fleet.csv | fleet.json (default: a table on stdout)")
    rp.add_argument("--format", choices=("table", "html", "csv", "json"), help="default: from -o")
    rp.add_argument("--top", type=number_arg(int, 0, 1_000_000), default=10, help="how many top jobs to list (default 10)")
    rp.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="re-project, e.g. site.grid=POL")
    from footprint.cli.assess_cmd import add_samples

    add_samples(rp, "the low-high of every group's sums (the same draws for every job)")
    rp.add_argument(
        "--seed", type=number_arg(int, 0, 2**63 - 1), default=0, help="random seed of the Monte Carlo (default 0: reproducible)"
    )
    rp.set_defaults(handler=report)

    jb = command(
        fl,
        "job",
        "write one job's run record from the fleet ledger (then `footprint assess`/`report` it)",
        """
footprint fleet job fleet 1001 -o run-1001
footprint assess run-1001""",
    )
    jb.add_argument("fleet", help="directory written by `footprint fleet import`")
    jb.add_argument("job_id", help="the job's id (`footprint fleet report DIR --by job` lists them)")
    jb.add_argument("-o", "--output", required=True, help="run directory to write (new; --force replaces it)")
    jb.add_argument("--force", action="store_true", help="replace an existing directory")
    jb.set_defaults(handler=job)


def _prometheus_args(p: argparse.ArgumentParser, required: bool) -> None:
    g = p.add_argument_group("Prometheus")
    add_connection_args(g, required)
    g.add_argument(
        "--exporter",
        choices=("dcgm", "amd"),
        default="dcgm",
        help="GPU exporter: NVIDIA's dcgm-exporter (default) or AMD's device-metrics-exporter (gpu_energy_consumed in µJ, "
        "gpu_power_usage, labels hostname, gpu_id, job_id); the options below override its names",
    )
    g.add_argument("--job-label", help="job label(s), comma-separated: hpc_job (DCGM's default), job_id (AMD's) or namespace,pod")
    g.add_argument("--host-label", help="node label of the GPU series (default Hostname; AMD: hostname)")
    g.add_argument(
        "--energy-metric", help="energy counter (default DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ; AMD: gpu_energy_consumed, µJ)"
    )
    g.add_argument(
        "--power-metric",
        help="power gauge (W) for GPUs without the counter (default DCGM_FI_DEV_POWER_USAGE; AMD: gpu_power_usage)",
    )
    g.add_argument("--cpu", choices=("auto", "rapl", "kepler", "none"), default="auto", help="host CPU/RAM counters")
    g.add_argument("--exact", action="store_true", help="read every raw sample (default: the server aggregates per job)")
    g.add_argument(
        "--recorded",
        nargs="?",
        const="footprint:gpu_energy_joules:increase1m",
        help="read the recording rule's per-minute GPU energy (footprint/fleet/rules/) instead of the counter",
    )
    g.add_argument("--exact-below", default="10m", help="jobs shorter than this from raw samples (default 10m)")
    g.add_argument(
        "--max-samples", type=number_arg(int, 1000, 10**10), default=5_000_000, help="samples per request (default 5e6)"
    )
    g.add_argument("--concurrency", type=number_arg(int, 1, 64), default=4, help="requests in flight (default 4)")
    g.add_argument("--chunk", default="6h", help="--exact: time per query (default 6h): smaller for dense scrapes")
    g.add_argument("--max-gap", default="5m", help="longest scrape gap bridged (default 5m)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="fleet directory to write (new or empty; see --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing fleet directory (atomically)")
    p.add_argument("--grid", help="grid zone of the site (ISO3, e.g. FRA)")
    p.add_argument("--pue", type=bounds.arg("site.pue"), help="PUE of the site (1 to 3, footprint/bounds.py)")
    p.add_argument("--tz", default=None, help="time zone of the sacct file's timestamps (default: this machine's)")
    p.add_argument("--delimiter", type=_delimiter, default="|", help="sacct field delimiter (default |)")
    p.add_argument(
        "--gpu-type", action="append", default=[], metavar="TYPE=GPU", help="SLURM gres type -> GPU, e.g. a100=A100-SXM4-80GB"
    )
    p.add_argument("--no-series", action="store_true", help="--exact: do not keep the per-interval series (series/)")
    p.add_argument("--records", action="store_true", help="also write jobs/<job>/run.json for every job (else: fleet job)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


# ---- parsing helpers ------------------------------------------------------------------------------


def _delimiter(text: str) -> str:
    """What `sacct --delimiter` was given: some characters, no line break ('' made str.split raise)."""
    if not 0 < len(text) <= 16 or "\n" in text or "\r" in text:
        raise argparse.ArgumentTypeError(f"expected the delimiter sacct wrote, such as | or ',', got {text[:20]!r}")
    return text


#: Options that only mean something with --url (``fleet import slurm`` without it reads no server).
_SERVER_ONLY = ("selector", "bearer_token_file", "basic_auth_user", "basic_auth_password_file", "ca_file", "client_cert",
                "client_key", "insecure_skip_verify", "header", "recorded", "exact")  # fmt: skip


def _no_server_options(args: argparse.Namespace) -> None:
    given = [n for n in _SERVER_ONLY if getattr(args, n, None)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise FootprintError("it is for the Prometheus server: add --url (or leave it out)", key=flag)


def _tz(name: str | None) -> Any:
    if not name:
        return datetime.now().astimezone().tzinfo
    if name.upper() == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise FootprintError(f"unknown time zone {name!r} (an IANA name such as Europe/Paris, or UTC)", key="--tz") from None


def _gpu_types(items: list[str]) -> dict[str, str]:
    from footprint.lca.database import db

    out = {}
    for item in items:
        if "=" not in item:
            raise FootprintError(f"expected TYPE=GPU, e.g. a100=A100-SXM4-80GB, got {item!r}", key="--gpu-type")
        k, v = item.split("=", 1)
        out[k.strip()] = db().find_gpu(v.strip(), key="--gpu-type").name
    return out


def _site(args: argparse.Namespace) -> dict[str, Any] | None:
    from footprint.tracking.runcmd import _site as site

    return site(args.grid, args.pue)


def _options(args: argparse.Namespace, start: float | None, end: float | None, sacct: Any) -> Any:
    from footprint.fleet.importer import ImportOptions
    from footprint.fleet.telemetry import DcgmNames, exporter_names

    names = DcgmNames()
    chunk, gap = 6 * 3600.0, 300.0
    agg: dict[str, Any] = {}
    if not getattr(args, "url", None):
        _no_server_options(args)
    else:
        labels = tuple(x.strip() for x in args.job_label.split(",") if x.strip()) if args.job_label is not None else None
        if labels == ():
            raise FootprintError("give at least one label name", key="--job-label")
        names = exporter_names(
            args.exporter,
            energy_metric=args.energy_metric,
            power_metric=args.power_metric,
            host_label=args.host_label,
            job_labels=labels,
            selector=args.selector,
            cpu_source=args.cpu,
            recorded=args.recorded or "",
        )
        chunk, gap = parse_duration(args.chunk, "--chunk"), parse_duration(args.max_gap, "--max-gap")
        if chunk < 60:  # 1s over a month was 2.6 million round trips per series: a hang, not an import
            raise FootprintError(f"expected at least 1m (a query per chunk and series), got {args.chunk!r}", key="--chunk")
        agg = {
            "exact": args.exact,
            "exact_below_s": parse_duration(args.exact_below, "--exact-below"),
            "max_samples": args.max_samples,
            "concurrency": args.concurrency,
        }
    return ImportOptions(
        start=start,
        end=end,
        prom=prom_config(args) if getattr(args, "url", None) else None,
        names=names,
        sacct=sacct,
        site=_site(args),
        gpu_types=_gpu_types(args.gpu_type),
        chunk_s=chunk,
        max_gap_s=gap,
        slurm_energy_scope=getattr(args, "slurm_energy_scope", None),
        keep_series=not args.no_series,
        overwrite=args.overwrite,
        records=True if args.records else None,
        **agg,
    )


def _run(args: argparse.Namespace, opts: Any) -> int:
    from rich.progress import Progress

    from footprint.fleet.importer import import_fleet

    with Progress(transient=True, disable=args.quiet) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, total: int | None, advance: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.advance(tasks[phase], advance)

        s = import_fleet(args.output, opts, progress)
    e = s.gpu_energy_j
    line = f"wrote {s.out}: {s.jobs} jobs"
    if e is not None:
        share = (s.unallocated_energy_j or 0.0) / e if e else 0.0
        line += f", {s.devices} meters, GPU energy {e / 3.6e6:,.2f} kWh ({share:.1%} unallocated)"
    print(line)
    for msg in s.skipped[:20]:
        print(f"  skipped: {msg}", file=sys.stderr)
    if len(s.skipped) > 20:
        print(f"  ... {len(s.skipped) - 20} more in {s.out}/fleet.json", file=sys.stderr)
    return 0


def import_prometheus(args: argparse.Namespace) -> int:
    from footprint.fleet.importer import gc_paused
    from footprint.fleet.slurm import SacctReading

    start, end = window_args(args)
    with gc_paused():  # a month of a large cluster's sacct: ~600,000 jobs, read while the server lists its series
        sacct = SacctReading(args.sacct, _tz(args.tz), args.delimiter) if args.sacct else None
        return _run(args, _options(args, start, end, sacct))


def import_slurm(args: argparse.Namespace) -> int:
    from footprint.fleet.slurm import parse_sacct, read_sacct, run_sacct

    start, end = window_args(args)
    if args.run_sacct == bool(args.sacct):
        raise FootprintError("give a sacct output file or --run-sacct (one of them)", key="sacct")
    if args.run_sacct:
        if start is None or end is None:
            raise FootprintError("--run-sacct needs --start and --end", key="--run-sacct")
        sacct = parse_sacct(run_sacct(start, end), UTC, "sacct")
    else:
        sacct = read_sacct(args.sacct, _tz(args.tz), args.delimiter)
    if not sacct.jobs:
        raise FootprintError(f"no GPU job in it ({len(sacct.skipped)} line(s) left out)", sacct.source)
    return _run(args, _options(args, start, end, sacct))


def job(args: argparse.Namespace) -> int:
    from footprint.fleet.ledger import job_record
    from footprint.outputs import atomic_dir, write_text
    from footprint.tracking.runrecord import finite_json

    record = job_record(args.fleet, args.job_id)
    import json

    with atomic_dir(args.output, replace=args.force) as tmp:
        write_text(tmp / "run.json", json.dumps(finite_json(record), indent=2, default=str, allow_nan=False))
    print(f"wrote {args.output}/run.json (job {args.job_id})", file=sys.stderr)
    return 0


def report(args: argparse.Namespace) -> int:
    from footprint.reports.fleet import write_report

    out = write_report(args.fleet, args.output, args.by, args.format, args.top, args.sets, args.samples, args.seed)
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)
    return 0
