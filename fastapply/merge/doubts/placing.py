"""Placing a lazy segment: an empty original, an implied fragment, the placement itself, a
segment found nowhere, an end freed from the file's end, a tied anchor. The steps of
:data:`fastapply.merge.doubts.PIPELINE` before the segment's region is read."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from fastapply.merge.beside import reach
from fastapply.merge.lines import key_exact, key_loose
from fastapply.merge.segment import Segment
from fastapply.merge.text import _closest, _Replacement
from fastapply.merge.whole import looks_whole

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger


def empty_original(m: _Merger, s: Segment) -> None:
    """An original with no non-blank line: the segment is the new file. Beside a
    SEARCH/REPLACE block or diff hunk (which writes into the new file) it is text, not
    code: unsure.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("", "Create it:\\n<<<<<<< SEARCH\\n=======\\nhello\\n>>>>>>> REPLACE\\n")
    ['empty original']
    """
    if any(line.strip() for line in m.orig):
        return
    m.replacements.append(_Replacement(0, len(m.orig), s.seg))
    if m.mixed:  # beside a block that writes the new file: text, not code
        m.unsure(1, f"{s.hunk.label}: the original is empty and the snippet also "
                    f"has SEARCH/REPLACE or diff hunks, so its lines were written "
                    f"into the new file as they are; send only the edit")
    s.done = True


def implied(m: _Merger, s: Segment) -> None:
    """No marker anywhere and not the whole file (:func:`.whole.looks_whole`): an
    anchored fragment, read as if markers stood on both sides."""
    s.implied = not s.hunk.marker_before and not s.hunk.marker_after and \
        not looks_whole(s.seg, m.orig, m.eof)
    if s.implied:
        s.hunk = replace(s.hunk, marker_before=True, marker_after=True)


def place(m: _Merger, s: Segment) -> None:
    """Place the segment (:meth:`_Merger.place`: with the reading's lines of context,
    else by its best fit)."""
    s.placement, s.loose, s.misfit = m.place(s.seg, s.hunk)


def unplaced(m: _Merger, s: Segment) -> None:
    """No line of the segment is in the original: the whole new file (no markers),
    appended at the end (no marker after it), inserted at the top (none before it), or,
    between markers, written over the original lines it nearly equals (:func:`.beside.reach`;
    the rival inserts it there) or inserted by its closest line: unsure, all but the
    whole file.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("a = 1\\nb = 2\\n", "# ...\\nzz = 9\\n# ...\\n")
    ['unplaced']
    """
    if s.placement is not None:
        return
    s.done = True
    seg, hunk = s.seg, s.hunk
    if not hunk.marker_before and not hunk.marker_after:
        m.replacements.append(_Replacement(0, len(m.orig), seg))
        m.unsure(1, f"{hunk.label}: no line of it matches the original; treated "
                    f"as the whole new file", local=False)
        return
    if not hunk.marker_after:  # it runs to the end: append it there
        where, line = m.eof, m.eof
    elif not hunk.marker_before:  # it starts the file: insert it at the top
        where, line = m.pos, m.pos + 1
    else:
        if (hunk, m.pos) not in m._near:
            m._near[hunk, m.pos] = _closest(
                seg, m._positions(key_loose), m._index(key_loose), m.budget, m.pos)
        line = m._near[hunk, m.pos]
        where = line - 1
        n = reach(seg, m.orig[where:], m.snippet_lines)
        if n and not m.doubt(hunk, "beside unplaced", where, (
                f"no line of it matches the original, but its lines nearly equal "
                f"original lines {line}-{where + n} ({m.orig[where].strip()[:60]!r}), "
                f"so they replace them; if they are added beside them, show those lines "
                f"too, unchanged")):
            m.replacements.append(_Replacement(where, where + n, seg))
            m.pos = where + n
            return
    m.unsure(line, f"{hunk.label}: no line of it matches the original; inserted "
                   f"at line {where + 1}, closest match at line {line}; nothing removed",
             local=False)
    m.replacements.append(_Replacement(where, where, seg))
    m.pos = where


def free_end(m: _Merger, s: Segment) -> None:
    """A segment with a marker before it and none after runs to the file's end. Where
    only lines found at several places (blank lines, ``end``, ``}``) match there while
    its first line (the declaration an agent writes out again) is found once in the
    original, above, and left unmatched, it was put at the end only because the end
    had to match, and agents leave the last marker out: it is read where that line
    is, the rest kept (the hunk given a marker after it), unsure; the rival is the
    file's end.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = "".join(f"    def h{i}(self):\\n        return {i}\\n\\n" for i in range(30))
    >>> doubts_raised(orig, "# ... existing code ...\\n\\n"
    ...                     "    def h1(self):\\n        return self.x\\n")
    ['free end', 'beside']
    """
    seg, hunk, p = s.seg, s.hunk, s.p
    if not hunk.marker_before or hunk.marker_after or not p.pairs:
        return
    table = m._positions(key_exact)

    def once(i: int) -> bool:
        return bool(seg[i].strip()) and len(table.get(key_exact(seg[i]), ())) == 1

    matched = {i for i, _ in p.pairs}
    head = next((i for i, line in enumerate(seg) if line.strip()), None)
    if head is None or head in matched or not once(head) or any(once(i) for i in matched):
        return
    line = table[key_exact(seg[head])][0]
    if line >= p.start[0]:
        return
    if m.doubt(hunk, "free end", line, (
            f"no marker comes after it, so it should run to the file's end, but only "
            f"lines found at several places match there while its first line "
            f"{seg[head].strip()[:60]!r} is original line {line + 1}: read where that "
            f"line is, the lines after it kept; if it ends the file, show the file's "
            f"last lines, else add a marker after it")):
        return  # the rival: at the file's end
    s.hunk = replace(hunk, marker_after=True)
    s.placement, s.loose, s.misfit = m.place(seg, s.hunk)
    assert s.placement is not None  # its unique line matches


def tie_flip(m: _Merger, s: Segment) -> None:
    """An anchor that fits two places equally well: the segment is a tie (a rival reading
    takes its other place, :func:`fastapply.merge.apply.merge`), and this reading takes
    it where its flips say. Then the region is read off the placement."""
    if s.p.alternative is not None:
        m.ties.append(s.hunk.number)
        if s.hunk.number in m.flips:
            s.p = s.p.alternative
    s.region()
