"""Snippet parsing: every notation, mixed snippets, malformed syntax."""

from __future__ import annotations

import pytest

from fastapply.merge.edits import EditError, detect_format, is_marker, parse_edit


@pytest.mark.parametrize("line", [
    "// ... existing code ...", "# ... rest of code ...", "    # ... keep existing code ...",
    "/* ... code remains the same ... */", "<!-- ... unchanged ... -->", "-- ...", "...",
    "// ... keep foo() ...", "<!-- ... -->", "# …", "{/* ... existing code ... */}",
    "# ... existing code remains the same ...", "\t// ...",
])
def test_marker_lines_in_any_comment_syntax(line: str) -> None:
    assert is_marker(line)


@pytest.mark.parametrize("line", ["...options,", "func New(opts ...OptionFunc) *Engine {",
                                  "x = [...]", "## Gin 1.0rc2 (...)", "return ...rest",
                                  "TemplateTestCallable = t.Callable[..., bool]"])
def test_code_with_dots_is_not_a_marker(line: str) -> None:
    assert not is_marker(line)


def test_lazy_segments_know_their_markers() -> None:
    plan = parse_edit("import os\n# ... existing code ...\ndef b():\n    pass\n// ...\n")
    assert [(h.kind, h.marker_before, h.marker_after) for h in plan.hunks] == [
        ("lazy", False, True), ("lazy", True, True)]
    assert plan.hunks[1].new == ("def b():", "    pass")
    assert plan.hunks[1].snippet_line == 3


@pytest.mark.parametrize("start,end", [("<<<<<<< SEARCH", ">>>>>>> REPLACE"),
                                       ("------- SEARCH", "+++++++ REPLACE")])
def test_search_replace_aider_and_cline(start: str, end: str) -> None:
    snippet = f"{start}\na = 1\nb = 2\n=======\na = 10\n{end}\n{start}\nc\n=======\n{end}\n"
    plan = parse_edit(snippet)
    assert [(h.kind, h.old, h.new, h.number) for h in plan.hunks] == [
        ("search_replace", ("a = 1", "b = 2"), ("a = 10",), 1),
        ("search_replace", ("c",), (), 2)]
    assert detect_format(snippet) == "search_replace"


@pytest.mark.parametrize("header", ["@@ -3,3 +3,3 @@ def f():", "@@ ... @@", "@@"])
@pytest.mark.parametrize("files", ["", "--- a/x.py\n+++ b/x.py\n"])
def test_unified_diff_with_and_without_numbers_and_headers(header: str, files: str) -> None:
    plan = parse_edit(f"{files}{header}\n x = 1\n-y = 2\n+y = 3\n z = 4\n")
    (hunk,) = plan.hunks
    assert (hunk.kind, hunk.old, hunk.new) == ("udiff", ("x = 1", "y = 2", "z = 4"),
                                               ("x = 1", "y = 3", "z = 4"))
    assert hunk.old_start == (3 if "-3" in header else None)


def test_mixed_search_replace_then_lazy() -> None:
    snippet = ("<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n"
               "# ... existing code ...\ndef g():\n    return 1\n")
    plan = parse_edit(snippet)
    assert [h.kind for h in plan.hunks] == ["search_replace", "lazy"]
    assert plan.hunks[1].marker_before and not plan.hunks[1].marker_after
    assert detect_format(snippet) == "mixed"


def test_crlf_snippet_parses_like_lf() -> None:
    lf = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    assert parse_edit(lf.replace("\n", "\r\n")) == parse_edit(lf)


def test_plain_code_is_lazy() -> None:
    assert detect_format("def f():\n    return 1\n") == "lazy"


@pytest.mark.parametrize("snippet,needle", [
    ("x\n<<<<<<< SEARCH\na\n=======\nb\n",
     "SEARCH block 1 (snippet line 2) has no >>>>>>> REPLACE"),
    ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n", "has no ======= line before line 3"),
    ("<<<<<<< SEARCH\na\nb\n", "SEARCH block 1 (snippet line 1) has no ======= line"),
    ("# ...\n\n// ...\n", "holds no edit"),
])
def test_malformed_snippets_raise_with_position(snippet: str, needle: str) -> None:
    with pytest.raises(EditError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_edit(snippet)


def test_edit_error_is_a_value_error() -> None:
    assert issubclass(EditError, ValueError)


SMALL = "x = 1\ny = 2\nz = 3\n"


@pytest.mark.parametrize("header", [
    "@@ -1,1 +1,1 @@",  # counts too small: the hunk goes on
    "@@ -1,9 +1,9 @@",  # too large
    "@@ -1 +1 @@",  # counts left out (1 each)
    "@@ @@",  # none at all
])
def test_diff_hunks_are_counted_from_their_bodies(header: str) -> None:
    # Counts in the header are not trusted (LLMs get them wrong): the hunk is every
    # line with a diff prefix, as `git apply --recount` reads it.
    plan = parse_edit(f"{header}\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n")
    (hunk,) = plan.hunks
    assert (hunk.old, hunk.new) == (("x = 1", "y = 2", "z = 3"), ("x = 10", "y = 2", "z = 30"))


def test_a_diff_hunk_ends_at_the_next_header_marker_or_block() -> None:
    snippet = ("@@ -1,9 +1,9 @@\n-x = 1\n+x = 10\n\n@@ -3 +3 @@\n-z = 3\n+z = 30\n"
               "# ... existing code ...\nw = 4\n")
    plan = parse_edit(snippet)
    assert [(h.kind, h.old, h.new) for h in plan.hunks] == [
        ("udiff", ("x = 1",), ("x = 10",)), ("udiff", ("z = 3",), ("z = 30",)),
        ("lazy", (), ("w = 4",))]


@pytest.mark.parametrize("files", [
    "--- a/x.py\n+++ b/x.py\n",
    "diff --git a/x.py b/x.py\nindex 3b18e51..a3c4e2f 100644\n--- a/x.py\n+++ b/x.py\n",
    "",
])
def test_a_diff_without_hunk_headers_is_still_a_diff(files: str) -> None:
    plan = parse_edit(f"{files}-x = 1\n+x = 10\n y = 2\n")
    assert [(h.kind, h.old, h.new) for h in plan.hunks] == [
        ("udiff", ("x = 1", "y = 2"), ("x = 10", "y = 2"))]


def test_git_extended_headers_are_not_content() -> None:
    plan = parse_edit("diff --git a/x.py b/x.py\nnew file mode 100644\nindex 0000000..a3c4e2f\n"
                      "--- /dev/null\n+++ b/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
    assert [(h.kind, h.old, h.new) for h in plan.hunks] == [("udiff", (), ("x = 1",))]


@pytest.mark.parametrize("snippet", ["- a\n- b\n- c\n", "x = [\n-1,\n+2,\n]\n"])
def test_lists_and_code_with_leading_signs_stay_lazy(snippet: str) -> None:
    assert detect_format(snippet) == "lazy"


@pytest.mark.parametrize("sep", ["=====", "==========", "===", "  =======  "])
def test_separators_of_other_lengths_are_accepted(sep: str) -> None:
    plan = parse_edit(f"<<<<<<< SEARCH\na = 1\n{sep}\na = 2\n>>>>>>> REPLACE\n")
    assert [(h.kind, h.old, h.new) for h in plan.hunks] == [("search_replace", ("a = 1",),
                                                             ("a = 2",))]


@pytest.mark.parametrize("start,end", [("<<<< SEARCH", ">>>> REPLACE"),
                                       ("<<< SEARCH", ">>> REPLACE"),
                                       ("--- SEARCH", "+++ REPLACE")])
def test_shorter_runs_of_one_marker_character_are_accepted(start: str, end: str) -> None:
    plan = parse_edit(f"{start}\na = 1\n=======\na = 2\n{end}\n")
    assert [h.kind for h in plan.hunks] == ["search_replace"]


def test_a_seven_sign_separator_wins_over_shorter_lines_of_equals() -> None:
    # A Markdown heading underline inside the SEARCH text is not the separator.
    plan = parse_edit("<<<<<<< SEARCH\nTitle\n=====\n=======\nName\n=====\n>>>>>>> REPLACE\n")
    assert [(h.old, h.new) for h in plan.hunks] == [(("Title", "====="), ("Name", "====="))]


@pytest.mark.parametrize("snippet,needle", [
    ("<<<<<<< SEARCH\nTitle\n=====\na\n=====\nb\n>>>>>>> REPLACE\n",
     "SEARCH block 1 (snippet line 1) has 2 lines that could be its separator (lines 3 and 5)"),
    ("<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n",
     "SEARCH block 1 (snippet line 1) has no >>>>>>> REPLACE line before line 5"),
])
def test_ambiguous_or_unterminated_blocks_raise(snippet: str, needle: str) -> None:
    with pytest.raises(EditError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_edit(snippet)
