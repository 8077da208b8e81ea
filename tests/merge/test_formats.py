"""Edits as other tools write them (git, diff, Aider, merge conflicts, Markdown files):
each is merged exactly, or refused with a reason, never written wrong."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet
from fastapply.merge.edits import EditError, parse_edit

FILE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"
#: FILE with c = 30 (what HUNK makes of it).
C30 = FILE.replace("c = 3\n", "c = 30\n")
HUNK = "@@ -2,3 +2,3 @@\n b = 2\n-c = 3\n+c = 30\n d = 4\n"


def merged(original: str, snippet: str) -> str:
    """The merge, which must not be flagged."""
    result = apply_snippet(original, snippet)
    assert not result.uncertain, result.uncertain
    return result.text


def test_a_diff_of_two_files_is_refused() -> None:
    # Both hunks apply to FILE, so merging them would write y.py's change into x.py.
    snippet = (f"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n{HUNK}"
               "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a = 1\n+a = 9\n")
    with pytest.raises(EditError, match=r"edits 2 files \(x.py, y.py\)"):
        apply_snippet(FILE, snippet)


def test_one_file_in_several_headers_is_one_file() -> None:
    # Aider writes a header per hunk, with or without the a/ b/ folders.
    snippet = (f"--- a/src/x.py\n+++ b/src/x.py\n{HUNK}"
               "--- x.py\n+++ x.py\n@@ -5 +5 @@\n-e = 5\n+e = 50\n")
    assert merged(FILE, snippet) == C30.replace("e = 5\n", "e = 50\n")


def test_a_new_file_diff_is_refused_on_a_file_with_text() -> None:
    snippet = "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
    with pytest.raises(EditError, match="creates a new file"):
        apply_snippet(FILE, snippet)
    assert merged("", snippet) == "x = 1\ny = 2\n"


def test_a_deletion_that_leaves_text_is_refused() -> None:
    whole = "--- a/x.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n" + \
        "".join(f"-{s}\n" for s in FILE.splitlines())
    assert merged(FILE, whole) == ""
    partial = "--- a/x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a = 1\n-b = 2\n"
    with pytest.raises(EditError, match="deletes the file"):
        apply_snippet(FILE, partial)


@pytest.mark.parametrize(("original", "body", "want"), [
    # the old file had no final newline; the new one has
    ("a = 1\nb = 2", " a = 1\n-b = 2\n\\ No newline at end of file\n+b = 3\n", "a = 1\nb = 3\n"),
    # the new file has none
    ("a = 1\nb = 2\n", " a = 1\n-b = 2\n+b = 3\n\\ No newline at end of file\n", "a = 1\nb = 3"),
    # neither has
    ("a = 1\nb = 2", " a = 1\n-b = 2\n\\ No newline at end of file\n+b = 3\n"
                     "\\ No newline at end of file\n", "a = 1\nb = 3"),
])
def test_no_newline_at_end_of_file(original: str, body: str, want: str) -> None:
    assert merged(original, "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n" + body) == want


def test_no_newline_claimed_mid_file_is_flagged() -> None:
    snippet = "@@ -2,2 +2,2 @@\n b = 2\n-c = 3\n+c = 30\n\\ No newline at end of file\n"
    result = apply_snippet(FILE, snippet)
    assert "No newline at end of file" in result.uncertain[0].message


@pytest.mark.parametrize("wrap", [
    "x.py\n```diff\n{}```\n",  # Aider: the path, then a fenced diff
    "```diff\n{}```\n",
    "```\n{}```\n\n",
])
def test_a_fenced_diff_is_read_without_its_fence(wrap: str) -> None:
    assert merged(FILE, wrap.format(f"--- x.py\n+++ x.py\n{HUNK}")) == C30
    assert merged(FILE, wrap.format(HUNK)) == C30


def test_a_lone_cr_is_text_in_snippet_and_file_alike() -> None:
    # A lone CR is not a line break in the file, so it is none in the snippet either.
    original = "x = 1  # a\rb\ny = 2\nz = 3\n"
    snippet = "x = 1  # a\rb\ny = 20\n# ...\n"
    assert merged(original, snippet) == "x = 1  # a\rb\ny = 20\nz = 3\n"


MARKDOWN = "Title\n=====\n\nSome text.\n"


def test_a_heading_underline_in_a_replacement_is_text() -> None:
    # The file underlines its headings with '=', so a line '=======' under a new
    # heading is one more (not a doubled separator).
    snippet = "<<<<<<< SEARCH\nSome text.\n=======\nSome text.\n\nNews\n=======\n>>>>>>> REPLACE\n"
    assert merged(MARKDOWN, snippet) == MARKDOWN + "\nNews\n=======\n"
    with pytest.raises(EditError, match="second '=======' line"):  # no underlines there
        apply_snippet("# Title\n\nSome text.\n", snippet)


@pytest.mark.parametrize(("original", "snippet"), [
    # the heading's underline is SEARCH text or the separator: both readings are found
    ("Heading\n=======\n\ntext\n",
     "<<<<<<< SEARCH\nHeading\n=======\n=======\nHeading2\n=======\n>>>>>>> REPLACE\n"),
    # a merge conflict in the file, resolved by a block
    ("x\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> br\ny\n",
     "<<<<<<< SEARCH\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> br\n=======\na\n>>>>>>> REPLACE\n"),
])
def test_a_block_whose_separator_is_ambiguous_is_refused(original: str, snippet: str) -> None:
    with pytest.raises(EditError, match="more than one '=======' line"):
        apply_snippet(original, snippet)


def test_a_block_of_many_separators_is_read_in_linear_work() -> None:
    # Each other reading of a block is a copy of it: one is kept, not one per '=======' line
    # (20,000 of them took 95 s to parse).
    snippet = "<<<<<<< SEARCH\nx\n" + "=======\n" * 20000 + ">>>>>>> REPLACE\n"
    assert len(parse_edit(snippet).hunks[0].readings) == 1
    with pytest.raises(EditError, match="second '=======' line"):
        apply_snippet("x\n", snippet)


LINES = "".join(f"l{i}\n" for i in range(1, 9))


def test_hunks_that_share_a_context_line_apply_one_after_the_other() -> None:
    # Models often write hunks whose context overlaps; git apply reads them in turn.
    snippet = "@@ -2,3 +2,3 @@\n l2\n-l3\n+L3\n l4\n@@ -4,3 +4,3 @@\n l4\n-l5\n+L5\n l6\n"
    assert merged(LINES, snippet) == LINES.replace("l3\n", "L3\n").replace("l5\n", "L5\n")
    # hunks that change the same line stay an overlap, flagged
    clash = "@@ -2,3 +2,3 @@\n l2\n-l3\n+L3\n l4\n@@ -3,3 +3,3 @@\n l3\n-l4\n+L4\n l5\n"
    assert "overlap" in apply_snippet(LINES, clash).uncertain[0].message


@pytest.mark.parametrize("snippet", [
    # git diff --binary: its literal lines were read as a new file's text
    "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nGIT binary patch\nliteral 10\n"
    "RcmZ?wbhEHbRA6KN0{{zh0w@3g\n\nliteral 0\nHcmV?d00001\n\n",
    "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nBinary files a/x.bin and b/x.bin differ\n",
])
def test_a_binary_diff_is_refused(snippet: str) -> None:
    with pytest.raises(EditError, match="binary file"):
        apply_snippet(FILE, snippet)


def test_a_context_diff_is_refused() -> None:
    # diff -c: longer than the file and without markers, it was taken as the new file.
    snippet = ("*** x.py\n--- x.py\n***************\n*** 2,4 ****\n  b = 2\n! c = 3\n  d = 4\n"
               "--- 2,4 ----\n  b = 2\n! c = 30\n  d = 4\n")
    with pytest.raises(EditError, match=r"context diff .* send a unified diff"):
        apply_snippet(FILE, snippet)


def test_a_marker_inside_a_diff_hunk_splits_it() -> None:
    # The lines after the marker were read as lazy code: the '+' was written into the file.
    snippet = "@@ -1,5 +1,5 @@\n a = 1\n-b = 2\n...\n+b = 20\n c = 3\n d = 4\n e = 5\n"
    assert merged(FILE, snippet) == FILE.replace("b = 2\n", "b = 20\n")
    snippet = "@@ -2,3 +2,3 @@\n b = 2\n-c = 3\n+c = 30\n# ...\n d = 4\n-e = 5\n+e = 50\n"
    assert merged(FILE, snippet) == C30.replace("e = 5\n", "e = 50\n")
    # right after the @@ line, and before context only (whose prefix space was written)
    snippet = "@@ -2,3 +2,4 @@\n// ...\n b = 2\n+b2 = 0\n c = 3\n"
    assert merged(FILE, snippet) == FILE.replace("b = 2\n", "b = 2\nb2 = 0\n")
    snippet = "@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n# ...\n\n d = 4\n e = 5\n"
    assert merged("a = 1\nb = 2\nc = 3\n\nd = 4\ne = 5\n", snippet) == \
        "a = 1\nb = 20\nc = 3\n\nd = 4\ne = 5\n"


def test_diff_lines_after_a_line_without_prefix_are_flagged() -> None:
    # A hunk line that lost its prefix (here a tab before the '+') ends the hunk; the
    # lines after it were written into the file with their '+' signs, unflagged.
    snippet = "@@ -2,4 +2,5 @@\n b = 2\n-c = 3\n+c = 30\n\t+c2 = 0\n+c3 = 0\n d = 4\n e = 5\n"
    result = apply_snippet(FILE, snippet)
    assert "outside the diff's hunks" in " ".join(u.message for u in result.uncertain)


def test_openai_patch_format() -> None:
    # OpenAI's apply_patch format: its frame lines were written into the file (flagged).
    patch = "*** Begin Patch\n*** Update File: x.py\n{}*** End Patch\n"
    assert merged(FILE, patch.format(HUNK.replace("@@ -2,3 +2,3 @@", "@@ a = 1"))) == C30
    assert merged(FILE, patch.format(HUNK.replace("@@ -2,3 +2,3 @@\n", ""))) == C30
    added = "*** Begin Patch\n*** Add File: new.py\n+x = 1\n*** End Patch\n"
    assert merged("", added) == "x = 1\n"
    with pytest.raises(EditError, match="creates a new file"):
        apply_snippet(FILE, added)
    with pytest.raises(EditError, match="edits 2 files"):
        apply_snippet(FILE, patch.format(HUNK + "*** Update File: y.py\n@@\n-a = 1\n+a = 2\n"))


@pytest.mark.parametrize("snippet", [
    "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to y.py\n",
    "diff --git a/x.py b/x.py\nold mode 100644\nnew mode 100755\n",
])
def test_a_diff_without_hunks_says_so(snippet: str) -> None:
    # (It was "the snippet holds no edit (only markers or blank lines)".)
    with pytest.raises(EditError, match="file headers but no hunk"):
        apply_snippet(FILE, snippet)


GO = "package main\n\nfunc f() {\n\tif x {\n\t\treturn 1\n\t}\n\treturn 0\n}\n"


@pytest.mark.parametrize("snippet", [
    "@@ -3,6 +3,6 @@\n func f() {\n     if x {\n-        return 1\n+        return 2\n     }\n",
    "<<<<<<< SEARCH\nfunc f() {\n    if x {\n        return 1\n=======\nfunc f() {\n"
    "    if x {\n        return 2\n>>>>>>> REPLACE\n",
])
def test_tabs_written_as_spaces_are_the_files_tabs(snippet: str) -> None:
    # A Go file indents with tabs; models often write its lines with four spaces. The
    # shift was taken at the unindented first line, so the block was flagged.
    assert merged(GO, snippet) == GO.replace("return 1", "return 2")
