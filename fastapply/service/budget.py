"""The witness's time budget (:attr:`ServiceConfig.witness_budget_s`): how long the
model would take to read a prompt on this server (:func:`prefill_s`), and the refusal of an
unsure merge whose witness would not finish in time (:func:`over_budget`)."""

from __future__ import annotations

import time
from typing import Any

from fastapply.decoding.witness import Reading

#: A prompt token costs more the longer the prompt (attention reads every earlier token):
#: per token, a prompt of n tokens costs about (1 + n / PREFILL_GROWTH_TOKENS) times a short
#: one. Measured on the 2-core CPU (default model, float32): 2.0-2.3 ms a token at 257-1,024
#: tokens, 2.5 at 2,048, 3.1 at 4,096, 3.7 at 6,000.
PREFILL_GROWTH_TOKENS = 7200


def observed_ms_per_token(stats: Any) -> float | None:
    """The cost of a prompt token a finished request saw (its time to first token over the
    prompt tokens it ran, shrunk by the same growth as :func:`prefill_s`), or None when it
    ran too few to tell (prompt reuse, a tiny prompt)."""
    ran = stats.prompt_tokens - stats.reused_prompt_tokens
    if ran < 64 or not stats.ttft_ms:
        return None
    return float(stats.ttft_ms) / ran / (1 + stats.prompt_tokens / PREFILL_GROWTH_TOKENS)


def prefill_s(runtime: Any, prompt_ids: list[int],
              seen_ms_per_token: float | None = None) -> float | None:
    """About how many seconds ``runtime`` needs to read ``prompt_ids`` before its first
    token: the tokens its prompt cache cannot reuse, at the per-token cost of the longest
    pass it measured at load, grown for the prompt's length (PREFILL_GROWTH_TOKENS); None
    where nothing was measured (K configured, TensorRT-LLM). ``seen_ms_per_token``, the
    cost the server's recent requests saw (:func:`observed_ms_per_token`), lowers it: a
    server loaded while the machine was busy measured its passes up to 10x too slow, and
    would otherwise refuse what it reads in time once the load is gone. On a CPU the prompt
    dominates a witness's time: a 6,000-token file took 19-33 s to read on the 2-core
    machine.

    >>> from types import SimpleNamespace
    >>> cpu = SimpleNamespace(pass_cost_ms={1: 30.0, 257: 514.0}, prompt_cache=None)
    >>> round(prefill_s(cpu, [0] * 7200), 1)  # 2 ms a token, twice that at 7,200 tokens
    28.8
    >>> round(prefill_s(cpu, [0] * 7200, seen_ms_per_token=1.0), 1)  # faster since
    14.4
    >>> prefill_s(SimpleNamespace(), [0] * 7200) is None  # nothing measured
    True
    """
    costs: dict[int, float] = getattr(runtime, "pass_cost_ms", None) or {}
    if not costs:
        return None
    cache = getattr(runtime, "prompt_cache", None)
    shared = cache.peek(prompt_ids) if cache is not None else 0
    longest = max(costs)
    per_token = costs[longest] / longest
    if seen_ms_per_token is not None:
        per_token = min(per_token, seen_ms_per_token)
    n = len(prompt_ids) - shared
    return n * per_token / 1000 * (1 + len(prompt_ids) / PREFILL_GROWTH_TOKENS)


def late_prefill_s(runtime: Any, prompt_ids: list[int], seen_ms_per_token: float | None,
                   deadline: float | None) -> float | None:
    """The predicted seconds to read ``prompt_ids`` (:func:`prefill_s`) when reading them
    would end past ``deadline`` (a ``time.perf_counter()`` value), so the witness should be
    refused before its first pass; None otherwise (in time, no deadline, nothing measured)."""
    if deadline is None:
        return None
    need = prefill_s(runtime, prompt_ids, seen_ms_per_token)
    return need if need is not None and time.perf_counter() + need > deadline else None


def over_budget(reading: Reading, budget_s: float, watch: Any = None,
                read_what: str = "the whole file to witness one place") -> str:
    """The refusal of an unsure merge whose witness ran out of time: where the merge was
    unsure, how far the model had read, and what to send instead."""
    from fastapply.merge.apply import MergeResult

    merge: MergeResult | None = reading.merge
    place = merge.uncertain[0] if merge is not None and merge.uncertain else None
    where = f" at line {place.line} ({place.message})" if place is not None and place.line \
        else f" ({place.message})" if place is not None else ""
    read = ""
    if watch is not None and getattr(watch, "expected", None):
        lines = watch.expected.count("\n", 0, watch.checked)
        total = watch.expected.count("\n")
        read = f"; the model had written {lines} of its {total} lines, all as the merge did,"
    from fastapply.decoding.witness import readings_there

    there = readings_there(reading) if merge is not None else ""
    return (f"the deterministic merge is unsure{where}{read} when the request's witness "
            f"budget of {budget_s:g} s ran out (the model reads {read_what}; server option "
            f"witness_budget_s); nothing was merged: show more "
            f"unchanged lines around the change so the merge is certain there, or send it "
            f"as SEARCH/REPLACE blocks" + (f"\n{there}" if there else ""))
