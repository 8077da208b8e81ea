"""Failure classes found by merging other apply tools' test fixtures (Aider, Continue,
Cline, Roo-Code): each test is our own small reproduction of one class, not their text.

Every merge must be exact, or flagged unsure / refused with a reason.
"""

from __future__ import annotations

import pytest

from fastapply.edits import EditError
from fastapply.merge import apply_snippet

CLASS = ("class Counter {\n  constructor() {\n    this.n = 0;\n  }\n\n"
         "  up() {\n    this.n += 1;\n    return this;\n  }\n\n"
         "  down() {\n    this.n -= 1;\n    return this;\n  }\n\n"
         "  twice() {\n    this.n *= 2;\n    return this;\n  }\n}\n")


def exact_or_flagged(original: str, snippet: str, expected: str) -> None:
    """The merge is the expected file, or it is flagged, or refused: never another file
    returned as a success."""
    try:
        result = apply_snippet(original, snippet)
    except EditError:
        return
    assert result.uncertain or result.text == expected, result.text


def test_text_before_a_block_matched_by_blank_lines_alone_is_flagged() -> None:
    # A sentence and a blank line ahead of a SEARCH block: nothing but a blank line
    # anchors it, and it must not be written into the file as code.
    original = "alpha = 1\n\nbeta = 2\n"
    snippet = ("Replace beta:\n\n<<<<<<< SEARCH\nbeta = 2\n=======\nbeta = 3\n"
               ">>>>>>> REPLACE\n")
    result = apply_snippet(original, snippet)
    assert result.uncertain, result.text


def test_text_beside_a_block_into_an_empty_file_is_flagged() -> None:
    # Into an empty file a SEARCH block with an empty SEARCH creates the text; a line
    # outside the block is not part of it.
    snippet = "Create it:\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n"
    result = apply_snippet("", snippet)
    assert result.uncertain or result.text == "hello\n", result.text


def test_an_empty_file_takes_a_whole_lazy_snippet_unflagged() -> None:
    assert apply_snippet("", "def f():\n    return 1\n").check() == "def f():\n    return 1\n"


def test_a_new_method_between_two_markers_does_not_replace_a_neighbour() -> None:
    # Only generic lines ("return this;", "}", blank) anchor the new method: it fits
    # after any method, and a reading that rewrites down() into it loses down().
    snippet = ("class Counter {\n  constructor() {\n    this.n = 0;\n  }\n\n"
               "  // ... existing methods ...\n\n"
               "  reset() {\n    this.n = 0;\n    return this;\n  }\n\n"
               "  // ... existing methods ...\n}\n")
    result = apply_snippet(CLASS, snippet)
    kept = all(name in result.text for name in ("up()", "down()", "twice()"))
    assert result.uncertain or kept, result.text


def test_a_block_with_two_separator_lines_is_refused() -> None:
    # Which ======= separates SEARCH from REPLACE? Reading the first, the second would be
    # written into the file as a line of code.
    snippet = "<<<<<<< SEARCH\nx = 1\n=======\n=======\nx = 2\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match="======="):
        apply_snippet("x = 1\ny = 2\n", snippet).check()


def test_a_file_that_has_separator_lines_can_still_be_edited() -> None:
    # (an underlined heading): the second ======= line is text the file already uses.
    original = "Title\n=======\nbody\n"
    snippet = "<<<<<<< SEARCH\nbody\n=======\nBody\n=======\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "Title\n=======\nBody\n=======\n"


def test_a_first_line_edited_with_a_blank_line_of_context_is_not_flagged() -> None:
    # At the top of a lazy snippet the file's start anchors the segment: not a guess.
    original = "import os\n\nx = 1\n\ny = 2\n"
    snippet = "import os, sys\n\n# ... existing code ...\n"
    assert apply_snippet(original, snippet).check() == "import os, sys\n\nx = 1\n\ny = 2\n"
