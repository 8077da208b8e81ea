"""Lazy snippets in the styles coding agents really write, and windows around a change.

The corpus generator (:mod:`fastapply.corpus.snippets`) writes the textbook lazy snippet:
changed lines with 1-3 lines of context and a marker for every elided run, including one
before the first and after the last shown line. Agents write others
(:data:`AGENT_STYLES`):

* ``signature``: the snippet starts at the enclosing function or class signature with no
  marker before it and ends at the end of that block with no marker after it; long
  unchanged runs inside the body are markers;
* ``named``: markers that say what they stand for (``// ... existing imports ...``,
  ``# ... rest of the class unchanged ...``);
* ``whole_block``: a whole short function repeated with the change in it, no marker;
* ``whole_file``: the whole updated file, no marker.

Every generator returns a snippet that, read as intended, gives exactly ``updated``, or
"" where the style does not apply (no enclosing block, a block too long, a shown line
that itself reads as a marker). A deletion is shown by the lines around it, as the
textbook style already does.

(:func:`fastapply.corpus.crop.window` crops a record to the lines around some of its
changes, so that CPU training and evaluation see short examples.)
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from fastapply.corpus.languages import COMMENTS
from fastapply.corpus.snippets import lines_of
from fastapply.merge import is_marker

AGENT_STYLES = ("signature", "named", "whole_block", "whole_file", "removed",
                "blank_after_marker", "no_doc", "in_place", "one_anchor")

#: What a marker that says lines were removed says (``{}``: the removed declaration's name).
REMOVED = ("... removed {} ...", "... {} removed ...", "... deleted the old {} ...",
           "... removed unused {} ...")

#: What the markers of the ``named`` style say, by where the elided run lies.
NAMED_BEFORE = ("... existing imports ...", "... previous code ...",
                "... existing code above ...", "... imports and setup unchanged ...")
NAMED_INSIDE = ("... existing methods ...", "... rest of the function unchanged ...",
                "... unchanged lines ...", "... existing fields ...",
                "... other cases unchanged ...")
NAMED_AFTER = ("... rest of the class unchanged ...", "... rest of the file unchanged ...",
               "... remaining code ...", "... rest of the function ...")

#: Lines that close a block rather than open one.
_CLOSERS = ("}", ")", "]", "end", "</")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _opcodes(old: Sequence[str], new: Sequence[str]) -> list[Any]:
    sm = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    return list(sm.get_opcodes())


def _join(lines: Sequence[str]) -> str:
    return "".join(s + "\n" for s in lines)


def enclosing_block(lines: Sequence[str], first: int, last: int,
                    max_lines: int = 80) -> tuple[int, int] | None:
    """The block ``[start, end)`` whose signature line encloses lines ``first..last``.

    The signature is the nearest non-blank line above ``first`` indented less than every
    non-blank line of ``first..last``; the block ends at the first later line indented no
    deeper than the signature, that line included when it closes the block (``}``,
    ``end``, ``)``). None for a change at the top level or a block over ``max_lines``.

    >>> src = ["import x", "", "def f(a):", "    b = 1", "    return b", "", "y = 2"]
    >>> enclosing_block(src, 3, 3)
    (2, 5)
    >>> enclosing_block(["int f() {", "  return 1;", "}"], 1, 1)
    (0, 3)
    """
    shown = [_indent(s) for s in lines[first:last + 1] if s.strip()]
    if not shown:
        return None
    depth = min(shown)
    start = first - 1
    while start >= 0 and (not lines[start].strip() or _indent(lines[start]) >= depth
                          or lines[start].lstrip().startswith(_CLOSERS)):
        start -= 1
    if start < 0:
        return None
    top = _indent(lines[start])
    end = last + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > top):
        end += 1
    if end < len(lines) and lines[end].lstrip().startswith(_CLOSERS):
        end += 1
    while end > last + 1 and not lines[end - 1].strip():
        end -= 1
    if end - start > max_lines:
        return None
    return start, end


def _marker(language: str, wording: str, indent: str) -> str:
    template = COMMENTS.get(language, ("// {}",))[0]
    return indent + template.format(wording)


def _marker_for(language: str, wording: str, elided: Sequence[str]) -> str:
    """A marker standing for ``elided``, indented as its first non-blank line."""
    return _marker(language, wording, next((s[: _indent(s)] for s in elided if s.strip()), ""))


def _marked(original: str, updated: str, language: str, rng: random.Random,
            wording: Callable[[str], str],
            shown: Callable[[Any], list[str] | None]) -> str:
    """The textbook lazy snippet (1-3 lines of context, drawn): each group of changes as
    ``shown(group)`` gives its lines (None: the style does not apply), and a marker for
    each elided run of the original, worded by ``wording("before" | "inside" | "after")``;
    "" where no group shows or a shown line reads as a marker."""
    from fastapply.corpus.snippets import _anchored_context, spans

    old, new = lines_of(original), lines_of(updated)
    ctx = rng.choice((1, 2, 3))
    before, after = _anchored_context(old, new, (ctx, ctx))
    groups = spans(old, new, before, after)
    if not groups:
        return ""
    out: list[str] = []
    prev = 0
    for g in groups:
        if g.i1 > prev:
            out.append(_marker_for(language, wording("before" if prev == 0 else "inside"),
                                   old[prev:g.i1]))
        lines = shown(g)
        if lines is None:
            return ""
        out.extend(lines)
        prev = g.i2
    if prev < len(old):
        out.append(_marker_for(language, wording("after"), old[prev:]))
    if any(is_marker(s) for g in groups for s in new[g.j1:g.j2]):
        return ""
    return _join(out)


def _changed_new_lines(old: Sequence[str], new: Sequence[str],
                       ops: list[Any] | None = None) -> list[tuple[int, int]]:
    """Per change (of ``ops``, default: the opcodes of ``old`` -> ``new``), the range of
    ``new`` lines it covers (a deletion: the lines around it)."""
    out = []
    for tag, _i1, _i2, j1, j2 in _opcodes(old, new) if ops is None else ops:
        if tag != "equal":
            if j2 > j1:
                out.append((j1, j2 - 1))
            else:  # a deletion: the lines around it
                out.append((max(0, j1 - 1), min(j1, len(new) - 1)))
    return out


def signature_snippet(original: str, updated: str, language: str, rng: random.Random,
                      elide_over: int = 6) -> str:
    """The enclosing blocks of the changes, from signature to end, no marker outside
    them; unchanged runs of more than ``elide_over`` lines inside a block (two lines
    away from any change) become a marker, and blocks are joined by a marker.

    >>> old = "import os\\n\\ndef f(a):\\n    b = 1\\n    return b\\n\\nx = 1\\n"
    >>> print(signature_snippet(old, old.replace("b = 1", "b = 2"), "python",
    ...                         random.Random(0)), end="")
    def f(a):
        b = 2
        return b
    """
    old, new = lines_of(original), lines_of(updated)
    ops = _opcodes(old, new)
    changed = _changed_new_lines(old, new, ops)
    if not changed or not new:
        return ""
    blocks: list[tuple[int, int]] = []
    removed = [(j1, j2, old[i1:i2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]
    for (first, last), (j1, j2, gone) in zip(changed, removed, strict=True):
        block = enclosing_block(new, first, last)
        if block is None:
            return ""
        depth = _indent(new[block[0]])
        if not j1 <= block[0] < j2 and any(s.strip() and _indent(s) <= depth for s in gone):
            # A line removed at the block's own level (a sibling definition deleted
            # next to it) lies outside the block: the marker beside the block would
            # stand for it, and the snippet read as written would keep it.
            return ""
        if blocks and block[0] < blocks[-1][1]:
            block = (min(blocks[-1][0], block[0]), max(blocks[-1][1], block[1]))
            blocks.pop()
        blocks.append(block)
    near: set[int] = set()
    for first, last in changed:
        near.update(range(first - 2, last + 3))
    out: list[str] = []
    for k, (start, end) in enumerate(blocks):
        if k:
            out.append(_marker(language, rng.choice(NAMED_INSIDE + ("... existing code ...",)),
                               new[start][: _indent(new[start])]))
        j = start
        while j < end:
            run = j
            while run < end and run not in near and run != start and run != end - 1:
                run += 1
            if run - j > elide_over:
                indent = new[j][: _indent(new[j])] if new[j].strip() else ""
                out.append(_marker(language, rng.choice(NAMED_INSIDE + ("... existing code ...",)),
                                   indent))
                j = run
            else:
                out.append(new[j])
                j += 1
    if any(is_marker(s) for s in new[blocks[0][0]:blocks[-1][1]]):
        return ""  # a shown line that reads as a marker: the snippet cannot be read
    return _join(out)


def named_snippet(original: str, updated: str, language: str, rng: random.Random) -> str:
    """The textbook lazy snippet (1-3 lines of context) whose markers say what they
    stand for: imports or code above, unchanged lines inside, the rest after.

    >>> old = "import a\\nimport b\\n\\nx = 1\\ny = 2\\nz = 3\\nw = 4\\n"
    >>> print(named_snippet(old, old.replace("y = 2", "y = 5"), "python",
    ...                     random.Random(1)), end="")
    # ... existing imports ...
    x = 1
    y = 5
    z = 3
    # ... remaining code ...
    """
    words = {"before": NAMED_BEFORE, "inside": NAMED_INSIDE, "after": NAMED_AFTER}
    new = lines_of(updated)
    return _marked(original, updated, language, rng, lambda where: rng.choice(words[where]),
                   lambda g: new[g.j1:g.j2])


def whole_block_snippet(original: str, updated: str, language: str, rng: random.Random,
                        max_lines: int = 30) -> str:
    """The whole enclosing block of a single change, with no marker (agents repeat a
    short function with one line changed); "" for several changes or a long block."""
    old, new = lines_of(original), lines_of(updated)
    changed = _changed_new_lines(old, new)
    if len(changed) != 1:
        return ""
    block = enclosing_block(new, *changed[0], max_lines=max_lines)
    if block is None:
        return ""
    shown = new[block[0]:block[1]]
    return "" if any(is_marker(s) for s in shown) else _join(shown)


def whole_file_snippet(original: str, updated: str, language: str, rng: random.Random,
                       max_lines: int = 400) -> str:
    """The whole updated file, no marker (files up to ``max_lines``)."""
    new = lines_of(updated)
    if len(new) > max_lines or any(is_marker(s) for s in new):
        return ""
    return updated


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({"def", "class", "func", "fn", "function", "pub", "public", "private",
                       "protected", "static", "async", "export", "const", "let", "var",
                       "void", "int", "final", "return", "if", "else", "for", "while",
                       "type", "struct", "impl", "mod", "use", "import", "from", "self"})


def _name_of(lines: Sequence[str]) -> str:
    """A name for removed lines: the first identifier of their first line that is not a
    keyword ("the lines" where there is none)."""
    first = next((s for s in lines if s.strip()), "")
    return next((w for w in _NAME.findall(first) if w not in _KEYWORDS), "the lines")


def removed_snippet(original: str, updated: str, language: str, rng: random.Random
                    ) -> str:
    """The textbook lazy snippet (1-3 lines of context) where each run of removed lines is
    a marker that says so (``// ... removed parse_args ...``), with code on both sides: the
    lines between the marker's neighbours go. "" for a change that removes no line alone.

    >>> old = "import a\\n\\ndef f():\\n    return 1\\n\\ndef g():\\n    return 2\\n\\nx = 1\\n"
    >>> new = old.replace("def g():\\n    return 2\\n\\n", "")
    >>> print(removed_snippet(old, new, "python", random.Random(2)), end="")
    # ... existing code ...
        return 1
    <BLANKLINE>
    # ... removed g ...
    x = 1
    """
    old, new = lines_of(original), lines_of(updated)
    ops = _opcodes(old, new)
    if not any(tag == "delete" for tag, *_ in ops):
        return ""

    def shown(g: Any) -> list[str] | None:
        out: list[str] = []
        for tag, i1, i2, j1, j2 in ops:
            lo, hi = max(i1, g.i1), min(i2, g.i2)
            if tag == "equal" and lo < hi:
                out.extend(old[lo:hi])
            elif tag == "delete" and g.i1 <= i1 < g.i2:
                if i1 == g.i1 or i2 == g.i2:
                    return None  # code on both sides: the marker's neighbours bound the run
                out.append(_marker_for(language, rng.choice(REMOVED).format(
                    _name_of(old[i1:i2])), old[i1:i2]))
            elif tag in ("replace", "insert") and g.j1 <= j1 < g.j2:
                out.extend(new[j1:j2])
        return out

    return _marked(original, updated, language, rng, lambda where: "... existing code ...",
                   shown)


def blank_after_marker_snippet(original: str, updated: str, language: str,
                               rng: random.Random) -> str:
    """A marker, a blank line, then the enclosing block of the changes from its signature
    (agents leave the blank line that stands before a declaration); only where the
    updated file has a blank line right above the block, so that is what it reads as."""
    body = signature_snippet(original, updated, language, rng)
    if not body:
        return ""
    new = lines_of(updated)
    first = body.splitlines()[0]
    at = [k for k, s in enumerate(new) if s == first]
    if len(at) != 1 or at[0] < 2 or new[at[0] - 1].strip():
        return ""
    return _marker(language, rng.choice(NAMED_BEFORE + ("... existing code ...",)), "") \
        + "\n\n" + body


def no_doc_snippet(original: str, updated: str, language: str, rng: random.Random) -> str:
    """A short function written out whole, from its signature to its end, with no marker,
    its doc comment (the comment lines right above it, unchanged) left out: agents
    rewrite the function and leave its comment to stand."""
    old, new = lines_of(original), lines_of(updated)
    changed = _changed_new_lines(old, new)
    if len(changed) != 1:
        return ""
    block = enclosing_block(new, *changed[0], max_lines=40)
    if block is None or block[0] == 0:
        return ""
    above = new[block[0] - 1].strip()
    comments = tuple(c.split("{}")[0].strip() for c in COMMENTS.get(language, ("// {}",)))
    if not above or not above.startswith(comments + ("*", "/**", "///", '"""')):
        return ""
    shown = new[block[0]:block[1]]
    return "" if any(is_marker(s) for s in shown) else _join(shown)


def _one_line_change(original: str, updated: str) -> tuple[list[str], list[str], int] | None:
    """(old, new, index) of an edit that changes one line in place, else None."""
    old, new = lines_of(original), lines_of(updated)
    changes = [op for op in _opcodes(old, new) if op[0] != "equal"]
    if len(changes) != 1:
        return None
    tag, i1, i2, j1, j2 = changes[0]
    if tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1 or is_marker(new[j1]):
        return None
    return old, new, i1


def in_place_snippet(original: str, updated: str, language: str, rng: random.Random) -> str:
    """A changed line shown in place under one anchor, between markers:
    ``marker / the line above / the changed line / marker``. "" unless one line changed
    into one alike it (the same keys, or most of its text: :func:`fastapply.merge.beside.alike`;
    a line unlike the one it replaces reads as well as an insertion there) and the line
    above it is unique and not blank."""
    from fastapply.merge.beside import alike

    found = _one_line_change(original, updated)
    if found is None:
        return ""
    old, new, i = found
    if not alike(new[i], old[i]):
        return ""
    if i == 0 or not old[i - 1].strip() or old.count(old[i - 1]) != 1 or is_marker(old[i - 1]):
        return ""
    indent = new[i][: _indent(new[i])]
    return _join([_marker(language, "... existing code ...", indent), old[i - 1], new[i],
                  _marker(language, "... existing code ...", indent)])


def one_anchor_snippet(original: str, updated: str, language: str, rng: random.Random
                       ) -> str:
    """A one-line change with one anchor and one marker: ``marker / anchor above /
    changed line`` or ``changed line / anchor below / marker`` (the side without a marker
    meant as "the rest as it is"). "" unless one line changed beside a unique anchor."""
    found = _one_line_change(original, updated)
    if found is None:
        return ""
    old, new, i = found
    indent = new[i][: _indent(new[i])]
    marker = _marker(language, rng.choice(("... existing code ...",) + NAMED_INSIDE), indent)
    sides = [k for k in (i - 1, i + 1) if 0 <= k < len(old) and old[k].strip()
             and old.count(old[k]) == 1 and not is_marker(old[k])]
    if not sides:
        return ""
    k = rng.choice(sides)
    return _join([marker, old[k], new[i]] if k < i else [new[i], old[k], marker])


def agent_snippet(original: str, updated: str, language: str, style: str,
                  rng: random.Random) -> str:
    """The snippet of ``style`` (one of :data:`AGENT_STYLES`), or "" where it does not
    apply to this change."""
    makers = {"signature": signature_snippet, "named": named_snippet,
              "whole_block": whole_block_snippet, "whole_file": whole_file_snippet,
              "removed": removed_snippet, "blank_after_marker": blank_after_marker_snippet,
              "no_doc": no_doc_snippet, "in_place": in_place_snippet,
              "one_anchor": one_anchor_snippet}
    try:
        maker = makers[style]
    except KeyError:
        raise ValueError(f"unknown agent style {style!r}; use one of {AGENT_STYLES}") from None
    return maker(original, updated, language, rng)
