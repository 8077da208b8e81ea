"""The speculative-edits drafter: cursors, resync, adaptive K, cost bound."""

from __future__ import annotations

import doctest
import random

import pytest

from fastapply.bench.baselines import OriginalCursorDrafter, PromptLookupDrafter, simulate
from fastapply.decoding import drafting
from fastapply.decoding.drafting import SpeculativeEditsDrafter, find_resync


def test_perfect_source_reaches_the_bound() -> None:
    target = list(range(1000))
    for k in (1, 4, 16, 64):
        sim = simulate(SpeculativeEditsDrafter([target], max_k=k), target, k)
        # prefill gives one token, then every step gives k + 1
        assert sim.steps == 1 + -(-(len(target) - 1) // (k + 1))


def test_resync_after_insertion_and_deletion() -> None:
    original = list(range(100, 400))
    # the model inserts 5 new tokens after position 50 and deletes 20 at 200..220
    target = original[:50] + [1, 2, 3, 4, 5] + original[50:200] + original[220:]
    sim = simulate(SpeculativeEditsDrafter([original], max_k=32), target, 32)
    # a handful of steps per change, not one per token
    assert sim.steps < 30
    baseline = simulate(drafting.NoDrafter(), target, 32)
    assert baseline.steps == len(target)


def test_candidate_source_covers_new_text() -> None:
    original = list(range(100, 400))
    target = original[:150] + list(range(1000, 1040)) + original[150:]
    with_candidate = simulate(SpeculativeEditsDrafter([target, original], max_k=64), target, 64)
    original_only = simulate(OriginalCursorDrafter(original, max_k=64), target, 64)
    assert with_candidate.steps < original_only.steps
    assert with_candidate.steps == 1 + -(-(len(target) - 1) // 65)  # the bound


def test_nearest_occurrence_after_the_cursor_wins() -> None:
    src = [7, 8, 9, 1, 2, 3, 7, 8, 9, 4, 5, 6]
    index = drafting.build_index(src)
    assert find_resync([7, 8, 9], src, index, cursor=0) == (3, 3)
    assert find_resync([7, 8, 9], src, index, cursor=5) == (9, 3)


def test_k_shrinks_on_rejection_and_grows_back() -> None:
    src = list(range(500))
    d = SpeculativeEditsDrafter([src], max_k=64)
    out = [0]
    assert len(d.propose(out, 1000)) == 64
    ks = []
    for jump in (100, 200, 300, 400, 450, 470):  # the model goes elsewhere each time
        out.append(jump)  # first drafted token rejected; the source resyncs at jump + 1
        d.propose(out, 1000)
        ks.append(d.k)
    assert ks == [32, 16, 8, 4, 2, 1]
    for _ in range(4):  # drafts accepted whole: K doubles again
        draft = d.propose(out, 1000)
        out += [*draft, src[out[-1] + len(draft) + 1]]
    d.propose(out, 1000)
    assert d.k == 16


def test_draft_never_exceeds_max_len_or_source() -> None:
    src = list(range(10))
    d = SpeculativeEditsDrafter([src], max_k=64)
    assert d.propose([0], 3) == [1, 2, 3]
    assert d.propose([0], 0) == []
    assert SpeculativeEditsDrafter([src], max_k=64).propose(list(range(10)), 50) == []


def test_empty_sources_and_no_match_give_no_draft() -> None:
    assert SpeculativeEditsDrafter([[], []]).propose([1, 2, 3], 10) == []
    assert SpeculativeEditsDrafter([[5, 6]]).propose([1, 2, 3], 10) == []


def test_prompt_lookup_takes_the_first_occurrence() -> None:
    d = PromptLookupDrafter([1, 2, 3, 9, 2, 3, 4], max_k=3)
    assert d.propose([2, 3], 10) == [9, 2, 3]


def test_step_cost_does_not_depend_on_file_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count suffix extensions per step, and the tokens each may compare, on a short and a
    100x longer file where every step must resync: the bound is the same."""
    calls: list[int] = []  # per match_length call: how many output tokens it may compare
    real = drafting.match_length

    def counting(output: list[int], source: list[int], end: int,
                 limit: int = drafting.MAX_MATCH) -> int:
        calls.append(min(len(output), limit))
        return real(output, source, end, limit)

    monkeypatch.setattr(drafting, "match_length", counting)
    rng = random.Random(0)
    for n in (2_000, 200_000):
        src = [rng.randrange(50) for _ in range(n)]
        target = [rng.randrange(50) for _ in range(300)]  # never in sync: resync every step
        calls.clear()
        sim = simulate(SpeculativeEditsDrafter([src], max_k=8), target, 8)
        assert sim.steps > 250 and len(calls) > sim.steps  # the lookups did run
        assert len(calls) <= (drafting.MAX_EXTEND + 1) * sim.steps
        assert max(calls) <= drafting.MAX_MATCH


def test_worked_examples_in_docstrings() -> None:
    result = doctest.testmod(drafting)
    assert result.attempted >= 8 and result.failed == 0


def test_k_collapses_when_every_draft_fails() -> None:
    """A model that writes nothing like the sources (e.g. random weights): after a few
    rejected drafts each step verifies about one draft token, not K."""
    rng = random.Random(1)
    src = [rng.randrange(40) for _ in range(3000)]
    target = [rng.randrange(40) for _ in range(2000)]
    sim = simulate(SpeculativeEditsDrafter([src, src[::-1]], max_k=64), target, 64)
    assert sim.drafted_tokens / sim.steps < 1.3
    assert sim.drafted_tokens < 2 * len(target)


def test_ties_go_to_the_earlier_source_and_it_is_rechecked() -> None:
    a, x, b, y, c = (list(range(100, 140)), [1, 2, 3], list(range(200, 250)), [5, 6, 7],
                     list(range(300, 340)))
    candidate, original = a + x + b + y + c, a + b + c
    d = SpeculativeEditsDrafter([candidate, original], max_k=64)
    assert d.propose(a, 64)[:3] == x  # both in sync: the candidate has priority
    assert d.propose(a + b[:1], 64)[:3] == b[1:4]  # the model skipped x: the original leads
    # after b both match the output by MAX_MATCH tokens: the candidate wins the tie again
    # and drafts its insertion y, which the original does not have
    assert d.propose(a + b, 64)[:3] == y


def test_output_may_be_any_sequence() -> None:
    original = list(range(100, 400))
    target = original[:50] + [1, 2, 3] + original[60:]
    as_list = SpeculativeEditsDrafter([original], max_k=16)
    as_tuple = SpeculativeEditsDrafter([original], max_k=16)
    out = target[:1]
    while len(out) < len(target):
        draft = as_list.propose(out, 16)
        assert as_tuple.propose(tuple(out), 16) == draft
        base = len(out)
        ok = 0
        while ok < len(draft) and base + ok < len(target) and draft[ok] == target[base + ok]:
            ok += 1
        out += target[base:base + ok + 1]


def test_a_source_in_sync_is_never_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[int] = []
    real = drafting.build_index

    def counting(tokens: list[int], max_n: int = drafting.MAX_NGRAM) -> drafting.Index:
        builds.append(len(tokens))
        return real(tokens, max_n)

    monkeypatch.setattr(drafting, "build_index", counting)
    target = list(range(500))
    simulate(SpeculativeEditsDrafter([target, target[::-1]], max_k=8), target, 8)
    assert builds == []
    simulate(SpeculativeEditsDrafter([target[:250] + [9] + target[250:]]), target, 8)
    assert builds == [501]  # built once, on the first resync


def test_output_lookup_drafts_what_the_model_repeats() -> None:
    # The model writes a block that is in no source, then repeats it (a test's assertions
    # written twice): the second copy is drafted from the output itself.
    source = list(range(1000, 1100))
    block = [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    target = source[:20] + block + [99] + block + source[20:]
    with_lookup = simulate(SpeculativeEditsDrafter([source], max_k=16), target, 16)
    without = simulate(SpeculativeEditsDrafter([source], max_k=16, self_lookup=False),
                       target, 16)
    assert with_lookup.steps < without.steps


def test_output_lookup_never_overrides_a_source_in_sync() -> None:
    # output [1, 2, 3, 1, 2] repeats itself, but the source is in sync with all of it
    # and says 4 next: the source's draft wins.
    src = [1, 2, 3, 1, 2, 4, 5, 6]
    d = SpeculativeEditsDrafter([src], max_k=4)
    assert d.propose([1, 2, 3, 1, 2], max_len=4) == [4, 5, 6]
