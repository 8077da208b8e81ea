"""Checks on a parsed snippet before it is merged: lines of a diff left outside its hunks in
a lazy snippet (their signs would be written into the file), and SEARCH/REPLACE or
merge-conflict markers that are malformed (a block read as code). Called by
:func:`fastapply.merge.apply.merge`."""

from __future__ import annotations

from fastapply.merge import formats
from fastapply.merge.lines import key_exact, key_loose
from fastapply.merge.segment import Uncertainty
from fastapply.merge.syntax import BLOCK_FORM, BLOCK_MARKER, SEPARATOR, EditError, EditPlan

__all__ = ["diff_lines_in_lazy", "refuse_block_markers"]


def diff_lines_in_lazy(plan: EditPlan, orig: list[str]) -> list[Uncertainty]:
    """Lazy lines that are lines of a diff outside its hunks: ``-`` followed by an
    original line (a diff without its header), or, in a snippet that has diff hunks,
    any line starting with ``+`` or ``-`` (a line without its prefix ended the hunk
    before it). Merged as code, the signs would be written into the file. Lines the
    original has as they stand are code.

    >>> from fastapply.merge.edits import parse_edit
    >>> [u.line for u in diff_lines_in_lazy(parse_edit("a\\n-b\\n+c\\n"), ["a", "b"])]
    [2]
    >>> plan = parse_edit("@@ -1 +1 @@\\n-a\\n+A\\nb\\n+c\\n")  # 'b' ended the hunk
    >>> [u.message[:34] for u in diff_lines_in_lazy(plan, ["a", "b"])]
    ['lazy segment 1 (snippet line 4): i']
    """
    lines: set[str] | None = None  # the original's lines (built if needed)
    diff = any(hunk.kind == "udiff" for hunk in plan.hunks)
    for hunk in plan.hunks:
        for i, s in enumerate(hunk.new if hunk.kind == "lazy" else ()):
            if not s.startswith("-") and not (diff and s.startswith("+")):
                continue
            if lines is None:
                lines = {key_exact(o) for o in orig}
            if key_exact(s) in lines:
                continue
            if key_exact(s[1:]) in lines and s.startswith("-"):
                line = next(j for j, o in enumerate(orig) if key_exact(o) == key_exact(s[1:])) + 1
                return [Uncertainty(line, (
                    f"{hunk.label}: its line {i + 1} is original line {line} with a '-' "
                    f"before it; the snippet looks like a unified diff without its @@ "
                    f"header: send the diff with a header (@@ ... @@) or the code without "
                    f"-/+ signs"))]
            if diff:
                return [Uncertainty(0, (
                    f"{hunk.label}: its line {i + 1} starts with {s[0]!r} like a diff line, "
                    f"but it is outside the diff's hunks (a line without a diff prefix "
                    f"ended the hunk before it); give every line of a hunk its prefix "
                    f"(' ', '-' or '+')"))]
    return []


def refuse_block_markers(plan: EditPlan, orig: list[str]) -> None:
    """Raise EditError if a line the merge would write looks like a SEARCH/REPLACE or
    merge-conflict marker the original lacks: a malformed block read as code.

    >>> from fastapply.merge.edits import parse_edit
    >>> refuse_block_markers(parse_edit("<<-- SEARCH\\na\\n"), ["a"])
    Traceback (most recent call last):
    ...
    fastapply.merge.syntax.EditError: snippet line 1: '<<-- SEARCH' looks like a SEARCH/REPLACE ...
    """
    present: set[str] | None = None  # the original's lines, stripped (built if needed)
    underlined: bool | None = None  # the original underlines headings with ===
    for hunk in plan.hunks:
        for k, s in enumerate(hunk.new):
            if k in hunk.escaped:
                continue
            separator = hunk.kind == "search_replace" and SEPARATOR.match(s)
            if separator and k and formats.heading(hunk.new[k - 1]):
                if underlined is None:
                    underlined = formats.underlined_in(orig)
                if underlined:
                    continue  # one more heading of the file's kind
            if not separator and not BLOCK_MARKER.match(s):
                continue
            if present is None:
                present = {key_loose(o) for o in orig}
            if key_loose(s) in present:
                continue
            if separator:
                raise EditError(f"{hunk.label}: its replacement line {k + 1} is a second "
                                f"'=======' line, which the original does not have; a doubled "
                                f"separator cannot be told from text, so nothing is written; "
                                f"{BLOCK_FORM}")
            if BLOCK_MARKER.match(s):
                where = f"snippet line {hunk.snippet_line + k}" if hunk.kind == "lazy" \
                    else hunk.label
                kind = "SEARCH/REPLACE" if "SEARCH" in s or "REPLACE" in s else \
                    "merge-conflict or SEARCH/REPLACE"
                raise EditError(f"{where}: {s.strip()!r} looks like a {kind} "
                                f"marker, but the block markers are malformed, so the block "
                                f"cannot be read and is not written into the file; "
                                f"{BLOCK_FORM}")
