"""Silent acceptance, injection, non-determinism and signals, fuzzed (issue 21, classes 3, 4, 7 and 8).

Inputs go through the real CLI in the fuzz harness (tests/_fuzz.py) and are judged by its `verdict` (no traceback,
hang or nan/inf; a refusal is one line, exit 2): the plausibility table (footprint/bounds.py) on scenarios, `--set`,
`flops`, the Python API and `recover`; YAML read by 1.2 rules with duplicate keys refused; user text escaped in CSV
(OWASP), Markdown and the dashboard; a mixed-GPU run assessed the same way whatever the hash seed; Ctrl-C.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from _fuzz import FUZZ, REPO, CliServer, journal_only, verdict
from _paths import SCENARIOS
from hypothesis import given
from hypothesis import strategies as st

import footprint
from footprint.bounds import BOUNDS
from footprint.errors import FootprintWarning

pytestmark = pytest.mark.timeout(300)
SCENARIO = SCENARIOS / "finetune-small.yaml"
BASE = SCENARIO.read_text()
PY = sys.executable


def _error(o: Any, *words: str) -> str:
    assert verdict(o) is None, (verdict(o), o.argv, o.err[-400:])
    assert o.code == 2, (o.argv, o.out[-300:], o.err[-300:])
    line = next(x for x in o.err.splitlines() if x.startswith("footprint: error"))
    for w in words:
        assert w in line, (w, line)
    return line


def _assess(cli: CliServer, *sets: str, target: str | Path = SCENARIO) -> Any:
    argv = ["assess", str(target), "--samples", "50", "--format", "json"]
    for s in sets:
        argv += ["--set", s]
    return cli.run(argv)


# ---- the plausibility table -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, key",
    [
        ("training.power_fraction_of_tdp=1e300", "training.power_fraction_of_tdp"),
        ("site.pue=1e300", "site.pue"),
        ("hardware.lifetime=1e-300 years", "hardware.lifetime"),
        ("site.pue=0.5", "site.pue"),
        ("hardware.count=20000000", "hardware.count"),
        ("site.carbon_intensity=1e9 g/kWh", "site.carbon_intensity"),
    ],
)
def test_implausible_values_are_refused_naming_the_key(cli: CliServer, setting: str, key: str) -> None:
    line = _error(_assess(cli, setting), key)
    assert "plausible" in line or "must be" in line
    assert len(line) < 400  # no 300-digit echo


@FUZZ
@given(
    key=st.sampled_from(sorted(k for k in BOUNDS if k.startswith(("site.pue", "hardware.lifetime", "site.wue")))), x=st.floats()
)
def test_fuzz_bounded_keys_either_fit_the_table_or_are_refused(cli: CliServer, key: str, x: float) -> None:
    b = BOUNDS[key]
    unit = {"hour": " hours", "L/kWh": " L/kWh"}.get(b.unit, "")
    o = _assess(cli, f"{key}={x!r}{unit}")
    assert verdict(o) is None, (verdict(o), key, x, o.err[-300:])
    if o.code == 0:
        assert b.lo <= x <= b.hi, (key, x)
    else:
        _error(o, key)


def test_energy_with_a_power_and_gpu_time_is_ambiguous_and_refused(cli: CliServer) -> None:
    assert "gpu_hours" in BASE and "power_fraction_of_tdp" in BASE
    _error(_assess(cli, "training.energy=5000 kWh"), "not both")


@FUZZ
@given(
    params=st.floats(min_value=1, max_value=1e16),
    tokens=st.floats(min_value=1, max_value=1e18),
    layers=st.integers(1, 1_000_000),
    hidden=st.integers(1, 10_000_000),
    seq=st.integers(1, 1_000_000_000),
)
def test_fuzz_flops_transformer_never_prints_inf(
    cli: CliServer, params: float, tokens: float, layers: int, hidden: int, seq: int
) -> None:
    argv = ["flops", "transformer", "--params", repr(params), "--tokens", repr(tokens)]
    argv += ["--layers", str(layers), "--hidden", str(hidden), "--seq-len", str(seq), "--format", "json"]
    o = cli.run(argv)
    assert verdict(o) is None, (verdict(o), argv, o.err[-300:])
    if o.code == 0:
        assert all(math.isfinite(v) for v in json.loads(o.out).values() if isinstance(v, float))


def test_flops_transformer_refuses_overflowing_inputs(cli: CliServer) -> None:
    _error(cli.run(["flops", "transformer", "--params", "1e300", "--tokens", "1e300"]), "--params")


def test_the_python_api_warns_notes_and_drops_implausible_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = footprint.track(name="api", output_dir=tmp_path, site={"grid": "FRA", "pue": float("nan")}, host=False).start()
        t.step(tokens=10**309)
        t.step(tokens=7)
        run = t.stop()
    assert run is not None
    assert [w for w in caught if issubclass(w.category, FootprintWarning)]
    assert run["tokens"] == 7 and run["site"] == {"grid": "FRA"}
    assert any("site.pue" in n for n in run["notes"]) and any("step(tokens=" in n for n in run["notes"])
    bad = dict(run, site={"grid": "FRA", "pue": -1})  # assess is strict where track() is forgiving
    with pytest.raises(footprint.FootprintError, match="site.pue"):
        footprint.assess(bad, samples=50)


def test_recover_validates_the_site_of_a_journal_header(cli: CliServer, good_run: Path, tmp_path: Path) -> None:
    run = journal_only(good_run, tmp_path / "r", site={"grid": "NOWHERE\x1b[2J", "pue": 1e300, "wue": "1 L/kWh"})
    o = cli.run(["recover", str(run)])
    assert verdict(o) is None and o.code == 0, o.err[-400:]
    rec = json.loads((run / "run.json").read_text())
    assert rec["site"] == {"wue": "1 L/kWh"}
    assert any("site.pue" in n for n in rec["notes"]) and any("site.grid" in n for n in rec["notes"])


# ---- YAML by 1.2 rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("count: ", "count: 1:30 #", ["hardware.count"]),
        ("hardware:", "hardware:\n  count: 2\nhardware:", ["twice"]),
        ("count: ", "count: " + "9" * 5000 + " #", ["4,300 digits"]),
        ("count: ", "count: 1e400 #", ["overflows"]),
    ],
)
def test_yaml_surprises_are_refused(cli: CliServer, tmp_path: Path, old: str, new: str, words: list[str]) -> None:
    assert old in BASE
    p = tmp_path / "s.yaml"
    p.write_text(BASE.replace(old, new, 1))
    _error(cli.run(["assess", str(p), "--samples", "50"]), *words)


def test_yaml_12_numbers() -> None:
    from lca_data.loader import safe_load

    assert safe_load("a: 017\nb: 0o17\nc: 0x1F\nd: no\ne: 1e3\nf: 1:30") == {
        "a": 17,
        "b": 15,
        "c": 31,
        "d": "no",
        "e": 1000.0,
        "f": "1:30",
    }


# ---- escaping -------------------------------------------------------------------------------------

EVIL = '=HYPERLINK("http://x")<script>alert(1)</script> [a](javascript:alert(1)) ![i](http://evil.example/x.png)'


def test_csv_cells_are_neutralised(cli: CliServer, tmp_path: Path) -> None:
    p = tmp_path / "evil.yaml"
    p.write_text(f"name: {json.dumps(EVIL)}\n" + "\n".join(x for x in BASE.splitlines() if not x.startswith("name:")))
    out = tmp_path / "c.csv"
    o = cli.run(["report", str(p), "--compare", str(SCENARIO), "--samples", "50", "--quiet", "-o", str(out)])
    assert verdict(o) is None and o.code == 0, o.err[-300:]
    rows = list(csv.reader(io.StringIO(out.read_text())))
    names = {r[0] for r in rows[1:]}
    assert all(not n.startswith(("=", "+", "-", "@")) for n in names) and ("'" + EVIL) in names


@FUZZ
@given(text=st.text(max_size=30))
def test_fuzz_csv_cell_never_starts_a_formula(text: str) -> None:
    from footprint.escaping import csv_cell

    cell = csv_cell(text)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert cell in (text, "'" + text)


def test_the_markdown_report_carries_no_tag_link_or_image_from_user_text(cli: CliServer, tmp_path: Path) -> None:
    p = tmp_path / "evil.yaml"
    p.write_text(f"name: {json.dumps(EVIL)}\n" + "\n".join(x for x in BASE.splitlines() if not x.startswith("name:")))
    out = tmp_path / "r.md"
    o = cli.run(["report", str(p), "--samples", "50", "--quiet", "-o", str(out)])
    assert verdict(o) is None and o.code == 0, o.err[-300:]
    md = out.read_text()
    assert not re.search(r"(?<!\\)<script", md)  # a tag only as escaped text
    assert not re.search(r"(?<!\\)\]\((javascript:|http://evil)", md)  # no link or image target


def test_export_emissions_csv_neutralises_the_run_name(cli: CliServer, good_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(good_run, tmp_path / "r")
    rec = json.loads((run / "run.json").read_text())
    rec["name"] = "=1+2"
    (run / "run.json").write_text(json.dumps(rec))
    out = tmp_path / "e.csv"
    o = cli.run(["export", "emissions-csv", str(run), "-o", str(out)])
    assert verdict(o) is None and o.code == 0, o.err[-300:]
    row = next(csv.DictReader(io.StringIO(out.read_text())))
    assert all(not str(v).startswith(("=", "+", "@")) for v in row.values())


@FUZZ
@given(text=st.text(max_size=40))
def test_fuzz_shown_text_holds_no_control_character(text: str) -> None:
    from footprint.escaping import shown, unsafe_char

    assert not any(unsafe_char(c) for c in shown(text))


def test_the_dashboard_shows_run_names_and_notes_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")
    with footprint.track(name="evil", output_dir=tmp_path, host=False) as t:
        t.step(tokens=1)
    rec = json.loads((tmp_path / "evil" / "run.json").read_text())
    rec["name"] = "![x](http://evil.example/name.png)"
    rec["notes"] = ["![x](http://evil.example/note.png) <img src=x>"]
    (tmp_path / "evil" / "run.json").write_text(json.dumps(rec))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.sidebar.radio(key="page").set_value("Runs").run()
    at.text_input(key="run_root").set_value(str(tmp_path)).run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [str(e.value) for kind in ("markdown", "subheader", "caption") for e in at.get(kind)]
    assert any("evil.example/name.png" in x for x in texts) and any("evil.example/note.png" in x for x in texts)
    bad = [x for x in texts if re.search(r"(?<!\\)(!\[x\]|<img)", x)]  # only as escaped text
    assert not bad, [re.findall(r".{40}(?<!\\)(?:!\[x\]|<img).{40}", x) for x in bad]


# ---- determinism ----------------------------------------------------------------------------------


def _mixed(good_run: Path, tmp: Path, names: list[Any]) -> Path:
    run = shutil.copytree(good_run, tmp / "mixed")
    rec = json.loads((run / "run.json").read_text())
    gpus = [d for d in rec["devices"] if d["component"] == "gpu"]
    for d, n in zip(gpus, names, strict=False):
        d["name"] = n
    (run / "run.json").write_text(json.dumps(rec).replace('"NAN"', "NaN"))
    return run


@pytest.mark.parametrize("names", [["H100-SXM5-80GB", "A100-SXM4-40GB"], ["NAN", "A100-SXM4-40GB"]])
def test_a_mixed_run_is_assessed_the_same_whatever_the_hash_seed(good_run: Path, tmp_path: Path, names: list[str]) -> None:
    run = _mixed(good_run, tmp_path, names)
    seen = set()
    for seed in ("0", "1", "2", "3", "4"):
        proc = subprocess.run(
            [PY, "-m", "footprint.cli", "assess", str(run), "--samples", "50", "--format", "json"],
            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in proc.stderr
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
        seen.add((proc.returncode, json.dumps(out and [out["hardware"], out["impacts"]], sort_keys=True)))
    assert len(seen) == 1, seen
    code, _ = next(iter(seen))
    assert code == 0


# ---- signals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("after_s", [0.6, 1.2, 2.5])  # after the interpreter has started (its own first ~0.1 s is not ours)
def test_ctrl_c_during_a_report_exits_130_in_one_line_and_leaves_nothing_half_written(tmp_path: Path, after_s: float) -> None:
    out = tmp_path / "r.html"
    proc = subprocess.Popen(
        [PY, "-m", "footprint.cli", "report", str(SCENARIO), "--compare", str(SCENARIO), "--quiet", "-o", str(out)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err[-500:]
    assert proc.returncode in (0, 130), (proc.returncode, err[-300:])
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1].startswith("footprint: interrupted")
    if out.exists():  # renamed into place before the signal (the last step): whole, never a part
        assert out.read_text().rstrip().endswith("</html>")
    else:
        assert proc.returncode == 130
    assert [p.name for p in tmp_path.iterdir()] in ([], ["r.html"])


def test_a_ctrl_c_after_the_work_is_done_does_not_turn_success_into_a_signal_exit() -> None:
    """The console script ignores SIGINT once main() has returned (every file is whole by then): a Ctrl-C landing
    between the return and the exit would otherwise end a successful run by SIGINT (exit -2). main() itself, called
    from Python, leaves the caller's signal handling alone."""
    code = (
        "import os, signal, sys\n"
        "import footprint.cli as cli\n"
        "sys.argv = ['footprint', '--version']\n"
        "assert cli.main(['--version']) == 0 and signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "rc = cli.console()\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.exit(rc)\n"
    )
    p = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, (p.returncode, p.stderr)


def test_a_ctrl_c_inside_a_garbage_collector_callback_still_stops_the_command() -> None:
    """CPython cannot raise from a __del__ or weakref callback: it prints "Exception ignored" with a traceback and
    goes on (a report then finished after the user's Ctrl-C). The CLI's hook hands the interrupt back to the main
    thread, where main() turns it into the one line and exit 130."""
    code = (
        "import sys, time\n"
        "import footprint.cli as cli\n"
        "class A:\n"
        "    def __del__(self):\n"
        "        raise KeyboardInterrupt\n"
        "def work(argv):\n"
        "    A()\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 5: pass\n"
        "    print('finished after the interrupt')\n"
        "    return 0\n"
        "import footprint.cli.app as app\n"
        "app.main = work\n"
        "sys.exit(cli.main([]))\n"
    )
    p = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and "finished" not in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip().splitlines() == ["footprint: interrupted; nothing half-written was left"], p.stderr


_EXTENSION_ERRORS = {  # how a C extension turns a Ctrl-C into its own error: work(), and its error with no interrupt
    # matplotlib's `_image`, cut short while it initialised: "ImportError: initialization failed", the
    # KeyboardInterrupt as its context (once a traceback and exit 1 in a report interrupted at 0.6 s)
    "context": (
        "    try:\n        raise KeyboardInterrupt\n    except KeyboardInterrupt:\n"
        "        raise ImportError('initialization failed')\n",
        ("raise KeyboardInterrupt", "raise ValueError"),
        "ImportError: initialization failed",
    ),
    # matplotlib's pybind11 path conversion swallows the interrupt and raises its own error with no trace of it
    # ("ValueError: Invalid affine transformation matrix", the same in CI): only the CLI's SIGINT handler knows
    "swallowed": (
        "    try:\n        signal.raise_signal(signal.SIGINT)\n    except KeyboardInterrupt:\n        pass\n"
        "    raise ValueError('Invalid affine transformation matrix')\n",
        ("signal.raise_signal(signal.SIGINT)", "pass"),
        "ValueError: Invalid affine transformation matrix",
    ),
}


@pytest.mark.parametrize("how", sorted(_EXTENSION_ERRORS))
def test_a_ctrl_c_that_an_extension_turned_into_its_own_error_is_still_one_line_and_130(how: str) -> None:
    """main() treats an error raised while (or after) a Ctrl-C was handled as the interrupt: one line, exit 130; the
    same error with no interrupt still raises (exit 1, its traceback)."""
    work, (interrupt, instead), error = _EXTENSION_ERRORS[how]
    code = (
        "import signal, sys\n"
        "import footprint.cli as cli\n"
        f"def work(argv):\n{work}"
        "import footprint.cli.app as app\n"
        "app.main = work\n"
        "sys.exit(cli.main([]))\n"
    )
    p = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr.strip().splitlines() == ["footprint: interrupted; nothing half-written was left"], (
        p.returncode,
        p.stderr,
    )
    bare = code.replace(interrupt, instead).replace("except KeyboardInterrupt", "except Exception")
    p = subprocess.run([PY, "-c", bare], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and error in p.stderr, (p.returncode, p.stderr)


def test_an_interrupt_of_an_earlier_main_does_not_hide_a_later_error() -> None:
    """main() called again in the same process (a notebook, a test) forgets the Ctrl-C of the call before: its own
    error still raises."""
    code = (
        "import signal, sys\n"
        "import footprint.cli as cli\n"
        "import footprint.cli.app as app\n"
        "def stopped(argv):\n"
        "    try:\n        signal.raise_signal(signal.SIGINT)\n    except KeyboardInterrupt:\n        pass\n"
        "    raise ValueError('swallowed')\n"
        "def broken(argv):\n"
        "    raise ValueError('an error of its own')\n"
        "app.main = stopped\n"
        "assert cli.main([]) == 130\n"
        "app.main = broken\n"
        "cli.main([])\n"
    )
    p = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "ValueError: an error of its own" in p.stderr, (p.returncode, p.stderr)


# ---- importers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("column, value", [("gpu_energy", "5.0"), ("duration", "0.0001")])
def test_an_imported_log_with_an_impossible_average_power_is_refused_whole(
    cli: CliServer, tmp_path: Path, column: str, value: str
) -> None:
    """2 GPUs drawing kWh in seconds: more than 5 kW each on average (the table's power per GPU)."""
    rows = list(csv.DictReader((REPO / "examples" / "logs" / "emissions.csv").open()))
    rows[-1][column] = value
    log = tmp_path / "emissions.csv"
    with log.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "imported"
    _error(cli.run(["import", "codecarbon", str(log), "-o", str(out)]), "average power", "plausible range")
    assert not out.exists()
