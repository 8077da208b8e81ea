"""The lossless contract: speculation changes speed only.

In float32 the verification loop returns exactly what plain greedy decoding returns,
token for token, whatever the drafts are (perfect, random, half right, shifted) and
whatever K is. Greedy here is transformers' own ``generate(do_sample=False)``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from fastapply.decoding.drafting import NoDrafter  # noqa: E402
from fastapply.decoding.runtimes.torch import TorchRuntime  # noqa: E402
from fastapply.decoding.speculate import ContextLimitError, generate  # noqa: E402
from fastapply.model.tiny import ensure_tiny_model  # noqa: E402

N_TOKENS = 120


@pytest.fixture(scope="module")
def runtime() -> TorchRuntime:
    return TorchRuntime(ensure_tiny_model(), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def prompt(runtime: TorchRuntime) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ensure_tiny_model())
    text = "def merge(original, snippet):\n    # ... existing code ...\n    return result\n"
    return list(tok.encode(text * 3, add_special_tokens=False))


@pytest.fixture(scope="module")
def greedy(runtime: TorchRuntime, prompt: list[int]) -> list[int]:
    with torch.inference_mode():
        out = runtime.model.generate(torch.tensor([prompt]), max_new_tokens=N_TOKENS,
                                     do_sample=False, eos_token_id=None)
    ids = out[0, len(prompt):].tolist()
    assert len(ids) == N_TOKENS
    assert len(set(ids)) > 20, "the tiny model's greedy output should vary"
    return ids


class ScriptedDrafter:
    """Proposes ``make(position)`` truncated to K: drafts of a chosen quality."""

    def __init__(self, make, k: int) -> None:
        self.make, self.k = make, k

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        return list(self.make(len(output)))[: min(self.k, max_len)]


def drafts(kind: str, target: list[int], k: int):
    rng = random.Random(k)
    if kind == "perfect":
        return lambda pos: target[pos:pos + k]
    if kind == "random":
        return lambda pos: [rng.randrange(2048) for _ in range(k)]
    if kind == "half_right":
        return lambda pos: target[pos:pos + max(1, k // 2)] + [rng.randrange(2048)] * k
    if kind == "shifted":  # the right text, one token late: never aligned
        return lambda pos: target[max(0, pos - 1):pos - 1 + k]
    raise AssertionError(kind)


@pytest.mark.parametrize("k", [1, 4, 16, 64])
@pytest.mark.parametrize("kind", ["perfect", "random", "half_right", "shifted"])
def test_output_equals_greedy(runtime, prompt, greedy, kind, k):
    gen = generate(runtime, prompt, ScriptedDrafter(drafts(kind, greedy, k), k),
                   max_new_tokens=N_TOKENS, stop_ids=set())
    assert gen.token_ids == greedy
    s = gen.stats
    assert s.completion_tokens == N_TOKENS
    assert s.finish_reason == "length"
    # Every pass after prefill yields accepted + 1 tokens.
    assert s.accepted_draft_tokens + (s.forward_passes - 1) + 1 == N_TOKENS
    if kind == "perfect":
        assert s.rejected_draft_tokens == 0
        assert s.forward_passes == 1 + -(-(N_TOKENS - 1) // (k + 1))
    if kind == "random":
        assert s.accepted_draft_tokens < N_TOKENS // 4


def test_plain_loop_equals_greedy(runtime, prompt, greedy):
    gen = generate(runtime, prompt, NoDrafter(), max_new_tokens=N_TOKENS, stop_ids=set())
    assert gen.token_ids == greedy
    assert gen.stats.forward_passes == N_TOKENS


def test_stop_token_inside_accepted_draft_ends_output(runtime, prompt, greedy):
    stop = greedy[40]
    first = greedy.index(stop)
    gen = generate(runtime, prompt, ScriptedDrafter(drafts("perfect", greedy, 16), 16),
                   max_new_tokens=N_TOKENS, stop_ids={stop})
    assert gen.token_ids == greedy[: first + 1]
    assert gen.stats.finish_reason == "stop"


def test_budget_is_respected_with_long_drafts(runtime, prompt, greedy):
    for budget in (1, 2, 17, 65):
        gen = generate(runtime, prompt, ScriptedDrafter(drafts("perfect", greedy, 64), 64),
                       max_new_tokens=budget, stop_ids=set())
        assert gen.token_ids == greedy[:budget]


def test_context_limit_is_an_error_not_a_truncation(prompt):
    small = TorchRuntime(ensure_tiny_model(), device="cpu", context_limit=len(prompt))
    with pytest.raises(ContextLimitError, match=r"prompt is \d+ tokens but the context limit"):
        generate(small, prompt, NoDrafter(), max_new_tokens=10, stop_ids=set())
    roomy = TorchRuntime(ensure_tiny_model(), device="cpu", context_limit=len(prompt) + 5)
    gen = generate(roomy, prompt, NoDrafter(), max_new_tokens=10, stop_ids=set())
    assert len(gen.token_ids) == 5 and gen.stats.finish_reason == "length"
