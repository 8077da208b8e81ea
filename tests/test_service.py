"""fastapply.service: the function the Triton model and the CLI both call."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TINY_COMPLETE, TINY_SERVING

from fastapply.examples import load_edits
from fastapply.service import (
    ApplyResult,
    FastApplyService,
    IncompleteOutput,
    InvalidRequest,
    RequestCancelled,
    ServiceConfig,
)

ORIGINAL = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"


def merge_or_fragment(service: FastApplyService, *args: Any, **kwargs: Any) -> ApplyResult:
    """The result, or the fragment a refused (incomplete) merge produced: the tiny random
    model rarely finishes a file, and lossless decoding is checked on what it wrote."""
    try:
        return service.apply(*args, **kwargs)
    except IncompleteOutput as exc:
        return exc.partial


@pytest.fixture(scope="module")
def deterministic() -> FastApplyService:
    return FastApplyService(ServiceConfig())


def test_deterministic_merges_the_shipped_examples(deterministic):
    for rec in load_edits():
        result = deterministic.apply(rec["original"], rec["search_replace"])
        assert result.merged_code == rec["updated"], rec["id"]
        assert result.stats.finish_reason == "merged"
        assert result.stats.chars_per_s > 0


def test_deterministic_streams_the_whole_file_once(deterministic):
    rec = load_edits()[0]
    deltas: list[str] = []
    result = deterministic.apply(rec["original"], rec["udiff"], on_delta=deltas.append)
    assert "".join(deltas) == result.merged_code == rec["updated"]


@pytest.mark.parametrize("kwargs, message", [
    ({"initial_code": ORIGINAL, "edit_snippet": "   \n"}, "edit_snippet is empty"),
    ({"initial_code": None, "edit_snippet": "x"}, "initial_code is missing"),
    ({"initial_code": b"\xc3\x28", "edit_snippet": "x"}, "initial_code is not valid UTF-8"),
    ({"initial_code": ORIGINAL, "edit_snippet": "x", "max_tokens": 0}, "max_tokens is 0"),
    ({"initial_code": ORIGINAL, "edit_snippet": "x", "max_tokens": "5"},
     r"max_tokens is '5' \(str\); send a whole number"),
    ({"initial_code": ORIGINAL, "edit_snippet": "x", "max_tokens": 5.0},
     r"max_tokens is 5.0 \(float\)"),
    ({"initial_code": ORIGINAL, "edit_snippet": "x", "max_tokens": True},
     r"max_tokens is True \(bool\)"),
    ({"initial_code": ORIGINAL,
      "edit_snippet": "<<<<<<< SEARCH\ndef c():\n=======\ndef d():\n>>>>>>> REPLACE\n"},
     "cannot be merged"),
])
def test_bad_input_is_refused_with_a_useful_message(deterministic, kwargs, message):
    with pytest.raises(InvalidRequest, match=message):
        deterministic.apply(**kwargs)


def test_input_over_the_size_limit_is_refused():
    service = FastApplyService(ServiceConfig(max_input_bytes=100))
    with pytest.raises(InvalidRequest, match=r"over the limit of 100 bytes"):
        service.apply("x" * 200, "y")


def test_config_errors_say_what_to_do():
    with pytest.raises(ValueError, match="unknown runtime 'vllm'"):
        ServiceConfig(runtime="vllm")
    with pytest.raises(ValueError, match="needs a model directory"):
        ServiceConfig(runtime="torch")


# -- torch runtime with the tiny model ------------------------------------------------


@pytest.fixture(scope="module")
def tiny_services():
    pytest.importorskip("transformers")
    from fastapply.model.tiny import ensure_tiny_model

    path = str(ensure_tiny_model())
    make = lambda k, **kw: FastApplyService(  # noqa: E731
        ServiceConfig(runtime="torch", model_dir=path, max_draft_len=k, device="cpu",
                      dtype="float32", **{**TINY_SERVING, **kw}))
    return make(0), make(64), make


def test_k_unset_is_chosen_from_the_measured_pass_cost(tiny_services):
    from fastapply.decoding.runtimes.torch import DRAFT_LENGTHS

    plain, _, make = tiny_services
    auto = make(None)
    assert auto.runtime.pass_cost_ms and 1 in auto.runtime.pass_cost_ms
    assert auto.max_draft_len == auto.runtime.max_draft_len in DRAFT_LENGTHS
    assert plain.max_draft_len == 0  # configured: kept, nothing measured
    assert not plain.runtime.pass_cost_ms
    rec = load_edits()[0]
    want = merge_or_fragment(plain, rec["original"], rec["lazy_snippet"], max_tokens=96)
    got = merge_or_fragment(auto, rec["original"], rec["lazy_snippet"], max_tokens=96)
    assert got.merged_code == want.merged_code


def test_speculative_service_equals_plain_greedy(tiny_services):
    plain, spec, _ = tiny_services
    for rec in load_edits()[:3]:
        want = merge_or_fragment(plain, rec["original"], rec["lazy_snippet"], max_tokens=96)
        deltas: list[str] = []
        got = merge_or_fragment(spec, rec["original"], rec["lazy_snippet"], max_tokens=96,
                                on_delta=deltas.append)
        assert got.merged_code == want.merged_code
        assert "".join(deltas) == got.merged_code
        assert got.stats.completion_tokens == want.stats.completion_tokens
        assert want.stats.forward_passes == want.stats.completion_tokens
        assert got.stats.prompt_tokens == want.stats.prompt_tokens > 0


def test_context_limit_is_refused_not_truncated(tiny_services):
    _, _, make = tiny_services
    small = make(8, context_limit=64)
    rec = load_edits()[0]
    with pytest.raises(InvalidRequest, match="context limit is 64 tokens"):
        small.apply(rec["original"], rec["lazy_snippet"])


@pytest.mark.parametrize("where", ["original", "snippet"])
def test_text_the_tokenizer_reads_as_a_stop_token_is_refused(tiny_services: Any,
                                                             where: str) -> None:
    # "<|im_end|>" in a file became the stop token itself in the prompt and the drafts:
    # a model copying the file stops there, and the file up to it came back as merged.
    _, spec, _ = tiny_services
    text = 'a = 1\nEND = "<|im_end|>"\n'
    args = (text, "a = 2\n") if where == "original" else ("a = 1\n", text)
    with pytest.raises(InvalidRequest, match=r"holds '<\|im_end\|>' \(line 2\), which this "
                                             r"model's tokenizer reads as a token that ends"):
        spec.apply(*args)


def test_a_prompt_over_the_context_is_refused_before_the_drafts_are_built(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The drafter's sources (a deterministic merge, then three texts tokenized) cost
    # twice the prompt's tokenizing: a 3.9 MB file took 16 s to refuse, 5 s of it for
    # the prompt. Counted here as the characters handed to the tokenizer.
    from fastapply.decoding import prompts

    _, spec, _ = tiny_services
    encoded: list[int] = []
    encode = prompts.encode

    def counting(tokenizer: Any, text: str) -> list[int]:
        encoded.append(len(text))
        return encode(tokenizer, text)

    monkeypatch.setattr(prompts, "encode", counting)
    big = "x = 1\n" * 20_000  # 40,000 tokens, over the tiny model's 32,768
    with pytest.raises(InvalidRequest, match="context limit is 32768 tokens"):
        spec.apply(big, "x = 2\n")
    assert len(encoded) == 1 and encoded[0] < len(big) + 1000  # the prompt alone


def test_a_file_cut_at_max_tokens_is_refused_naming_the_budget(tiny_services: Any) -> None:
    _, spec, _ = tiny_services
    rec = load_edits()[0]
    deltas: list[str] = []
    with pytest.raises(IncompleteOutput, match=r"reached max_tokens=5 before it finished the "
                                               r"file, so nothing is returned") as caught:
        spec.apply(rec["original"], rec["lazy_snippet"], max_tokens=5, on_delta=deltas.append)
    partial = caught.value.partial
    assert partial.stats.finish_reason == "length" and partial.stats.completion_tokens == 5
    assert "".join(deltas) == partial.merged_code  # what a stream got before the error
    assert isinstance(caught.value, InvalidRequest)  # the server answers INVALID_ARG


def test_a_file_cut_by_the_context_limit_is_refused(tiny_services: Any) -> None:
    _, spec, make = tiny_services
    with pytest.raises(IncompleteOutput) as caught:
        spec.apply(*TINY_COMPLETE, max_tokens=1)
    prompt_tokens = caught.value.partial.stats.prompt_tokens
    tight = make(8, context_limit=prompt_tokens + 10)
    with pytest.raises(IncompleteOutput, match=rf"the output \(10 tokens\) filled the context "
                                               rf"limit of {prompt_tokens + 10} tokens"):
        tight.apply(*TINY_COMPLETE)
    with pytest.raises(InvalidRequest, match=rf"max_tokens is {prompt_tokens + 11}; send a "
                                             rf"number from 1 to {prompt_tokens + 10}"):
        tight.apply(*TINY_COMPLETE, max_tokens=prompt_tokens + 11)


def test_a_complete_answer_is_returned(tiny_services: Any) -> None:
    plain, spec, _ = tiny_services
    want = plain.apply(*TINY_COMPLETE)
    got = spec.apply(*TINY_COMPLETE)
    assert got.stats.finish_reason == want.stats.finish_reason == "stop"
    assert got.merged_code == want.merged_code


def test_generation_stops_once_the_request_is_cancelled(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, spec, _ = tiny_services
    monkeypatch.setattr("fastapply.service.CANCEL_CHECK_PERIOD_S", 0.0)
    asked: list[int] = []

    def cancelled_on_third_question() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(RequestCancelled):  # not streaming: nothing else would notice
        spec.apply(*TINY_COMPLETE, is_cancelled=cancelled_on_third_question)
    assert len(asked) == 3  # it stopped at the check that said so, not at the end

def test_the_client_shares_the_result_type_and_imports_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; import fastapply.client.grpc as c; import fastapply.service as s; "
            "assert c.ApplyResult is s.ApplyResult; "
            "heavy = {'torch', 'transformers', 'modelopt'} & set(sys.modules); "
            "assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
