"""A changed line shown in place: replace the line there, or insert it beside?

Agents show a one-line change with one anchor: ``version='1.0',`` then
``description='New text',`` then a marker. The segment's last line is new, and a marker
keeps what follows the anchor, so read literally the new line is inserted and the old
``description='Old text',`` stays beside it, twice described. Where the original line at
the new line's place (right after the anchor, or right before it at a segment's start)
nearly equals the new line and the snippet never shows it, the new line most likely
replaces it: the merge reads it so, is unsure, and builds the insertion as the rival.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from fastapply.merge.definitions import defined_name

#: How alike a new line and the original line at its place must be (difflib's ratio of
#: their stripped text) to read the new line as an edit of it.
ALIKE = 0.6
#: The same, for two lines that set different keys.
ALIKE_KEYS = 0.8
#: Characters of each line compared (difflib is quadratic in them).
LONGEST = 400
#: Shortest stripped line compared (``}``, ``end``, ``)`` are alike everywhere).
SHORTEST = 4


@dataclass(frozen=True)
class Beside:
    """New lines at a segment's edge that nearly equal the original lines at their place."""

    #: "after" (new lines between the segment's last anchor and its marker) or "before".
    side: str
    #: The original lines, 0-based [lo, hi), the new lines would replace.
    lo: int
    hi: int


#: The key a line sets (``description=``, ``"version":``, ``var Action =``): two lines
#: that set the same key are one setting edited.
_KEY = re.compile(r"^\s*(?:(?:var|let|const|val|my|local)\s+)?([\w$.'\"-]+)\s*(?::(?!:)|=(?!=))")


def alike(new: str, old: str) -> bool:
    """Is ``new`` an edit of ``old``: same indentation, and most of the text or the same
    key set?

    >>> alike("    'pytest',", "    'pytest==3.9.2',"), alike("  }", "  }"), alike("a", "b = 2")
    (True, False, False)
    >>> alike("    description='An ASGI server',", "    description='Fast web APIs',")
    True
    >>> alike("new_1 = 0", "line_1 = 1"), alike("var Action = Show", "var DefaultAction = Show")
    (False, True)
    >>> alike("def zzz():", "def a():"), alike("func F(t T) {", "func F(t *testing.T) {")
    (False, True)
    """
    a, b = new.strip(), old.strip()
    if len(a) < SHORTEST or len(b) < SHORTEST or a == b or \
            len(new) - len(new.lstrip()) != len(old) - len(old.lstrip()):
        return False
    da, db = defined_name(new), defined_name(old)
    if da and db and not ratio(da.split()[-1], db.split()[-1], ALIKE):  # two names
        return False
    ka, kb = _KEY.match(a), _KEY.match(b)
    if ka and kb and ka.group(1) == kb.group(1):  # one key set twice
        return True
    # two settings of other keys must be nearly the same text (``var Action = ShowHelp``
    # beside ``var DefaultAction = ShowHelp``; ``new_1 = 0`` is no ``line_1 = 1``)
    least = ALIKE_KEYS if ka and kb else ALIKE
    return ratio(a, b, least)


def ratio(a: str, b: str, least: float) -> bool:
    """difflib's ratio of ``a`` and ``b`` reaches ``least`` (their first LONGEST
    characters compared: a minified line must not cost seconds), the cheap bounds first."""
    m = difflib.SequenceMatcher(None, a[:LONGEST], b[:LONGEST], autojunk=False)
    return m.real_quick_ratio() >= least and m.quick_ratio() >= least and m.ratio() >= least


def reach(news: list[str], olds: list[str], shown: frozenset[str]) -> int:
    """How many of ``olds`` (original lines outwards from a region's edge) the ``news``
    (the segment's lines outwards from its last anchor) rewrite, pairing their non-blank
    lines in order (blank lines on either side skipped): each pair alike or equal, at
    least one alike, an alike original line not shown elsewhere in the snippet; the
    blank lines after the last pair are taken as far as the segment has blank lines
    there. 0 where they do not pair so.

    >>> reach(["", "# doc", "var A = 1"], ["", "# doc", "var AB = 1", "x = 2"], frozenset())
    3
    """
    j = 0
    edited = False
    for new in news:
        if not new.strip():
            continue
        while j < len(olds) and not olds[j].strip():
            j += 1
        if j == len(olds):
            return 0
        old = olds[j]
        if new.strip() == old.strip():
            j += 1
            continue
        if not alike(new, old) or old.strip() in shown:
            return 0
        edited = True
        j += 1
    if not edited:
        return 0
    tail = 0  # the segment's blank lines next to its marker
    while tail < len(news) and not news[len(news) - 1 - tail].strip():
        tail += 1
    taken = 0
    while taken < tail and j + taken < len(olds) and not olds[j + taken].strip():
        taken += 1
    return j + taken


def beside(orig: list[str], seg: list[str], pairs: tuple[tuple[int, int], ...], start: int,
           end: int, snippet_lines: frozenset[str], marker_before: bool,
           marker_after: bool) -> list[Beside]:
    """The edges of a segment placed at ``orig[start:end]`` whose new lines (the non-blank
    lines past its last matched one, before its marker; or before its first) nearly equal
    the original lines just past the region (:func:`alike`), line by line outwards from
    the region, where the snippet never shows those original lines.

    >>> orig = ["setup(", "    name='x',", "    version='1',", "    author='me',", ")"]
    >>> seg = ["    name='x',", "    version='2',"]
    >>> beside(orig, seg, ((0, 1),), 1, 2, frozenset({"name='x',", "version='2',"}),
    ...        True, True)
    [Beside(side='after', lo=2, hi=3)]
    """
    found: list[Beside] = []
    matched = [i for i, _ in pairs if seg[i].strip()]
    if not matched:
        return []
    last, first = matched[-1], matched[0]
    if marker_after and any(s.strip() for s in seg[last + 1:]):
        n = reach(seg[last + 1:], orig[end:], snippet_lines)
        if n:
            found.append(Beside("after", end, end + n))
    if marker_before and any(s.strip() for s in seg[:first]):
        n = reach(seg[:first][::-1], orig[:start][::-1], snippet_lines)
        if n:
            found.append(Beside("before", start - n, start))
    return found
