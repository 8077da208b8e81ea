"""The three snippets of one change, generated from the true change (original -> updated).

Each generator returns text that, applied correctly to ``original``, gives exactly
``updated``: :func:`lazy_snippet` in the styles LLMs write (comment markers of the
language, several wordings, bare ``...``, 1-3 lines of context, markers indented like
their neighbourhood), :func:`search_replace` with SEARCH texts unique in the original,
:func:`udiff` with three lines of context (``patch`` applies it).
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from fastapply.corpus.languages import COMMENTS, WORDINGS
from fastapply.merge.edits import is_marker

#: SEARCH blocks are widened at most this many lines each side to make them unique.
MAX_WIDEN = 40


@dataclass(frozen=True)
class Span:
    """A run of lines shown in a snippet: ``old[i1:i2]`` becomes ``new[j1:j2]``."""

    i1: int
    i2: int
    j1: int
    j2: int


def _changes(old: Sequence[str], new: Sequence[str]) -> list[Span]:
    sm = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    return [Span(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def spans(old: Sequence[str], new: Sequence[str], before: Sequence[int],
          after: Sequence[int]) -> list[Span]:
    """Changes widened by ``before[k]``/``after[k]`` lines of context, overlapping or
    touching ones joined (a marker never stands for zero lines).

    >>> spans("a b c d e f".split(), "a B c d e F".split(), [1, 1], [1, 1])
    [Span(i1=0, i2=3, j1=0, j2=3), Span(i1=4, i2=6, j1=4, j2=6)]
    """
    out: list[Span] = []
    for k, c in enumerate(_changes(old, new)):
        b = min(before[k], c.i1, c.j1)
        a = min(after[k], len(old) - c.i2, len(new) - c.j2)
        s = Span(c.i1 - b, c.i2 + a, c.j1 - b, c.j2 + a)
        if out and s.i1 <= out[-1].i2:
            s = Span(out[-1].i1, s.i2, out[-1].j1, s.j2)
            out.pop()
        out.append(s)
    return out


def lines_of(text: str) -> list[str]:
    """Lines split at "\\n" only (``str.splitlines`` also splits at form feeds and other
    separators that the merge keeps inside a line).

    >>> lines_of("a\\fb\\nc\\n"), lines_of("a\\nb")
    (['a\\x0cb', 'c'], ['a', 'b'])
    """
    parts = text.split("\n")
    return parts[:-1] if text.endswith("\n") else parts


def _keep_ends(text: str) -> list[str]:
    return [s + "\n" for s in lines_of(text)] if text.endswith("\n") else \
        [s + "\n" for s in lines_of(text)[:-1]] + lines_of(text)[-1:]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _first_indent(lines: Sequence[str], default: str = "") -> str:
    return next((_indent(s) for s in lines if s.strip()), default)


def _anchored_context(old: Sequence[str], new: Sequence[str], context: tuple[int, int]
                      ) -> tuple[list[int], list[int]]:
    """Per change, context before/after widened (at most 3 more lines) until it holds a
    non-blank line: an LLM shows a line that says where the change goes."""
    changes = _changes(old, new)
    before, after = [], []
    for c in changes:
        b, a = context
        while b < context[0] + 3 and c.i1 - b > 0 and not any(
                s.strip() for s in old[c.i1 - b:c.i1]):
            b += 1
        while a < context[1] + 3 and c.i2 + a < len(old) and not any(
                s.strip() for s in old[c.i2:c.i2 + a]):
            a += 1
        before.append(b)
        after.append(a)
    return before, after


def lazy_snippet(original: str, updated: str, language: str, rng: random.Random) -> str:
    """A lazy snippet of the change in a style drawn from ``rng`` (see :func:`lazy_parts`).

    >>> print(lazy_snippet("a\\nb\\nc\\nd\\ne\\n", "a\\nb\\nC\\nd\\ne\\n", "python",
    ...                    random.Random(0)), end="")
    a
    b
    C
    d
    # ... (existing code) ...
    """
    return lazy_parts(original, updated, language, rng)[0]


def lazy_parts(original: str, updated: str, language: str, rng: random.Random
               ) -> tuple[str, str]:
    """The lazy snippet and its expansion: the snippet with every marker replaced by the
    original lines it stands for (``updated``: the generator's own check), or "" when a
    line the snippet shows reads as a marker itself (``// ...`` in a Markdown code
    block, ``...`` in a Python stub): such a snippet is ambiguous."""
    old, new = lines_of(original), lines_of(updated)
    ctx = rng.choice((1, 2, 2, 3, 3))
    context = (ctx, ctx) if rng.random() < 0.7 else (rng.randint(1, 3), rng.randint(1, 3))
    before, after = _anchored_context(old, new, context)
    groups = spans(old, new, before, after)
    templates = COMMENTS.get(language, ("// {}",))
    if language in ("markdown", "json"):
        templates = (*templates, "{}")
    template = templates[0] if rng.random() < 0.7 else rng.choice(templates)
    wording = rng.choice(WORDINGS)
    mixed = rng.random() < 0.15  # a new wording at each marker
    bare = rng.random() < 0.05  # bare "..." markers
    by_elided = rng.random() < 0.7  # indent like the elided lines, else like the neighbour

    def marker(elided: Sequence[str], neighbour: Sequence[str]) -> str:
        word = rng.choice(WORDINGS) if mixed else wording
        t = template
        if language == "vue":  # markup comments in the template, // in the script
            near = next((s.strip() for s in neighbour if s.strip()), "<")
            t = "<!-- {} -->" if near.startswith("<") else "// {}"
        # without a comment, only a bare "..." reads as a marker ("... rest" may be code)
        text = "..." if bare or t == "{}" else t.format(word)
        indent = _first_indent(elided) if by_elided else _first_indent(neighbour)
        return indent + text

    out: list[str] = []
    expanded: list[str] = []
    prev = 0
    for g in groups:
        if g.i1 > prev:
            out.append(marker(old[prev:g.i1], out[::-1] if out else new[g.j1:g.j2]))
            expanded.extend(old[prev:g.i1])
        out.extend(new[g.j1:g.j2])
        expanded.extend(new[g.j1:g.j2])
        prev = g.i2
    if prev < len(old):
        out.append(marker(old[prev:], out[::-1]))
        expanded.extend(old[prev:])
    if any(is_marker(s) for g in groups for s in new[g.j1:g.j2]):
        return "".join(s + "\n" for s in out), ""
    return "".join(s + "\n" for s in out), "".join(s + "\n" for s in expanded)


def search_replace(original: str, updated: str) -> str | None:
    """SEARCH/REPLACE blocks with two lines of context each side, widened until each
    SEARCH text occurs once in the original; None if that cannot be done.

    >>> search_replace("x\\na\\nx\\nb\\n", "x\\na\\nx\\nB\\n").split("\\n")
    ['<<<<<<< SEARCH', 'a', 'x', 'b', '=======', 'a', 'x', 'B', '>>>>>>> REPLACE', '']
    """
    old, new = lines_of(original), lines_of(updated)
    n = len(_changes(old, new))
    if n == 0:
        return None
    before, after = [2] * n, [2] * n
    for _ in range(MAX_WIDEN):
        groups = spans(old, new, before, after)
        bad = [g for g in groups if _count(old, old[g.i1:g.i2]) != 1]
        if not bad:
            break
        for k, c in enumerate(_changes(old, new)):
            if any(g.i1 <= c.i1 and c.i2 <= g.i2 for g in bad):
                before[k] += 1
                after[k] += 1
    else:
        return None
    blocks = []
    for g in groups:
        blocks.append("<<<<<<< SEARCH\n" + "".join(s + "\n" for s in old[g.i1:g.i2])
                      + "=======\n" + "".join(s + "\n" for s in new[g.j1:g.j2])
                      + ">>>>>>> REPLACE\n")
    return "\n".join(blocks)


def _count(hay: Sequence[str], needle: Sequence[str]) -> int:
    """How many times the line run ``needle`` occurs in ``hay`` (0 for an empty or
    blank-only needle: it anchors nothing)."""
    if not any(s.strip() for s in needle):
        return 0
    m = len(needle)
    return sum(1 for j in range(len(hay) - m + 1)
               if hay[j] == needle[0] and list(hay[j:j + m]) == list(needle))


def udiff(original: str, updated: str, path: str) -> str:
    """A unified diff with three lines of context, headers ``a/path`` and ``b/path``."""
    return "".join(difflib.unified_diff(_keep_ends(original), _keep_ends(updated),
                                        f"a/{path}", f"b/{path}", n=3))
