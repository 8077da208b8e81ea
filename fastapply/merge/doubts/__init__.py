"""The lazy merge as one pipeline: every step a lazy segment goes through, in order, and
every doubt it can raise (a place where the merge had to guess, reported as an
:class:`~fastapply.merge.segment.Uncertainty` named after its step).

:data:`PIPELINE` is the whole of it: place the segment, read its edges, ask each doubt,
record it and note its rivals. A doubt that flips (``rival``) names an edge choice, so
:func:`fastapply.merge.apply.merge` builds the reading that takes it the other way. To add
a doubt, write it as ``step(m, s)`` beside its kind, with a docstring example, and add one
entry here; to retire one, remove its entry. :func:`fastapply.merge.apply.doubts_raised` lists
the doubts a merge raised, by name.

Other findings outside the lazy pipeline: a SEARCH/REPLACE block or diff hunk found
twice or nowhere (:mod:`fastapply.merge.blocks`), a removal the snippet never shows
(:mod:`fastapply.merge.precision`), and the checks on the finished file
(:mod:`fastapply.merge.review`).

>>> [step.name for step in PIPELINE][:4]  # placing comes first
['empty original', 'implied markers', 'place', 'unplaced']
>>> all(step.doubt for step in PIPELINE if step.rival)  # a rival is always a doubt's
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapply.merge.doubts import placing, recorded, region, unmarked
from fastapply.merge.segment import Segment
from fastapply.merge.syntax import Hunk

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger


@dataclass(frozen=True)
class Step:
    """One step of the lazy pipeline."""

    #: Its name: a doubt's findings carry it (``Uncertainty.doubt``).
    name: str
    #: Reads and moves the segment (``run(merger, segment)``).
    run: Callable[[_Merger, Segment], None]
    #: Whether it can raise a doubt (else it only places, lays out or records).
    doubt: bool = True
    #: Whether a rival reading takes the doubt the other way (an edge choice or a tie).
    rival: bool = False


#: Every step of a lazy segment, in the order it is run.
PIPELINE: tuple[Step, ...] = (
    # place the segment
    Step("empty original", placing.empty_original),
    Step("implied markers", placing.implied, doubt=False),
    Step("place", placing.place, doubt=False),
    Step("unplaced", placing.unplaced, rival=True),
    Step("free end", placing.free_end, rival=True),
    Step("tie flip", placing.tie_flip, doubt=False),
    # read its edges
    Step("no marker before", unmarked.no_marker_before, rival=True),
    Step("no marker after", unmarked.no_marker_after, rival=True),
    Step("unlike edges", unmarked.unlike_edges, rival=True),
    Step("file end blanks", unmarked.file_end_blanks, doubt=False),
    Step("top fragment", unmarked.top_fragment, rival=True),
    Step("tie", region.tie, rival=True),
    Step("misfit", region.misfit),
    Step("reindent", region.reindent, doubt=False),
    # ask the doubts of its region
    Step("blank led", region.blank_led),
    Step("block end", region.block_end, rival=True),
    Step("blank edges", region.blank_edges, doubt=False),
    Step("blank anchors", region.blank_anchors, rival=True),
    Step("weak edges", region.weak_edges, rival=True),
    Step("beside", region.beside, rival=True),
    Step("doubled", region.doubled),
    Step("kept tail", recorded.kept_tail),
    Step("replaced past", recorded.replaced_past),
    # record it, then what it replaced
    Step("record", recorded.record, doubt=False),
    Step("idle", recorded.idle),
    Step("count", recorded.count, doubt=False),
    Step("blank end", recorded.blank_end),
    Step("deferred", recorded.deferred),
    Step("lost definition", recorded.lost_definition),
    Step("guesses", recorded.guesses),
    Step("blank anchored", recorded.blank_anchored),
)
#: The steps that can raise a doubt.
DOUBTS: tuple[Step, ...] = tuple(step for step in PIPELINE if step.doubt)


def lazy_segment(m: _Merger, hunk: Hunk) -> None:
    """Run ``hunk`` (a lazy segment) through :data:`PIPELINE` in reading ``m``: each step
    in order, until one places it for good. What a step reports carries its name."""
    m.budget.doing = hunk.label  # (a merge over its work budget names the segment)
    s = Segment(hunk, list(hunk.new))
    try:
        for step in PIPELINE:
            m.asking = step.name
            step.run(m, s)
            if s.done:
                return
    finally:
        m.asking = ""
