"""SEARCH/REPLACE blocks and diff hunks: each is found in the original as it is written
(:func:`locate`, exactly, then ignoring indentation) and replaced there
(:func:`replace_block`); one with nothing to find is inserted (:func:`_insert`). They
write into a reading's state (:class:`fastapply.merge.merger._Merger`), beside its lazy
segments.

>>> from fastapply.merge.edits import parse_edit
>>> from fastapply.merge.merger import _Merger
>>> m = _Merger(["a", "b", "c"])
>>> hunk = parse_edit("<<<<<<< SEARCH\\nb\\n=======\\nB\\n>>>>>>> REPLACE\\n").hunks[0]
>>> replace_block(m, hunk)
>>> m.text_lines()
['a', 'B', 'c']
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fastapply.merge.lines import key_exact, key_loose
from fastapply.merge.syntax import Hunk
from fastapply.merge.text import (
    _closest,
    _context_from_original,
    _find_runs,
    _indent,
    _reindent,
    _Replacement,
    _retab,
    _trim_blank_edges,
)

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger

#: SEARCH blocks (and diff hunks) found by scanning the file; after them an index of its
#: lines is built (it costs about two scans and makes every later search cheap).
SCANS = 4


def locate(m: _Merger, hunk: Hunk, block: Sequence[str], near: int | None) -> tuple[int, bool]:
    """Start of ``block`` in the original (-1 if absent) and whether it was loose."""
    for key, loose in ((key_exact, False), (key_loose, True)):
        # the first searches scan the file; later ones use (and build) its index
        table = m._positions(key) if m._searches >= SCANS else None
        hits = _find_runs(block, m.orig, key, table, m.budget)
        m._searches += 1
        if not hits:
            continue
        after = [j for j in hits if j >= m.pos] or hits
        if near is not None:
            pick = min(after, key=lambda j: (abs(j - near), j))
        else:
            pick = after[0]
        confirmed = near is not None and abs(pick - near) <= 3  # the @@ line number agrees
        if len(hits) > 1 and not confirmed:
            where = " and ".join(str(j + 1) for j in hits[:2])
            more = f" (and {len(hits) - 2} more)" if len(hits) > 2 else ""
            m.unsure(pick + 1, f"{hunk.label}: its text matches at lines "
                                  f"{where}{more}; used line {pick + 1}")
        return pick, loose
    return -1, False


def replace_block(m: _Merger, hunk: Hunk) -> None:
    m.budget.doing = hunk.label
    old, new = list(hunk.old), list(hunk.new)
    if not any(s.strip() for s in old):
        if not m.orig or not any(s.strip() for s in m.orig):
            m.replacements.append(_Replacement(0, len(m.orig), new))
        else:
            _insert(m, hunk, new)
        return
    near = hunk.old_start - 1 if hunk.old_start else None
    start, loose = locate(m, hunk, old, near)
    if start < 0 and hunk.kind == "search_replace" and not (old[0].strip() and
                                                            old[-1].strip()):
        # Blank lines at the edges of the SEARCH text that the file lacks there (as
        # Aider and Roo-Code do): look again without them, and keep the replacement's
        # own edge blank lines only where they repeated the SEARCH's.
        old, new = _trim_blank_edges(old, new)
        start, loose = locate(m, hunk, old, near)
    if start < 0:
        what = "SEARCH block" if hunk.kind == "search_replace" else "diff hunk"
        closest = _closest(old, m._positions(key_loose), m._index(key_loose),
                           m.budget)
        m.unsure(closest, f"{what} {hunk.number} (snippet line {hunk.snippet_line}) "
                             f"not found in the original; closest match at line {closest}")
        return
    region = m.orig[start:start + len(old)]
    shift = None
    retabbed = _retab(old, new, region) if loose else None
    if retabbed is not None:  # tabs written as spaces (or the other way): convert
        old, new = retabbed
    elif loose:
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
            m.unsure(start + uneven + 1, (
                f"{hunk.label}: found only when ignoring indentation, and its line "
                f"{uneven + 1} is indented unlike original line {start + uneven + 1} "
                f"by another amount than its first line; the replacement's indentation "
                f"is a guess"))
    m.replacements.append(_Replacement(start, start + len(old),
                                          _context_from_original(old, new, region, shift),
                                          block=True))
    m.pos = start + len(old)
    _file_end(m, hunk, m.pos)


def _file_end(m: _Merger, hunk: Hunk, end: int) -> None:
    """Take a diff's word on the file's final newline (``\\ No newline at end of
    file``) if its hunk ends where the file does; report it if not."""
    if hunk.eof_newline is None:
        return
    if end >= m.eof:
        m.final_newline = hunk.eof_newline
    else:
        m.unsure(end + 1, f"{hunk.label}: it says the file ends after its last line "
                             f"(No newline at end of file), but it was found ending at "
                             f"line {end}, before the end ({m.eof} lines)")


def _insert(m: _Merger, hunk: Hunk, new: list[str]) -> None:
    """A hunk that finds nothing (an empty SEARCH, a diff hunk without ``-`` or context
    lines) inserts its lines: a diff's ``@@ -N,0`` after line N, a SEARCH block's
    ``:start_line:N`` before line N; with no line given, an empty SEARCH appends (as
    in Aider) and a diff hunk is appended but flagged (it could go anywhere)."""
    if hunk.old_start is None:
        where = m.eof
        if hunk.kind == "udiff":
            m.unsure(where + 1, f"{hunk.label}: it only adds lines and its @@ header "
                                   f"gives no line number, so they were appended at the "
                                   f"end; give the line (@@ -N,0 +M,K @@) or context")
    else:
        where = hunk.old_start - (hunk.kind != "udiff")
        if where > m.eof:
            m.unsure(m.eof + 1, f"{hunk.label}: line {hunk.old_start} is past the "
                                      f"end of the file ({m.eof} lines); appended")
        where = min(max(where, 0), m.eof)
    m.replacements.append(_Replacement(where, where, new))
    m.pos = max(m.pos, where)
    _file_end(m, hunk, where)
