"""Merge limits: bounded work on large inputs, and no input that crashes the merge."""

from __future__ import annotations

import random

import pytest

from fastapply.merge import WorkBudget, apply_snippet
from fastapply.merge.edits import EditError

PY = "import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"


def _shapes(lines: int) -> tuple[str, dict[str, str]]:
    from fastapply.bench.merge_shapes import code_lines, joined, snippets

    text = joined(code_lines(lines, seed=0))
    return text, snippets(text, seed=0)


@pytest.mark.parametrize("shape", ["whole_file_as_lazy", "whole_file_few_edits",
                                   "search_unmatched_100", "search_matched_100",
                                   "lazy_many_markers", "udiff_many_hunks"])
def test_worst_case_shapes_do_work_linear_in_the_file(shape: str) -> None:
    # Each shape once cost seconds (quadratic in the file). The work a merge does is
    # counted; at 4,000 lines it must stay within a few units per line.
    text, snippets = _shapes(4000)
    budget = WorkBudget()
    result = apply_snippet(text, snippets[shape], budget)
    assert budget.spent <= 40 * 4000, budget.spent
    if shape == "search_unmatched_100":
        assert result.text == text and len(result.uncertain) == 100
        return
    merged = result.check()
    edits = {"whole_file_as_lazy": 0, "whole_file_few_edits": 3}.get(shape, 100)
    assert merged.count("  # edited") == edits
    assert merged.replace("  # edited", "") == text


def test_a_merge_over_its_work_budget_is_refused_with_what_to_do() -> None:
    # A lazy segment of the whole 3,000-line file between markers: its alignment would
    # be millions of cells. It is refused, naming the segment and what to send instead.
    text, _ = _shapes(3000)
    snippet = "# ... existing code ...\n" + text.replace("+ 7\n", "+ 70\n", 1) + "# ...\n"
    with pytest.raises(EditError, match=r"more work than its budget .* lazy segment 1 "
                                        r"\(snippet line 2\).* split long lazy segments"):
        apply_snippet(text, snippet)
    with pytest.raises(EditError, match="budget"):
        apply_snippet(PY, "# ...\ndef b():\n    return 20\n# ...\n", WorkBudget(5))


#: Lines the random files and snippets are drawn from: code, blank and generic lines,
#: markers of every notation, malformed ones, diff and git header lines, CRLF-prone text.
LINES = ["", " ", "a", "b", "c", "}", "x = 1", "x = 2", "    return x", "def f():", "# ...",
         "// ... existing code ...", "...", "<<<<<<< SEARCH", "=======", "=====",
         ">>>>>>> REPLACE", "------- SEARCH", "+++++++ REPLACE", "@@ -1,2 +1 @@", "@@ @@", "@@",
         "-a", "+b", " c", "-", "+", "\\ No newline at end of file", "--- a/x", "+++ b/x",
         "diff --git a/x b/x", "index 1a..2b 100644", "\tx = 1", "<<<<<<< HEAD", "import os",
         "## Head", "-- SEARCH"]


def _random_text(rng: random.Random, lines: int) -> str:
    text = "\n".join(rng.choice(LINES) for _ in range(lines))
    ending = rng.random()
    return text + "\n" if ending < 0.4 else text.replace("\n", "\r\n") if ending < 0.5 else \
        text + "\n\n" if ending < 0.55 else text


def _edited_slice(rng: random.Random, original: str) -> str:
    """A lazy snippet (or a SEARCH block) made from a slice of the file, a few lines
    inserted, removed or changed, markers where the slice leaves lines out."""
    lines = original.replace("\r\n", "\n").split("\n")
    a = rng.randrange(len(lines) + 1)
    b = rng.randrange(a, len(lines) + 1)
    seg = lines[a:b]
    for _ in range(rng.randrange(4)):
        k, op = rng.randrange(len(seg) + 1), rng.random()
        if op < 0.4:
            seg.insert(k, rng.choice(LINES))
        elif seg:
            k = min(k, len(seg) - 1)
            if op < 0.7:
                del seg[k]
            else:
                seg[k] += rng.choice([" ", "x", "  # c"])
    if rng.random() < 0.2:
        seg = ["<<<<<<< SEARCH", *lines[a:b], "=======", *seg, ">>>>>>> REPLACE"]
    else:
        marker = rng.choice(["# ...", "// ... existing code ...", "..."])
        seg = [marker] * (a > 0 or rng.random() < 0.3) + seg + \
            [marker] * (b < len(lines) or rng.random() < 0.3)
    return "\n".join(seg) + rng.choice(["", "\n"])


def test_random_files_and_snippets_give_a_result_or_an_edit_error() -> None:
    # Property: any input gives a merge or an EditError naming the problem, never
    # another exception. Random small files and snippets over a fixed seed (found: a
    # made-up anchor past the end of the file, and a loop that never advanced).
    rng = random.Random(20261123)
    for _ in range(800):
        original = _random_text(rng, rng.randrange(40))
        snippet = _edited_slice(rng, original) if rng.random() < 0.7 else \
            _random_text(rng, rng.randrange(10))
        try:
            result = apply_snippet(original, snippet)
        except EditError:
            continue
        assert isinstance(result.text, str), (original, snippet)


def test_a_diff_body_starting_with_a_block_marker_is_parsed_not_looped_on() -> None:
    # Every line has a diff sign, but the first is a REPLACE marker: the parser took it
    # for a headerless hunk that ended before it began, and never advanced.
    with pytest.raises(EditError):
        apply_snippet(" c\n# ...", "+++++++ REPLACE\n-- SEARCH\n\n")


def test_lines_found_everywhere_are_charged_before_the_locate_pass_runs() -> None:
    # 200,000 copies of "}" (400 KB, far below the input limit) and a segment of three
    # "}": 600,000 matched pairs. Each costs about three alignment cells of time (two
    # Fenwick-tree steps and a bisection); counted at one, they passed the budget and
    # held a worker for 2 s before the alignment was refused. Now the pass is refused
    # by its charge, before it runs.
    from fastapply.merge.lazy import LOCATE_WORK

    text = "}\n" * 200_000 + "x\n"
    budget = WorkBudget()
    with pytest.raises(EditError, match="budget"):
        apply_snippet(text, "// ...\n}\n}\ny\n}\n// ...\n", budget)
    assert budget.spent == LOCATE_WORK * 3 * 200_000


def test_many_small_segments_are_charged_the_work_around_their_placement() -> None:
    # 2,000 lazy segments of two lines on a 20,000-line file (80 KB of snippet): each
    # placement is a small alignment (a few hundred cells) but about as much work again
    # around it (keys, nearness, the traceback, the review), tried for each context
    # reading. Counted by cells only, the merge stayed within its budget and held a
    # worker for 1.7 s; counted with ALIGN_WORK per segment and window line, it is refused.
    text = "".join(f"line_{i} = {i}\n" for i in range(20_000))
    snippet = "".join(f"# ...\nline_{i} = {i}\nnew_{i} = 0\n" for i in range(0, 20_000, 10))
    with pytest.raises(EditError, match="budget"):
        apply_snippet(text, snippet + "# ...\n")
    # a tenth of it (200 segments) is merged, and right
    merged = apply_snippet(text, "".join(f"# ...\nline_{i} = {i}\nnew_{i} = 0\n"
                                         for i in range(0, 20_000, 100)) + "# ...\n").check()
    assert merged.count("new_") == 200 and merged.count("line_") == 20_000


def test_word_lookups_by_scanning_equal_the_whole_index(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # WordIndex answers its first look-ups by scanning the lines (a small edit to a 3 MB
    # file built the whole word index for 0.65 s); it must give what the index gives,
    # for words, symbol runs and non-ASCII text, before and after it builds the index.
    from fastapply.merge import lines as _merge_lines
    from fastapply.merge.lines import INDEX_PASSES, WordIndex, key_exact, positions, word_index

    monkeypatch.setattr(_merge_lines, "SCAN_CHARS", 0)  # scan even this small text
    rng = random.Random(7)
    atoms = ["a", "ab", "b_1", "1", "é", "名前", "x", "(", ")", "()", "=", "==", "->", "//",
             "...", "'", "\\", "$", "[", ".*", "\t", " ", "  ", "\u2028", "\x0c"]
    lines = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 8))) for _ in range(400)]
    table = positions(lines, key_exact)
    whole = word_index(table)
    words = sorted(whole) + ["absent", "((", "é名前"]
    for word in words:  # a fresh index each time: every look-up is a scan
        assert list(WordIndex(table).get(word)) == whole.get(word, []), word
    shared = WordIndex(table)  # one index: it builds the whole index after a few scans
    assert [list(shared.get(w)) for w in words] == [whole.get(w, []) for w in words]
    assert shared.passes >= INDEX_PASSES
