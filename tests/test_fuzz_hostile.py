"""The inputs that still broke it (issue 33, second half), each class fuzzed through the real CLI in the fuzz harness
(tests/_fuzz.py) and judged by its `verdict` (no traceback, hang, memory blow-up or nan/inf; a refusal is one line,
exit 2): hangs (a trickling server, named pipes), races (concurrent imports into one new directory, concurrent
appends), importers (nvidia-smi and codecarbon logs under the plausibility table, gaps split), and the help, diff and
URL tracebacks."""

from __future__ import annotations

import contextlib
import csv
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fuzz import FUZZ, REPO, CliServer, one_line_error, verdict
from _paths import SCENARIOS
from hypothesis import given
from hypothesis import strategies as st

from footprint.errors import FootprintError
from meters.importers import MAX_DEVICE_POWER_W, MAX_SPLIT_GAP_S

pytestmark = pytest.mark.timeout(300)
SCENARIO = SCENARIOS / "finetune-small.yaml"


# ---- hangs: an overall deadline per request, named pipes refused ---------------------------------------------


class Trickle(http.server.BaseHTTPRequestHandler):
    """Answers one byte at a time, 20 a second, for longer than any test waits: the headers (mode 'headers') or the
    body; 'elsewhere' redirects to the link-local cloud metadata address."""

    mode = "body"

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        with contextlib.suppress(OSError):
            if type(self).mode == "elsewhere":
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if type(self).mode == "headers":
                for c in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
                    self.wfile.write(bytes([c]))
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for c in b'{"status":"success","data":{"resultType":"vector","result":[' + b" " * 10_000:
                self.wfile.write(bytes([c]))
                self.wfile.flush()
                time.sleep(0.05)

    do_POST = do_GET  # noqa: N815


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hangs up on purpose


@pytest.fixture(scope="module")
def trickle() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), Trickle)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_trickling_prometheus_is_refused_after_4x_the_timeout(trickle: str, tmp_path: Path, mode: str) -> None:
    from footprint.cli.app import main

    Trickle.mode = mode
    t0 = time.monotonic()
    argv = ["fleet", "import", "prometheus", "--url", trickle, "--start", "now-1h", "--end", "now", "--retries", "0"]
    err = _captured(main, [*argv, "--timeout", "0.5", "-o", str(tmp_path / "out"), "--quiet"])
    took = time.monotonic() - t0
    assert took < 4 + 3, took  # 4 x --timeout (at least 1 s), plus the command's own start
    assert "no whole answer after 4 s" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_trickling_metrics_endpoint_is_one_error_within_its_timeout(trickle: str, mode: str) -> None:
    from footprint.serving.watch import fetch_url

    Trickle.mode = mode
    t0 = time.monotonic()
    with pytest.raises(FootprintError, match="no whole answer within 1 s"):
        fetch_url(trickle + "/metrics", timeout=1.0)
    assert time.monotonic() - t0 < 2.5


def test_serving_watch_never_follows_a_redirect_to_another_host(trickle: str) -> None:
    from footprint.serving.watch import fetch_url

    Trickle.mode = "elsewhere"
    with pytest.raises(FootprintError, match=r"only http\(s\) on the same host"):
        fetch_url(trickle + "/metrics", timeout=2.0)


def _captured(main: Any, argv: list[str]) -> str:
    import io
    from contextlib import redirect_stderr

    buf = io.StringIO()
    with redirect_stderr(buf):
        assert main(argv) == 2
    return buf.getvalue()


@FUZZ
@given(
    labels=st.lists(st.text("abcxyz019-", min_size=1, max_size=80), min_size=1, max_size=6),
    repeat=st.sampled_from([1, 10, 1000]),
    command=st.sampled_from(["fleet", "serving", "watch"]),
)
def test_fuzz_url_hosts_of_any_length_are_sent_or_refused_in_one_line(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, labels: list[str], repeat: int, command: str
) -> None:
    host = ".".join(labels * repeat)
    url = f"http://{host}:1"
    out = tmp_path_factory.mktemp("u") / "out"
    argv = {
        "fleet": ["fleet", "import", "prometheus", "--url", url, "--start", "now-1h", "--end", "now", "--retries", "0"],
        "serving": ["serving", "import", "prometheus", "--url", url, "--start", "now-1h", "--end", "now", "--retries", "0"],
        "watch": ["serving", "watch", "--metrics-url", url + "/metrics", "--duration", "30s"],
    }[command]
    o = cli.run([*argv, "--timeout", "1", "-o", str(out)], timeout_s=30)
    one_line_error(o)  # nothing listens on port 1 of any host: a refusal, of the URL or of the connection


def test_named_pipes_are_refused_where_a_file_is_read(cli: CliServer, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        ["fleet", "import", "prometheus", "--url", "http://127.0.0.1:1", "--start", "now-1h", "--end", "now"]
        + ["--bearer-token-file", str(fifo), "-o", str(tmp_path / "o1")],
        ["fleet", "import", "prometheus", "--url", "http://127.0.0.1:1", "--start", "now-1h", "--end", "now"]
        + ["--ca-file", str(fifo), "-o", str(tmp_path / "o2")],
        ["kernels", "analyze", str(fifo)],
        ["kernels", "diff", str(fifo), str(fifo)],
        ["fleet", "import", "slurm", str(fifo), "-o", str(tmp_path / "o3")],
        ["import", "nvidia-smi", str(fifo), "-o", str(tmp_path / "o4")],
        ["import", "codecarbon", str(fifo), "-o", str(tmp_path / "o5")],
        ["assess", str(fifo)],
    ]
    for argv in cases:
        o = cli.run(argv, timeout_s=15)
        one_line_error(o, "pipe")


# ---- races: new directories claimed, appends under a lock -----------------------------------------------------


def _smi_log(path: Path, seconds: int = 5) -> Path:
    rows = [f"2024/01/01 00:00:{s:02d}.000, 0, NVIDIA A100-SXM4-40GB, GPU-0, {300 + s} W" for s in range(seconds)]
    path.write_text("timestamp, index, name, uuid, power.draw [W]\n" + "\n".join(rows) + "\n")
    return path


def _footprint(*argv: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pipe = subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", "footprint.cli", *argv], cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True)


def test_concurrent_imports_into_one_new_directory_one_wins_the_others_fail_in_one_line(tmp_path: Path) -> None:
    log = _smi_log(tmp_path / "gpu.csv")
    procs = [_footprint("import", "nvidia-smi", str(log), "-o", "out", cwd=tmp_path) for _ in range(4)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(code for code, _ in results) == [0, 2, 2, 2], results
    for code, err in results:
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and err.startswith("footprint: error: cannot write out"), err
    assert json.loads((tmp_path / "out" / "run.json").read_text())["energy"]["gpu_j"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temporary directory left


def test_concurrent_emissions_csv_exports_each_add_their_row(tmp_path: Path) -> None:
    procs = [_footprint("export", "emissions-csv", str(SCENARIO), "-o", "e.csv", cwd=tmp_path) for _ in range(5)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 5
    rows = list(csv.DictReader((tmp_path / "e.csv").open()))
    assert len(rows) == 5


@FUZZ
@given(n=st.integers(2, 12), fail=st.sets(st.integers(0, 11), max_size=3))
def test_fuzz_atomic_dir_claims_a_new_directory_for_exactly_one_writer(
    tmp_path_factory: pytest.TempPathFactory, n: int, fail: set[int]
) -> None:
    from footprint.outputs import atomic_dir

    target = tmp_path_factory.mktemp("claim") / "out"
    won, lost, barrier = [], [], threading.Barrier(n)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            with atomic_dir(target) as tmp:
                (tmp / "who").write_text(str(i))
                time.sleep(0.01)
                if i in fail:
                    raise RuntimeError("the work failed")
            won.append(i)
        except FootprintError as exc:
            lost.append(str(exc))
        except RuntimeError:
            pass

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) <= 1 and all("cannot write" in e for e in lost)
    if won:
        assert (target / "who").read_text() == str(won[0]) and not (target / ".footprint-claim").exists()
    assert not [p for p in target.parent.iterdir() if p.name != "out"]


@FUZZ
@given(n=st.integers(2, 16))
def test_fuzz_appends_under_the_lock_lose_nothing(tmp_path_factory: pytest.TempPathFactory, n: int) -> None:
    from footprint.outputs import locked, write_text

    path = tmp_path_factory.mktemp("append") / "log.txt"

    def append(i: int) -> None:
        with locked(path):
            old = path.read_text() if path.exists() else ""
            time.sleep(0.002)
            write_text(path, old + f"{i}\n")

    threads = [threading.Thread(target=append, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(x) for x in path.read_text().split()) == list(range(n))


# ---- importers: streamed, capped, the plausibility table, gaps split ---------------------------------------------


_STAMP = {
    "smi": lambda t: time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}",
    "iso_z": lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + "Z",
    "iso_offset": lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + "+02:00",
}


@st.composite
def smi_logs(draw: st.DrawFn) -> tuple[str, int]:
    fmt = draw(st.sampled_from(sorted(_STAMP)))
    t = float(draw(st.integers(0, 4_000_000_000)))
    lines = ["timestamp, index, name, uuid, power.draw [W]"]
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.one_of(st.floats(0.1, 2.0), st.floats(0, 4e9), st.just(0.0)))
        index = draw(st.one_of(st.integers(0, 3), st.integers(-5, 10**40), st.just("x")))
        power = draw(st.one_of(st.floats(0, 800), st.floats(allow_nan=True, allow_infinity=True), st.just("[N/A]")))
        name = draw(st.one_of(st.just("NVIDIA A100-SXM4-40GB"), st.just('"A100, torn'), st.text(max_size=5)))
        stamp = _STAMP[fmt](min(t, 253402300799.0))
        lines.append(f"{stamp}, {index}, {name}, GPU-{index}, {power} W")
        if draw(st.integers(0, 20)) == 0:
            lines.append("x" * draw(st.sampled_from([10, 200_000])))
    return "\n".join(lines) + "\n", len(lines) - 1


@FUZZ
@given(log=smi_logs())
def test_fuzz_nvidia_smi_logs_give_a_plausible_record_or_one_line(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, log: tuple[str, int]
) -> None:
    text, rows = log
    d = tmp_path_factory.mktemp("smi")
    (d / "gpu.csv").write_text(text)
    o = cli.run(["import", "nvidia-smi", str(d / "gpu.csv"), "-o", str(d / "out")])
    assert verdict(o) is None, (verdict(o), o.err[-300:])
    if o.code == 2:
        one_line_error(o)
        assert not (d / "out").exists()
        return
    record = json.loads((d / "out" / "run.json").read_text())
    for dev in record["devices"]:
        if dev["energy_j"] is not None:
            # a reading is at most MAX_DEVICE_POWER_W, and no interval longer than MAX_SPLIT_GAP_S is bridged
            assert 0 <= dev["energy_j"] <= MAX_DEVICE_POWER_W * dev["duration_s"] + 1e-6
            assert dev["duration_s"] <= rows * MAX_SPLIT_GAP_S
            assert 0 <= dev["index"] <= 3 if dev["index"] is not None else True


def test_a_gap_splits_the_integration_instead_of_bridging_it(cli: CliServer, tmp_path: Path) -> None:
    head = "timestamp, index, name, uuid, power.draw [W]\n"
    rows = [(f"{year}/01/01 00:00:0{s}.000", 300) for year in (2024, 2124) for s in range(3)]
    (tmp_path / "gpu.csv").write_text(head + "".join(f"{t}, 0, NVIDIA A100-SXM4-40GB, GPU-0, {p} W\n" for t, p in rows))
    o = cli.run(["import", "nvidia-smi", str(tmp_path / "gpu.csv"), "-o", str(tmp_path / "out")])
    assert o.code == 0, o.err
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["energy"]["gpu_j"] == pytest.approx(4 * 300.0)  # 2 s on each side of the century, not 526 MWh
    assert record["duration_s"] == pytest.approx(4.0)
    assert any("not bridged" in n for n in record["notes"])


def test_iso_8601_z_timestamps_are_read_as_utc(tmp_path: Path) -> None:
    from meters.importers import read_nvidia_smi_csv

    p = tmp_path / "gpu.csv"
    p.write_text("timestamp, index, power.draw [W]\n2024-01-01T10:00:00Z, 0, 100 W\n2024-01-01T10:00:01.5Z, 0, 100 W\n")
    df = read_nvidia_smi_csv(p)
    assert df["t_s"].tolist() == [1704103200.0, 1704103201.5] and str(df["timestamp"].dt.tz) == "UTC"
    with pytest.raises(ValueError, match="state their own UTC offset"):
        read_nvidia_smi_csv(p, utc_offset=1)


def test_an_unterminated_quote_costs_its_own_line_only(tmp_path: Path) -> None:
    from meters.importers import read_nvidia_smi_csv

    torn = '"A100, GPU-0'
    rows = [f"2024/01/01 00:00:{s:02d}.000, 0, {torn if s == 1 else 'A100'}, 100 W" for s in range(20)]
    p = tmp_path / "gpu.csv"
    p.write_text("timestamp, index, name, power.draw [W]\n" + "\n".join(rows) + "\n")
    df = read_nvidia_smi_csv(p)
    assert len(df) == 19 and df.attrs["dropped"] == {"unreadable": 1}


def test_a_log_over_the_reading_cap_is_refused_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import meters.importers as imp

    monkeypatch.setattr(imp, "MAX_READINGS", 100)
    p = _smi_log(tmp_path / "gpu.csv", seconds=150)
    with pytest.raises(ValueError, match="more than 100 readings"):
        imp.read_nvidia_smi_csv(p)


@FUZZ
@given(duration=st.one_of(st.floats(), st.sampled_from(["1e308", "-1", "nan", "inf", "3600", "x"])))
def test_fuzz_codecarbon_durations_are_held_to_the_table(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, duration: Any
) -> None:
    d = tmp_path_factory.mktemp("cc")
    head = "timestamp,project_name,run_id,duration,emissions,energy_consumed,cpu_energy,gpu_energy,ram_energy,country_iso_code"
    (d / "e.csv").write_text(f"{head}\n2024-01-01T00:00:00,p,r,{duration},1,1,0.1,0.8,0.1,FRA\n")
    o = cli.run(["import", "codecarbon", str(d / "e.csv"), "-o", str(d / "out")])
    assert verdict(o) is None, (verdict(o), o.err[-300:])
    if o.code == 0:
        seconds = json.loads((d / "out" / "run.json").read_text())["duration_s"]
        assert 0 <= seconds <= 20 * 8766 * 3600
    else:
        one_line_error(o)


# ---- the listed tracebacks ----------------------------------------------------------------------------------


def _commands() -> list[list[str]]:
    from footprint.cli.app import build_parser

    def walk(parser: Any, prefix: list[str]) -> list[list[str]]:
        out = [prefix]
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    out += walk(sub, [*prefix, name])
        return out

    return walk(build_parser(), [])


def test_every_command_s_help_prints(cli: CliServer) -> None:
    for argv in _commands():
        for flag in ("--help", "-h"):
            o = cli.run([*argv, flag])
            assert o.code == 0 and verdict(o) is None and "usage:" in o.out, (argv, o.err[-300:])


_KERNEL = {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": 1000, "dur": 10}
_CPU_OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 10, "args": {}}


@FUZZ
@given(
    a=st.lists(st.sampled_from(["kernel", "cpu", "junk"]), max_size=4),
    b=st.lists(st.sampled_from(["kernel", "cpu", "junk"]), max_size=4),
    fmt=st.sampled_from(["table", "json", "html"]),
)
def test_fuzz_kernels_diff_of_any_two_traces(
    cli: CliServer, tmp_path_factory: pytest.TempPathFactory, a: list[str], b: list[str], fmt: str
) -> None:
    d = tmp_path_factory.mktemp("diff")
    event = {"kernel": _KERNEL | {"args": {"correlation": 1, "device": 0, "stream": 7}}, "cpu": _CPU_OP, "junk": {"ph": 5}}
    for name, kinds in (("a", a), ("b", b)):
        (d / f"{name}.json").write_text(json.dumps({"traceEvents": [event[k] for k in kinds]}))
    o = cli.run(["kernels", "diff", str(d / "a.json"), str(d / "b.json"), "--format", fmt, "-o", str(d / f"out.{fmt}")])
    assert verdict(o) is None, (verdict(o), a, b, o.err[-300:])
    if o.code == 2:
        one_line_error(o, "nothing to compare")


def test_concurrent_fleet_imports_into_one_new_directory_one_wins(tmp_path: Path) -> None:
    head = "JobID|JobIDRaw|JobName|User|Account|Partition|Start|End|Elapsed|AllocTRES|NodeList|State|ConsumedEnergyRaw\n"
    when = "2025-03-01T00:24:02|2025-03-01T01:49:55|01:25:53"
    (tmp_path / "sacct.txt").write_text(head + f"5000|5000|t|u|a|gpu|{when}|gres/gpu=2|gpu-01|COMPLETED|\n")
    procs = [_footprint("fleet", "import", "slurm", "sacct.txt", "-o", "fl", "--quiet", cwd=tmp_path) for _ in range(3)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(code for code, _ in results) == [0, 2, 2], results
    assert all(len(err.strip().splitlines()) == 1 for code, err in results if code == 2), results


def test_a_sacct_export_over_the_cap_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC

    import footprint.fleet.slurm as slurm

    monkeypatch.setattr(slurm, "MAX_SACCT_ROWS", 10)
    head = "JobID|JobIDRaw|JobName|User|Account|Partition|Start|End|Elapsed|AllocTRES|NodeList|State|ConsumedEnergyRaw\n"
    when = "2025-03-01T00:24:02|2025-03-01T01:49:55|01:25:53"
    rows = "".join(f"{5000 + i}|{5000 + i}|t|u|a|gpu|{when}|gres/gpu=2|gpu-01|COMPLETED|\n" for i in range(20))
    (tmp_path / "sacct.txt").write_text(head + rows)
    with pytest.raises(FootprintError, match="more than 10 jobs"):
        slurm.read_sacct(tmp_path / "sacct.txt", UTC)


def test_a_codecarbon_file_over_its_cap_is_refused(cli: CliServer, tmp_path: Path) -> None:
    import meters.importers as imp

    p = tmp_path / "e.csv"
    row = "1,1\n" * 100_000
    with p.open("w") as fh:
        fh.write("duration,energy_consumed\n")
        for _ in range(imp.MAX_CODECARBON_BYTES // len(row) + 1):
            fh.write(row)
    one_line_error(cli.run(["import", "codecarbon", str(p), "-o", str(tmp_path / "o")]), "larger than")
