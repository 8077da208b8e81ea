"""Checks of the deterministic merge (:mod:`fastapply.merge`) on what other tools write:
a diff's file headers (a new file, a deleted one), a SEARCH/REPLACE block whose
separator is ambiguous, and Markdown heading underlines that look like a separator."""

from __future__ import annotations

import re

from fastapply.merge.costs import WorkBudget
from fastapply.merge.lines import key_loose
from fastapply.merge.syntax import BLOCK_MARKER, EditError, EditPlan
from fastapply.merge.text import _find_runs

__all__ = ["diff_files", "heading", "refuse_ambiguous", "underlined_in"]


#: A heading's underline (Markdown's setext headings, reStructuredText's sections).
_UNDERLINE = re.compile(r"^={3,}\s*$")


def underlined_in(orig: list[str]) -> bool:
    """Does the original underline a heading with ``===`` (so that a ``=======`` line under
    a text line in a replacement is one more heading, not a doubled separator)?

    >>> underlined_in(["Title", "=====", "", "text"]), underlined_in(["a = 1", "", "====="])
    (True, False)
    """
    return any(_UNDERLINE.match(s) and orig[k - 1].strip() and not _UNDERLINE.match(orig[k - 1])
               for k, s in enumerate(orig) if k)


def refuse_ambiguous(plan: EditPlan, orig: list[str], budget: WorkBudget) -> None:
    """Raise EditError for a SEARCH/REPLACE block with more than one ``=======`` line
    whose text up to its second one is in the original (see Hunk.readings): where its
    SEARCH text ends cannot be told.

    >>> from fastapply.merge.edits import parse_edit
    >>> block = "<<<<<<< SEARCH\\nText.\\n=======\\nText.\\nNew\\n=======\\n>>>>>>> REPLACE\\n"
    >>> refuse_ambiguous(parse_edit(block), ["Text."], WorkBudget())
    >>> refuse_ambiguous(parse_edit(block), ["Text.", "=======", "Text.", "New"], WorkBudget())
    Traceback (most recent call last):
    ...
    fastapply.merge.syntax.EditError: SEARCH block 1 (snippet line 1) has more than one ...
    """
    for hunk in plan.hunks:
        for old, _ in hunk.readings:
            budget.doing = hunk.label
            text = [t for t, s in enumerate(old) if s.strip()]  # without blank edges
            if text and _find_runs(old[text[0]:text[-1] + 1], orig, key_loose, None, budget):
                raise EditError(f"{hunk.label} has more than one '=======' line and the text "
                                f"up to its second one is in the file, so where its SEARCH "
                                f"text ends cannot be told; send this edit as a unified diff, "
                                f"or as a block whose SEARCH and REPLACE text have no "
                                f"'=======' line")


def diff_files(plan: EditPlan, orig: list[str]) -> None:
    """Raise EditError for a diff that creates a file (``--- /dev/null``) applied to an
    original that has text (which file the user meant cannot be told), or that deletes
    the file (``+++ /dev/null``) but not each of its lines."""
    gone = [h for h in plan.hunks if h.file_change == "deleted"]
    text = [s for s in orig if s.strip()]
    if gone and (sum(len(h.old) for h in gone) < len(orig) or any(h.new for h in gone)
                 or len(gone) < len(plan.hunks)) and text:
        raise EditError(f"{gone[0].label}: the diff deletes the file ('+++ /dev/null'), but "
                        f"its hunks do not remove each of its {len(orig)} lines; send the "
                        f"diff of the whole file, or an empty file")
    new = next((h for h in plan.hunks if h.file_change == "new"), None)
    if new is not None and any(s.strip() for s in orig):
        raise EditError(f"{new.label}: the diff creates a new file (its header is '--- "
                        f"/dev/null' or '*** Add File'), but the original has {len(orig)} "
                        f"lines; send the diff against this file, or an empty original to "
                        f"create it")


def heading(line: str) -> bool:
    """Can ``line`` be a heading's text (a line of text, not a marker or blank)?"""
    return bool(line.strip()) and not BLOCK_MARKER.match(line) and not _UNDERLINE.match(line)
