"""The lazy merge's exact pass (*align* in :mod:`fastapply.merge.lazy`): an edit-distance
alignment of one segment with a window of the original, under the snippet's contract on
context runs, read back into a placement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapply.merge.costs import (
    _NEG,
    ALIGN_WORK,
    BIG,
    DEL_COST,
    DROP_DEF,
    EDGE_COST,
    GAP_COST,
    INNER,
    LEAD,
    RUN_COST,
    SIM_GAIN,
    SIMILAR,
    SUB_COST,
    UNIT,
    Placement,
    WorkBudget,
)
from fastapply.merge.lines import _same, similarity, tokens
from fastapply.merge.locate import _increasing_chain


def align(skeys: Sequence[str], okeys: Sequence[str], w0: int, lo: int, n: int,
          weights: Sequence[int], marker_before: bool, marker_after: bool,
          sraw: Sequence[str] | None = None, oraw: Sequence[str] | None = None,
          context: int | None = None, dropped: Sequence[bool] | None = None,
          budget: WorkBudget | None = None, near: Sequence[int] | None = None,
          free: tuple[bool, bool] = (False, False)) -> tuple[int, Placement]:
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
    ``free`` lifts the rule on the run before the first change (``free[0]``) or after
    the last (``free[1]``), and allows no change at all: that edge is anchored at a
    signature or a block's end, not next to a marker (see merge._signature_edges).
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
    budget.spend((len(skeys) + ALIGN_WORK) * (len(okeys) + ALIGN_WORK) - ALIGN_WORK ** 2)
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
              lead_max=seg_len + 1 if free[0] else LEAD if context is None else context,
              lead_min=context if context is not None and marker_before and not free[0] else 0,
              trail_min=context if context is not None and marker_after and not free[1] else 0,
              inner_max=INNER if context is None else 2 * context, marker_after=marker_after,
              near=list(near) if near is not None else [0] * win_len,
              trail_max=seg_len + 1 if free[1] else -1, idle_ok=free[0] or free[1])
    filled = _fill(g)
    end, state, total = _best_end(g, filled, w0, n)
    score = -((-total) // big) if total % big else total // big
    path = _traceback(g, filled, end, state, w0)
    violations = _context_violations(g, path.context, marker_after) if g.run_cost else 0
    consumed = path.consumed
    first = min(consumed) if consumed else w0 + path.column
    last = max(consumed) + 1 if consumed else w0 + path.column
    region = (first if marker_before else lo, last if marker_after else n)
    if g.run_cost and not g.idle_ok and not violations and region[0] >= w0 and \
            region[1] <= w0 + win_len and \
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
    trail_max: int = -1  # longest context run after the last change (-1: lead_max)
    idle_ok: bool = False  # a segment without any change fits (an anchored edge)

    def __post_init__(self) -> None:
        if self.trail_max < 0:
            self.trail_max = self.lead_max

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
        ends = [(t.lead[j] - (0 if g.idle_ok else run_cost), STATE_LEAD),
                (t.edit[j] - (trail if g.trail_min else 0), STATE_EDIT)]
        mvec = t.match[j]
        if mvec is not None:
            ends.extend((x - (trail if r + 1 > g.trail_max or r + 1 < g.trail_min else 0),
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
        return 0 if g.idle_ok else 1  # no change at all
    return (not g.lead_min <= runs[0] <= g.lead_max) + \
        (marker_after and not g.trail_min <= runs[-1] <= g.trail_max) + \
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
