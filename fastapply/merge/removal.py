"""What a removal marker names: agents write ``// ... (QuoteAllFields and QuoteNoFields
removed) ...`` where lines went. The merge reads such a marker by adjacency (the lines
beside it follow each other: everything between them goes); the rival reading removes,
between those lines, only the declarations the marker names, each with the comments and
attributes above it, its body and one blank line, and keeps the rest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fastapply.merge.syntax import is_commented

_WORD = re.compile(r"[A-Za-z_][\w$]*")
#: Words of a marker that name no declaration.
_PROSE_WORDS = """
a an the and or of to in on at by for from with into here there now no not is are was were be
been it its this that these those which all both each every other old new unused existing
code rest removed deleted dropped remove delete drop moved replaced renamed gone longer
anymore instead above below after before first last line lines block blocks section method
methods function functions field fields import imports test tests class struct constant
constants entry entries case cases helper helpers handler handlers check checks call calls
definition definitions declaration declarations body comment comments note notes set
unchanged kept keep same part parts file files copy copied since because so they them
"""
_PROSE = frozenset(_PROSE_WORDS.split())
#: A line that only closes a block (``}``, ``end``, ``)``, ``];``).
_CLOSER = re.compile(r"^\s*(?:[}\])]+[;,)]*|end)\s*$")


#: Lines that dress the declaration under them: annotations and decorators (``@Override``),
#: Rust and C# attributes (``#[cfg(test)]``, ``[Fact]``); comments are read by is_commented.
_DRESS = re.compile(r"^\s*(?:@\w|#!?\[|\[[A-Za-z][\w.]*(?:\(.*\))?\]\s*$)")


def dresses(line: str) -> bool:
    """Is ``line`` a comment, an annotation, a decorator or an attribute?

    >>> [dresses(s) for s in ("  /**", "   * Doc.", "#[cfg(test)]", "@Override", "x = 1")]
    [True, True, True, True, False]
    """
    return is_commented(line) or _DRESS.match(line) is not None


def marker_names(marker: str) -> frozenset[str]:
    """The words of a marker that may name what it removed.

    >>> sorted(marker_names("// ... (QuoteAllFields and QuoteNoFields removed) ..."))
    ['QuoteAllFields', 'QuoteNoFields']
    >>> sorted(marker_names("# ... the old() helper is removed ..."))
    ['old']
    """
    called = set(re.findall(r"([A-Za-z_][\w$]*)\s*\(", marker))  # ``old()``: a name
    return frozenset(w for w in _WORD.findall(marker)
                     if w in called or (len(w) > 2 and w.lower() not in _PROSE))


def named_units(lines: Sequence[str], names: frozenset[str]) -> list[tuple[int, int]]:
    """The runs [a, b) of ``lines`` (the lines a removal marker stands between) that make
    up a declaration the marker names: a line at the run's outermost indentation that is
    not a comment and has one of ``names`` as a word, the comments and attributes right
    above it, the lines indented under it, a line that closes it, and the blank lines after it
    (before it, at the run's end).

    >>> lines = ["/// A.", "bool A { get; }", "", "/// B.", "bool B { get; }", "",
    ...          "int C() {", "  return 1;", "}"]
    >>> named_units(lines, frozenset({"B", "C"}))
    [(3, 6), (6, 9)]
    """
    def depth(s: str) -> int:
        return len(s) - len(s.lstrip())

    code = [s for s in lines if s.strip() and not dresses(s)]
    if not code or not names:
        return []
    outer = min(depth(s) for s in code)
    units: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        s = lines[i]
        if not s.strip() or dresses(s) or depth(s) != outer or \
                not names & set(_WORD.findall(s)):
            i += 1
            continue
        a = i
        while a > 0 and lines[a - 1].strip() and dresses(lines[a - 1]):
            a -= 1
        b = i + 1
        while b < len(lines) and (not lines[b].strip() or depth(lines[b]) > outer):
            b += 1
        while b > i + 1 and not lines[b - 1].strip():  # blank lines under it: not its body
            b -= 1
        if b < len(lines) and _CLOSER.match(lines[b]) and depth(lines[b]) == outer:
            b += 1
        if b < len(lines) and not lines[b].strip():
            while b < len(lines) and not lines[b].strip():
                b += 1
        else:
            while a > 0 and not lines[a - 1].strip() and (not units or units[-1][1] < a):
                a -= 1
        if units and a < units[-1][1]:
            units[-1] = (units[-1][0], b)
        else:
            units.append((a, b))
        i = b
    return units
