"""Lazy snippets indented with spaces for a file indented with tabs.

A model that writes a lazy snippet for a Go file, a Makefile or a kernel C file often
indents it with spaces (chat interfaces turn tabs into spaces). Merged as it stands,
each context line it shows replaces the original's tab-indented line with a
space-indented copy, and the new lines come in with spaces: a file whose lines the edit
never meant to touch changes (and a Makefile recipe stops working). When the file
indents with tabs only, the snippet's lazy segments with spaces only, and the lines they
share with the file say how many spaces a tab is, the segments' indentation is written
with tabs before they are merged (alignment spaces beyond whole tabs stay spaces).
"""

from __future__ import annotations

from dataclasses import replace

from fastapply.merge.syntax import EditPlan
from fastapply.merge.text import as_tabs

#: Indented lines a file needs before its tab style is trusted.
MIN_INDENTED = 3
#: A tab-indented file may have one line starting with a space (a ``/*`` comment's
#: `` *`` lines) per SPACED lines starting with a tab.
SPACED = 10
#: Spaces per tab the snippet's lines may show.
TAB_WIDTHS = (2, 4, 8)


def _spaces(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _tabs(line: str) -> int:
    return len(line) - len(line.lstrip("\t"))


def tabs_for_spaces(plan: EditPlan, original: str) -> EditPlan:
    """``plan`` with its lazy segments' leading spaces written as the file's tabs, if the
    file indents with tabs only and the segments with spaces only (else ``plan``).

    >>> from fastapply.merge.edits import parse_edit
    >>> plan = parse_edit("// ...\\nfunc f() {\\n    x := 1\\n    y := 2\\n// ...\\n")
    >>> tabs_for_spaces(plan, "func f() {\\n\\tx := 1\\n\\treturn\\n}\\n\\tz()\\n").hunks[0].new
    ('func f() {', '\\tx := 1', '\\ty := 2')
    """
    lazy = [s for h in plan.hunks if h.kind == "lazy" for s in h.new]
    indented = [s for s in lazy if s[:1] in (" ", "\t") and s.strip()]
    if not indented or any("\t" in s[:len(s) - len(s.lstrip())] for s in indented):
        return plan
    if original.count("\n ") > original.count("\n\t") // SPACED:
        return plan  # (counted at C speed: most files indent with spaces)
    file_indented = [o for o in original.split("\n") if o[:1] in (" ", "\t") and o.strip()]
    with_spaces = sum(1 for o in file_indented if o.startswith(" "))
    if len(file_indented) - with_spaces < MIN_INDENTED or \
            with_spaces > (len(file_indented) - with_spaces) // SPACED:
        return plan
    by_text: dict[str, set[int]] = {}
    for o in file_indented:
        if o.startswith("\t"):
            by_text.setdefault(o.strip(), set()).add(_tabs(o))
    widths = set()
    for s in indented:
        depths = by_text.get(s.strip())
        if depths is not None and len(depths) == 1:
            tabs = next(iter(depths))
            if tabs and _spaces(s) % tabs == 0:
                widths.add(_spaces(s) // tabs)
            else:
                return plan  # a shared line that no tab width explains
    if len(widths) != 1 or next(iter(widths)) not in TAB_WIDTHS:
        return plan
    width = widths.pop()

    return replace(plan, hunks=tuple(
        replace(h, new=tuple(as_tabs(s, width) if s.strip() else s for s in h.new))
        if h.kind == "lazy" else h for h in plan.hunks))
