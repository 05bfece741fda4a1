"""`footprint run`, `recover`, `merge` and `import`: measured runs and their records."""

from __future__ import annotations

import argparse
from typing import Any

from footprint import bounds
from footprint.inputs import MAX_RECORD_DEVICES, number_arg


def register(sub: argparse._SubParsersAction) -> None:
    _register_run(sub)
    _register_recover_merge(sub)
    _register_import(sub)


def _register_run(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command

    r = command(
        sub,
        "run",
        "run a command under the tracker and write its run record",
        """
footprint run --name llama-ft --grid FRA -- python train.py --lr 3e-4
FOOTPRINT_FAKE_NVML=2xA100-SXM4-40GB footprint run --name demo -- python -c "import time; time.sleep(2)"
footprint run --name ft --count-steps -- python train.py    count its optimizer steps with no code change
footprint assess runs/llama-ft                        then assess it (or: footprint report runs/llama-ft -o r.html)""",
        handler=run,
    )
    r.add_argument(
        "--name",
        help="run name: one plain name, the directory under --output-dir (default: SLURM job or a timestamp); "
        "a name already taken there gets a suffix (-2, -3...)",
    )
    r.add_argument("--output-dir", default="runs", help="where run directories go (default: ./runs)")
    r.add_argument("--grid", help="grid zone of the site (ISO3, e.g. FRA) for later assessment")
    r.add_argument("--pue", type=bounds.arg("site.pue"), help="PUE of the site (1 to 3, footprint/bounds.py)")
    r.add_argument(
        "--period",
        type=number_arg(float, 0.001, 3600),
        default=0.1,
        help="sampling period in seconds (default 0.1; 0.001 to 3600)",
    )
    r.add_argument(
        "--count-steps",
        action="store_true",
        help="count the command's optimizer steps (torch.optim) with no code change, through a sitecustomize on its PYTHONPATH",
    )
    r.add_argument(
        "--prometheus-port",
        type=number_arg(int, 1, 65535),
        help="serve live metrics for Prometheus on 127.0.0.1:PORT while the command runs (needs prometheus_client)",
    )
    r.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        help="the command, after --; signals sent to footprint run are passed on once, its exit code is the "
        "command's (128 + N if signal N killed it), and it gets SIGTERM if footprint run dies",
    )


def _register_recover_merge(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import command

    rc = command(
        sub,
        "recover",
        "rebuild run.json and the samples from the journal of a killed run",
        "footprint recover runs/llama-ft",
        handler=recover_or_merge,
    )
    rc.add_argument("run_dir", help="the run directory (holds ranks/rank-N.journal.jsonl)")
    mg = command(
        sub,
        "merge",
        "merge per-rank records of a distributed run into one run.json",
        "footprint merge runs/llama-ft        after a multi-rank run without a torch.distributed process group",
        handler=recover_or_merge,
    )
    mg.add_argument("run_dir", help="the run directory (holds ranks/rank-N.json)")


def _register_import(sub: argparse._SubParsersAction) -> None:
    from footprint.cli.registry import group

    _, ims = group(
        sub,
        "import",
        "turn existing power logs into a run record",
        """
footprint import nvidia-smi gpu.csv -o runs/from-smi --gpu A100-PCIe-40GB --grid FRA
footprint import codecarbon emissions.csv -o runs/from-cc --gpu A100-SXM4-40GB --gpu-count 8""",
    )
    smi = ims.add_parser("nvidia-smi", help="an `nvidia-smi --query-gpu=... --format=csv` log")
    smi.add_argument("file", help="the CSV log")
    smi.add_argument("-o", "--output", required=True, help="run directory to write")
    smi.add_argument("--utc-offset", help="offset of the log's local timestamps, e.g. +1 or +01:00")
    smi.add_argument("--grid", help="grid zone of the site (ISO3)")
    smi.add_argument("--gpu", help="GPU model when the log has no `name` column, e.g. A100-PCIe-40GB")
    smi.set_defaults(handler=import_log)
    cc = ims.add_parser("codecarbon", help="a codecarbon emissions.csv")
    cc.add_argument("file", help="codecarbon's emissions.csv")
    cc.add_argument("-o", "--output", required=True, help="run directory to write")
    cc.add_argument("--gpu", help="GPU model (codecarbon does not record it), e.g. A100-SXM4-40GB")
    cc.add_argument(
        "--gpu-count",
        type=number_arg(int, 1, MAX_RECORD_DEVICES),
        default=1,
        help="GPUs the logged energy covers (default 1; with a log that has GPU energy, or no --gpu)",
    )
    cc.set_defaults(handler=import_log)


def run(args: argparse.Namespace) -> int:
    from footprint.tracking.runcmd import run_command

    port = getattr(args, "prometheus_port", None)
    return run_command(args, None if port is None else lambda tracker: _prometheus(tracker, port))


def _prometheus(tracker: Any, port: int) -> Any:
    """The live-metrics endpoint on 127.0.0.1:port (`--prometheus-port`); a port already taken is a clear error."""
    from footprint.errors import FootprintError

    try:
        from footprint.integrations.prometheus import PrometheusExporter

        return PrometheusExporter(tracker, port=port).start()
    except ImportError:
        tracker.stop()
        raise FootprintError("needs prometheus_client: pip install 'footprint[integrations]'", key="--prometheus-port") from None
    except OSError as exc:
        tracker.stop()
        raise FootprintError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", key="--prometheus-port") from None


def recover_or_merge(args: argparse.Namespace) -> int:
    from footprint.tracking import runrecord
    from footprint.tracking.runcmd import kwh

    rec = (runrecord.recover if args.command == "recover" else runrecord.merge)(args.run_dir)
    e = rec["energy"]
    print(f"{args.run_dir}/run.json: {len(rec['devices'])} devices, {rec['duration_s']:.1f} s, GPU energy {kwh(e['gpu_j'])}")
    return 0


def import_log(args: argparse.Namespace) -> int:
    from footprint.tracking.runcmd import import_log

    return import_log(args)
