"""A whole file sent as the snippet, with no marker (issue 26, item 6): it is the file.

Before the fix, a Python file whose code has ``...`` bodies (a stub, a protocol) was cut
into segments at those lines, read as markers, and its long segments were refused by the
work budget ("the snippet's lines fit too many places of this large file"); a whole file
edited at both ends, a few lines shorter, was read as a fragment and refused alike."""

from __future__ import annotations

from fastapply.merge import WorkBudget, apply_snippet


def _module(n: int, edited: int | None = None) -> str:
    """A module of ``n`` small functions, a stub with a ``...`` body every 100."""
    out = ["import os", ""]
    for k in range(n):
        if k % 100 == 50:
            out += [f"def stub_{k}(x):", "    ...", ""]
        value = "changed" if k == edited else k
        out += [f"def f_{k}(x):", f"    y = x + {k}", f"    return y * {value!r}", ""]
    return "\n".join(out) + "\n"


def test_a_whole_file_whose_code_has_dots_lines_merges_exactly_and_cheaply() -> None:
    original, updated = _module(300), _module(300, edited=120)
    result = apply_snippet(original, updated, WorkBudget(200_000))
    assert result.text == updated
    assert not result.uncertain


def test_dots_between_other_lines_than_the_originals_are_still_a_marker() -> None:
    original = "def f():\n    ...\n\nx = 1\ny = 2\nz = 3\n"
    result = apply_snippet(original, "x = 1\n...\nz = 3\nw = 4\n")
    assert result.text == "def f():\n    ...\n\nx = 1\ny = 2\nz = 3\nw = 4\n"


def test_a_whole_file_edited_at_both_ends_and_shorter_is_the_file() -> None:
    original = _module(300)
    lines = original.splitlines()
    lines[0] = "import sys"
    lines[-1] = "    return y * 'last'"
    del lines[600:604]  # one function removed
    updated = "\n".join(lines) + "\n"
    result = apply_snippet(original, updated, WorkBudget(200_000))
    assert result.text == updated
    assert not result.uncertain
