"""Serving imports from recorded /metrics files (no Prometheus needed): the examples against their truth, and bad input
(unknown engines, a missing model label, negative or decreasing counters, tokens without energy, malformed files)
giving one clear line or a flagged record, never a traceback, NaN or a silently wrong per-token figure."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from footprint.cli.app import main
from footprint.serving import store, synthetic

T0 = 1740988800.0  # 2025-03-03T08:00:00Z
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "serving"


def _series(name: str, labels: dict[str, str], values: list[float], step: float = 60.0, offset: float = 0.0) -> str:
    lab = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    return "".join(f"{name}{lab} {v:g} {int((T0 + offset + i * step) * 1000)}\n" for i, v in enumerate(values))


def _dcgm(pod: str | None = "llama-0", n: int = 31) -> str:
    lab = {"gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "n1"}
    if pod:
        lab |= {"namespace": "s", "pod": pod}
    return _series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", lab, [1e9 + i * 60 * 400e3 for i in range(n)])  # 400 W


def _vllm(values: Callable[[int], float] = lambda i: 1000.0 * i, model: str | None = "llama", n: int = 31) -> str:
    lab = {"namespace": "s", "pod": "llama-0", "instance": "llama-0:8000"} | ({"model_name": model} if model else {})
    out = _series("vllm:generation_tokens_total", lab, [values(i) for i in range(n)], offset=1)
    out += _series("vllm:prompt_tokens_total", lab, [3.0 * values(i) for i in range(n)], offset=1)
    out += _series("vllm:request_success_total", lab, [values(i) / 100 for i in range(n)], offset=1)
    out += _series("vllm:request_prefill_time_seconds_sum", lab, [6.0 * i for i in range(n)], offset=1)
    out += _series("vllm:request_decode_time_seconds_sum", lab, [48.0 * i for i in range(n)], offset=1)
    return out


def _run(tmp_path: Path, text: str, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str, Path]:
    f = tmp_path / "scrape.prom"
    f.write_text(text)
    out = tmp_path / "rec"
    rc = main(["serving", "import", "metrics", str(f), "-o", str(out), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err, out


def _json(out: Path, capsys: pytest.CaptureFixture) -> dict:
    assert main(["serving", "report", str(out), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


def test_a_clean_scrape_gives_exact_figures(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, _, out = _run(tmp_path, _dcgm() + _vllm(), capsys)
    assert rc == 0
    m = _json(out, capsys)["models"][0]
    # 400 W all the time, busy 54 s of every 60 (no idle window: the idle power is its lowest window, an upper bound,
    # so the GPU is 90 % active); prefill : decode = 6 : 48 of it
    assert m["tokens_out"] == pytest.approx(29 * 1000)  # the increases after the first scrape, within whole windows
    assert m["j_per_output_token"] == pytest.approx(m["decode_j"] / m["tokens_out"])
    assert m["prefill_j"] / m["gpu_j"] == pytest.approx(6 / 54)


def test_unknown_engine_is_one_line_listing_what_was_found(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = _dcgm() + _series("myengine_tokens_total", {"pod": "x"}, [1.0, 2.0, 3.0])
    rc, err, out = _run(tmp_path, text, capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "no serving engine" in err and "myengine_tokens_total" in err and "vllm:generation_tokens_total" in err
    assert not out.exists()


def test_missing_model_label_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, _, out = _run(tmp_path, _dcgm() + _vllm(model=None), capsys)
    assert rc == 0
    m = _json(out, capsys)["models"][0]
    assert m["model"] == "llama-0" and any("no model_name label" in f for f in m["flags"])


def test_negative_counter_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, err, out = _run(tmp_path, _dcgm() + _vllm(lambda i: 1000.0 * i - 5000.0), capsys)
    assert rc == 2 and "negative or non-finite counter values" in err and "vllm:generation_tokens_total" in err
    assert not out.exists()


def test_decreasing_counter_is_a_reset_in_the_health_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    restart = lambda i: 1000.0 * i if i < 17 else 1000.0 * (i - 17)  # noqa: E731  (the server restarted)
    rc, _, out = _run(tmp_path, _dcgm() + _vllm(restart), capsys)
    assert rc == 0
    rep = _json(out, capsys)
    assert rep["models"][0]["tokens_out"] == pytest.approx(28 * 1000)  # the restart's interval counts from 0; none negative
    assert any(h["counter"] == "engine" and h["resets"] >= 1 for h in rep["health"])


def test_tokens_without_energy_never_give_a_per_token_figure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, _, out = _run(tmp_path, _dcgm(n=13) + _vllm(), capsys)  # the exporter stopped after 12 minutes
    assert rc == 0
    rep = _json(out, capsys)
    m = rep["models"][0]
    assert m["tokens_out_unmetered"] > 0 and m["tokens_out"] + m["tokens_out_unmetered"] == 29_000
    assert any("without an energy reading" in f for f in m["flags"])


def test_no_engine_on_any_gpu_is_one_line_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Was a record 100 % unattributed, exit 0, nothing said."""
    rc, err, out = _run(tmp_path, _dcgm(pod=None) + _vllm(), capsys)  # the exporter has no pod mapping: nothing joins
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "carry no pod label" in err and "--map" in err
    rc, err, out = _run(tmp_path, _dcgm(pod="nvidia-dcgm-exporter-x1") + _vllm(), capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and not out.exists()
    assert "nvidia-dcgm-exporter-x1" in err and "llama-0" in err and "honor_labels" in err and "--pod-label" in err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('vllm:generation_tokens_total{pod="a"} 12\n', "without a timestamp"),
        ("vllm:generation_tokens_total{pod=a} 12 1740988800000\n", "malformed labels"),
        ("vllm:generation_tokens_total 12abc 1740988800000\n", "expected a number"),
        ("this is not a metric line at all\n", "not a metric line"),
        ("", "no samples"),
    ],
)
def test_malformed_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, text: str, needle: str) -> None:
    rc, err, _ = _run(tmp_path, text, capsys)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        ("gpus: [{host: n1, gpus: [-1], model: m}]\n", "gpus[0].gpus"),
        ("pods: [a, b]\n", "pods"),
        ("other: 1\n", ""),
        ("params: {llama: -8e9}\n", "params.llama"),
        ("params: {llama: 8 billion}\n", "params.llama"),
    ],
)
def test_bad_map_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture, yaml: str, key: str) -> None:
    (tmp_path / "map.yaml").write_text(yaml)
    rc, err, _ = _run(tmp_path, _dcgm() + _vllm(), capsys, "--map", str(tmp_path / "map.yaml"))
    assert rc == 2 and "map.yaml" in err and key in err


def test_a_user_map_joins_gpus_without_pod_labels(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "map.yaml").write_text("gpus: [{host: n1, gpus: [0], model: llama}]\n")
    rc, _, out = _run(tmp_path, _dcgm(pod=None) + _vllm(), capsys, "--map", str(tmp_path / "map.yaml"))
    assert rc == 0
    m = _json(out, capsys)["models"][0]
    assert m["gpu_j"] > 0 and m["j_per_output_token"] > 0 and not m["flags"]


def test_the_recorded_examples_match_their_truth(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """examples/serving/*.prom (one file per exporter, written by `python -m footprint.serving.synthetic`)."""
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    assert len(files) == 6
    out = tmp_path / "ex"
    assert main(["serving", "import", "metrics", *files, "--map", str(EXAMPLES / "map.yaml"), "-o", str(out)]) == 0
    capsys.readouterr()
    f = synthetic.small_fleet(datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp(), hours=2.5, scrape_s=60.0)
    truth = f.truth(300.0)
    _, a = store.read(out)
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-14B-Instruct"):
        got = a.models_w[a.models_w["model"] == model]
        t = truth[model]
        assert got["decode_j"].sum() / got["tokens_out"].sum() == pytest.approx(
            t["decode_j"].sum() / t["tokens_out"].sum(), rel=0.01
        )


# ---- fuzzing: damaged recorded files through the real CLI (a fork server, a deadline, an address-space cap) ----

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(max_examples=25, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(data=st.data())
def test_fuzz_damaged_recordings(cli: object, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    from _fuzz import verdict

    good = (_dcgm() + _vllm()).encode()
    how = data.draw(st.sampled_from(["flip", "truncate", "insert", "random"]))
    b = bytearray(good)
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 30))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.sampled_from(b'-.e9 {}",=NaInf\n\xe9'))
    elif how == "truncate":
        b = b[: data.draw(st.integers(0, len(b)))]
    elif how == "insert":
        i = data.draw(st.integers(0, len(b)))
        b[i:i] = data.draw(st.sampled_from([b"\n-1e400 1\n", b"NaN", b"{{{{", b"\x00", b"1e308", b" +Inf 1740988800000\n"]))
    else:
        b = bytearray(data.draw(st.binary(max_size=2000)))
    tmp = tmp_path_factory.mktemp("fz")
    (tmp / "s.prom").write_bytes(bytes(b))
    o = cli.run(["serving", "import", "metrics", tmp / "s.prom", "-o", tmp / "rec"])  # type: ignore[attr-defined]
    assert verdict(o) is None, (verdict(o), o.err[-500:])
    if o.code == 0:
        r = cli.run(["serving", "report", tmp / "rec", "--format", "json"])  # type: ignore[attr-defined]
        assert verdict(r) is None, (verdict(r), r.err[-500:])
