"""Line helpers of the deterministic merge (:mod:`fastapply.merge`): the replacement a hunk
becomes, where a block's lines occur in the original and where an absent block comes
closest, and re-indenting a snippet while its context lines keep the original's text."""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapply.merge.costs import WorkBudget
from fastapply.merge.lines import WordIndex, key_loose, similarity, tokens


@dataclass
class _Replacement:
    start: int  # first original line replaced (0-based)
    end: int  # one past the last
    lines: list[str]  # new lines (without line endings)
    block: bool = False  # a SEARCH/REPLACE block's or diff hunk's (found by its text)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _find_runs(needle: Sequence[str], hay: Sequence[str], key: Callable[[str], str],
               table: dict[str, list[int]] | None, budget: WorkBudget) -> list[int]:
    """Start positions where ``needle`` occurs in ``hay`` (compared through key; ``table``
    holds hay's positions by key; without it hay is scanned, cheaper for one search)."""
    if not needle:
        return []
    keys = [key(s) for s in needle]
    n = len(keys)
    if table is None:
        budget.spend(len(hay))
        starts = [j for j in range(len(hay) - n + 1) if key(hay[j]) == keys[0]]
    else:
        starts = [j for j in table.get(keys[0], ()) if j + n <= len(hay)]
    budget.spend(len(starts))
    return [j for j in starts if all(key(hay[j + t]) == keys[t] for t in range(1, n))]


def _closest(needle: Sequence[str], table: dict[str, list[int]],
             index: WordIndex, budget: WorkBudget, lo: int = 0) -> int:
    """1-based line (>= lo + 1) where ``needle`` comes closest: most aligned lines equal
    (stripped; ``table`` holds the original's positions by stripped line), the first
    such; if none is equal, the line sharing most words with its first line (``index``:
    the original's lines by word)."""
    keys = [key_loose(s) for s in needle if key_loose(s)] or [""]
    votes: dict[int, int] = {}
    for t, k in enumerate(keys):
        js = table.get(k, [])
        budget.spend(len(js))
        for j in js:
            if j - t >= lo:
                votes[j - t] = votes.get(j - t, 0) + 1
    if votes:
        return min(votes, key=lambda j: (-votes[j], j)) + 1
    toks = tokens(keys[0])
    near = {okey for w in toks for okey in index.get(w, ())[:1000]}
    budget.spend(len(near))
    firsts = [(js[at], okey) for okey in near for js in [table[okey]]
              for at in [bisect_left(js, lo)] if at < len(js)]
    if not firsts:
        return lo + 1
    return min(firsts, key=lambda f: (-similarity(toks, tokens(f[1])), f[0]))[0] + 1


def _reindent(lines: Sequence[str], snippet_indent: str, orig_indent: str) -> list[str]:
    """Shift lines by the indentation offset found at the anchor. When the file's
    indentation only adds to the snippet's, lines less indented than the anchor (a
    method's header and closing brace shown flush left) get the addition too.

    >>> _reindent(["f() {", "  x;", "}"], "  ", "    ")
    ['  f() {', '    x;', '  }']
    """
    extra = orig_indent[:len(orig_indent) - len(snippet_indent)] \
        if orig_indent.endswith(snippet_indent) else None
    out = []
    for s in lines:
        if s.startswith(snippet_indent) and s.strip():
            out.append(orig_indent + s[len(snippet_indent):])
        elif extra and s.strip():
            out.append(extra + s)
        else:
            out.append(s)
    return out


def _context_from_original(old: Sequence[str], new: Sequence[str], region: Sequence[str],
                           shift: tuple[str, str] | None = None) -> list[str]:
    """``new`` where its context lines (equal in ``old`` and ``new``) take the original's text.

    Changed lines stay as written (re-indented by ``shift`` = (snippet indent, file
    indent) when the snippet was matched loosely), so whitespace-only edits survive;
    context lines keep what the file had (a snippet often loses trailing spaces).
    """
    out = _reindent(new, *shift) if shift else list(new)
    sm = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        out[b:b + size] = region[a:a + size]
    return out


def as_tabs(line: str, width: int) -> str:
    """``line`` with its indentation written as tabs of ``width`` columns (the columns
    beyond whole tabs stay spaces, as alignment).

    >>> as_tabs("      x = 1", 4), as_tabs("\\t  y", 2)
    ('\\t  x = 1', '\\t\\ty')
    """
    body = line.lstrip(" \t")
    columns = sum(width if c == "\t" else 1 for c in line[:len(line) - len(body)])
    return "\t" * (columns // width) + " " * (columns % width) + body


def _retab(old: Sequence[str], new: Sequence[str], region: Sequence[str]
           ) -> tuple[list[str], list[str]] | None:
    """``old`` and ``new`` with their indentation in the file's kind, when the block wrote
    tabs as spaces (or spaces as tabs): one width (2, 4 or 8 columns a tab) turns every
    non-blank line of ``old`` into its ``region`` line (trailing spaces aside); else None.
    A Go file indents with tabs, a model's diff of it often with four spaces.

    >>> _retab(["func f() {", "    x := 1", "}"], ["func f() {", "    x := 2", "}"],
    ...        ["func f() {", "\\tx := 1", "}"])
    (['func f() {', '\\tx := 1', '}'], ['func f() {', '\\tx := 2', '}'])
    """
    tabs = any(s.startswith("\t") for s in region)
    for width in (4, 2, 8):
        def convert(s: str, width: int = width) -> str:
            if tabs:  # spaces (and tabs) -> tabs
                return as_tabs(s, width)
            body = s.lstrip(" \t")
            return s[:len(s) - len(body)].replace("\t", " " * width) + body

        if all(convert(o).rstrip() == r.rstrip() for o, r in zip(old, region, strict=True)
               if o.strip()):
            return [convert(s) for s in old], [convert(s) for s in new]
    return None


def _trim_blank_edges(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """``old`` without its leading and trailing blank lines; ``new`` without as many of
    its own as ``old`` had there (they were context).

    >>> _trim_blank_edges(["", "a", ""], ["", "b"])
    (['a'], ['b'])
    """
    head = next(t for t, s in enumerate(old) if s.strip())
    tail = next(t for t, s in enumerate(reversed(old)) if s.strip())
    new_head = min(head, next((t for t, s in enumerate(new) if s.strip()), len(new)))
    new = new[new_head:]
    new_tail = min(tail, next((t for t, s in enumerate(reversed(new)) if s.strip()), len(new)))
    return old[head:len(old) - tail], new[:len(new) - new_tail]



def inner(lines: Sequence[str]) -> list[str]:
    """``lines`` without the blank lines at its start and end: a segment between markers
    apart from the blank lines beside them, which are the snippet's layout (a writer
    leaves a blank line after ``# ... existing code ...`` whatever the file has there),
    not an edit. Blank lines inside it stay: adding one there is an edit.

    >>> inner(["", "class A:", "", "    x = 1", ""])
    ['class A:', '', '    x = 1']
    """
    a, b = 0, len(lines)
    while a < b and not lines[a].strip():
        a += 1
    while b > a and not lines[b - 1].strip():
        b -= 1
    return list(lines[a:b])

#: Replacements larger than this (old lines times new) take their old lines' endings by
#: position only (see kept_lines): a line diff of two huge runs costs seconds.
KEPT_CELLS = 1_000_000


def kept_lines(old: Sequence[str], new: Sequence[str], start: int) -> list[int]:
    """For each line of ``new`` (replacing original lines ``start``...), the original line
    it keeps unchanged (a line diff of the two), or -1 for a new line.

    >>> kept_lines(["a", "b", "c"], ["a", "x", "c", "d"], 10)
    [10, -1, 12, -1]
    """
    src = [-1] * len(new)
    if len(old) * len(new) > KEPT_CELLS:
        for k in range(min(len(old), len(new))):
            if old[k] == new[k]:
                src[k] = start + k
        return src
    matcher = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        src[b:b + size] = range(start + a, start + a + size)
    return src


def line_ends(original: str) -> list[str] | None:
    """Each original line's ending ("\\r\\n", "\\n", "" for a last line without one),
    if the text mixes CRLF and LF endings; else None (one ending serves every line).

    >>> line_ends("a\\r\\nb\\nc"), line_ends("a\\r\\nb\\r\\n")
    (['\\r\\n', '\\n', ''], None)
    """
    crlf = original.count("\r\n")
    if not crlf or crlf == original.count("\n"):
        return None
    parts = original.split("\n")
    ends = ["\r\n" if p.endswith("\r") else "\n" for p in parts[:-1]]
    return ends if not parts[-1] else [*ends, ""]


def with_ends(lines: Sequence[str], sources: Sequence[int], ends: Sequence[str],
              newline: str, final_newline: bool) -> str:
    """``lines`` joined, each line kept from the original (``sources``) with its own
    ending, each new line with ``newline``; the last without one unless
    ``final_newline``.

    >>> with_ends(["a", "x", "c"], [0, -1, 2], ["\\r\\n", "\\n", "\\n"], "\\n", True)
    'a\\r\\nx\\nc\\n'
    """
    out = [line + (ends[src] if 0 <= src < len(ends) and ends[src] else newline)
           for line, src in zip(lines, sources, strict=True)]
    if out and not final_newline:
        out[-1] = lines[-1]
    return "".join(out)
