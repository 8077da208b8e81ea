"""One reading of an edit (see :func:`fastapply.merge.merge`): the state that places its
hunks in the original one by one, and the places where it had to guess
(:class:`Uncertainty`). Lazy segments are placed here; SEARCH/REPLACE blocks and diff
hunks by :mod:`.blocks`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from fastapply.merge.beside import alike, beside, ratio, reach
from fastapply.merge.costs import Placement, WorkBudget
from fastapply.merge.definitions import opens_block, removed_definitions
from fastapply.merge.edges import kept_block_tail, replaced_past_block, rival_edges
from fastapply.merge.guess import guesses
from fastapply.merge.layout import blank_anchors, removed_runs, shown_from, weak_edges
from fastapply.merge.lazy import nonblank_matches, place
from fastapply.merge.lines import _WORDLIKE, WordIndex, key_exact, key_loose, positions
from fastapply.merge.precision import Removal, removals
from fastapply.merge.removal import marker_names, named_units
from fastapply.merge.syntax import Hunk
from fastapply.merge.text import (
    _closest,
    _indent,
    _reindent,
    _Replacement,
    inner,
    kept_lines,
)
from fastapply.merge.whole import header_left_out, looks_whole, top_fragment


def _cut(p: Placement, side: str, at: int, shift: bool = False) -> Placement:
    """``p`` with the matched pairs of segment lines before ``at`` ("before": what is cut
    from the segment's start; ``shift``: the segment loses those lines, so the rest are
    renumbered) or from ``at`` on ("after") taken out.

    >>> _cut(Placement((0, 0), (3, 3), ((0, 0), (1, 1), (2, 2))), "before", 1, shift=True).pairs
    ((0, 1), (1, 2))
    """
    if side == "before":
        pairs = tuple((i - at if shift else i, j) for i, j in p.pairs if i >= at)
    else:
        pairs = tuple((i, j) for i, j in p.pairs if i < at)
    return replace(p, pairs=pairs)


#: A line that only closes a block: brackets and punctuation, or a closing keyword.
CLOSING = re.compile(r"^(?:[)\]}>;,]+|end|fi|done|esac|endif|end;)$")
#: How far outside a segment's region, and how long (characters, stripped), an original
#: line kept there must be for a new line equal to it to read as doubled (_doubled).
DOUBLED_REACH, DOUBLED_MIN_CHARS = 3, 8
#: Most lines of context written again that _outer_doubles compares.
DOUBLED_RUN = 20
#: How alike (difflib ratio of their stripped text) new lines beside a marker must be to
#: the original lines the alignment wrote them over, to be read as their edit in place
#: (_unlike_edges). On agent-written snippets, right merges of this shape were at 0.54,
#: 0.56, 0.64 and 0.75 up; the wrong ones at 0.42, 0.47 and 0.63 (docs/benchmarks.md).
IN_PLACE = 0.7
#: Most lines compared line for line there (each comparison is a difflib ratio).
IN_PLACE_LINES = 10
#: Original lines the snippet never shows that a segment anchored by a blank line alone
#: before its new first lines must remove to be doubted (_blank_led).
BLANK_LED = 3


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

    def trouble(self) -> tuple[int, int, int]:
        """How badly this reading fits (smaller is better): context runs outside the
        contract, unsure places, then fewer unique anchors."""
        return self.violations, len(self.uncertain) + len(self.misfits), -self.anchors

    def unsure(self, line: int, message: str, local: bool = True) -> None:
        self.uncertain.append(Uncertainty(line, message, local))

    def lazy_segment(self, hunk: Hunk) -> None:
        """Place one lazy segment: it replaces the original lines between its anchors."""
        self.budget.doing = hunk.label
        seg = list(hunk.new)
        if not any(s.strip() for s in self.orig):
            self.replacements.append(_Replacement(0, len(self.orig), seg))
            if self.mixed:  # beside a block that writes the new file: text, not code
                self.unsure(1, f"{hunk.label}: the original is empty and the snippet also "
                               f"has SEARCH/REPLACE or diff hunks, so its lines were written "
                               f"into the new file as they are; send only the edit")
            return
        implied = not hunk.marker_before and not hunk.marker_after and \
            not looks_whole(seg, self.orig, self.eof)
        if implied:  # No marker anywhere and not the whole file: an anchored fragment.
            hunk = replace(hunk, marker_before=True, marker_after=True)
        p, loose, misfit = self._place(seg, hunk)
        if p is None:
            self._unplaced(seg, hunk)
            return
        freed = self._free_end(seg, hunk, p)
        if freed is not hunk:
            hunk = freed
            p, loose, misfit = self._place(seg, hunk)
            assert p is not None  # its unique line matches
        if p.alternative is not None:
            self.ties.append(hunk.number)
            if hunk.number in self.flips:
                p = p.alternative
        (start, first), (last, end) = p.start, p.end
        i0, i1 = p.pairs[0][0], p.pairs[-1][0]
        # its first lines, left unmatched, are the original's own lines above its first
        # match (context the alignment let go): it starts mid-file, like a first match
        shown = shown_from(self.orig, seg[:i0], start, first) if start < first else -1
        # more original lines above its first match than its first new lines may replace
        wide = start < first and (first - start > max(3, 2 * i0) or
                                  header_left_out(self.orig[start:first], seg[:i0]))
        if shown >= 0 and not hunk.marker_before and not self._moved(start, shown):
            if not self._doubt(hunk, "before", shown, (
                    f"no marker comes before it but its first line is original line "
                    f"{shown + 1}, so lines {start + 1}-{shown} were kept; add a marker")):
                start = shown
        elif start < first and (i0 == 0 or wide
                                or (start < first - i0 and any(_WORDLIKE.search(s) for s in
                                                               self.orig[start:first - i0])
                                    and self._in_place(seg[:i0], first - i0, start, first))) \
                and not self._moved(start, first):
            # lines disputed from the file's first line: a window of them cannot show the
            # model that the file starts there, so the whole file is witnessed
            local = start > 0
            flip = (hunk.number, "before") in self.edge_flips
            if self._in_place(seg[:i0], first - i0, start, first):
                # its first lines nearly equal the lines right above its first match: they
                # replace those, the rest above stays (an agent's one-line change). Where
                # the lines above are few (no more than the gap the alignment may take
                # as the file's top), the literal reading (they go) stays chosen: an agent
                # that rewrote the file's first lines writes it so too (spdlog's header)
                kept = f"lines {start + 1}-{first - i0} were kept" if wide else \
                    f"lines {start + 1}-{first - i0} above them went (the file starts there)"
                self.unsure(first - i0 + 1, f"{hunk.label}: no marker comes before it, and "
                                            f"its first {i0} line(s) nearly equal original "
                                            f"lines {first - i0 + 1}-{first}, so they replace "
                                            f"them and {kept}; add a marker", local)
                if flip != wide:
                    start = first - i0
            elif i0 == 0:  # its first line is context found mid-file: keep what comes before
                self.unsure(first + 1, f"{hunk.label}: no marker comes before it but its "
                                       f"first line matches original line {first + 1}, so "
                                       f"lines {start + 1}-{first} were kept; add a marker",
                            local)
                if not flip:
                    start = first
            else:
                self.unsure(start + 1, f"{hunk.label}: no marker comes before it, so original "
                                       f"lines {start + 1}-{first} were replaced by its first "
                                       f"{i0} lines; add a marker to keep them", local)
                if flip:
                    start = first
            self.edge_choices.append((hunk.number, "before"))
        if last < min(end, self.eof) and \
                (i1 == len(seg) - 1 or end - last > max(3, 2 * (len(seg) - 1 - i1))
                 or header_left_out(self.orig[last:end], seg[i1 + 1:], top=False)) and \
                not self._moved(last, end):
            local = end < len(self.orig)  # to the file's last line: the whole file decides
            flip = (hunk.number, "after") in self.edge_flips
            k = len(seg) - 1 - i1
            if self._in_place(seg[i1 + 1:], last, last, end):
                self.unsure(last + 1, f"{hunk.label}: no marker comes after it, and its last "
                                      f"{k} line(s) nearly equal original lines "
                                      f"{last + 1}-{last + k}, so they replace them and lines "
                                      f"{last + k + 1}-{end} were kept; add a marker", local)
                if not flip:
                    end = last + k
            elif i1 == len(seg) - 1:
                self.unsure(last + 1, f"{hunk.label}: no marker comes after it but its last "
                                      f"line matches original line {last}, so lines "
                                      f"{last + 1}-{end} were kept; add a marker", local)
                if not flip:
                    end = last
            else:
                self.unsure(last + 1, f"{hunk.label}: no marker comes after it, so original "
                                      f"lines {last + 1}-{end} were replaced by its last "
                                      f"{k} lines; add a marker to keep them", local)
                if flip:
                    end = last
            self.edge_choices.append((hunk.number, "after"))
        start, end = self._unlike_edges(start, first, last, end, seg, p, hunk)
        if hunk.marker_before and not hunk.marker_after and end >= self.eof and \
                i1 < len(seg) - 1 and seg[-1].strip():
            # it runs to the file's end on new lines: the blank lines that end the file are
            # its layout, not lines the snippet removes by leaving them out
            while end > last and not self.orig[end - 1].strip():
                end -= 1
        if implied and top_fragment(seg, self.orig, self.eof, p.pairs, end):
            # as long as half the file and from its first line: the whole new file, cut
            # short (the rest removed), or its first part (the rest kept)?
            self.unsure(end + 1, f"{hunk.label}: no marker comes before or after it, and it "
                                 f"starts with the file's first line and is at least half "
                                 f"as long as the file, but its last line is original line "
                                 f"{last}, so lines {end + 1}-{self.eof} were kept; if the "
                                 f"snippet is the whole new file send all of it, else add "
                                 f"a marker after it", local=False)
            if (hunk.number, "after") in self.edge_flips:
                end = self.eof
            self.edge_choices.append((hunk.number, "after"))
        if p.rival >= 0:
            self.unsure(first + 1, f"{hunk.label}: its anchors match equally well at lines "
                                   f"{first + 1} and {p.rival + 1}; used line {first + 1}")
        elif misfit:  # reported if other segments fit (see merge)
            self.misfits.append(Uncertainty(start + 1, (
                f"{hunk.label}: unlike the other segments it does not show {self.context} "
                f"line(s) of unchanged context beside its change; placed at lines "
                f"{start + 1}-{end} by its best fit")))
        elif self.context is not None:
            self.fits += 1
        # Loose (indentation-blind) matches: the snippet lost the file's indentation
        # (shift it). A single such line is weaker evidence: if earlier segments matched
        # exactly, or the code around the place is not indented deeper than the snippet,
        # that line's indentation changed and the snippet's text stands.
        shifted = [(i, j) for i, j in p.pairs if seg[i].strip() and seg[i] != self.orig[j]]
        if not loose:
            self.exact += 1
        elif len(shifted) >= 2 or (shifted and not self.exact and len(_indent(
                seg[shifted[0][0]])) < self._around(start, end)):
            i, j = shifted[0]
            seg = _reindent(seg, _indent(seg[i]), _indent(self.orig[j]))
            for i, j in p.pairs:
                seg[i] = self.orig[j]
        self._blank_led(seg, p, end, hunk)
        start = self._block_end(start, seg, p, hunk)
        start, end = self._blank_edges(start, end, p.pairs, seg, hunk)
        start, end, seg, p = self._blank_anchors(start, end, seg, p, hunk)
        start, end, p = self._weak_edges(start, end, seg, p, hunk)
        start, end = self._beside(start, end, seg, p, hunk)
        self._doubled(start, end, seg, p, hunk)
        if implied or self.anchored.get(hunk.number, (False, False))[1]:
            # it ends on new lines and no marker was written after it: the rest of their
            # block kept, or a line after it replaced, is a guess (merge/edges.py)
            for find, what in (
                    (kept_block_tail, "after them, as deep in the same block and never "
                                      "shown in the snippet, were kept; if the snippet "
                                      "replaced them nothing in it says so: add a marker "
                                      "after it to keep them, or show the lines that end "
                                      "the block"),
                    (replaced_past_block, "less indented than those lines (after their "
                                          "block) and never shown in the snippet, were "
                                          "replaced; if they stay, show them after it or "
                                          "add a marker after it")):
                span = find(self.orig, seg, p.pairs, end, self.snippet_lines)
                if span:
                    self.unsure(span[0] + 1, f"{hunk.label}: it ends on new lines with no "
                                             f"marker after it, and original lines "
                                             f"{span[0] + 1}-{span[1]} {what}")
        self.runs.extend((len(self.replacements), k, lo, hi)
                         for k, lo, hi in removed_runs(self.orig, p.pairs, self.snippet_lines))
        self.replacements.append(_Replacement(start, end, seg))
        if hunk.marker_before and hunk.marker_after and \
                inner(seg) == inner(self.orig[start:end]) and \
                hunk.number not in self.anchored and not (self.anchored and opens_block(
                    [s for s in seg if s.strip()])):
            # Every segment of a lazy snippet shows a change; one between markers found
            # as it stands (blank lines beside its markers aside: they are the snippet's
            # layout) was placed where the change it shows (most often a deletion shown by
            # two neighbours, read as kept: see DROP_DEF) does not happen. (In a snippet
            # from a signature, the start of another block may show none.) A blank line
            # added or removed inside it is an edit (spacing between two definitions).
            self.idle.append(Uncertainty(start + 1, (
                f"{hunk.label}: each of its lines was found as it stands at lines "
                f"{start + 1}-{end} (blank lines beside the markers aside), so the change "
                f"it shows (a deletion?) was not read; show a unique line of unchanged "
                f"context on each side of the change"), local=False))
        self.pos = end
        self.drops += p.drops
        key = key_loose if loose else key_exact
        table = self._positions(key)
        unique = sum(1 for i, _ in p.pairs if len(table.get(key(seg[i]), ())) == 1)
        self.anchors += unique
        head, tail = self.anchored.get(hunk.number, (False, False))
        if (head and not seg[0].strip()) or (tail and not seg[-1].strip()):
            # A block's start or end is not a blank line: the snippet runs on past the
            # block (to show a deletion after it?), where no line anchors it.
            self.unsure(start + 1, f"{hunk.label}: it has no marker "
                                   f"{'before' if head else 'after'} it and its "
                                   f"{'first' if head else 'last'} line is blank, so where "
                                   f"it ends is a guess; placed at lines {start + 1}-{end}; "
                                   f"end it at the block's last line or add a marker")
        if hunk.marker_before or hunk.marker_after:  # (the whole file shows what it removes)
            self.removals.extend(removals(self.orig, start, end, p.pairs, seg,
                                          self.snippet_lines, self._positions(key_loose),
                                          hunk.label))
            self.edges.extend((lo, hi, Uncertainty(line, message)) for line, lo, hi, message
                              in rival_edges(self.orig, p.pairs, seg, self.snippet_lines,
                                             self._positions(key_loose), hunk.label,
                                             hunk.marker_before, hunk.marker_after))
        lost = [] if unique or p.rival >= 0 else \
            removed_definitions(self.orig[start:end], {j - start for _, j in p.pairs}, seg)
        if lost:
            # It removes a definition it never names, and only lines found at several
            # places anchor it: new code between markers fits beside any of its lookalikes.
            self.unsure(start + 1, f"{hunk.label}: placed at lines {start + 1}-{end}, it "
                                   f"removes {lost[0]!r}, which it never names, and each "
                                   f"line it shares with the original is found at several "
                                   f"places; show a unique line of unchanged context next "
                                   f"to it")
        for line, message in guesses(seg, self.orig, start, end, p.pairs, implied,
                                     self.snippet_lines, hunk.label,
                                     self._positions(key_loose)):
            self.unsure(line, message)
        between = hunk.marker_before and hunk.marker_after
        if p.rival < 0 and not misfit and (between or self.mixed) and \
                not any(seg[i].strip() for i, _ in p.pairs):
            # Placed by blank lines alone: they are everywhere, so this is a guess. (At the
            # top or end of a lazy snippet the file's edge anchors it; beside a SEARCH block
            # or diff hunk such lines are more likely a sentence than code.)
            self.unsure(start + 1, f"{hunk.label}: the only lines it shares with the "
                                   f"original are blank lines, found at many places; placed "
                                   f"at lines {start + 1}-{end}; show a non-blank line of "
                                   f"context")

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

    def _in_place(self, lines: list[str], at: int, lo: int, hi: int) -> bool:
        """Do ``lines`` (a segment's unmatched edge with no marker, at most 3) each nearly
        equal (:func:`.beside.alike`) the original line at ``at`` on, all within the edge's
        region ``[lo, hi)``? A snippet that starts the file would not show an edit of the
        line right above its first match; an agent's one-line change does."""
        if not 0 < len(lines) <= 3 or at < lo or at + len(lines) > hi:
            return False
        return all(alike(n, o) for n, o in zip(lines, self.orig[at:at + len(lines)],
                                                strict=True))

    def _free_end(self, seg: list[str], hunk: Hunk, p: Placement) -> Hunk:
        """A segment with a marker before it and none after runs to the file's end. Where
        only lines found at several places (blank lines, ``end``, ``}``) match there while
        its first line (the declaration an agent writes out again) is found once in the
        original, above, and left unmatched, it was put at the end only because the end
        had to match, and agents leave the last marker out: it is read where that line
        is, the rest kept (the hunk given a marker after it), unsure; the rival is the
        file's end."""
        if not hunk.marker_before or hunk.marker_after or not p.pairs:
            return hunk
        table = self._positions(key_exact)

        def once(i: int) -> bool:
            return bool(seg[i].strip()) and len(table.get(key_exact(seg[i]), ())) == 1

        matched = {i for i, _ in p.pairs}
        head = next((i for i, s in enumerate(seg) if s.strip()), None)
        if head is None or head in matched or not once(head) or \
                any(once(i) for i in matched):
            return hunk
        line = table[key_exact(seg[head])][0]
        if line >= p.start[0]:
            return hunk
        if self._doubt(hunk, "free end", line, (
                f"no marker comes after it, so it should run to the file's end, but only "
                f"lines found at several places match there while its first line "
                f"{seg[head].strip()[:60]!r} is original line {line + 1}: read where that "
                f"line is, the lines after it kept; if it ends the file, show the file's "
                f"last lines, else add a marker after it")):
            return hunk  # the rival: at the file's end
        return replace(hunk, marker_after=True)

    def _unlike_edges(self, start: int, first: int, last: int, end: int, seg: list[str],
                      p: Placement, hunk: Hunk) -> tuple[int, int]:
        """New lines between a marker and the segment's outermost match that the alignment
        wrote in place of original lines there, though they read unlike them (neither
        line for line :func:`.beside.alike`, nor alike as a whole: difflib ratio under
        IN_PLACE): an agent's changed line shown in place is most often an edit of the
        line there, and a new line added beside it reads like this. Unsure; the rival
        reading inserts them and keeps those lines."""
        i0, i1 = p.pairs[0][0], p.pairs[-1][0]
        edges = []
        if hunk.marker_after and i1 < len(seg) - 1 and last < end:
            edges.append(("after", seg[i1 + 1:], last, end))
        if hunk.marker_before and i0 > 0 and start < first:
            edges.append(("before", seg[:i0], start, first))
        for side, new, lo, hi in edges:
            news = [s for s in new if s.strip()]
            olds = [s for s in self.orig[lo:hi] if s.strip()]
            worded = [s.strip() for s in olds if _WORDLIKE.search(s)]
            if not news or not olds or \
                    (worded and all(s in self.snippet_lines for s in worded)) or \
                    (len(news) == len(olds) <= IN_PLACE_LINES and
                     all(map(alike, news, olds))) or \
                    ratio("\n".join(s.strip() for s in news),
                          "\n".join(s.strip() for s in olds), IN_PLACE):
                continue
            if self._doubt(hunk, f"unlike {side}", lo, (
                    f"its {'last' if side == 'after' else 'first'} new line(s) were written "
                    f"in place of original lines {lo + 1}-{hi} "
                    f"({self.orig[lo].strip()[:60]!r}), which they do not resemble; if "
                    f"they are added beside those lines, or replace other ones, show one "
                    f"more unchanged line {'after' if side == 'after' else 'before'} them")):
                if side == "after":
                    end = lo
                else:
                    start = hi
        return start, end

    def _blank_led(self, seg: list[str], p: Placement, end: int, hunk: Hunk) -> None:
        """A marker, blank lines, then new code: where only those blank lines anchor the
        segment before its first matched non-blank line, the alignment chose which blank
        line of the file starts the region, and BLANK_LED or more original lines the snippet
        never shows lie between it and that match (removed, the new code read as their
        edit: it shares their generic lines). Unsure; no reading keeps them (the new code
        would need placing again)."""
        if not hunk.marker_before:
            return
        matched = dict(p.pairs)
        first = next((i for i, s in enumerate(seg) if s.strip()), None)
        if first is None or first in matched or not any(i in matched for i in range(first)):
            return
        j0 = max(j for i, j in p.pairs if i < first)
        nxt = next((j for i, j in p.pairs if i > first and seg[i].strip()), end)
        unshown = [s.strip() for s in self.orig[j0 + 1:nxt]
                   if _WORDLIKE.search(s) and s.strip() not in self.snippet_lines]
        if len(unshown) >= BLANK_LED:
            self.unsure(j0 + 2, f"{hunk.label}: it opens with blank lines, then new lines; "
                                f"only a blank line (original line {j0 + 1}) anchors it "
                                f"there, and placed there it removes {len(unshown)} "
                                f"original lines the snippet never shows ({unshown[0][:60]!r}"
                                f"); if they stay, show the unchanged line right before the "
                                f"new code")

    def _doubt(self, hunk: Hunk, edge: str, line: int, message: str) -> bool:
        """Report a doubt about ``hunk``'s ``edge`` at original line ``line`` (0-based),
        as a choice the rival readings flip; is it flipped in this reading?"""
        self.unsure(line + 1, f"{hunk.label}: {message}")
        self.edge_choices.append((hunk.number, edge))
        return (hunk.number, edge) in self.edge_flips

    def _weak_edges(self, start: int, end: int, seg: list[str], p: Placement, hunk: Hunk
                    ) -> tuple[int, int, Placement]:
        """A removal that only lines found at several places anchor, at an edge beside a
        marker (:func:`.layout.weak_edges`): unsure; read freely, the weak lines are new
        and nothing goes; read with fixed context, the removal stands."""
        table = self._positions(key_loose)
        several = {i for i, s in enumerate(seg)
                   if s.strip() and len(table.get(key_loose(s), ())) > 1}
        for w in weak_edges(self.orig, seg, p.pairs, start, end, self.snippet_lines, several,
                            hunk.marker_before, hunk.marker_after):
            keep = self.context is None
            edge = "last" if w.side == "after" else "first"
            if self._doubt(hunk, f"weak {w.side}", w.lo, (
                    f"its {edge} lines are found at several places, and where they were "
                    f"matched they remove original lines {w.lo + 1}-{w.hi} "
                    f"({self.orig[w.lo].strip()[:60]!r}), which the snippet never shows: "
                    f"{'read as new lines, nothing was removed' if keep else 'they were removed'}"
                    f"; show a unique line of unchanged context next to the change")) == keep:
                continue
            if w.side == "after":
                end = w.edge
            else:
                start = w.edge
            p = _cut(p, w.side, w.cut)
        return start, end, p

    def _beside(self, start: int, end: int, seg: list[str], p: Placement, hunk: Hunk
                ) -> tuple[int, int]:
        """New lines next to a marker that nearly equal the original lines at their place
        replace them (:mod:`.beside`), unsure; the rival inserts them beside."""
        for b in beside(self.orig, seg, p.pairs, start, end, self.snippet_lines,
                        hunk.marker_before, hunk.marker_after):
            edge = "last" if b.side == "after" else "first"
            if self._doubt(hunk, f"beside {b.side}", b.lo, (
                    f"its {edge} line(s) are new and nearly equal original lines "
                    f"{b.lo + 1}-{b.hi} ({self.orig[b.lo].strip()[:60]!r}) at their place, "
                    f"so they replace them; if they are added beside them, show those lines "
                    f"too, unchanged")):
                continue
            if b.side == "after":
                end = b.hi
            else:
                start = b.lo
        return start, end

    def _block_end(self, start: int, seg: list[str], p: Placement, hunk: Hunk) -> int:
        """A marker indented deeper than the closing line (``}``, ``end``) that follows it
        stands for the rest of the block that line closes. Where the alignment matched that
        generic line further on, past an earlier copy of it at the same depth or less in the
        marker's gap, the block ended there and the lines between (other definitions) are
        kept only because the segment's other lines are new or found at several places:
        unsure; the rival reading starts the segment at the block's end, replacing what
        lies between. A line found once in the file among its matches places it as it is
        (agents indent "rest of the file" markers deep inside a block too)."""
        if not hunk.marker_indent or not p.pairs:
            return start
        head = next((i for i, s in enumerate(seg) if s.strip()), None)
        matched = dict(p.pairs)
        if head is None or head not in matched or not CLOSING.match(seg[head].strip()):
            return start
        depth = len(_indent(seg[head]))
        if depth >= len(hunk.marker_indent):
            return start
        table = self._positions(key_exact)
        if any(len(table.get(key_exact(seg[i]), ())) == 1 for i in matched if i > head):
            return start  # a line found once anchors it there
        j = matched[head]
        k = next((k for k in range(self.pos, j) if self.orig[k].strip() and
                  len(_indent(self.orig[k])) <= depth), None)
        if k is None or self.orig[k].strip() != seg[head].strip():
            return start
        if self._doubt(hunk, "block end", k, (
                f"the marker before it is indented deeper than its first line "
                f"{seg[head].strip()!r}, so it stands for the rest of the block that line "
                f"closes, which ends at original line {k + 1}; the segment was matched at "
                f"line {j + 1} instead, keeping original lines {k + 1}-{j} (if they are "
                f"replaced, show the block's last lines before the marker; if they stay, "
                f"add a marker after the block's end)")):
            return k
        return start

    def _doubled(self, start: int, end: int, seg: list[str], p: Placement, hunk: Hunk
                 ) -> None:
        """A new line at the segment's edge that is, word for word, an original line found
        once in the file and kept just outside the region (the alignment let it go, to keep
        its context runs short): the file would hold that line twice, where the snippet
        most likely showed it as context. Unsure; no reading has it matched (its change
        beside it would need placing again)."""
        if not p.pairs:
            return
        table = self._positions(key_exact)
        i0, i1 = p.pairs[0][0], p.pairs[-1][0]
        edges = ((range(i0), range(start - 1, max(-1, start - 1 - DOUBLED_REACH), -1)),
                 (range(i1 + 1, len(seg)), range(end, min(self.eof, end + DOUBLED_REACH))))
        doubles: list[tuple[str, int]] = []
        for new, near in edges:
            kept = {self.orig[j]: j for j in near
                    if len(self.orig[j].strip()) >= DOUBLED_MIN_CHARS and
                    len(table.get(key_exact(self.orig[j]), ())) == 1}
            doubles += [(seg[i], kept[seg[i]]) for i in new if seg[i] in kept]
        for line, j in doubles or self._outer_doubles(start, end, seg, p):
            self.unsure(j + 1, f"{hunk.label}: its line {line.strip()[:60]!r} is new where "
                               f"it was placed, but it is original line {j + 1}, kept right "
                               f"beside it, so the file would hold that line twice; if it "
                               f"is context, show one more unchanged line beside it, or send "
                               f"the change as SEARCH/REPLACE blocks")
            return

    def _outer_doubles(self, start: int, end: int, seg: list[str], p: Placement
                       ) -> list[tuple[str, int]]:
        """New lines that open (close) the segment's new lines, with only blank lines,
        matched, between them and the segment's edge, while the original lines kept right
        past that edge (blank lines aside) are the same lines: the alignment took a blank
        line as the anchor and wrote the context shown beside it again (an ``end``
        written after a block's blank line is removed; four lines of context under a
        marker and a blank line). Any lines, generic ones too: (first text, original
        line) pairs."""
        nonblank = [i for i, s in enumerate(seg) if s.strip()]
        if not nonblank:
            return []
        matched = dict(p.pairs)
        found: list[tuple[str, int]] = []
        last, first = nonblank[-1], nonblank[0]
        if last not in matched and any(i in matched for i in range(last + 1, len(seg))):
            q = next((j for j in range(end, min(self.eof, end + DOUBLED_REACH))
                      if self.orig[j].strip()), None)
            run = self._new_run(seg, matched, last, -1)
            if q is not None and any(run[:m][::-1] == self.orig[q:q + m]
                                     for m in range(1, len(run) + 1)):
                found.append((seg[last], q))
        if first not in matched and any(i in matched for i in range(first)):
            q = next((j for j in range(start - 1, max(-1, start - 1 - DOUBLED_REACH), -1)
                      if self.orig[j].strip()), None)
            run = self._new_run(seg, matched, first, 1)
            if q is not None and any(run[:m] == self.orig[q - m + 1:q + 1]
                                     for m in range(1, min(len(run), q + 1) + 1)):
                found.append((seg[first], q))
        return found

    @staticmethod
    def _new_run(seg: list[str], matched: dict[int, int], at: int, step: int) -> list[str]:
        """The segment's new lines read from ``at`` forwards (``step`` 1) or backwards (-1),
        up to the first blank or matched one, at most DOUBLED_RUN of them."""
        run: list[str] = []
        i = at
        while 0 <= i < len(seg) and i not in matched and seg[i].strip() and \
                len(run) < DOUBLED_RUN:
            run.append(seg[i])
            i += step
        return run

    def _blank_anchors(self, start: int, end: int, seg: list[str], p: Placement,
                       hunk: Hunk) -> tuple[int, int, list[str], Placement]:
        """Keep the unshown lines that only blank lines beside a marker would remove
        (:mod:`.layout`), unsure; the rival reading (an edge flip) removes them."""
        for a in blank_anchors(self.orig, seg, p.pairs, start, end, self.snippet_lines,
                               hunk.marker_before, hunk.marker_after):
            shown = self.orig[a.lo].strip()[:60]
            where = "between its marker and its first line" if a.side == "before" else \
                "between its last line and its marker"
            # Read with a fixed number of context lines (a textbook snippet: the blank
            # line is one of them) the removal stands; read freely (as agents write),
            # the blank line is layout and the lines stay. Either way the other reading
            # is the rival.
            keep = self.context is None
            if self._doubt(hunk, f"blank {a.side}", a.lo, (
                    f"only blank lines stand {where}, so original lines {a.lo + 1}-{a.hi} "
                    f"({shown!r}), which the snippet never shows, were "
                    f"{'kept' if keep else 'removed'}; "
                    f"{'if the edit removes them' if keep else 'if they stay'}, show the "
                    f"unchanged line on their other side as context")) == keep:
                continue
            if a.side == "before":  # the blank lines beside the marker go with it
                start, seg, p = a.edge, seg[a.cut:], _cut(p, "before", a.cut, shift=True)
            else:
                end, seg = a.edge, seg[:len(seg) - a.cut]
                p = _cut(p, "after", len(seg))
        return start, end, seg, p

    def _blank_edges(self, start: int, end: int, pairs: tuple[tuple[int, int], ...],
                     seg: list[str], hunk: Hunk) -> tuple[int, int]:
        """The region's ends where the segment meets a marker with blank lines: the blank
        run between its last (first) matched line and the gap keeps as many blank lines
        as the longer of the snippet's and the original's, not their sum nor fewer (a
        snippet's blank line before a marker is layout; which copy of a blank line the
        alignment matched says nothing)."""
        nonblank = [i for i, s in enumerate(seg) if s.strip()]
        if not nonblank or not pairs:
            return start, end
        matched = dict(pairs)
        last, first = nonblank[-1], nonblank[0]
        if hunk.marker_after and last in matched and last < len(seg) - 1:
            j, k = matched[last] + 1, len(seg) - 1 - last
            m, most = 0, max(k, end - j)  # (no further than needed: a run can be long)
            while m < most and j + m < self.eof and not self.orig[j + m].strip():
                m += 1
            if j <= end <= j + m:
                end = j + min(k, m)
        if hunk.marker_before and first in matched and first > 0:
            j = matched[first]
            m, most = 0, max(first, j - start)
            while m < most and j - m - 1 >= 0 and not self.orig[j - m - 1].strip():
                m += 1
            if j - m <= start <= j:
                start = j - min(first, m)
        elif hunk.marker_before and first > 0 and first not in matched:
            # its first non-blank line is new: the blank lines above it still meet the
            # original's blank run there, wherever the alignment matched one of them
            start = self._blank_run_edge(start, end, first, "before")
        if hunk.marker_after and last < len(seg) - 1 and last not in matched:
            end = self._blank_run_edge(start, end, len(seg) - 1 - last, "after")
        return start, end

    def _blank_run_edge(self, start: int, end: int, k: int, side: str) -> int:
        """The region's edge on ``side`` where the segment's ``k`` blank lines there meet
        the original's blank run around that edge (kept outside the region, replaced
        inside it up to its first non-blank line): as many blank lines as the longer of
        the two runs, not their sum."""
        orig = self.orig
        if side == "before":
            out = 0  # kept above the region
            while start - out - 1 >= 0 and not orig[start - out - 1].strip():
                out += 1
            inside = 0
            while start + inside < end and not orig[start + inside].strip():
                inside += 1
            extra = out + k - max(k, out + inside)
            return start - max(0, min(extra, out))
        out = 0  # kept below the region
        while end + out < self.eof and not orig[end + out].strip():
            out += 1
        inside = 0
        while end - inside - 1 >= start and not orig[end - inside - 1].strip():
            inside += 1
        extra = out + k - max(k, out + inside)
        return end + max(0, min(extra, out))

    def _moved(self, start: int, end: int) -> bool:
        """Are the non-blank lines of orig[start:end] all in the snippet (moved, so
        dropping them here loses nothing)?"""
        lines = [s.strip() for s in self.orig[start:end] if s.strip()]
        return bool(lines) and all(s in self.snippet_lines for s in lines)

    def _around(self, start: int, end: int) -> int:
        """Deepest indentation of the nearest non-blank lines outside orig[start:end]."""
        before = next((s for s in reversed(self.orig[max(0, start - 50):start]) if s.strip()),
                      "")
        after = next((s for s in self.orig[end:end + 50] if s.strip()), "")
        return max(len(_indent(before)), len(_indent(after)))

    def _place(self, seg: list[str], hunk: Hunk) -> tuple[Placement | None, bool, bool]:
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
            p = place(seg, self.orig, self.pos, hunk.marker_before, hunk.marker_after,
                      loose, self._positions(key), context, self._index(key), self.budget,
                      free)
            count = nonblank_matches(p, seg) if p else 0
            if p is not None and (best is None or count > best_count):
                best, best_loose, best_count = p, loose, count
            if best_count:
                break
        self._placed[(hunk, self.pos, context)] = best, best_loose
        return best, best_loose

    def _unplaced(self, seg: list[str], hunk: Hunk) -> None:
        """No line of the segment is in the original: whole new file, or inserted."""
        if not hunk.marker_before and not hunk.marker_after:
            self.replacements.append(_Replacement(0, len(self.orig), seg))
            self.unsure(1, f"{hunk.label}: no line of it matches the original; treated "
                           f"as the whole new file", local=False)
            return
        if not hunk.marker_after:  # it runs to the end: append it there
            where, line = self.eof, self.eof
        elif not hunk.marker_before:  # it starts the file: insert it at the top
            where, line = self.pos, self.pos + 1
        else:
            if (hunk, self.pos) not in self._near:
                self._near[hunk, self.pos] = _closest(
                    seg, self._positions(key_loose), self._index(key_loose), self.budget,
                    self.pos)
            line = self._near[hunk, self.pos]
            where = line - 1
            n = reach(seg, self.orig[where:], self.snippet_lines)
            if n and not self._doubt(hunk, "beside unplaced", where, (
                    f"no line of it matches the original, but its lines nearly equal "
                    f"original lines {line}-{where + n} ({self.orig[where].strip()[:60]!r}), "
                    f"so they replace them; if they are added beside them, show those lines "
                    f"too, unchanged")):
                self.replacements.append(_Replacement(where, where + n, seg))
                self.pos = where + n
                return
        self.unsure(line, f"{hunk.label}: no line of it matches the original; inserted "
                          f"at line {where + 1}, closest match at line {line}; nothing removed",
                    local=False)
        self.replacements.append(_Replacement(where, where, seg))
        self.pos = where

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

