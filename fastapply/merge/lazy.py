"""Placing one lazy segment in the original: a weighted, in-order alignment.

A lazy segment is a run of consecutive lines of the *result*; between segments, a marker
stands for a run of unchanged original lines. Placing a segment means finding the
original region ``orig[start:end]`` it replaces. We pick the chain of matched line pairs
``(i, j)`` (segment line i equals original line j, both increasing) that maximises

    sum of match weights  -  DEL_COST * (original lines skipped between matches)
                          -  EDGE_COST at each segment edge next to a marker that is
                             not itself a matched line (a segment should start and end
                             in context)
                          -  DROP_DEF per removed definition (``def``, ``func``,
                             ``class``, ``function``, an import, a top-level ``var``
                             or ``const``, a test's ``it('name', ...``; in the other
                             languages a ``fn``/``fun``/``struct``/``enum``/... line,
                             a typed method header ``Type name(``, a gtest
                             ``TEST_F(Suite, name)``, an RSpec ``it "name"``) whose
                             name the segment never mentions, or heading whose text
                             it lacks: a new function, test or section written next
                             to similar ones is an insertion, not a rewrite of its
                             neighbours

A line's weight falls with how often it occurs in the original (a unique line is worth
1.0, a line found 25 times 0.2, a blank line 0.02), so generic lines (``}``, ``try:``)
cannot outvote a distinctive anchor. Two passes:

1. *locate*: the best chains over all candidate pairs, with a flat LOCATE_COST per
   skipped line, in O(P log N) for P pairs with a Fenwick tree of prefix maxima over
   ``j`` (``best[q] + LOCATE_COST * j_q``); the best few disjoint regions are kept;
2. *align*: an exact edit-distance alignment in a window around each region, where a
   skipped original line is either dropped (DEL_COST) or replaced by a segment line
   (SUB_COST, or a gain when the two lines share most of their words: an edited line),
   under the snippet's contract on context runs (see ``align``), kept exact by carrying
   the length of the current run of matches in the state.

Among equal scores the placement whose region the segment's text most resembles wins
(then the one nearest the previous segment); the other is reported as an ambiguity
(``rival``), as is any region scoring within CLOSE.

>>> orig = ["a = 1", "b = 2", "c = 3", "d = 4"]
>>> p = place(["b = 2", "x = 9", "d = 4"], orig, lo=0, marker_before=True,
...           marker_after=True, loose=False)
>>> (p.start, p.end, p.pairs)
((1, 1), (4, 4), ((0, 1), (2, 3)))
"""

from __future__ import annotations

import difflib
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace

from fastapply.merge.align import align
from fastapply.merge.costs import (
    BIG,
    CANDIDATES,
    CLOSE,
    DEL_COST,
    GAP_COST,
    LOCATE_WORK,
    MERGE_WORK,
    NEAR_COST,
    RUN_COST,
    SUB_COST,
    TOPIC,
    UNIT,
    Placement,
    WorkBudget,
)
from fastapply.merge.definitions import _dropped_defs, removed_definitions
from fastapply.merge.lines import (
    WordIndex,
    _same,
    _similar_lines,
    key_exact,
    key_loose,
    positions,
    similarity,
    tokens,
    weight,
    word_index,
)
from fastapply.merge.locate import _locate

#: The names callers and tests import from here (most are defined in the _merge_* modules).
__all__ = [
    "BIG", "CANDIDATES", "CLOSE", "DEL_COST", "GAP_COST", "LOCATE_WORK", "MERGE_WORK",
    "NEAR_COST", "RUN_COST", "SUB_COST", "TOPIC", "UNIT", "Placement", "WordIndex",
    "WorkBudget", "align", "key_exact", "key_loose", "nonblank_matches", "place", "positions",
    "removed_definitions", "similarity", "tokens", "weight", "word_index",
]


_LONG_WORD = re.compile(r"\w{3,}")


def place(seg: Sequence[str], orig: Sequence[str], lo: int, marker_before: bool,
          marker_after: bool, loose: bool,
          table: dict[str, list[int]] | None = None,
          context: int | None = None, index: WordIndex | None = None,
          budget: WorkBudget | None = None, free: tuple[bool, bool] = (False, False)
          ) -> Placement | None:
    """Best placement of ``seg`` in ``orig[lo:]``, or None if no line of it matches.

    Without a marker before it the segment starts at the top of the file (original lines
    before its first match are dropped, at DEL_COST each); without one after it, it runs
    to the end. The caller decides what to keep when that would drop much. ``table``
    and ``index`` are the original's ``positions`` and ``WordIndex`` (made if absent);
    the work done is spent from ``budget``; ``free`` lifts the context rule at an edge
    anchored where its line is found (see ``align``).
    """
    key = key_loose if loose else key_exact
    if table is None:
        table = positions(orig, key)
    if budget is None:
        budget = WorkBudget()
    n = len(orig)
    skeys = [key(s) for s in seg]
    if not marker_before and not marker_after:  # a whole file: its region is [lo, n)
        if not any(bisect_left(js, lo) < len(js) for k in skeys for js in [table.get(k, [])]):
            return None
        weights = [weight(k, len(table.get(k, ()))) for k in skeys]
        raw = (list(seg), list(orig[lo:])) if not loose else (skeys, [key(s) for s in orig[lo:]])
        whole = align(skeys, [key(s) for s in orig[lo:]], lo, lo, n, weights, False, False,
                      *raw, context=context, budget=budget)[1]
        return whole if whole.pairs else None
    cands = _locate(skeys, table, lo, n, marker_before, marker_after, budget)
    if not cands:
        return None
    if index is None:
        index = WordIndex(table)
    for j in _similar_lines(skeys, lo, table, index, budget):
        if all(j < c[0] or j > c[1] for c in cands):
            cands.append((j, j))
    margin = len(seg) + 8
    weights = [weight(k, len(table.get(k, ()))) for k in skeys]
    unique = {k for k in skeys if k.strip() and len(table.get(k, ())) == 1}

    def window(first: int, last: int, floor: int) -> tuple[int, Placement]:
        w0, w1 = max(floor, first - margin), min(n, last + margin + 1)
        okeys = [key(s) for s in orig[w0:w1]]
        raw = (list(seg), list(orig[w0:w1])) if not loose else (skeys, okeys)
        return align(skeys, okeys, w0, lo, n, weights, marker_before, marker_after, *raw,
                     context=context, dropped=_dropped_defs(orig[w0:w1], seg), budget=budget,
                     near=_nearness(okeys, unique), free=free)

    # readings that anchor no line are no placement
    results = sorted((r for r in (window(first, last, lo) for first, last in cands)
                      if r[1].pairs), key=lambda r: (-r[0], r[1].start[0]))
    if not results:
        return None
    score, best = results[0]
    if best.violations and marker_before and marker_after and _same(
            skeys, [key(s) for s in orig[best.start[0]:best.end[1]]], False):
        # Its lines sit together in the original (reading them there changes nothing):
        # a deletion shows that way. Its head may be at an earlier copy of its first
        # line, or its tail at a later copy of its last line, with lines removed between.
        # (A deletion longer than RUN_COST / DEL_COST lines scores below the no-op.)
        reach = RUN_COST // DEL_COST
        firsts = table.get(skeys[0], [])
        lasts = table.get(skeys[-1], [])
        head = firsts[bisect_left(firsts, max(lo, best.start[1] - reach)):
                      bisect_left(firsts, best.start[1])]
        tail = lasts[bisect_left(lasts, best.end[0]):bisect_left(lasts, best.end[0] + reach)]
        more = [window(j, best.end[0] - 1, lo) for j in head[-CANDIDATES:]] + \
            [window(best.start[1], j, lo) for j in tail[:CANDIDATES]]
        results = sorted(results + [r for r in more if r[1].pairs],
                         key=lambda r: (-r[0], r[1].start[0]))
        score, best = results[0]
    return _with_rival(seg, orig, best, score, results, cands, window if marker_before else None)


Window = Callable[[int, int, int], tuple[int, Placement]]


def _nearness(okeys: Sequence[str], unique: set[str]) -> list[int] | None:
    """Per window line: NEAR_COST (packed) times its distance to the nearest line whose
    key is in ``unique``; None when no such line is in the window.

    >>> [x // BIG for x in _nearness(["}", "a", "}", "}"], {"a"})]
    [1, 0, 1, 2]
    """
    at = [j for j, k in enumerate(okeys) if k in unique]
    if not at:
        return None
    out = []
    for j in range(len(okeys)):
        q = bisect_left(at, j)
        out.append(NEAR_COST * BIG * min(abs(at[x] - j) for x in (q - 1, q) if 0 <= x < len(at)))
    return out


def _with_rival(seg: Sequence[str], orig: Sequence[str], best: Placement, score: int,
                results: list[tuple[int, Placement]], cands: list[tuple[int, int]],
                window: Window | None) -> Placement:
    """``best`` with its rival, if it has one: the same score after the chosen region
    (an ambiguous anchor; looked for with ``window`` when a marker comes before), else
    a different region scoring within CLOSE. On an exact tie the place whose region the
    segment resembles wins; the other becomes its ``alternative``."""
    alt, alt_score = None, score
    if window is not None:
        for first, last in cands:
            if first >= best.end[1] and last + 1 - best.end[1] >= 1:
                other_score, other = window(first, last, best.end[1])
                if other_score == score and other.pairs:
                    alt = other
                    break
    if alt is None:
        lo_b, hi_b = best.start[1], best.end[0]
        alt_score, alt = next(((s, o) for s, o in results[1:] if score - s <= CLOSE and o.pairs
                               and (o.end[0] <= lo_b or o.start[1] >= hi_b)), (score, None))
    if alt is None:
        return best
    if alt_score == score and _likeness(seg, orig, alt) > _likeness(seg, orig, best):
        best, alt = alt, best
    return replace(best, rival=alt.start[1], alternative=replace(alt, rival=best.start[1]))


def _likeness(seg: Sequence[str], orig: Sequence[str], p: Placement) -> tuple[float, float]:
    """Share of the segment's characters found, in order, in the region it would replace;
    then the share of its new lines' words found within TOPIC lines of that region.

    Breaks exact ties between places: an edited line keeps some of what it replaces
    (``raise`` for ``raise Timeout(...)``), an unrelated line does not. Where a new
    paragraph or line goes after a generic line (a closing fence, a blank line) the
    regions are alike; the one whose neighbourhood speaks of the same things wins.
    """
    region = "\n".join(orig[p.start[0]:p.end[1]])
    text = "\n".join(seg)
    sm = difflib.SequenceMatcher(None, text, region, autojunk=False)
    like = sum(b.size for b in sm.get_matching_blocks()) / max(1, len(text))
    kept = {i for i, _ in p.pairs}
    new = {w for i, s in enumerate(seg) if i not in kept for w in _LONG_WORD.findall(s)}
    near = {w for s in orig[max(0, p.start[0] - TOPIC):p.end[1] + TOPIC]
            for w in _LONG_WORD.findall(s)}
    return round(like, 6), len(new & near) / max(1, len(new))


def nonblank_matches(p: Placement, seg: Sequence[str]) -> int:
    """How many matched pairs are non-blank lines."""
    return sum(1 for i, _ in p.pairs if seg[i].strip())
