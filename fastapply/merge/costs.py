"""The lazy merge's scores and limits (their use is described in
:mod:`fastapply.merge.lazy`), the placement it returns and the work budget every merge
spends from."""

from __future__ import annotations

from dataclasses import dataclass

from fastapply.merge.syntax import EditError

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
#: microsecond each): twice the most any merge of the corpus does (486k), so no
#: request can hold a worker for seconds (the worst shapes found: about 1.1 s). Over
#: it the merge is refused with a message.
MERGE_WORK = 1_000_000
#: Units per matched pair in the locate pass (two Fenwick-tree steps and a bisection:
#: about 3 microseconds, against about 1 for an alignment cell).
LOCATE_WORK = 3
#: Units per segment and window line of each placement tried, besides its cells: the
#: work around the alignment (keys, nearness, definitions, the traceback, the removals
#: reviewed) costs about 4 microseconds a line. Without it 2,000 small segments on a
#: 20,000-line file took 1.7 s within the budget (2.2 microseconds a unit).
ALIGN_WORK = 4

_NEG = -(1 << 60)
#: Scores are packed as ``score * BIG - start`` (lexicographic (score, -start) in one int).
BIG = 1 << 21


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
    fastapply.merge.syntax.EditError: the merge needs more work than its budget (10 units) at ...
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
