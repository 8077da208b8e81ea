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
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from fastapply.edits import EditError

#: Score units per unique matched line (scores are integers to make ties exact).
UNIT = 1000
#: Cost per original line that a chain skips (drops) between two matches.
DEL_COST = 300
#: Cost of a segment edge next to a marker that is not a matched line.
EDGE_COST = 60000
#: Cost of opening a change block (an edit run between two matched runs).
GAP_COST = 200
#: Cost of a context run longer than the snippet contract allows (or of no change).
RUN_COST = 60000
#: Longest context run before the first change and after the last (next to a marker).
LEAD = 3
#: Longest context run between two changes of one segment.
INNER = 6
#: Cost per original line replaced by a (different) segment line.
SUB_COST = 100
#: Cost per skipped original line when locating candidate regions (coarse pass).
LOCATE_COST = 30
#: Word overlap from which a changed line counts as an edit of the original line.
SIMILAR = 0.5
#: Gain of replacing a line by a fully similar one (times the overlap).
SIM_GAIN = 300
#: Changed lines whose most similar original line is also a candidate region.
SIMILAR_PROBES = 2
#: Score gap under which a different region counts as a rival (the anchor is unsure).
CLOSE = 300
#: Candidate regions refined by the exact alignment.
CANDIDATES = 4
#: ... only those whose coarse score is within this of the best (3 unique lines): on the
#: corpus no placement changed, and the 500-line edit of bench serve merges in 4.7 ms
#: instead of 8.2 (p50 of 60 interleaved runs).
PRUNE = 3000
#: Cost of removing a definition (def, func, class, function, import, a top-level
#: var/let/const/type, a test's it/describe/test) the segment does not name, or a
#: heading (Markdown ##, HTML <hN>) whose text it lacks.
#: On the corpus every value from 5000 to 30000 gives the same merges (3000 loses one).
DROP_DEF = 10000
#: Lines each side of a tied place whose words the segment's new lines are compared with
#: (its topic). On the corpus 10 to 80 give the same merges.
TOPIC = 20
#: Weight of a blank line (they are everywhere).
BLANK_WEIGHT = 20
#: Cost per line between a generic line (``}``, ``end``, blank: found more than once)
#: matched at a segment's edge and the nearest line the segment shares once with the
#: original: of the lookalike copies of ``}`` before a new method, the one next to the
#: segment's unique anchor wins. On the tune corpus 1 fixes one merge and changes no
#: other outcome; 2 to 5 fix more but return one more wrong merge unflagged.
NEAR_COST = 1

#: Work one merge may do, in units of one alignment cell or one line compared (about a
#: microsecond each): three times the most any merge of the corpus does (314k), so no
#: request can hold a worker for seconds. Over it the merge is refused with a message.
MERGE_WORK = 1_000_000
#: Units per matched pair in the locate pass (two Fenwick-tree steps and a bisection:
#: about 3 microseconds, against about 1 for an alignment cell).
LOCATE_WORK = 3

_NEG = -(1 << 60)
#: Scores are packed as ``score * BIG - start`` (lexicographic (score, -start) in one int).
BIG = 1 << 21
_WORD = re.compile(r"\w+|[^\w\s]+")
_LONG_WORD = re.compile(r"\w{3,}")


@dataclass(frozen=True)
class Placement:
    """Where a segment goes: it replaces ``orig[start[0]:end[1]]``."""

    #: (first original line of the region, first original line matched), 0-based.
    start: tuple[int, int]
    #: (last original line matched + 1, end of the region), 0-based.
    end: tuple[int, int]
    #: Matched (segment line, original line) pairs, increasing.
    pairs: tuple[tuple[int, int], ...]
    #: Start line (0-based) of another region that scored the same, or -1.
    rival: int = -1
    #: Context runs outside the snippet contract (see ``align``), 0 when it holds.
    violations: int = 0
    #: Definitions and headings it removes that the segment never names (DROP_DEF).
    drops: int = 0
    #: The rival's placement, if there is one (the merge may take it instead).
    alternative: Placement | None = None


class WorkBudget:
    """The work a merge may still do; ``spend`` raises EditError once it is spent.

    >>> budget = WorkBudget(10)
    >>> budget.spend(8)
    >>> budget.doing = "lazy segment 2 (snippet line 9)"
    >>> budget.spend(5)
    Traceback (most recent call last):
    ...
    fastapply.edits.EditError: the merge needs more work than its budget (10 units) at lazy ...
    """

    def __init__(self, units: int = MERGE_WORK) -> None:
        self.units = units  # the budget
        self.spent = 0  # units spent so far
        self.doing = "the snippet"  # what is being merged (for the message)

    def spend(self, units: int) -> None:
        self.spent += units
        if self.spent > self.units:
            raise EditError(
                f"the merge needs more work than its budget ({self.units:,} units) at "
                f"{self.doing}: the snippet's lines fit too many places of this large file; "
                f"split long lazy segments with markers into shorter ones that each show a "
                f"few distinctive lines of context, or send SEARCH/REPLACE blocks")


def key_exact(line: str) -> str:
    return line.rstrip()


def key_loose(line: str) -> str:
    return line.strip()


#: The key functions as the str methods they call (mapped at C speed over large files).
_METHODS: dict[Callable[[str], str], Callable[[str], str]] = {key_exact: str.rstrip,
                                                              key_loose: str.strip}


def positions(orig: Sequence[str], key: Callable[[str], str]) -> dict[str, list[int]]:
    """Original line numbers (0-based) by key."""
    table: dict[str, list[int]] = {}
    get = table.get
    for j, k in enumerate(map(_METHODS.get(key, key), orig)):
        js = get(k)
        if js is None:
            table[k] = [j]
        else:
            js.append(j)
    return table


def weight(k: str, count: int) -> int:
    """Match weight of a line whose key occurs ``count`` times in the original.

    >>> weight("return x", 1), weight("}", 25), weight("", 300)
    (1000, 200, 20)
    """
    if not k.strip():
        return BLANK_WEIGHT
    return max(BLANK_WEIGHT, int(UNIT / math.sqrt(max(1, count))))


class _PrefixMax:
    """Fenwick tree: prefix maxima of (score, -chain start, pair index) over columns
    (the ranks of the matched original lines)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree: list[tuple[int, int, int]] = [(_NEG, 0, -1)] * (n + 1)

    def update(self, j: int, value: tuple[int, int, int]) -> None:
        j += 1
        while j <= self.n:
            if value > self.tree[j]:
                self.tree[j] = value
            j += j & -j

    def query(self, j: int) -> tuple[int, int, int]:
        """Max over positions < j."""
        best = (_NEG, 0, -1)
        while j > 0:
            if self.tree[j] > best:
                best = self.tree[j]
            j -= j & -j
        return best


def place(seg: Sequence[str], orig: Sequence[str], lo: int, marker_before: bool,
          marker_after: bool, loose: bool,
          table: dict[str, list[int]] | None = None,
          context: int | None = None, index: dict[str, list[str]] | None = None,
          budget: WorkBudget | None = None) -> Placement | None:
    """Best placement of ``seg`` in ``orig[lo:]``, or None if no line of it matches.

    Without a marker before it the segment starts at the top of the file (original lines
    before its first match are dropped, at DEL_COST each); without one after it, it runs
    to the end. The caller decides what to keep when that would drop much. ``table``
    and ``index`` are the original's ``positions`` and ``word_index`` (built if absent);
    the work done is spent from ``budget``.
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
        index = word_index(table)
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
                     near=_nearness(okeys, unique))

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


def _locate(skeys: Sequence[str], table: dict[str, list[int]], lo: int, n: int,
            marker_before: bool, marker_after: bool, budget: WorkBudget
            ) -> list[tuple[int, int]]:
    """Candidate regions (first, last matched original line) of a segment, best first:
    the best chains of matched pairs (LOCATE_COST per skipped line), at most CANDIDATES
    disjoint ones scoring within PRUNE of the best; [] when no line matches.

    >>> table = positions(["x", "a", "b", "y", "a", "b"], key_exact)
    >>> _locate(["a", "b"], table, 0, 6, True, True, WorkBudget())
    [(1, 2), (4, 5)]
    """
    last = len(skeys) - 1
    pairs: list[tuple[int, int]] = []
    finals: list[tuple[int, int, int]] = []  # (final score, -start, pair index)
    found = [js[bisect_left(js, lo):] for k in skeys for js in [table.get(k, [])]]
    budget.spend(LOCATE_WORK * sum(len(js) for js in found))
    cols = sorted({j for js in found for j in js})  # the tree's columns: matched lines
    tree = _PrefixMax(len(cols))
    for i, k in enumerate(skeys):
        js = found[i]
        if not js:
            continue
        w = weight(k, len(table.get(k, ())))
        fresh = []
        for j in js:
            begin = (EDGE_COST if i > 0 else 0) if marker_before else LOCATE_COST * (j - lo)
            value, start = w - begin, j
            prev = tree.query(bisect_left(cols, j))  # the best chain ending before line j
            if prev[2] >= 0:
                chained = prev[0] - LOCATE_COST * (j - 1) + w
                if chained > value or (chained == value and -prev[1] < start):
                    value, start = chained, -prev[1]
            fresh.append((j, value, start))
        for j, value, start in fresh:
            idx = len(pairs)
            pairs.append((i, j))
            tree.update(bisect_left(cols, j), (value + LOCATE_COST * j, -start, idx))
            end_cost = (EDGE_COST if i < last else 0) if marker_after \
                else LOCATE_COST * (n - 1 - j)
            finals.append((value - end_cost, -start, idx))
    finals.sort(reverse=True)
    cands: list[tuple[int, int]] = []  # distinct (first, last) matched lines, best first
    for final, neg_start, idx in finals:
        if final < finals[0][0] - PRUNE:
            break
        region = (-neg_start, pairs[idx][1])
        if all(region[1] < c[0] or region[0] > c[1] for c in cands):
            cands.append(region)
            if len(cands) == CANDIDATES:
                break
    return cands


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


def align(skeys: Sequence[str], okeys: Sequence[str], w0: int, lo: int, n: int,
          weights: Sequence[int], marker_before: bool, marker_after: bool,
          sraw: Sequence[str] | None = None, oraw: Sequence[str] | None = None,
          context: int | None = None, dropped: Sequence[bool] | None = None,
          budget: WorkBudget | None = None, near: Sequence[int] | None = None
          ) -> tuple[int, Placement]:
    """Exact alignment of a segment with the window ``okeys`` = orig[w0:w0+len(okeys)].

    Edit costs: a matched line gains its weight, an original line replaced by a segment
    line costs SUB_COST, one dropped costs DEL_COST (each plus DROP_DEF if ``dropped``
    marks it: it defines a name the segment never mentions), a segment line inserted costs
    nothing; an unmatched edge line next to a marker costs EDGE_COST; a generic line (not
    unique in the original) matched at the segment's first or last line costs ``near``
    of its column (distance to the segment's unique lines, see ``_nearness``). Without a marker
    before (after), original lines between ``lo`` (the end) and the window cost DEL_COST.
    With ``context`` = c, the runs of context next to a marker must be exactly c lines
    and those between changes at most 2c (a snippet writer shows the same context on
    both sides of a change); without it, at most LEAD and INNER lines.
    Returns (score, placement); among equal scores the placement starting first wins.
    A segment without markers (a whole file) is aligned piecewise between the lines it
    shares once with the window (see ``_align_between_anchors``). The work (one unit a
    cell) is spent from ``budget``.
    """
    if budget is None:
        budget = WorkBudget()
    sraw, oraw = sraw or skeys, oraw or okeys
    if not marker_before and not marker_after:
        pieces = _align_between_anchors(skeys, okeys, w0, lo, n, weights, sraw, oraw, budget)
        if pieces is not None:
            return pieces
    budget.spend(len(skeys) * len(okeys))
    big = BIG
    seg_len, win_len = len(skeys), len(okeys)
    edges = [0] * seg_len
    if marker_before:
        edges[0] = EDGE_COST * big
    if marker_after:
        edges[-1] += EDGE_COST * big
    first_row = [-(w0 + j) for j in range(win_len + 1)] if marker_before else \
        [-(DEL_COST * (w0 + j - lo)) * big - lo for j in range(win_len + 1)]
    g = _Grid(skeys, okeys, sraw, oraw, gains=[w * big for w in weights], edges=edges,
              # removing a definition the segment does not name
              extra=[DROP_DEF * big if d else 0 for d in dropped] if dropped
              else [0] * win_len, first_row=first_row,
              run_cost=RUN_COST * big if marker_before or marker_after else 0,
              lead_max=LEAD if context is None else context,
              lead_min=context if context is not None and marker_before else 0,
              trail_min=context if context is not None and marker_after else 0,
              inner_max=INNER if context is None else 2 * context, marker_after=marker_after,
              near=list(near) if near is not None else [0] * win_len)
    filled = _fill(g)
    end, state, total = _best_end(g, filled, w0, n)
    score = -((-total) // big) if total % big else total // big
    path = _traceback(g, filled, end, state, w0)
    violations = _context_violations(g, path.context, marker_after) if g.run_cost else 0
    consumed = path.consumed
    first = min(consumed) if consumed else w0 + path.column
    last = max(consumed) + 1 if consumed else w0 + path.column
    region = (first if marker_before else lo, last if marker_after else n)
    if g.run_cost and not violations and region[0] >= w0 and region[1] <= w0 + win_len and \
            _same(skeys, okeys[region[0] - w0:region[1] - w0], not marker_after):
        # The path's only "change" was a no-op (insert X, delete X): there is none.
        violations = 1
    pairs = path.pairs
    # no pair: the best reading anchors nothing (the caller discards it)
    matched = (pairs[0][1], pairs[-1][1] + 1) if pairs else (first, first)
    return score, Placement((region[0], matched[0]), (matched[1], region[1]),
                            tuple(pairs), violations=violations, drops=path.drops)


#: Alignment states, as the back-pointers store them: STATE_LEAD (no change yet: the
#: leading context run; row i has run i), STATE_EDIT (the last step changed something)
#: and, for a run of r + 1 matches ending at the cell, ``match_state(r)`` (r < cap; the
#: last one counts runs of cap or more).
STATE_LEAD, STATE_EDIT = 0, 2
#: Steps into an edit cell, stored as ``step + STEP * predecessor state``: SUBSTITUTE and
#: CHANGED_ANCHOR consume a line of each (CHANGED_ANCHOR: equal keys, different text; it
#: is a pair), INSERT a segment line, DELETE an original line.
SUBSTITUTE, INSERT, DELETE, CHANGED_ANCHOR = 2, 3, 4, 5
STEP = 8


def match_state(r: int) -> int:
    """The state of a run of ``r + 1`` matches (1, 4, 7, ...: never a lead or edit state)."""
    return 1 + 3 * r


@dataclass
class _Grid:
    """The alignment's cost model for one segment against one window (see ``align``).

    Scores are packed as ``score * BIG - start`` so that one integer compares
    (score, -start) lexicographically; every cost below is in those units.
    """

    skeys: Sequence[str]  # segment line keys
    okeys: Sequence[str]  # window line keys
    sraw: Sequence[str]  # segment lines as written (a match needs equal text too)
    oraw: Sequence[str]
    gains: list[int]  # per segment line: gain of matching it
    edges: list[int]  # per segment line: cost of leaving it unmatched (EDGE_COST at markers)
    extra: list[int]  # per window line: DROP_DEF if removing it drops a definition
    first_row: list[int]  # STATE_LEAD values of row 0 (what lines before the window cost)
    run_cost: int  # cost of a context run outside the contract (0 for a whole file)
    lead_max: int  # longest context run before the first change / after the last
    lead_min: int  # shortest one before the first change (0 without a marker before)
    trail_min: int  # shortest one after the last change (0 without a marker after)
    inner_max: int  # longest context run between two changes
    marker_after: bool  # a marker follows: no deletion after the last segment line
    near: list[int]  # per window line: cost of matching a generic segment line there

    @property
    def cap(self) -> int:
        """Match run lengths kept apart (the last one means cap or more)."""
        return self.inner_max + 1

    def leave_lead(self, r: int) -> int:
        """Cost of the first change after a leading context run of r lines."""
        return self.run_cost if r > self.lead_max or r < self.lead_min else 0


@dataclass
class _Filled:
    """The last row of the table and every row's back-pointers."""

    lead: list[int]  # STATE_LEAD values of the last row, per column
    edit: list[int]  # STATE_EDIT values
    match: list[list[int] | None]  # match values by run (None where the lines differ)
    back_edit: list[bytearray]  # per row and column: step + STEP * predecessor state
    back_capped: list[bytearray]  # per row and column: 1 if a capped run continued one


def _fill(g: _Grid) -> _Filled:
    """Fill the table row by row (one row per segment line, one column per window line)
    and keep the back-pointers; only the last row's values are kept."""
    seg_len, win_len = len(g.skeys), len(g.okeys)
    skeys, okeys, sraw, oraw, extra = g.skeys, g.okeys, g.sraw, g.oraw, g.extra
    big, cap, run_cost = BIG, g.cap, g.run_cost
    neg = _NEG * big
    gap, sub = GAP_COST * big, SUB_COST * big
    drop = [DEL_COST * big + x for x in extra]  # cost of dropping each window line
    lead_row, edit_row = g.first_row, [neg] * (win_len + 1)
    match_row: list[list[int] | None] = [None] * (win_len + 1)
    # best match value to leave from (into an edit), per column, and its run
    leave_row, leave_run = [neg] * (win_len + 1), [0] * (win_len + 1)
    back_capped: list[bytearray] = []
    back_edit: list[bytearray] = []
    stoks, otoks = [tokens(k) for k in skeys], [tokens(k) for k in okeys]
    for i in range(seg_len):
        k, gain, edge, toks = skeys[i], g.gains[i], g.edges[i], stoks[i]
        # a generic line at an edge: the copy nearest the segment's unique lines
        generic = gain < UNIT * big and i in (0, seg_len - 1)
        no_delete = g.marker_after and i == seg_len - 1  # the lines after it stay
        lead_pen = run_cost if i + 1 > g.lead_max else 0  # lead -> lead into row i + 1
        lead_out = g.leave_lead(i)  # leaving the lead state at row i
        lead_out_next = g.leave_lead(i + 1)  # leaving it at row i + 1 (after a deletion)
        lead, edit = [neg], [neg]
        match: list[list[int] | None] = [None]
        leave, leave_r = [neg], [0]
        capped, back = bytearray(win_len + 1), bytearray(win_len + 1)
        # column 0: insert from row i, column 0
        v0, f0 = max((lead_row[0] - gap - lead_out, STATE_LEAD), (edit_row[0], STATE_EDIT))
        edit[0] = v0 - edge
        back[0] = INSERT + STEP * f0
        for j in range(win_len):
            lead_here, edit_here = lead_row[j], edit_row[j]
            if okeys[j] == k and sraw[i] == oraw[j]:  # a match: lead and match states
                mg = gain - g.near[j] if generic else gain
                lead.append(lead_here + mg - lead_pen)
                vec = [neg] * cap
                vec[0] = edit_here + mg
                prev = match_row[j]
                if prev is not None:
                    vec[1:cap - 1] = [x + mg for x in prev[:cap - 2]]
                    if prev[cap - 1] > prev[cap - 2]:
                        vec[cap - 1] = prev[cap - 1] + mg
                        capped[j + 1] = 1
                    else:
                        vec[cap - 1] = prev[cap - 2] + mg
                match.append(vec)
                lv, lr = max((x, r) for r, x in enumerate(vec[:cap - 1]))
                if vec[cap - 1] - run_cost > lv:  # a run longer than inner_max
                    lv, lr = vec[cap - 1] - run_cost, cap - 1
                leave.append(lv)
                leave_r.append(lr)
                v, step = neg, SUBSTITUTE
            else:
                lead.append(neg)
                match.append(None)
                leave.append(neg)
                leave_r.append(0)
                # substitute (or a changed anchor): from (i, j)
                from_lead = lead_here - gap - lead_out
                from_match = leave_row[j] - gap
                base, f = (from_lead, STATE_LEAD) if from_lead >= from_match else \
                    (from_match, match_state(leave_run[j]))
                if edit_here > base:
                    base, f = edit_here, STATE_EDIT
                if okeys[j] == k:  # equal keys, different text: an anchor that changes
                    v, step = base + gain, CHANGED_ANCHOR + STEP * f
                else:
                    s = similarity(toks, otoks[j])
                    v = (base + int(SIM_GAIN * s) * big if s >= SIMILAR else base - sub) \
                        - edge - extra[j]
                    step = SUBSTITUTE + STEP * f
            # insert: from (i, j + 1)
            from_lead = lead_row[j + 1] - gap - lead_out
            from_match = leave_row[j + 1] - gap
            base, f = (from_lead, STATE_LEAD) if from_lead >= from_match else \
                (from_match, match_state(leave_run[j + 1]))
            if edit_row[j + 1] > base:
                base, f = edit_row[j + 1], STATE_EDIT
            if base - edge > v:
                v, step = base - edge, INSERT + STEP * f
            # delete: from (i + 1, j)
            from_lead = lead[j] - gap - lead_out_next
            from_match = leave[j] - gap
            base, f = (from_lead, STATE_LEAD) if from_lead >= from_match else \
                (from_match, match_state(leave_r[j]))
            if edit[j] > base:
                base, f = edit[j], STATE_EDIT
            base -= drop[j]
            if base > v and not no_delete:
                v, step = base, DELETE + STEP * f
            edit.append(v)
            back[j + 1] = step
        back_capped.append(capped)
        back_edit.append(back)
        lead_row, match_row, edit_row, leave_row, leave_run = lead, match, edit, leave, leave_r
    return _Filled(lead_row, edit_row, match_row, back_edit, back_capped)


def _best_end(g: _Grid, t: _Filled, w0: int, n: int) -> tuple[int, int, int]:
    """Column where the segment ends, the state it ends in, and the total score.

    A run of context after the last change must be within the contract; without a
    marker after, the original lines after the column up to ``n`` are dropped."""
    run_cost = g.run_cost
    trail = run_cost if g.marker_after else 0
    best, state = [], []
    for j in range(len(t.lead)):
        # ending on a change: no context after it, short of trail_min
        ends = [(t.lead[j] - run_cost, STATE_LEAD),
                (t.edit[j] - (trail if g.trail_min else 0), STATE_EDIT)]
        mvec = t.match[j]
        if mvec is not None:
            ends.extend((x - (trail if r + 1 > g.lead_max or r + 1 < g.trail_min else 0),
                         match_state(r)) for r, x in enumerate(mvec))
        v, st = max(ends)
        best.append(v)
        state.append(st)
    if g.marker_after:
        end = max(range(len(best)), key=lambda j: (best[j], -j))
        return end, state[end], best[end]
    tails = [best[j] - DEL_COST * (n - w0 - j) * BIG for j in range(len(best))]
    end = max(range(len(best)), key=lambda j: (tails[j], -j))
    return end, state[end], tails[end]


@dataclass
class _Path:
    """The best alignment, read back from the back-pointers."""

    pairs: list[tuple[int, int]]  # matched (segment line, original line), increasing
    consumed: list[int]  # original lines it matches, replaces or drops (any order)
    context: list[bool]  # per segment step, in order: a context match (True) or a change
    drops: int  # definitions it removes that the segment never names
    column: int  # window column where it starts (row 0)


def _traceback(g: _Grid, t: _Filled, end: int, state: int, w0: int) -> _Path:
    """Follow the back-pointers from (last row, ``end``) in ``state`` to row 0."""
    pairs: list[tuple[int, int]] = []
    consumed: list[int] = []
    context: list[bool] = []
    drops = 0
    cap = g.cap
    i, j, st = len(g.skeys), end, state
    while i > 0:
        context.append(st != STATE_EDIT)
        if st != STATE_EDIT:  # a match (STATE_LEAD or a match run)
            pairs.append((i - 1, w0 + j - 1))
            consumed.append(w0 + j - 1)
            if st != STATE_LEAD:
                r = (st - 1) // 3
                if r == 0:
                    st = STATE_EDIT
                elif not (r == cap - 1 and t.back_capped[i - 1][j]):
                    st = match_state(r - 1)
            i, j = i - 1, j - 1
            continue
        st, step = divmod(t.back_edit[i - 1][j], STEP)
        if step == CHANGED_ANCHOR:
            pairs.append((i - 1, w0 + j - 1))
        if step in (SUBSTITUTE, CHANGED_ANCHOR):
            consumed.append(w0 + j - 1)
            drops += step == SUBSTITUTE and g.extra[j - 1] > 0
            i, j = i - 1, j - 1
        elif step == INSERT:
            i -= 1
        else:  # DELETE
            consumed.append(w0 + j - 1)
            drops += g.extra[j - 1] > 0
            j -= 1
    pairs.reverse()
    context.reverse()
    return _Path(pairs, consumed, context, drops, j)


def _context_violations(g: _Grid, context: Sequence[bool], marker_after: bool) -> int:
    """Context runs outside the snippet contract (a path without any change is one).

    >>> g = _Grid([], [], [], [], [], [], [], [], run_cost=1, lead_max=3, lead_min=1,
    ...           trail_min=1, inner_max=6, marker_after=True, near=[])
    >>> _context_violations(g, [True, False, True, True], True)  # 1 line, change, 2 lines
    0
    >>> _context_violations(g, [False, True], True)  # no context before the change
    1
    """
    runs = [len(r) for r in "".join("m" if c else " " for c in context).split(" ")]
    if len(runs) == 1:
        return 1  # no change at all
    return (not g.lead_min <= runs[0] <= g.lead_max) + \
        (marker_after and not g.trail_min <= runs[-1] <= g.lead_max) + \
        sum(r > g.inner_max for r in runs[1:-1])


def _align_between_anchors(skeys: Sequence[str], okeys: Sequence[str], w0: int, lo: int,
                           n: int, weights: Sequence[int], sraw: Sequence[str],
                           oraw: Sequence[str], budget: WorkBudget
                           ) -> tuple[int, Placement] | None:
    """``align`` for a segment without markers, in linear time where it can: the lines
    found exactly once in the segment and once in the window, in the longest increasing
    chain (patience diff's anchors), are matched; the runs between them are aligned on
    their own. Without markers no context rule couples the runs (``run_cost`` is 0, so
    a match run and the leading run score alike), so the pieces add up. None when there
    is no anchor (then the caller aligns the whole).

    >>> score, p = _align_between_anchors(["a", "x", "c"], ["a", "b", "c"], 0, 0, 3,
    ...                                   [1000] * 3, ["a", "x", "c"], ["a", "b", "c"],
    ...                                   WorkBudget())
    >>> p.pairs, p.start, p.end
    (((0, 0), (2, 2)), (0, 0), (3, 3))
    """
    budget.spend(len(skeys) + len(okeys))
    seen: dict[tuple[str, str], list[int]] = {}
    for i, line in enumerate(zip(skeys, sraw, strict=True)):
        seen.setdefault(line, []).append(i)
    once = {line: at[0] for line, at in seen.items() if len(at) == 1}
    found: dict[tuple[str, str], list[int]] = {}
    for j, line in enumerate(zip(okeys, oraw, strict=True)):
        if line in once:
            found.setdefault(line, []).append(j)
    anchors = sorted((once[line], at[0]) for line, at in found.items() if len(at) == 1)
    chain = _increasing_chain(anchors)
    if not chain:
        return None
    pairs: list[tuple[int, int]] = []
    score = 0
    i0 = j0 = 0  # end of the previous anchor run
    for i, j in [*chain, (len(skeys), len(okeys))]:
        if i < i0:  # inside the run the previous anchor grew into
            continue
        a, b = i, j  # grow the anchor backwards over equal lines
        while a > i0 and b > j0 and skeys[a - 1] == okeys[b - 1] and sraw[a - 1] == oraw[b - 1]:
            a, b = a - 1, b - 1
        if a > i0 or b > j0:
            piece_score, piece = align(
                skeys[i0:a], okeys[j0:b], w0 + j0, lo if j0 == 0 else w0 + j0,
                w0 + b if i < len(skeys) else n, weights[i0:a], False, False,
                sraw[i0:a], oraw[j0:b], budget=budget)
            score += piece_score
            pairs.extend((i0 + x, y) for x, y in piece.pairs)
        if i == len(skeys):
            break
        while a < len(skeys) and b < len(okeys) and skeys[a] == okeys[b] and \
                sraw[a] == oraw[b]:  # the run, grown forwards
            pairs.append((a, w0 + b))
            score += weights[a]
            a, b = a + 1, b + 1
        i0, j0 = a, b
    first, last = (pairs[0][1], pairs[-1][1] + 1) if pairs else (w0, w0)
    return score, Placement((lo, first), (last, n), tuple(pairs))


def _increasing_chain(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of ``pairs`` (sorted by their first item) increasing in the second.

    >>> _increasing_chain([(0, 3), (1, 1), (2, 2), (3, 0), (4, 4)])
    [(1, 1), (2, 2), (4, 4)]
    """
    tails: list[int] = []  # tails[k]: second item ending the best chain of length k + 1
    ends: list[int] = []  # index of that pair
    back = [-1] * len(pairs)
    for p, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        back[p] = ends[k - 1] if k else -1
        if k == len(tails):
            tails.append(j)
            ends.append(p)
        else:
            tails[k], ends[k] = j, p
    chain = []
    p = ends[-1] if ends else -1
    while p >= 0:
        chain.append(pairs[p])
        p = back[p]
    return chain[::-1]


_DEF = re.compile(r"^(?:\s*(?:(?:export\s+)?(?:async\s+)?"
                  r"(?:def|class|func(?:\s*\([^)]*\))?|function)"
                  r"|(?:from\s+[\w.]+\s+)?import)"
                  r"|(?:export\s+)?(?:var|let|const|type))\s+(\w+)")  # those at the top level


_HEADING = re.compile(r"^\s*(?:#{2,6}\s+(\S.*)|<h[1-6][^>]*>(.+?)</h[1-6]>"
                      r"""|(?:it|describe|test)\(\s*(['"`].+?['"`])\s*,)""")


#: Modifiers and annotations before a definition (Java, C#, Kotlin, Swift, Rust, PHP, C++).
_MODIFIERS = (r"(?:(?:pub(?:\([^)]*\))?|public|private|protected|internal|static|async|"
              r"export|default|abstract|final|override|open|data|sealed|inline|virtual|"
              r"unsafe|extern|fileprivate|mutating|suspend|operator|partial|readonly|"
              r"required|convenience|synchronized|native|@\w+(?:\([^)]*\))?)\s+)*")
#: Definition lines of the languages ``_DEF`` does not cover, name in the first group
#: that matched: a keyword definition (``fn``, ``fun``, ``struct``, ``enum``, ``impl``,
#: ``interface``, ``protocol``, ``module``, ...), a typed header that opens a function
#: (``public void name(``, ``int name(void)``, ``fun name(``; not a call: no ``;`` or
#: ``=`` after the parenthesis, no statement keyword first), a gtest ``TEST_F(Suite,
#: name)``, an RSpec/minitest ``it "name"``/``describe "name"``.
_DEF_OTHER = re.compile(
    r"^\s*" + _MODIFIERS + r"(?:def|class|func|function|fn|fun|struct|enum|interface|trait|"
    r"impl|module|namespace|protocol|extension|object|record|typealias|mod|union)\s+"
    r"(?:self\.)?([A-Za-z_]\w*)"
    r"|^\s*" + _MODIFIERS + r"(?!(?:return|new|else|elif|throw|raise|assert|case|await|yield|"
    r"delete|del|if|unless|while|until|for|foreach|switch|match|catch|using|lock|when|sizeof|"
    r"typeof|print|puts|echo|go|defer|not|and|or|in|is|goto|import|package|include|"
    r"require|from|with|lambda)\b)[\w\[\].?*&:]+(?:<[^()]*>)?\s+"
    r"[*&]*([A-Za-z_]\w*)\s*\([^;=]*$"
    r"|^\s*(?:TEST|TEST_F|TEST_P|TYPED_TEST)\s*\(\s*\w+\s*,\s*(\w+)\s*\)"
    r"|^\s*(?:it|describe|context|test)\s+(['\"].+?['\"])")
#: Longer lines are not read as definition headers (they are code, and the regex's
#: work grows with a line's length).
_HEADER_CHARS = 400


def _dropped_defs(region: Sequence[str], seg: Sequence[str]) -> list[bool]:
    """Per original line: does it define a name (def, class, func, function, import, a
    top-level var/let/const/type; ``_DEF_OTHER`` in other languages) that the segment
    never mentions, or is it a heading whose text the segment lacks? Replacing or
    deleting it removes that definition or section.

    >>> _dropped_defs(["TEST_F(TApp, RangeDouble) {", "    run();", "}"],
    ...               ["TEST_F(TApp, typeCheck) {", "    run();", "}"])
    [True, False, False]
    """
    words: set[str] | None = None
    text: str | None = None
    out = []
    for line in region:
        m = _DEF.match(line)
        if m:
            if words is None:
                words = {w for s in seg for w in _WORD.findall(s)}
            out.append(m.group(1) not in words)
            continue
        m = _DEF_OTHER.match(line) if len(line) <= _HEADER_CHARS else None
        if m:
            if words is None:
                words = {w for s in seg for w in _WORD.findall(s)}
            if text is None:
                text = "\n".join(seg)
            name = next(g for g in m.groups() if g)
            out.append(name not in words and name not in text)
            continue
        h = _HEADING.match(line)
        if h:
            if text is None:
                text = "\n".join(seg)
            out.append(next(g for g in h.groups() if g).strip() not in text)
            continue
        out.append(False)
    return out


#: A method or function header that opens a body: ``name(args) {`` with optional
#: modifiers and return type (JavaScript/TypeScript class methods, Java, C#, Kotlin, ...).
_METHOD = re.compile(r"^\s*(?:(?:public|private|protected|internal|static|async|override|"
                     r"final|abstract|get|set|fun|fn|func)\s+)*([A-Za-z_]\w*)\s*\([^()]*\)"
                     r"\s*(?::\s*[^{}=;]+)?\{\s*$")
_NOT_NAMES = frozenset({"if", "for", "while", "switch", "catch", "with", "return", "function",
                        "else", "elif", "do", "try", "foreach", "using", "lock", "when"})


def removed_definitions(region: Sequence[str], kept: set[int], seg: Sequence[str]
                        ) -> list[str]:
    """Names defined by the lines of ``region`` a placement removes (those not in
    ``kept``) that the segment never mentions: ``def``/``class``/``function``/... lines
    (as DROP_DEF) and method headers (``name(args) {``).

    >>> removed_definitions(["  down() {", "    n -= 1;", "  }"], {2}, ["  reset() {"])
    ['down']
    """
    words = {w for s in seg for w in _WORD.findall(s)}
    lost = []
    for k, line in enumerate(region):
        if k in kept:
            continue
        m = _DEF.match(line) or _METHOD.match(line)
        if m and m.group(1) not in words and m.group(1) not in _NOT_NAMES:
            lost.append(m.group(1))
    return lost


def _same(a: Sequence[str], b: Sequence[str], to_the_end: bool) -> bool:
    """Are the two runs of lines equal (ignoring blank lines at the end of the file)?"""
    a, b = list(a), list(b)
    while to_the_end and a and not a[-1].strip():
        a.pop()
    while to_the_end and b and not b[-1].strip():
        b.pop()
    return a == b


def word_index(table: dict[str, list[int]]) -> dict[str, list[str]]:
    """The original's distinct lines (keys of ``table``) by each word they hold."""
    index: dict[str, list[str]] = {}
    get, words = index.get, _WORD.findall  # (not ``tokens``: its cache is for the merge)
    for okey in table:
        for w in set(words(okey)):
            keys = get(w)
            if keys is None:
                index[w] = [okey]
            else:
                keys.append(okey)
    return index


def _similar_lines(skeys: Sequence[str], lo: int, table: dict[str, list[int]],
                   index: dict[str, list[str]], budget: WorkBudget) -> list[int]:
    """Original lines (>= lo) most like the segment's changed lines (edited in place).

    Anchors of generic context (blank lines, ``}``) fit many places; an edited line
    still shares most words with the line it replaces, so that place is a candidate.
    A line is like another when they share more than SIMILAR of their words, so it must
    hold one of the changed line's rarest ``len - need + 1`` words (``need`` = the words
    it must share): only the lines holding those are compared (prefix filtering).

    >>> table = positions(["a = f(x)", "b = g(y)", "a = f(z)"], key_exact)
    >>> _similar_lines(["a = f(y)"], 0, table, word_index(table), WorkBudget())
    [0]
    """
    changed = [k for k in skeys if k.strip() and k not in table]
    found: list[int] = []
    for k in changed[:SIMILAR_PROBES]:
        toks = tokens(k)
        need = int(SIMILAR * len(toks)) + 1
        rare = sorted(toks, key=lambda w: (len(index.get(w, ())), w))[:len(toks) - need + 1]
        okeys = {okey for w in rare for okey in index.get(w, ())}
        budget.spend(len(okeys))
        best, where = SIMILAR, -1
        for okey in okeys:
            js = table[okey]
            at = bisect_left(js, lo)
            if at == len(js):
                continue
            j = js[at]  # each distinct original line once, at its first position >= lo
            sim = similarity(toks, tokens(okey))
            if sim > best or (sim == best and 0 <= j < where):
                best, where = sim, j
        if where >= 0 and where not in found:
            found.append(where)
    return found


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Share of two lines' words (and symbol runs) they have in common, 0 to 1."""
    if not a or not b or a.isdisjoint(b):
        return 0.0
    return len(a & b) / max(len(a), len(b))


@lru_cache(maxsize=1 << 16)
def tokens(line: str) -> frozenset[str]:
    """The words of a line (for a cheap similarity between a line and its edit)."""
    return frozenset(_WORD.findall(line))


def nonblank_matches(p: Placement, seg: Sequence[str]) -> int:
    """How many matched pairs are non-blank lines."""
    return sum(1 for i, _ in p.pairs if seg[i].strip())
