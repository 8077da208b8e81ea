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

#: How alike a new line and the original line at its place must be (difflib's ratio of
#: their stripped text) to read the new line as an edit of it.
ALIKE = 0.6
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
    >>> alike("new_1 = 0", "line_1 = 1")
    False
    """
    a, b = new.strip(), old.strip()
    if len(a) < SHORTEST or len(b) < SHORTEST or a == b or \
            len(new) - len(new.lstrip()) != len(old) - len(old.lstrip()):
        return False
    ka, kb = _KEY.match(a), _KEY.match(b)
    if ka and kb:  # two settings: alike if they set one key (new_1 = 0 is no line_1 = 1)
        return ka.group(1) == kb.group(1)
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= ALIKE


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

    def count(news: list[str], olds: list[str]) -> int:
        n = 0
        while n < min(len(news), len(olds)) and alike(news[n], olds[n]) and \
                olds[n].strip() not in snippet_lines:
            n += 1
        return n

    matched = [i for i, _ in pairs if seg[i].strip()]
    if not matched:
        return []
    last = matched[-1]
    news = [s for s in seg[last + 1:] if s.strip()]
    if marker_after and news:
        n = count(news, orig[end:])
        if n == len(news):
            found.append(Beside("after", end, end + n))
    first = matched[0]
    news = [s for s in seg[:first] if s.strip()][::-1]
    if marker_before and news:
        n = count(news, orig[:start][::-1])
        if n == len(news):
            found.append(Beside("before", start - n, start))
    return found
