"""fastapply.service: the function the Triton model and the CLI both call."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TINY_COMPLETE, TINY_SERVING

from fastapply.decoding.witness import Reading
from fastapply.examples import load_edits
from fastapply.service import (
    ApplyResult,
    FastApplyService,
    IncompleteOutput,
    InvalidRequest,
    Refused,
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
    """The merge alone (policy deterministic: an unsure merge is refused, never judged)."""
    return FastApplyService(ServiceConfig(policy="deterministic"))


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
    # a TensorRT-LLM runtime reports no token probabilities: every answer would count as
    # sure, so a policy that decides by them is refused where it is set
    for runtime in ("trtllm-engine", "trtllm-pytorch"):
        with pytest.raises(ValueError, match=rf"policy 'certain_or_confident_agree' decides "
                                             rf"by the model's token probabilities, which "
                                             rf"runtime '{runtime}' does not report"):
            ServiceConfig(runtime=runtime, engine_dir="engine",
                          policy="certain_or_confident_agree")
        # the default, the judge, needs nothing of the runtime
        assert ServiceConfig(runtime=runtime, engine_dir="engine").policy == "judge"
    assert ServiceConfig(runtime="torch", model_dir="m").policy == "judge"
    assert ServiceConfig(runtime="deterministic").policy == "judge"
    assert ServiceConfig(runtime="torch", model_dir="m", policy="certain_or_agree").policy == \
        "certain_or_agree"


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
    monkeypatch.setattr("fastapply.service.apply.CANCEL_CHECK_PERIOD_S", 0.0)
    asked: list[int] = []

    def cancelled_on_third_question() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(RequestCancelled):  # not streaming: nothing else would notice
        spec.apply(*TINY_COMPLETE, is_cancelled=cancelled_on_third_question)
    assert len(asked) == 3  # it stopped at the check that said so, not at the end

# -- what is served is decided as soon as it can be -----------------------------------


def test_an_agreement_policy_refuses_at_the_first_divergence(tiny_services: Any) -> None:
    # The random model never writes the deterministic merge: under agree_or_exact a
    # lazy snippet is refused where the readings part, not after the whole budget.
    _, spec, make = tiny_services
    agree = make(64, policy="agree_or_exact")
    rec = load_edits()[0]
    deltas: list[str] = []
    with pytest.raises(Refused, match=r"read the snippet differently; nothing was merged: "
                                      r"line \d+: the model wrote") as caught:
        agree.apply(rec["original"], rec["lazy_snippet"], max_tokens=96, on_delta=deltas.append)
    stopped = caught.value.partial
    assert stopped is not None and stopped.stats.finish_reason == "parted"
    assert not rec["updated"].startswith(stopped.merged_code)
    assert rec["updated"].startswith("".join(deltas))  # only agreeing text was streamed
    whole = merge_or_fragment(spec, rec["original"], rec["lazy_snippet"], max_tokens=96)
    assert stopped.stats.forward_passes <= 3 < whole.stats.forward_passes
    assert whole.merged_code.startswith(stopped.merged_code)  # what greedy wrote


def test_an_agreeing_merge_is_served_token_for_token(tiny_services: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A deterministic reading equal to what the model writes: followed to the end, served.
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE)  # policy model, no drafts
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: Reading(want.merged_code, certain=True))
    for k in (0, 64):
        deltas: list[str] = []
        got = make(k, policy="agree_or_exact").apply(*TINY_COMPLETE, on_delta=deltas.append)
        assert got.merged_code == "".join(deltas) == want.merged_code
        assert got.stats.completion_tokens == want.stats.completion_tokens
        assert got.stats.witness == "agree" and got.stats.finish_reason == "stop"


def test_what_the_model_cannot_change_is_answered_without_it(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, make = tiny_services
    agree = make(64, policy="agree_or_exact")
    rec = load_edits()[0]
    deltas: list[str] = []
    got = agree.apply(rec["original"], rec["search_replace"], on_delta=deltas.append)
    assert got.merged_code == "".join(deltas) == rec["updated"]  # one delta, the file
    assert got.stats.witness == "deterministic-exact" and got.stats.forward_passes == 0
    unsure = "<<<<<<< SEARCH\nno such line\n=======\nx\n>>>>>>> REPLACE\n"
    with pytest.raises(Refused, match="the deterministic merge is unsure") as caught:
        make(64, policy="deterministic").apply(rec["original"], unsure)
    assert caught.value.partial is None  # no model ran
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: Reading(None, error="no line matches"))
    with pytest.raises(Refused, match=r"the deterministic merge refused it \(no line "
                                      r"matches\)") as caught:
        agree.apply(rec["original"], rec["lazy_snippet"])
    assert caught.value.partial is None


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


# -- the windowed witness --------------------------------------------------------------


def _window_task(window_original: str, window_snippet: str, texts: tuple[str, ...],
                 chosen: list[str], start: int,
                 members: tuple[frozenset[int], ...] = ()) -> Any:
    from fastapply.merge.windows import Window
    from fastapply.service.windows import WindowTask

    end = start + texts[0].count("\n")
    return WindowTask(Window(start, end, start, end, tuple(tuple(t.splitlines(True))
                                                           for t in texts),
                             tuple(range(len(texts))), members),
                      window_original, window_snippet, texts)


def test_a_window_equal_to_a_rival_reading_is_refused_token_for_token(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the model writes for the window's prompt, greedily and with no drafts, is
    # made one rival reading's window: the model follows that reading to the window's
    # end (speculation, K 64 with drafts from every reading, changes no token of it), and
    # the policy, which serves only the merge's chosen reading, refuses the file, as it
    # refuses the rival written as a whole file, naming the readings. (A policy that
    # served it, certain_or_agree_any, served 2 wrong files of 6 and was dropped.)
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE)  # policy model: the model's own window
    chosen_window = "y = 0\n"
    assert want.merged_code != chosen_window
    chosen = ["a = 1\n", "b = 2\n", chosen_window, "c = 3\n"]
    task = _window_task(*TINY_COMPLETE, (chosen_window, want.merged_code), chosen, 2)
    rival = "a = 1\nb = 2\n" + want.merged_code + "c = 3\n"
    monkeypatch.setattr("fastapply.service.windows.plan_windows", lambda *a: [task])
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: _unsure_reading("".join(chosen), rival))
    got = {}
    for k in (0, 64):
        with pytest.raises(Refused, match="read the snippet differently") as caught:
            make(k, policy="certain_or_agree", witness="window").apply("a = 1\n", "b\n")
        assert "rival (the tie's other match)" in str(caught.value)
        partial = caught.value.partial
        assert partial is not None and partial.merged_code == rival
        assert partial.stats.finish_reason == "parted" and partial.stats.windows == 1
        got[k] = partial
    assert got[0].stats.completion_tokens == got[64].stats.completion_tokens == \
        want.stats.completion_tokens
    assert got[64].stats.forward_passes < got[0].stats.forward_passes


def test_windows_of_the_chosen_reading_are_judged_by_the_policys_threshold(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The model's window is the chosen reading's: served as "window" where the policy
    # asks for no confidence, or its lowest token probability clears the threshold;
    # refused as an unsure agreement where it does not, as the whole file would be.
    plain, _, make = tiny_services
    from fastapply.merge.windows import Window
    from fastapply.service.windows import WindowTask

    want = plain.apply(*TINY_COMPLETE).merged_code
    chosen = "a = 1\nb = 2\n" + want  # its window ends the file, as the model writes it
    lines = (tuple(want.splitlines(True)), ("y = 0\n",))
    task = WindowTask(Window(2, 2 + len(lines[0]), 2, 3, lines, (0, 1)), *TINY_COMPLETE,
                      (want, "y = 0\n"))
    monkeypatch.setattr("fastapply.service.windows.plan_windows", lambda *a: [task])
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: Reading(chosen, certain=False))
    for config in ({"policy": "certain_or_agree"},
                   {"policy": "certain_or_confident_agree", "threshold": 0.0}):
        got = make(64, witness="window", **config).apply("a = 1\n", "b\n")
        assert got.merged_code == chosen and got.stats.witness == "window"
        assert got.stats.min_token_prob < 1.0
    strict = make(64, witness="window", policy="certain_or_confident_agree", threshold=1.0)
    with pytest.raises(Refused, match="the model wrote the deterministic merge's file but "
                                      "was unsure"):
        strict.apply("a = 1\n", "b\n")


def test_a_window_that_leaves_every_reading_is_refused_at_once_naming_the_line(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE)
    others = ("y = 0\n", "y = 2\n")
    assert want.merged_code not in others
    chosen = ["a = 1\n", "b = 2\n", "y = 0\n", "c = 3\n"]
    task = _window_task(*TINY_COMPLETE, others, chosen, 2)
    monkeypatch.setattr("fastapply.service.windows.plan_windows", lambda *a: [task])
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: Reading("".join(chosen), certain=False))
    with pytest.raises(Refused, match=r"line 3: the model wrote") as caught:
        make(64, policy="certain_or_agree", witness="window").apply("a = 1\n", "b\n")
    assert "unsure at lines 3-3" in str(caught.value) and "2 readings" in str(caught.value)
    partial = caught.value.partial
    assert partial is not None and partial.stats.finish_reason == "parted"
    assert partial.stats.forward_passes < want.stats.forward_passes + 1



def test_windows_that_agree_with_readings_excluding_each_other_are_refused(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two windows, and the model's text in each is a rival's: reading 1's in the first,
    # reading 2's in the second. Served window by window, the file would be neither
    # reading (a tied change written at both of its places): refused. Where one reading
    # owns both texts, the file is that rival reading's, refused as any rival is.
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE).merged_code
    chosen = ["a = 1\n", "y = 0\n", "b = 2\n", "c = 3\n", "y = 0\n", "d = 4\n"]
    full = "".join(chosen)
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: _unsure_reading(
                            full, full.replace("y = 0\n", want)))

    def tasks(second: frozenset[int]) -> list[Any]:
        return [_window_task(*TINY_COMPLETE, ("y = 0\n", want), chosen, 1,
                             (frozenset({0, 2}), frozenset({1}))),
                _window_task(*TINY_COMPLETE, ("y = 0\n", want), chosen, 4,
                             (frozenset({0, 1} - second), second))]

    monkeypatch.setattr("fastapply.service.windows.plan_windows",
                        lambda *a: tasks(frozenset({2})))
    with pytest.raises(Refused, match="exclude each other"):
        make(64, policy="certain_or_agree", witness="window").apply("a = 1\n", "b\n")
    monkeypatch.setattr("fastapply.service.windows.plan_windows",
                        lambda *a: tasks(frozenset({1, 2})))
    with pytest.raises(Refused, match="read the snippet differently") as caught:
        make(64, policy="certain_or_agree", witness="window").apply("a = 1\n", "b\n")
    partial = caught.value.partial
    assert partial is not None and partial.merged_code == full.replace("y = 0\n", want)
    assert partial.stats.windows == 2


def test_a_certain_merge_of_a_file_past_the_context_is_served(tiny_services: Any) -> None:
    _, _, make = tiny_services
    small = make(64, context_limit=256, policy="certain_or_agree")
    big = "".join(f"value_{i} = {i}\n" for i in range(3000))
    snippet = "<<<<<<< SEARCH\nvalue_2500 = 2500\n=======\nvalue_2500 = -1\n>>>>>>> REPLACE\n"
    got = small.apply(big, snippet)
    assert got.merged_code == big.replace("value_2500 = 2500\n", "value_2500 = -1\n")
    assert got.stats.witness == "deterministic-certain" and got.stats.forward_passes == 0


def test_an_unsure_merge_of_a_file_past_the_context_is_witnessed_in_a_window(
        tiny_services: Any) -> None:
    # A tie in a 3,000-line file: the model reads a window of a few lines, never the file
    # (the whole file is ~40x the context), whatever it then writes.
    _, _, make = tiny_services
    small = make(64, context_limit=512, policy="certain_or_agree", witness="window")
    body = "".join(f"value_{i} = {i}\n" for i in range(1500))
    big = body + "def f():\n    x = 1\n    return x\n" + body.replace("value", "other") + \
        "def f():\n    x = 1\n    return x\n"
    snippet = ("# ... existing code ...\ndef f():\n    x = 2\n    return x\n"
               "# ... existing code ...\n")
    try:
        got = small.apply(big, snippet)
    except Refused as exc:  # the tiny random model wrote neither reading
        assert exc.partial is not None and "context limit" not in str(exc)
        stats = exc.partial.stats
    else:
        assert got.merged_code in {big.replace("x = 1", "x = 2", 1),
                                   "x = 2".join(big.rsplit("x = 1", 1))}
        stats = got.stats
    assert 0 < stats.prompt_tokens < 512 * 2  # two windows at most, each under the context
    # the default witness reads the whole file: past the context that is a clear refusal
    default = make(64, context_limit=512, policy="certain_or_agree")
    assert default.config.witness == "file"
    with pytest.raises(InvalidRequest, match="context limit"):
        default.apply(big, snippet)


# -- the witness's time budget -------------------------------------------------------------


@pytest.mark.parametrize("witness", ["file", "window"])
def test_a_witness_past_its_time_budget_is_refused_naming_the_unsure_place(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch, witness: str) -> None:
    # A budget that has run out before the first pass ends: the request is refused after
    # that pass, naming the budget and the merge's unsure place, with nothing served; with
    # no budget (0) the same request is read to its end (served or refused by parting).
    from fastapply.merge.apply import MergeResult
    from fastapply.merge.merger import Uncertainty

    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE).merged_code
    chosen = ["a = 1\n", "b = 2\n", "y = 0\n", "c = 3\n"]
    merge = MergeResult("".join(chosen), (Uncertainty(3, "a tie at lines 3 and 9"),))
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: Reading("".join(chosen), certain=False,
                                                          merge=merge))
    task = _window_task(*TINY_COMPLETE, ("y = 0\n", want), chosen, 2)
    monkeypatch.setattr("fastapply.service.windows.plan_windows", lambda *a: [task])
    late = make(64, policy="certain_or_agree", witness=witness, witness_budget_s=1e-9)
    with pytest.raises(Refused, match=r"witness budget of 1e-09 s ran out") as caught:
        late.apply("a = 1\n", "b\n")
    assert "unsure at line 3 (a tie at lines 3 and 9)" in str(caught.value)
    assert ("windows" in str(caught.value)) == (witness == "window")
    partial = caught.value.partial
    assert partial is not None and partial.merged_code == ""
    assert partial.stats.finish_reason == "budget" and partial.stats.forward_passes == 1
    # a prompt this server would take longer to read than the budget allows (its pass
    # cost, measured at load, made huge here) is refused before any forward pass
    slow = make(64, policy="certain_or_agree", witness=witness, witness_budget_s=60.0)
    monkeypatch.setattr(slow.runtime, "pass_cost_ms", {257: 1e9})
    with pytest.raises(Refused, match=r"prompt tokens, about \d+\.\d s to read") as caught:
        slow.apply("a = 1\n", "b\n")
    partial = caught.value.partial
    assert partial is not None and partial.stats.forward_passes == 0
    assert partial.stats.finish_reason == "budget" and partial.stats.prompt_tokens > 0
    # a cost measured at load on a busy machine is corrected by what requests since saw
    slow.seen_ms_per_token = 1e-6
    try:
        slow.apply("a = 1\n", "b\n")
    except Refused as exc:
        assert "budget" not in str(exc)
    unbounded = make(64, policy="certain_or_agree", witness=witness, witness_budget_s=0)
    try:
        got = unbounded.apply("a = 1\n", "b\n")
    except Refused as exc:
        assert "budget" not in str(exc) and exc.partial is not None
        assert exc.partial.stats.finish_reason == "parted"
    else:
        assert witness == "window" and got.merged_code == "a = 1\nb = 2\n" + want + "c = 3\n"


def test_an_unsure_merge_that_changes_nothing_is_not_served_on_the_models_agreement(
        tiny_services: Any) -> None:
    # The snippet shows `return 1` beside `def h():` (g deleted?), but g also ends with
    # `return 1`: the merge finds its lines as they stand, reads no change and is unsure.
    # A model that copies the file would agree with that reading, so certain_or_agree
    # refuses without running it; the model policy still lets the model's reading decide.
    original = "def f():\n    return 1\n\n\ndef g():\n    return 1\n\n\ndef h():\n" \
        "    return 2\n"
    snippet = "# ... existing code ...\n    return 1\n\n\ndef h():\n# ... existing code ...\n"
    from fastapply.merge import apply_snippet

    merge = apply_snippet(original, snippet)
    assert merge.uncertain and merge.text == original  # the reading refused below
    _, _, make = tiny_services
    agree = make(64, policy="certain_or_agree")
    with pytest.raises(Refused, match=r"leaves the file unchanged and is unsure") as caught:
        agree.apply(original, snippet)
    assert caught.value.partial is None or caught.value.partial.stats.forward_passes == 0
    got = merge_or_fragment(make(64, policy="model"), original, snippet)
    assert got.stats.forward_passes > 0  # the model's own reading decides there


def test_the_cost_of_a_prompt_token_is_read_from_finished_requests() -> None:
    from fastapply.metrics import Stats
    from fastapply.service.budget import PREFILL_GROWTH_TOKENS, observed_ms_per_token

    seen = observed_ms_per_token(Stats(prompt_tokens=1000, ttft_ms=2000.0))
    assert seen is not None and abs(seen - 2.0 / (1 + 1000 / PREFILL_GROWTH_TOKENS)) < 1e-9
    # tokens taken from the prompt cache did not run; too few run tells nothing
    assert observed_ms_per_token(Stats(prompt_tokens=1000, reused_prompt_tokens=990,
                                       ttft_ms=20.0)) is None
    assert observed_ms_per_token(Stats(prompt_tokens=1000, ttft_ms=0.0)) is None


def test_the_witness_budget_is_checked_where_it_is_set() -> None:
    with pytest.raises(ValueError, match="witness_budget_s must be"):
        ServiceConfig(witness_budget_s=-1.0)
    with pytest.raises(ValueError, match="witness_budget_s must be"):
        ServiceConfig(witness_budget_s=float("nan"))
    assert ServiceConfig().witness_budget_s == 8.0


# -- a marker copied into the answer ------------------------------------------------------


@pytest.mark.parametrize("policy", ["model", "certain_or_agree"])
def test_an_answer_holding_a_marker_the_original_lacks_is_never_served(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    # A model that copies the snippet's marker line where code belongs (what the default
    # model did on 10 of 13 refused edits of unseen repositories): its answer, even when
    # complete and whatever the policy, is refused naming the line. The runtime's
    # generate is scripted to that answer (the tiny random model cannot be made to write
    # it); the tokens pass through the service's own stream, extraction and witness.
    from fastapply.decoding.speculate import Generation
    from fastapply.metrics import Stats

    _, _, make = tiny_services
    service = make(8, policy=policy, threshold=0.0)
    original = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    snippet = "def f():\n    # ... existing code ...\n    return a * b\n"
    answer = "def f():\n    # ... existing code ...\n    return a * b\n"
    ids = service.tokenizer.encode(service.format.expected_output(answer) + "<|im_end|>",
                                   add_special_tokens=False)

    def scripted(request: Any, on_tokens: Any = None) -> Generation:
        if on_tokens is not None:
            on_tokens(ids)
        return Generation(ids, Stats(prompt_tokens=len(request.prompt_ids),
                                     completion_tokens=len(ids), forward_passes=1,
                                     finish_reason="stop", min_token_prob=1.0))

    monkeypatch.setattr(service.runtime, "generate", scripted)
    with pytest.raises(Refused, match=r"line 2: the model wrote") as caught:
        service.apply(original, snippet)
    if policy != "certain_or_agree":  # that one's watch refuses first, at the parting
        assert "the snippet's marker '# ... existing code ...'" in str(caught.value)
    # the same answer where the original holds that line is the model's to serve
    kept = original.replace("    a = 1\n", "    # ... existing code ...\n    a = 1\n")
    if policy == "model":
        assert service.apply(kept, snippet).merged_code == answer


# -- a whole file equal to a rival reading ---------------------------------------------------


def _unsure_reading(chosen: str, rival: str) -> Reading:
    from fastapply.merge.apply import Candidate, MergeResult
    from fastapply.merge.merger import Uncertainty

    merge = MergeResult(chosen, (Uncertainty(1, "a tie at line 1"),),
                        (Candidate(chosen, "chosen"), Candidate(rival, "the tie's other match")))
    return Reading(chosen, certain=False, error="a tie at line 1", merge=merge)


def test_a_whole_file_equal_to_a_rival_reading_is_refused_showing_both_readings(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tiny model's own greedy file is made the rival reading of an unsure merge whose
    # chosen reading is another file: certain_or_agree refuses it, and the refusal shows
    # both readings' lines where they differ, the model's closest first.
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE)  # policy model: the model's own file
    chosen = "y = 0\nz = 1\n"
    assert want.merged_code != chosen
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: _unsure_reading(chosen, want.merged_code))
    with pytest.raises(Refused) as caught:
        make(64, policy="certain_or_agree").apply(*TINY_COMPLETE)
    message = str(caught.value)
    assert "read the snippet differently" in message
    assert "the merge's readings differ at" in message
    assert message.index("rival (the tie's other match)") < message.index("  chosen:")


def test_a_whole_file_equal_to_no_reading_is_refused_where_it_leaves_them(
        tiny_services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, _, make = tiny_services
    want = plain.apply(*TINY_COMPLETE)
    readings = ("y = 0\n", "y = 2\n")
    assert want.merged_code not in readings
    monkeypatch.setattr("fastapply.decoding.witness.deterministic_reading",
                        lambda original, snippet, *_: _unsure_reading(*readings))
    with pytest.raises(Refused, match="read the snippet differently") as caught:
        make(64, policy="certain_or_agree").apply(*TINY_COMPLETE)
    assert caught.value.partial is not None
    assert caught.value.partial.stats.finish_reason == "parted"  # stopped once it left both


def test_an_unsure_merge_refused_without_a_model_shows_its_readings(deterministic) -> None:
    with pytest.raises(InvalidRequest) as caught:
        deterministic.apply("a\nb\nc\nb\nd\n", "# ...\nb\nX\n# ...\n")
    message = str(caught.value)
    assert message.startswith("the snippet cannot be merged: lazy segment 1")
    assert "the merge's readings differ at lines 3-5" in message
    assert "  chosen:\n    X\n" in message
    assert "  rival (lazy segment 1 at its other match):" in message
