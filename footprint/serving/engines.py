"""What each inference engine calls its token, request and busy-time counters: one table, one row per engine.

Every name below was checked in the engine's own repository (the file is given in ``source``). The table
maps each engine onto the same few quantities, all cumulative counters (a histogram's ``_sum`` is one):

- ``tokens_in`` / ``tokens_out``: prompt and generated tokens;
- ``requests``: finished requests (None where the engine publishes no such counter: llama.cpp);
- ``prefill_s`` / ``decode_s``: seconds spent in each phase, the activity that splits a GPU's energy
  between the models sharing it and a model's energy between its input and output tokens. The unit
  differs by engine and is said in ``busy_unit``: vLLM and SGLang time *requests* (batched requests
  overlap, so request-seconds exceed GPU-seconds), TGI times *batches* (forward passes, GPU-seconds),
  llama.cpp times its slots (a slot serves one request at a time: each request's prompt and generation time,
  summed over slots that run together, so request-seconds too). ``busy_of`` says which: request or batch.

A series is ``(metric, matchers)``; a histogram's sum is given by its ``_sum`` name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from footprint.errors import FootprintError

FIELDS = ("tokens_in", "tokens_out", "requests", "prefill_s", "decode_s")


@dataclass(frozen=True)
class Engine:
    name: str
    prefix: str  # every metric of the engine starts with it: how an engine is recognised
    tokens_in: str
    tokens_out: str
    requests: str | None
    prefill_s: str | None
    decode_s: str | None
    model_label: str | None  # the label naming the served model (None: the engine publishes none)
    busy_unit: str
    source: str
    #: what one busy second is a second of: "request" (each request's or slot's own time, summed: batched requests
    #: overlap) or "batch" (a forward pass, GPU wall time). Only seconds of the same thing are added across engines.
    busy_of: str = "request"

    def metric(self, field: str) -> tuple[str, str] | None:
        """(metric name, extra matchers) of a field, or None when the engine has no such counter."""
        expr = getattr(self, field)
        if expr is None:
            return None
        name, _, matchers = expr.partition("{")
        return name, matchers.rstrip("}")

    def metric_names(self) -> list[str]:
        return [m[0] for f in FIELDS if (m := self.metric(f))]


ENGINES: tuple[Engine, ...] = (
    Engine(
        "vllm",
        "vllm:",
        tokens_in="vllm:prompt_tokens_total",
        tokens_out="vllm:generation_tokens_total",
        requests="vllm:request_success_total",
        prefill_s="vllm:request_prefill_time_seconds_sum",
        decode_s="vllm:request_decode_time_seconds_sum",
        model_label="model_name",
        busy_unit="request-seconds",
        source="vllm-project/vllm docs/design/metrics.md (v0 and v1 metric list: counters and the "
        "request_prefill/decode_time_seconds histograms; vllm/v1/metrics/loggers.py defines them)",
    ),
    Engine(
        "tgi",
        "tgi_",
        tokens_in="tgi_request_input_length_sum",
        tokens_out="tgi_request_generated_tokens_sum",
        requests="tgi_request_success",
        prefill_s='tgi_batch_forward_duration_sum{method="prefill"}',
        decode_s='tgi_batch_forward_duration_sum{method="decode"}',
        model_label=None,
        busy_unit="batch-seconds",
        source="huggingface/text-generation-inference router/src/server.rs (describe_histogram: "
        "tgi_request_input_length, tgi_request_generated_tokens, tgi_batch_forward_duration per method; "
        "describe_counter tgi_request_success) and router/src/infer/v3/scheduler.rs (method=prefill|decode)",
        busy_of="batch",
    ),
    Engine(
        "sglang",
        "sglang:",
        tokens_in="sglang:prompt_tokens_total",
        tokens_out="sglang:generation_tokens_total",
        requests="sglang:num_requests_total",
        prefill_s="sglang:time_to_first_token_seconds_sum",
        decode_s=None,
        model_label="model_name",
        busy_unit="request-seconds (time to first token only: includes queueing; no decode-time histogram)",
        source="sgl-project/sglang python/sglang/srt/metrics/collector.py (prompt_tokens_total, "
        "generation_tokens_total, num_requests_total, time_to_first_token_seconds) and "
        "docs/references/production_metrics.md",
    ),
    Engine(
        "llamacpp",
        "llamacpp:",
        tokens_in="llamacpp:prompt_tokens_total",
        tokens_out="llamacpp:tokens_predicted_total",
        requests=None,
        prefill_s="llamacpp:prompt_seconds_total",
        decode_s="llamacpp:tokens_predicted_seconds_total",
        model_label=None,
        busy_unit="slot-seconds",
        source="ggml-org/llama.cpp tools/server/server.cpp (handle_metrics: prompt_tokens_total, "
        "prompt_seconds_total, tokens_predicted_total, tokens_predicted_seconds_total; no request counter) "
        "and tools/server/README.md (GET /metrics)",
    ),
)
BY_NAME = {e.name: e for e in ENGINES}


def detect(metric_names: Iterable[str], where: str) -> list[Engine]:
    """The engines whose token counters are among ``metric_names``; none: one error listing what was found."""
    names = set(metric_names)
    found = [e for e in ENGINES if e.tokens_out.partition("{")[0] in names]
    if found:
        return found
    near = sorted(n for n in names if any(n.startswith(e.prefix) for e in ENGINES))
    other = sorted(n for n in names if not n.startswith(("DCGM_", "node_", "kepler_", "go_", "process_", "prometheus_")))
    shown = near or other
    listed = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
    expected = ", ".join(e.tokens_out for e in ENGINES)
    raise FootprintError(
        f"no serving engine's token counters found (expected one of {expected}); found: {listed or 'no engine metric'}",
        where,
    )
