"""The edges of a placed lazy segment: where no marker stands beside it, what it keeps or
replaces between its outermost match and the region's edge is a guess; where a marker
does, new lines written over original lines unlike them are one. Steps of
:data:`fastapply.merge.doubts.PIPELINE`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapply.merge import whole
from fastapply.merge.beside import alike, ratio
from fastapply.merge.layout import shown_from
from fastapply.merge.lines import _WORDLIKE
from fastapply.merge.segment import Segment
from fastapply.merge.whole import header_left_out

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger

#: How alike (difflib ratio of their stripped text) new lines beside a marker must be to
#: the original lines the alignment wrote them over, to be read as their edit in place
#: (:func:`unlike_edges`). On agent-written snippets, right merges of this shape were at
#: 0.54, 0.56, 0.64 and 0.75 up; the wrong ones at 0.42, 0.47 and 0.63 (docs/benchmarks.md).
IN_PLACE = 0.7
#: Most lines compared line for line there (each comparison is a difflib ratio).
IN_PLACE_LINES = 10


def no_marker_before(m: _Merger, s: Segment) -> None:
    """No marker before the segment and original lines above its first match inside its
    region: its first lines are the original's own further up (kept up to there), nearly
    equal the lines above its first match (they replace those), or it starts on context
    found mid-file (what comes before is kept), or else its first new lines replace
    them. Unsure; the rival reads the edge the other way.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("a = 1\\nb = 2\\nc = 3\\nd = 4\\ne = 5\\n", "d = 4\\ne = 50\\n# ...\\n")
    ['no marker before']
    """
    seg, hunk, start, first, i0 = s.seg, s.hunk, s.start, s.first, s.i0
    # its first lines, left unmatched, are the original's own lines above its first
    # match (context the alignment let go): it starts mid-file, like a first match
    shown = shown_from(m.orig, seg[:i0], start, first) if start < first else -1
    # more original lines above its first match than its first new lines may replace
    wide = start < first and (first - start > max(3, 2 * i0) or
                              header_left_out(m.orig[start:first], seg[:i0]))
    if shown >= 0 and not hunk.marker_before and not m.moved(start, shown):
        if not m.doubt(hunk, "before", shown, (
                f"no marker comes before it but its first line is original line "
                f"{shown + 1}, so lines {start + 1}-{shown} were kept; add a marker")):
            s.start = shown
        return
    if not (start < first and (i0 == 0 or wide
                               or (start < first - i0 and any(_WORDLIKE.search(line) for line
                                                              in m.orig[start:first - i0])
                                   and m.in_place(seg[:i0], first - i0, start, first)))
            and not m.moved(start, first)):
        return
    # lines disputed from the file's first line: a window of them cannot show the
    # model that the file starts there, so the whole file is witnessed
    local = start > 0
    flip = (hunk.number, "before") in m.edge_flips
    if m.in_place(seg[:i0], first - i0, start, first):
        # its first lines nearly equal the lines right above its first match: they
        # replace those, the rest above stays (an agent's one-line change). Where
        # the lines above are few (no more than the gap the alignment may take
        # as the file's top), the literal reading (they go) stays chosen: an agent
        # that rewrote the file's first lines writes it so too (spdlog's header)
        kept = f"lines {start + 1}-{first - i0} were kept" if wide else \
            f"lines {start + 1}-{first - i0} above them went (the file starts there)"
        m.unsure(first - i0 + 1, f"{hunk.label}: no marker comes before it, and "
                                 f"its first {i0} line(s) nearly equal original "
                                 f"lines {first - i0 + 1}-{first}, so they replace "
                                 f"them and {kept}; add a marker", local)
        if flip != wide:
            s.start = first - i0
    elif i0 == 0:  # its first line is context found mid-file: keep what comes before
        m.unsure(first + 1, f"{hunk.label}: no marker comes before it but its "
                            f"first line matches original line {first + 1}, so "
                            f"lines {start + 1}-{first} were kept; add a marker", local)
        if not flip:
            s.start = first
    else:
        m.unsure(start + 1, f"{hunk.label}: no marker comes before it, so original "
                            f"lines {start + 1}-{first} were replaced by its first "
                            f"{i0} lines; add a marker to keep them", local)
        if flip:
            s.start = first
    m.edge_choices.append((hunk.number, "before"))


def no_marker_after(m: _Merger, s: Segment) -> None:
    """The same at its end: original lines after its last match inside its region, no
    marker after it. Its last lines nearly equal the lines after its last match (they
    replace those, the rest kept), it ends on context found mid-file (the rest kept), or
    its last new lines replace them. Unsure; the rival reads the edge the other way.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("a = 1\\nb = 2\\nc = 3\\nd = 4\\ne = 5\\n", "# ...\\na = 1\\nb = 20\\n")
    ['no marker after']
    """
    seg, hunk, last, end, i1 = s.seg, s.hunk, s.last, s.end, s.i1
    if not (last < min(end, m.eof) and
            (i1 == len(seg) - 1 or end - last > max(3, 2 * (len(seg) - 1 - i1))
             or header_left_out(m.orig[last:end], seg[i1 + 1:], top=False)) and
            not m.moved(last, end)):
        return
    local = end < len(m.orig)  # to the file's last line: the whole file decides
    flip = (hunk.number, "after") in m.edge_flips
    k = len(seg) - 1 - i1
    if m.in_place(seg[i1 + 1:], last, last, end):
        m.unsure(last + 1, f"{hunk.label}: no marker comes after it, and its last "
                           f"{k} line(s) nearly equal original lines "
                           f"{last + 1}-{last + k}, so they replace them and lines "
                           f"{last + k + 1}-{end} were kept; add a marker", local)
        if not flip:
            s.end = last + k
    elif i1 == len(seg) - 1:
        m.unsure(last + 1, f"{hunk.label}: no marker comes after it but its last "
                           f"line matches original line {last}, so lines "
                           f"{last + 1}-{end} were kept; add a marker", local)
        if not flip:
            s.end = last
    else:
        m.unsure(last + 1, f"{hunk.label}: no marker comes after it, so original "
                           f"lines {last + 1}-{end} were replaced by its last "
                           f"{k} lines; add a marker to keep them", local)
        if flip:
            s.end = last
    m.edge_choices.append((hunk.number, "after"))


def unlike_edges(m: _Merger, s: Segment) -> None:
    """New lines between a marker and the segment's outermost match that the alignment
    wrote in place of original lines there, though they read unlike them (neither
    line for line :func:`.beside.alike`, nor alike as a whole: difflib ratio under
    IN_PLACE): an agent's changed line shown in place is most often an edit of the
    line there, and a new line added beside it reads like this. Unsure; the rival
    reading inserts them and keeps those lines.

    >>> from fastapply.merge.costs import Placement
    >>> from fastapply.merge.merger import _Merger
    >>> from fastapply.merge.syntax import Hunk
    >>> orig = ['  it("a", () => {', "    expect(1)", "  })", "", '  it("dates", () => {']
    >>> seg = ['  it("new", () => {', "    expect(produce(base))", "  })", "",
    ...        '  it("dates", () => {']
    >>> m = _Merger(orig)
    >>> s = Segment(Hunk("lazy", (), tuple(seg), 1, 2, marker_before=True, marker_after=True),
    ...             seg, placement=Placement((2, 3), (5, 5), ((3, 3), (4, 4))))
    >>> s.region(); unlike_edges(m, s)
    >>> (s.start, s.end), m.uncertain[0].message[:59]
    ((2, 5), 'lazy segment 1 (snippet line 2): its first new line(s) were')
    """
    seg, hunk, p = s.seg, s.hunk, s.p
    i0, i1 = p.pairs[0][0], p.pairs[-1][0]
    edges = []
    if hunk.marker_after and i1 < len(seg) - 1 and s.last < s.end:
        edges.append(("after", seg[i1 + 1:], s.last, s.end))
    if hunk.marker_before and i0 > 0 and s.start < s.first:
        edges.append(("before", seg[:i0], s.start, s.first))
    for side, new, lo, hi in edges:
        news = [line for line in new if line.strip()]
        olds = [line for line in m.orig[lo:hi] if line.strip()]
        worded = [line.strip() for line in olds if _WORDLIKE.search(line)]
        if not news or not olds or \
                (worded and all(line in m.snippet_lines for line in worded)) or \
                (len(news) == len(olds) <= IN_PLACE_LINES and all(map(alike, news, olds))) or \
                ratio("\n".join(line.strip() for line in news),
                      "\n".join(line.strip() for line in olds), IN_PLACE):
            continue
        if m.doubt(hunk, f"unlike {side}", lo, (
                f"its {'last' if side == 'after' else 'first'} new line(s) were written "
                f"in place of original lines {lo + 1}-{hi} "
                f"({m.orig[lo].strip()[:60]!r}), which they do not resemble; if "
                f"they are added beside those lines, or replace other ones, show one "
                f"more unchanged line {'after' if side == 'after' else 'before'} them")):
            if side == "after":
                s.end = lo
            else:
                s.start = hi


def file_end_blanks(m: _Merger, s: Segment) -> None:
    """A segment that runs to the file's end on new lines: the blank lines that end the
    file are its layout, not lines the snippet removes by leaving them out."""
    if s.hunk.marker_before and not s.hunk.marker_after and s.end >= m.eof and \
            s.i1 < len(s.seg) - 1 and s.seg[-1].strip():
        while s.end > s.last and not m.orig[s.end - 1].strip():
            s.end -= 1


def top_fragment(m: _Merger, s: Segment) -> None:
    """A fragment with no marker, from the file's first line, at least half as long as
    the file (:func:`.whole.top_fragment`): the whole new file cut short (the rest
    removed), or its first part (the rest kept)? Kept, unsure; the rival removes the
    rest.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = "a = 1\\nb = 2\\nif x:\\n    pass\\nc = 3\\nif y:\\n    pass\\nd = 4\\n"
    >>> doubts_raised(orig + "e = 5\\nf = 6\\ng = 7\\nh = 8\\n", orig.replace("b = 2", "b = 20"))
    ['top fragment']
    """
    if not (s.implied and whole.top_fragment(s.seg, m.orig, m.eof, s.p.pairs, s.end)):
        return
    m.unsure(s.end + 1, f"{s.hunk.label}: no marker comes before or after it, and it "
                        f"starts with the file's first line and is at least half "
                        f"as long as the file, but its last line is original line "
                        f"{s.last}, so lines {s.end + 1}-{m.eof} were kept; if the "
                        f"snippet is the whole new file send all of it, else add "
                        f"a marker after it", local=False)
    if (s.hunk.number, "after") in m.edge_flips:
        s.end = m.eof
    m.edge_choices.append((s.hunk.number, "after"))
