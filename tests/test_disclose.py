"""`footprint disclose`: the EU AI Act fields, the Hugging Face model card and the SCI, from the BLOOM scenario, a run
tracked on the fake NVML, a fleet job imported from a sacct file and a served model imported from the recorded
/metrics examples; checked against the assessments and serving reports they come from."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _paths import REPO

import footprint
from footprint.cli.app import main
from footprint.disclosures.facts import sig

EXAMPLES = REPO / "examples" / "serving"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FOOTPRINT_FAKE_NVML", "2xA100-SXM4-40GB")
        with footprint.track(name="ft", output_dir=out, host=False, model={"params": 1e6}) as t:
            for _ in range(12):
                time.sleep(0.03)
                t.step(tokens=1000)
    yield out / "ft"


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serving") / "rec"
    files = sorted(str(p) for p in EXAMPLES.glob("*.prom"))
    assert main(["serving", "import", "metrics", *files, "--map", str(EXAMPLES / "map.yaml"), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet") / "fleet"
    args = ["fleet", "import", "slurm", str(REPO / "tests" / "data" / "sacct_parsable2.txt"), "--tz", "UTC"]
    args += ["--end", "2025-03-03T12:00:00Z", "-o", str(out), "--quiet", "--slurm-energy-scope", "gpu"]
    args += ["--gpu-type", "a100=A100-SXM4-80GB", "--gpu-type", "v100=V100-SXM2-32GB", "--grid", "FRA"]
    assert main(args) == 0
    return out


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `footprint ARGS` run in this process (argparse's exit 2 caught)."""
    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def _json(capsys: pytest.CaptureFixture, *args: str) -> dict:
    rc, out, err = _cli(capsys, "disclose", *args, "--format", "json")
    assert rc == 0, err
    return json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


# ---- EU AI Act: the assessment's figures, to the stated significant figures ----


def test_eu_ai_act_of_bloom_equals_its_assessment(capsys: pytest.CaptureFixture) -> None:
    a = footprint.assess("bloom-176b", samples=0)
    w = a.workload
    t = _json(capsys, "bloom-176b", "--as", "eu-ai-act")["training"]
    assert t["compute_flop"] == sig(w.flops, 2) and t["provenance"]["compute_flop"]["significant_figures"] == 2
    assert t["compute_flop"] == pytest.approx(4.0e23)  # 6ND + attention over BLOOM's 176e9 x 366e9, two figures
    assert t["energy_mwh"] == sig(w.it_energy_kwh / 1000, 3) == 433.0  # [L] Table 1: 433,196 kWh
    assert t["facility_energy_mwh"] == sig(a.facility_energy_kwh / 1000, 3)
    assert t["gpu_hours"] == sig(w.gpu_hours, 3) and t["time_days"] == sig(w.gpu_hours / 384 / 24, 3)
    assert t["provenance"]["gpu_hours"]["origin"] == "stated" and t["provenance"]["energy_mwh"]["origin"] == "modelled"
    assert t["energy_method"].startswith("modelled: GPU-hours x 400 W") and t["energy_boundary"] == "IT"
    assert "A100" in t["hardware"] and t["not_available"] == {}


def test_compute_is_6nd_where_the_assessment_derives_no_mfu(capsys: pytest.CaptureFixture) -> None:
    # GPT-3 on V100s: lca_data has no dense bf16 peak for a V100, so the assessment derives no MFU and holds no
    # FLOPs; the compute does not depend on the GPU: 6ND + attention from the scenario's model section
    from footprint.flops import transformer_flops

    assert footprint.assess("gpt-3-v100", samples=0).workload.flops is None
    f = transformer_flops(175e9, 300e9, layers=96, hidden=12288, seq_len=2048).flops
    t = _json(capsys, "gpt-3-v100", "--as", "eu-ai-act")["training"]
    assert t["compute_flop"] == sig(f, 2) == 3.2e23 and t["provenance"]["compute_flop"]["origin"] == "modelled"
    assert "6ND" in t["compute_method"]
    assert _json(capsys, "gpt-3-v100", "--as", "sci", "--per", "pflop")["R"] == pytest.approx(f / 1e15, rel=1e-3)
    # a scenario with parameters but no tokens: not available, and the reason says which is missing
    t = _json(capsys, "finetune-small", "--as", "eu-ai-act")["training"]
    assert t["compute_flop"] is None and "model.parameters without model.tokens" in t["not_available"]["compute_flop"]
    d = _json(capsys, "finetune-small", "--as", "sci", "--per", "pflop")
    assert d["R"] is None and "model.tokens" in d["not_available"]["R"]


def test_eu_ai_act_training_time_stated_as_a_duration(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    scenario = tmp_path / "duration.yaml"
    scenario.write_text(TINY.replace("gpu_hours: 0.001", "duration: 10 days").replace("count: 1", "count: 8"))
    t = _json(capsys, str(scenario), "--as", "eu-ai-act")["training"]
    assert t["time_days"] == 10 and t["gpu_hours"] == 1920
    assert t["provenance"]["time_days"]["origin"] == "stated" and "training.duration" in t["provenance"]["time_days"]["method"]


def test_eu_ai_act_of_a_tracked_run(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    a = footprint.assess(run_dir, samples=0)
    rec = json.loads((run_dir / "run.json").read_text())
    d = _json(capsys, str(run_dir), "--as", "eu-ai-act")
    t = d["training"]
    assert t["compute_flop"] == sig(rec["flops"], 2) == sig(12000 * 6e6, 2)
    assert t["energy_mwh"] == sig(a.workload.it_energy_kwh / 1000, 3)
    assert t["time_days"] == sig(rec["duration_s"] / 86400, 3) and t["provenance"]["time_days"]["origin"] == "measured"
    # the fake NVML reports measured: false, so its energy is never called measured
    assert t["provenance"]["energy_mwh"]["origin"] == "modelled" and "simulated" in t["energy_method"]
    inf = d["inference"]
    assert inf["flop_per_token"] is None and "no parameter count" in inf["not_available"]["flop_per_token"]
    assert "serving" in inf["not_available"]["energy_per_request_wh"]
    assert d["full_assessment"] == f"footprint report {run_dir} -o report.html"


def test_eu_ai_act_of_a_served_model_has_measured_inference_and_no_training(serving: Path, capsys: pytest.CaptureFixture) -> None:
    d = _json(capsys, str(serving), "--model", LLAMA, "--as", "eu-ai-act")
    m = next(x for x in footprint.serving_report(serving)["models"] if x["model"] == LLAMA)
    inf = d["inference"]
    assert inf["energy_per_request_wh"] == sig(m["gpu_j"] / m["requests"] / 3600, 3)
    assert inf["provenance"]["energy_per_request_wh"]["origin"] == "measured"
    assert inf["energy_per_output_token_j"] == sig(m["j_per_output_token"], 3)
    assert inf["energy_per_request_facility_wh"] > inf["energy_per_request_wh"]
    assert all(v is None for k, v in d["training"].items() if k not in ("provenance", "not_available"))
    assert "serving record holds no training" in d["training"]["not_available"]["compute_flop"]


def test_eu_ai_act_inference_flop_per_token_from_a_stated_parameter_count(
    serving: Path, run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    # a serving record and a run record hold no parameter count: --parameters states it, 2N per token
    inf = _json(capsys, str(serving), "--model", LLAMA, "--as", "eu-ai-act", "--parameters", "8.03e9")["inference"]
    assert inf["flop_per_token"] == sig(2 * 8.03e9, 2) and "--parameters" in inf["provenance"]["flop_per_token"]["method"]
    moe = ("--parameters", "46.7e9", "--active-parameters", "12.9e9")
    assert _json(capsys, str(serving), "--model", LLAMA, "--as", "eu-ai-act", *moe)["inference"]["flop_per_token"] == 2.6e10
    assert _json(capsys, str(run_dir), "--as", "eu-ai-act", "--parameters", "1e6")["inference"]["flop_per_token"] == 2e6
    assert _json(capsys, "bloom-176b", "--as", "eu-ai-act")["inference"]["flop_per_token"] == sig(2 * 176e9, 2)


def test_eu_ai_act_of_a_fleet_job(fleet: Path, capsys: pytest.CaptureFixture) -> None:
    t = _json(capsys, str(fleet), "--job", "1001", "--as", "eu-ai-act")["training"]
    assert t["energy_mwh"] == sig(2901233 / 3.6e9, 3) and t["provenance"]["energy_mwh"]["origin"] == "measured"
    assert "ConsumedEnergyRaw" in t["energy_method"] and t["gpu_hours"] == sig(4 * 40 / 60, 3)
    sci = _json(capsys, str(fleet), "--job", "1001", "--as", "sci")  # a scheduler counts no tokens: per run
    from footprint.fleet.ledger import job_record

    a = footprint.assess(job_record(fleet, "1001"), samples=0)  # as `footprint fleet job` + `footprint assess` give it
    assert sci["functional_unit"] == "run" and sci["E_kwh"] == pytest.approx(a.facility_energy_kwh, rel=1e-3)
    _recomputes(sci)
    assert t["compute_flop"] is None and "no FLOP count" in t["not_available"]["compute_flop"]


# ---- SCI: (E x I + M) / R recomputes from its parts ----


def _recomputes(d: dict) -> None:
    assert d["sci"] == pytest.approx((d["E_kwh"] * d["I_g_per_kwh"] + d["M_g"]) / d["R"], rel=0.01)
    for k in ("sci", "E_kwh", "I_g_per_kwh", "M_g", "R"):
        assert d["provenance"][k]["origin"] in ("measured", "stated", "modelled")


@pytest.mark.parametrize(("per", "r"), [("m-tokens", 366e3), ("token", 366e9), ("pflop", None), ("run", 1.0)])
def test_sci_of_bloom(per: str, r: float | None, capsys: pytest.CaptureFixture) -> None:
    a = footprint.assess("bloom-176b", samples=0)
    cc = a.impacts["climate_change"]
    d = _json(capsys, "bloom-176b", "--as", "sci", "--per", per)
    _recomputes(d)
    assert d["R"] == pytest.approx(r if r is not None else a.workload.flops / 1e15, rel=1e-3)
    assert d["E_kwh"] * d["I_g_per_kwh"] == pytest.approx(cc.by_stage["use"] * 1000, rel=1e-3)
    assert d["I_g_per_kwh"] == pytest.approx(57, rel=1e-3)  # the stated French factor of [L]
    # SCI's time share is time reserved / expected lifespan: the assessment's embodied (over the 85 % busy share of
    # BLOOM's 6-year life, [L]) x 0.85
    assert d["M_g"] == pytest.approx((cc.total - cc.by_stage["use"]) * 1000 * 0.85, rel=1e-3)
    al = d["M_allocation"]
    assert al["TE_g"] * al["TS"] * al["RS"] == pytest.approx(d["M_g"], rel=0.01)  # M = TE x TS x RS
    assert al["TS"] == pytest.approx(1082990 / 384 / (6 * 8766), rel=1e-3)
    assert "utilisation 0.85" in d["provenance"]["M_g"]["method"]


def test_sci_of_a_tracked_run_per_token_step_and_run(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    a = footprint.assess(run_dir, samples=0)
    per = {p: _json(capsys, str(run_dir), "--as", "sci", "--per", p) for p in ("token", "step", "run")}
    for d in per.values():
        _recomputes(d)
    assert per["token"]["R"] == 12000 and per["step"]["R"] == 12 and per["run"]["R"] == 1
    assert per["run"]["sci"] == pytest.approx(a.impacts["climate_change"].total * 1000, rel=0.01)  # utilisation 1
    assert per["token"]["provenance"]["R"]["origin"] == "measured"
    record = json.loads((run_dir / "run.json").read_text())  # the Python API takes the record itself too
    assert footprint.disclose(record, "sci", per="run").data["sci"] == per["run"]["sci"]


def test_sci_of_a_served_model_matches_the_serving_report(serving: Path, capsys: pytest.CaptureFixture) -> None:
    m = next(x for x in footprint.serving_report(serving)["models"] if x["model"] == LLAMA)
    pu = m["per_unit"]["+pue"]
    for per, key in (("request", "per_request"), ("1k-requests", "per_1000_requests"), ("m-tokens", "per_million_tokens")):
        d = _json(capsys, str(serving), "--model", LLAMA, "--as", "sci", "--per", per)
        _recomputes(d)
        assert d["sci"] == pytest.approx(pu[key]["climate_change"] * 1000, rel=0.01)  # the same unit, the same figure
        n = m["requests"] if per != "m-tokens" else m["tokens_in"] + m["tokens_out"]  # a count, given whole
        assert d["R"] == n / {"request": 1, "1k-requests": 1e3, "m-tokens": 1e6}[per]
    assert _json(capsys, str(serving), "--model", LLAMA, "--as", "sci")["functional_unit"] == "request"


def test_a_missing_functional_unit_is_not_available_with_its_reason(capsys: pytest.CaptureFixture) -> None:
    d = _json(capsys, "bloom-176b", "--as", "sci", "--per", "step")
    assert d["sci"] is None and d["R"] is None and "steps" in d["not_available"]["sci"]
    rc, out, _ = _cli(capsys, "disclose", "bloom-176b", "--as", "sci", "--per", "step")
    assert rc == 0 and "not available (the scenario records no steps)" in out


# ---- the Hugging Face model card ----


def _card(capsys: pytest.CaptureFixture, tmp_path: Path, *args: str):  # noqa: ANN202
    from huggingface_hub import ModelCard

    out = tmp_path / "card.md"
    rc, _, err = _cli(capsys, "disclose", *args, "--as", "hf", "-o", str(out))
    assert rc == 0, err
    return ModelCard.load(out), out.read_text()


def test_hf_card_of_bloom_parses_with_emissions_in_grams(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    a = footprint.assess("bloom-176b", samples=0)
    card, text = _card(capsys, tmp_path, "bloom-176b", "--training-type", "pre-training")
    co2 = card.data.co2_eq_emissions
    assert co2["emissions"] == pytest.approx(a.impacts["climate_change"].by_stage["use"] * 1000, rel=1e-3)  # g, use phase
    assert co2["source"] == "footprint" and co2["training_type"] == "pre-training"
    assert co2["geographical_location"] == "France (grid zone FRA)" and "A100" in co2["hardware_used"]
    assert "USE PHASE" in card.text and "life cycle" in card.text
    # the Hub's emissions filter (list_models(emissions_thresholds=...), grams) finds it where its grams are
    from types import SimpleNamespace

    from huggingface_hub.utils.endpoint_helpers import _is_emission_within_threshold

    info = SimpleNamespace(card_data=card.data)
    assert _is_emission_within_threshold(info, 2.9e7, 3.0e7) and not _is_emission_within_threshold(info, 0, 5.3e4)
    assert card.text.count("| ") > 16 and "Resource use, minerals and metals" in card.text and "Water" in card.text


def test_hf_card_of_a_run_and_of_a_served_model(
    run_dir: Path, serving: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    card, _ = _card(capsys, tmp_path, str(run_dir))
    assert card.data.co2_eq_emissions["emissions"] > 0 and "training_type" not in card.data.co2_eq_emissions
    assert "training_type is not written" in card.text
    assert card.data.co2_eq_emissions["geographical_location"].startswith("not given")  # a run with no site: no place
    served, _ = _card(capsys, tmp_path, str(serving), "--model", LLAMA)
    assert "co2_eq_emissions" not in served.data.to_dict() and "No co2_eq_emissions" in served.text
    assert "Climate change per 1,000 requests" in served.text


def test_hf_card_of_a_served_model_gives_the_gpu_lifetimes_its_embodied_share_charges(
    serving: Path, capsys: pytest.CaptureFixture
) -> None:
    from footprint.lca.engine import assess
    from footprint.serving.assess import Site, template

    d = _json(capsys, str(serving), "--model", LLAMA, "--as", "hf")["figures"]
    m = next(x for x in footprint.serving_report(serving)["models"] if x["model"] == LLAMA)
    imp = m["impacts"]["+pue"]
    embodied_kg = imp["climate_change"] * imp["embodied_share_climate"]
    w = template("A100-SXM4-80GB", Site(), True, 1.2)  # the record's GPU and site: one whole life of one GPU
    life = assess(w.with_(gpu_hours=w.lifetime_h * w.utilization), samples=0).impacts["climate_change"]
    one_life_embodied = life.total - life.by_stage["use"]
    assert d["gpu_lifetimes"] == pytest.approx(embodied_kg / one_life_embodied, rel=2e-3)  # 3 figures
    assert d["provenance"]["gpu_lifetimes"]["boundary"] == "+pue"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_merge_updates_the_metadata_and_leaves_the_text(newline: str, capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from huggingface_hub import ModelCard, metadata_load

    body = newline.join(["", "# My model", "", "Trained with love. | a pipe, *stars*, `code`", "", "---", "not front matter", ""])
    readme = tmp_path / "README.md"
    readme.write_bytes(newline.join(["---", "license: mit", "tags:", "- text-generation", "---"]).encode() + body.encode())
    rc, _, err = _cli(capsys, "disclose", "bloom-176b", "--as", "hf", "--merge", str(readme))
    assert rc == 0 and "updated" in err
    raw = readme.read_bytes()
    assert raw.endswith(body.encode())  # the text, byte for byte
    meta = metadata_load(readme)
    assert meta["license"] == "mit" and meta["tags"] == ["text-generation"] and meta["co2_eq_emissions"]["source"] == "footprint"
    assert ModelCard.load(readme).data.co2_eq_emissions["emissions"] > 0
    plain = tmp_path / "plain.md"
    plain.write_text("# A card with no metadata\n")
    assert _cli(capsys, "disclose", "bloom-176b", "--as", "hf", "--merge", str(plain))[0] == 0
    assert plain.read_text().endswith("---\n# A card with no metadata\n") and metadata_load(plain)["co2_eq_emissions"]
    empty = tmp_path / "empty.md"  # an empty front matter is replaced, not left under the new one as two rules
    empty.write_bytes(newline.join(["---", "---", "# Empty metadata", ""]).encode())
    assert _cli(capsys, "disclose", "bloom-176b", "--as", "hf", "--merge", str(empty))[0] == 0
    text = empty.read_bytes().decode()
    assert text.count("---") == 2 and text.endswith(f"---{newline}# Empty metadata{newline}")
    assert ModelCard.load(empty).data.co2_eq_emissions["source"] == "footprint"


def test_merge_keeps_the_cards_training_type_and_replaces_its_emissions(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from huggingface_hub import metadata_load

    body = "\r\n# Modèle français 🤗\r\n\r\nDu texte, « guillemets ».\r\n"
    old = "co2_eq_emissions:\r\n  emissions: 1234.5\r\n  source: codecarbon\r\n  training_type: fine-tuning\r\n"
    readme = tmp_path / "README.md"
    readme.write_bytes(("---\r\nlicense: apache-2.0\r\n" + old + "  geographical_location: Québec\r\n---\r\n" + body).encode())
    assert _cli(capsys, "disclose", "bloom-176b", "--as", "hf", "--merge", str(readme))[0] == 0
    assert readme.read_bytes().endswith(body.encode())
    co2 = metadata_load(readme)["co2_eq_emissions"]
    assert co2["training_type"] == "fine-tuning"  # what the model is: the card says it, footprint was not told
    assert co2["source"] == "footprint" and co2["emissions"] > 1e7 and co2["geographical_location"].startswith("France")
    assert list(co2)[:3] == ["emissions", "source", "training_type"]
    args = ("disclose", "bloom-176b", "--as", "hf", "--training-type", "pre-training", "--merge", str(readme))
    assert _cli(capsys, *args)[0] == 0 and metadata_load(readme)["co2_eq_emissions"]["training_type"] == "pre-training"


TINY = """name: tiny
hardware: {gpu: A100-SXM4-80GB, count: 1}
training: {gpu_hours: 0.001, power_per_gpu: 100 W}
site: {grid: FRA, carbon_intensity: 0.5 g/kWh, pue: 1.0}
"""


def test_small_emissions_are_a_plain_decimal_in_the_card(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    # 0.1 W h x 0.5 g/kWh = 5e-05 g: PyYAML would write 5.0e-05 (and reads 1e-05, as other tools write it, as a string)
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    card, text = _card(capsys, tmp_path, str(scenario))
    assert "\n  emissions: 0.00005\n" in text and card.data.co2_eq_emissions["emissions"] == pytest.approx(5e-05)
    assert "files this card under 5 g" in card.text  # huggingface_hub's filter reads str(5e-05): said in the card
    readme = tmp_path / "README.md"
    readme.write_text("---\nlicense: mit\n---\n# tiny\n")
    assert _cli(capsys, "disclose", str(scenario), "--as", "hf", "--merge", str(readme))[0] == 0
    assert "\n  emissions: 0.00005\n" in readme.read_text() and readme.read_text().endswith("---\n# tiny\n")
    big = footprint.disclose("gpt-4-falk", "hf").text()
    assert "\n  emissions: 7616000000.0\n" in big and "files this card" not in big


# ---- formats, the Python API, bad input ----


def test_formats_and_the_python_api(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    d = footprint.disclose("bloom-176b", "sci", per="run")
    assert yaml.safe_load(d.text("yaml")) == json.loads(d.text("json")) == json.loads(json.dumps(d.data))
    md = d.text("md")
    assert "SCI = (E x I + M) per R" in md and "| E: energy |" in md and "footprint report bloom-176b" in md
    out = tmp_path / "eu.md"
    assert _cli(capsys, "disclose", "bloom-176b", "--as", "eu-ai-act", "-o", str(out), "--link", "https://x.org/r")[0] == 0
    text = out.read_text()
    assert "| Training compute (FLOP) | 4.0e+23 FLOP | modelled |" in text and "<https://x.org/r>" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["no-such-thing", "--as", "sci"], "no such scenario file or run directory"),
        (["bloom-176b", "--as", "iso"], "invalid choice: 'iso'"),
        (["bloom-176b", "--as", "sci", "--per", "tokens"], "invalid choice: 'tokens'"),
        (["bloom-176b", "--as", "sci", "--per", "request"], "--per request does not apply to a training target"),
        (["bloom-176b", "--as", "hf", "--per", "token"], "--per is SCI's functional unit"),
        (["bloom-176b", "--as", "eu-ai-act", "--merge", "README.md"], "--merge updates a model card"),
        (["bloom-176b", "--as", "sci", "--model", "x"], "--model is for a serving record"),
        (["bloom-176b", "--as", "eu-ai-act", "--parameters", "7e9"], "the scenario states model.parameters"),
        (["bloom-176b", "--as", "sci", "--parameters", "7e9"], "it needs --as eu-ai-act"),
        (["bloom-176b", "--as", "eu-ai-act", "--parameters", "inf"], "--parameters: expected a finite number"),
        (["bloom-176b", "--as", "eu-ai-act", "--active-parameters", "7e9"], "--active-parameters needs --parameters"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture) -> None:
    rc, out, err = _cli(capsys, "disclose", *args)
    assert rc == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


def test_bad_served_and_fleet_targets(serving: Path, fleet: Path, capsys: pytest.CaptureFixture) -> None:
    for args, needle in (
        ([str(serving), "--as", "sci"], "serves 5 models: pick one with --model"),
        ([str(serving), "--model", "gpt-5", "--as", "sci"], "no model 'gpt-5'"),
        ([str(serving), "--model", LLAMA, "--as", "sci", "--per", "step"], "does not apply to a served model"),
        ([str(serving), "--model", LLAMA, "--as", "hf", "--training-type", "fine-tuning"], "--training-type goes into"),
        ([str(serving), "--model", LLAMA, "--as", "hf", "--merge", str(serving / "serving.json")], "nothing to merge"),
        ([str(fleet), "--as", "sci"], "name the job with --job"),
        ([str(fleet), "--job", "9999", "--as", "sci"], "no job '9999'"),
        ([str(fleet), "--job", "1004", "--as", "sci"], "job 1004: energy: the run has no energy reading"),
    ):
        rc, out, err = _cli(capsys, "disclose", *args)
        assert rc == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, (args, err)


@pytest.mark.parametrize(
    ("card", "needle"),
    [
        ("---\n- a\n- b\n---\ntext\n", "its metadata block is a list, expected a mapping"),
        ("---\na: [\n---\ntext\n", "malformed YAML"),
        (
            "---\na: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + "".join(f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcdef", "bcdefg", strict=True))
            + "---\ntext\n",
            "alias bomb",
        ),
        (None, "is a directory"),
    ],
)
def test_merge_refuses_a_card_it_cannot_read_and_leaves_it(
    card: str | None, needle: str, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    if card is None:
        readme.mkdir()
    else:
        readme.write_text(card)
    rc, out, err = _cli(capsys, "disclose", "bloom-176b", "--as", "hf", "--merge", str(readme))
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert card is None or readme.read_text() == card


@pytest.mark.parametrize(
    ("link", "kept_inside"),
    [
        ("https://x.org/r> [click](javascript:alert(1)) <", "<https://x.org/r%3E%20[click](javascript:alert(1))%20%3C>"),
        ("report `rm -rf` <b>", "`` report `rm -rf` <b> ``"),
    ],
)
def test_a_link_cannot_leave_its_autolink_or_code_span(link: str, kept_inside: str) -> None:
    """--link is user text: a '>' cannot close the autolink, a backtick cannot close the code span (no Markdown gets out)."""
    md = footprint.disclose("bloom-176b", "sci", per="run", link=link).text("md")
    line = next(x for x in md.splitlines() if x.startswith("Full assessment"))
    assert line.endswith(kept_inside), line
