"""The FP8 check's gate and its reading: what a user sees decides, and reading each answer
only as far as the outcomes need gives the outcomes of the whole answers."""

from __future__ import annotations

from typing import Any

import pytest

from fastapply.decoding.runtimes import SessionRuntime
from fastapply.engine_build.profile import Verify
from fastapply.engine_build.verify import parity, summarize
from fastapply.engine_build.verify_run import judge
from fastapply.metrics import Stats

#: The profiles' gate: at most 1 point of exact rate lost, 97% of exact edits kept.
GATE = Verify(max_exact_drop=0.01, min_exact_kept=0.97)
#: The gate before: 95% identical outputs, and the drop.
OLD_GATE = Verify(min_identical=0.95, max_exact_drop=0.01, min_exact_kept=0.0)


def outcomes(n: int, exact_ref: set[int], exact_cand: set[int],
             identical: set[int]) -> dict[str, Any]:
    """Figures of ``n`` edits with the given outcomes (edit k is ``edit-k``)."""
    rows = []
    for k in range(n):
        row: dict[str, Any] = {"id": f"edit-{k}", "identical": k in identical, "cut": [],
                               "reference_exact": k in exact_ref,
                               "quantized_exact": k in exact_cand,
                               "reference_tokens": 50, "quantized_tokens": 50}
        if k not in identical:
            row["first_divergence"] = {"token_index": 30 + k, "line": 4,
                                       "reference_line": "    return total",
                                       "quantized_line": "    return sum",
                                       "reference_text": "", "quantized_text": ""}
        rows.append(row)
    return summarize(rows) | {"per_edit": rows}


def test_half_identical_with_every_exact_edit_kept_passes() -> None:
    # 100 edits, 30 exact on both; FP8 rewrites half of the 70 wrong answers differently
    figures = outcomes(100, set(range(30)), set(range(30)), set(range(65)))
    assert figures["identical_share"] == 0.65 and figures["exact_kept_share"] == 1.0
    assert judge(figures, GATE) == []
    assert "under verify.min_identical 0.95" in judge(figures, OLD_GATE)[0]  # failed before


def test_losing_exact_edits_fails_even_where_gains_hide_them() -> None:
    # 30 exact unquantized, FP8 loses 3 of them (kept 90%) and gains 3 others: no drop
    exact_cand = set(range(3, 30)) | {40, 41, 42}
    figures = outcomes(100, set(range(30)), exact_cand, set(range(3, 30)))
    assert figures["exact_drop"] == 0.0 and figures["exact_kept_share"] == 0.9
    # the drop alone, as gated before, passes it
    assert judge(figures, Verify(max_exact_drop=0.01, min_exact_kept=0.0)) == []
    (problem,) = judge(figures, GATE)
    assert problem.startswith("of the 30 edits the reference merges exactly, the quantized "
                              "model keeps 27 (0.900), under verify.min_exact_kept 0.97; "
                              "lost: edit-0 at line 4 (token 30): reference '    return "
                              "total' / quantized '    return sum'; edit-1 at line 4")
    assert "edit-2 at" in problem and "edit-3 " not in problem and "edit-40" not in problem


def test_one_exact_edit_lost_of_38_is_within_the_gate_and_two_are_not() -> None:
    """Counts, not shares: 37 of 38 is 0.974; a drop of one edit of 126 is under a point."""
    one = outcomes(126, set(range(38)), set(range(1, 38)), set())
    assert judge(one, GATE) == []
    two = outcomes(126, set(range(38)), set(range(2, 38)), set())
    problems = judge(two, GATE)
    assert len(problems) == 2  # 1.6 points lost, 36 of 38 kept
    assert problems[0].startswith("exact rate 0.286 quantized against 0.302 reference: "
                                  "1.6 points lost")


# -- reading only what the outcomes need ---------------------------------------------------


class Scripted(SessionRuntime):
    """A session runtime whose greedy answer to every prompt is ``answer`` (a model that
    always writes the same tokens); counts the tokens it is asked to run."""

    context_limit = 4096

    def __init__(self, answer: list[int], eos: int) -> None:
        self.answer, self.tokens_run = answer, 0
        self.eos_token_id: int | list[int] | None = eos

    def session(self, prompt_ids: list[int]) -> Any:
        runtime = self

        class Session:
            def __init__(self) -> None:
                self.out: list[int] = []
                self.cache_len = 0

            def prefill(self) -> int:
                runtime.tokens_run += len(prompt_ids)
                self.out = [runtime.answer[0]]
                return runtime.answer[0]

            def step(self, draft: list[int]) -> list[int]:
                runtime.tokens_run += 1 + len(draft)
                n, new = len(self.out), list[int]()
                for token in draft:  # accepted while it is the model's own next token
                    if token != runtime.answer[n + len(new)]:
                        break
                    new.append(token)
                new.append(runtime.answer[n + len(new)])
                self.out += new
                return new

            def close(self) -> None:
                pass

        return Session()


class Whole(Scripted):
    """The same model answering whole (no sessions): what reading everything gives."""

    def __getattribute__(self, name: str) -> Any:
        if name == "session":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def generate(self, request: Any, on_tokens: Any = None) -> Any:
        from fastapply.decoding.speculate import Generation, cut_at_stop

        out, stopped = cut_at_stop(self.answer[: request.max_new_tokens], request.stop_ids)
        return Generation(out, Stats(finish_reason="stop" if stopped else "length",
                                     forward_passes=1))


@pytest.fixture(scope="module")
def tok() -> Any:
    from fastapply.model.tiny import build_tokenizer

    return build_tokenizer()


RECORD = {"id": "r", "original": "a = 1\nb = 2\nc = 3\n", "snippet": "b = 3\n",
          "updated": "a = 1\nb = 3\nc = 3\n"}


def answer(tok: Any, text: str, junk: int = 0) -> list[int]:
    """Token ids of a kortix answer with ``text`` (then ``junk`` tokens of more text),
    ended by <|im_end|>, padded so that a model may run on to any budget."""
    from fastapply.decoding import prompts

    ids = prompts.encode(tok, prompts.KORTIX.expected_output(text))
    ids += prompts.encode(tok, "x = 0\n" * junk)[:junk]
    return ids + [tok.convert_tokens_to_ids("<|im_end|>")] + [5] * 400


CASES = {  # name: (reference's file, candidate's file, junk after the candidate's)
    "both exact": (RECORD["updated"], RECORD["updated"], 0),
    "lost": (RECORD["updated"], "a = 1\nb = 2\nc = 3\n", 0),
    "gained": ("a = 1\nb = 2\nc = 3\n", RECORD["updated"], 0),
    "same wrong file": ("a = 1\n", "a = 1\n", 0),
    "wrong, parted later": ("a = 1\nb = 3\nc = 4\nd = 5\n", "a = 1\nb = 3\nc = 4\nd = 6\n", 0),
    "both run to the budget": ("a = 9\n" * 40, "a = 9\n" * 40, 0),
    "exact, then runs on": (RECORD["updated"], RECORD["updated"], 60),
}


@pytest.mark.parametrize("case", CASES)
def test_reading_until_decided_gives_the_outcomes_of_the_whole_answers(
        tok: Any, case: str) -> None:
    ref_text, cand_text, junk = CASES[case]
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ref_ids = answer(tok, ref_text)
    cand_ids = answer(tok, cand_text, junk)
    read = parity([RECORD], tok, "kortix", Scripted(ref_ids, eos), Scripted(cand_ids, eos),
                  max_tokens=200, max_draft_len=16, answer_margin_tokens=8)
    whole = parity([RECORD], tok, "kortix", Whole(ref_ids, eos), Whole(cand_ids, eos),
                   max_tokens=200, max_draft_len=16, answer_margin_tokens=8)
    a, b = read["per_edit"][0], whole["per_edit"][0]
    for key in ("identical", "reference_exact", "quantized_exact"):
        assert a[key] == b[key], key
    if not b["identical"] and b.get("first_divergence"):
        assert a["first_divergence"]["token_index"] == b["first_divergence"]["token_index"]
        assert a["first_divergence"]["line"] == b["first_divergence"]["line"]


def test_a_lost_edit_is_read_only_to_where_it_left_the_file(tok: Any) -> None:
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ref, cand = Scripted(answer(tok, RECORD["updated"]), eos), Scripted(
        answer(tok, "a = 1\nb = 2\n" + "z = 0\n" * 30), eos)
    figures = parity([RECORD], tok, "kortix", ref, cand, max_tokens=400, max_draft_len=16)
    row = figures["per_edit"][0]
    assert (row["reference_exact"], row["quantized_exact"], row["identical"]) == (
        True, False, False)
    assert row["stopped_early"] == ["quantized"] and row["cut"] == []
    div = row["first_divergence"]
    assert (div["line"], div["reference_line"], div["quantized_line"]) == (
        2, "b = 3", "b = 2")
    # the candidate read its prompt and a few tokens past "b = 2", not its 180-token answer
    assert row["quantized_tokens"] < 20 and figures["passes"]["quantized"] <= 4
    assert "r at line 2 (token " in judge(figures, GATE)[0]
