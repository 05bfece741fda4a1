"""Who used each GPU-joule: models by measured activity, the rest an explicit residual, so the books close.

Per GPU and window (energy E over T seconds):

- the models on it come from the pod mapping (dcgm-exporter's ``namespace``/``pod`` labels joined to the
  engine series' ``namespace``/``pod``) or from the user's map (host + GPU indices -> model);
- their activity A_m is the engine's busy seconds (prefill + decode time histograms); the GPU's busy
  fraction is f = min(1, sum A / T). Without time histograms, tokens split the GPU and f = 1 in a window
  with tokens, 0 without;
- idle energy = min(E, P_idle x T x (1 - f)), with P_idle the GPU's median power over its windows with no
  activity (measured; with no such window, its lowest window: an upper bound, said in the notes);
  the rest, E - idle, is active energy, split between the models by A_m, and within a model between
  prefill and decode by their seconds;
- GPU time is split the same way (the embodied share follows it); idle time stays with the idle energy.

Idle energy, and all the energy of GPUs no model was mapped to, is the **residual**: shown, never
dropped. The "+ idle reserve" boundary hands each GPU's idle energy and time to the models that used it,
pro rata their active energy on it; a GPU no model used stays unattributed in every boundary. Host
CPU+RAM energy (node RAPL) goes to a host's models by their share of its GPUs' active energy.
Engine windows whose GPUs have no energy reading (an exporter gap, an unmapped pod) are "tokens
without energy": kept out of every per-token figure, counted and flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from footprint.errors import FootprintError
from footprint.serving import costmodel, grouping
from footprint.serving.telemetry import Telemetry, short_host

GAP_SHARE = 0.5  # a window with fewer than half its expected samples is a gap in the health table


@dataclass
class Attribution:
    models_w: pd.DataFrame  # window, model, active_j, prefill_j, decode_j, host_j, gpu_s, tokens_in, tokens_out, requests
    unmetered: pd.DataFrame  # window, model, tokens_in, tokens_out, requests: tokens without energy
    residual_w: pd.DataFrame  # window, idle_j, unused_j, host_j
    reserve: pd.DataFrame  # model, idle_j, idle_s, host_idle_j: the idle reserve each model's GPUs carried
    gpus: pd.DataFrame  # per GPU: host, gpu, uuid, gpu_model, energy_j, active_j, idle_j, idle_w, models, method
    health: pd.DataFrame  # per counter: what, host/pod, windows, gaps, resets, lost_j (estimated)
    models: pd.DataFrame  # per model: engine, gpu_model, flags
    usage: pd.DataFrame  # per GPU and model: host, gpu, model, active_j (who used which GPU, for the health ranges)
    window_s: float = 300.0
    notes: list[str] = field(default_factory=list)

    @property
    def metered_gpu_j(self) -> float:
        return float(self.gpus["energy_j"].sum())


def parse_map(data: Any, file: str) -> dict[str, Any]:
    """The user's map: ``gpus: [{host, gpus: [0, 1], model}]``, ``pods: {pod: model}`` and/or ``params: {model: N}``
    (parameters active per token, for the shared-GPU cost model, `footprint.serving.costmodel`)."""
    if not isinstance(data, dict) or not set(data) <= {"gpus", "pods", "params"}:
        raise FootprintError(
            "expected a mapping with 'gpus' (a list of {host, gpus, model}), 'pods' ({pod: model}) and/or "
            "'params' ({model: parameters active per token})",
            file,
        )
    pods = data.get("pods") or {}
    if not isinstance(pods, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pods.items()):
        raise FootprintError("expected pod name: model name pairs", file, "pods")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise FootprintError("expected model name: parameters active per token (e.g. 12.9e9) pairs", file, "params")
    sizes: dict[str, float] = {}
    for k, v in params.items():
        n = _number(v)  # YAML reads 12.9e9 (no sign after the e) as a string
        if not isinstance(k, str) or n is None or not 0 < n < 1e15:
            raise FootprintError("expected a number of parameters active per token, > 0 (e.g. 12.9e9)", file, f"params.{k}")
        sizes[k] = n
    rows = []
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    for i, e in enumerate(data.get("gpus") or []):
        key = f"gpus[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("host"), str) or not isinstance(e.get("model"), str):
            raise FootprintError("expected {host: NAME, gpus: [0, 1, ...], model: NAME}", file, key)
        idx = e.get("gpus")
        if (
            not isinstance(idx, list)
            or not idx
            or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in idx)
        ):
            raise FootprintError("expected a list of GPU indices (whole numbers >= 0)", file, f"{key}.gpus")
        for g in idx:  # one GPU named for two models would have its energy counted for each of them
            other = seen.setdefault((e["host"], g), (key, e["model"]))
            if other[1] != e["model"]:
                raise FootprintError(
                    f"GPU {g} of {e['host'][:60]!r} is mapped to {other[1][:60]!r} ({other[0]}) and to {e['model'][:60]!r}: "
                    "map each GPU to the one model it serves",
                    file,
                    f"{key}.gpus",
                )
        rows += [(e["host"], str(g), e["model"]) for g in idx]
    return {
        "pods": pods,
        "gpus": pd.DataFrame(rows, columns=["host", "gpu", "model"]),
        "params": sizes,
    }


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _slots(eng: pd.DataFrame, gmap: pd.DataFrame | None, place: pd.DataFrame) -> pd.DataFrame:
    """(window, host, gpu, model, prefill_s, decode_s, tokens): each engine row on each GPU it ran on. GPUs the map
    names go to its models; every other GPU keeps its pod-based attribution, the mapped models' pods included."""
    mapped_gpus: set[tuple[str, str]] = set()
    if gmap is not None and len(gmap):
        mapped_gpus = set(zip(gmap["host"], gmap["gpu"].astype(str), strict=True))
        keep = [(h, str(g)) not in mapped_gpus for h, g in zip(place["host"], place["gpu"], strict=True)]
        place = place[np.asarray(keep, dtype=bool)]
    pl = place.drop_duplicates(["window", "host", "gpu", "namespace", "pod"])
    pod = eng.merge(pl, on=["window", "namespace", "pod"])[["window", "host", "gpu", "model", "engine_row", "via"]]
    parts = [pod.drop(columns="via")]
    if mapped_gpus:
        e = eng.assign(ehost=eng["instance"].map(short_host))
        on_host = e.merge(gmap, left_on=["model", "ehost"], right_on=["model", "host"])  # type: ignore[arg-type]
        placed = set(pod.loc[pod["via"] == "", "engine_row"])  # rows on their own pods' GPUs stay there only
        free = e[~e["model"].isin(set(on_host["model"])) & ~e["engine_row"].isin(placed)]
        rest = free.merge(gmap, on="model")  # type: ignore[arg-type]  # no host label to match: the model's GPUs
        cols = ["window", "host", "gpu", "model", "engine_row"]
        parts += [on_host[cols], rest[cols]]
    parts = [x for x in parts if len(x)]
    slots = pd.concat(parts, ignore_index=True).drop_duplicates() if parts else pod
    slots = slots.astype({"window": "int64", "engine_row": "int64"})
    cols = ["engine", "prefill_s", "decode_s", "tokens_in", "tokens_out"]
    return slots.merge(eng[["engine_row", *cols]], on="engine_row")


def _disagreements(place: pd.DataFrame, eng: pd.DataFrame, gmap: pd.DataFrame | None, notes: list[str]) -> None:
    """A GPU the map names for one model while its pod serves another: the map is followed, and says so."""
    if gmap is None or not len(gmap) or not len(place) or not len(eng):
        return
    served = eng[["namespace", "pod", "model"]].drop_duplicates()
    on = place[["host", "gpu", "namespace", "pod"]].drop_duplicates().merge(served, on=["namespace", "pod"])
    on = on.assign(gpu=on["gpu"].astype(str)).merge(gmap.assign(gpu=gmap["gpu"].astype(str)), on=["host", "gpu"])
    differ = on[on["model_x"] != on["model_y"]].drop_duplicates(["host", "gpu"])
    if len(differ):
        said = "; ".join(
            f"{h}/{g} for {m} (its pod {p} serves {x})"
            for h, g, m, p, x in zip(
                differ["host"], differ["gpu"], differ["model_y"], differ["pod"], differ["model_x"], strict=True
            )
        )
        notes.append(
            f"--map names GPU(s) against their pods: {said}; the map is followed: those pods' engines lose the GPU "
            "(their tokens there are without energy) and the mapped model's GPU carries only its activity placed there"
        )


def attribute(tel: Telemetry, gpu_map: dict[str, Any] | None = None, pod_label: str | None = None) -> Attribution:
    """Split every metered GPU- and host-joule between the models, the idle reserve and the unattributed residual.
    ``pod_label``: the DCGM series' pod label (default: the layout the engines' pods match)."""
    notes = list(tel.notes)
    eng = tel.engines.copy()
    pod_models = (gpu_map or {}).get("pods") or {}
    if pod_models:
        named = eng["pod"].map(pod_models)
        eng["model_flag"] = np.where(named.notna(), "", eng["model_flag"])
        eng["model"] = named.fillna(eng["model"])
    eng["engine_row"] = np.arange(len(eng))
    place = grouping.choose_layout(tel.placement, eng, pod_label, notes)
    place = grouping.group_workers(place, eng, tel.pod_sets, pod_models, notes)
    gmap = gpu_map["gpus"] if gpu_map else None
    _disagreements(place, eng, gmap, notes)
    slots = _slots(eng, gmap, place)
    if not len(slots) and len(eng):
        raise grouping.no_match(tel, place, eng, pod_label is not None)
    g, info = _gpu_rows(tel.gpus)
    g["T"] = tel.seconds(g["window"])  # each window's real length: a live watch's first one is partial
    slots["gkey"] = _keys(slots, info)
    # a window with under half its scrapes (an exporter gap) is metered but attributed to no one: its tokens are
    # "without energy" rather than charged a fraction of the window's energy
    g["short"] = (g["method"] == "dcgm_energy_counter") & (g["samples"] < GAP_SHARE * g["T"] / tel.scrape_s)
    slots = slots.merge(g.loc[~g["short"], ["window", "gkey"]], on=["window", "gkey"], how="inner")
    slots = costmodel.activity(
        slots, notes, (gpu_map or {}).get("params")
    )  # one unit per GPU and window: busy seconds, or tokens x a cost model
    per = slots.groupby(["window", "gkey"]).agg(sum_act=("act", "sum"), all_timed=("by_busy", "all"), busy=("busy_s", "sum"))
    g = g.merge(per, left_on=["window", "gkey"], right_index=True, how="left")
    g["has_model"] = g["sum_act"].notna()
    g["f"] = np.where(
        g["all_timed"].fillna(False).astype(bool),
        np.minimum(1.0, g["busy"].fillna(0) / g["T"]),
        (g["sum_act"].fillna(0) > 0) * 1.0,
    )
    idle_w = _idle_power(g, notes)
    g["idle_w"] = g["gkey"].map(idle_w)
    g["idle_j"] = np.where(g["has_model"], np.minimum(g["energy_j"], g["idle_w"] * g["T"] * (1 - g["f"])), 0.0)
    g["active_j"] = np.where(g["has_model"] & (g["sum_act"] > 0), g["energy_j"] - g["idle_j"], 0.0)
    g["unused_j"] = g["energy_j"] - g["idle_j"] - g["active_j"]  # no model mapped, or busy without engine activity
    slots = slots.merge(g[["window", "gkey", "active_j", "f", "sum_act", "T"]], on=["window", "gkey"])
    share = np.where(slots["sum_act"] > 0, slots["act"] / slots["sum_act"].where(slots["sum_act"] > 0, 1), 0.0)
    slots["active_j"] = slots["active_j"] * share
    slots["gpu_s"] = slots["T"] * slots["f"] * share
    pre = np.where(
        slots["timed"].to_numpy(bool) & (slots["busy_s"] > 0),
        slots["prefill_s"].fillna(0) / slots["busy_s"].where(slots["busy_s"] > 0, 1),
        np.nan,
    )
    slots["prefill_j"] = slots["active_j"] * pre
    slots["decode_j"] = slots["active_j"] * (1 - pre)
    host_j = _host_split(tel, slots, g)
    models_w, unmetered = _per_model(eng, slots, host_j)
    models_w["seconds"] = tel.seconds(models_w["window"])  # per-window rates (tokens/s) divide by it
    reserve = _reserve(g, slots)
    residual = g.groupby("window").agg(idle_j=("idle_j", "sum"), unused_j=("unused_j", "sum")).reset_index()
    hres = _host_residual(tel, host_j)
    residual = residual.merge(hres, on="window", how="outer").fillna(0.0)
    gpus = _gpu_table(g, slots)
    models = eng.groupby("model")[["engine", "model_flag"]].first().rename(columns={"model_flag": "flag"}).reset_index()
    gm = slots.merge(g[["window", "gkey", "gpu_model"]], on=["window", "gkey"]).groupby("model")["gpu_model"].agg(_mode)
    models["gpu_model"] = models["model"].map(gm)
    _flag_estimates(models, slots, notes)
    if len(unmetered):
        n = unmetered["tokens_out"].sum()
        notes.append(
            f"{n:,.0f} output tokens in windows without a GPU energy reading (an exporter gap or a pod not on any "
            "metered GPU): kept out of every per-token figure"
        )
    usage = slots.groupby(["host", "gpu", "model"], as_index=False)["active_j"].sum()
    _uncatalogued(g, notes)
    return Attribution(models_w, unmetered, residual, reserve, gpus, _health(tel, g, eng), models, usage, tel.window_s, notes)


def _flag_estimates(models: pd.DataFrame, slots: pd.DataFrame, notes: list[str]) -> None:
    """A model that shared a GPU with an engine timing in another unit: its energy there is the cost model's estimate."""
    est = slots[slots["unit"].str.startswith("estimate")]
    if not len(est):
        return
    share = (est.groupby("model")["active_j"].sum() / slots.groupby("model")["active_j"].sum()).dropna()
    for i, m in enumerate(models["model"]):
        if m in share.index:
            f = (
                f"{share[m] * 100:.0f} % of its GPU energy is an estimate: shared a GPU with engines timing other "
                f"units, split by {costmodel.COST_MODEL}"
            )
            models.loc[i, "flag"] = "; ".join(x for x in (models.loc[i, "flag"], f) if isinstance(x, str) and x)
    gpus = sorted({f"{h}/{x}" for h, x in zip(est["host"], est["gpu"], strict=True)})
    notes.append(
        f"GPU(s) {', '.join(gpus)} shared by engines without a common time unit: split by {costmodel.COST_MODEL} (an estimate)"
    )


def _keys(df: pd.DataFrame, info: pd.DataFrame) -> np.ndarray:
    """Integer GPU slot (host + index) of every row; -1 for a slot with no energy reading."""
    code = {(h, str(i)): k for k, h, i in zip(info.index, info["host"], info["gpu"], strict=True)}
    return np.fromiter((code.get((h, str(i)), -1) for h, i in zip(df["host"], df["gpu"], strict=True)), np.int64, len(df))


def _gpu_rows(gpus: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per GPU slot and window with integer slot keys, the slots' labels): a card swapped within a window
    (a new UUID in the same slot) adds up; the label strings stay in the small table, not on every row."""
    info = gpus.drop_duplicates(["host", "gpu"])[["host", "gpu", "uuid", "gpu_model", "method"]].reset_index(drop=True)
    info["gpu"] = info["gpu"].astype(str)
    g = pd.DataFrame({"window": gpus["window"].to_numpy(np.int64), "gkey": _keys(gpus, info)})
    g["energy_j"], g["samples"], g["resets"] = (
        gpus["energy_j"].to_numpy(float),
        gpus["samples"].to_numpy(),
        gpus["resets"].to_numpy(),
    )
    g = g.groupby(["window", "gkey"], as_index=False).agg({"energy_j": "sum", "samples": "max", "resets": "sum"})
    codes = g["gkey"].to_numpy()
    for c in ("host", "gpu", "uuid", "gpu_model", "method"):  # object columns: every row points at the slot's one string
        g[c] = pd.Series(info[c].to_numpy(object)[codes], dtype=object)
    return g, info


def _mode(s: pd.Series) -> Any:
    m = s.mode()
    return m.iloc[0] if len(m) else None


def _idle_power(g: pd.DataFrame, notes: list[str]) -> dict[str, float]:
    """Per GPU: median power of its windows with no activity (measured); else its lowest window (an upper bound)."""
    p = g["energy_j"] / g["T"]
    quiet = g[(g["f"] == 0) & g["has_model"]]
    out = p[quiet.index].groupby(quiet["gkey"]).median().to_dict()
    lowest = p.groupby(g["gkey"]).min()
    bound = [k for k in lowest.index if k not in out and g.loc[g["gkey"] == k, "has_model"].any()]
    for k in lowest.index:
        out.setdefault(k, float(lowest[k]))
    if bound:
        notes.append(
            f"{len(bound)} GPU(s) never idle in the window: their idle power is their lowest window's mean, an upper bound"
        )
    return out


def _host_split(tel: Telemetry, slots: pd.DataFrame, g: pd.DataFrame) -> pd.DataFrame:
    """(window, model, host_j): each host's energy by its models' share of its GPUs' energy."""
    if not len(tel.hosts) or not len(slots):
        return pd.DataFrame(columns=["window", "model", "host_j"])
    gpu_e = g.groupby(["window", "host"])["energy_j"].sum().rename("gpu_e")
    s = slots.groupby(["window", "host", "model"])["active_j"].sum().reset_index()
    s = s.merge(gpu_e, on=["window", "host"]).merge(tel.hosts, on=["window", "host"])
    s["host_j"] = s["energy_j"] * s["active_j"] / s["gpu_e"].where(s["gpu_e"] > 0)
    return s.groupby(["window", "model"])["host_j"].sum().reset_index()


def _host_residual(tel: Telemetry, host_j: pd.DataFrame) -> pd.DataFrame:
    tot = tel.hosts.groupby("window")["energy_j"].sum()
    used = host_j.groupby("window")["host_j"].sum() if len(host_j) else pd.Series(dtype=float)
    return (tot.sub(used, fill_value=0.0)).rename("host_j").reset_index()


def _per_model(eng: pd.DataFrame, slots: pd.DataFrame, host_j: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    energy = slots.groupby(["window", "model"])[["active_j", "prefill_j", "decode_j", "gpu_s"]].sum(min_count=1).reset_index()
    metered_rows = set(slots["engine_row"].tolist())
    counted = eng["engine_row"].isin(metered_rows)
    cols = ["tokens_in", "tokens_out", "requests", "prefill_s", "decode_s"]
    tok = eng[counted].groupby(["window", "model"])[cols].sum(min_count=1).reset_index()
    out = energy.merge(tok, on=["window", "model"], how="outer").merge(host_j, on=["window", "model"], how="left")
    unmetered = eng[~counted].groupby(["window", "model"])[cols[:3]].sum(min_count=1).reset_index()
    return out.sort_values(["window", "model"]).reset_index(drop=True), unmetered


def _reserve(g: pd.DataFrame, slots: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's idle energy and time handed to the models that used it, pro rata their active energy on it."""
    use = slots.groupby(["gkey", "model"])["active_j"].sum().reset_index()
    tot = use.groupby("gkey")["active_j"].transform("sum")
    use["w"] = use["active_j"] / tot.where(tot > 0)
    g = g.assign(idle_s=np.where(g["has_model"], g["T"] * (1 - g["f"]), 0.0))
    idle = g.groupby("gkey")[["idle_j", "idle_s"]].sum()
    use = use.merge(idle, left_on="gkey", right_index=True)
    use["idle_j"] *= use["w"]
    use["idle_s"] *= use["w"]
    return use.groupby("model")[["idle_j", "idle_s"]].sum().reset_index()


def _gpu_table(g: pd.DataFrame, slots: pd.DataFrame) -> pd.DataFrame:
    models = slots.groupby("gkey")["model"].agg(lambda s: ", ".join(sorted(set(s))))
    busy = slots.groupby("gkey")["gpu_s"].sum()
    t = g.groupby("gkey").agg(
        host=("host", "first"),
        gpu=("gpu", "first"),
        uuid=("uuid", "first"),
        gpu_model=("gpu_model", "first"),
        method=("method", "first"),
        energy_j=("energy_j", "sum"),
        active_j=("active_j", "sum"),
        idle_j=("idle_j", "sum"),
        unused_j=("unused_j", "sum"),
        idle_w=("idle_w", "first"),
        windows=("window", "count"),
        seconds=("T", "sum"),
    )
    t["models"] = [models.get(k, "") for k in t.index]
    unit = slots.groupby("gkey")["unit"].agg(lambda u: "; ".join(sorted(set(u))))
    t["split"] = [unit.get(k, "") for k in t.index]  # the unit its models were split in (an estimate says so)
    t["busy_s"] = t.index.map(busy).fillna(0.0)
    return t.reset_index(drop=True)


def _health(tel: Telemetry, g: pd.DataFrame, eng: pd.DataFrame) -> pd.DataFrame:
    """Per GPU counter: windows missing or short of samples (gaps) and resets, with the energy they may hide: an
    estimate at the power measured around them (``lost_j``) and a bound at the GPU's limit (``lost_hi_j``, its TDP from
    lca_data or its highest measured power, whichever is higher): the range a model's energy is stated in."""
    n = tel.n_windows
    rows = []
    for _, d in g.groupby("gkey"):
        d = d.sort_values("window")
        # every window of the range: an exporter down at its start or end hides energy as much as one down inside it
        full = pd.RangeIndex(min(0, int(d["window"].min())), max(n, int(d["window"].max()) + 1))
        x = d.set_index("window").reindex(full)
        T = x["T"].fillna(tel.window_s)
        short = x["samples"] < GAP_SHARE * np.maximum(1.0, T / tel.scrape_s)
        short = short.fillna(False).astype(bool) & (d["method"].iloc[0] == "dcgm_energy_counter")
        missing = x["energy_j"].isna()
        hidden = np.where(missing | short, T, np.maximum(0.0, T - x["samples"].fillna(0) * tel.scrape_s))
        resets = int(d["resets"].sum())
        hidden_s = float(hidden.sum()) + resets * tel.scrape_s  # a reset hides at most one scrape interval
        power = (x["energy_j"] / T).where(~(missing | short))
        typical = float(power.median()) if power.notna().any() else 0.0
        around = pd.concat([power.ffill(), power.bfill()], axis=1).mean(axis=1).fillna(typical)
        lost = float((hidden * around).sum()) + resets * tel.scrape_s * typical
        limit = max(tdp_w(d["gpu_model"].iloc[0]), float(power.max()) if power.notna().any() else 0.0)
        gaps = int((missing | short).sum())
        rows.append(("gpu", d["host"].iloc[0], str(d["gpu"].iloc[0]), len(d), gaps, resets, lost, limit * hidden_s))
    for (pod, model), d in eng.groupby(["pod", "model"]):
        rows.append(("engine", pod, model, len(d), n - len(d) if len(d) < n else 0, int(d["resets"].sum()), 0.0, 0.0))
    return pd.DataFrame(rows, columns=["counter", "where", "which", "windows", "gaps", "resets", "lost_j", "lost_hi_j"])


def _uncatalogued(g: pd.DataFrame, notes: list[str]) -> None:
    """Cards not in lca_data: their gap bound is not their own limit, and a range built on it says so."""
    from footprint.lca.database import db

    unknown = []
    for m in sorted(set(map(str, g["gpu_model"]))):
        try:
            db().find_gpu(m)
        except (FootprintError, TypeError, ValueError, KeyError):
            unknown.append(m)
    if unknown:
        notes.append(
            f"GPU model(s) {', '.join(unknown[:3])} not in lca_data: a gap's 'at most' uses the catalogue's highest TDP "
            f"({tdp_w(None):,.0f} W) or the card's highest measured window, not its own limit; a card allowed more can "
            "exceed that bound"
        )


def tdp_w(gpu_model: Any) -> float:
    """The card's TDP from lca_data; for a card not in the catalogue, the highest TDP there (still a bound)."""
    from footprint.lca.database import db

    try:
        return float(db().find_gpu(str(gpu_model)).tdp_w)
    except (FootprintError, TypeError, ValueError, KeyError):
        return max(float(g.tdp_w) for g in db().gpus.values() if g.tdp_w)
