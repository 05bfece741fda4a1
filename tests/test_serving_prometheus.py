"""The serving import against a real Prometheus (Debian's package) on 127.0.0.1, over a TSDB backfilled by promtool
from DCGM-exporter, node-exporter and engine series with a known truth (footprint.serving.synthetic.small_fleet):
two models sharing one GPU, a TGI model tensor parallel over two GPUs, a MIG A100 whose two instances serve two
models (the whole-GPU counter repeated on each), an idle GPU no model uses, a counter reset, an exporter gap,
all four engines (vLLM, TGI, SGLang, llama.cpp)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from footprint.cli.app import main
from footprint.fleet import promserver
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.serving import report, store, synthetic
from footprint.serving.assess import Site
from footprint.serving.importer import import_prometheus

pytestmark = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))

T0 = datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp()
HOURS = 3.0
WINDOW = 300.0
MAP = {"pods": {"qwen-tgi-0": "Qwen/Qwen2.5-14B-Instruct", "tinyllama-0": "TinyLlama-1.1B-Chat-GGUF"}, "gpus": None}
TIMED = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "Qwen/Qwen2.5-14B-Instruct",
    "TinyLlama-1.1B-Chat-GGUF",
)


@pytest.fixture(scope="module")
def fleet() -> synthetic.Fleet:
    return synthetic.small_fleet(T0, hours=HOURS)


@pytest.fixture(scope="module")
def blocks(fleet: synthetic.Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The backfilled TSDB, copied for every server (a running Prometheus locks its directory)."""
    d = tmp_path_factory.mktemp("serving-blocks")
    synthetic.write(fleet, d / "metrics.om")
    promserver.backfill(d / "metrics.om", d / "tsdb")
    return d / "tsdb"


@pytest.fixture(scope="module")
def prom(blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with promserver.serve(shutil.copytree(blocks, tmp_path_factory.mktemp("serving-prom") / "tsdb")) as url:
        yield url


@pytest.fixture(scope="module")
def record(prom: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serving-rec") / "rec"
    import_prometheus(out, PrometheusClient(PromConfig(prom)), T0, T0 + HOURS * 3600, WINDOW, 15.0, Site("FRA", 1.2), gpu_map=MAP)
    return out


@pytest.fixture(scope="module")
def rep(record: Path) -> dict:
    meta, a = store.read(record)
    return report.finite(report.build(meta, a, Site("FRA", 1.2)))


def test_per_model_energy_closes_on_the_metered_total(record: Path, fleet: synthetic.Fleet) -> None:
    _, a = store.read(record)
    models = a.models_w["active_j"].sum()
    residual = a.residual_w["idle_j"].sum() + a.residual_w["unused_j"].sum()
    assert models + residual == pytest.approx(a.metered_gpu_j, rel=1e-3)
    assert residual > 0.05 * a.metered_gpu_j  # the residual is there, not spread over the models
    # and what was metered is what the GPUs drew, less the exporter gap (4 windows of one GPU)
    truth = sum(fleet.gpu_energy_j(g) for g in fleet.gpus)
    assert a.metered_gpu_j == pytest.approx(truth, rel=0.03)
    assert a.metered_gpu_j < truth


def test_per_token_energy_matches_the_truth(record: Path, fleet: synthetic.Fleet) -> None:
    _, a = store.read(record)
    truth = fleet.truth(WINDOW)
    for model in TIMED:
        got = a.models_w[a.models_w["model"] == model]
        t = truth[model]
        assert got["decode_j"].sum() / got["tokens_out"].sum() == pytest.approx(
            t["decode_j"].sum() / t["tokens_out"].sum(), rel=0.01
        )
        assert got["prefill_j"].sum() / got["tokens_in"].sum() == pytest.approx(
            t["prefill_j"].sum() / t["tokens_in"].sum(), rel=0.01
        )
        assert got["active_j"].sum() == pytest.approx(t["active_j"].sum(), rel=0.01)


def test_mig_gpu_is_counted_once(record: Path, fleet: synthetic.Fleet) -> None:
    _, a = store.read(record)
    mig = next(g for g in fleet.gpus if g.mig)
    row = a.gpus[(a.gpus["host"] == mig.host) & (a.gpus["gpu"] == str(mig.index))]
    assert len(row) == 1 and set(row["models"].iloc[0].split(", ")) == {
        "TinyLlama-1.1B-Chat-GGUF",
        "meta-llama/Llama-3.1-8B-Instruct",
    }
    assert float(row["energy_j"].iloc[0]) == pytest.approx(fleet.gpu_energy_j(mig), rel=0.005)  # not twice


def test_idle_gpu_and_residual_are_shown(rep: dict, fleet: synthetic.Fleet) -> None:
    un = rep["unattributed"]
    idle_gpu = next(g for g in fleet.gpus if not fleet.pods_on(g))
    assert un["gpu_unused_j"] >= 0.99 * fleet.gpu_energy_j(idle_gpu)
    assert un["gpu_j"] == pytest.approx(un["gpu_idle_j"] + un["gpu_unused_j"])
    assert rep["closure"]["difference_j"] == pytest.approx(0.0, abs=1e-6 * rep["metered_gpu_j"])
    assert un["impacts"]["climate_change"] > 0


def test_counter_health_records_the_reset_and_the_gap(rep: dict, record: Path, fleet: synthetic.Fleet) -> None:
    h = {(r["where"], str(r["which"])): r for r in rep["health"] if r["counter"] == "gpu"}
    assert h[("node-b", "2")]["resets"] >= 1 and h[("node-b", "2")]["lost_j"] > 0
    assert h[("node-b", "3")]["gaps"] >= 4 and h[("node-b", "3")]["lost_j"] > 0
    _, a = store.read(record)
    hidden = sum(d["hidden_out"].sum() for d in fleet.truth(WINDOW).values())
    assert a.unmetered["tokens_out"].sum() == pytest.approx(hidden, rel=0.03)  # tokens without energy: counted apart
    mistral = next(m for m in rep["models"] if m["model"].startswith("mistralai"))
    assert any("without an energy reading" in f for f in mistral["flags"])
    # what the reset and the gap may hide widens the energy range of the models on those GPUs, and only theirs
    for m in rep["models"]:
        low, high = m["gpu_j_range"]
        hit = m["model"] in ("mistralai/Mistral-7B-Instruct-v0.3", "meta-llama/Llama-3.1-8B-Instruct")
        assert low == m["gpu_j"] and (high > low if hit else high == low)


def test_json_report_lists_every_model_with_its_categories(record: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["serving", "report", str(record), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    import footprint

    assert json.loads(json.dumps(footprint.serving_report(record))) == data  # the public API gives the same numbers
    assert len(data["models"]) == 5 and data["unattributed"]["gpu_j"] > 0
    for m in data["models"]:
        assert {"gpu_j", "tokens_in", "tokens_out", "requests"} <= set(m)
        assert len(m["categories"]) == 16 and all(v is not None and v >= 0 for v in m["categories"].values())
    tiny = next(m for m in data["models"] if m["engine"] == "llamacpp")
    assert tiny["requests"] is None and tiny["per_unit"]["+pue"]["per_request"] is None  # llama.cpp counts no requests
    sgl = next(m for m in data["models"] if m["engine"] == "sglang")
    assert sgl["j_per_output_token"] is None and sgl["j_per_token"] > 0  # no decode histogram: no in/out split


def test_boundaries_grow_and_per_unit_figures_are_consistent(rep: dict) -> None:
    for m in rep["models"]:
        cc = [m["impacts"][b]["climate_change"] for b in rep["boundaries"]]
        assert cc == sorted(cc) and cc[0] > 0
        if m["requests"]:
            per = m["per_unit"]["+pue"]
            assert per["per_1000_requests"]["climate_change"] == pytest.approx(1000 * per["per_request"]["climate_change"])
            assert per["per_request"]["climate_change"] * m["requests"] == pytest.approx(cc[-1])
        if m["prefill_j"] is not None:
            per = m["per_unit"]["+pue"]
            both = (
                per["per_million_input_tokens"]["climate_change"] * m["tokens_in"]
                + per["per_million_output_tokens"]["climate_change"] * m["tokens_out"]
            )
            assert both / 1e6 == pytest.approx(cc[-1])
        assert 0 < m["impacts"]["+pue"]["embodied_share_climate"] < 1
        assert m["impacts"]["+pue"]["water_l"] > 0


def test_html_and_csv(record: Path, tmp_path: Path) -> None:
    assert main(["serving", "report", str(record), "-o", str(tmp_path / "s.html")]) == 0
    page = (tmp_path / "s.html").read_text()
    assert page.count("<svg") >= 2 and "Energy per output token over time" in page and "Traffic" in page
    assert main(["serving", "report", str(record), "-o", str(tmp_path / "s.csv")]) == 0
    head, *rows = (tmp_path / "s.csv").read_text().splitlines()
    assert "climate_change" in head and "water_use" in head and len(rows) == 5 * 4 + 1


def test_model_life_against_its_training(record: Path, capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    args = ["serving", "life", "--serving", str(record), "--training", "scenarios/finetune-small.yaml"]
    assert main([*args, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--format", "json"]) == 0
    lf = json.loads(capsys.readouterr().out)
    train, day = lf["training"]["impacts"]["climate_change"], lf["serving_per_day"]["climate_change"]
    assert train > 0 and day > 0
    assert lf["overtakes_after_days"] * day == pytest.approx(train)
    share = lf["inference_share_of_life"]["climate_change"]
    assert share == pytest.approx(365 * day / (365 * day + train))
    assert lf["marginal_per_request"]["climate_change"] > 0
    assert (
        main(["serving", "report", str(record), "--training", "scenarios/finetune-small.yaml", "-o", str(tmp_path / "l.html")])
        == 0
    )
    assert "Cumulative training vs serving" in (tmp_path / "l.html").read_text()


def test_server_side_aggregation_only(prom: str) -> None:
    """Every query is a range query returning one number per series and window, never raw samples."""
    from footprint.serving.promsource import Queries, matrix

    q = Queries(WINDOW)
    client = PrometheusClient(PromConfig(prom))
    rows = matrix(client, q.gpu()["energy_mj"], T0, T0 + 3600, WINDOW)
    assert len(rows) == 8 and all(len(ws) <= 12 for _, ws, _ in rows)
    assert np.all(np.concatenate([v for _, _, v in rows]) >= 0)
    # --selector (a user's {...} or bare matchers) narrows every query the one builder writes, the fleet's too
    for sel in ('{Hostname="node-b"}', 'Hostname="node-b"'):
        some = matrix(client, Queries(WINDOW, sel).gpu()["energy_mj"], T0, T0 + 3600, WINDOW)
        assert 0 < len(some) < len(rows) and {lab["Hostname"] for lab, _, _ in some} == {"node-b"}


def test_a_selector_that_matches_nothing_is_one_line(prom: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Was an ArrowInvalid traceback (pandas merging the engines' empty frames)."""
    window = ["--start", str(T0), "--end", str(T0 + 3600), "--window", "5m"]
    args = ["serving", "import", "prometheus", "--url", prom, *window, "--selector", 'Hostname="nowhere"']
    for scrape in (["--scrape-interval", "15s"], []):  # given, or read from the data (there is none to read)
        assert main([*args, *scrape, "-o", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "no GPU energy reading in the window" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


# ---- a deployment's Prometheus: TLS and basic auth, reached with the options `fleet import` has -----------------


@pytest.fixture(scope="module")
def secured(blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    bcrypt = pytest.importorskip("bcrypt", reason="bcrypt hashes the test server's password: pip install -e '.[dev]'")
    from test_fleet_prometheus import _certificates  # one private CA maker for every TLS test

    d = tmp_path_factory.mktemp("serving-secured")
    _, cert, key = _certificates(d)
    (d / "password").write_text("s3cret-pass\n")
    (d / "map.yaml").write_text(json.dumps({"pods": MAP["pods"]}))
    users = {"serving": bcrypt.hashpw(b"s3cret-pass", bcrypt.gensalt(rounds=4)).decode()}
    with promserver.serve(shutil.copytree(blocks, d / "tsdb"), tls=(str(cert), str(key)), users=users) as url:
        yield url, d


def test_cli_import_over_tls_and_basic_auth_matches_plain_http(
    secured: tuple[str, Path], record: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    url, d = secured
    window = ["--start", str(T0), "--end", str(T0 + HOURS * 3600), "--window", "5m", "--scrape-interval", "15s"]
    auth = ["--basic-auth-user", "serving", "--basic-auth-password-file", str(d / "password")]
    base = ["serving", "import", "prometheus", "--url", url, *window, *auth, "--map", str(d / "map.yaml"), "--grid", "FRA"]
    conn = ["--ca-file", str(d / "ca.pem"), "--header", "X-Scope-OrgID: t1", "--timeout", "30", "--retries", "0"]
    assert main([*base, *conn, "--max-response-mb", "4", "-o", str(tmp_path / "tls")]) == 0
    (_, over_tls), (_, plain) = store.read(tmp_path / "tls"), store.read(record)
    assert over_tls.metered_gpu_j == pytest.approx(plain.metered_gpu_j, rel=1e-12)
    cols = ["active_j", "tokens_out"]
    assert np.allclose(over_tls.models_w[cols].to_numpy(float), plain.models_w[cols].to_numpy(float), equal_nan=True)
    capsys.readouterr()
    # each connection option reaches the client: without the CA the private certificate is refused, with
    # --insecure-skip-verify it is not checked (and said), a client key that is not the certificate's is refused
    assert main([*base, "--retries", "0", "-o", str(tmp_path / "no-ca")]) == 2
    err = capsys.readouterr().err
    assert "certificate verify failed" in err and "--ca-file" in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--insecure-skip-verify", "-o", str(tmp_path / "insecure")]) == 0
    assert "is not verified" in capsys.readouterr().err
    mtls = ["--client-cert", str(d / "ca.pem"), "--client-key", str(d / "server.key")]
    assert main([*base, *conn, *mtls, "-o", str(tmp_path / "mtls")]) == 2
    err = capsys.readouterr().err
    assert "TLS error" in err and "--client-cert" in err and "Traceback" not in err
    assert not (tmp_path / "no-ca").exists() and not (tmp_path / "mtls").exists()
