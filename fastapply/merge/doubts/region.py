"""The region a placed lazy segment replaces: how well it fits, its indentation, and the
doubts about its edges beside a marker (blank anchors, weak anchors, lines beside it,
a block's end, lines doubled). Steps of :data:`fastapply.merge.doubts.PIPELINE`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fastapply.merge.beside import beside as beside_edges
from fastapply.merge.layout import blank_anchors as blank_anchor_runs
from fastapply.merge.layout import weak_edges as weak_edge_runs
from fastapply.merge.lines import _WORDLIKE, key_exact, key_loose
from fastapply.merge.segment import Segment, cut
from fastapply.merge.text import _indent, _reindent

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger

#: A line that only closes a block: brackets and punctuation, or a closing keyword.
CLOSING = re.compile(r"^(?:[)\]}>;,]+|end|fi|done|esac|endif|end;)$")
#: How far outside a segment's region, and how long (characters, stripped), an original
#: line kept there must be for a new line equal to it to read as doubled (:func:`doubled`).
DOUBLED_REACH, DOUBLED_MIN_CHARS = 3, 8
#: Most lines of context written again that :func:`outer_doubles` compares.
DOUBLED_RUN = 20
#: Original lines the snippet never shows that a segment anchored by a blank line alone
#: before its new first lines must remove to be doubted (:func:`blank_led`).
BLANK_LED = 3


def tie(m: _Merger, s: Segment) -> None:
    """Its anchors match equally well at two places: the first (after the previous
    segment) is used, unsure; the rival takes the other.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("a\\nb\\nc\\nb\\nd\\n", "# ...\\nb\\nX\\n# ...\\n")
    ['tie']
    """
    if s.p.rival >= 0:
        m.unsure(s.first + 1, f"{s.hunk.label}: its anchors match equally well at lines "
                              f"{s.first + 1} and {s.p.rival + 1}; used line {s.first + 1}")


def misfit(m: _Merger, s: Segment) -> None:
    """Unlike the other segments it does not show the reading's lines of context: placed
    by its best fit. Held back (:attr:`_Merger.misfits`): reported only if other segments
    fit, since a single odd one is just a style.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("type A struct {\\n\\tx int\\n}\\n\\n"
    ...         "func (a *A) One() int {\\n\\treturn 1\\n}\\n\\n"
    ...         "func (a *A) Two() int {\\n\\treturn 2\\n}\\n")
    >>> doubts_raised(orig, "type A struct {\\n\\tx int\\n"
    ...                     "\\t// ... rest of the file unchanged ...\\n}\\n\\n"
    ...                     "func (a *A) Two() int {\\n\\treturn 22\\n}\\n")
    ['misfit']
    """
    if s.p.rival >= 0:
        return
    if s.misfit:
        m.misfits.append(m.found(s.start + 1, (
            f"{s.hunk.label}: unlike the other segments it does not show {m.context} "
            f"line(s) of unchanged context beside its change; placed at lines "
            f"{s.start + 1}-{s.end} by its best fit")))
    elif m.context is not None:
        m.fits += 1


def reindent(m: _Merger, s: Segment) -> None:
    """Loose (indentation-blind) matches: the snippet lost the file's indentation (shift
    it). A single such line is weaker evidence: if earlier segments matched exactly, or
    the code around the place is not indented deeper than the snippet, that line's
    indentation changed and the snippet's text stands."""
    seg, p = s.seg, s.p
    shifted = [(i, j) for i, j in p.pairs if seg[i].strip() and seg[i] != m.orig[j]]
    if not s.loose:
        m.exact += 1
    elif len(shifted) >= 2 or (shifted and not m.exact and len(_indent(
            seg[shifted[0][0]])) < m.around(s.start, s.end)):
        i, j = shifted[0]
        s.seg = seg = _reindent(seg, _indent(seg[i]), _indent(m.orig[j]))
        for i, j in p.pairs:
            seg[i] = m.orig[j]


def blank_led(m: _Merger, s: Segment) -> None:
    """A marker, blank lines, then new code: where only those blank lines anchor the
    segment before its first matched non-blank line, the alignment chose which blank
    line of the file starts the region, and BLANK_LED or more original lines the snippet
    never shows lie between it and that match (removed, the new code read as their
    edit: it shares their generic lines). Unsure; no reading keeps them (the new code
    would need placing again).

    >>> from fastapply.merge.costs import Placement
    >>> from fastapply.merge.merger import _Merger
    >>> from fastapply.merge.syntax import Hunk
    >>> orig = ["func TestA(t *testing.T) {", "\\t})", "", '\\tt.Run("host", func(t *testing.T) {',
    ...         "\\t\\treq := acquire()", "\\t\\tdefer release(req)", "\\t})", "}", "",
    ...         "func TestJoin(t *testing.T) {"]
    >>> seg = ["", "func TestScheme(t *testing.T) {", "\\treq := acquire()", "}", "",
    ...        "func TestJoin(t *testing.T) {"]
    >>> m = _Merger(orig)
    >>> s = Segment(Hunk("lazy", (), tuple(seg), 1, 2, marker_before=True, marker_after=True),
    ...             seg, placement=Placement((2, 2), (10, 10), ((0, 2), (3, 7), (4, 8), (5, 9))))
    >>> s.region(); blank_led(m, s)
    >>> m.uncertain[0].message[33:101]
    'it opens with blank lines, then new lines; only a blank line (origin'
    """
    seg, p = s.seg, s.p
    if not s.hunk.marker_before:
        return
    matched = dict(p.pairs)
    first = next((i for i, line in enumerate(seg) if line.strip()), None)
    if first is None or first in matched or not any(i in matched for i in range(first)):
        return
    j0 = max(j for i, j in p.pairs if i < first)
    nxt = next((j for i, j in p.pairs if i > first and seg[i].strip()), s.end)
    unshown = [line.strip() for line in m.orig[j0 + 1:nxt]
               if _WORDLIKE.search(line) and line.strip() not in m.snippet_lines]
    if len(unshown) >= BLANK_LED:
        m.unsure(j0 + 2, f"{s.hunk.label}: it opens with blank lines, then new lines; "
                         f"only a blank line (original line {j0 + 1}) anchors it "
                         f"there, and placed there it removes {len(unshown)} "
                         f"original lines the snippet never shows ({unshown[0][:60]!r}"
                         f"); if they stay, show the unchanged line right before the "
                         f"new code")


def block_end(m: _Merger, s: Segment) -> None:
    """A marker indented deeper than the closing line (``}``, ``end``) that follows it
    stands for the rest of the block that line closes. Where the alignment matched that
    generic line further on, past an earlier copy of it at the same depth or less in the
    marker's gap, the block ended there and the lines between (other definitions) are
    kept only because the segment's other lines are new or found at several places:
    unsure; the rival reading starts the segment at the block's end, replacing what
    lies between. A line found once in the file among its matches places it as it is
    (agents indent "rest of the file" markers deep inside a block too).

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("type Article struct {\\n\\t*v3.Article\\n\\n\\t// Additional fields.\\n"
    ...         "\\tSelfURL string\\n}\\n\\nvar P = render.New(Convert)\\n\\n"
    ...         "func Convert(from *v3.Article) *Article {\\n"
    ...         "\\treturn &Article{Article: from}\\n}\\n")
    >>> doubts_raised(orig, "// ...\\ntype Article struct {\\n\\t*data.Article\\n\\n"
    ...                     "\\t// Additional fields.\\n\\t// ... existing code ...\\n}\\n\\n"
    ...                     "func NewArticle(a *data.Article) *Article {\\n"
    ...                     "\\treturn &Article{Article: a}\\n}\\n")
    ['block end']
    """
    seg, p, hunk = s.seg, s.p, s.hunk
    if not hunk.marker_indent or not p.pairs:
        return
    head = next((i for i, line in enumerate(seg) if line.strip()), None)
    matched = dict(p.pairs)
    if head is None or head not in matched or not CLOSING.match(seg[head].strip()):
        return
    depth = len(_indent(seg[head]))
    if depth >= len(hunk.marker_indent):
        return
    table = m._positions(key_exact)
    if any(len(table.get(key_exact(seg[i]), ())) == 1 for i in matched if i > head):
        return  # a line found once anchors it there
    j = matched[head]
    k = next((k for k in range(m.pos, j) if m.orig[k].strip() and
              len(_indent(m.orig[k])) <= depth), None)
    if k is None or m.orig[k].strip() != seg[head].strip():
        return
    if m.doubt(hunk, "block end", k, (
            f"the marker before it is indented deeper than its first line "
            f"{seg[head].strip()!r}, so it stands for the rest of the block that line "
            f"closes, which ends at original line {k + 1}; the segment was matched at "
            f"line {j + 1} instead, keeping original lines {k + 1}-{j} (if they are "
            f"replaced, show the block's last lines before the marker; if they stay, "
            f"add a marker after the block's end)")):
        s.start = k


def blank_edges(m: _Merger, s: Segment) -> None:
    """The region's ends where the segment meets a marker with blank lines: the blank
    run between its last (first) matched line and the gap keeps as many blank lines
    as the longer of the snippet's and the original's, not their sum nor fewer (a
    snippet's blank line before a marker is layout; which copy of a blank line the
    alignment matched says nothing)."""
    seg, pairs, hunk = s.seg, s.p.pairs, s.hunk
    nonblank = [i for i, line in enumerate(seg) if line.strip()]
    if not nonblank or not pairs:
        return
    matched = dict(pairs)
    last, first = nonblank[-1], nonblank[0]
    if hunk.marker_after and last in matched and last < len(seg) - 1:
        j, k = matched[last] + 1, len(seg) - 1 - last
        n, most = 0, max(k, s.end - j)  # (no further than needed: a run can be long)
        while n < most and j + n < m.eof and not m.orig[j + n].strip():
            n += 1
        if j <= s.end <= j + n:
            s.end = j + min(k, n)
    if hunk.marker_before and first in matched and first > 0:
        j = matched[first]
        n, most = 0, max(first, j - s.start)
        while n < most and j - n - 1 >= 0 and not m.orig[j - n - 1].strip():
            n += 1
        if j - n <= s.start <= j:
            s.start = j - min(first, n)
    elif hunk.marker_before and first > 0 and first not in matched:
        # its first non-blank line is new: the blank lines above it still meet the
        # original's blank run there, wherever the alignment matched one of them
        s.start = blank_run_edge(m.orig, m.eof, s.start, s.end, first, "before")
    if hunk.marker_after and last < len(seg) - 1 and last not in matched:
        s.end = blank_run_edge(m.orig, m.eof, s.start, s.end, len(seg) - 1 - last, "after")


def blank_run_edge(orig: list[str], eof: int, start: int, end: int, k: int, side: str
                   ) -> int:
    """The region's edge on ``side`` where the segment's ``k`` blank lines there meet
    the original's blank run around that edge (kept outside the region, replaced
    inside it up to its first non-blank line): as many blank lines as the longer of
    the two runs, not their sum.

    >>> orig = ['#', "", "", "def f(a):", "    return a", "", "", "def g():"]
    >>> blank_run_edge(orig, 8, 2, 5, 2, "before")  # 2 blank lines, not 3
    1
    """
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
    while end + out < eof and not orig[end + out].strip():
        out += 1
    inside = 0
    while end - inside - 1 >= start and not orig[end - inside - 1].strip():
        inside += 1
    extra = out + k - max(k, out + inside)
    return end + max(0, min(extra, out))


def blank_anchors(m: _Merger, s: Segment) -> None:
    """Keep the unshown lines that only blank lines beside a marker would remove
    (:func:`.layout.blank_anchors`), unsure; the rival reading (an edge flip) removes
    them.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("def f():\\n    return 1\\n# about g\\n\\ndef g():\\n    return 2\\n",
    ...               "def f():\\n    x = 10\\n    return 1\\n\\n# ...\\n")
    ['blank anchors']
    """
    for a in blank_anchor_runs(m.orig, s.seg, s.p.pairs, s.start, s.end, m.snippet_lines,
                               s.hunk.marker_before, s.hunk.marker_after):
        shown = m.orig[a.lo].strip()[:60]
        where = "between its marker and its first line" if a.side == "before" else \
            "between its last line and its marker"
        # Read with a fixed number of context lines (a textbook snippet: the blank
        # line is one of them) the removal stands; read freely (as agents write),
        # the blank line is layout and the lines stay. Either way the other reading
        # is the rival.
        keep = m.context is None
        if m.doubt(s.hunk, f"blank {a.side}", a.lo, (
                f"only blank lines stand {where}, so original lines {a.lo + 1}-{a.hi} "
                f"({shown!r}), which the snippet never shows, were "
                f"{'kept' if keep else 'removed'}; "
                f"{'if the edit removes them' if keep else 'if they stay'}, show the "
                f"unchanged line on their other side as context")) == keep:
            continue
        if a.side == "before":  # the blank lines beside the marker go with it
            s.start, s.seg, s.p = a.edge, s.seg[a.cut:], cut(s.p, "before", a.cut, shift=True)
        else:
            s.end, s.seg = a.edge, s.seg[:len(s.seg) - a.cut]
            s.p = cut(s.p, "after", len(s.seg))


def weak_edges(m: _Merger, s: Segment) -> None:
    """A removal that only lines found at several places anchor, at an edge beside a
    marker (:func:`.layout.weak_edges`): unsure; read freely, the weak lines are new
    and nothing goes; read with fixed context, the removal stands.

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("- name: A\\n  run: >\\n    x\\n- name: B\\n  run: |\\n    y\\n",
    ...               "# ...\\n- name: A\\n  run: |\\n# ...\\n")
    ['weak edges']
    """
    table = m._positions(key_loose)
    several = {i for i, line in enumerate(s.seg)
               if line.strip() and len(table.get(key_loose(line), ())) > 1}
    for w in weak_edge_runs(m.orig, s.seg, s.p.pairs, s.start, s.end, m.snippet_lines,
                            several, s.hunk.marker_before, s.hunk.marker_after):
        keep = m.context is None
        edge = "last" if w.side == "after" else "first"
        if m.doubt(s.hunk, f"weak {w.side}", w.lo, (
                f"its {edge} lines are found at several places, and where they were "
                f"matched they remove original lines {w.lo + 1}-{w.hi} "
                f"({m.orig[w.lo].strip()[:60]!r}), which the snippet never shows: "
                f"{'read as new lines, nothing was removed' if keep else 'they were removed'}"
                f"; show a unique line of unchanged context next to the change")) == keep:
            continue
        if w.side == "after":
            s.end = w.edge
        else:
            s.start = w.edge
        s.p = cut(s.p, w.side, w.cut)


def beside(m: _Merger, s: Segment) -> None:
    """New lines next to a marker that nearly equal the original lines at their place
    replace them (:mod:`.beside`), unsure; the rival inserts them beside.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("setup(\\n    name='x',\\n"
    ...         "    description='Blazingly fast & beautifully expressive',\\n"
    ...         "    author='me',\\n)\\n")
    >>> doubts_raised(orig, "# ...\\n    description='An ASGI server, using Gunicorn.',\\n"
    ...                     "    author='me',\\n# ...\\n")
    ['beside']
    """
    for b in beside_edges(m.orig, s.seg, s.p.pairs, s.start, s.end, m.snippet_lines,
                          s.hunk.marker_before, s.hunk.marker_after):
        edge = "last" if b.side == "after" else "first"
        if m.doubt(s.hunk, f"beside {b.side}", b.lo, (
                f"its {edge} line(s) are new and nearly equal original lines "
                f"{b.lo + 1}-{b.hi} ({m.orig[b.lo].strip()[:60]!r}) at their place, "
                f"so they replace them; if they are added beside them, show those lines "
                f"too, unchanged")):
            continue
        if b.side == "after":
            s.end = b.hi
        else:
            s.start = b.lo


def doubled(m: _Merger, s: Segment) -> None:
    """A new line at the segment's edge that is, word for word, an original line found
    once in the file and kept just outside the region (the alignment let it go, to keep
    its context runs short), or the context beside a blank anchor written again
    (:func:`outer_doubles`): the file would hold that line twice, where the snippet
    most likely showed it as context. Unsure; no reading has it matched (its change
    beside it would need placing again).

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("class C(Base):\\n    def __init__(self, a=None, b=None,\\n"
    ...         "                 c=None, **kw):\\n        \\"\\"\\"Doc.\\"\\"\\"\\n"
    ...         "        super(C, self).__init__(\\n            a=a, b=b,\\n            c=c)\\n"
    ...         "        if kw_given_here:\\n            kw = dict(kw)\\n        self.kw = kw\\n\\n"
    ...         "    def run(self):\\n        return self.kw\\n")
    >>> doubts_raised(orig, "class C(Base):\\n    def __init__(self, a=None, **kw):\\n"
    ...                     "        # ... docstring unchanged ...\\n"
    ...                     "        super(C, self).__init__(a=a)\\n        if kw_given_here:\\n"
    ...                     "            kw = dict(kw)\\n        self.kw = kw\\n\\n# ...\\n")
    ['doubled']
    """
    seg, p, start, end = s.seg, s.p, s.start, s.end
    if not p.pairs:
        return
    table = m._positions(key_exact)
    i0, i1 = p.pairs[0][0], p.pairs[-1][0]
    edges = ((range(i0), range(start - 1, max(-1, start - 1 - DOUBLED_REACH), -1)),
             (range(i1 + 1, len(seg)), range(end, min(m.eof, end + DOUBLED_REACH))))
    doubles: list[tuple[str, int]] = []
    for new, near in edges:
        kept = {m.orig[j]: j for j in near
                if len(m.orig[j].strip()) >= DOUBLED_MIN_CHARS and
                len(table.get(key_exact(m.orig[j]), ())) == 1}
        doubles += [(seg[i], kept[seg[i]]) for i in new if seg[i] in kept]
    for line, j in doubles or outer_doubles(m.orig, m.eof, start, end, seg, p.pairs):
        m.unsure(j + 1, f"{s.hunk.label}: its line {line.strip()[:60]!r} is new where "
                        f"it was placed, but it is original line {j + 1}, kept right "
                        f"beside it, so the file would hold that line twice; if it "
                        f"is context, show one more unchanged line beside it, or send "
                        f"the change as SEARCH/REPLACE blocks")
        return


def outer_doubles(orig: list[str], eof: int, start: int, end: int, seg: list[str],
                  pairs: tuple[tuple[int, int], ...]) -> list[tuple[str, int]]:
    """New lines that open (close) the segment's new lines, with only blank lines,
    matched, between them and the segment's edge, while the original lines kept right
    past that edge (blank lines aside) are the same lines: the alignment took a blank
    line as the anchor and wrote the context shown beside it again (an ``end``
    written after a block's blank line is removed; four lines of context under a
    marker and a blank line). Any lines, generic ones too: (first text, original
    line) pairs.
    """
    nonblank = [i for i, line in enumerate(seg) if line.strip()]
    if not nonblank:
        return []
    matched = dict(pairs)
    found: list[tuple[str, int]] = []
    last, first = nonblank[-1], nonblank[0]
    if last not in matched and any(i in matched for i in range(last + 1, len(seg))):
        q = next((j for j in range(end, min(eof, end + DOUBLED_REACH)) if orig[j].strip()),
                 None)
        run = _new_run(seg, matched, last, -1)
        if q is not None and any(run[:n][::-1] == orig[q:q + n] for n in range(1, len(run) + 1)):
            found.append((seg[last], q))
    if first not in matched and any(i in matched for i in range(first)):
        q = next((j for j in range(start - 1, max(-1, start - 1 - DOUBLED_REACH), -1)
                  if orig[j].strip()), None)
        run = _new_run(seg, matched, first, 1)
        if q is not None and any(run[:n] == orig[q - n + 1:q + 1]
                                 for n in range(1, min(len(run), q + 1) + 1)):
            found.append((seg[first], q))
    return found


def _new_run(seg: list[str], matched: dict[int, int], at: int, step: int) -> list[str]:
    """The segment's new lines read from ``at`` forwards (``step`` 1) or backwards (-1),
    up to the first blank or matched one, at most DOUBLED_RUN of them."""
    run: list[str] = []
    i = at
    while 0 <= i < len(seg) and i not in matched and seg[i].strip() and len(run) < DOUBLED_RUN:
        run.append(seg[i])
        i += step
    return run

