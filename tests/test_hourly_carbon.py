"""site.carbon_intensity_hourly: a run's energy matched hour by hour to an hourly intensity file (climate change only).

The runs are real imports (`footprint import nvidia-smi`, the samples written as the tracker writes them) and the
assessments go through the real CLI; the expected numbers are computed here from the log itself, independently of
footprint's integration."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from footprint.errors import FootprintError
from footprint.lca import hourly

T0 = datetime(2025, 3, 3, 0, 0, tzinfo=UTC)
WATTS = (300.0, 600.0, 300.0)  # one per hour
G_PER_KWH = (100.0, 500.0, 50.0)
PERIOD_S = 10


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "footprint.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _log_power() -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(0, 3 * 3600 + 1, PERIOD_S, dtype=float)
    return t, np.asarray([WATTS[min(int(s // 3600), 2)] for s in t])


def _hours(rows: list[tuple[str, float]], em: bool = False) -> str:
    if em:  # Electricity Maps' hourly export, as downloaded (the direct column beside the life-cycle one)
        head = "Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
        head += "Carbon intensity gCO₂eq/kWh (Life cycle),Data source\n"
        return head + "".join(f"{t},France,France,FR,{v * 0.8:.2f},{v:.2f},x\n" for t, v in rows)
    return "datetime_utc,g_per_kwh\n" + "".join(f"{t},{v}\n" for t, v in rows)


@pytest.fixture(scope="module")
def run3h(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-hour nvidia-smi log at 300, 600 and 300 W, imported as a run."""
    d = tmp_path_factory.mktemp("hourly")
    t, w = _log_power()
    lines = ["timestamp, name, index, power.draw [W]"]
    stamp = lambda s: (T0 + timedelta(seconds=float(s))).strftime("%Y/%m/%d %H:%M:%S.000")  # noqa: E731
    lines += [f"{stamp(s)}, NVIDIA A100-SXM4-40GB, 0, {p:.2f} W" for s, p in zip(t, w, strict=True)]
    (d / "log.csv").write_text("\n".join(lines) + "\n")
    proc = _cli("import", "nvidia-smi", "log.csv", "-o", "run", "--grid", "FRA", "--utc-offset", "+00:00", cwd=d)
    assert proc.returncode == 0, proc.stderr
    rows = [((T0 + timedelta(hours=h)).strftime("%Y-%m-%d %H:%M:%S"), v) for h, v in enumerate((*G_PER_KWH, 80.0))]
    (d / "ci.csv").write_text(_hours(rows, em=True))
    (d / "plain.csv").write_text(_hours(rows))
    (d / "short.csv").write_text(_hours(rows[:2]))  # misses the run's third hour
    return d


def _assess(d: Path, *sets: str) -> dict:
    args = [a for s in sets for a in ("--set", s)]
    proc = _cli("assess", "run", *args, "--set", "site.pue=1.0", "--samples", "0", "--format", "json", cwd=d)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _use_cc(a: dict) -> float:
    return a["impacts"]["climate_change"]["by_stage"]["use"]


def test_three_hours_give_the_hour_by_hour_sum_not_the_annual_mean(run3h: Path) -> None:
    t, w = _log_power()
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (w[1:] + w[:-1]) * np.diff(t))])  # the log's own trapezoid
    kwh = np.diff(np.interp([0, 3600, 7200, 10800], t, cum)) / 3.6e6
    expected = float(np.dot(kwh, G_PER_KWH)) / 1000  # kg: hour 1 x 100 + hour 2 x 500 + hour 3 x 50
    a = _assess(run3h, "site.carbon_intensity_hourly=ci.csv")
    assert _use_cc(a) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx((0.3 * 100 + 0.6 * 500 + 0.3 * 50) / 1000, rel=5e-3)  # the step between readings
    annual = _assess(run3h)
    mean = annual["site"]["carbon_intensity_kg_per_kwh"] or None
    assert _use_cc(annual) != pytest.approx(expected, rel=0.05)  # FRA's annual mix gives another number
    assert mean is None  # the annual run sets no override
    hourly_out = a["site"]["carbon_intensity_hourly"]
    assert hourly_out["method"] == "hourly" and hourly_out["g_per_kwh"] == list(G_PER_KWH)
    assert hourly_out["hours_utc"] == ["2025-03-03T00:00Z", "2025-03-03T01:00Z", "2025-03-03T02:00Z"]
    assert "hourly" in a["method"]["use"] and "other 15 categories use the zone's annual mix" in a["method"]["use"]


def test_other_categories_keep_the_annual_mix(run3h: Path) -> None:
    a, annual = _assess(run3h, "site.carbon_intensity_hourly=plain.csv"), _assess(run3h)
    for k in ("acidification", "land_use", "resource_use_fossils"):
        assert a["impacts"][k]["by_stage"]["use"] == pytest.approx(annual["impacts"][k]["by_stage"]["use"], rel=1e-9), k


def test_the_plain_file_and_electricity_maps_export_agree(run3h: Path) -> None:
    assert _use_cc(_assess(run3h, "site.carbon_intensity_hourly=plain.csv")) == pytest.approx(
        _use_cc(_assess(run3h, "site.carbon_intensity_hourly=ci.csv")), rel=1e-9
    )


def test_a_file_missing_an_hour_of_the_run_is_one_line_exit_2(run3h: Path) -> None:
    proc = _cli("assess", "run", "--set", "site.carbon_intensity_hourly=short.csv", cwd=run3h)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "does not cover the run: no intensity for 2025-03-03T02:00Z" in lines[0] and "short.csv" in lines[0]


def test_a_log_in_local_time_of_unknown_offset_is_refused_not_shifted(run3h: Path) -> None:
    """nvidia-smi logs local time without its offset: imported without --utc-offset, its hours would be matched off
    by the site's UTC offset, so the hourly match is refused in one line (the annual assessment still runs)."""
    proc = _cli("import", "nvidia-smi", "log.csv", "-o", "local", "--grid", "FRA", cwd=run3h)
    assert proc.returncode == 0, proc.stderr
    proc = _cli("assess", "local", "--set", "site.carbon_intensity_hourly=ci.csv", cwd=run3h)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr
    assert "imported without --utc-offset" in lines[0] and "--utc-offset +HH:MM" in lines[0]
    assert _cli("assess", "local", "--samples", "0", cwd=run3h).returncode == 0
    assert json.loads((run3h / "run" / "run.json").read_text())["time_zone"] == "UTC"


def test_a_scenario_of_totals_is_refused_it_has_no_hours(run3h: Path, tmp_path: Path) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(
        f"hardware: {{gpu: A100-SXM4-40GB, count: 8}}\ntraining: {{gpu_hours: 100, power_per_gpu: 300 W}}\n"
        f"site: {{grid: FRA, carbon_intensity_hourly: {run3h / 'ci.csv'}}}\n"
    )
    proc = _cli("assess", str(sc), cwd=tmp_path)
    assert proc.returncode == 2 and "no hours to match" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,100\n2025-03-03T00:00Z,120\n", "appears twice"),
        ("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,100\n2025-03-03T03:00Z,120\n", "gap: 2 hour(s) missing after"),
        ("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,-5\n", "is not a grid carbon intensity"),
        ("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,nan\n", "is not a grid carbon intensity"),
        ("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,\n", "an empty hour is a gap"),
        ("datetime_utc,g_per_kwh\n2025-03-03T00:30Z,100\n", "not on the hour"),
        ("datetime_utc,g_per_kwh\nyesterday,100\n", "expected a UTC date"),
        ("time,value\n2025-03-03T00:00Z,100\n", "expected Electricity Maps' hourly export"),
        ("", "no hourly rows"),
    ],
)
def test_bad_files_are_refused_whole(tmp_path: Path, body: str, why: str) -> None:
    p = tmp_path / "ci.csv"
    p.write_text(body)
    with pytest.raises(FootprintError, match="site.carbon_intensity_hourly") as err:
        hourly.read_intensity(p)
    assert why in str(err.value)


def test_the_cli_refuses_a_bad_file_in_one_line(run3h: Path, tmp_path: Path) -> None:
    (tmp_path / "dup.csv").write_text("datetime_utc,g_per_kwh\n2025-03-03T00:00Z,100\n2025-03-03T00:00Z,100\n")
    proc = _cli("assess", str(run3h / "run"), "--set", f"site.carbon_intensity_hourly={tmp_path / 'dup.csv'}", cwd=tmp_path)
    assert proc.returncode == 2 and "appears twice" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_earlier_electricity_maps_exports_are_read_too(tmp_path: Path) -> None:
    """Exports before 2024 name the life-cycle column "Carbon Intensity gCO₂eq/kWh (LCA)"; the direct one is never read."""
    p = tmp_path / "old.csv"
    p.write_text(
        "\ufeffDatetime (UTC),Country,Carbon Intensity gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA)\r\n"
        "2022-06-01 00:00:00,France,40.5,61.25\r\n2022-06-01 01:00:00,France,38.0,59.0\r\n"
    )
    got = hourly.read_intensity(p)
    assert got.g_per_kwh == (61.25, 59.0) and got.column == "Carbon Intensity gCO₂eq/kWh (LCA)"


def test_the_output_traces_the_file_its_zone_source_estimated_hours_and_hash(run3h: Path) -> None:
    """The hourly file carries no licence of its own: the output records what it says of itself (zone, data source,
    hours the provider estimated) and its SHA-256, so the number can be traced to the exact download."""
    rows = [((T0 + timedelta(hours=h)).strftime("%Y-%m-%d %H:%M:%S"), v) for h, v in enumerate((*G_PER_KWH, 80.0))]
    head = "Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
    head += "Carbon intensity gCO₂eq/kWh (Life cycle),Data source,Data estimated,Data estimation method\n"
    flags = ("false", "true", "false", "true")  # the fourth hour is outside the run: not counted
    body = "".join(
        f"{t},France,France,FR,{v * 0.8:.2f},{v:.2f},rte-france.com,{f},{'TIME_SLICER' if f == 'true' else ''}\n"
        for (t, v), f in zip(rows, flags, strict=True)
    )
    (run3h / "traced.csv").write_text(head + body, encoding="utf-8")
    out = _assess(run3h, "site.carbon_intensity_hourly=traced.csv")
    h = out["site"]["carbon_intensity_hourly"]
    assert h["source"] == "Electricity Maps, zone FR (data source: rte-france.com)"
    assert h["estimated_hours"] == 1 and h["sha256"] == hashlib.sha256((head + body).encode()).hexdigest()
    assert "zone FR" in out["method"]["use"] and "1 of 3 matched hours estimated by the provider" in out["method"]["use"]
    plain = _assess(run3h, "site.carbon_intensity_hourly=plain.csv")["site"]["carbon_intensity_hourly"]
    assert plain["source"] is None and plain["estimated_hours"] is None and len(plain["sha256"]) == 64


def test_energy_is_split_at_hour_boundaries() -> None:
    t0 = T0.timestamp()
    t = np.asarray([t0 + 1800, t0 + 5400])  # 3,600 J spread evenly over half past 0 to half past 1
    assert hourly.energy_by_hour(t, np.asarray([0.0, 3600.0])) == {t0: 1800.0, t0 + 3600: 1800.0}


def test_the_runs_page_draws_the_hourly_profile_against_the_intensity(run3h: Path) -> None:
    """The Runs page's re-projection takes the hourly file and draws energy per hour beside the intensity."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from footprint.tracking.to_workload import workload_from_run

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py"), default_timeout=60)
    at.query_params["run"] = str(run3h / "run")
    at.run()
    at.text_input(key="run_hourly").set_value(str(run3h / "ci.csv")).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    import pyarrow as pa

    chart = next(
        c for c in at.get("vega_lite_chart") if json.loads(c.proto.spec).get("resolve") == {"scale": {"y": "independent"}}
    )
    rows = pa.ipc.open_stream(chart.proto.data.data).read_all().to_pylist()  # the chart data, as Streamlit ships it
    assert [r["g CO2 eq/kWh"] for r in rows] == list(G_PER_KWH)
    expected = workload_from_run(run3h / "run", [f"site.carbon_intensity_hourly={run3h / 'ci.csv'}"]).hourly
    assert [r["IT energy (kWh)"] for r in rows] == pytest.approx(list(expected.kwh))
    assert sum(r["IT energy (kWh)"] for r in rows) == pytest.approx(1.2, rel=1e-3)
    res = at.session_state["run_result"]
    assert res["sets"] == [f"site.carbon_intensity_hourly={run3h / 'ci.csv'}"]
    assert any("Hourly profile: hourly: climate change" in c.value for c in at.caption)


def test_a_tracked_run_with_an_hourly_site_is_matched_to_its_hours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """track(site={"carbon_intensity_hourly": FILE}): the record keeps the key and the assessment matches its samples."""
    import time

    import footprint

    monkeypatch.setenv("FOOTPRINT_FAKE_NVML", "1xA100-SXM4-40GB")
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows = [((now + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), 200.0 + 10 * h) for h in range(-2, 3)]
    (tmp_path / "ci.csv").write_text(_hours(rows))
    site = {"grid": "FRA", "pue": 1.0, "carbon_intensity_hourly": str(tmp_path / "ci.csv")}
    with footprint.track(name="h", output_dir=tmp_path, site=site, host=False, period_s=0.05):
        time.sleep(0.3)
    a = footprint.assess(tmp_path / "h", samples=0)
    m = a.workload.hourly
    assert m is not None and 1 <= len(m.hours) <= 2  # the run's hour (two if it crossed one)
    assert set(m.g_per_kwh) <= {200.0, 210.0} and a.workload.carbon_intensity == pytest.approx(m.weighted_g_per_kwh / 1000)


def _serving_record(tmp_path: Path) -> Path:
    """Two hours of a vLLM server on one H100 at 400 W (DCGM counter), 08:00-10:00 UTC, imported as a record."""
    t0, n = T0.replace(hour=8).timestamp(), 121

    def series(name: str, labels: dict[str, str], values: list[float], offset: float = 0.0) -> str:
        lab = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        return "".join(f"{name}{lab} {v:g} {int((t0 + offset + i * 60) * 1000)}\n" for i, v in enumerate(values))

    gpu = {
        "gpu": "0",
        "UUID": "GPU-1",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "n1",
        "namespace": "s",
        "pod": "llama-0",
    }
    text = series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu, [1e9 + i * 60 * 400e3 for i in range(n)])
    eng = {"namespace": "s", "pod": "llama-0", "instance": "llama-0:8000", "model_name": "llama"}
    text += series("vllm:generation_tokens_total", eng, [1000.0 * i for i in range(n)], 1)
    text += series("vllm:prompt_tokens_total", eng, [3000.0 * i for i in range(n)], 1)
    text += series("vllm:request_success_total", eng, [10.0 * i for i in range(n)], 1)
    text += series("vllm:request_prefill_time_seconds_sum", eng, [6.0 * i for i in range(n)], 1)
    text += series("vllm:request_decode_time_seconds_sum", eng, [48.0 * i for i in range(n)], 1)
    (tmp_path / "scrape.prom").write_text(text)
    proc = _cli("serving", "import", "metrics", "scrape.prom", "-o", "rec", "--grid", "FRA", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "rec"


def _serving(tmp_path: Path, rows: list[tuple[str, float]]) -> dict:
    (tmp_path / "ci.csv").write_text(_hours(rows))
    proc = _cli("serving", "report", "rec", "--carbon-intensity-hourly", "ci.csv", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_serving_windows_are_matched_hour_by_hour_per_model(tmp_path: Path) -> None:
    _serving_record(tmp_path)
    flat = _serving(tmp_path, [("2025-03-03T08:00Z", 250.0), ("2025-03-03T09:00Z", 250.0)])["models"][0]
    r = _serving(tmp_path, [("2025-03-03T08:00Z", 100.0), ("2025-03-03T09:00Z", 400.0)])
    m = r["models"][0]
    h = m["carbon_intensity_hourly"]
    assert h["hours_utc"] == ["2025-03-03T08:00Z", "2025-03-03T09:00Z"] and h["g_per_kwh"] == [100.0, 400.0]
    share = h["it_energy_kwh"][0] / sum(h["it_energy_kwh"])
    assert 0.4 < share < 0.6  # a constant 400 W over two hours
    weighted = 100.0 * share + 400.0 * (1 - share)
    assert h["energy_weighted_g_per_kwh"] == pytest.approx(weighted)
    kwh = m["gpu_j"] / 3.6e6  # the accelerators boundary: the model's active energy, no PUE
    diff = m["impacts"]["accelerators"]["climate_change"] - flat["impacts"]["accelerators"]["climate_change"]
    assert diff == pytest.approx(kwh * (weighted - 250.0) / 1000, rel=1e-6)
    assert any(n.startswith("hourly: climate change of electricity matched hour by hour") for n in r["notes"])


def test_serving_hours_missing_from_the_file_are_one_line(tmp_path: Path) -> None:
    _serving_record(tmp_path)
    (tmp_path / "ci.csv").write_text(_hours([("2025-03-03T08:00Z", 100.0)]))
    proc = _cli("serving", "report", "rec", "--carbon-intensity-hourly", "ci.csv", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "does not cover the run: no intensity for 2025-03-03T09:00Z" in proc.stderr
