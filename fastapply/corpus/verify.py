"""Strict appliers for generated snippets: the corpus' own check that each snippet,
applied as its format says, gives exactly ``updated``. Strict on purpose (no fuzz, no
guessing): a record whose snippet needs either is not written."""

from __future__ import annotations

import re

SR_BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)=======\n(.*?)>>>>>>> REPLACE\n", re.S)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class VerifyError(ValueError):
    """A generated snippet that does not give ``updated``; the message says where."""


def apply_search_replace(original: str, snippet: str) -> str:
    """Apply SEARCH/REPLACE blocks in order; each SEARCH text must occur exactly once.

    >>> apply_search_replace("a\\nb\\n", "<<<<<<< SEARCH\\nb\\n=======\\nc\\n>>>>>>> REPLACE\\n")
    'a\\nc\\n'
    """
    text = original
    for n, m in enumerate(SR_BLOCK.finditer(snippet), 1):
        search, replacement = m.group(1), m.group(2)
        found = ("\n" + text).count("\n" + search)
        if found != 1:
            raise VerifyError(f"SEARCH block {n} occurs {found} times")
        at = ("\n" + text).index("\n" + search)
        text = text[:at] + replacement + text[at + len(search):]
    return text


def apply_udiff(original: str, diff: str) -> str:
    """Apply a unified diff at its stated line numbers, checking every context and
    removed line and every hunk count.

    >>> apply_udiff("a\\nb\\n", "--- a/x\\n+++ b/x\\n@@ -1,2 +1,2 @@\\n a\\n-b\\n+c\\n")
    'a\\nc\\n'
    """
    old = [s + "\n" for s in original.split("\n")[:-1]]  # files end with a newline
    out: list[str] = []
    cursor = 0
    lines = [s + "\n" for s in diff.split("\n")[:-1]]
    k = 0
    while k < len(lines):
        m = HUNK.match(lines[k])
        k += 1
        if not m:
            continue
        start = int(m.group(1)) - (int(m.group(2) or 1) > 0)
        n_old, n_new = int(m.group(2) or 1), int(m.group(4) or 1)
        if start < cursor:
            raise VerifyError(f"hunk at line {start + 1} overlaps the previous one")
        out.extend(old[cursor:start])
        cursor = start
        seen_old = seen_new = 0
        while k < len(lines) and (seen_old < n_old or seen_new < n_new):
            tag, body = lines[k][:1], lines[k][1:]
            k += 1
            if tag in (" ", "-"):
                if cursor >= len(old) or old[cursor] != body:
                    raise VerifyError(f"line {cursor + 1} differs from the diff's")
                cursor += 1
                seen_old += 1
            if tag in (" ", "+"):
                out.append(body)
                seen_new += 1
        if (seen_old, seen_new) != (n_old, n_new):
            raise VerifyError(f"hunk at line {start + 1}: counts do not match its body")
    out.extend(old[cursor:])
    return "".join(out)
