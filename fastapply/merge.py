"""Deterministic merge: original + parsed edit -> candidate file, plus where it was unsure.

Every hunk becomes a replacement of a run of original lines, in original coordinates;
the replacements are then laid into the file in order. Lines are compared without
trailing whitespace and, as a fallback, without indentation too (the snippet is then
re-indented by the offset found at its anchor). A context line that matches keeps the
original's exact text (its trailing spaces, its line ending). An anchor found twice is
resolved by order (after the previous hunk, nearest first) and reported; one found
nowhere leaves the original untouched there and is reported, with the closest match.
Code is never dropped silently: anything removed lies between a hunk's own anchors.

>>> merge_text = lambda o, s: apply_snippet(o, s).text
>>> merge_text("a\\nb\\nc\\nd\\n", "a\\n# ... existing code ...\\nc\\nc2\\nd\\n")
'a\\nb\\nc\\nc2\\nd\\n'
>>> r = apply_snippet("x\\ny\\nx\\n", "<<<<<<< SEARCH\\nx\\n=======\\nz\\n>>>>>>> REPLACE\\n")
>>> r.text
'z\\ny\\nx\\n'
>>> print(r.uncertain[0].message)
SEARCH block 1 (snippet line 1): its text matches at lines 1 and 3; used line 1
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fastapply._merge_lazy import (
    Placement,
    WorkBudget,
    key_exact,
    key_loose,
    nonblank_matches,
    place,
    positions,
    removed_definitions,
    similarity,
    tokens,
    word_index,
)
from fastapply.edits import (
    BLOCK_FORM,
    BLOCK_MARKER,
    SEPARATOR,
    EditError,
    EditPlan,
    Hunk,
    parse_edit,
)
from fastapply.precision import Removal, removals, review, strict_runs, unanchored_removals

__all__ = ["EditError", "MergeResult", "Uncertainty", "WorkBudget", "apply_snippet", "merge"]

#: Tied anchors retried the other way when the chosen reading is in other trouble (each
#: retry re-runs the reading).
TIE_RETRIES = 8
#: SEARCH blocks (and diff hunks) found by scanning the file; after them an index of its
#: lines is built (it costs about two scans and makes every later search cheap).
SCANS = 4


@dataclass(frozen=True)
class Uncertainty:
    """A place where the merge had to guess."""

    #: 1-based line of the original where it happened (0 when not tied to one).
    line: int
    #: What and where, for a person.
    message: str


@dataclass(frozen=True)
class MergeResult:
    """The candidate file and the places where the merge was unsure."""

    text: str
    uncertain: tuple[Uncertainty, ...] = ()

    def check(self) -> str:
        """The text, or EditError listing every unsure place."""
        if self.uncertain:
            raise EditError("; ".join(u.message for u in self.uncertain))
        return self.text


@dataclass
class _Replacement:
    start: int  # first original line replaced (0-based)
    end: int  # one past the last
    lines: list[str]  # new lines (without line endings)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _find_runs(needle: Sequence[str], hay: Sequence[str], key: Callable[[str], str],
               table: dict[str, list[int]] | None, budget: WorkBudget) -> list[int]:
    """Start positions where ``needle`` occurs in ``hay`` (compared through key; ``table``
    holds hay's positions by key; without it hay is scanned, cheaper for one search)."""
    if not needle:
        return []
    keys = [key(s) for s in needle]
    n = len(keys)
    if table is None:
        budget.spend(len(hay))
        starts = [j for j in range(len(hay) - n + 1) if key(hay[j]) == keys[0]]
    else:
        starts = [j for j in table.get(keys[0], ()) if j + n <= len(hay)]
    budget.spend(len(starts))
    return [j for j in starts if all(key(hay[j + t]) == keys[t] for t in range(1, n))]


def _closest(needle: Sequence[str], table: dict[str, list[int]],
             index: dict[str, list[str]], budget: WorkBudget, lo: int = 0) -> int:
    """1-based line (>= lo + 1) where ``needle`` comes closest: most aligned lines equal
    (stripped; ``table`` holds the original's positions by stripped line), the first
    such; if none is equal, the line sharing most words with its first line (``index``:
    the original's lines by word)."""
    keys = [key_loose(s) for s in needle if key_loose(s)] or [""]
    votes: dict[int, int] = {}
    for t, k in enumerate(keys):
        js = table.get(k, [])
        budget.spend(len(js))
        for j in js:
            if j - t >= lo:
                votes[j - t] = votes.get(j - t, 0) + 1
    if votes:
        return min(votes, key=lambda j: (-votes[j], j)) + 1
    toks = tokens(keys[0])
    near = {okey for w in toks for okey in index.get(w, ())[:1000]}
    budget.spend(len(near))
    firsts = [(js[at], okey) for okey in near for js in [table[okey]]
              for at in [bisect_left(js, lo)] if at < len(js)]
    if not firsts:
        return lo + 1
    return min(firsts, key=lambda f: (-similarity(toks, tokens(f[1])), f[0]))[0] + 1


def _reindent(lines: Sequence[str], snippet_indent: str, orig_indent: str) -> list[str]:
    """Shift lines by the indentation offset found at the anchor."""
    out = []
    for s in lines:
        if s.startswith(snippet_indent) and s.strip():
            out.append(orig_indent + s[len(snippet_indent):])
        else:
            out.append(s)
    return out


def _context_from_original(old: Sequence[str], new: Sequence[str], region: Sequence[str],
                           shift: tuple[str, str] | None = None) -> list[str]:
    """``new`` where its context lines (equal in ``old`` and ``new``) take the original's text.

    Changed lines stay as written (re-indented by ``shift`` = (snippet indent, file
    indent) when the snippet was matched loosely), so whitespace-only edits survive;
    context lines keep what the file had (a snippet often loses trailing spaces).
    """
    out = _reindent(new, *shift) if shift else list(new)
    sm = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        out[b:b + size] = region[a:a + size]
    return out


def _trim_blank_edges(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """``old`` without its leading and trailing blank lines; ``new`` without as many of
    its own as ``old`` had there (they were context).

    >>> _trim_blank_edges(["", "a", ""], ["", "b"])
    (['a'], ['b'])
    """
    head = next(t for t, s in enumerate(old) if s.strip())
    tail = next(t for t, s in enumerate(reversed(old)) if s.strip())
    new_head = min(head, next((t for t, s in enumerate(new) if s.strip()), len(new)))
    new = new[new_head:]
    new_tail = min(tail, next((t for t, s in enumerate(reversed(new)) if s.strip()), len(new)))
    return old[head:len(old) - tail], new[:len(new) - new_tail]


class _Merger:
    def __init__(self, orig: list[str], context: int | None = None, eof: int | None = None,
                 shared: _Merger | None = None, flips: frozenset[int] = frozenset()) -> None:
        self.orig = orig
        self.flips = flips  # lazy segments (numbers) that take their rival placement
        self.ties: list[int] = []  # lazy segments (numbers) that have a rival placement
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
        self._searches = 0  # SEARCH blocks and diff hunks looked for
        # the work all readings of one merge may still do
        self.budget: WorkBudget = shared.budget if shared else WorkBudget()
        # the original's distinct lines by word, per key function (shared likewise)
        self._words: dict[Callable[[str], str], dict[str, list[str]]] = \
            shared._words if shared else {}
        # removals of original lines the snippet never shows, per placed segment
        # (precision.Removal; judged for the chosen reading only, see merge)
        self.removals: list[Removal] = []
        # lazy segments between markers found unchanged in the original (judged for the
        # chosen reading only, like the removals)
        self.idle: list[Uncertainty] = []

    def trouble(self) -> tuple[int, int, int]:
        """How badly this reading fits (smaller is better): context runs outside the
        contract, unsure places, then fewer unique anchors."""
        return self.violations, len(self.uncertain) + len(self.misfits), -self.anchors

    def unsure(self, line: int, message: str) -> None:
        self.uncertain.append(Uncertainty(line, message))

    def locate(self, hunk: Hunk, block: Sequence[str], near: int | None) -> tuple[int, bool]:
        """Start of ``block`` in the original (-1 if absent) and whether it was loose."""
        for key, loose in ((key_exact, False), (key_loose, True)):
            # the first searches scan the file; later ones use (and build) its index
            table = self._positions(key) if self._searches >= SCANS else None
            hits = _find_runs(block, self.orig, key, table, self.budget)
            self._searches += 1
            if not hits:
                continue
            after = [j for j in hits if j >= self.pos] or hits
            if near is not None:
                pick = min(after, key=lambda j: (abs(j - near), j))
            else:
                pick = after[0]
            confirmed = near is not None and abs(pick - near) <= 3  # the @@ line number agrees
            if len(hits) > 1 and not confirmed:
                where = " and ".join(str(j + 1) for j in hits[:2])
                more = f" (and {len(hits) - 2} more)" if len(hits) > 2 else ""
                self.unsure(pick + 1, f"{hunk.label}: its text matches at lines "
                                      f"{where}{more}; used line {pick + 1}")
            return pick, loose
        return -1, False

    def replace_block(self, hunk: Hunk) -> None:
        self.budget.doing = hunk.label
        old, new = list(hunk.old), list(hunk.new)
        if not any(s.strip() for s in old):
            if not self.orig or not any(s.strip() for s in self.orig):
                self.replacements.append(_Replacement(0, len(self.orig), new))
            else:
                self._insert(hunk, new)
            return
        near = hunk.old_start - 1 if hunk.old_start else None
        start, loose = self.locate(hunk, old, near)
        if start < 0 and hunk.kind == "search_replace" and not (old[0].strip() and
                                                                old[-1].strip()):
            # Blank lines at the edges of the SEARCH text that the file lacks there (as
            # Aider and Roo-Code do): look again without them, and keep the replacement's
            # own edge blank lines only where they repeated the SEARCH's.
            old, new = _trim_blank_edges(old, new)
            start, loose = self.locate(hunk, old, near)
        if start < 0:
            what = "SEARCH block" if hunk.kind == "search_replace" else "diff hunk"
            closest = _closest(old, self._positions(key_loose), self._index(key_loose),
                               self.budget)
            self.unsure(closest, f"{what} {hunk.number} (snippet line {hunk.snippet_line}) "
                                 f"not found in the original; closest match at line {closest}")
            return
        region = self.orig[start:start + len(old)]
        shift = None
        if loose:
            anchor = next(t for t, s in enumerate(old) if s.strip())
            shift = (_indent(old[anchor]), _indent(region[anchor]))
            # The shift re-indents the added lines: is it the same for every context line
            # (kept in old and new)? Removed lines' indentation does not matter.
            sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
            context = [t for a, _, size in sm.get_matching_blocks() for t in range(a, a + size)]
            shifted = _reindent(old, *shift)
            uneven = next((t for t in context if key_exact(shifted[t]) != key_exact(region[t])),
                          None) if len(context) < len(new) else None
            if uneven is not None:
                self.unsure(start + uneven + 1, (
                    f"{hunk.label}: found only when ignoring indentation, and its line "
                    f"{uneven + 1} is indented unlike original line {start + uneven + 1} "
                    f"by another amount than its first line; the replacement's indentation "
                    f"is a guess"))
        self.replacements.append(_Replacement(start, start + len(old),
                                              _context_from_original(old, new, region, shift)))
        self.pos = start + len(old)

    def _insert(self, hunk: Hunk, new: list[str]) -> None:
        """A hunk that finds nothing (an empty SEARCH, a diff hunk without ``-`` or context
        lines) inserts its lines: a diff's ``@@ -N,0`` after line N, a SEARCH block's
        ``:start_line:N`` before line N; with no line given, an empty SEARCH appends (as
        in Aider) and a diff hunk is appended but flagged (it could go anywhere)."""
        if hunk.old_start is None:
            where = self.eof
            if hunk.kind == "udiff":
                self.unsure(where + 1, f"{hunk.label}: it only adds lines and its @@ header "
                                       f"gives no line number, so they were appended at the "
                                       f"end; give the line (@@ -N,0 +M,K @@) or context")
        else:
            where = hunk.old_start - (hunk.kind != "udiff")
            if where > self.eof:
                self.unsure(self.eof + 1, f"{hunk.label}: line {hunk.old_start} is past the "
                                          f"end of the file ({self.eof} lines); appended")
            where = min(max(where, 0), self.eof)
        self.replacements.append(_Replacement(where, where, new))
        self.pos = max(self.pos, where)

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
        if not hunk.marker_before and not hunk.marker_after and not self._whole_file(seg):
            # No marker anywhere and not the whole file: an anchored fragment.
            hunk = replace(hunk, marker_before=True, marker_after=True)
        p, loose, misfit = self._place(seg, hunk)
        if p is None:
            self._unplaced(seg, hunk)
            return
        if p.alternative is not None:
            self.ties.append(hunk.number)
            if hunk.number in self.flips:
                p = p.alternative
        (start, first), (last, end) = p.start, p.end
        i0, i1 = p.pairs[0][0], p.pairs[-1][0]
        if start < first and (i0 == 0 or first - start > max(3, 2 * i0)) and \
                not self._moved(start, first):
            if i0 == 0:  # its first line is context found mid-file: keep what comes before
                self.unsure(first + 1, f"{hunk.label}: no marker comes before it but its "
                                       f"first line matches original line {first + 1}, so "
                                       f"lines {start + 1}-{first} were kept; add a marker")
                start = first
            else:
                self.unsure(start + 1, f"{hunk.label}: no marker comes before it, so original "
                                       f"lines {start + 1}-{first} were replaced by its first "
                                       f"{i0} lines; add a marker to keep them")
        if last < min(end, self.eof) and \
                (i1 == len(seg) - 1 or end - last > max(3, 2 * (len(seg) - 1 - i1))) and \
                not self._moved(last, end):
            if i1 == len(seg) - 1:
                self.unsure(last + 1, f"{hunk.label}: no marker comes after it but its last "
                                      f"line matches original line {last}, so lines "
                                      f"{last + 1}-{end} were kept; add a marker")
                end = last
            else:
                self.unsure(last + 1, f"{hunk.label}: no marker comes after it, so original "
                                      f"lines {last + 1}-{end} were replaced by its last "
                                      f"{len(seg) - 1 - i1} lines; add a marker to keep them")
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
        self.replacements.append(_Replacement(start, end, seg))
        if hunk.marker_before and hunk.marker_after and seg == self.orig[start:end]:
            # Every segment of a lazy snippet shows a change; one between markers found
            # as it stands was placed where the change it shows (most often a deletion
            # shown by two neighbours, read as kept: see DROP_DEF) does not happen.
            self.idle.append(Uncertainty(start + 1, (
                f"{hunk.label}: each of its lines was found as it stands at lines "
                f"{start + 1}-{end}, so the change it shows (a deletion?) was not read; "
                f"show a unique line of unchanged context on each side of the change")))
        self.pos = end
        self.drops += p.drops
        key = key_loose if loose else key_exact
        table = self._positions(key)
        unique = sum(1 for i, _ in p.pairs if len(table.get(key(seg[i]), ())) == 1)
        self.anchors += unique
        self.removals.extend(removals(self.orig, start, end, p.pairs, seg, self.snippet_lines,
                                      self._positions(key_loose), hunk.label))
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
        done = self._placed.get((hunk, self.pos, context))
        if done is not None:
            return done
        best: Placement | None = None
        best_loose, best_count = False, 0
        for key, loose in ((key_exact, False), (key_loose, True)):
            p = place(seg, self.orig, self.pos, hunk.marker_before, hunk.marker_after,
                      loose, self._positions(key), context, self._index(key), self.budget)
            count = nonblank_matches(p, seg) if p else 0
            if p is not None and (best is None or count > best_count):
                best, best_loose, best_count = p, loose, count
            if best_count:
                break
        self._placed[(hunk, self.pos, context)] = best, best_loose
        return best, best_loose

    def _whole_file(self, seg: list[str]) -> bool:
        """Does a snippet without markers look like the whole new file?

        Yes when its first and last non-blank lines are the file's (loosely), or when it
        is at least as long as the file; otherwise it is a fragment anchored where its
        lines match.
        """
        ends = [s.strip() for s in seg if s.strip()]
        file_ends = [s.strip() for s in self.orig if s.strip()]
        if len(seg) >= self.eof or not ends or not file_ends:
            return True
        return ends[0] == file_ends[0] and ends[-1] == file_ends[-1]

    def _unplaced(self, seg: list[str], hunk: Hunk) -> None:
        """No line of the segment is in the original: whole new file, or inserted."""
        if not hunk.marker_before and not hunk.marker_after:
            self.replacements.append(_Replacement(0, len(self.orig), seg))
            self.unsure(1, f"{hunk.label}: no line of it matches the original; treated "
                           f"as the whole new file")
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
        self.unsure(line, f"{hunk.label}: no line of it matches the original; inserted "
                          f"at line {where + 1}, closest match at line {line}; nothing removed")
        self.replacements.append(_Replacement(where, where, seg))
        self.pos = where

    def _positions(self, key: Callable[[str], str]) -> dict[str, list[int]]:
        """Original line positions by key (built once per key function)."""
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = positions(self.orig, key)
        return table

    def _index(self, key: Callable[[str], str]) -> dict[str, list[str]]:
        """The original's distinct lines by word (built once per key function)."""
        index = self._words.get(key)
        if index is None:
            index = self._words[key] = word_index(self._positions(key))
        return index

    def text_lines(self) -> list[str]:
        out: list[str] = []
        cursor = 0
        for r in sorted(self.replacements, key=lambda r: (r.start, r.end)):
            if r.start < cursor:
                self.unsure(r.start + 1, f"two edits overlap at original line {r.start + 1}; "
                                         f"the second was applied after the first")
                r = _Replacement(cursor, max(cursor, r.end), r.lines)
            out.extend(self.orig[cursor:r.start])
            out.extend(r.lines)
            cursor = r.end
        out.extend(self.orig[cursor:])
        return out


def _reading(plan: EditPlan, orig: list[str], context: int | None, eof: int,
             shared: _Merger | None, flips: frozenset[int],
             budget: WorkBudget | None = None) -> _Merger:
    """Merge ``plan`` with ``context`` lines of context, taking the rival placement of
    the lazy segments numbered in ``flips``."""
    m = _Merger(orig, context, eof, shared, flips)
    if shared is None:
        m.budget = budget or WorkBudget()
        m.snippet_lines = frozenset(s.strip() for hunk in plan.hunks for s in hunk.new
                                    if s.strip())
        m.mixed = plan.format == "mixed"
    for hunk in plan.hunks:
        if hunk.kind == "lazy":
            m.lazy_segment(hunk)
        else:
            m.replace_block(hunk)
    return m


def _diff_lines_in_lazy(plan: EditPlan, orig: list[str]) -> list[Uncertainty]:
    """Lazy lines that are removed lines of a diff without its header: ``-`` followed by
    an original line (and not an original line itself). Merged as code, the ``-`` and
    ``+`` lines would both be written into the file.

    >>> [u.line for u in _diff_lines_in_lazy(parse_edit("a\\n-b\\n+c\\n"), ["a", "b"])]
    [2]
    """
    lines: set[str] | None = None  # the original's lines (built if needed)
    for hunk in plan.hunks:
        for i, s in enumerate(hunk.new if hunk.kind == "lazy" else ()):
            if not s.startswith("-"):
                continue
            if lines is None:
                lines = {key_exact(o) for o in orig}
            if key_exact(s[1:]) in lines and key_exact(s) not in lines:
                line = next(j for j, o in enumerate(orig) if key_exact(o) == key_exact(s[1:])) + 1
                return [Uncertainty(line, (
                    f"{hunk.label}: its line {i + 1} is original line {line} with a '-' "
                    f"before it; the snippet looks like a unified diff without its @@ "
                    f"header: send the diff with a header (@@ ... @@) or the code without "
                    f"-/+ signs"))]
    return []


def _refuse_block_markers(plan: EditPlan, orig: list[str]) -> None:
    """Raise EditError if a line the merge would write looks like a SEARCH/REPLACE or
    merge-conflict marker the original lacks: a malformed block read as code.

    >>> _refuse_block_markers(parse_edit("<<-- SEARCH\\na\\n"), ["a"])
    Traceback (most recent call last):
    ...
    fastapply.edits.EditError: snippet line 1: '<<-- SEARCH' looks like a SEARCH/REPLACE marker, ...
    """
    present: set[str] | None = None  # the original's lines, stripped (built if needed)
    for hunk in plan.hunks:
        for k, s in enumerate(hunk.new):
            if k in hunk.escaped:
                continue
            separator = hunk.kind == "search_replace" and SEPARATOR.match(s)
            if not separator and not BLOCK_MARKER.match(s):
                continue
            if present is None:
                present = {key_loose(o) for o in orig}
            if key_loose(s) in present:
                continue
            if separator:
                raise EditError(f"{hunk.label}: its replacement line {k + 1} is a second "
                                f"'=======' line, which the original does not have; a doubled "
                                f"separator cannot be told from text, so nothing is written; "
                                f"{BLOCK_FORM}")
            if BLOCK_MARKER.match(s):
                where = f"snippet line {hunk.snippet_line + k}" if hunk.kind == "lazy" \
                    else hunk.label
                kind = "SEARCH/REPLACE" if "SEARCH" in s or "REPLACE" in s else \
                    "merge-conflict or SEARCH/REPLACE"
                raise EditError(f"{where}: {s.strip()!r} looks like a {kind} "
                                f"marker, but the block markers are malformed, so the block "
                                f"cannot be read and is not written into the file; "
                                f"{BLOCK_FORM}")


def merge(original: str, plan: EditPlan, budget: WorkBudget | None = None) -> MergeResult:
    """Merge ``plan`` into ``original``: best-effort candidate plus unsure places.

    The work it does is spent from ``budget`` (default: MERGE_WORK units); a merge that
    needs more is refused (EditError) rather than holding a worker for seconds.
    """
    newline = "\r\n" if original.count("\r\n") > original.count("\n") // 2 else "\n"
    body = original.replace("\r\n", "\n")
    final_newline = body.endswith("\n") or not body
    orig = body.split("\n")
    if body.endswith("\n"):
        orig.pop()
    if not body:
        orig = []
    _refuse_block_markers(plan, orig)
    # A lazy snippet usually shows the same number of context lines (1-3) beside each
    # change: try each and keep the reading its segments fit (fewest misfits; among
    # equals, the most context). One line of context is weak evidence, so a free
    # reading (0-3 lines, any mix) that anchors more unique lines beats it: LLM snippets
    # often show 2 lines before a change and 3 after. The free reading also beats any
    # reading that removes definitions or headings the snippet never names (``drops``:
    # a rewrite of a similar neighbour) if it removes fewer and anchors as many lines.
    # (Figures: docs/benchmarks.md.)
    lazy = any(hunk.kind == "lazy" for hunk in plan.hunks)
    # After a final newline a snippet may show the empty "line" that follows it as
    # context (``text.split("\n")`` has it): let lazy segments match it too.
    phantom = lazy and body.endswith("\n")
    if phantom:
        orig = [*orig, ""]
    best: _Merger | None = None
    for context in (3, 2, 1, None) if lazy else (None,):
        if best is not None and (best.violations == 0 if context is not None
                                 else best.context != 1 and not best.drops):
            if context is not None and best.drops:
                continue  # only the free reading may still win
            break  # no later reading can win
        m = _reading(plan, orig, context, len(orig) - phantom, best, frozenset(), budget)
        if best is None:
            best = m
        elif context is not None:
            if m.violations < best.violations:
                best = m
        elif (m.anchors >= best.anchors and m.drops < best.drops) or \
                (best.context == 1 and m.anchors > best.anchors):
            best = m
    assert best is not None
    m = best
    # An anchor that fits two places (a tie): if the reading is in trouble beyond the ties
    # themselves, does taking the other place let the later segments fit better?
    for tie in m.ties[:TIE_RETRIES]:
        if not m.violations and len(m.uncertain) + len(m.misfits) <= len(m.ties):
            break
        other = _reading(plan, orig, m.context, len(orig) - phantom, m, m.flips | {tie})
        if other.trouble() < m.trouble():
            m = other
    if m.fits:  # a segment unlike the others (a single odd one is just a style)
        m.uncertain.extend(m.misfits)
    m.uncertain.extend(_diff_lines_in_lazy(plan, orig))
    m.uncertain.extend(Uncertainty(*f) for f in unanchored_removals(m.removals))
    m.uncertain.extend(Uncertainty(*f) for f in strict_runs(m.removals))
    m.uncertain.extend(m.idle)
    lines = m.text_lines()
    if phantom and not any(r.end == len(orig) for r in m.replacements):
        lines.pop()  # the empty line after the final newline is still there: drop it
    text = "\n".join(lines) + ("\n" if lines and final_newline else "")
    if newline != "\n":
        text = text.replace("\n", newline)
    return MergeResult(text, tuple(m.uncertain))


def apply_snippet(original: str, snippet: str, budget: WorkBudget | None = None
                  ) -> MergeResult:
    """Parse ``snippet``, merge it into ``original`` (spending ``budget``, see merge) and
    review the result (:func:`fastapply.precision.review`: what contradicts the snippet is
    flagged)."""
    plan = parse_edit(snippet)
    result = merge(original, plan, budget)
    found = review(plan, original, result.text)
    if not found:
        return result
    return replace(result, uncertain=result.uncertain + tuple(Uncertainty(*f) for f in found))
