"""Lazy snippets in the styles coding agents write (issue 22, item 4): a function from its
signature to the end of its block with no marker before or after it, and the whole file
sent back with an edit near one of its ends.

Before the fix, a snippet starting at ``    def greet(self):`` (no marker before it) was
read as starting the file: its first segment was inserted at line 1 ("no line of it
matches the original"), and a whole file whose first line changed was read as a fragment
and refused by the work budget."""

from __future__ import annotations

from fastapply.merge import apply_snippet

BODY = "".join(f"        v{k} = {k}\n" for k in range(1, 16))
PYTHON = f"""import os


class Greeter:
    def __init__(self, name):
        self.name = name

    def greet(self):
{BODY}        return self.name

    def other(self):
        return 1
"""

JAVA = """package demo;

import java.util.List;

public class Shapes {
    private final List<String> names;

    public Shapes(List<String> names) {
        this.names = names;
    }

    public int count() {
        int total = 0;
        for (String name : names) {
            total += 1;
        }
        log("counted");
        audit(total);
        return total;
    }

    public String first() {
        return names.get(0);
    }
}
"""


def test_a_snippet_that_starts_at_a_signature_starts_there_not_at_line_1() -> None:
    snippet = ("    def greet(self):\n        # ... existing fields ...\n        v11 = 11\n"
               "        d = 4\n        h = 9\n        return self.name\n")
    want = PYTHON.replace("        v12 = 12\n        v13 = 13\n        v14 = 14\n"
                          "        v15 = 15\n", "        d = 4\n        h = 9\n")
    result = apply_snippet(PYTHON, snippet)
    assert result.text == want
    assert result.uncertain == ()


def test_a_method_from_signature_to_its_closing_brace_keeps_the_rest_of_the_class() -> None:
    snippet = """    public int count() {
        // ... existing code ...
        log("counted");
        audit(total, names.size());
        return total;
    }
"""
    result = apply_snippet(JAVA, snippet)
    assert result.text == JAVA.replace("audit(total);", "audit(total, names.size());")
    assert result.uncertain == ()


def test_a_block_end_that_runs_on_into_blank_lines_is_flagged() -> None:
    # The blank line after the block could be the neighbour of a deletion the snippet
    # shows, or not: where the snippet ends is a guess.
    snippet = """    public int count() {
        // ... existing code ...
        audit(total);
        return total + 1;
    }

"""
    result = apply_snippet(JAVA, snippet)
    assert any("last line is blank" in u.message for u in result.uncertain)


def test_a_whole_large_file_with_its_first_line_edited_is_merged_not_refused() -> None:
    lines = [f"def f{k}(x):\n    return x + {k}\n\n" for k in range(700)]  # 2,100 lines
    original = "".join(lines)
    updated = "".join(["def f0(x, y=0):\n    return x + y\n\n", *lines[1:350], *lines[351:]])
    result = apply_snippet(original, updated)  # no markers: the whole new file
    assert result.text == updated
    assert result.uncertain == ()



def test_the_unchanged_start_of_a_second_block_is_not_an_unread_deletion() -> None:
    # Between markers, a segment found as it stands is a deletion the merge did not read
    # (textbook snippets show a change in every segment); in a snippet that starts at a
    # signature, the signature of the next block it shows is just where that block starts.
    original = PYTHON.replace("        return 1\n", BODY.replace("v", "w") + "        return 1\n")
    snippet = ("    def greet(self):\n        # ... existing code ...\n"
               "        v10 = 10\n        v11 = 111\n        v12 = 12\n        v13 = 13\n"
               "        v14 = 14\n"
               "        # ... existing code ...\n    def other(self):\n"
               "        # ... existing code ...\n        w15 = 15\n        return 1\n")
    result = apply_snippet(original, snippet)
    assert result.text == original.replace("v11 = 11\n", "v11 = 111\n")
    assert result.uncertain == ()
