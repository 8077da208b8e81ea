"""Blank lines beside a marker are layout, not anchors.

Agents write a marker, a blank line, then the declaration they edit, and leave out the
doc comment, attributes or comment above it, which they did not change. Read as context,
that blank line matches the blank line *above* the doc comment, and the doc comment, lying
between two matched lines, is read as removed. Such a removal rests on blank lines alone,
which are everywhere: the merge keeps those lines, is unsure, and builds the reading that
removes them as its rival (the snippet may show a removal that way too). The same holds
after a segment: its last line, blank lines, then a marker.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from fastapply.merge.beside import alike


@dataclass(frozen=True)
class BlankAnchor:
    """A removal that only blank lines beside a marker anchor (see the module)."""

    #: "before" (blank lines between the marker and the segment's first line) or "after".
    side: str
    #: The region's start ("before") or end ("after") that keeps the lines.
    edge: int
    #: How many of the segment's blank lines beside the marker to drop so the kept lines
    #: are not pushed apart from the segment.
    cut: int
    #: The original lines, 0-based [lo, hi), the blank-only anchor would remove.
    lo: int
    hi: int


def blank_anchors(orig: list[str], seg: list[str], pairs: tuple[tuple[int, int], ...],
                  start: int, end: int, snippet_lines: frozenset[str],
                  marker_before: bool, marker_after: bool) -> list[BlankAnchor]:
    """The removals in ``orig[start:end]`` (a lazy segment's region) that rest on blank
    lines beside a marker only: non-blank original lines, none of them shown anywhere in
    the snippet, between the blank lines the segment opens (ends) with and its first
    (last) non-blank line, which is found as it stands (its indentation too).

    >>> orig = ["}", "", "/** Doc. */", "void f() {", "  a();", "}", "", "x"]
    >>> seg = ["", "void f() {", "  b();", "}"]
    >>> blank_anchors(orig, seg, ((0, 1), (1, 3), (3, 5)), 1, 6, frozenset(
    ...     {"void f() {", "b();", "}"}), True, True)
    [BlankAnchor(side='before', edge=3, cut=1, lo=2, hi=3)]
    """
    nonblank = [i for i, s in enumerate(seg) if s.strip()]
    if not nonblank:
        return []
    matched = dict(pairs)
    found: list[BlankAnchor] = []

    def unshown(lo: int, hi: int) -> bool:  # (``/**``, ``*/``, ``}`` say nothing)
        lines = [s.strip() for s in orig[lo:hi] if re.search(r"\w", s)]
        return bool(lines) and not any(s in snippet_lines for s in lines)

    first, last = nonblank[0], nonblank[-1]
    # (a line whose indentation changed was moved out of the structure around it: the
    # removal is the edit's)
    if marker_before and first > 0 and first in matched and \
            seg[first].rstrip() == orig[matched[first]].rstrip():
        j = matched[first]
        m = 0  # the original's blank lines right above the segment's first line
        while j - m - 1 >= start and not orig[j - m - 1].strip():
            m += 1
        if start < j - m and unshown(start, j - m):
            keep = min(first, m)
            lo = next(k for k in range(start, j - m) if orig[k].strip())
            found.append(BlankAnchor("before", j - keep, first - keep, lo, j - m))
    tail = len(seg) - 1 - last
    if marker_after and tail > 0 and last in matched and \
            seg[last].rstrip() == orig[matched[last]].rstrip():
        j = matched[last] + 1
        m = 0  # the original's blank lines right below the segment's last line
        while j + m < end and not orig[j + m].strip():
            m += 1
        if j + m < end and unshown(j + m, end):
            keep = min(tail, m)
            hi = next(k for k in range(end, j + m, -1) if orig[k - 1].strip())
            found.append(BlankAnchor("after", j + keep, tail - keep, j + m, hi))
    return found



#: Fewest non-blank lines a removal anchored by weak lines must take for it to be doubted
#: (a statement or two beside ``}`` is how generated snippets show a removal).
BLOCK_LINES = 3


@dataclass(frozen=True)
class WeakEdge:
    """A removal that only lines found at several places, at a segment's edge beside a
    marker, anchor (see :func:`weak_edges`)."""

    #: "after" (the weak lines end the segment) or "before" (they open it).
    side: str
    #: The segment's lines from (up to, for "before") this index are the weak ones.
    cut: int
    #: The region's end ("after") or start ("before") that keeps the lines.
    edge: int
    #: The original lines, 0-based [lo, hi), the weak anchors would remove.
    lo: int
    hi: int


def weak_edges(orig: list[str], seg: list[str], pairs: tuple[tuple[int, int], ...],
               start: int, end: int, snippet_lines: frozenset[str], several: set[int],
               marker_before: bool, marker_after: bool) -> list[WeakEdge]:
    """Removals at a segment's edge that rest on lines found at several places only.

    An agent writes an anchor, the changed line, a marker: ``- name: Install`` then
    ``run: |`` (was ``run: >``). ``run: |`` is found further on, under another step, and
    matched there, the lines between the anchor and it (the block under ``run: >`` and
    the next steps) read as removed. Where the segment's last lines (first, at its start)
    are all blank or found at several places in the original (``several``: indexes of
    ``seg``), or the line next to the anchor reads as an edit of the line at its place;
    the original lines between them and the segment's other matched lines are never
    shown in the snippet; and they reach out of the anchor's block (BLOCK_LINES or more,
    one of them no deeper than the anchor): that removal is a guess. The rival reads the
    weak lines as new, written beside the last anchor, and removes nothing.

    >>> orig = ["- name: A", "  run: >", "    x", "- name: B", "  run: |", "    y"]
    >>> seg = ["- name: A", "  run: |"]
    >>> weak_edges(orig, seg, ((0, 0), (1, 4)), 0, 5, frozenset({"- name: A", "run: |"}),
    ...            {1}, True, True)
    [WeakEdge(side='after', cut=1, edge=1, lo=1, hi=4)]
    """
    found: list[WeakEdge] = []

    def weak(i: int) -> bool:
        return not seg[i].strip() or i in several

    def unshown(lo: int, hi: int) -> bool:
        lines = [s.strip() for s in orig[lo:hi] if s.strip()]
        return bool(lines) and not any(s in snippet_lines for s in lines)

    def past_block(lo: int, hi: int, anchor: str) -> bool:
        """Does orig[lo:hi] hold BLOCK_LINES or more lines and reach out of the anchor's
        block (a line no deeper than the anchor: a sibling taken out too)?"""
        lines = [s for s in orig[lo:hi] if s.strip()]
        depth = len(anchor) - len(anchor.lstrip())
        return len(lines) >= BLOCK_LINES and \
            min(len(s) - len(s.lstrip()) for s in lines) <= depth

    if len(pairs) < 2:
        return found
    first, last = pairs[0][0], pairs[-1][0]  # (the segment's anchors stay anchors)
    matched = dict(pairs)
    if marker_after:
        t = len(seg)
        while t > first + 1 and weak(t - 1):
            t -= 1
        # a line matched past the anchor right above it, though the line at its place
        # reads as an edit of it (``run: |`` under ``run: >``'s anchor) is weak too
        if t > first + 1 and t - 1 in matched and t - 2 in matched and \
                matched[t - 1] > matched[t - 2] + 1 and \
                alike(seg[t - 1], orig[matched[t - 2] + 1]):
            t -= 1
        before = [(i, j) for i, j in pairs if i < t]
        tail = [(i, j) for i, j in pairs if i >= t]
        # the weak lines follow the last other anchor directly (new lines between them
        # would be an edit of what lies between)
        if before and tail and before[-1][0] == t - 1 and \
                any(seg[i].strip() for i, _ in tail):
            j1, j2 = before[-1][1], tail[0][1]
            if j2 > j1 + 1 and unshown(j1 + 1, j2) and past_block(j1 + 1, j2, orig[j1]):
                found.append(WeakEdge("after", t, j1 + 1, j1 + 1, j2))
    if marker_before:
        t = 0
        while t < last and weak(t):
            t += 1
        if t < last and t in matched and t + 1 in matched and \
                matched[t + 1] > matched[t] + 1 and alike(seg[t], orig[matched[t + 1] - 1]):
            t += 1
        head = [(i, j) for i, j in pairs if i < t]
        after = [(i, j) for i, j in pairs if i >= t]
        if head and after and after[0][0] == t and any(seg[i].strip() for i, _ in head):
            j1, j2 = head[-1][1], after[0][1]
            if j2 > j1 + 1 and unshown(j1 + 1, j2) and past_block(j1 + 1, j2, orig[j2]) \
                    and not any((w.lo, w.hi) == (j1 + 1, j2) for w in found):
                found.append(WeakEdge("before", t, j2, j1 + 1, j2))
    return found


def removed_runs(orig: list[str], pairs: tuple[tuple[int, int], ...],
                 snippet_lines: frozenset[str]) -> list[tuple[int, int, int]]:
    """The runs a placed segment removes by adjacency: original lines [lo, hi) between
    two of its consecutive lines matched at lo - 1 and hi, holding a non-blank line the
    snippet never shows, as (index of the segment line to keep them before, lo, hi).

    >>> removed_runs(["a", "x", "", "b"], ((0, 0), (1, 3)), frozenset({"a", "b"}))
    [(1, 1, 3)]
    """
    return [(i2, j1 + 1, j2) for (i1, j1), (i2, j2) in itertools.pairwise(pairs)
            if i2 == i1 + 1 and j2 > j1 + 1 and any(
                s.strip() and s.strip() not in snippet_lines for s in orig[j1 + 1:j2])]


def shown_from(orig: list[str], head: list[str], start: int, first: int) -> int:
    """Where in ``orig[start:first]`` a segment's unmatched first lines ``head`` stand as
    they are, in order and from its first line on (blank lines aside): the original line
    (0-based) its first line is, or -1. A segment with no marker before it is read as
    starting the file; if its first lines are the original's own, further down, it starts
    there, and the lines above it (which it never shows) stay.

    >>> shown_from(["import a", "import b", "import c", "", "x = 1"], ["import b",
    ...            "import c", ""], 0, 4)
    1
    """
    lines = [s.strip() for s in head if s.strip()]
    if not lines:
        return -1
    at = [j for j in range(start, first) if orig[j].strip() == lines[0]]
    for j in at[:1]:
        rest = [s.strip() for s in orig[j:first] if s.strip()]
        if rest[:len(lines)] == lines:  # (what follows them up to ``first`` it removes)
            return j if j > start else -1
    return -1
