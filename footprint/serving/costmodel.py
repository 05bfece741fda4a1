"""How a GPU shared by engines that time their work in different units is split: one common unit, never two.

Engines time different things (vLLM and SGLang request-seconds, TGI batch-seconds, llama.cpp slot-seconds) and SGLang
times no decode at all, so adding one engine's seconds to another's tokens compares nothing. On each GPU and window:

- every engine on it has prefill and decode seconds: they split it (busy time, the engines' own measure);
- otherwise every engine's activity is its tokens weighted by a **stated cost model**: the compute of a forward
  pass, about 2 N FLOPs per token for a model of N parameters (Kaplan et al. 2020, "Scaling Laws for Neural
  Language Models", section 2.1), with N read from the model's name (``Llama-3.1-8B`` -> 8e9). A model whose name
  gives no size weighs each token as 1e9 parameters, and says so. The split is an **estimate** and is flagged on the
  GPU and its models: decode is memory-bound, so a small model's tokens cost more than their FLOPs say.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

COST_MODEL = "tokens x 2N FLOPs (N: parameters from the model name; Kaplan et al. 2020)"
DEFAULT_PARAMS = 1e9
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")


def params_of(model: str) -> float | None:
    """Parameters from a model's name: the last ``<number>B`` or ``<number>M`` (``Mixtral-8x7B`` -> 7e9)."""
    hits = _SIZE.findall(str(model))
    if not hits:
        return None
    n, unit = hits[-1]
    return float(n) * (1e9 if unit in "bB" else 1e6)


def activity(slots: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """``slots`` with ``act`` (each engine row's activity on its GPU, in the GPU-window's one unit) and ``unit``."""
    timed = slots["prefill_s"].notna() & slots["decode_s"].notna()
    slots = slots.assign(timed=timed, busy_s=slots["prefill_s"].fillna(0) + slots["decode_s"].fillna(0))
    all_timed = slots.groupby(["window", "gkey"])["timed"].transform("all").astype(bool)
    sizes = {m: params_of(m) for m in set(slots["model"])}
    n = slots["model"].map(lambda m: sizes[m] or DEFAULT_PARAMS).to_numpy(float)
    tokens = (slots["tokens_in"].fillna(0) + slots["tokens_out"].fillna(0)).to_numpy(float)
    slots["act"] = np.where(all_timed, slots["busy_s"], tokens * 2.0 * n)
    models_on = slots.groupby(["window", "gkey"])["model"].transform("nunique")
    slots["unit"] = np.where(all_timed, "busy seconds", np.where(models_on > 1, "estimate: " + COST_MODEL, "tokens"))
    shared = slots["unit"].str.startswith("estimate")
    unsized = sorted(m for m, s in sizes.items() if s is None and (shared & (slots["model"] == m)).any())
    if unsized:
        notes.append(
            f"no parameter count in the name of {', '.join(unsized[:3])}: its tokens weigh 1e9 parameters in the shared-GPU "
            "estimate (name it in --map)"
        )
    return slots
