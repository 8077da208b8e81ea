"""The TensorRT-LLM runtimes against the stand-in (tests/trtllm_standin.py, NOT TRT-LLM).

The stand-in runs the tiny model greedily with torch and follows the documented 1.2.x
executor / LLM-API semantics; these tests check the runtimes' side of that contract and
that their output equals the torch runtime's greedy output token for token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import trtllm_standin

from fastapply.decoding import prompts
from fastapply.decoding.drafting import NoDrafter
from fastapply.decoding.speculate import GenerationRequest, generate
from fastapply.examples import load_edits
from fastapply.model.tiny import ensure_tiny_model

ENGINE_MAX_DRAFT = 8


class Oracle:
    """Drafts the known greedy continuation (optionally always ``length`` tokens)."""

    def __init__(self, truth: list[int], length: int | None = None) -> None:
        self.truth, self.length = truth, length

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        n = self.length if self.length is not None else max_len
        return self.truth[len(output): len(output) + n]


@pytest.fixture(scope="module")
def tiny() -> Path:
    return ensure_tiny_model()


@pytest.fixture(scope="module")
def tokenizer(tiny: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return load_edits()


def prompt_for(tokenizer: Any, rec: dict[str, Any]) -> list[int]:
    return prompts.build_prompt_ids(tokenizer, prompts.KORTIX, rec["original"],
                                    rec["lazy_snippet"])


@pytest.fixture(scope="module")
def torch_rt(tiny: Path) -> Any:
    from fastapply.decoding.runtimes.torch import TorchRuntime

    return TorchRuntime(tiny, device="cpu", dtype="float32")


def greedy(torch_rt: Any, prompt: list[int], n: int = 24) -> list[int]:
    return generate(torch_rt, prompt, NoDrafter(), max_new_tokens=n, stop_ids=set()).token_ids


@pytest.fixture
def engine_dir(tmp_path: Path, tiny: Path) -> Path:
    d = tmp_path / "engine"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "build_config": {"max_seq_len": 4096, "max_input_len": 3072,
                         "max_draft_len": ENGINE_MAX_DRAFT, "max_batch_size": 4},
        "standin": {"hf_model_dir": str(tiny)}}))
    return d


@pytest.fixture
def engine_rt(monkeypatch: pytest.MonkeyPatch, engine_dir: Path) -> Any:
    from fastapply.decoding.runtimes.trtllm_engine import TrtllmEngineRuntime

    trtllm_standin.install(monkeypatch)
    rt = TrtllmEngineRuntime(engine_dir, max_draft_len=64)
    yield rt
    rt.close()


# -- not installed ---------------------------------------------------------------------------


def test_clear_error_without_tensorrt_llm(engine_dir: Path, tiny: Path) -> None:
    from fastapply.decoding.runtimes.trtllm_engine import TrtllmEngineRuntime, TrtllmNotInstalled
    from fastapply.decoding.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

    for make in (lambda: TrtllmEngineRuntime(engine_dir),
                 lambda: TrtllmPytorchRuntime(tiny)):
        with pytest.raises(TrtllmNotInstalled, match=r"TensorRT-LLM is not installed.*run "
                           r"inside nvcr\.io/nvidia/tritonserver:\d\d\.\d\d-trtllm-python-py3"):
            make()


# -- trtllm-engine -------------------------------------------------------------------------


@pytest.mark.slow
def test_step_accepts_prefix_and_corrects(engine_rt: Any, torch_rt: Any, tokenizer: Any,
                                          records: list[dict[str, Any]]) -> None:
    prompt = prompt_for(tokenizer, records[0])
    truth = greedy(torch_rt, prompt)
    s = engine_rt.session(prompt)
    assert s.prefill() == truth[0]
    assert s.step(truth[1:5]) == truth[1:6]  # all accepted, plus the next token
    wrong = (truth[8] + 1) % 2048
    assert s.step(truth[6:8] + [wrong] + truth[9:11]) == truth[6:9]  # corrected at index 2
    req = engine_rt.executor.requests[-1]
    assert req.input_token_ids == prompt + truth[:6]  # prompt + accepted output so far
    assert req.max_tokens == 6  # len(draft) + 1
    assert req.external_draft_tokens_config.tokens == truth[6:8] + [wrong] + truth[9:11]
    assert req.output_config.exclude_input_from_output and req.end_id == -1
    assert s.cache_len == len(prompt) + 8  # everything but the last token
    # prefix KV reused from block to block (block reuse is on in the executor config)
    assert engine_rt.executor.block_reuse and engine_rt.executor.reused_blocks > 0


@pytest.mark.slow
def test_generate_equals_torch_runtime(engine_rt: Any, torch_rt: Any, tokenizer: Any,
                                       records: list[dict[str, Any]]) -> None:
    prompt = prompt_for(tokenizer, records[1])
    truth = greedy(torch_rt, prompt, 30)
    plain = generate(engine_rt, prompt, NoDrafter(), max_new_tokens=30, stop_ids=set())
    oracle = generate(engine_rt, prompt, Oracle(truth), max_new_tokens=30, stop_ids=set())
    assert plain.token_ids == truth and oracle.token_ids == truth
    assert plain.stats.forward_passes == 30
    # drafts clipped to the engine's max_draft_len (8): 1 prefill + ceil(29 / 9) steps
    assert oracle.stats.forward_passes == 5
    assert max(len(r.external_draft_tokens_config.tokens) for r in engine_rt.executor.requests
               if r.external_draft_tokens_config) == ENGINE_MAX_DRAFT


@pytest.mark.slow
def test_stop_token_ends_generation(engine_rt: Any, torch_rt: Any, tokenizer: Any,
                                    records: list[dict[str, Any]]) -> None:
    prompt = prompt_for(tokenizer, records[2])
    truth = greedy(torch_rt, prompt)
    stop = truth[6]
    first = truth.index(stop)
    gen = generate(engine_rt, prompt, Oracle(truth), max_new_tokens=24, stop_ids={stop})
    assert gen.token_ids == truth[: first + 1]
    assert gen.stats.finish_reason == "stop"


@pytest.mark.slow
def test_draft_longer_than_budget(monkeypatch: pytest.MonkeyPatch, engine_dir: Path,
                                  torch_rt: Any, tokenizer: Any,
                                  records: list[dict[str, Any]]) -> None:
    from fastapply.decoding.runtimes.trtllm_engine import TrtllmEngineRuntime

    trtllm_standin.install(monkeypatch)
    prompt = prompt_for(tokenizer, records[3])
    truth = greedy(torch_rt, prompt)
    rt = TrtllmEngineRuntime(engine_dir, max_draft_len=64, context_limit=len(prompt) + 4)
    try:
        # budget: 3 tokens, the drafter always offers 50
        gen = generate(rt, prompt, Oracle(truth, 50), max_new_tokens=3, stop_ids=set())
        assert gen.token_ids == truth[:3]
        # near the context limit a session clips the draft to fit max_seq_len
        s = rt.session(prompt)
        s.prefill()
        assert s.step(truth[1:40]) == truth[1:4]
        assert all(len(r.input_token_ids) + r.max_tokens <= len(prompt) + 4
                   for r in rt.executor.requests)
    finally:
        rt.close()


@pytest.mark.slow
def test_executor_error_is_raised(engine_rt: Any, tokenizer: Any,
                                  records: list[dict[str, Any]]) -> None:
    s = engine_rt.session(prompt_for(tokenizer, records[0]))
    s.prefill()
    engine_rt.max_draft_len = 64  # pretend the engine took more drafts than it was built for
    with pytest.raises(RuntimeError, match="exceeds maximum draft"):
        s.step(list(range(20)))


@pytest.mark.slow
def test_concurrent_sessions_share_the_executor(engine_rt: Any, torch_rt: Any, tokenizer: Any,
                                                records: list[dict[str, Any]]) -> None:
    prompts_ = [prompt_for(tokenizer, r) for r in records[:3]]
    truths = [greedy(torch_rt, p, 16) for p in prompts_]
    results: dict[int, list[int]] = {}

    def worker(i: int) -> None:
        results[i] = generate(engine_rt, prompts_[i], Oracle(truths[i], 3), max_new_tokens=16,
                              stop_ids=set()).token_ids

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [results[i] for i in range(3)] == truths


# -- trtllm-pytorch -------------------------------------------------------------------------


@pytest.fixture
def pytorch_rt(monkeypatch: pytest.MonkeyPatch, tiny: Path) -> Any:
    from fastapply.decoding.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

    trtllm_standin.install(monkeypatch)
    return TrtllmPytorchRuntime(tiny, max_draft_len=8)


@pytest.mark.slow
def test_pytorch_backend_plugs_in_the_drafter(pytorch_rt: Any, torch_rt: Any, tokenizer: Any,
                                              records: list[dict[str, Any]]) -> None:
    llm = pytorch_rt.llm
    assert llm.kv_cache_config.enable_block_reuse
    assert llm.spec.max_draft_len == 8
    assert isinstance(llm.spec.drafter, trtllm_standin.Drafter)
    prompt = prompt_for(tokenizer, records[0])
    truth = greedy(torch_rt, prompt, 30)
    # the true output as the drafter's only source: every draft is accepted
    gen = pytorch_rt.generate(GenerationRequest(prompt, [truth], frozenset(), 30))
    assert gen.token_ids == truth
    assert gen.stats.forward_passes < 12 and gen.stats.accepted_draft_tokens > 15
    # a source that is no help: same output, one token per pass
    noise = pytorch_rt.generate(GenerationRequest(prompt, [[5, 6, 7]], frozenset(), 30))
    assert noise.token_ids == truth
    assert not pytorch_rt.registry._by_prompt and not pytorch_rt.registry._by_request


@pytest.mark.slow
def test_pytorch_backend_streams_and_stops(pytorch_rt: Any, torch_rt: Any, tokenizer: Any,
                                           records: list[dict[str, Any]]) -> None:
    prompt = prompt_for(tokenizer, records[1])
    truth = greedy(torch_rt, prompt)
    stop = truth[5]
    chunks: list[list[int]] = []
    gen = pytorch_rt.generate(GenerationRequest(prompt, [truth], frozenset({stop}), 24),
                              on_tokens=chunks.append)
    assert gen.token_ids == truth[: truth.index(stop) + 1]
    assert gen.stats.finish_reason == "stop"
    assert [t for c in chunks for t in c] == gen.token_ids


def test_draft_registry_per_request_state() -> None:
    from fastapply.decoding.runtimes.trtllm_pytorch import DraftRegistry

    reg = DraftRegistry(max_draft_len=4)
    prompt, source = [1, 2, 3], [10, 11, 12, 13, 14, 15]
    key = reg.register(prompt, [source])
    assert reg.propose(7, prompt + [10], 3, max_new_tokens=100) == [11, 12, 13, 14]
    assert reg.propose(7, prompt + [10, 11], 3, max_new_tokens=4) == [12]  # budget-clipped
    assert reg.propose(8, [9, 9, 9, 10], 3, max_new_tokens=100) == []  # not a known prompt
    assert reg.release(key) == 5 and not reg._by_request
