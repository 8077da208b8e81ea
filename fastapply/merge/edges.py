"""A lazy segment whose edge fits a second place just past it (judged on the chosen reading).

A segment ends, before its marker, with lines found at several places (``}``, a blank,
``return error;``) after new lines of its own. The merge anchors that edge at the copy
nearest the segment's unique lines. When another copy of the same edge lies a few lines
further on, inside the gap the marker stands for, and the lines just before that copy
read like the segment's new lines (same indentation, same first token: ``if (...) {``
beside ``if (...) {``), the snippet fits there as well: its new lines are then an edit
of those lines, and everything between the two copies is removed (a neighbouring block
taken out along with the edit). The snippet's text cannot tell the two apart, so the
merge is refused rather than guessed (``sindresorhus/ky@101c74ba1a:readme.md`` of the
shared corpus: the second error hook was meant to go). Likewise at a segment's start,
with the copy just before it. Figures in docs/benchmarks.md.

>>> orig = ["f() {", "  a();", "  if (x) {", "    y();", "  }", "  return e;", "  log();",
...         "  if (z) {", "    w();", "  }", "  return e;", "}"]
>>> seg = ["  a();", "  if (q) {", "    w(1);", "  }", "  return e;"]
>>> table = {}
>>> for j, s in enumerate(orig):
...     table.setdefault(s.strip(), []).append(j)
>>> pairs = [(0, 1), (3, 4), (4, 5)]
>>> [(lo, hi) for _, lo, hi, _ in rival_edges(orig, pairs, seg, frozenset(s.strip()
...     for s in seg), table, "lazy segment 1", before=False, after=True)]
[(6, 11)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import overload

from fastapply.merge.definitions import removed_definitions
from fastapply.merge.lines import _WORDLIKE as _WORD

__all__ = ["kept_block_tail", "replaced_past_block", "rival_edges"]

#: Lines past the segment's edge (inside the marker's gap) where another copy of the edge
#: is looked for.
LOOK = 15
#: New lines beside the edge compared with the lines beside that copy.
ALIKE = 2
_COMMENT = ("*", "/", "#", "<!--")
_LEAD = re.compile(r"\s*([\w.$@]+|[^\w\s]+)")


class _Reversed(Sequence[str]):
    """The lines read from the end (for a segment's head), without copying them."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        n = len(self.lines)
        if isinstance(i, slice):
            lo, hi, _ = i.indices(n)
            return [self.lines[n - 1 - k] for k in range(lo, hi)]
        return self.lines[n - 1 - i]


def _lead(line: str) -> tuple[str, str]:
    """Indentation and first token (a dotted name or a run of punctuation)."""
    m = _LEAD.match(line)
    return line[:len(line) - len(line.lstrip())], m.group(1) if m else ""


def _alike(new: Sequence[str], lines: Sequence[str], k: int) -> bool:
    """Do the last ``k`` of ``new`` read like the last ``k`` of ``lines`` (indentation and
    first token, line by line)?"""
    return len(lines) >= k and all(_lead(a) == _lead(b)
                                   for a, b in zip(new[-k:], lines[-k:], strict=True))


def rival_edges(orig: Sequence[str], pairs: Sequence[tuple[int, int]], seg: Sequence[str],
                shown: frozenset[str], table: dict[str, list[int]], label: str,
                before: bool, after: bool) -> list[tuple[int, int, int, str]]:
    """(1-based line, lo, hi, message) for each edge of a placed segment (``pairs``:
    matched segment and original lines) with a marker beside it (``before``/``after``)
    that fits another copy of its generic lines within LOOK lines; ``orig[lo:hi]`` is
    what that other reading would also take, which must lie in the marker's gap (checked
    by the caller against the other segments' regions). ``table``: original lines by
    stripped text; ``shown``: the snippet's stripped lines."""
    found = []
    n, m = len(orig), len(seg)
    if after:
        hit = _edge(orig, list(pairs), seg, shown, table)
        if hit:
            first, lo, hi = hit
            found.append((first + 1, lo, hi, _message(label, "last", lo, hi)))
    if before:
        rev = [(m - 1 - i, n - 1 - j) for i, j in reversed(pairs)]
        hit = _edge(_Reversed(orig), rev, seg[::-1], shown, table)
        if hit:
            first, lo, hi = n - 1 - hit[0], n - hit[2], n - hit[1]
            found.append((first + 1, lo, hi, _message(label, "first", lo, hi)))
    # A reading that removes a definition the segment never names is the worse one (as
    # DROP_DEF prices it in the alignment): new functions after the last lines of a
    # similar one are an insertion, not a rewrite of the next function.
    return [f for f in found if not removed_definitions(orig[f[1]:f[2]], set(), seg)]


def _message(label: str, which: str, lo: int, hi: int) -> str:
    return (f"{label}: its {which} lines, found at several places, are found again within "
            f"lines {lo + 1}-{hi}, beside lines like its own new ones, so it fits there as "
            f"well (taking those lines with it); show a unique line of unchanged context "
            f"on that side of the change")


def _edge(orig: Sequence[str], pairs: list[tuple[int, int]], seg: Sequence[str],
          shown: frozenset[str], table: dict[str, list[int]]) -> tuple[int, int, int] | None:
    """The tail case (the head is the same on reversed lists): (first original line of
    the tail, lo, hi) when the segment's last lines are matched generic lines, after new
    lines, and another copy of them starts within LOOK lines, after lines like those new
    ones; None otherwise."""
    last = max((i for i, s in enumerate(seg) if s.strip()), default=-1)
    if len(pairs) < 2 or pairs[-1][0] < last:
        return None
    t = len(pairs) - 1
    while t > 0 and pairs[t - 1] == (pairs[t][0] - 1, pairs[t][1] - 1):
        t -= 1
    tail = [orig[j].strip() for _, j in pairs[t:] if orig[j].strip()]
    if not tail or t == 0 or any(len(table.get(s, ())) < 2 and _WORD.search(s) for s in tail):
        return None
    if not any(_WORD.search(s) and not s.startswith(_COMMENT) for s in tail):
        return None  # only braces, blanks and comment lines: too common to doubt
    (ib, _), (it, jt) = pairs[t - 1], pairs[t]
    new = [s for s in seg[ib + 1:it] if s.strip()]
    if not new:
        return None
    k = min(ALIKE, len(new))
    # the lines this placement already replaces with them: like them, it reads the new
    # lines as an edit in place as well as the other copy would (nearest wins)
    here = [s for s in orig[pairs[t - 1][1] + 1:jt] if s.strip() and s.strip() not in shown]
    if _alike(new, here, k):
        return None
    end = pairs[-1][1] + 1  # the tail's copy in the gap: its non-blank lines in a row
    for q in range(end, min(len(orig), end + LOOK)):
        if orig[q].strip() != tail[0]:
            continue
        run = [s.strip() for s in orig[q:q + 4 * len(tail)] if s.strip()][:len(tail)]
        if run != tail:
            continue
        lines = [s for s in orig[end:q] if s.strip()]
        if len(lines) < k + 1 or any(s.strip() in shown for s in lines[-k:]):
            return None
        if _alike(new, lines, k):
            stop = q
            for _ in tail:  # past the copy's last non-blank line
                while not orig[stop].strip():
                    stop += 1
                stop += 1
            return jt, end, stop
        return None
    return None


#: Original lines looked at past a segment's end for :func:`kept_block_tail`.
TAIL_LOOK = 50


def _new_tail_floor(seg: Sequence[str], pairs: Sequence[tuple[int, int]]) -> int | None:
    """The least indentation of the segment's non-blank lines after its last matched line
    (the new lines it ends on); None when it ends on a matched line or matched none."""
    if not pairs:
        return None
    new = [s for s in seg[pairs[-1][0] + 1:] if s.strip()]
    return min(len(s) - len(s.lstrip()) for s in new) if new else None


def kept_block_tail(orig: Sequence[str], seg: Sequence[str], pairs: Sequence[tuple[int, int]],
                    end: int, shown: frozenset[str]) -> tuple[int, int] | None:
    """``(lo, hi)``: original lines ``orig[lo:hi]`` a segment with no marker after it kept,
    that it may have replaced; None when there are none.

    The segment ends on new lines (after its last matched line), and no marker was written
    after it (a snippet from a signature to its block's end, or a fragment without
    markers). The original lines right after its region (from ``end``) that are indented as
    deep as those new lines or deeper are the rest of the same block, and where the snippet
    shows none of them, nothing in it says whether they stay: the merge keeps them, and the
    commit had replaced them every time this was seen (21 wrong merges called certain on the
    tune split, the validation split and the shared corpus; no right one has this shape;
    docs/benchmarks.md). ``shown``: the snippet's stripped lines.

    >>> orig = ["def f(a):", "    x = []", "    x.extend(a)", "    return x", "", "def g():"]
    >>> seg = ["def f(a):", "    x = a", "    for y in x:", "        yield y"]
    >>> kept_block_tail(orig, seg, [(0, 0)], 3, frozenset(s.strip() for s in seg))
    (3, 4)
    >>> kept_block_tail(orig, seg, [(0, 0)], 4, frozenset(s.strip() for s in seg)) is None
    True
    """
    floor = _new_tail_floor(seg, pairs)
    if floor is None:
        return None
    hi, unshown = end, False
    for j in range(end, min(len(orig), end + TAIL_LOOK)):
        line = orig[j]
        if not line.strip():
            continue
        if len(line) - len(line.lstrip()) < floor:
            break
        hi, unshown = j + 1, unshown or line.strip() not in shown
    return (end, hi) if unshown else None


def replaced_past_block(orig: Sequence[str], seg: Sequence[str],
                        pairs: Sequence[tuple[int, int]], end: int,
                        shown: frozenset[str]) -> tuple[int, int] | None:
    """``(lo, hi)``: the original lines between a segment's last matched line and the end
    of its region (``end``) that are less indented than the new lines it ends on, which it
    replaced though the snippet never shows them; None when there are none.

    The other side of :func:`kept_block_tail`: new lines that end a block replaced a line
    after the block (``return decorator`` after a nested ``def decorator(f):`` whose body
    the snippet rewrote), where the commit kept it (4 wrong merges called certain on the
    tune split; no right one has this shape; docs/benchmarks.md).

    >>> orig = ["def outer():", "    def inner(f):", "        return make(f)",
    ...         "    return inner", ""]
    >>> seg = ["    def inner(f):", "        cmd = make(f)", "        return cmd"]
    >>> replaced_past_block(orig, seg, [(0, 1)], 4, frozenset(s.strip() for s in seg))
    (3, 4)
    """
    floor = _new_tail_floor(seg, pairs)
    if floor is None:
        return None
    out = [j for j in range(pairs[-1][1] + 1, end) if orig[j].strip()
           and len(orig[j]) - len(orig[j].lstrip()) < floor and orig[j].strip() not in shown]
    return (out[0], out[-1] + 1) if out else None
