"""Checks on a lazy merge's removals and insertions that flag a likely wrong result
(precision first), judged in ``apply.py`` where the placements are known.

The merge (:mod:`fastapply.merge`) reports the places where it had to guess; these checks
add an :class:`Uncertainty` where a segment's placement has another reading as good, so
that the merge is unsure instead of returning a wrong file (the checks on the finished file
as a whole are :mod:`fastapply.merge.review`). They flag snippets with more than one
reading, so they also refuse some right merges (figures in docs/benchmarks.md). Findings
are (1-based line, message) pairs; ``apply.py`` turns them into ``Uncertainty`` entries.

* **unshown removals between generic anchors** (:func:`unanchored_removals`): a segment
  that only lines found at several places anchor, and that removes lines the snippet
  never shows, fits beside any lookalike of its context; new code next to similar code
  reads as a rewrite of it.
* **runs another reading explains as well** (:func:`strict_runs`): a removal beside a
  context line that recurs among the removed lines, any removal between generic lines,
  and an insertion beside a generic line whose lines nearly repeat the old lines around
  it (an edit read as an insertion). They refuse about four right merges per wrong one
  caught, by design ("when unsure, refuse"; figures in docs/benchmarks.md).

Checks tried and left out because on the repository-split validation set they flagged as
many exact merges as wrong ones (figures in docs/benchmarks.md): "every removed original
line lies between two lines of one segment" (difflib's alignment of repeated lines makes
it misfire), "a removal whose edge line repeats the segment's line beside it" (an
ambiguous ``}``), and tree-sitter's "the result no longer parses where the original did".
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fastapply.merge.beside import alike
from fastapply.merge.text import _indent

__all__ = ["Removal", "removals", "strict_runs", "unanchored_removals"]

#: Unshown lines a segment anchored by generic lines may remove before it is flagged, and
#: the share of their words (3+ letters) kept by the new lines in their place from which
#: a run is an edit in place. On the tune corpus (right refused / wrong caught): 3 and
#: 0.7: 20 / 23; 4 and 0.7: 15 / 17; 3 and 0.9: 29 / 28; 4 counting every run: 25 / 23;
#: 3 counting every run: 45 / 30.
GENERIC_REMOVED = 3
EDITED = 0.7
#: strict_runs: an insertion is read as an edit of nearby lines when REPEATED of its lines
#: are SIMILAR (difflib ratio) to unmatched original lines within NEAR lines of it.
REPEATED = 0.8
SIMILAR = 0.8
NEAR = 5
_WORD = re.compile(r"\w")
_LONG = re.compile(r"\w{3,}")
@dataclass(frozen=True)
class Removal:
    """A run between two matched lines of a placed lazy segment: original lines it
    removes (the snippet not showing some of them), or only new lines it inserts."""

    #: The segment, for messages.
    label: str
    #: 1-based original line of the first removed line (or of the insertion point).
    line: int
    #: Non-blank removed lines whose text the snippet nowhere shows (0: an insertion).
    unshown: int
    #: Non-blank segment lines written in their place.
    inserted: int
    #: How often the nearest non-blank matched line before / after the run occurs in the
    #: original (0: none, the run is at the segment's edge).
    before: int
    after: int
    #: Matched lines of the segment found once in the original.
    unique: int
    #: Words (3+ letters) of the removed lines that the segment's new lines share.
    shared: float
    #: Non-blank removed lines that the run's own new lines do not repeat.
    local: int = 0
    #: The nearest matched line on a side is generic (found several times in the original,
    #: or only punctuation); a side with no matched line counts as generic.
    generic_before: bool = False
    generic_after: bool = False
    #: A nearest matched line's text recurs among the removed lines (a lookalike anchor).
    lookalike: bool = False
    #: Share of an insertion's lines that nearly repeat (SIMILAR) original lines that no
    #: segment line matched, within NEAR lines of the insertion point.
    repeats: float = 0.0
    #: A generic matched line beside the run nearly equals (:func:`.beside.alike`) the
    #: removed line next to it, and the run holds a line less indented than its matched
    #: neighbours: that line edited in place, read as the run's end of one block and
    #: start of the next removed (the same setting of the next block matched instead).
    edited_edge: bool = False
    #: It removes a line less indented than the original line kept right after the run,
    #: and every removed line after that one is deeper: a block's header goes while the
    #: rest of its body stays (re-parented under the block before it, or left unopened).
    orphans: bool = False


def removals(orig: Sequence[str], start: int, end: int, pairs: Sequence[tuple[int, int]],
             seg: Sequence[str], shown: frozenset[str], table: dict[str, list[int]],
             label: str) -> list[Removal]:
    """The runs of ``orig[start:end]`` that the placement (matched ``pairs`` of segment
    and original lines) removes, holding a non-blank line the snippet (``shown``: its
    stripped lines) never shows, or holding none while the segment inserts lines there;
    ``table``: original lines by stripped text."""
    def nearest(i: int, step: int) -> str | None:  # nearest non-blank matched line
        while 0 <= i < len(pairs):
            key = seg[pairs[i][0]].strip()
            if key:
                return key
            i += step
        return None

    def generic(key: str | None) -> bool:
        return key is None or len(table.get(key, ())) != 1 or not _WORD.search(key)

    unique = sum(1 for i, _ in pairs if len(table.get(seg[i].strip(), ())) == 1)
    matched = {j for _, j in pairs}
    by_orig = {j: i for i, j in pairs}
    bounds = [(-1, start - 1), *pairs, (len(seg), end)]
    found = []
    for k in range(len(bounds) - 1):
        (i1, j1), (i2, j2) = bounds[k], bounds[k + 1]
        removed = [t for t in (s.strip() for s in orig[j1 + 1:j2]) if t]
        gone = [t for t in removed if t not in shown]
        new = [s.strip() for s in seg[i1 + 1:i2] if s.strip()]
        b, a = nearest(k - 1, -1), nearest(k, 1)
        if not gone and (removed or not new):
            continue
        before, after = (len(table.get(t, ())) or 1 if t is not None else 0 for t in (b, a))
        repeats = 0.0 if removed or not ((b and generic(b)) or (a and generic(a))) else \
            _repeats(new, orig, j1 + 1, j2, matched)
        written = set(new)
        near = [s for s in orig[j1 + 1:j2] if s.strip() and s.strip() not in written]
        sides = [seg[i] for i in (i1, i2) if 0 <= i < len(seg) and seg[i].strip()]
        # (the run also leaves the block its matched lines stand in: it joins two blocks)
        edited_edge = bool(gone) and bool(near) and bool(sides) and \
            min(map(_depth, near)) < min(map(_depth, sides)) and (
                (0 <= i2 < len(seg) and generic(a) and alike(seg[i2], near[0])) or
                (0 <= i1 < len(seg) and generic(b) and alike(seg[i1], near[-1])))
        orphans = bool(gone) and _orphans(orig[j1 + 1:j2], _kept_after(orig, j2, end, seg,
                                                                       by_orig),
                                          seg[i1 + 1:i2])
        words = {w for s in gone for w in _LONG.findall(s)}
        kept = {w for s in new for w in _LONG.findall(s)}
        found.append(Removal(label, j1 + 2, len(gone), len(new), before, after, unique,
                             len(words & kept) / max(1, len(words)),
                             local=len([t for t in removed if t not in written]),
                             generic_before=generic(b), generic_after=generic(a),
                             lookalike=bool({b, a} & set(removed)), repeats=repeats,
                             edited_edge=edited_edge, orphans=orphans))
    return found


def _depth(line: str) -> int:
    return len(_indent(line))


def _kept_after(orig: Sequence[str], at: int, end: int, seg: Sequence[str],
                by_orig: dict[int, int]) -> str:
    """The original line kept right after a run that ends at ``at``: the first non-blank
    line from there, matched as it stands or past the region's ``end``; "" if there is
    none such (or only a blank stretch longer than NEAR)."""
    q = next((q for q in range(at, min(len(orig), at + NEAR)) if orig[q].strip()), -1)
    if q < 0 or (q < end and not (q in by_orig and seg[by_orig[q]] == orig[q])):
        return ""
    return orig[q]


def _orphans(removed: Sequence[str], kept: str, new: Sequence[str]) -> bool:
    """Does removing ``removed`` (with ``new`` written in their place) take away the
    header of a block whose body goes on at ``kept``, the line right after them: the
    first removed line less indented than ``kept`` and every other one deeper than it?
    (A removed run that also closes a block, ``}`` then ``impl B {``, joins two blocks.)

    >>> _orphans(["if PY2:", "    x = 1", ""], "    class A:", [])
    True
    >>> _orphans(["if PY2:", "    x = 1"], "    class A:", ["if PY3:"])
    False
    """
    depth = _depth(kept)
    if not kept.strip() or not depth:
        return False
    lines = [s for s in removed if s.strip()]
    if not lines or any(_depth(s) < depth for s in new if s.strip()):
        return False
    head = _depth(lines[0])
    return head < depth and all(_depth(s) > head for s in lines[1:])


def _repeats(new: Sequence[str], orig: Sequence[str], lo: int, hi: int,
             matched: set[int]) -> float:
    """Share of the (first 40) ``new`` lines that nearly repeat an unmatched original line
    within NEAR lines of ``orig[lo:hi]`` (difflib ratio >= SIMILAR; lines without a word
    character left out on both sides)."""
    lines = [s for s in new if _WORD.search(s)][:40]
    near = [t for t in (orig[j].strip() for j in range(max(0, lo - NEAR),
                                                          min(len(orig), hi + NEAR))
                        if j not in matched) if _WORD.search(t)]
    if not lines or not near:
        return 0.0
    hits = 0
    for s in lines:
        for t in near:
            m = difflib.SequenceMatcher(None, s, t, autojunk=False)
            if m.real_quick_ratio() >= SIMILAR and m.quick_ratio() >= SIMILAR and \
                    m.ratio() >= SIMILAR:
                hits += 1
                break
    return hits / len(lines)


def unanchored_removals(found: Sequence[Removal]) -> list[tuple[int, str]]:
    """Findings for segments that remove GENERIC_REMOVED or more lines the snippet never
    shows, in runs whose nearest matched lines on both sides are generic (found several
    times in the original), while at most one of their matched lines is unique. A run
    whose new lines keep EDITED of the removed lines' words is an edit in place (``null``
    to ``null!`` on every line of a file) and does not count.

    Such a segment fits beside any lookalike of its context lines (``}``, ``/// </summary>``,
    a repeated statement): new code written next to similar code gets read as a rewrite
    of that code, and the code in between is lost. The snippet does not say which, so
    the merge is refused rather than guessed.
    """
    removed: dict[str, int] = defaultdict(int)
    first: dict[str, Removal] = {}
    for r in found:
        if r.unshown and r.unique <= 1 and r.before != 1 and r.after != 1 and \
                r.before + r.after and r.shared < EDITED:
            removed[r.label] += r.unshown
            first.setdefault(r.label, r)
    return [(first[label].line, f"{label}: placed where it removes {n} lines the snippet "
                                f"never shows, between lines found at several places; show "
                                f"a unique line of unchanged context next to the change")
            for label, n in removed.items() if n >= GENERIC_REMOVED]


def strict_runs(found: Sequence[Removal]) -> list[tuple[int, str]]:
    """Findings (at most one per segment) for runs that another reading of the snippet
    explains as well (refused: "when unsure, refuse"; figures in docs/benchmarks.md):

    * **lookalike anchor**: the run removes unshown lines (2 or more, or any when it
      inserts nothing) and a matched line beside it recurs among them: the snippet's
      context may be that nearer copy, and then nothing (or less) is removed;
    * **removal between generic lines**: it removes lines its own new lines do not
      repeat, and the matched lines on both sides are generic (``}``, ``end``, a blank or
      repeated line): a lookalike of that context elsewhere fits as well;
    * **insertion beside generic lines that repeats its neighbours**: it removes nothing,
      a side is generic, and REPEATED of its lines nearly repeat unshown original lines
      close by: most likely an edit of those lines, read as an insertion next to them.

    >>> r = Removal("lazy segment 1", 5, 0, 2, 2, 1, 1, 0.0, repeats=1.0,
    ...             generic_before=True)
    >>> strict_runs([r])[0][1][:60]
    'lazy segment 1: it inserts lines that nearly repeat original'
    """
    found_by: dict[str, tuple[int, str]] = {}
    for r in found:
        if r.label in found_by:
            continue
        sides = (r.before or r.after) and r.generic_before and r.generic_after
        if r.unshown and r.lookalike and (r.unshown >= 2 or not r.inserted):
            why = (f"it removes {r.unshown} lines the snippet never shows, and a line of "
                   f"context beside them recurs among them, so that nearer copy may be the "
                   f"one meant")
        elif r.unshown and r.local and sides and r.shared < EDITED:
            why = (f"it removes {r.local} lines between lines found at several places (or "
                   f"only punctuation), which fit beside their lookalikes as well")
        elif r.unshown >= GENERIC_REMOVED and r.edited_edge:
            why = (f"it removes {r.unshown} lines the snippet never shows, and the line of "
                   f"context beside them nearly equals the nearest of them, so it may be "
                   f"that line edited in place")
        elif r.unshown and r.orphans:
            why = (f"it removes {r.unshown} lines the snippet never shows, among them a "
                   f"block's first line, while the line after them, more indented, stays: "
                   f"that block's body would lose its header")
        elif not r.unshown and r.repeats >= REPEATED:
            why = ("it inserts lines that nearly repeat original lines close by, next to a "
                   "line found at several places, so it may be an edit of those lines")
        else:
            continue
        found_by[r.label] = (r.line, f"{r.label}: {why}; show a unique line of unchanged "
                                     f"context on each side of the change")
    return list(found_by.values())

