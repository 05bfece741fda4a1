"""How a GPU shared by engines that time their work in different units is split: one common unit, never two.

Engines time different things (vLLM and SGLang request-seconds, TGI batch-seconds, llama.cpp slot-seconds) and SGLang
times no decode at all, so adding one engine's seconds to another's tokens compares nothing. On each GPU and window:

- every engine on it has prefill and decode seconds **of the same thing** (`footprint.serving.engines`'
  ``busy_of``: vLLM's request-seconds and llama.cpp's slot-seconds are both each request's own time): they split it
  (busy time, the engines' own measure). TGI's batch-seconds are seconds too but not that unit: 32 requests batched
  for a second are 32 request-seconds and one batch-second, so added they would hand the GPU to the engine that
  batches more;
- otherwise every engine's activity is its tokens weighted by a **stated cost model**: the compute of a forward
  pass, about 2 N FLOPs per token for a model of N parameters (Kaplan et al. 2020, "Scaling Laws for Neural
  Language Models", section 2.1). N is the parameters **active** per token: the map's ``params: {model: N}`` where
  given, else read from the name (``Llama-3.1-8B`` -> 8e9; a mixture of experts' active count where the name says
  it, ``Qwen3-30B-A3B`` -> 3e9). A name that gives no size, or an MoE's total only (``Mixtral-8x7B``: 8 experts of
  7B, 12.9B active per token, which no name arithmetic gives), weighs each token as 1e9 parameters and says so,
  naming the map key that fixes it. Every N used, and where it came from, is in the notes (an MoE named by its total
  alone, ``gpt-oss-120b``, cannot be told from a dense model: the note is where a reader sees the 1.2e11).
  The split is an **estimate** and is flagged on the GPU and its models: decode is memory-bound, so a small
  model's tokens cost more than their FLOPs say.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from footprint.serving.engines import BY_NAME

COST_MODEL = "tokens x 2N FLOPs (N: parameters active per token, from the map's params or the model name; Kaplan et al. 2020)"
DEFAULT_PARAMS = 1e9
UNITS = ["busy seconds", "estimate: " + COST_MODEL, "tokens"]  # the unit a GPU-window's models are split in
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")
_ACTIVE = re.compile(r"(?<![a-zA-Z\d.])[aA](\d+(?:\.\d+)?)[bB](?![a-zA-Z])")  # Qwen3-30B-A3B: 3B active per token
_EXPERTS = re.compile(r"(?<![\d.])\d+x\d+(?:\.\d+)?[bB](?![a-zA-Z])", re.IGNORECASE)  # Mixtral-8x7B: experts x size


def params_of(model: str) -> float | None:
    """Parameters active per token from a model's name: an MoE's ``A<n>B``; else the last ``<n>B`` (a ``-1M`` or
    ``-128k`` after it is a context length, not a size), else the last ``<n>M``; None for ``<E>x<n>B`` (experts x
    size: the active count is not in it) or a name without a size."""
    name = str(model)
    if active := _ACTIVE.findall(name):
        return float(active[-1]) * 1e9
    if _EXPERTS.search(name):
        return None
    hits = _SIZE.findall(name)
    billions = [n for n, unit in hits if unit in "bB"]
    if billions:
        return float(billions[-1]) * 1e9
    return float(hits[-1][0]) * 1e6 if hits else None


def sizes(models: set[str], given: dict[str, float]) -> dict[str, tuple[float | None, str]]:
    """Each model's (N, where it came from): the map's ``params``, else its name, else (None, why not)."""
    out: dict[str, tuple[float | None, str]] = {}
    for m in models:
        if m in given:
            out[m] = (float(given[m]), "map")
        elif (n := params_of(m)) is not None:
            out[m] = (n, "name")
        else:
            why = "experts x size: active parameters not in the name" if _EXPERTS.search(str(m)) else "no size in the name"
            out[m] = (None, why)
    return out


def activity(slots: pd.DataFrame, notes: list[str], params: dict[str, float] | None = None) -> pd.DataFrame:
    """``slots`` with ``act`` (each engine row's activity on its GPU, in the GPU-window's one unit) and ``unit``.
    ``params``: parameters active per token by model (the map's ``params``), over what the names say."""
    timed = slots["prefill_s"].notna() & slots["decode_s"].notna()
    unit = slots["engine"].map({name: e.busy_of for name, e in BY_NAME.items()})
    slots = slots.assign(timed=timed, busy_s=slots["prefill_s"].fillna(0) + slots["decode_s"].fillna(0))
    per = slots.assign(unit=unit).groupby(["window", "gkey"])
    all_timed = (per["timed"].transform("all").astype(bool) & (per["unit"].transform("nunique") == 1)).to_numpy(bool)
    size = sizes(set(slots["model"]), params or {})
    n = slots["model"].map({m: s[0] or DEFAULT_PARAMS for m, s in size.items()}).to_numpy(float)
    tokens = (slots["tokens_in"].fillna(0) + slots["tokens_out"].fillna(0)).to_numpy(float)
    slots["by_busy"] = all_timed  # the GPU-window is split, and its busy fraction read, in busy seconds
    slots["act"] = np.where(all_timed, slots["busy_s"], tokens * 2.0 * n)
    models_on = slots.groupby(["window", "gkey"])["model"].transform("nunique")
    # a category, not a string per row: a month of a fleet has millions of rows and the estimate's name is long
    code = np.where(all_timed, 0, np.where(models_on > 1, 1, 2))
    slots["unit"] = pd.Categorical.from_codes(code, UNITS)
    shared = sorted(set(slots.loc[slots["unit"].str.startswith("estimate"), "model"]))
    if shared:
        said = "; ".join(
            f"{m} {s[0]:.3g} (from its {s[1]})" if s[0] else f"{m} 1e9 assumed ({s[1]})"
            for m, s in ((m, size[m]) for m in shared)
        )
        notes.append(
            f"shared-GPU estimate, parameters active per token: {said}; a mixture of experts named by its total "
            "(gpt-oss-120b) or unsized: give its active count in the map (params: {model: N})"
        )
    return slots
