"""The CLI end to end: shipped scenarios in every format, GPU listing, and clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO, SCENARIOS

from footprint.cli import main
from footprint.lca import categories as cat

SHIPPED = sorted(SCENARIOS.glob("*.yaml"))


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_seven_scenarios_shipped() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"bloom-176b", "gpt-4-falk", "llama-3.1-405b", "llama-2-70b", "olmo-2-7b", "gpt-3-v100", "finetune-small"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_scenario_assesses_to_the_json_contract(path: Path, capsys) -> None:
    code, out, err = run(capsys, "assess", str(path), "--format", "json", "--samples", "500")
    assert code == 0, err
    d = json.loads(out)
    for key in (
        "name",
        "energy_kwh",
        "facility_energy_kwh",
        "gpu_hours",
        "gpu_equivalents",
        "impacts",
        "materials",
        "water_l",
        "sources",
        "warnings",
    ):
        assert key in d
    assert list(d["impacts"]) == list(cat.keys())
    for k, v in d["impacts"].items():
        assert set(v) >= {"unit", "total", "by_stage", "by_component", "low", "high"}
        assert v["low"] <= v["total"] <= v["high"], k
    assert set(d["water_l"]) == {"on_site", "off_site", "total"}
    assert all(s["licence"] for s in d["sources"])


def test_bloom_order_of_magnitude(capsys) -> None:
    """Luccioni et al.: 24.7 t CO2 eq dynamic at 57 g/kWh without PUE; ours adds PUE 1.2 and embodied."""
    code, out, _ = run(capsys, "assess", str(SCENARIOS / "bloom-176b.yaml"), "--format", "json", "--samples", "0")
    d = json.loads(out)
    assert d["energy_kwh"] == pytest.approx(433196, rel=1e-6)
    use = d["impacts"]["climate_change"]["by_stage"]["use"]
    assert use == pytest.approx(433196 * 1.2 * 0.057, rel=1e-6)


@pytest.mark.parametrize("fmt", ["table", "csv", "md"])
def test_text_formats(fmt: str, capsys) -> None:
    code, out, _ = run(capsys, "assess", str(SCENARIOS / "bloom-176b.yaml"), "--format", fmt, "--samples", "200")
    assert code == 0
    for c in cat.categories():
        assert c.name in out
    if fmt == "csv":
        assert out.count("\n") == 1 + 16 * 5


def test_set_overrides_answer_what_ifs(capsys) -> None:
    base = json.loads(run(capsys, "assess", str(SCENARIOS / "gpt-4-falk.yaml"), "--format", "json", "--samples", "0")[1])
    what_if = json.loads(
        run(
            capsys,
            "assess",
            str(SCENARIOS / "gpt-4-falk.yaml"),
            "--format",
            "json",
            "--samples",
            "0",
            "--set",
            "training.mfu=0.5",
            "--set",
            "hardware.lifetime=5 years",
            "--set",
            "site.grid=POL",
        )[1]
    )
    assert what_if["gpu_equivalents"] < base["gpu_equivalents"]
    assert what_if["site"]["grid"] == "POL"


def test_gpus_list_and_show(capsys) -> None:
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "a100-sxm4-40gb" in out and "mi300x" in out
    code, out, _ = run(capsys, "gpus", "show", "NVIDIA A100-SXM4-40GB", "--format", "json")
    card = json.loads(out)
    cc = card["impacts"]["climate_change"]
    assert cc["published_total"] == pytest.approx(113.5, rel=0.005)  # ADEME as published
    assert cc["total"] == pytest.approx(210.0, rel=0.005)  # memory counted for all 6 dies (embodied_corrections.yaml)
    assert card["embodied_data"] == "corrected"
    assert set(cc) >= {"unit", "total", "by_stage", "by_component"}
    assert "use" not in cc["by_stage"] and "distribution" not in cc["by_component"]


def test_data_sources_lists_licences(capsys) -> None:
    code, out, _ = run(capsys, "data", "sources", "--format", "json")
    srcs = json.loads(out)
    assert any("CC BY-SA 4.0" in s["licence"] for s in srcs)
    assert all(s["licence"] for s in srcs)


BAD = {
    "unknown_gpu": (
        "hardware:\n  gpu: A100-SXM9\n  count: 8\ntraining: {gpu_hours: 10, power_per_gpu: 400 W}\n",
        r"hardware.gpu: unknown GPU 'A100-SXM9'; closest known",
    ),
    "malformed": ("hardware:\n  gpu: [A100\ntraining: {}\n", r"line \d+"),
    "wrong_dimension": (
        "hardware: {gpu: A100-SXM4-40GB}\ntraining: {gpu_hours: 10, power_per_gpu: 400 kg}\n",
        r"training.power_per_gpu: '400 kg' is not a W quantity",
    ),
    "negative_count": (
        "hardware: {gpu: A100-SXM4-40GB, count: -3}\ntraining: {gpu_hours: 10, power_per_gpu: 1 W}\n",
        r"hardware.count: must be > 0",
    ),
    "mfu_above_one": (
        "hardware: {gpu: A100-SXM4-40GB}\ntraining: {flops: 1e20, mfu: 1.4, power_per_gpu: 1 W}\n",
        r"training.mfu: must be in \(0, 1\]",
    ),
    "unknown_key": (
        "hardware: {gpu: A100-SXM4-40GB, colour: red}\ntraining: {gpu_hours: 1, power_per_gpu: 1 W}\n",
        r"hardware.colour: unknown key; allowed: gpu, count",
    ),
    "two_time_sources": (
        "hardware: {gpu: L4}\ntraining: {gpu_hours: 1, flops: 1e20, mfu: 0.3, power_per_gpu: 1 W}\n",
        r"training: give exactly one way",
    ),
    "unknown_zone": (
        "hardware: {gpu: L4}\ntraining: {gpu_hours: 1, power_per_gpu: 1 W}\nsite: {grid: Polnd}\n",
        r"site.grid: unknown grid zone 'Polnd'.*POL",
    ),
    "not_a_mapping": ("- just\n- a list\n", r"expected a mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exit_2_names_file_and_key_no_traceback(case: str, tmp_path: Path) -> None:
    text, pattern = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    out_file = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "footprint.cli", "assess", str(path), "-o", str(out_file)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr
    import re

    assert re.search(pattern, proc.stderr), proc.stderr
    assert not out_file.exists()


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["assess", "missing.yaml"], "no such scenario file"),
        (["assess", "scenarios/bloom-176b.yaml", "--set", "nonsense"], "expected key=value"),
        (["assess", "scenarios/bloom-176b.yaml", "--samples", "-1"], "argument --samples: must be >= 0"),
        (["assess", "scenarios/bloom-176b.yaml", "--format", "pdf"], "invalid choice"),
        (["gpus", "show", "Voodoo 3"], "unknown GPU"),
    ],
)
def test_bad_arguments(args: list[str], pattern: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and pattern in proc.stderr and "Traceback" not in proc.stderr


def test_every_prometheus_reader_offers_the_same_connection_options(tmp_path: Path) -> None:
    """`fleet import prometheus|slurm` and `serving import prometheus` take one option set and build one config."""
    from footprint.cli.app import build_parser
    from footprint.cli.prom_options import prom_config
    from footprint.fleet.prometheus import PromConfig

    ca, cert, key = (str(p) for p in _certificates(tmp_path))
    (tmp_path / "sacct.txt").write_text("")
    conn = [
        "--url", "https://mimir.example/prometheus", "--selector", 'cluster="a"', "--max-response-mb", "3",
        "--timeout", "7.5", "--retries", "1", "--bearer-token-file", "tok", "--ca-file", ca,
        "--client-cert", cert, "--client-key", key, "--insecure-skip-verify",
        "--header", "X-Scope-OrgID: t1", "--header", "X-Other: 2",
    ]  # fmt: skip
    window = ["--start", "now-1h", "--end", "now", "-o", str(tmp_path / "out")]
    parser = build_parser()
    configs = [
        prom_config(parser.parse_args([*cmd, *conn, *window]))
        for cmd in (["serving", "import", "prometheus"], ["fleet", "import", "prometheus"], ["fleet", "import", "slurm", "s"])
    ]
    want = PromConfig(
        "https://mimir.example/prometheus",
        timeout_s=7.5,
        retries=1,
        bearer_token_file="tok",
        ca_file=ca,
        client_cert=cert,
        client_key=key,
        insecure_skip_verify=True,
        headers={"X-Scope-OrgID": "t1", "X-Other": "2"},
        max_response_bytes=3 * 2**20,
    )
    assert configs == [want, want, want]


def test_a_bad_connection_option_is_one_line_in_the_serving_import(capsys, tmp_path: Path) -> None:
    base = ["serving", "import", "prometheus", "--url", "http://127.0.0.1:9", "--start", "now-1h", "--end", "now"]
    code, _, err = run(capsys, *base, "-o", str(tmp_path / "o"), "--header", "no colon")
    assert code == 2 and "--header" in err and "'Name: value'" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:  # argparse's own range check: exit 2, one line
        main([*base, "-o", str(tmp_path / "o"), "--max-response-mb", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--max-response-mb" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--window", "9" * 400 + "s", "at most 100 years"),  # float() makes inf of 400 digits
        ("--scrape-interval", "1000000w", "at most 100 years"),
        ("--scrape-interval", "200s", "fewer than two scrapes of 200 s"),  # was imported: 100 % unattributed
        ("--chunk", "9" * 400 + "h", "at most 100 years"),
        ("--chunk", "1s", "expected at least 1m"),  # 10,800 queries per job over 3 h
        ("--max-gap", "1000000w", "at most 100 years"),
        ("--start", "9" * 400, "from 1970 to 9999"),  # was a ValueError traceback (nan windows)
        ("--end", "9" * 400, "from 1970 to 9999"),
        ("--start", "now-" + "9" * 400 + "w", "at most 100 years"),
        ("--start", "0001-01-01", "from 1970 to 9999"),
        ("--ca-file", "missing.pem", "no such file"),  # was "footprint: error: OSError"
        ("--ca-file", ".", "is a directory"),
        ("--ca-file", "sacct.txt", "cannot load it"),
        ("--client-cert", ".", "is a directory"),
        ("--client-cert", "sacct.txt", "cannot load it"),
        ("--client-key", "server.key", "needs its certificate"),  # was silently ignored
        ("--header", "Content-Length: 99999", "set by the HTTP client"),  # every request hung until --timeout
        ("--header", "Transfer-Encoding: chunked", "set by the HTTP client"),
        ("--header", "Host: elsewhere", "set by the HTTP client"),
    ],
)
def test_a_bad_window_or_tls_file_is_one_line_before_any_request(
    option: str, value: str, expected: str, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durations and times are finite and plausible; the CA bundle and client certificate are loaded before the
    first request, so a wrong file is named with its option instead of failing inside the HTTP client."""
    _certificates(tmp_path)
    (tmp_path / "sacct.txt").write_text("not a certificate\n")
    monkeypatch.chdir(tmp_path)
    window = {"--start": "now-1h", "--end": "now", option: value}
    args = [a for k, v in window.items() for a in (k, v)]
    url = ["--url", "https://127.0.0.1:9", "--retries", "0", "-o", "out"]  # nothing listens: any request fails
    serving_only, fleet_only = option in ("--window", "--scrape-interval"), option in ("--chunk", "--max-gap")
    commands = [["serving", "import", "prometheus"]] * (not fleet_only) + [["fleet", "import", "prometheus"]] * (not serving_only)
    for cmd in commands:
        code, _, err = run(capsys, *cmd, *url, *args)
        assert code == 2 and expected in err and option in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "cannot reach" not in err, err


def test_a_client_key_that_is_not_the_certificates_is_named_before_any_request(capsys, tmp_path: Path) -> None:
    _certificates(tmp_path)
    mtls = ["--client-cert", str(tmp_path / "ca.pem"), "--client-key", str(tmp_path / "server.key")]
    window = ["--start", "now-1h", "--end", "now", "--retries", "0", "-o", str(tmp_path / "out")]
    code, _, err = run(capsys, "serving", "import", "prometheus", "--url", "https://127.0.0.1:9", *window, *mtls)
    assert code == 2 and "--client-cert" in err and "key values mismatch" in err and "cannot reach" not in err, err


def _certificates(d: Path) -> tuple[Path, Path, Path]:
    from test_fleet_prometheus import _certificates as make  # one private CA maker for every TLS test

    return make(d)


def test_the_cli_holds_memory_to_what_it_uses_and_leaves_the_users_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long command (a month's fleet import) keeps no freed pages of its threads' arenas or of Arrow's mimalloc:
    the CLI gives Arrow the system allocator and glibc one arena and a fixed mapping threshold; where the user set
    their own (``ARROW_DEFAULT_MEMORY_POOL``, ``MALLOC_*``) it leaves them."""
    import ctypes

    import footprint.cli as cli

    calls: list[tuple[int, int]] = []

    class Libc:
        def __init__(self, name: object) -> None:
            self.mallopt = lambda p, v: calls.append((p, v)) or 1

    monkeypatch.setattr(ctypes, "CDLL", Libc)
    monkeypatch.setattr(cli.sys, "platform", "linux")
    for k in [k for k in cli.os.environ if k.startswith(("MALLOC_", "GLIBC_TUNABLES", "ARROW_DEFAULT"))]:
        monkeypatch.delenv(k)
    cli._steady_memory()
    assert cli.os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert calls == [(cli.M_ARENA_MAX, 1), (cli.M_MMAP_THRESHOLD, cli.MMAP_THRESHOLD)]
    calls.clear()
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    cli._steady_memory()
    assert cli.os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc" and calls == []
    code = "import footprint.cli as c; c._steady_memory(); import pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    env = {k: v for k, v in cli.os.environ.items() if not k.startswith(("MALLOC_", "ARROW_DEFAULT"))}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert out.stdout.strip() == "system", out.stderr[-400:]
