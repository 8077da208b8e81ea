"""A lazy segment on its way through the merge (:data:`fastapply.merge.doubts.PIPELINE`):
what it places, where its region lies, and the places the merge had to guess
(:class:`Uncertainty`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fastapply.merge.costs import Placement
from fastapply.merge.syntax import Hunk


@dataclass(frozen=True)
class Uncertainty:
    """A place where the merge had to guess."""

    #: 1-based line of the original where it happened (0 when not tied to one).
    line: int
    #: What and where, for a person.
    message: str
    #: Whether what could be wrong lies at ``line`` (a tie, an edge, a removal there), so
    #: a window around it holds every reading; False where the segment's true place may
    #: be anywhere (found unchanged, or matching nowhere): only the whole file can tell.
    local: bool = True
    #: The doubt of the lazy pipeline that raised it (its name in
    #: :data:`fastapply.merge.doubts.PIPELINE`; "" for the other findings). Not compared.
    doubt: str = field(default="", compare=False, repr=False)


def cut(p: Placement, side: str, at: int, shift: bool = False) -> Placement:
    """``p`` with the matched pairs of segment lines before ``at`` ("before": what is cut
    from the segment's start; ``shift``: the segment loses those lines, so the rest are
    renumbered) or from ``at`` on ("after") taken out.

    >>> cut(Placement((0, 0), (3, 3), ((0, 0), (1, 1), (2, 2))), "before", 1, shift=True).pairs
    ((0, 1), (1, 2))
    """
    if side == "before":
        pairs = tuple((i - at if shift else i, j) for i, j in p.pairs if i >= at)
    else:
        pairs = tuple((i, j) for i, j in p.pairs if i < at)
    return replace(p, pairs=pairs)


@dataclass(eq=False)
class Segment:
    """One lazy segment as the pipeline's steps read and move it: the hunk (its markers
    may be implied on the way), its lines (re-indented, or cut at a blank anchor), its
    placement and the original lines ``[start, end)`` it replaces. Each step reads what
    the steps before it left; one that has placed the segment for good sets ``done``."""

    hunk: Hunk
    #: The segment's lines, as they will be written.
    seg: list[str]
    #: No marker anywhere and not the whole file: an anchored fragment (markers implied).
    implied: bool = False
    #: Placed for good (or found nowhere): the remaining steps are skipped.
    done: bool = False
    #: Its placement in the original (None until placed, or when nothing matches).
    placement: Placement | None = None
    #: Matched indentation-blind (the snippet lost the file's indentation).
    loose: bool = False
    #: Placed by its best fit, without the context lines the other segments show.
    misfit: bool = False
    #: The region it replaces, ``orig[start:end]``, and its first and last matched
    #: original lines (``first``, ``last``: the region's ends before any edge is read).
    start: int = 0
    first: int = 0
    last: int = 0
    end: int = 0
    #: Segment lines of its first and last match.
    i0: int = 0
    i1: int = 0
    #: Matched lines found once in the original (counted when it is recorded).
    unique: int = 0

    @property
    def p(self) -> Placement:
        """The placement (set by the "place" step; the steps after it need one)."""
        assert self.placement is not None
        return self.placement

    @p.setter
    def p(self, value: Placement) -> None:
        self.placement = value

    def region(self) -> None:
        """Read ``start``, ``first``, ``last``, ``end``, ``i0`` and ``i1`` off the
        placement."""
        (self.start, self.first), (self.last, self.end) = self.p.start, self.p.end
        self.i0, self.i1 = self.p.pairs[0][0], self.p.pairs[-1][0]
