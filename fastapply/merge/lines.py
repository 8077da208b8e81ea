"""The original's lines by key and by word, and how alike two lines are: the indexes and
weights that both passes of the lazy merge (and the SEARCH/REPLACE search) read."""

from __future__ import annotations

import itertools
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TypeVar

from fastapply.merge.costs import BLANK_WEIGHT, SIMILAR, SIMILAR_PROBES, UNIT, WorkBudget

_WORD = re.compile(r"\w+|[^\w\s]+")
T = TypeVar("T")


def key_exact(line: str) -> str:
    return line.rstrip()


def key_loose(line: str) -> str:
    return line.strip()


#: The key functions as the str methods they call (mapped at C speed over large files).
_METHODS: dict[Callable[[str], str], Callable[[str], str]] = {key_exact: str.rstrip,
                                                              key_loose: str.strip}


def _grouped(pairs: Iterable[tuple[str, T]]) -> dict[str, list[T]]:
    """The values of ``pairs`` by key, in order (a loop, not setdefault: large files)."""
    out: dict[str, list[T]] = {}
    get = out.get
    for k, v in pairs:
        vs = get(k)
        if vs is None:
            out[k] = [v]
        else:
            vs.append(v)
    return out


def positions(orig: Sequence[str], key: Callable[[str], str]) -> dict[str, list[int]]:
    """Original line numbers (0-based) by key."""
    return _grouped(zip(map(_METHODS.get(key, key), orig), itertools.count()))


def weight(k: str, count: int) -> int:
    """Match weight of a line whose key occurs ``count`` times in the original.

    >>> weight("return x", 1), weight("}", 25), weight("", 300)
    (1000, 200, 20)
    """
    if not k.strip():
        return BLANK_WEIGHT
    return max(BLANK_WEIGHT, int(UNIT / math.sqrt(max(1, count))))


def _same(a: Sequence[str], b: Sequence[str], to_the_end: bool) -> bool:
    """Are the two runs of lines equal (ignoring blank lines at the end of the file)?"""
    a, b = list(a), list(b)
    while to_the_end and a and not a[-1].strip():
        a.pop()
    while to_the_end and b and not b[-1].strip():
        b.pop()
    return a == b


def word_index(table: dict[str, list[int]]) -> dict[str, list[str]]:
    """The original's distinct lines (keys of ``table``) by each word they hold."""
    words = _WORD.findall  # (not ``tokens``: its cache is for the merge)
    return _grouped((w, okey) for okey in table for w in set(words(okey)))


#: What a WordIndex may spend scanning before it builds the index, in passes over the
#: text (one pass: a regular expression over every distinct line). Building the index
#: costs about nine (3 MB of short lines: 550 ms, a pass 60 ms), so scanning adds at
#: most about half to the worst case, and a few look-ups cost a fraction of the index.
INDEX_PASSES = 4.0
#: Texts (the distinct lines) shorter than this get the whole index at once: below a
#: megabyte it costs under 0.2 s, and a scan's own overhead weighs more.
SCAN_CHARS = 1_000_000
#: Cost, in passes, of counting a word's copies (``str.count``: about a fiftieth of one).
COUNT_PASS = 0.02
_WORDLIKE = re.compile(r"\w")
_SYMBOL = re.compile(r"[^\w\s]")


class WordIndex:
    """``word_index(table)``, built only if many words are looked up.

    A small edit to a large file looks up a few words (the changed lines' rarest ones),
    but the whole index of a 3 MB file took 0.65 s to build. Words are first found by
    scanning the distinct lines: a word's copies are counted (C speed); a rare one's
    copies are checked for token edges one by one, a common one's lines are read with
    one regular expression. Once the scans have cost INDEX_PASSES passes over the text
    the index is built. Either way ``get`` gives the same lists, in ``table``'s order.

    >>> table = positions(["a = f(x)", "b = g(y)", "a = f(z)", "ab = (x)"], key_exact)
    >>> index = WordIndex(table)
    >>> words = ("a", "(", ")", "=", "ab", "f", "q")
    >>> [index.get(w) for w in words] == [word_index(table).get(w, ()) for w in words]
    True
    >>> index.get("a")
    ['a = f(x)', 'a = f(z)']
    >>> index.get("q")
    ()
    """

    def __init__(self, table: dict[str, list[int]]) -> None:
        self._table = table
        self._keys: list[str] = []  # the distinct lines, and joined (made by a first scan)
        self._text = ""
        self._starts: list[int] | None = None
        self._found: dict[str, list[str]] = {}
        self._full: dict[str, list[str]] | None = None
        # what the scans have cost so far (a small text's index is built at once)
        size = sum(map(len, table)) + len(table)
        self.passes = 0.0 if size >= SCAN_CHARS else INDEX_PASSES

    def get(self, word: str, default: Sequence[str] = ()) -> Sequence[str]:
        if self._full is None and word not in self._found and self.passes >= INDEX_PASSES:
            self._full = word_index(self._table)
        if self._full is not None:
            return self._full.get(word, default)
        lines = self._found.get(word)
        if lines is None:
            lines = self._found[word] = self._scan(word)
        return lines if lines else default

    def _scan(self, word: str) -> list[str]:
        """The distinct lines holding ``word`` as one of their tokens, in order."""
        if not self._keys:
            self._keys = list(self._table)
            self._text = "\n".join(self._keys)
        text = self._text
        copies = text.count(word)
        self.passes += COUNT_PASS
        if not copies:
            return []
        edge = _WORDLIKE if _WORDLIKE.match(word) else _SYMBOL
        if copies > len(text) // 200:  # a common word: each line once, at C speed
            self.passes += 1
            return re.findall(f"(?m)^.*?(?<!{edge.pattern}){re.escape(word)}"
                              f"(?!{edge.pattern}).*$", text)
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", text))]
            self.passes += 1
        found: list[str] = []
        last = -1
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if not (at and edge.match(text, at - 1)) and not edge.match(text, end):
                i = bisect_left(self._starts, at + 1) - 1
                if i != last:
                    found.append(self._keys[i])
                    last = i
            at = text.find(word, at + 1)
        return found


def _similar_lines(skeys: Sequence[str], lo: int, table: dict[str, list[int]],
                   index: WordIndex, budget: WorkBudget) -> list[int]:
    """Original lines (>= lo) most like the segment's changed lines (edited in place).

    Anchors of generic context (blank lines, ``}``) fit many places; an edited line
    still shares most words with the line it replaces, so that place is a candidate.
    A line is like another when they share more than SIMILAR of their words, so it must
    hold one of the changed line's rarest ``len - need + 1`` words (``need`` = the words
    it must share): only the lines holding those are compared (prefix filtering).

    >>> table = positions(["a = f(x)", "b = g(y)", "a = f(z)"], key_exact)
    >>> _similar_lines(["a = f(y)"], 0, table, WordIndex(table), WorkBudget())
    [0]
    """
    changed = [k for k in skeys if k.strip() and k not in table]
    found: list[int] = []
    for k in changed[:SIMILAR_PROBES]:
        toks = tokens(k)
        need = int(SIMILAR * len(toks)) + 1
        rare = sorted(toks, key=lambda w: (len(index.get(w, ())), w))[:len(toks) - need + 1]
        okeys = {okey for w in rare for okey in index.get(w, ())}
        budget.spend(len(okeys))
        best, where = SIMILAR, -1
        for okey in okeys:
            js = table[okey]
            at = bisect_left(js, lo)
            if at == len(js):
                continue
            j = js[at]  # each distinct original line once, at its first position >= lo
            sim = similarity(toks, tokens(okey))
            if sim > best or (sim == best and 0 <= j < where):
                best, where = sim, j
        if where >= 0 and where not in found:
            found.append(where)
    return found


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Share of two lines' words (and symbol runs) they have in common, 0 to 1."""
    if not a or not b or a.isdisjoint(b):
        return 0.0
    return len(a & b) / max(len(a), len(b))


@lru_cache(maxsize=1 << 16)
def tokens(line: str) -> frozenset[str]:
    """The words of a line (for a cheap similarity between a line and its edit)."""
    return frozenset(_WORD.findall(line))
