"""Two models' greedy answers to one edit, read only as far as the FP8 check needs.

Per edit the check decides three things: whether each model's merged file is exact (the
record's ``updated``) and whether the two outputs are identical. None of them needs
every token of both outputs:

* an answer can end exact only while the file text it has written so far is a prefix of
  ``updated`` (:func:`could_be_exact`); at the first token where it is not, that model's
  exact outcome is decided: no;
* two outputs are identical only until the first token where they part; there the
  identical outcome is decided: no.

So each model is read while one of its outcomes is open, and no further
(:func:`read_pair`). Where a model is exact, all of its answer is read; where both
models write the same wrong text, both are read until they part (or end).

Both are read with fastapply's own speculative loop (one forward pass over
``[last token] + draft``, the draft's prefix that equals the model's argmax accepted,
plus the argmax after it), with drafts chosen for the check: the *other* model's output
where this one agrees with it so far (a model that writes what the other wrote accepts
its whole draft), else the true answer, then the served drafter's sources (candidate
merge, original, snippet). Drafts change only the number of passes, never a token: every
token read is the model's own argmax, so what is read is plain greedy decoding's output,
and each outcome is the one the whole outputs give.

Worked example (a kortix answer, ``updated`` = ``"a = 1\\nb = 3\\n"``)::

    reference  <updated-code>a = 1\\nb = 3\\n</updated-code><stop>   exact: read to the end
    quantized  <updated-code>a = 1\\nb = 2                           parted at "2": not
                                                                     identical, and "b = 2"
                                                                     is no prefix of the
                                                                     file: not exact; stop
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapply.decoding.speculate import Generation, Session, cut_at_stop


def could_be_exact(fmt: Any, text: str, updated: str) -> bool:
    """Whether an unfinished answer whose text so far is ``text`` can still end with the
    merged file ``updated``: the file text already certain in it is a prefix of
    ``updated`` (an incomplete character at the end, U+FFFD, is not yet text).

    >>> from fastapply.decoding.prompts import KORTIX
    >>> could_be_exact(KORTIX, "<updated-code>a = 1\\nb", "a = 1\\nb = 3\\n")
    True
    >>> could_be_exact(KORTIX, "<updated-code>a = 1\\nb = 2", "a = 1\\nb = 3\\n")
    False
    >>> could_be_exact(KORTIX, "<updated-co", "a = 1\\n")  # may still become the tag
    True
    """
    from fastapply.decoding.prompts import StreamExtractor

    certain = StreamExtractor(fmt).feed(text.rstrip("\ufffd"))
    return updated.startswith(certain)


def agree(a: Sequence[int], b: Sequence[int], a_done: bool, b_done: bool) -> bool:
    """Whether two outputs read so far may still be identical: one is a prefix of the
    other, and the shorter one has not ended.

    >>> agree([1, 2], [1, 2, 3], False, False), agree([1, 2], [1, 2, 3], True, False)
    (True, False)
    >>> agree([1, 4], [1, 2, 3], False, False), agree([1, 2], [1, 2], True, True)
    (False, True)
    """
    short, long_, short_done = (a, b, a_done) if len(a) <= len(b) else (b, a, b_done)
    if list(long_[: len(short)]) != list(short):
        return False
    return len(short) == len(long_) or not short_done


@dataclass
class Reading:
    """One model's greedy answer to one prompt, read pass by pass."""

    #: The model's decoding session (None: read whole elsewhere, see :meth:`whole`).
    session: Session | None
    #: Drafts where the other model's output does not give one (sources, truth first).
    drafter: Any
    #: Most tokens the answer may have (an answer that reaches it is cut).
    budget: int
    #: Tokens that end the answer (kept as its last token).
    stop_ids: frozenset[int]
    #: Largest draft per pass (K).
    max_draft_len: int
    #: Tokens read so far.
    tokens: list[int] = field(default_factory=list)
    #: The answer ended with a stop token.
    finished: bool = False
    #: Nothing more will be read (a whole reading).
    ended: bool = False
    #: Forward passes run (the prompt's included).
    passes: int = 0
    #: Wall seconds spent in them.
    seconds: float = 0.0

    @classmethod
    def whole(cls, generation: Generation, budget: int) -> Reading:
        """A reading of an answer generated whole (a runtime without sessions)."""
        return cls(None, None, budget, frozenset(), 0, list(generation.token_ids),
                   generation.stats.finish_reason == "stop", True,
                   generation.stats.forward_passes)

    @property
    def cut(self) -> bool:
        """The answer reached its budget without ending."""
        return not self.finished and len(self.tokens) >= self.budget

    @property
    def done(self) -> bool:
        return self.finished or self.ended or self.cut

    def step(self, other: Sequence[int]) -> None:
        """One forward pass: the prompt's, or one over the next draft. The draft is
        ``other``'s tokens past ours where ours are a prefix of them, else the drafter's."""
        if self.session is None or self.done:
            raise RuntimeError("step() on a reading that has ended")
        t0 = time.perf_counter()
        if self.passes == 0:
            new = [self.session.prefill()]
        else:
            room = self.budget - len(self.tokens) - 1  # a pass yields accepted + 1 tokens
            draft = self.drafter.propose(self.tokens, room)[:room]
            n = len(self.tokens)
            if len(other) > n and list(other[:n]) == self.tokens:
                draft = list(other[n: n + min(room, self.max_draft_len)])
            new = self.session.step(draft)
        self.passes += 1
        new, self.finished = cut_at_stop(new, self.stop_ids)
        self.tokens.extend(new)
        self.seconds += time.perf_counter() - t0

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def read_pair(reference: Reading, candidate: Reading,
              exact_open: Callable[[Reading], bool]) -> None:
    """Read both answers until every outcome is decided (see the module docstring).

    ``exact_open(reading)``: whether that unfinished answer can still end exact. A model
    is read while it can, or while the two outputs still agree; the one behind goes
    first (verifying the other's tokens), the reference on a tie.
    """
    open_ = {id(reference): True, id(candidate): True}
    while True:
        same = agree(reference.tokens, candidate.tokens, reference.done, candidate.done)
        due = []
        for r in (reference, candidate):
            if r.done:
                continue
            open_[id(r)] = open_[id(r)] and exact_open(r)  # once closed, closed for good
            if open_[id(r)] or same:
                due.append(r)
        if not due:
            return
        r = min(due, key=lambda x: len(x.tokens))
        r.step((candidate if r is reference else reference).tokens)
