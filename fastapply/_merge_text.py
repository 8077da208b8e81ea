"""Line helpers of the deterministic merge (:mod:`fastapply.merge`): the replacement a hunk
becomes, where a block's lines occur in the original and where an absent block comes
closest, and re-indenting a snippet while its context lines keep the original's text."""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapply._merge_costs import WorkBudget
from fastapply._merge_lines import key_loose, similarity, tokens


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
             index: dict[str, list[str]], budget: WorkBudget, lo: int = 0) -> int:
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
    """Shift lines by the indentation offset found at the anchor."""
    out = []
    for s in lines:
        if s.startswith(snippet_indent) and s.strip():
            out.append(orig_indent + s[len(snippet_indent):])
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
            body = s.lstrip(" \t")
            lead = s[:len(s) - len(body)]
            if tabs:  # spaces (and tabs) -> tabs
                columns = sum(width if c == "\t" else 1 for c in lead)
                return "\t" * (columns // width) + " " * (columns % width) + body
            return lead.replace("\t", " " * width) + body

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
