"""One reading of an edit (see :func:`fastapply.merge.merge`): the state that places its
hunks in the original one by one, and the places where it had to guess
(:class:`Uncertainty`). A lazy segment is placed in it by
:func:`fastapply.merge.doubts.lazy_segment` (every step and doubt: its ``PIPELINE``);
SEARCH/REPLACE blocks and diff hunks by :mod:`.blocks`."""

from __future__ import annotations

from collections.abc import Callable

from fastapply.merge import lazy
from fastapply.merge.beside import alike
from fastapply.merge.costs import Placement, WorkBudget
from fastapply.merge.lines import WordIndex, key_exact, key_loose, positions
from fastapply.merge.precision import Removal
from fastapply.merge.removal import marker_names, named_units
from fastapply.merge.segment import Uncertainty
from fastapply.merge.syntax import Hunk
from fastapply.merge.text import _indent, _Replacement, kept_lines

__all__ = ["Uncertainty", "_Merger"]


class _Merger:
    def __init__(self, orig: list[str], context: int | None = None, eof: int | None = None,
                 shared: _Merger | None = None, flips: frozenset[int] = frozenset(),
                 edge_flips: frozenset[tuple[int, str]] = frozenset()) -> None:
        self.orig = orig
        self.flips = flips  # lazy segments (numbers) that take their rival placement
        self.ties: list[int] = []  # lazy segments (numbers) that have a rival placement
        # edges without a marker, (segment number, "before" | "after"), read the other way:
        # the lines between the edge and its match kept where the reading replaced them,
        # or replaced where it kept them (the rival readings of an unsure edge)
        self.edge_flips = edge_flips
        self.edge_choices: list[tuple[int, str]] = []  # the unsure edges this reading met
        # (hunk index in the plan, first original line, end) of every placed hunk
        self.placed: list[tuple[int, int, int]] = []
        self.context = context  # lines of context a lazy snippet shows (None: 0-3)
        # where the file's lines end (before the empty line after a final newline)
        self.eof = len(orig) if eof is None else eof
        self.violations = 0  # lazy segments that do not show ``context`` lines
        self.anchors = 0  # matched lines found once in the original
        self.drops = 0  # definitions and headings removed that the snippet never names
        self.exact = 0  # lazy segments placed by exact (indentation-true) matches
        self.fits = 0  # lazy segments that show ``context`` lines
        self.misfits: list[Uncertainty] = []  # the others, placed by their best fit
        self.replacements: list[_Replacement] = []
        self.uncertain: list[Uncertainty] = []
        self.pos = 0  # end of the previous hunk's region, for order-based matching
        # indexes of the original by key function (shared by the mergers of one call)
        self._tables: dict[Callable[[str], str], dict[str, list[int]]] = \
            shared._tables if shared else {}
        # placements by (hunk, position, context): readings share many of them
        self._placed: dict[tuple[Hunk, int, int | None], tuple[Placement | None, bool]] = \
            shared._placed if shared else {}
        # closest lines of unplaced segments by (hunk, position), shared the same way
        self._near: dict[tuple[Hunk, int], int] = shared._near if shared else {}
        # the snippet's non-blank lines, stripped (set by _reading for the first reading)
        self.snippet_lines: frozenset[str] = shared.snippet_lines if shared else frozenset()
        # the snippet mixes lazy segments with SEARCH/REPLACE or diff hunks (set likewise)
        self.mixed: bool = shared.mixed if shared else False
        # lazy segments (numbers) whose edge without a marker (before, after) is anchored
        # where its line is found, not at the file's edge (a snippet from a signature to
        # the end of its block, see merge._signature_edges): no rule on that edge's context
        self.anchored: dict[int, tuple[bool, bool]] = shared.anchored if shared else {}
        self._searches = 0  # SEARCH blocks and diff hunks looked for (see blocks.SCANS)
        # the work all readings of one merge may still do
        self.budget: WorkBudget = shared.budget if shared else WorkBudget()
        # the original's distinct lines by word, per key function (shared likewise)
        self._words: dict[Callable[[str], str], WordIndex] = \
            shared._words if shared else {}
        # removals of original lines the snippet never shows, per placed segment
        # (precision.Removal; judged for the chosen reading only, see merge)
        self.removals: list[Removal] = []
        # lazy segments between markers found unchanged in the original (judged for the
        # chosen reading only, like the removals)
        self.idle: list[Uncertainty] = []
        # edges of lazy segments that fit another copy in the gap beside them: the gap's
        # lines (lo, hi) that reading would take, and the finding (judged for the chosen
        # reading only, where the other segments' regions are known; see edges.py)
        self.edges: list[tuple[int, int, Uncertainty]] = []
        # runs of original lines a placed segment removes by adjacency, between two of
        # its matched lines: (replacement index, line of it to insert them before, lo,
        # hi) (a rival reading of an unsure merge keeps one; see merge.readings)
        self.runs: list[tuple[int, int, int, int]] = []
        # whether the merged file ends with a newline, where a diff says (None: as the
        # original does)
        self.final_newline: bool | None = None
        # the step of the lazy pipeline being run (its findings carry the name)
        self.asking = ""

    def trouble(self) -> tuple[int, int, int]:
        """How badly this reading fits (smaller is better): context runs outside the
        contract, unsure places, then fewer unique anchors."""
        return self.violations, len(self.uncertain) + len(self.misfits), -self.anchors

    def unsure(self, line: int, message: str, local: bool = True) -> None:
        """Report a place where this reading had to guess (named after the pipeline's
        step being run, if any)."""
        self.uncertain.append(self.found(line, message, local))

    def found(self, line: int, message: str, local: bool = True) -> Uncertainty:
        """A finding at original line ``line`` (1-based), named after the step being run;
        held back by the caller (a misfit, a segment found unchanged, an edge judged on
        the chosen reading)."""
        return Uncertainty(line, message, local, doubt=self.asking)

    def removal_gap(self, hunk: Hunk, lo: int, hi: int) -> None:
        """Remove the original lines [lo, hi) between ``hunk`` and its neighbour, where a
        marker whose words say lines were removed stood (:func:`.edits.parse_edit` split
        the snippet there). Which lines it meant is the merge's reading of where the two
        sides stand, so the merge is unsure; the rival (edge flip "named") removes only
        the declarations the marker names (:mod:`.removal`)."""
        assert hunk.removal is not None
        _, line, marker = hunk.removal
        units = [(lo + a, lo + b) for a, b in named_units(self.orig[lo:hi],
                                                          marker_names(marker))]
        what = f"original lines {lo + 1}-{hi} were removed" if hi > lo else \
            "no original line lies there, so nothing was removed"
        self.unsure(lo + 1, f"{hunk.label}: the marker at snippet line {line} says lines were "
                            f"removed, so the lines on its two sides were read as following "
                            f"each other: {what}; if it meant other lines, show the unchanged "
                            f"lines on both sides of the removal, or send a SEARCH/REPLACE block")
        if units and units != [(lo, hi)]:
            self.edge_choices.append((hunk.number, "named"))
            if (hunk.number, "named") in self.edge_flips:
                self.replacements.extend(_Replacement(a, b, []) for a, b in units)
                return
        if hi > lo:
            self.replacements.append(_Replacement(lo, hi, []))

    def in_place(self, lines: list[str], at: int, lo: int, hi: int) -> bool:
        """Do ``lines`` (a segment's unmatched edge with no marker, at most 3) each nearly
        equal (:func:`.beside.alike`) the original line at ``at`` on, all within the edge's
        region ``[lo, hi)``? A snippet that starts the file would not show an edit of the
        line right above its first match; an agent's one-line change does."""
        if not 0 < len(lines) <= 3 or at < lo or at + len(lines) > hi:
            return False
        return all(alike(n, o) for n, o in zip(lines, self.orig[at:at + len(lines)],
                                                strict=True))

    def doubt(self, hunk: Hunk, edge: str, line: int, message: str) -> bool:
        """Report a doubt about ``hunk``'s ``edge`` at original line ``line`` (0-based),
        as a choice the rival readings flip; is it flipped in this reading?"""
        self.unsure(line + 1, f"{hunk.label}: {message}")
        self.edge_choices.append((hunk.number, edge))
        return (hunk.number, edge) in self.edge_flips

    def moved(self, start: int, end: int) -> bool:
        """Are the non-blank lines of orig[start:end] all in the snippet (moved, so
        dropping them here loses nothing)?"""
        lines = [s.strip() for s in self.orig[start:end] if s.strip()]
        return bool(lines) and all(s in self.snippet_lines for s in lines)

    def around(self, start: int, end: int) -> int:
        """Deepest indentation of the nearest non-blank lines outside orig[start:end]."""
        before = next((s for s in reversed(self.orig[max(0, start - 50):start]) if s.strip()),
                      "")
        after = next((s for s in self.orig[end:end + 50] if s.strip()), "")
        return max(len(_indent(before)), len(_indent(after)))

    def place(self, seg: list[str], hunk: Hunk) -> tuple[Placement | None, bool, bool]:
        """Placement with ``self.context`` lines of context, else with 0-3 lines (then
        the segment is a misfit: the third value)."""
        p, loose = self._place_with(seg, hunk, self.context)
        misfit = False
        if self.context is not None and (p is None or p.violations):
            self.violations += 1
            misfit = p is not None
            p, loose = self._place_with(seg, hunk, None)
        return p, loose, misfit

    def _place_with(self, seg: list[str], hunk: Hunk, context: int | None
                    ) -> tuple[Placement | None, bool]:
        """Exact placement, or loose (indentation-blind) when that anchors more lines."""
        free = self.anchored.get(hunk.number, (False, False))
        done = self._placed.get((hunk, self.pos, context))
        if done is not None:
            return done
        best: Placement | None = None
        best_loose, best_count = False, 0
        for key, loose in ((key_exact, False), (key_loose, True)):
            p = lazy.place(seg, self.orig, self.pos, hunk.marker_before, hunk.marker_after,
                      loose, self._positions(key), context, self._index(key), self.budget,
                      free)
            count = lazy.nonblank_matches(p, seg) if p else 0
            if p is not None and (best is None or count > best_count):
                best, best_loose, best_count = p, loose, count
            if best_count:
                break
        self._placed[(hunk, self.pos, context)] = best, best_loose
        return best, best_loose

    def _positions(self, key: Callable[[str], str]) -> dict[str, list[int]]:
        """Original line positions by key (built once per key function)."""
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = positions(self.orig, key)
        return table

    def _index(self, key: Callable[[str], str]) -> WordIndex:
        """The original's distinct lines by word (one per key function)."""
        index = self._words.get(key)
        if index is None:
            index = self._words[key] = WordIndex(self._positions(key))
        return index

    def text_lines(self, sources: list[int] | None = None,
                   kept: list[int] | None = None) -> list[str]:
        """The merged lines; ``sources``, if given, gets each one's original line number
        (-1: a new line) for the line endings of a file that mixes them; ``kept``, if
        given, the original line number of each line outside every replacement (-1 for
        the lines a replacement wrote, even those equal to an original line)."""
        out: list[str] = []
        cursor = 0
        last: _Replacement | None = None
        for r in sorted(self.replacements, key=lambda r: (r.start, r.end)):
            shared = self.orig[r.start:cursor]  # lines the previous edit replaced too
            if shared and last is not None and last.block and r.block and r.end >= cursor \
                    and last.lines[-len(shared):] == shared == r.lines[:len(shared)]:
                # Two hunks that share context lines (both keep them): as git apply and
                # patch read them, one after the other.
                r = _Replacement(cursor, r.end, r.lines[len(shared):], block=True)
            elif r.start < cursor:
                self.unsure(r.start + 1, f"two edits overlap at original line {r.start + 1}; "
                                         f"the second was applied after the first")
                r = _Replacement(cursor, max(cursor, r.end), r.lines)
            last = r
            out.extend(self.orig[cursor:r.start])
            out.extend(r.lines)
            if sources is not None:
                sources.extend(range(cursor, r.start))
                sources.extend(kept_lines(self.orig[r.start:r.end], r.lines, r.start))
            if kept is not None:
                kept.extend(range(cursor, r.start))
                kept.extend([-1] * len(r.lines))
            cursor = r.end
        out.extend(self.orig[cursor:])
        if sources is not None:
            sources.extend(range(cursor, len(self.orig)))
        if kept is not None:
            kept.extend(range(cursor, len(self.orig)))
        return out

