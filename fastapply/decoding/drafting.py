"""Draft tokens for speculative edits: the input files predict the output.

A fast-apply model mostly copies: its output is the original file with the snippet's
changes merged in. So the next tokens are usually found in one of these *sources*, best
first: the deterministic candidate merge (:mod:`fastapply.merge`), the original file,
the edit snippet. :class:`SpeculativeEditsDrafter` keeps a cursor in each source. After
every verification step it checks whether the new output tokens continued the source at
the cursor; if so the cursor advances, if not the source is re-synchronised by the
longest suffix of the output found in it, preferring the place nearest after the old
cursor. The draft is the next K tokens after the cursor of the source with the longest
match (ties go to the earlier source); K doubles while drafts are accepted whole and
halves when they are not, so it is back to 1 after six rejected drafts of 64 and back to
64 after six accepted ones. With no source matching at all the draft is empty (K = 0).

Worked example (tokens are small ints; source 0 is the candidate, 1 the original)::

    candidate = [1, 2, 3, 9, 9, 4, 5]     original = [1, 2, 3, 4, 5]
    output so far [1, 2]      -> candidate in sync at 2: draft [3, 9, 9, 4, 5]
    model accepts 3, then writes 4 instead of 9: output [1, 2, 3, 4]
    candidate: 4 follows ... 3 nowhere, but [4] occurs at 5 -> cursor 6 (match length 1)
    original: [2, 3, 4] occurs ending at 3 -> cursor 4 (match length 3): wins, draft [5]

>>> d = SpeculativeEditsDrafter([[1, 2, 3, 9, 9, 4, 5], [1, 2, 3, 4, 5]], max_k=8)
>>> d.propose([1, 2], max_len=8)
[3, 9, 9, 4, 5]
>>> d.propose([1, 2, 3, 4], max_len=8)
[5]

Per-step cost is independent of file length: a cursor in sync costs a comparison of the
new tokens (at most K + 1); a source's n-gram index is built once per request, on its
first resync (a source that never leaves sync is never indexed); a resync probes at most
``MAX_NGRAM`` keys, bisects one sorted position list and extends at most
``MAX_EXTEND + 1`` candidate positions by at most ``MAX_MATCH`` tokens.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

#: Longest n-gram indexed (a suffix lookup tries n = MAX_NGRAM .. 1).
MAX_NGRAM = 4
#: Candidate positions examined per lookup (nearest after the cursor, plus one before).
MAX_EXTEND = 4
#: How far back a match is extended to rank candidates, in tokens.
MAX_MATCH = 32


class Drafter(Protocol):
    """What the verification loop asks of a drafter."""

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        """Draft tokens to follow ``output`` (all tokens generated so far), at most max_len."""
        ...


class NoDrafter:
    """No drafts: plain decoding."""

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        return []


Index = list[dict[tuple[int, ...], list[int]]]


def build_index(tokens: Sequence[int], max_n: int = MAX_NGRAM) -> Index:
    """``index[n][gram]`` = sorted positions just *after* each occurrence of the n-gram.

    >>> build_index([5, 6, 5, 6], max_n=2)[2][(5, 6)]
    [2, 4]
    >>> build_index([5, 6, 5, 6], max_n=2)[1][(6,)]
    [2, 4]
    """
    index: Index = [{} for _ in range(max_n + 1)]
    toks = list(tokens)
    for n in range(1, max_n + 1):
        table = index[n]
        # zip(toks, toks[1:], ...) yields every n-gram as a tuple without slicing; the
        # shifted lists differ in length on purpose (it stops at the last full n-gram)
        grams = zip(*(toks[i:] for i in range(n)), strict=False)
        for end, gram in enumerate(grams, start=n):
            positions = table.get(gram)
            if positions is None:
                table[gram] = [end]
            else:
                positions.append(end)
    return index


def match_length(output: Sequence[int], source: Sequence[int], end: int,
                 limit: int = MAX_MATCH) -> int:
    """How many tokens before ``source[end]`` equal the end of ``output`` (≤ limit).

    >>> match_length([7, 1, 2, 3], [0, 1, 2, 3, 4], end=4)
    3
    """
    lo, hi = 0, min(limit, len(output), end)
    while lo < hi:  # the longest L with equal suffixes; equality is monotone in L
        mid = (lo + hi + 1) // 2
        if output[len(output) - mid:] == source[end - mid:end]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def find_resync(output: Sequence[int], source: Sequence[int],
                index: Index, cursor: int) -> tuple[int, int]:
    """Where ``source`` continues ``output``: (position, match length), or (-1, 0).

    The longest indexed suffix of ``output`` is looked up; among its occurrences the ones
    nearest after ``cursor`` (and the nearest before) are extended backwards, and the
    longest match wins, ties going to the nearest after the cursor.

    >>> src = [1, 2, 3, 1, 2, 4]
    >>> find_resync([9, 1, 2], src, build_index(src), cursor=0)
    (2, 2)
    >>> find_resync([9, 1, 2], src, build_index(src), cursor=3)
    (5, 2)
    >>> find_resync([3, 1, 2], src, build_index(src), cursor=3)
    (5, 3)
    """
    tail = list(output[-MAX_MATCH:])  # bounded, and a list whatever ``output`` is
    for n in range(min(len(index) - 1, len(tail)), 0, -1):
        positions = index[n].get(tuple(tail[-n:]))
        if not positions:
            continue
        i = bisect_left(positions, cursor)
        picks = positions[i:i + MAX_EXTEND]
        if i > 0:
            picks.append(positions[i - 1])
        best, best_len = -1, 0
        for pos in picks:
            length = match_length(tail, source, pos)
            if length > best_len:
                best, best_len = pos, length
        return best, best_len
    return -1, 0


@dataclass
class _Source:
    #: The source's tokens.
    tokens: list[int]
    #: Its n-gram index, built on the first resync (never, while the source stays in sync).
    index: Index | None = None
    #: Position of the token expected next; ``-(hint + 1)`` when out of sync, where hint
    #: is the position the output had reached in this source when it left it.
    cursor: int = 0
    #: Length of the output suffix matched at the cursor, capped at MAX_MATCH.
    strength: int = MAX_MATCH


def advance(tokens: Sequence[int], cursor: int, new: Sequence[int]) -> int:
    """How many of ``new`` continue ``tokens`` at ``cursor`` (the accepted run).

    >>> advance([1, 2, 3, 4], 1, [2, 3, 9])
    2
    """
    if tokens[cursor:cursor + len(new)] == new:  # the usual case, at C speed
        return len(new)
    n, top = 0, min(len(new), len(tokens) - cursor)
    while n < top and tokens[cursor + n] == new[n]:
        n += 1
    return n


def next_k(k: int, draft_len: int, accepted: int, min_k: int, max_k: int) -> int:
    """K after a step: double when the whole draft was taken, else halve (at least the
    accepted run, so a source that was right for a while keeps most of its K).

    >>> next_k(8, 8, 8, 1, 64), next_k(8, 8, 0, 1, 64), next_k(64, 64, 50, 1, 64)
    (16, 4, 50)
    """
    if accepted >= draft_len:
        return min(max_k, max(2 * k, 1))
    return max(min_k, min(max_k, max(k // 2, accepted)))


class OutputLookup:
    """The output itself as the last source: where the model writes text that is in no
    input (a new function, or a wrong turn), it often repeats what it wrote a few lines
    up (a test's assertions, a list of cases). Prompt lookup finds those repeats because
    it searches the output too; this does the same, for the most recent occurrence.

    The n-gram index grows with the output (each new token adds ``MAX_NGRAM`` keys), so
    a step costs O(K) however long the output is.

    >>> o = OutputLookup()
    >>> o.draft([1, 2, 3, 9, 1, 2], k=4)
    (2, [3, 9, 1, 2])
    """

    def __init__(self) -> None:
        #: ``index[n][gram]``: positions just after each occurrence (ascending).
        self.index: Index = [{} for _ in range(MAX_NGRAM + 1)]
        #: Output positions indexed: the n-grams ending at or before it.
        self.indexed = 0

    def _grow(self, output: Sequence[int], end: int) -> None:
        for stop in range(self.indexed + 1, end + 1):
            for n in range(1, min(MAX_NGRAM, stop) + 1):
                self.index[n].setdefault(tuple(output[stop - n:stop]), []).append(stop)
        self.indexed = max(self.indexed, end)

    def draft(self, output: Sequence[int], k: int) -> tuple[int, list[int]]:
        """(match length, up to k tokens after the latest earlier occurrence of the
        output's longest indexed suffix); (0, []) when there is none."""
        # Index all but the last position, so the suffix cannot match itself.
        self._grow(output, len(output) - 1)
        tail = list(output[-MAX_MATCH:])
        for n in range(min(MAX_NGRAM, len(tail)), 0, -1):
            positions = self.index[n].get(tuple(tail[-n:]))
            if positions:
                pos = positions[-1]
                return match_length(tail, output, pos), list(output[pos:pos + k])
        return 0, []


class SpeculativeEditsDrafter:
    """Drafts from several sources with one cursor each; K adapts to acceptance.

    ``sources`` are token lists in priority order (candidate merge, original, snippet);
    empty ones are allowed. The draft comes from the source with the longest suffix match
    at its cursor, ties going to the earlier source. With ``self_lookup`` the output so
    far is a last source (:class:`OutputLookup`), used when its match is strictly longer.
    """

    def __init__(self, sources: Sequence[Sequence[int]], max_k: int = 64, min_k: int = 1,
                 start_k: int | None = None, self_lookup: bool = True) -> None:
        #: The sources with their cursors (indexes built lazily), in priority order.
        self.sources = [_Source(list(s)) for s in sources]
        #: The output as a last source (None: off).
        self.output_lookup = OutputLookup() if self_lookup else None
        #: Largest and smallest draft length (K); min_k <= max_k.
        self.max_k, self.min_k = max_k, min(min_k, max_k)
        #: Current draft length.
        self.k = max_k if start_k is None else start_k
        #: Output length when the last draft was made.
        self._seen = 0
        #: The last draft, to tell how much of it the model accepted.
        self._draft: list[int] = []

    def _observe(self, output: Sequence[int]) -> None:
        """Adapt K and advance or invalidate each cursor by the tokens added since."""
        new = list(output[self._seen:])  # at most K + 1 tokens: bounded work
        if not new:
            return
        if self._draft:
            accepted = advance(new, 0, self._draft)  # the draft's prefix the model took
            self.k = next_k(self.k, len(self._draft), accepted, self.min_k, self.max_k)
        for src in self.sources:
            c = src.cursor
            if c < 0:
                continue
            run = advance(src.tokens, c, new)
            if run == len(new):
                src.cursor, src.strength = c + run, min(MAX_MATCH, src.strength + run)
            else:
                src.cursor = -(c + run + 1)  # out of sync; remember where it left
        self._seen = len(output)

    def propose(self, output: Sequence[int], max_len: int) -> list[int]:
        """The next draft (see the module docstring for a worked example)."""
        self._observe(output)
        k = min(self.k, max_len)
        self._draft = self._pick(output, k) if k > 0 else []
        return list(self._draft)

    def _pick(self, output: Sequence[int], k: int) -> list[int]:
        """Up to k tokens after the cursor of the best source (empty when none matches).

        Sources are visited in priority order; one in sync with a full-strength match
        cannot be beaten by a later one, so the visit stops there (the common case: no
        lookups at all). Out-of-sync sources before it are resynced, at bounded cost.
        """
        best: _Source | None = None
        for src in self.sources:
            if src.cursor < 0:
                if src.index is None:
                    src.index = build_index(src.tokens)
                pos, length = find_resync(output, src.tokens, src.index, -src.cursor - 1)
                if pos < 0:
                    continue
                src.cursor, src.strength = pos, length
            if src.cursor >= len(src.tokens):
                continue
            if best is None or src.strength > best.strength:
                best = src
            if best.strength >= MAX_MATCH:
                break
        if self.output_lookup is not None and (best is None or best.strength < MAX_MATCH):
            length, draft = self.output_lookup.draft(output, k)
            if draft and (best is None or length > best.strength):
                return draft
        return best.tokens[best.cursor:best.cursor + k] if best else []
