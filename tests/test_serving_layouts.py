"""The serving import on clusters as they are (tests/_serving_layouts.py: a generator written for these cases, with a
known truth), through a real Prometheus (Debian's package): dcgm-exporter's pod labels in both layouts (``pod`` and,
scraped through a Service, ``exported_pod``), a model over a leader and a worker pod, a GPU time-sliced between
SGLang and llama.cpp, an engine restart, a scrape gap under load with the driver reloaded inside it, 15 s scrapes."""

from __future__ import annotations

import itertools
import shutil
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from _serving_layouts import GEMMA, LLAMA70, MAP_PODS, MISTRAL, QWEN, TINY, Cluster

from footprint.cli.app import main
from footprint.fleet import promserver
from footprint.fleet.prometheus import PromConfig, PrometheusClient
from footprint.serving import report, store, synthetic
from footprint.serving.assess import Site
from footprint.serving.costmodel import params_of
from footprint.serving.importer import import_files, import_prometheus

pytestmark = pytest.mark.skipif(promserver.missing() is not None, reason=str(promserver.missing()))

WINDOW = 300.0
LAYOUTS = ("pod", "exported")
SITE = Site("FRA", 1.2)
MAP = {"pods": MAP_PODS, "gpus": None}
CLEAN = (LLAMA70.name, MISTRAL.name)  # on GPUs of their own, no gap: their energy has an exact truth


@pytest.fixture(scope="module")
def clusters() -> dict[str, Cluster]:
    return {lay: Cluster(lay, cluster=lay) for lay in LAYOUTS}


@pytest.fixture(scope="module")
def prom(clusters: dict[str, Cluster], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Both clusters in one Prometheus, told apart by a ``cluster`` label (--selector picks one)."""
    d = tmp_path_factory.mktemp("layouts")
    both = types.SimpleNamespace(series=lambda: itertools.chain(*(c.series() for c in clusters.values())))
    synthetic.write(both, d / "metrics.om")  # type: ignore[arg-type]
    promserver.backfill(d / "metrics.om", d / "tsdb")
    with promserver.serve(shutil.copytree(d / "tsdb", d / "served")) as url:
        yield url


def _import(prom: str, out: Path, layout: str, gpu_map: dict | None = MAP, **kw: object) -> tuple[dict, object]:
    c = Cluster(layout)
    client = PrometheusClient(PromConfig(prom))
    import_prometheus(out, client, c.start, c.end, WINDOW, None, SITE, f'cluster="{layout}"', gpu_map, **kw)  # type: ignore[arg-type]
    meta, a = store.read(out)
    return meta, report.finite(report.build(meta, a, SITE))


@pytest.fixture(scope="module")
def reps(prom: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, dict]]:
    return {lay: _import(prom, tmp_path_factory.mktemp(f"rec-{lay}") / "rec", lay) for lay in LAYOUTS}


def _model(rep: dict, name: str) -> dict:
    return next(m for m in rep["models"] if m["model"] == name)


def test_both_layouts_give_each_model_its_true_energy(reps: dict, clusters: dict[str, Cluster]) -> None:
    """Was 100 % unattributed, exit 0, under ``exported_pod``: now the same per-model energy as ``pod``."""
    for layout, (meta, rep) in reps.items():
        for name in CLEAN:
            assert _model(rep, name)["gpu_j"] == pytest.approx(clusters[layout].model_energy_j(name), rel=0.01), (layout, name)
        said = any("exported_namespace/exported_pod" in n for n in meta["notes"])
        assert said == (layout == "exported")
    a, b = (reps[lay][1] for lay in LAYOUTS)
    for m in a["models"]:
        assert _model(b, m["model"])["gpu_j"] == pytest.approx(m["gpu_j"], rel=1e-9)


def test_a_model_over_two_pods_gets_its_whole_energy(reps: dict, clusters: dict[str, Cluster]) -> None:
    """The worker publishes no engine counters: its GPUs join the leader's by the LeaderWorkerSet label."""
    meta, rep = reps["exported"]
    llama = _model(rep, LLAMA70.name)
    truth = clusters["exported"].model_energy_j(LLAMA70.name)
    assert llama["gpu_j"] == pytest.approx(truth, rel=0.01)  # without the worker's two GPUs it was half
    assert any("by set label" in n for n in meta["notes"])


def test_worker_gpus_are_the_leaders_model(prom: str, tmp_path: Path) -> None:
    _import(prom, tmp_path / "r", "pod")
    _, a = store.read(tmp_path / "r")
    workers = a.gpus[a.gpus["host"] == "node-2"].set_index("gpu")
    assert workers.loc["0", "models"] == LLAMA70.name and workers.loc["1", "models"] == LLAMA70.name
    assert workers.loc["3", "models"] == ""  # the idle GPU stays unattributed


def test_a_map_naming_some_gpus_keeps_the_others_by_pod(prom: str, tmp_path: Path, clusters: dict[str, Cluster]) -> None:
    """The map names the leader's GPUs; the worker's (on another node) still come by pod, not dropped."""
    import pandas as pd

    named = [("node-1", "0", LLAMA70.name), ("node-1", "1", LLAMA70.name)]
    gmap = {"pods": MAP_PODS, "gpus": pd.DataFrame(named, columns=["host", "gpu", "model"])}
    _, rep = _import(prom, tmp_path / "m", "pod", gmap)
    assert _model(rep, LLAMA70.name)["gpu_j"] == pytest.approx(clusters["pod"].model_energy_j(LLAMA70.name), rel=0.01)
    assert _model(rep, MISTRAL.name)["gpu_j"] == pytest.approx(clusters["pod"].model_energy_j(MISTRAL.name), rel=0.01)


def test_a_gpu_shared_by_two_engines_is_split_in_one_unit_and_flagged(reps: dict, clusters: dict[str, Cluster]) -> None:
    """SGLang counts tokens (no decode time), llama.cpp slot-seconds: adding them gave one model 0.17 % of the GPU."""
    meta, rep = reps["pod"]
    gemma, tiny = _model(rep, GEMMA.name), _model(rep, TINY.name)
    for m in (gemma, tiny):
        assert any("estimate" in f and "2N FLOPs" in f for f in m["flags"]), m["flags"]
    assert any("node-1/3" in n and "estimate" in n for n in meta["notes"])
    # the cost model's one unit: tokens x 2N FLOPs, N from the names (9e9, 1.1e9), over the shared windows
    weight = {m["model"]: ((m["tokens_in"] or 0) + (m["tokens_out"] or 0)) * params_of(m["model"]) for m in (gemma, tiny)}
    share = gemma["gpu_j"] / (gemma["gpu_j"] + tiny["gpu_j"])
    assert share == pytest.approx(weight[GEMMA.name] / sum(weight.values()), rel=0.02)
    assert 1 - share > 0.01  # adding slot-seconds to tokens gave llama.cpp's model 0.17 %
    # against the generator's truth the estimate falls where it falls (docs/serving.md states it): it is flagged
    c = clusters["pod"]
    true_share = c.model_energy_j(GEMMA.name) / (c.model_energy_j(GEMMA.name) + c.model_energy_j(TINY.name))
    print(f"shared GPU: SGLang model's share {share:.3f} (cost model) against {true_share:.3f} (truth)")


def test_engines_timing_seconds_of_different_things_do_not_add_them(tmp_path: Path) -> None:
    """TGI (batch-seconds) and vLLM (request-seconds, 16 requests batched) time-slice a GPU: both are seconds, so they
    were added as busy seconds and vLLM's model took its batch size's worth of the GPU; one unit, flagged, instead."""
    from dataclasses import replace

    c = Cluster("pod", kube_labels=False, shared=(replace(GEMMA, engine="tgi"), replace(TINY, engine="vllm")))
    f = synthetic.write(c, tmp_path / "c.prom", ms=True)  # type: ignore[arg-type]
    gmap = {"pods": MAP_PODS | {"gemma-9b-0": GEMMA.name}, "gpus": None}  # TGI publishes no model label
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, gmap, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    assert a.gpus.set_index(["host", "gpu"])["split"][("node-1", "3")].startswith("estimate: tokens x 2N FLOPs")
    rep = report.finite(report.build(meta, a, SITE))
    gemma, tiny = _model(rep, GEMMA.name), _model(rep, TINY.name)
    assert all(any("estimate" in f for f in m["flags"]) for m in (gemma, tiny))
    by_seconds = 1 / (1 + 16 * TINY.load / GEMMA.load)  # what adding the seconds gave TGI's model (about 0.05)
    share = gemma["gpu_j"] / (gemma["gpu_j"] + tiny["gpu_j"])
    assert share > 4 * by_seconds, share


def test_the_shared_gpu_says_its_unit(prom: str, tmp_path: Path) -> None:
    _import(prom, tmp_path / "r", "pod")
    _, a = store.read(tmp_path / "r")
    split = a.gpus.set_index(["host", "gpu"])["split"]
    assert split[("node-1", "3")].startswith("estimate: tokens x 2N FLOPs")
    assert split[("node-1", "2")] == "busy seconds" and split[("node-2", "0")] == "busy seconds"


def test_requests_and_tokens_are_exact_integers(reps: dict, clusters: dict[str, Cluster]) -> None:
    """Counter differences at the window edges (an engine restart included), not increase()'s extrapolation."""
    for layout, (_, rep) in reps.items():
        c = clusters[layout]
        for model in (LLAMA70, MISTRAL, GEMMA, TINY, QWEN):
            m = _model(rep, model.name)
            for k in ("tokens_in", "tokens_out", "requests"):
                if m[k] is None:
                    assert k == "requests" and model is TINY  # llama.cpp counts no requests
                    continue
                assert isinstance(m[k], int), (model.name, k, m[k])
                if k == "tokens_out":  # tokens in windows without an energy reading (the gap) are counted apart
                    got = m[k] + (m["tokens_out_unmetered"] or 0)
                    assert got == c.counted(model.name, k), (model.name, k)  # exact: within 0.01 % asked
                elif not m["tokens_out_unmetered"]:
                    assert m[k] == c.counted(model.name, k), (model.name, k)


def test_a_restart_across_a_window_edge_counts_from_zero(tmp_path: Path) -> None:
    """The engine restarts between a window's last scrape and the next window's first: ``resets()`` of either window
    sees no reset, and the window's edge difference was negative (a window of minus tokens); it counts from 0."""
    from _serving_layouts import START

    c = Cluster("pod", cluster="edge", restart_at=START + 3000.0 - 5.0)  # the 15 s scrape at 3000 s is the first after
    synthetic.write(c, tmp_path / "metrics.om")  # type: ignore[arg-type]
    promserver.backfill(tmp_path / "metrics.om", tmp_path / "tsdb")
    with promserver.serve(tmp_path / "tsdb") as url:
        client = PrometheusClient(PromConfig(url))
        import_prometheus(tmp_path / "rec", client, c.start, c.end, WINDOW, None, SITE, 'cluster="edge"', MAP)  # type: ignore[arg-type]
    meta, a = store.read(tmp_path / "rec")
    per_window = a.models_w[a.models_w["model"] == MISTRAL.name]
    assert (per_window[["tokens_in", "tokens_out", "requests"]].fillna(0) >= 0).all().all()
    rep = report.finite(report.build(meta, a, SITE))
    m = _model(rep, MISTRAL.name)
    for k in ("tokens_in", "tokens_out", "requests"):
        assert m[k] == c.counted(MISTRAL.name, k), k
    engine = {r["where"]: r for r in rep["health"] if r["counter"] == "engine"}
    assert engine["mistral-7b-5d9f8-xk2lp"]["resets"] == 1  # the health table counts it too (it said 0)
    assert engine["qwen-14b-0"]["resets"] == 0


def test_the_range_contains_the_truth_after_a_gap_under_load(reps: dict, clusters: dict[str, Cluster]) -> None:
    for layout, (_, rep) in reps.items():
        q = _model(rep, QWEN.name)
        low, high = q["gpu_j_range"]
        truth = clusters[layout].model_energy_j(QWEN.name)  # the gap's energy included: the GPU drew it
        assert low <= truth <= high, (low, truth, high)
        assert low == q["gpu_j"] and truth - low > 0.15 * truth  # a loaded gap: a quarter of its time unmetered
        assert any("at most" in f for f in q["flags"])
        h = {(r["where"], r["which"]): r for r in rep["health"] if r["counter"] == "gpu"}
        assert h[("node-2", "2")]["gaps"] >= 6 and h[("node-2", "2")]["lost_hi_j"] >= h[("node-2", "2")]["lost_j"] > 0


@pytest.mark.parametrize("gap", [(0.0, 1800.0), (5400.0, 7200.0)], ids=["first-half-hour", "last-half-hour"])
def test_the_range_contains_the_truth_with_a_gap_at_the_edge_of_the_range(tmp_path: Path, gap: tuple[float, float]) -> None:
    """The exporter down for the first (or last) half hour under load: those windows are missing, not short, and only
    the windows between a GPU's first and last reading were searched for gaps: the bound left them out."""
    c = Cluster("pod", gap=gap)
    f = synthetic.write(c, tmp_path / "edge.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    rep = report.finite(report.build(meta, a, SITE))
    low, high = _model(rep, QWEN.name)["gpu_j_range"]
    assert low < c.model_energy_j(QWEN.name) <= high, (low, c.model_energy_j(QWEN.name), high)
    h = {(r["where"], r["which"]): r for r in rep["health"] if r["counter"] == "gpu"}
    assert h[("node-2", "2")]["gaps"] == 6


def test_a_card_not_in_the_catalogue_says_its_bound_is_not_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A card lca_data does not list gets the catalogue's highest TDP as its gap bound: a newer card may draw more."""
    import _serving_layouts

    monkeypatch.setattr(_serving_layouts, "H100", "NVIDIA Future-X 300GB")
    c = Cluster("pod")
    f = synthetic.write(c, tmp_path / "c.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, _ = store.read(tmp_path / "rec")
    assert any("NVIDIA Future-X 300GB not in lca_data" in n and "exceed" in n for n in meta["notes"]), meta["notes"]


def test_the_scrape_interval_is_read_from_the_data(reps: dict) -> None:
    """15 s scrapes, --scrape-interval not given (it defaulted to 30 s and moved which windows count as gaps)."""
    for meta, rep in reps.values():
        assert meta["scrape_s"] == 15.0 and any("read from the data" in n for n in meta["notes"])
        assert not any("not in lca_data" in n for n in meta["notes"])  # H100 is: its own TDP bounds its gaps
        gaps = {(r["where"], r["which"]): r["gaps"] for r in rep["health"] if r["counter"] == "gpu"}
        assert {k for k, g in gaps.items() if g} == {("node-2", "2")}


def test_a_wrong_pod_label_is_one_line_with_the_fix(prom: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    c = Cluster("exported")
    args = ["serving", "import", "prometheus", "--url", prom, "--start", str(c.start), "--end", str(c.end)]
    args += ["--selector", 'cluster="exported"', "--map", str(tmp_path / "map.yaml"), "-o", str(tmp_path / "o")]
    (tmp_path / "map.yaml").write_text(f"pods: {MAP_PODS}\n")
    assert main([*args, "--pod-label", "pod"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nvidia-dcgm-exporter-node-1" in err and "--pod-label" in err, err
    assert not (tmp_path / "o").exists()
    assert main([*args, "--pod-label", "exported_pod"]) == 0  # the namespace label follows: exported_namespace
    assert "0.0% unattributed" not in capsys.readouterr().err


def test_recorded_files_group_pods_by_name_without_kube_labels(tmp_path: Path) -> None:
    """/metrics files of the exported layout, no kube-state-metrics: the worker joins its leader by name."""
    c = Cluster("exported", kube_labels=False)
    f = synthetic.write(c, tmp_path / "cluster.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    rep = report.build(meta, a, SITE)
    assert _model(rep, LLAMA70.name)["gpu_j"] == pytest.approx(c.model_energy_j(LLAMA70.name), rel=0.01)
    assert any("by name (<leader>-<index>)" in n for n in meta["notes"]) and meta["scrape_s"] == 15.0
    m = _model(rep, MISTRAL.name)
    assert m["tokens_out"] == c.counted(MISTRAL.name, "tokens_out") and m["requests"] == c.counted(MISTRAL.name, "requests")
    low, high = _model(rep, QWEN.name)["gpu_j_range"]
    assert low < c.model_energy_j(QWEN.name) <= high  # the gap, reduced locally: the same bound


def test_a_worker_named_in_the_map_joins_its_model(tmp_path: Path) -> None:
    """No kube-state-metrics and a worker name unlike its leader's (a Ray worker): --map names its model."""
    c = Cluster("pod", kube_labels=False, worker="ray-llama70-worker-gpu-7kq2x")
    f = synthetic.write(c, tmp_path / "ray.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "alone", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, a = store.read(tmp_path / "alone")
    half = _model(report.build(meta, a, SITE), LLAMA70.name)["gpu_j"]  # unnamed, the worker's GPUs are no model's
    assert half == pytest.approx(c.model_energy_j(LLAMA70.name) / 2, rel=0.01)
    named = {"pods": MAP_PODS | {"ray-llama70-worker-gpu-7kq2x": LLAMA70.name}, "gpus": None}
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, named, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    assert _model(report.build(meta, a, SITE), LLAMA70.name)["gpu_j"] == pytest.approx(c.model_energy_j(LLAMA70.name), rel=0.01)
    assert any("1 by --map" in n for n in meta["notes"])


def test_a_map_against_the_pods_is_said(tmp_path: Path) -> None:
    """The map names Mistral's GPU for Llama 70B: the map is followed (the user's word), but no longer silently."""
    import pandas as pd

    c = Cluster("pod")
    f = synthetic.write(c, tmp_path / "c.prom", ms=True)  # type: ignore[arg-type]
    gmap = {"pods": MAP_PODS, "gpus": pd.DataFrame([("node-1", "2", LLAMA70.name)], columns=["host", "gpu", "model"])}
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, gmap, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    said = [n for n in meta["notes"] if "against their pods" in n]
    assert said and f"node-1/2 for {LLAMA70.name} (its pod mistral-7b-5d9f8-xk2lp serves {MISTRAL.name})" in said[0], said
    assert MISTRAL.name not in a.gpus.set_index(["host", "gpu"])["models"][("node-1", "2")]


def test_the_map_wins_over_a_set_serving_several_models(tmp_path: Path) -> None:
    """One Ray cluster serves Llama 70B (a head and a worker) and Mistral: the worker's set label names both models'
    pods. Named in --map, the worker is Llama's (the set label won and split it between the two); unnamed, the split
    is said."""
    c = Cluster("pod", ray=True)
    f = synthetic.write(c, tmp_path / "ray.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "set", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, _ = store.read(tmp_path / "set")
    assert any("serve several models" in n and "llama70-0-1" in n for n in meta["notes"]), meta["notes"]
    named = {"pods": MAP_PODS | {"llama70-0-1": LLAMA70.name}, "gpus": None}
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, named, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    rep = report.build(meta, a, SITE)
    for name in CLEAN:
        assert _model(rep, name)["gpu_j"] == pytest.approx(c.model_energy_j(name), rel=0.01), name
    assert not any("serve several models" in n for n in meta["notes"])


def test_a_cluster_scraping_exporters_both_ways(tmp_path: Path) -> None:
    """node-1's exporter behind a Service (exported_pod), node-2's with honor_labels: each GPU by the layout its engine
    pods match."""
    c = Cluster("mixed")
    f = synthetic.write(c, tmp_path / "mixed.prom", ms=True)  # type: ignore[arg-type]
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, MAP, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    rep = report.build(meta, a, SITE)
    for name in (*CLEAN, QWEN.name):
        low, high = _model(rep, name)["gpu_j_range"]
        assert low <= c.model_energy_j(name) * 1.01 and c.model_energy_j(name) <= high * 1.01, name
    assert _model(rep, LLAMA70.name)["gpu_j"] == pytest.approx(c.model_energy_j(LLAMA70.name), rel=0.01)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", 70e9),
        ("TinyLlama-1.1B-Chat-GGUF", 1.1e9),
        ("HuggingFaceTB/SmolLM-135M", 135e6),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ-4bit", 7e9),
        ("microsoft/Phi-3-mini-4k-instruct", None),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.5e9),
        ("Qwen/Qwen2.5-7B-Instruct-1M", 7e9),  # -1M: a million tokens of context (was read as 1e6 parameters)
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", None),  # 12.9B active: not in the name (was read as 7e9)
        ("mistral-community/Mixtral-8x22B-v0.1", None),
        ("Qwen/Qwen3-30B-A3B", 3e9),  # an MoE that names its active parameters
        ("Qwen/Qwen2-57B-A14B-Instruct", 14e9),
        ("llama-2-7b.Q4_K_M.gguf", 7e9),
    ],
)
def test_the_cost_model_reads_the_size_from_the_name(name: str, params: float | None) -> None:
    assert params_of(name) == params


def test_the_maps_params_weigh_a_shared_gpu_and_every_size_is_said(tmp_path: Path) -> None:
    """A size the name does not give (an MoE's active count, a context suffix) is given in the map, as YAML writes
    it (12.9e9 is a string to YAML): the split follows it and the notes say each N and where it came from."""
    from footprint.serving.attribution import parse_map

    c = Cluster("pod", kube_labels=False)
    f = synthetic.write(c, tmp_path / "c.prom", ms=True)  # type: ignore[arg-type]
    gmap = parse_map({"pods": MAP_PODS, "params": {GEMMA.name: "1.1e9"}}, "map.yaml")
    import_files(tmp_path / "rec", [str(f)], WINDOW, SITE, gmap, c.start, c.end)
    meta, a = store.read(tmp_path / "rec")
    rep = report.finite(report.build(meta, a, SITE))
    gemma, tiny = _model(rep, GEMMA.name), _model(rep, TINY.name)
    tokens = {m["model"]: (m["tokens_in"] or 0) + (m["tokens_out"] or 0) for m in (gemma, tiny)}
    share = gemma["gpu_j"] / (gemma["gpu_j"] + tiny["gpu_j"])
    assert share == pytest.approx(tokens[GEMMA.name] / sum(tokens.values()), rel=0.02)  # both weigh 1.1e9 a token
    said = next(n for n in meta["notes"] if n.startswith("shared-GPU estimate"))
    assert f"{GEMMA.name} 1.1e+09 (from its map)" in said and f"{TINY.name} 1.1e+09 (from its name)" in said, said


def test_the_split_unit_costs_a_byte_a_row_not_a_string() -> None:
    """Each GPU-window's unit was a numpy string per engine row (the estimate's name is ~100 characters): on a month of
    64 GPUs, 553k rows, the import peaked at 1,167 MB (841 MB before the unit existed; 864 MB as a category, one run
    each of benchmarks/serving_bench.py)."""
    import numpy as np
    import pandas as pd

    from footprint.serving import costmodel

    n = 100_000
    slots = pd.DataFrame(
        {
            "window": np.arange(n) // 2,
            "gkey": np.zeros(n, np.int64),
            "model": np.where(np.arange(n) % 2, GEMMA.name, TINY.name),
            "engine": np.where(np.arange(n) % 2, "sglang", "llamacpp"),
            "prefill_s": np.where(np.arange(n) % 2, 1.0, 2.0),
            "decode_s": np.where(np.arange(n) % 2, np.nan, 3.0),
            "tokens_in": 10.0,
            "tokens_out": 5.0,
        }
    )
    out = costmodel.activity(slots, [])
    assert (out["unit"] == "estimate: " + costmodel.COST_MODEL).all()
    assert out["unit"].memory_usage(deep=True) < 2 * n  # a code a row, and the few names once
