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

from dataclasses import dataclass


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

    def unshown(lo: int, hi: int) -> bool:
        lines = [s.strip() for s in orig[lo:hi] if s.strip()]
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

