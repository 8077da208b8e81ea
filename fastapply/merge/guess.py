"""Placements of a lazy segment that rest on a guess the snippet does not settle (found
on outside fixtures: Plandex's, Continue's and ghostcoder's lazy-merge tests). Each
finding is a message; the "guesses" doubt of :data:`fastapply.merge.doubts.PIPELINE`
reports it, so the deterministic runtime refuses the merge instead of returning one
reading of several.

* **fragment edges**: a snippet without any marker that is not the whole file is read
  as a fragment anchored where its lines match; if its first or last non-blank line
  matches nothing and replaces nothing, where the code it replaces begins or ends is
  not shown (a rewritten function shown alone keeps the old body after the new one);
* **fragment removes a definition**: such a fragment removes a definition it never
  names (two functions shown back to back, the original has one between them);
* **removal beside blank anchors only**: a run of removed lines whose only matched
  lines on one side are blank: a blank line is found everywhere, and pairing it with
  the blank line next to the other anchor removes nothing;
* **clause left without its statement**: the first line after the placed segment
  continues a statement (``except``, ``else``, ``} catch``) whose header the placement
  removed (a ``try:`` dropped when its body was rewritten, the ``except`` kept): the
  segment ended at a line found again further on (a blank line), and read there the
  change reaches further;
* **second copy of a definition**: the segment's definition header is new but names one
  the original has elsewhere (a rewritten method whose parameters changed, shown after
  a marker): placed apart from the old one, it keeps both
  (:func:`fastapply.merge.definitions.second_definition`).
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

from fastapply.merge.definitions import removed_definitions, second_definition
from fastapply.merge.review import _LOOKALIKE

#: A line that continues a compound statement opened above it at its indentation.
_CLAUSE = re.compile(r"^\s*(?:\}\s*)?(except|elif|else|finally|catch)\b")
#: The headers (and earlier clauses) each clause may follow at its indentation.
_FOLLOWS = {"except": {"try", "except"}, "elif": {"if", "elif"},
            "else": {"if", "elif", "for", "while", "try", "except"},
            "finally": {"try", "except", "else", "catch"}, "catch": {"try", "catch"}}
_KEYWORD = re.compile(r"^\s*(?:\}\s*)?(\w+)")

#: A comment or annotation line (``/**``, `` * text``, ``///``, ``#``, ``--``, ``@decorator``).
_COMMENT = re.compile(r"^\s*(?://|#|/\*|\*|--|<!--|@\w)")


def guesses(seg: Sequence[str], orig: Sequence[str], start: int, end: int,
            pairs: Sequence[tuple[int, int]], implied: bool, shown: frozenset[str],
            label: str, have: Container[str] | None = None) -> list[tuple[int, str]]:
    """Findings (1-based original line, message) for one placed segment: ``seg``
    replaces ``orig[start:end]`` with ``pairs`` (segment line, original line) matched;
    ``implied``: the snippet has no marker and is read as a fragment; ``shown``: the
    snippet's non-blank lines, stripped; ``have``: the original's, where the caller holds
    them.

    >>> orig = ["def f(x):", "    y = x", "    return y", "", "def g():", "    pass"]
    >>> guesses(["def f(x):", "    return x"], orig, 0, 1, [(0, 0)], True, frozenset(),
    ...         "s")[0][1][:54]
    's: the snippet has no marker and its last line matches'
    >>> seg = ["", "def g():", "    pass"]
    >>> guesses(seg, orig, 0, 6, [(0, 3), (1, 4), (2, 5)], False, frozenset(), "s")
    []
    >>> guesses(seg, orig, 0, 6, [(0, 0), (1, 4), (2, 5)], False, frozenset(), "s")[0][1][:54]
    's: it removes original lines 2-4 beside blank lines al'
    """
    found: list[tuple[int, str]] = []
    matched = {i for i, _ in pairs}
    # (a marker written without a comment is text to the parser: precision flags it)
    lines = [i for i, s in enumerate(seg) if s.strip() and not _LOOKALIKE.match(s)]
    if implied and lines and pairs:
        # (new lines at the open edge that replace nothing: the old code there is kept
        # after or before them, which is what goes wrong; an edge that replaces original
        # lines, as a changed last line does, is read as the fragment's end)
        # (comment lines put before a definition shown whole document it: a fragment's
        # usual way to add a doc comment)
        head = [seg[i] for i in lines if i < pairs[0][0]]
        documents = bool(head) and all(_COMMENT.match(s) for s in head)
        for edge, i, idle in (("first", lines[0], start == pairs[0][1] and not documents),
                              ("last", lines[-1], end == pairs[-1][1] + 1)):
            if i not in matched and idle:
                found.append((start + 1, (
                    f"{label}: the snippet has no marker and its {edge} line matches no "
                    f"line of the original, so where the code it replaces "
                    f"{'begins' if edge == 'first' else 'ends'} is not shown; mark the "
                    f"unchanged code around it (// ... existing code ...) or send the "
                    f"whole file")))
                break
        lost = removed_definitions(orig[start:end], {j - start for _, j in pairs}, seg)
        if lost:
            found.append((start + 1, (
                f"{label}: the snippet has no marker, and placed at lines {start + 1}-{end} "
                f"it removes {lost[0]!r}, which it never names; mark the code it keeps "
                f"(// ... existing code ...)")))
    solid = [k for k, (i, _) in enumerate(pairs) if seg[i].strip()]
    for k in range(len(pairs) - 1):
        (_, j1), (_, j2) = pairs[k], pairs[k + 1]
        gone = [s.strip() for s in orig[j1 + 1:j2] if s.strip() and s.strip() not in shown]
        if not gone:
            continue
        # blank pairs on the run's blank-only side, and blank original lines beside the
        # solid anchor on the other side that they could pair with instead
        if not solid or solid[0] > k:
            blank = k + 1 if not solid else solid[0]
            spare = _blank_run(orig, pairs[blank][1] - 1, -1) if solid else 0
        elif solid[-1] < k + 1:
            blank = len(pairs) - solid[-1] - 1
            spare = _blank_run(orig, pairs[solid[-1]][1] + 1, 1)
        else:
            continue
        if spare >= blank:
            found.append((j1 + 2, (
                f"{label}: it removes original lines {j1 + 2}-{j2} beside blank lines "
                f"alone; a blank line is found everywhere, so the snippet does not show "
                f"this removal; show a non-blank line of unchanged context next to it")))
            break
    second = second_definition(seg, orig, start, end, have)
    if second is not None:
        found.append((second[0] + 1, (
            f"{label}: placed at lines {start + 1}-{end}, it adds {second[1].strip()!r} "
            f"beside the one at original line {second[0] + 1}, whose header it changes "
            f"(a rewritten definition read as new code?); show the old header or a line "
            f"of unchanged context inside it")))
    clause = _orphan_clause(seg, orig, start, end)
    if clause is not None:
        found.append((end + clause + 1, (
            f"{label}: placed at lines {start + 1}-{end}, it leaves original line "
            f"{end + clause + 1} ({orig[end + clause].strip()[:40]!r}) without the statement "
            f"it continues; show where the change ends with a line of unchanged context")))
    return found


def _orphan_clause(seg: Sequence[str], orig: Sequence[str], start: int, end: int
                   ) -> int | None:
    """Offset from ``end`` of the first line after the placement that continues a
    statement (``except``, ``else``) which the placement took away: the nearest line above
    it not indented deeper was a header in the original and is not one in the merge.

    >>> orig = ["def f():", "    try:", "        x()", "", "    except E:", "        y()"]
    >>> _orphan_clause(["    x()", ""], orig, 1, 4)  # the try: is gone, its except stays
    0
    >>> _orphan_clause(["    try:", "        z()", ""], orig, 1, 4) is None
    True
    """
    after = next((k for k in range(end, len(orig)) if orig[k].strip()), None)
    clause = _CLAUSE.match(orig[after]) if after is not None else None
    if after is None or clause is None:
        return None
    depth, kind = len(orig[after]) - len(orig[after].lstrip()), clause.group(1)

    def header(lines: Sequence[str]) -> bool:  # the line above, at most as deep, fits
        line = next((s for s in reversed(lines)
                     if s.strip() and len(s) - len(s.lstrip()) <= depth), "")
        word = _KEYWORD.match(line)
        return word is not None and word.group(1) in _FOLLOWS[kind]

    if header(orig[:after]) and not header(list(orig[:start]) + list(seg) +
                                           list(orig[end:after])):
        return after - end
    return None


def _blank_run(orig: Sequence[str], j: int, step: int) -> int:
    """Blank original lines from ``j`` on, walking by ``step``."""
    n = 0
    while 0 <= j < len(orig) and not orig[j].strip():
        n, j = n + 1, j + step
    return n
