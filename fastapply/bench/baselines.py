"""Benchmark-only drafters and the oracle simulator (not used when serving).

* :class:`OriginalCursorDrafter`: one cursor over the original file (Cursor's
  speculative edits), K fixed;
* :class:`PromptLookupDrafter`: n-gram prompt lookup as in vLLM, TRT-LLM, transformers;
* :func:`simulate`: a drafter against an oracle model whose greedy output is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapply.decoding.drafting import Drafter, SpeculativeEditsDrafter


class OriginalCursorDrafter(SpeculativeEditsDrafter):
    """Baseline: one cursor over the original file only (Cursor's speculative edits)."""

    def __init__(self, original: Sequence[int], max_k: int = 64) -> None:
        super().__init__([original], max_k=max_k, min_k=max_k)


class PromptLookupDrafter:
    """Baseline: n-gram prompt lookup as in vLLM, TRT-LLM and transformers.

    The last n tokens (n = max_ngram .. min_ngram) are looked up in prompt + output;
    the tokens after their *first* occurrence are the draft, K fixed.

    >>> PromptLookupDrafter([1, 2, 3, 4, 2, 3, 5], max_k=2).propose([2, 3], max_len=8)
    [4, 2]
    """

    def __init__(self, prompt: Sequence[int], max_k: int = 64, max_ngram: int = 3,
                 min_ngram: int = 1) -> None:
        #: Prompt followed by the output seen so far.
        self.context = list(prompt)
        #: Draft length and n-gram sizes tried.
        self.k, self.max_ngram, self.min_ngram = max_k, max_ngram, min_ngram
        #: ``first[n][gram]``: position after the first occurrence of the n-gram.
        self.first: list[dict[tuple[int, ...], int]] = [{} for _ in range(max_ngram + 1)]
        #: Context positions indexed so far (the n-grams ending at or before it).
        self._indexed = 0
        #: Prompt length: ``context[_prompt_len:]`` is the output.
        self._prompt_len = len(self.context)
        self._index_upto(len(self.context))

    def _index_upto(self, end: int) -> None:
        """Record first occurrences of the n-grams ending in ``(_indexed, end]``."""
        toks = self.context
        for stop in range(self._indexed + 1, end + 1):
            for n in range(self.min_ngram, self.max_ngram + 1):
                if stop >= n:
                    self.first[n].setdefault(tuple(toks[stop - n:stop]), stop)
        self._indexed = end

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        grown = self._prompt_len + len(output)
        self.context.extend(output[len(self.context) - self._prompt_len:])
        # Index all but the final position, so the suffix cannot match itself.
        self._index_upto(grown - 1)
        k = min(self.k, max_len)
        for n in range(min(self.max_ngram, grown), self.min_ngram - 1, -1):
            pos = self.first[n].get(tuple(self.context[-n:]))
            if pos is not None:
                return self.context[pos:pos + k]
        return []


@dataclass
class SimResult:
    """Outcome of :func:`simulate`."""

    #: Forward passes, the prefill (which yields the first token) included.
    steps: int
    #: Tokens produced (== len(target)).
    tokens: int
    #: Wall time of each ``propose`` call, in nanoseconds.
    propose_ns: list[int]
    #: Draft tokens proposed in all (accepted or not): the verification work paid for.
    drafted_tokens: int = 0

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0


def simulate(drafter: Drafter, target: Sequence[int], k: int) -> SimResult:
    """Run ``drafter`` against an oracle model whose greedy output is ``target``.

    Prefill yields the first token; each further step proposes at most ``k`` tokens
    and yields the matching prefix plus one token, so the bound is k + 1 per step.

    >>> target = [1, 2, 3, 4, 5, 6]
    >>> simulate(SpeculativeEditsDrafter([target], max_k=2), target, k=2).steps
    3
    """
    from time import perf_counter_ns

    target = list(target)
    if not target:
        return SimResult(0, 0, [])
    out = target[:1]
    steps, times, drafted = 1, [], 0
    while len(out) < len(target):
        room = len(target) - len(out)
        t0 = perf_counter_ns()
        draft = drafter.propose(out, min(k, room - 1))
        times.append(perf_counter_ns() - t0)
        draft = draft[: min(k, room - 1)]
        drafted += len(draft)
        accepted = 0
        base = len(out)
        while accepted < len(draft) and draft[accepted] == target[base + accepted]:
            accepted += 1
        out.extend(target[base:base + accepted + 1])
        steps += 1
    return SimResult(steps, len(out), times, drafted)
