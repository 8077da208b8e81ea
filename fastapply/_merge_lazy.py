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
                             or ``const``, a test's ``it('name', ...``) whose name the
                             segment never mentions, or heading whose text it lacks:
                             a new function, test or section written next to similar
                             ones is an insertion, not a rewrite of its neighbours

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

_NEG = -(1 << 60)
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


def key_exact(line: str) -> str:
    return line.rstrip()


def key_loose(line: str) -> str:
    return line.strip()


def positions(orig: Sequence[str], key: Callable[[str], str]) -> dict[str, list[int]]:
    """Original line numbers (0-based) by key."""
    table: dict[str, list[int]] = {}
    for j, line in enumerate(orig):
        table.setdefault(key(line), []).append(j)
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
    """Fenwick tree: prefix maxima of (score, -chain start, pair index) over ``j``."""

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
          context: int | None = None) -> Placement | None:
    """Best placement of ``seg`` in ``orig[lo:]``, or None if no line of it matches.

    Without a marker before it the segment starts at the top of the file (original lines
    before its first match are dropped, at DEL_COST each); without one after it, it runs
    to the end. The caller decides what to keep when that would drop much.
    """
    key = key_loose if loose else key_exact
    if table is None:
        table = positions(orig, key)
    n = len(orig)
    skeys = [key(s) for s in seg]
    last = len(seg) - 1
    pairs: list[tuple[int, int]] = []
    scores: list[int] = []
    starts: list[int] = []
    parent: list[int] = []
    finals: list[tuple[int, int, int]] = []  # (final score, -start, pair index)
    tree = _PrefixMax(n)
    for i, k in enumerate(skeys):
        js = table.get(k, [])
        js = js[bisect_left(js, lo):]
        if not js:
            continue
        w = weight(k, len(table.get(k, ())))
        fresh = []
        for j in js:
            begin = (EDGE_COST if i > 0 else 0) if marker_before else LOCATE_COST * (j - lo)
            value, start, par = w - begin, j, -1
            prev = tree.query(j)
            if prev[2] >= 0:
                chained = prev[0] - LOCATE_COST * (j - 1) + w
                if chained > value or (chained == value and -prev[1] < start):
                    value, start, par = chained, -prev[1], prev[2]
            fresh.append((j, value, start, par))
        for j, value, start, par in fresh:
            idx = len(pairs)
            pairs.append((i, j))
            scores.append(value)
            starts.append(start)
            parent.append(par)
            tree.update(j, (value + LOCATE_COST * j, -start, idx))
            end_cost = (EDGE_COST if i < last else 0) if marker_after \
                else LOCATE_COST * (n - 1 - j)
            finals.append((value - end_cost, -start, idx))
    if not finals:
        return None
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
    for j in _similar_lines(skeys, lo, table):
        if all(j < c[0] or j > c[1] for c in cands):
            cands.append((j, j))
    margin = len(seg) + 8
    weights = [weight(k, len(table.get(k, ()))) for k in skeys]

    def window(first: int, last: int, floor: int) -> tuple[int, Placement]:
        w0, w1 = max(floor, first - margin), min(n, last + margin + 1)
        okeys = [key(s) for s in orig[w0:w1]]
        raw = (list(seg), list(orig[w0:w1])) if not loose else (skeys, okeys)
        return align(skeys, okeys, w0, lo, n, weights, marker_before, marker_after, *raw,
                     context=context, dropped=_dropped_defs(orig[w0:w1], seg)
                     if marker_before or marker_after else None)  # a whole file drops all

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
    # Another place for it: the same score after the chosen region (an ambiguous
    # anchor), else a different region scoring within CLOSE. It is the rival; on an
    # exact tie the place whose region the segment resembles wins.
    alt, alt_score = None, score
    if marker_before:
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


def align(skeys: Sequence[str], okeys: Sequence[str], w0: int, lo: int, n: int,
          weights: Sequence[int], marker_before: bool, marker_after: bool,
          sraw: Sequence[str] | None = None, oraw: Sequence[str] | None = None,
          context: int | None = None,
          dropped: Sequence[bool] | None = None) -> tuple[int, Placement]:
    """Exact alignment of a segment with the window ``okeys`` = orig[w0:w0+len(okeys)].

    Edit costs: a matched line gains its weight, an original line replaced by a segment
    line costs SUB_COST, one dropped costs DEL_COST (each plus DROP_DEF if ``dropped``
    marks it: it defines a name the segment never mentions), a segment line inserted costs
    nothing; an unmatched edge line next to a marker costs EDGE_COST. Without a marker
    before (after), original lines between ``lo`` (the end) and the window cost DEL_COST.
    With ``context`` = c, the runs of context next to a marker must be exactly c lines
    and those between changes at most 2c (a snippet writer shows the same context on
    both sides of a change); without it, at most LEAD and INNER lines.
    Returns (score, placement); among equal scores the placement starting first wins.
    """
    big = 1 << 21  # score * big - start: lexicographic (score, -start) in one int
    L, W = len(skeys), len(okeys)
    edge = [0] * L
    if marker_before:
        edge[0] = EDGE_COST * big
    if marker_after:
        edge[-1] += EDGE_COST * big
    row = [-(w0 + j) for j in range(W + 1)] if marker_before else \
        [-(DEL_COST * (w0 + j - lo)) * big - lo for j in range(W + 1)]
    sraw, oraw = sraw or skeys, oraw or okeys
    dele, sub, gap = DEL_COST * big, SUB_COST * big, GAP_COST * big
    # removing a definition the segment does not name
    extra = [DROP_DEF * big if d else 0 for d in dropped] if dropped else [0] * W
    drop = [dele + x for x in extra]  # cost of dropping each window line
    run_cost = RUN_COST * big if marker_before or marker_after else 0  # not a whole file
    lead_max = LEAD if context is None else context
    inner_max = INNER if context is None else 2 * context
    lead_min = context if context is not None and marker_before else 0
    trail_min = context if context is not None and marker_after else 0

    def leave(r: int) -> int:
        """Cost of the first change after a leading context run of r lines."""
        return run_cost if r > lead_max or r < lead_min else 0

    # Three kinds of state per cell: no change yet (P: the leading context run, row i
    # has run i), last step a match (M, one state per length of the run of matches
    # ending there, 1 .. cap, the last meaning cap or more) or last step an edit (G).
    # Context runs are short (the snippet shows 1-3 lines of context beside each change,
    # so at most lead_max lines before the first change and after the last, at most
    # inner_max between changes, and at least one change): longer runs cost RUN_COST.
    # Keeping the run length in the state makes these costs exact. M -> G opens a
    # change block (GAP_COST). M states exist only where the lines match (sparse).
    neg = _NEG * big
    cap = inner_max + 1
    rowp, rowg = row, [neg] * (W + 1)
    rowm: list[list[int] | None] = [None] * (W + 1)  # M values by run length - 1
    rowml, rowmr = [neg] * (W + 1), [0] * (W + 1)  # best M value to leave from, its run
    backm: list[bytearray] = []  # per match: 1 if the capped run continued a capped run
    backg: list[bytearray] = []  # 2 substitute, 3 insert, 4 delete, 5 changed anchor;
    #                              + 8 * (predecessor state 0 P, 1 M, 2 G + 3 * M's run)
    stoks, otoks = [_tokens(k) for k in skeys], [_tokens(k) for k in okeys]
    for i in range(L):
        k, gain, e = skeys[i], weights[i] * big, edge[i]
        no_tail_del = marker_after and i == L - 1  # the run after the segment is unchanged
        lead_pen = run_cost if i + 1 > lead_max else 0  # P -> P into row i + 1
        p_out = leave(i)  # leaving P at row i
        p_out_next = leave(i + 1)  # leaving P at row i + 1 (a deletion after row i)
        curp, curg = [neg], [neg]
        curm: list[list[int] | None] = [None]
        curml, curmr = [neg], [0]
        cm, cg = bytearray(W + 1), bytearray(W + 1)
        # column 0: insert from row i, column 0
        cands = ((rowp[0] - gap - p_out, 0), (rowg[0], 2))
        v0, f0 = max(cands)
        curg[0] = v0 - e
        cg[0] = 3 + 8 * f0
        toks = stoks[i]
        for j in range(W):
            # leaving states at (i, j) into an edit
            pp, pg = rowp[j], rowg[j]
            if okeys[j] == k and sraw[i] == oraw[j]:
                curp.append(pp + gain - lead_pen)
                vec = [neg] * cap
                vec[0] = pg + gain
                prev = rowm[j]
                if prev is not None:
                    vec[1:cap - 1] = [x + gain for x in prev[:cap - 2]]
                    if prev[cap - 1] > prev[cap - 2]:
                        vec[cap - 1] = prev[cap - 1] + gain
                        cm[j + 1] = 1
                    else:
                        vec[cap - 1] = prev[cap - 2] + gain
                curm.append(vec)
                lv, lr = max((x, r) for r, x in enumerate(vec[:cap - 1]))
                if vec[cap - 1] - run_cost > lv:  # a run longer than inner_max
                    lv, lr = vec[cap - 1] - run_cost, cap - 1
                curml.append(lv)
                curmr.append(lr)
                v, c = neg, 2
            else:
                curp.append(neg)
                curm.append(None)
                curml.append(neg)
                curmr.append(0)
                bp = pp - gap - p_out
                bm = rowml[j] - gap
                base, f = (bp, 0) if bp >= bm else (bm, 1 + 3 * rowmr[j])
                if pg > base:
                    base, f = pg, 2
                if okeys[j] == k:  # equal keys, different text: an anchor that changes
                    v, c = base + gain, 5 + 8 * f
                else:
                    s = similarity(toks, otoks[j])
                    v = (base + int(SIM_GAIN * s) * big if s >= SIMILAR else base - sub) - e \
                        - extra[j]
                    c = 2 + 8 * f
            # insert: from (i, j + 1)
            bp = rowp[j + 1] - gap - p_out
            bm = rowml[j + 1] - gap
            base, f = (bp, 0) if bp >= bm else (bm, 1 + 3 * rowmr[j + 1])
            if rowg[j + 1] > base:
                base, f = rowg[j + 1], 2
            if base - e > v:
                v, c = base - e, 3 + 8 * f
            # delete: from (i + 1, j)
            bp = curp[j] - gap - p_out_next
            bm = curml[j] - gap
            base, f = (bp, 0) if bp >= bm else (bm, 1 + 3 * curmr[j])
            if curg[j] > base:
                base, f = curg[j], 2
            base -= drop[j]
            if base > v and not no_tail_del:
                v, c = base, 4 + 8 * f
            curg.append(v)
            cg[j + 1] = c
        backm.append(cm)
        backg.append(cg)
        rowp, rowm, rowg, rowml, rowmr = curp, curm, curg, curml, curmr
    trail = run_cost if marker_after else 0
    best, state = [], []
    for j in range(W + 1):
        # ending on a change: no context after it, short of trail_min
        ends = [(rowp[j] - run_cost, 0), (rowg[j] - (trail if trail_min else 0), 2)]
        mvec = rowm[j]
        if mvec is not None:
            ends.extend((x - (trail if r + 1 > lead_max or r + 1 < trail_min else 0),
                         1 + 3 * r) for r, x in enumerate(mvec))
        v, st = max(ends)
        best.append(v)
        state.append(st)
    if marker_after:
        end = max(range(W + 1), key=lambda j: (best[j], -j))
        total = best[end]
    else:
        tails = [best[j] - DEL_COST * (n - w0 - j) * big for j in range(W + 1)]
        end = max(range(W + 1), key=lambda j: (tails[j], -j))
        total = tails[end]
    score = -((-total) // big) if total % big else total // big
    pairs: list[tuple[int, int]] = []
    consumed: list[int] = []
    ops: list[bool] = []  # per step, backwards: True for a context match, False a change
    drops = 0
    i, j = L, end
    st = state[end]  # 0 P, 2 G, 1 + 3 * r: M with a run of r + 1 (or more, at the cap)
    while i > 0:
        ops.append(st != 2)
        if st != 2:  # a match (P or M)
            pairs.append((i - 1, w0 + j - 1))
            consumed.append(w0 + j - 1)
            if st != 0:
                r = (st - 1) // 3
                if r == 0:
                    st = 2
                elif not (r == cap - 1 and backm[i - 1][j]):
                    st -= 3
            i, j = i - 1, j - 1
            continue
        c = backg[i - 1][j]
        st = c >> 3
        c &= 7
        if c == 5:
            pairs.append((i - 1, w0 + j - 1))
        if c in (2, 5):
            consumed.append(w0 + j - 1)
            drops += c == 2 and extra[j - 1] > 0
            i, j = i - 1, j - 1
        elif c == 3:
            i -= 1
        else:
            consumed.append(w0 + j - 1)
            drops += extra[j - 1] > 0
            j -= 1
    pairs.reverse()
    violations = 0
    if run_cost:  # a snippet's segment, not a whole file: check its context runs
        ops.reverse()
        runs = [len(r) for r in "".join("m" if o else " " for o in ops).split(" ")]
        if len(runs) == 1:
            violations = 1  # no change at all
        else:
            violations = (not lead_min <= runs[0] <= lead_max) + \
                (marker_after and not trail_min <= runs[-1] <= lead_max) + \
                sum(r > inner_max for r in runs[1:-1])
    first = min(consumed) if consumed else w0 + j
    last = max(consumed) + 1 if consumed else w0 + j
    region = (first if marker_before else lo, last if marker_after else n)
    if run_cost and not violations and region[0] >= w0 and region[1] <= w0 + W and \
            _same(skeys, okeys[region[0] - w0:region[1] - w0], not marker_after):
        # The path's only "change" was a no-op (insert X, delete X): there is none.
        violations = 1
    # no pair: the best reading anchors nothing (the caller discards it)
    matched = (pairs[0][1], pairs[-1][1] + 1) if pairs else (first, first)
    return score, Placement((region[0], matched[0]), (matched[1], region[1]),
                            tuple(pairs), violations=violations, drops=drops)


_DEF = re.compile(r"^(?:\s*(?:(?:export\s+)?(?:async\s+)?"
                  r"(?:def|class|func(?:\s*\([^)]*\))?|function)"
                  r"|(?:from\s+[\w.]+\s+)?import)"
                  r"|(?:export\s+)?(?:var|let|const|type))\s+(\w+)")  # those at the top level


_HEADING = re.compile(r"^\s*(?:#{2,6}\s+(\S.*)|<h[1-6][^>]*>(.+?)</h[1-6]>"
                      r"""|(?:it|describe|test)\(\s*(['"`].+?['"`])\s*,)""")


def _dropped_defs(region: Sequence[str], seg: Sequence[str]) -> list[bool]:
    """Per original line: does it define a name (def, class, func, function, import, a
    top-level var/let/const/type) that the segment never mentions, or is it a heading
    whose text the segment lacks? Replacing or deleting it removes that definition or
    section."""
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


def _similar_lines(skeys: Sequence[str], lo: int, table: dict[str, list[int]]) -> list[int]:
    """Original lines (>= lo) most like the segment's changed lines (edited in place).

    Anchors of generic context (blank lines, ``}``) fit many places; an edited line
    still shares most words with the line it replaces, so that place is a candidate.
    """
    changed = [k for k in skeys if k.strip() and k not in table]
    found: list[int] = []
    # each distinct original line once, at its first position >= lo
    firsts = [(js[i], okey) for okey, js in table.items()
              for i in [bisect_left(js, lo)] if i < len(js)] if changed else []
    for k in changed[:SIMILAR_PROBES]:
        toks = _tokens(k)
        best, where = SIMILAR, -1
        for j, okey in firsts:
            s = similarity(toks, _tokens(okey))
            if s > best or (s == best and 0 <= j < where):
                best, where = s, j
        if where >= 0 and where not in found:
            found.append(where)
    return found


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Share of two lines' words (and symbol runs) they have in common, 0 to 1."""
    if not a or not b or a.isdisjoint(b):
        return 0.0
    return len(a & b) / max(len(a), len(b))


@lru_cache(maxsize=1 << 16)
def _tokens(line: str) -> frozenset[str]:
    """The words of a line (for a cheap similarity between a line and its edit)."""
    return frozenset(_WORD.findall(line))


def nonblank_matches(p: Placement, seg: Sequence[str]) -> int:
    """How many matched pairs are non-blank lines."""
    return sum(1 for i, _ in p.pairs if seg[i].strip())
