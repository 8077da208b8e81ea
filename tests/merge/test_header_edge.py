"""A snippet with no marker before it that opens with new lines a few lines below a header
comment (merge/whole.py:header_left_out).

Issue 38 saw it with the windowed witness on an unseen repository: an agent snippet opened at
the file's third line, below a magic comment and a blank line, with no marker before it. The
merge replaced those two lines with the snippet's first line and called itself certain, so
the served file lost its magic comment. A header comment is what a snippet leaves out, not
what it rewrites, so that reading is now a guess: unsure, with the file that keeps the
header among its readings, and since the lines disputed run to the file's first line, left
to the whole-file witness (no window can show the model where a file starts)."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet
from fastapply.merge.windows import NoWindows, window_tasks

ORIGINAL = ("# -*- coding: utf-8 -*-\n\nimport os\nimport sys\n\n\ndef main():\n"
            "    print(os.name)\n    return 0\n" + "".join(f"x{i} = {i}\n" for i in range(30)))
SNIPPET = ("import re\nimport os\nimport sys\n\n\ndef main():\n    print(os.name)\n"
           "# ... existing code ...\n")


def test_a_header_comment_above_new_first_lines_is_not_silently_dropped() -> None:
    result = apply_snippet(ORIGINAL, SNIPPET).with_readings()
    assert result.uncertain and not any(u.local for u in result.uncertain)
    assert "original lines 1-2 were replaced" in result.uncertain[0].message
    texts = [c.text for c in result.candidates]
    assert "# -*- coding: utf-8 -*-\n\nimport re\nimport os\n" in "".join(texts)  # kept
    assert any(t.startswith("import re\n") for t in texts)  # or removed: both are readings
    with pytest.raises(NoWindows):
        window_tasks(ORIGINAL, SNIPPET, result)


def test_code_or_a_like_comment_replaced_at_the_top_is_still_the_edit_shown() -> None:
    code = "require 'helper'\n\nclass A\n  def a; end\nend\n" + "# x\n" * 20
    snippet = "require_relative 'test_helper'\n\nclass A\n  # ... rest ...\n"
    merged = apply_snippet(code, snippet)
    assert not merged.uncertain and merged.text.startswith("require_relative")
    licence = "# Copyright 2020 Ann\nimport os\n\nprint(os.name)\n" + "# x\n" * 20
    snippet = "# Copyright 2024 Ann\nimport os\n\nprint(os.sep)\n# ... rest ...\n"
    merged = apply_snippet(licence, snippet)
    assert not merged.uncertain and merged.text.startswith("# Copyright 2024 Ann\n")
