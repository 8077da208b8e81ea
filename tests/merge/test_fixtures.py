"""Failure classes found by merging other apply tools' test fixtures (Aider, Continue,
Cline, Roo-Code): each test is our own small reproduction of one class, not their text.

Every merge must be exact, or flagged unsure / refused with a reason.
"""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet
from fastapply.merge.edits import EditError

CLASS = ("class Counter {\n  constructor() {\n    this.n = 0;\n  }\n\n"
         "  up() {\n    this.n += 1;\n    return this;\n  }\n\n"
         "  down() {\n    this.n -= 1;\n    return this;\n  }\n\n"
         "  twice() {\n    this.n *= 2;\n    return this;\n  }\n}\n")


def assert_flagged(original: str, snippet: str) -> None:
    """The merge is flagged unsure: the deterministic runtime refuses it, with a reason."""
    result = apply_snippet(original, snippet)
    assert result.uncertain, result.text


def test_text_before_a_block_matched_by_blank_lines_alone_is_flagged() -> None:
    # A sentence and a blank line ahead of a SEARCH block: nothing but a blank line
    # anchors it, and it must not be written into the file as code.
    original = "alpha = 1\n\nbeta = 2\n"
    snippet = ("Replace beta:\n\n<<<<<<< SEARCH\nbeta = 2\n=======\nbeta = 3\n"
               ">>>>>>> REPLACE\n")
    assert_flagged(original, snippet)


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


SRC = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h * d\n"
BLOCK = ("<<<<<<< SEARCH\n    return w * h * d\n=======\n    return float(w * h * d)\n"
         ">>>>>>> REPLACE\n")
WANT = SRC.replace("return w * h * d", "return float(w * h * d)")


AREA = "<<<<<<< SEARCH\n    return w * h\n=======\n    return float(w * h)\n>>>>>>> REPLACE\n"


@pytest.mark.parametrize(("wrapped", "want"), [
    (f"geometry/solid.py\n{BLOCK}", WANT),
    (f"geometry/solid.py\n```python\n{BLOCK}```\n", WANT),
    (f"`solid.py`\n\n```\n{BLOCK}```\n\nsolid.py\n```python\n{AREA}```\n",
     WANT.replace("return w * h\n", "return float(w * h)\n")),
], ids=["path", "path and fence", "two fenced blocks"])
def test_a_file_name_and_fences_around_blocks_are_not_code(wrapped: str, want: str) -> None:
    # Aider writes the file's path, then a fenced block; Roo-Code the path alone.
    assert apply_snippet(SRC, wrapped).check() == want


def test_a_start_line_hint_in_a_search_block_picks_among_equal_places() -> None:
    original = "def a():\n    return 0\n\n\ndef b():\n    return 0\n"
    snippet = ("<<<<<<< SEARCH\n:start_line:6\n-------\n    return 0\n=======\n"
               "    return 1\n>>>>>>> REPLACE\n")
    want = "def a():\n    return 0\n\n\ndef b():\n    return 1\n"
    assert apply_snippet(original, snippet).check() == want


def test_an_empty_search_with_a_start_line_inserts_there() -> None:
    snippet = "<<<<<<< SEARCH\n:start_line:5\n-------\n=======\nimport math\n>>>>>>> REPLACE\n"
    original = "import os\nimport sys\n\n\ndef f():\n    pass\n"
    want = "import os\nimport sys\n\n\nimport math\ndef f():\n    pass\n"
    assert apply_snippet(original, snippet).check() == want


def test_an_empty_search_without_a_line_appends() -> None:
    snippet = "<<<<<<< SEARCH\n=======\nprint(1)\n>>>>>>> REPLACE\n"
    assert apply_snippet("x = 1\n", snippet).check() == "x = 1\nprint(1)\n"


def test_a_search_found_only_with_other_relative_indentation_is_flagged() -> None:
    # The SEARCH text shifts one line by 4 and another by 8 against the file: which
    # indentation should the new lines take? Not a uniform loss of indentation.
    original = "class K:\n    def f(self):\n        if x:\n            go()\n        stop()\n"
    snippet = ("<<<<<<< SEARCH\ndef f(self):\n    if x:\n    go()\n=======\n"
               "def f(self):\n    if x:\n    go()\n    again()\n>>>>>>> REPLACE\n")
    assert_flagged(original, snippet)


def test_a_search_that_lost_a_uniform_indentation_is_reindented_unflagged() -> None:
    original = "class K:\n    def f(self):\n        go()\n"
    snippet = ("<<<<<<< SEARCH\ndef f(self):\n    go()\n=======\ndef f(self):\n    stop()\n"
               ">>>>>>> REPLACE\n")
    want = "class K:\n    def f(self):\n        stop()\n"
    assert apply_snippet(original, snippet).check() == want


@pytest.mark.parametrize(("snippet", "want"), [
    ("@@ -2,0 +3 @@\n+new\n", "a\nb\nnew\nc\n"),
    ("--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+top\n", "top\na\nb\nc\n"),
    ("@@ -3,0 +4,2 @@\n+d\n+e\n", "a\nb\nc\nd\ne\n"),
], ids=["middle", "top", "end"])
def test_a_diff_hunk_that_only_adds_lines_inserts_after_its_line(snippet: str,
                                                                  want: str) -> None:
    # git diff -U0 writes insertions without context: "@@ -N,0 ..." adds after line N.
    assert apply_snippet("a\nb\nc\n", snippet).check() == want


def test_a_diff_hunk_that_only_adds_lines_and_has_no_line_number_is_flagged() -> None:
    assert_flagged("a\nb\nc\n", "@@ ... @@\n+new\n")


def test_escaped_marker_lines_in_a_block_are_text_without_the_backslash() -> None:
    # Roo-Code escapes a marker line inside a block's text with a backslash.
    original = "intro\nbody\n"
    snippet = "<<<<<<< SEARCH\nbody\n=======\nbody\n\\=======\n\\>>>>>>> REPLACE\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "intro\nbody\n=======\n>>>>>>> REPLACE\n"
    original = "x\n=======\ny\n"
    snippet = "<<<<<<< SEARCH\n\\=======\ny\n=======\n\\=======\nz\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "x\n=======\nz\n"


def test_uneven_indentation_of_removed_lines_alone_is_not_flagged() -> None:
    # Only context lines decide the new lines' indentation; removed lines vanish.
    original = "def f():\n    a()\n      # old note\n    b()\n"
    snippet = ("<<<<<<< SEARCH\na()\n# old note\nb()\n=======\na()\nc()\nb()\n"
               ">>>>>>> REPLACE\n")
    assert apply_snippet(original, snippet).check() == "def f():\n    a()\n    c()\n    b()\n"


@pytest.mark.parametrize("start", ["<<<<<<< SEARCH (5)", "<<<<<<< SEARCH>"])
def test_search_markers_with_a_line_number_or_a_stray_angle_bracket(start: str) -> None:
    # Roo-Code's older "SEARCH (N)" (N: where to look) and a model's "SEARCH>".
    original = "def a():\n    return 0\n\n\ndef b():\n    return 0\n"
    snippet = f"{start}\ndef b():\n    return 0\n=======\ndef b():\n    return 1\n>>>>>>> REPLACE\n"
    want = "def a():\n    return 0\n\n\ndef b():\n    return 1\n"
    assert apply_snippet(original, snippet).check() == want


def test_line_numbers_copied_from_a_numbered_listing_are_not_code() -> None:
    # Roo-Code shows files as "N | line"; models copy the numbers into the block.
    original = "a = 1\nb = 2\nc = 3\n"
    snippet = ("<<<<<<< SEARCH\n2 | b = 2\n3 | c = 3\n=======\n2 | b = 20\n3 | c = 3\n"
               ">>>>>>> REPLACE\n")
    assert apply_snippet(original, snippet).check() == "a = 1\nb = 20\nc = 3\n"


def test_a_table_whose_rows_start_with_numbers_keeps_them() -> None:
    original = "1 | one\n5 | five\n"
    snippet = "<<<<<<< SEARCH\n1 | one\n5 | five\n=======\n1 | one\n5 | FIVE\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "1 | one\n5 | FIVE\n"


def test_numbered_search_lines_with_a_plain_replacement() -> None:
    original = "a = 1\nb = 2\nc = 3\n"
    snippet = "<<<<<<< SEARCH\n2 | b = 2\n=======\nb = 20\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "a = 1\nb = 20\nc = 3\n"


def test_blank_lines_at_the_edges_of_a_search_that_the_file_lacks_are_ignored() -> None:
    original = "def f():\n    a()\n    b()\n"
    snippet = "<<<<<<< SEARCH\n\n    a()\n    b()\n\n=======\n    a()\n    c()\n>>>>>>> REPLACE\n"
    assert apply_snippet(original, snippet).check() == "def f():\n    a()\n    c()\n"
