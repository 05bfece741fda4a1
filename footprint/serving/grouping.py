"""Which engine pod each GPU's pod belongs to: the pod-label layout, and the pods of one deployment.

Two facts of real clusters decide it:

- **The layout.** dcgm-exporter scraped with ``honor_labels`` keeps the GPU's ``namespace``/``pod``; scraped through
  a Service or ServiceMonitor without it, Prometheus renames them ``exported_namespace``/``exported_pod`` and ``pod``
  names the exporter. Both are read (`footprint.serving.telemetry.LAYOUTS`); the one whose pods the engines' series
  match is kept (``--pod-label``/``--namespace-label`` name it outright). When no engine pod is on any GPU, that is
  one error that says which pods each side names and the fix, never a record 100 % unattributed.
- **A model over several pods.** Multi-node serving (a LeaderWorkerSet's leader and workers, a Ray cluster) publishes
  engine counters on the leader only. A GPU pod with no engine series of its own joins the engine pods of its
  deployment: the model ``--map`` names for it, else the same set (kube-state-metrics' ``kube_pod_labels``:
  ``leaderworkerset.sigs.k8s.io/name`` + group index, ``ray.io/cluster``; a set whose engine pods serve several
  models splits the worker's GPUs between them by activity, and says so), else the engine pod it is named after plus
  ``-<index>`` (LeaderWorkerSet names a group's workers ``<leader>-<index>``; nothing else is guessed). Its GPUs
  then carry the leader's activity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from footprint.errors import FootprintError
from footprint.serving.telemetry import LAYOUTS, Telemetry


def choose_layout(place: pd.DataFrame, eng: pd.DataFrame, pod_label: str | None, notes: list[str]) -> pd.DataFrame:
    """The placement rows of one layout per GPU: ``pod_label``'s; else, on each GPU, the layout whose pods the engines'
    series name (a cluster may scrape some exporters each way); on a GPU where none does (a worker pod, an idle GPU),
    of the layouts it has, the one most GPUs matched by (``pod`` on a tie)."""
    if not len(place):
        return place
    if pod_label:
        return place[place["layout"] == pod_label]
    pods = set(zip(eng["namespace"], eng["pod"], strict=True))
    place = place.assign(hit=[k in pods for k in zip(place["namespace"], place["pod"], strict=True)])
    hits = place[place["hit"]].drop_duplicates(["host", "gpu", "layout"])
    known = [pl for _, pl in LAYOUTS]
    order = sorted(set(place["layout"]), key=lambda x: (-int((hits["layout"] == x).sum()), known.index(x) if x in known else 9))
    rank = {x: i for i, x in enumerate(order)}
    # per GPU: a layout its engine pods match first, else the best-ranked layout it has
    cand = place.groupby(["host", "gpu", "layout"], as_index=False)["hit"].any()
    cand = cand.assign(r=cand["layout"].map(rank) - len(rank) * cand["hit"].astype(int))
    best = cand.sort_values("r").drop_duplicates(["host", "gpu"])
    chosen = {(h, g): lay for h, g, lay in zip(best["host"], best["gpu"], best["layout"], strict=True)}
    keep = [chosen[(h, g)] == lay for h, g, lay in zip(place["host"], place["gpu"], place["layout"], strict=True)]
    out = place[np.asarray(keep, dtype=bool)].drop(columns="hit")
    used = sorted(set(out["layout"]) - {"pod"})
    if used:
        ns = dict((p, n) for n, p in LAYOUTS)
        said = ", ".join(f"{ns.get(u, 'namespace')}/{u}" for u in used)
        notes.append(
            f"GPUs joined to pods by {said}: dcgm-exporter is scraped through a Service without honor_labels "
            "(its series' pod label names the exporter)"
        )
    return out


def group_workers(
    place: pd.DataFrame, eng: pd.DataFrame, sets: pd.DataFrame, pod_models: dict[str, str], notes: list[str]
) -> pd.DataFrame:
    """The placement with every GPU pod that has no engine series of its own re-pointed at its deployment's engine
    pods (one row per leader): by set label, by ``--map`` pod -> model, by name (``<leader>-<index>``)."""
    place = place.assign(via="")  # via: the worker pod a row was re-pointed from
    if not len(place) or not len(eng):
        return place
    engine_pods = eng[["namespace", "pod", "model"]].drop_duplicates()
    have = set(zip(engine_pods["namespace"], engine_pods["pod"], strict=True))
    set_of = {(n, p): s for n, p, s in zip(sets["namespace"], sets["pod"], sets["set"], strict=True)} if len(sets) else {}
    leaders: dict[tuple[str, str], list[tuple[str, str]]] = {}
    how: dict[str, int] = {}
    for ns, pod in set(zip(place["namespace"], place["pod"], strict=True)) - have:
        found, why = _leaders(ns, pod, engine_pods, have, set_of, pod_models)
        if found:
            leaders[(ns, pod)] = found
            how[why] = how.get(why, 0) + 1
    if not leaders:
        return place
    keep = [(n, p) not in leaders for n, p in zip(place["namespace"], place["pod"], strict=True)]
    rows = [place[np.asarray(keep, dtype=bool)]]
    for (ns, pod), to in leaders.items():
        mine = place[(place["namespace"] == ns) & (place["pod"] == pod)]
        rows += [mine.assign(namespace=lns, pod=lpod, via=pod) for lns, lpod in to]
    models = dict(zip(zip(engine_pods["namespace"], engine_pods["pod"], strict=True), engine_pods["model"], strict=True))
    mixed = sorted(p for (_, p), to in leaders.items() if len({models.get(k) for k in to}) > 1)
    if mixed:
        notes.append(
            f"GPU pod(s) {', '.join(mixed[:3])} joined a set whose engine pods serve several models: their GPUs are "
            "split between those models by activity; name each in --map (pods: {pod: model}) to attribute it"
        )
    said = ", ".join(f"{n} by {w}" for w, n in sorted(how.items()))
    notes.append(f"GPU pods without engine series joined to their deployment's engine pods ({said}): a model over several pods")
    return pd.concat(rows, ignore_index=True)


def _leaders(
    ns: str,
    pod: str,
    engine_pods: pd.DataFrame,
    have: set[tuple[str, str]],
    set_of: dict[tuple[str, str], str],
    pod_models: dict[str, str],
) -> tuple[list[tuple[str, str]], str]:
    if pod in pod_models:  # the user's word first: a set (one Ray cluster) may serve several models
        m = engine_pods[engine_pods["model"] == pod_models[pod]]
        local = m[m["namespace"] == ns]
        pick = local if len(local) else m
        if len(pick):
            return sorted(set(zip(pick["namespace"], pick["pod"], strict=True))), "--map"
    s = set_of.get((ns, pod))
    if s:
        same = sorted(k for k in have if set_of.get(k) == s)
        if same:
            return same, "set label"
    prefix = [(n, p) for n, p in have if n == ns and pod.startswith(p + "-") and pod[len(p) + 1 :].isdigit()]
    if prefix:  # LeaderWorkerSet's naming: <leader>-<worker index>; any other pod is not guessed into a deployment
        return prefix, "name (<leader>-<index>)"
    return [], ""


def no_match(tel: Telemetry, place: pd.DataFrame, eng: pd.DataFrame, layout_given: bool) -> FootprintError:
    """Why no engine pod is on any metered GPU, in one line, with the fix."""
    engines = sorted(set(eng["pod"]) - {""})
    if not len(tel.placement):
        return FootprintError(
            "no engine is on a metered GPU: the DCGM series carry no pod label (no Kubernetes pod mapping); "
            "name the GPUs in --map (gpus: [{host, gpus: [0, 1], model}])",
            tel.source,
            "--map",
        )
    seen = {lay: sorted(set(tel.placement.loc[tel.placement["layout"] == lay, "pod"])) for lay in set(tel.placement["layout"])}
    dcgm = "; ".join(f"{lay}: {_few(p)}" for lay, p in sorted(seen.items()))
    fix = (
        "check --pod-label/--namespace-label"
        if layout_given
        else "if dcgm-exporter is scraped through a Service, scrape it with honor_labels: true or give --pod-label "
        "and --namespace-label"
    )
    return FootprintError(
        f"no engine pod is on a metered GPU: the DCGM series name pods ({dcgm}), the engines' series {_few(engines)}; "
        f"{fix}, or name the GPUs in --map",
        tel.source,
        "--map",
    )


def _few(xs: list[Any]) -> str:
    return ", ".join(map(str, xs[:3])) + (f" and {len(xs) - 3} more" if len(xs) > 3 else "") if xs else "none"
