"""Checks on a finished lazy merge as a whole, that flag a result which contradicts the
snippet (precision first): each adds an :class:`Uncertainty` (``apply.py``), so that the
merge is unsure instead of returning a wrong file. Each is cheap (linear in the file,
dictionary look-ups). Findings are (1-based line, message) pairs. (The checks on a
segment's removals, judged where the placements are known, are :mod:`.precision`.)

* **segments in order** (:func:`segments_in_order`): the lines of a lazy segment follow
  each other in the result (blank lines aside), and the segments come in snippet order.
  A segment split up, placed twice or out of order means the merge did not do what the
  snippet says. It holds for every correct merge by the snippet's own definition.
* **no change** (:func:`unchanged`): a lazy snippet with markers whose merge leaves the
  file as it was did not say what it meant (a deletion shown between generic lines is
  found as it stands).
* **marker look-alikes** (:func:`kept_marker_lookalikes`, :func:`inline_markers`): a
  snippet line such as ``... existing code ...`` with no comment is not a marker (``...
  rest`` can be code), but if the original lacks it, it is almost surely one the model
  wrote badly: flagged rather than written into the file; so is a marker inside a line.
* **doubled** (:func:`doubled`): a top-level name declared twice, or two import lines
  held twice, where the original and the snippet hold them once: an old declaration or
  header kept beside its new form. (Tree-sitter's doubled definitions, a judge feature,
  were measured against it and do not replace it: docs/benchmarks.md, issue 55.)

>>> from fastapply.merge.edits import parse_edit
>>> plan = parse_edit("# ...\\nb = 2\\nc = 3\\n# ...\\n")
>>> review(plan, "a = 1\\nb = 1\\nc = 3\\n", "a = 1\\nb = 2\\nc = 3\\n")
[]
>>> review(plan, "a = 1\\nb = 2\\nc = 3\\n", "a = 1\\nb = 2\\nx = 0\\nc = 3\\n")
[(2, 'lazy segment 1 (snippet line 2): its lines do not follow each other in the result')]
>>> lookalike = parse_edit("// ...\\nb = 2\\n... existing code ...\\n")
>>> review(lookalike, "a\\nb = 2\\n", "a\\nb = 2\\n... existing code ...\\n")[0][1][-58:]
'one (write it as a comment, e.g. // ... existing code ...)'
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from fastapply.merge.syntax import EditPlan

__all__ = ["review"]

#: A commented marker inside a line of code (``path: // ... existing ..., method:``,
#: ``login(// ... existing ...) {``): a model's way to skip part of a line, which a line
#: merge cannot expand.
#: (The code before it is looked for apart: ``\S.*?`` in front made a search quadratic in
#: the line's length, 1.7 s on one 10,000-character line.)
_INLINE_MARKER = re.compile(r"(?://|#|/\*|<!--)\s*(?:\.\.\.|…)\s*(?:existing|unchanged|"
                            r"rest|remaining|same|omitted|other|previous)\b", re.IGNORECASE)


def _inline_marker(line: str) -> bool:
    """Is there a commented marker in ``line`` after code (see _INLINE_MARKER)?"""
    first = len(line) - len(line.lstrip())  # (its first character that is not a space)
    return any(m.start() > first for m in _INLINE_MARKER.finditer(line))


#: A comment that opens with dots (``// ... (helper removed, now imported) ...``) that the
#: parser did not read as a marker: its words hold something a marker's cannot.
_COMMENTED_DOTS = re.compile(r"^\s*(?://+|#+|/\*+|<!--|--|\*)\s*(?:\.\.\.|…)")
#: A line that reads like a marker without being one: dots and marker words, no comment.
_LOOKALIKE = re.compile(r"(?i)^\W*(\.\.\.|…).*\b(existing|unchanged|rest|remains?|same|"
                        r"keep|omitted|other|previous)\b.*$")


def _nonblank(lines: Sequence[str]) -> list[str]:
    return [t for t in (s.strip() for s in lines) if t]  # (segments hold no marker lines)


def _find_run(needle: Sequence[str], hay: Sequence[str], where: dict[str, list[int]],
              lo: int) -> int:
    """First start >= lo of ``needle`` as a contiguous run of ``hay``; -1 if none."""
    n = len(needle)
    for j in where.get(needle[0], ()):
        if j >= lo and j + n <= len(hay) and all(hay[j + t] == needle[t] for t in range(1, n)):
            return j  # (compared line by line: a mismatch stops early)
    return -1


def segments_in_order(plan: EditPlan, lines: Sequence[str]) -> list[tuple[int, str]]:
    """Findings (1-based result line, message) for each lazy segment whose non-blank
    lines are not a contiguous run of the result's non-blank lines after the previous
    segment's."""
    segments = [(hunk, seg) for hunk in plan.hunks if hunk.kind == "lazy"
                for seg in [_nonblank(hunk.new)] if seg]
    firsts = {seg[0] for _, seg in segments}
    stripped = [s.strip() for s in lines]
    keep = [n for n, s in enumerate(stripped) if s]
    hay = [stripped[n] for n in keep]
    where: dict[str, list[int]] = defaultdict(list)  # only the lines a segment starts with
    for j, s in enumerate(hay):
        if s in firsts:
            where[s].append(j)
    found: list[tuple[int, str]] = []
    lo = 0
    for hunk, seg in segments:
        at = _find_run(seg, hay, where, lo)
        if at < 0:
            what = "do not follow each other in the result" \
                if _find_run(seg, hay, where, 0) < 0 else "come before an earlier segment's"
            starts = where.get(seg[0], [])
            j = next((j for j in starts if j >= lo), starts[0] if starts else lo)
            found.append((keep[j] + 1 if j < len(keep) else 0,
                          f"{hunk.label}: its lines {what}"))
            continue
        lo = at + len(seg)
    return found


def kept_marker_lookalikes(plan: EditPlan, original: str) -> list[tuple[int, str]]:
    """Findings for snippet lines written like markers (``... existing code ...`` with
    no comment, or a comment that opens with dots whose words the parser does not read as
    a marker's) that are not in the original: taken as text, they would land in the
    file."""
    suspects = [(hunk, s.strip(), bool(_COMMENTED_DOTS.match(s))) for hunk in plan.hunks
                if hunk.kind == "lazy" for s in hunk.new if "..." in s or "…" in s
                if _LOOKALIKE.match(s) or _COMMENTED_DOTS.match(s)]
    if not suspects:
        return []
    known = {s.strip() for s in original.split("\n")}
    return [(0, f"{hunk.label}: the line {s[:80]!r} looks like a marker; it is not one "
                + ("(its words are not read as a marker's: write a marker as "
                   "'// ... existing code ...' and say what changed in the code or outside "
                   "the snippet)" if commented else
                   "(write it as a comment, e.g. // ... existing code ...)"))
            for hunk, s, commented in suspects if s not in known][:1]


def inline_markers(plan: EditPlan, original: str) -> list[tuple[int, str]]:
    """A finding for a snippet line with a marker inside it, after code, that the
    original lacks: the marker would be written into the file as code.

    >>> from fastapply.merge.edits import parse_edit
    >>> plan = parse_edit("// ...\\nf(a, // ... existing ..., b);\\n")
    >>> inline_markers(plan, "f(a, x, b);\\n")[0][1][33:74]
    "a marker inside the line 'f(a, // ... exi"
    """
    suspects = [(hunk, s.strip()) for hunk in plan.hunks if hunk.kind == "lazy"
                for s in hunk.new if _inline_marker(s)]
    if not suspects:
        return []
    known = {s.strip() for s in original.split("\n")}
    return [(0, f"{hunk.label}: a marker inside the line {s[:60]!r} cannot be expanded "
                f"(a merge keeps or replaces whole lines); show the whole line")
            for hunk, s in suspects if s not in known][:1]


def review(plan: EditPlan, original: str, text: str) -> list[tuple[int, str]]:
    """The checks' findings on the merged ``text`` of ``plan`` (empty when all hold)."""
    if not any(h.kind == "lazy" for h in plan.hunks):
        return []
    return segments_in_order(plan, _lines(text)) + kept_marker_lookalikes(plan, original) + \
        inline_markers(plan, original) + unchanged(plan, original, text) + \
        doubled(plan, original, text)


def doubled(plan: EditPlan, original: str, text: str) -> list[tuple[int, str]]:
    """A finding for each name the merged file declares twice where the original declared
    it once and the snippet does not show both (:func:`.definitions.doubled_declarations`):
    the merge kept an old declaration beside the snippet's new form of it (Go's ``var a
    T`` lines regrouped into ``var ( ... )``, a function rewritten under another header)."""
    from fastapply.merge.definitions import doubled_declarations

    shown = [s for h in plan.hunks for s in h.new]
    return [(0, f"the merged file declares {name!r} {len(where)} times (lines "
                f"{', '.join(str(i + 1) for i in where)}) where the original declares it "
                f"once and the snippet shows fewer: an old declaration was probably kept "
                f"beside its new form; show the lines around the old one, or mark its "
                f"removal") for name, where in doubled_declarations(
                    _lines(original), _lines(text), shown)] + doubled_imports(
                        _lines(original), _lines(text), shown)


#: A line that imports (Python, JS/TS, Java, Kotlin, Swift, Go, C/C++, C#, Rust, PHP, Ruby).
_IMPORT = re.compile(r"\s*(?:import\b|from\s+\S+\s+import\b|#\s*include\b|using\s+[\w.]+\s*;|"
                     r"use\s+[\w\\:]+|require(?:_relative)?\b)")
#: Import lines written twice that make a header kept beside its new form.
DOUBLED_IMPORTS = 2


def doubled_imports(original: Sequence[str], merged: Sequence[str],
                    shown: Sequence[str]) -> list[tuple[int, str]]:
    """A finding where DOUBLED_IMPORTS or more import lines each stand in the merged file
    more often than in the original (and at least twice) and than the snippet shows
    them: the file's old header was kept above the snippet's new one (a snippet that
    writes the file out after a marker for its license, its imports reordered). One
    doubled import is left alone: documentation repeats ``import x`` in its examples.

    >>> doubled_imports(["import a", "import b", "x"], ["import a", "import b", "import b",
    ...                 "import a", "y"], ["import b", "import a", "y"])[0][1][:46]
    "the merged file holds the import lines 'import"
    """
    def counts(lines: Sequence[str]) -> Counter[str]:
        return Counter(line.strip() for line in lines if _IMPORT.match(line))

    after = counts(merged)
    if not any(n > 1 for n in after.values()):
        return []
    before, snippet = counts(original), counts(shown)
    twice = [line for line, n in after.items()
             if n > max(1, before.get(line, 0)) and snippet.get(line, 0) < n]
    if len(twice) < DOUBLED_IMPORTS:
        return []
    return [(0, f"the merged file holds the import lines {twice[0][:50]!r} and "
                f"{twice[1][:50]!r} twice (the original and the snippet once each): the old "
                f"header was probably kept beside the snippet's new one; show the line "
                f"right above the imports as context, or mark what the snippet replaces")]


def unchanged(plan: EditPlan, original: str, text: str) -> list[tuple[int, str]]:
    """A finding when a lazy snippet with markers leaves the file as it was: every line
    it shows was found as it stands, so the change it was written for (most often a
    deletion shown by making two generic lines such as ``}`` neighbours) was not read."""
    if text != original or not any(h.kind == "lazy" and (h.marker_before or h.marker_after)
                                   for h in plan.hunks):
        return []
    return [(0, "the snippet changes nothing: each of its lines was found as it stands in "
                "the original, so the change it shows (a deletion?) could not be placed; "
                "show a unique line of unchanged context on each side of it")]


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines
