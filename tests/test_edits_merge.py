"""Parsing and merging snippets: crafted cases, edge cases and the corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastapply.edits import EditError, detect_format, is_marker, parse_edit
from fastapply.examples import load_edits
from fastapply.merge import apply_snippet

CORPUS = Path(os.environ.get("FASTAPPLY_DATA") or
              Path(__file__).resolve().parents[1].parent / "shared" / "data" / "edits-dev.jsonl")

PY = ("import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n\n\n"
      "def c():\n    return 3\n")


@pytest.mark.parametrize("line", [
    "// ... existing code ...", "# ... rest of code ...", "    # ... keep existing code ...",
    "/* ... code remains the same ... */", "<!-- ... unchanged ... -->", "-- ...",
    "...", "// ... keep foo() ...", "<!-- ... -->", "# …", "{/* ... existing code ... */}",
])
def test_markers_in_any_comment_syntax(line: str) -> None:
    assert is_marker(line)


@pytest.mark.parametrize("line", ["...options,", "func New(opts ...OptionFunc) *Engine {",
                                  "x = [...]", "## Gin 1.0rc2 (...)", "return ...rest"])
def test_code_with_dots_is_not_a_marker(line: str) -> None:
    assert not is_marker(line)


@pytest.mark.parametrize("marker", ["# ... existing code ...", "# ...", "# ... unchanged ...",
                                    "# ... code remains the same ..."])
def test_lazy_edit_in_the_middle(marker: str) -> None:
    snippet = f"{marker}\ndef b():\n    return 20\n\n\ndef c():\n{marker}\n"
    assert apply_snippet(PY, snippet).check() == PY.replace("return 2\n", "return 20\n")


def test_segment_ending_in_new_lines_is_flagged_when_it_may_replace() -> None:
    # No context after the change: the contract says "insert", a person may mean
    # "replace". The merge inserts, keeps the old line and says so.
    result = apply_snippet(PY, "# ...\ndef b():\n    return 20\n# ...\n")
    assert "    return 20\n    return 2\n" in result.text
    assert "ends in new lines with no context after them" in result.uncertain[0].message


def test_lazy_insertion_deletion_and_two_segments() -> None:
    snippet = ("import os\nimport sys\n# ... existing code ...\ndef b():\n    return 2\n\n\n"
               "def c():\n    return 3\n")
    want = PY.replace("import os\n", "import os\nimport sys\n")
    assert apply_snippet(PY, snippet).check() == want
    deletion = "# ...\n    return 1\n\n\ndef c():\n# ...\n"
    assert apply_snippet(PY, deletion).check() == PY.replace(
        "def b():\n    return 2\n\n\n", "")


def test_search_replace_aider_and_cline() -> None:
    aider = ("<<<<<<< SEARCH\ndef a():\n    return 1\n=======\ndef a():\n    return 10\n"
             ">>>>>>> REPLACE\n")
    cline = ("------- SEARCH\ndef c():\n    return 3\n=======\ndef c():\n    return 30\n"
             "+++++++ REPLACE\n")
    want = PY.replace("return 1\n", "return 10\n").replace("return 3\n", "return 30\n")
    assert apply_snippet(PY, aider + "\n" + cline).check() == want
    assert detect_format(aider) == "search_replace"


def test_udiff_with_and_without_line_numbers() -> None:
    numbered = "--- a/x.py\n+++ b/x.py\n@@ -8,2 +8,2 @@\n def b():\n-    return 2\n+    return 22\n"
    bare = "@@ @@\n def b():\n-    return 2\n+    return 22\n"
    want = PY.replace("return 2\n", "return 22\n")
    for snippet in (numbered, bare):
        assert detect_format(snippet) == "udiff"
        assert apply_snippet(PY, snippet).check() == want


def test_mixed_snippet() -> None:
    snippet = ("<<<<<<< SEARCH\n    return 1\n=======\n    return 11\n>>>>>>> REPLACE\n"
               "@@ @@\n def c():\n-    return 3\n+    return 33\n")
    assert detect_format(snippet) == "mixed"
    want = PY.replace("return 1\n", "return 11\n").replace("return 3\n", "return 33\n")
    assert apply_snippet(PY, snippet).check() == want


def test_tolerates_trailing_whitespace_and_indentation_offset() -> None:
    original = "class A:\n    def f(self):   \n        return 1\n\n    def g(self):\n        pass\n"
    # The snippet's context lost the trailing spaces and is indented 4 less.
    snippet = ("<<<<<<< SEARCH\ndef f(self):\n    return 1\n=======\ndef f(self):\n"
               "    return 2\n>>>>>>> REPLACE\n")
    merged = apply_snippet(original, snippet).check()
    assert merged == original.replace("        return 1\n", "        return 2\n")


def test_crlf_tabs_and_non_ascii_survive() -> None:
    original = "func main() {\r\n\tx := \"héllo\"\r\n\ty := 1\r\n}\r\n"
    snippet = "// ... existing code ...\n\tx := \"héllo\"\n\ty := 2 // ü\n}\n"
    assert apply_snippet(original, snippet).check() == original.replace("y := 1", "y := 2 // ü")


def test_empty_original_takes_the_snippet() -> None:
    assert apply_snippet("", "print('hi')\n").check() == "print('hi')\n"
    sr = "<<<<<<< SEARCH\n=======\nprint('hi')\n>>>>>>> REPLACE\n"
    assert apply_snippet("", sr).check() == "print('hi')\n"


def test_a_2500_line_file() -> None:
    original = "".join(f"line_{i} = {i}\n" for i in range(2500))
    snippet = ("# ... existing code ...\nline_1249 = 1249\nline_1250 = 'changed'\n"
               "line_1251 = 1251\n# ...\n")
    merged = apply_snippet(original, snippet).check()
    assert merged == original.replace("line_1250 = 1250\n", "line_1250 = 'changed'\n")
    assert merged.count("\n") == 2500


def test_anchor_that_appears_twice_is_reported() -> None:
    original = "x = 1\ny = 2\nx = 1\n"
    result = apply_snippet(original, "<<<<<<< SEARCH\nx = 1\n=======\nx = 9\n>>>>>>> REPLACE\n")
    assert result.uncertain and "matches at lines 1 and 3" in result.uncertain[0].message
    with pytest.raises(EditError, match="matches at lines 1 and 3"):
        result.check()


def test_search_not_found_names_block_and_closest_line() -> None:
    lines = [f"value_{i} = {i}" for i in range(60)]
    original = "\n".join(lines) + "\n"
    snippet = ("<<<<<<< SEARCH\nvalue_3 = 3\n=======\nvalue_3 = 33\n>>>>>>> REPLACE\n"
               "<<<<<<< SEARCH\nvalue_40 = 40\nvalue_41 = 999\n=======\nvalue_40 = 0\n"
               ">>>>>>> REPLACE\n")
    result = apply_snippet(original, snippet)
    assert "value_3 = 33" in result.text and "value_40 = 40" in result.text  # nothing dropped
    with pytest.raises(EditError, match=r"SEARCH block 2 \(snippet line 6\) not found in the "
                                        r"original; closest match at line 41"):
        result.check()


@pytest.mark.parametrize("snippet, message", [
    ("<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n", r"SEARCH block 1 \(snippet line 1\) has no ======="),
    ("<<<<<<< SEARCH\nx\n=======\ny\n", r"has no >>>>>>> REPLACE line"),
    ("# ... existing code ...\n\n", r"holds no edit"),
])
def test_malformed_snippets(snippet: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        parse_edit(snippet)


def test_never_silently_drops_code_without_trailing_marker() -> None:
    # A frontier model forgot the closing marker: the rest of the file must not vanish
    # unnoticed.
    result = apply_snippet(PY, "# ...\ndef a():\n    return 100\n")
    assert result.uncertain and "no marker comes after it" in result.uncertain[0].message


def test_shipped_examples_merge_exactly() -> None:
    edits = load_edits()
    for rec in edits:
        for field in ("search_replace", "udiff"):
            assert apply_snippet(rec["original"], rec[field]).check() == rec["updated"], (
                rec["id"], field)
    lazy_exact = sum(apply_snippet(r["original"], r["lazy_snippet"]).text == r["updated"]
                     for r in edits)
    assert lazy_exact >= len(edits) - 2


@pytest.mark.skipif(not CORPUS.is_file(), reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize("field, floor", [
    ("search_replace", 0.99), ("udiff", 0.99), ("lazy_snippet", 0.75),
])
def test_corpus_exact_rate(field: str, floor: float) -> None:
    edits = load_edits(CORPUS)
    exact = sum(apply_snippet(r["original"], r[field]).text == r["updated"] for r in edits)
    assert exact / len(edits) >= floor
