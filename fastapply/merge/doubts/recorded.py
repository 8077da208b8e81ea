"""A lazy segment's region recorded as a replacement, and the doubts read off what it
replaces: a block's tail kept or a line past it replaced, a segment found unchanged, a
blank edge, a definition removed, an agent's guess, an anchor of blank lines. Steps of
:data:`fastapply.merge.doubts.PIPELINE`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapply.merge.definitions import opens_block, removed_definitions
from fastapply.merge.edges import kept_block_tail, replaced_past_block, rival_edges
from fastapply.merge.guess import guesses as guessed
from fastapply.merge.layout import removed_runs
from fastapply.merge.lines import key_exact, key_loose
from fastapply.merge.precision import removals
from fastapply.merge.segment import Segment
from fastapply.merge.text import _Replacement, inner

if TYPE_CHECKING:
    from fastapply.merge.merger import _Merger


def _open_tail(m: _Merger, s: Segment) -> bool:
    """It ends on new lines and no marker was written after it (an implied fragment, or
    a snippet from a signature to its block's end)."""
    return s.implied or m.anchored.get(s.hunk.number, (False, False))[1]


def kept_tail(m: _Merger, s: Segment) -> None:
    """It ends on new lines with no marker after it, and the original lines after its
    region, as deep in the same block and never shown, were kept
    (:func:`.edges.kept_block_tail`): if the snippet replaced them nothing says so.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("import os\\n\\n\\ndef get(ctx, param):\\n    choices = []\\n"
    ...         "    if param.kind is not None:\\n        choices.extend(param.kind.choices)\\n"
    ...         "    return choices\\n\\n\\ndef other():\\n    return os.sep\\n")
    >>> doubts_raised(orig, "def get(ctx, param):\\n    # ... existing code ...\\n"
    ...                     "    if param.kind is not None:\\n"
    ...                     "        choices = param.kind.choices\\n"
    ...                     "    for c in choices:\\n        yield c\\n")
    ['unlike edges', 'kept tail']
    """
    span = kept_block_tail(m.orig, s.seg, s.p.pairs, s.end, m.snippet_lines) \
        if _open_tail(m, s) else None
    if span:
        m.unsure(span[0] + 1, f"{s.hunk.label}: it ends on new lines with no marker after "
                              f"it, and original lines {span[0] + 1}-{span[1]} after them, "
                              f"as deep in the same block and never shown in the snippet, "
                              f"were kept; if the snippet replaced them nothing in it says "
                              f"so: add a marker after it to keep them, or show the lines "
                              f"that end the block")


def replaced_past(m: _Merger, s: Segment) -> None:
    """The other side (:func:`.edges.replaced_past_block`): the new lines that end its
    block replaced original lines after the block, less indented and never shown.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = "def outer():\\n    def inner(f):\\n        return make(f)\\n    return inner\\n"
    >>> doubts_raised(orig, "    def inner(f):\\n        cmd = make(f)\\n        return cmd\\n")
    ['unlike edges', 'replaced past']
    """
    span = replaced_past_block(m.orig, s.seg, s.p.pairs, s.end, m.snippet_lines) \
        if _open_tail(m, s) else None
    if span:
        m.unsure(span[0] + 1, f"{s.hunk.label}: it ends on new lines with no marker after "
                              f"it, and original lines {span[0] + 1}-{span[1]} less indented "
                              f"than those lines (after their block) and never shown in "
                              f"the snippet, were replaced; if they stay, show them after "
                              f"it or add a marker after it")


def record(m: _Merger, s: Segment) -> None:
    """The region becomes a replacement; the runs of original lines it removes by
    adjacency are noted (a rival of an unsure merge keeps each, :func:`.layout.removed_runs`)."""
    m.runs.extend((len(m.replacements), k, lo, hi)
                  for k, lo, hi in removed_runs(m.orig, s.p.pairs, m.snippet_lines))
    m.replacements.append(_Replacement(s.start, s.end, s.seg))


def idle(m: _Merger, s: Segment) -> None:
    """Every segment of a lazy snippet shows a change; one between markers found as it
    stands (blank lines beside its markers aside: they are the snippet's layout) was
    placed where the change it shows (most often a deletion shown by two neighbours,
    read as kept: see DROP_DEF) does not happen. (In a snippet from a signature, the
    start of another block may show none.) A blank line added or removed inside it is
    an edit (spacing between two definitions). Judged on the chosen reading only
    (:attr:`_Merger.idle`).

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("a\\nb\\nc\\nd\\n", "# ...\\nb\\nc\\n# ...\\n")
    ['idle']
    """
    hunk = s.hunk
    if hunk.marker_before and hunk.marker_after and \
            inner(s.seg) == inner(m.orig[s.start:s.end]) and \
            hunk.number not in m.anchored and not (m.anchored and opens_block(
                [line for line in s.seg if line.strip()])):
        m.idle.append(m.found(s.start + 1, (
            f"{hunk.label}: each of its lines was found as it stands at lines "
            f"{s.start + 1}-{s.end} (blank lines beside the markers aside), so the change "
            f"it shows (a deletion?) was not read; show a unique line of unchanged "
            f"context on each side of the change"), local=False))


def count(m: _Merger, s: Segment) -> None:
    """The reading's tallies: where the next segment is looked for, definitions dropped,
    and matched lines found once in the original (anchors)."""
    m.pos = s.end
    m.drops += s.p.drops
    key = key_loose if s.loose else key_exact
    table = m._positions(key)
    s.unique = sum(1 for i, _ in s.p.pairs if len(table.get(key(s.seg[i]), ())) == 1)
    m.anchors += s.unique


def blank_end(m: _Merger, s: Segment) -> None:
    """A snippet from a signature (:func:`fastapply.merge.apply._signature_edges`) whose
    first (last) line, where no marker stands, is blank: a block's start or end is not
    a blank line, so the snippet runs on past the block where no line anchors it.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = "import os\\n\\ndef f():\\n    a = 1\\n    b = 2\\n    return a\\n\\nx = f()\\n"
    >>> doubts_raised(orig, "def f():\\n    # ...\\n    b = 3\\n    return a\\n\\n")
    ['blank end', 'misfit']
    """
    head, tail = m.anchored.get(s.hunk.number, (False, False))
    if (head and not s.seg[0].strip()) or (tail and not s.seg[-1].strip()):
        m.unsure(s.start + 1, f"{s.hunk.label}: it has no marker "
                              f"{'before' if head else 'after'} it and its "
                              f"{'first' if head else 'last'} line is blank, so where "
                              f"it ends is a guess; placed at lines {s.start + 1}-{s.end}; "
                              f"end it at the block's last line or add a marker")


def deferred(m: _Merger, s: Segment) -> None:
    """Beside a marker: the original lines it removes that the snippet never shows
    (:func:`.precision.removals`) and edges that fit another copy in the marker's gap
    (:func:`.edges.rival_edges`), noted here and judged on the chosen reading only,
    where the other segments' regions are known (:func:`fastapply.merge.apply.merge`).

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("class Request\\n  def ip\\n    @ip\\n  end\\n\\n  # shortcut for params[key]\\n"
    ...         "  def [](key)\\n    params[key.to_s]\\n  end\\n\\n  def values_at(*keys)\\n"
    ...         "    keys.map { |key| params[key] }\\n  end\\nend\\n")
    >>> doubts_raised(orig, "# ...\\n  end\\n\\n  # like Hash#values_at\\n"
    ...                     "  def values_at(*keys)\\n# ...\\n")
    ['deferred']
    """
    hunk = s.hunk
    if not (hunk.marker_before or hunk.marker_after):  # the whole file shows what it removes
        return
    m.removals.extend(removals(m.orig, s.start, s.end, s.p.pairs, s.seg, m.snippet_lines,
                               m._positions(key_loose), hunk.label))
    m.edges.extend((lo, hi, m.found(line, message)) for line, lo, hi, message
                   in rival_edges(m.orig, s.p.pairs, s.seg, m.snippet_lines,
                                  m._positions(key_loose), hunk.label,
                                  hunk.marker_before, hunk.marker_after))


def lost_definition(m: _Merger, s: Segment) -> None:
    """It removes a definition it never names, and only lines found at several places
    anchor it: new code between markers fits beside any of its lookalikes.

    >>> from fastapply.merge.apply import doubts_raised
    >>> orig = ("class A {\\n    void open() {\\n        start();\\n    }\\n\\n"
    ...         "    void build() {\\n        flush();\\n    }\\n}\\n")
    >>> doubts_raised(orig, "// ...\\n    }\\n\\n    void close() {\\n    }\\n}\\n")
    ['lost definition']
    """
    lost = [] if s.unique or s.p.rival >= 0 else \
        removed_definitions(m.orig[s.start:s.end], {j - s.start for _, j in s.p.pairs}, s.seg)
    if lost:
        m.unsure(s.start + 1, f"{s.hunk.label}: placed at lines {s.start + 1}-{s.end}, it "
                              f"removes {lost[0]!r}, which it never names, and each "
                              f"line it shares with the original is found at several "
                              f"places; show a unique line of unchanged context next "
                              f"to it")


def guesses(m: _Merger, s: Segment) -> None:
    """The shapes an agent's snippet leaves to a guess (:mod:`.guess`: a placeholder
    written for code, a marker in a string, and the others listed there).

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("def f(a):\\n    return a\\n\\nx = 1\\n",
    ...               "# ...\\nx = 1\\n\\ndef f(a, b):\\n    return a + b\\n# ...\\n")
    ['guesses']
    """
    for line, message in guessed(s.seg, m.orig, s.start, s.end, s.p.pairs, s.implied,
                                 m.snippet_lines, s.hunk.label, m._positions(key_loose)):
        m.unsure(line, message)


def blank_anchored(m: _Merger, s: Segment) -> None:
    """Placed by blank lines alone: they are everywhere, so this is a guess. (At the
    top or end of a lazy snippet the file's edge anchors it; beside a SEARCH block
    or diff hunk such lines are more likely a sentence than code.)

    >>> from fastapply.merge.apply import doubts_raised
    >>> doubts_raised("import os\\n\\nx = 1\\n\\n\\ndef a():\\n    return 1\\n",
    ...               "# ...\\n\\ndef b2():\\n    return 22\\n\\n# ...\\n")
    ['blank anchored']
    """
    between = s.hunk.marker_before and s.hunk.marker_after
    if s.p.rival < 0 and not s.misfit and (between or m.mixed) and \
            not any(s.seg[i].strip() for i, _ in s.p.pairs):
        m.unsure(s.start + 1, f"{s.hunk.label}: the only lines it shares with the "
                              f"original are blank lines, found at many places; placed "
                              f"at lines {s.start + 1}-{s.end}; show a non-blank line of "
                              f"context")
