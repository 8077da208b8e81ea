"""An unsure merge names its rival readings, and the windows a witness must read."""

from __future__ import annotations

from fastapply.merge import apply_snippet
from fastapply.merge.definitions import declared_names
from fastapply.merge.windows import unsure_windows

#: Two identical blocks: the snippet's anchors fit both (a tie).
TWIN = "".join(f"line {i}\n" for i in range(40)) + \
    "def f():\n    x = 1\n    return x\n\n" + "".join(f"mid {i}\n" for i in range(40)) + \
    "def f():\n    x = 1\n    return x\n\n" + "".join(f"end {i}\n" for i in range(40))
TWIN_SNIPPET = ("# ... existing code ...\ndef f():\n    x = 2\n    return x\n"
                "# ... existing code ...\n")


def test_a_tie_names_both_placements_as_whole_files() -> None:
    result = apply_snippet(TWIN, TWIN_SNIPPET).with_readings()
    assert result.uncertain, "a tie is unsure"
    texts = [c.text for c in result.candidates]
    first = TWIN.replace("    x = 1\n", "    x = 2\n", 1)
    second = "    x = 2\n".join(TWIN.rsplit("    x = 1\n", 1))
    assert texts[0] == result.text and {first, second} <= set(texts)
    assert result.candidates[0].how == "chosen"
    assert len(result.kept) == len(result.text.splitlines())


def test_a_certain_merge_carries_no_readings() -> None:
    result = apply_snippet("a = 1\nb = 2\n",
                           "<<<<<<< SEARCH\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE\n"
                           ).with_readings()
    assert not result.uncertain and result.candidates == () and result.kept == ()


def test_windows_hold_every_line_the_readings_differ_on_and_no_more() -> None:
    result = apply_snippet(TWIN, TWIN_SNIPPET).with_readings()
    chosen = result.text.splitlines(keepends=True)
    rivals = [c.text.splitlines(keepends=True) for c in result.candidates[1:]]
    windows = unsure_windows(chosen, result.kept, rivals,
                             [u.line - 1 for u in result.uncertain], context=3)
    assert len(windows) == 2  # one at each copy, not the 40 lines between them
    for w in windows:
        assert w.end - w.start <= 12
        assert chosen[w.start].strip() != ""  # a window never opens with a blank line
    for rival in rivals:  # each reading is the chosen file with its windows replaced
        served, cursor = [], 0
        for w in windows:
            served += chosen[cursor:w.start]
            texts = [list(t) for t in w.texts]
            served += next((t for t in texts if t != chosen[w.start:w.end]
                            and "".join(t) in "".join(rival)), chosen[w.start:w.end])
            cursor = w.end
        served += chosen[cursor:]
        assert any("".join(served) == c.text for c in result.candidates)
    orig = TWIN.splitlines(keepends=True)
    for w in windows:  # the window is the merge of its original lines
        assert "".join(orig[w.orig_start:w.orig_end]).replace("x = 1", "x = 2") in \
            {"".join(t) for t in w.texts}



def test_a_tie_in_two_windows_names_which_reading_each_text_belongs_to() -> None:
    # The tie's two placements lie 40 lines apart: a window at each. In the first, the
    # reading that placed the change there has the changed text; every other reading
    # (the one that placed it at the second copy) has the unchanged one. A witness that
    # takes the changed text in both windows agrees with no single reading.
    result = apply_snippet(TWIN, TWIN_SNIPPET).with_readings()
    chosen = result.text.splitlines(keepends=True)
    rivals = [c.text.splitlines(keepends=True) for c in result.candidates[1:]]
    first, second = unsure_windows(chosen, result.kept, rivals,
                                   [u.line - 1 for u in result.uncertain], context=3)
    every = set(range(len(result.candidates)))
    for w in (first, second):
        assert set().union(*w.members) == every  # each candidate has one text per window
        assert sum(len(m) for m in w.members) == len(every)
        for k, text in enumerate(w.texts):  # members[k] are the candidates with that text
            for c in w.members[k]:
                lines = result.candidates[c].text.splitlines(keepends=True)
                assert "".join(text) in "".join(lines)
    changed = [next(k for k, t in enumerate(w.texts) if "    x = 2\n" in t)
               for w in (first, second)]
    assert not first.agreeing(changed[0]) & second.agreeing(changed[1])
    unchanged = [next(k for k, t in enumerate(w.texts) if "    x = 2\n" not in t)
                 for w in (first, second)]
    assert first.agreeing(changed[0]) & second.agreeing(unchanged[1])

def test_a_go_regrouping_that_keeps_an_old_declaration_is_not_certain() -> None:
    # the class of issue 31 item 7: separate var lines regrouped into var ( ... ), one
    # renamed; the merge places the new block by its comments and keeps the old lines
    original = ("package pool\n\nimport \"sync\"\n\n// bufferPool holds buffers.\n"
                "var bufferPool = sync.Pool{New: func() any { return new(Buffer) }}\n\n"
                "// maxSize is the largest buffer kept.\nvar maxSize = 1 << 16\n\n"
                "func Get() *Buffer {\n\treturn bufferPool.Get().(*Buffer)\n}\n")
    snippet = ("// ... existing code ...\n\nvar (\n\t// bufferPool holds buffers.\n"
               "\tbufferPool = sync.Pool{New: func() any { return new(Buffer) }}\n\n"
               "\t// maxBufferSize is the largest buffer kept.\n\tmaxBufferSize = 1 << 16\n)\n\n"
               "func Get() *Buffer {\n// ... existing code ...\n")
    result = apply_snippet(original, snippet)
    assert "var bufferPool" in result.text and "\tbufferPool =" in result.text  # kept both
    # and this is the one finding that says so (it was served as certain before)
    assert [u.message[:45] for u in result.uncertain] == [
        "the merged file declares 'bufferPool' 2 times"]


def test_declarations_counted_per_language() -> None:
    lines = ["def f():", "class A:", "export function g(a: string): void;",
             "export function g(a) {", "pub(crate) fn h() {}", "#[cfg(test)]", "fn h() {}",
             "const (", "\tc = 1", ")", "type T struct {", "func (t T) f() {}", "```go",
             "func main() {}", "```", "let mut_x = 1;", "static mut Y: i32 = 0;"]
    names = declared_names(lines)
    assert names == {"f": [0], "A": [1], "g": [3], "h": [4], "c": [8], "T": [10],
                     "mut_x": [15], "Y": [16]}


def test_a_definition_moved_and_kept_twice_is_flagged_unless_the_snippet_shows_both() -> None:
    original = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
    moved = "# ... existing code ...\ndef b():\n    return 2\n\n\ndef a():\n    return 3\n"
    result = apply_snippet(original, moved)
    assert result.text.count("def a():") == 2
    assert any("declares 'a' 2 times" in u.message for u in result.uncertain)
    both = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef a():\n    return 3\n"
    shown = apply_snippet(original, both)  # the whole new file: both are what it says
    assert shown.text == both and not shown.uncertain


def test_lines_disputed_to_the_files_edge_are_left_to_the_whole_file() -> None:
    # The snippet ends with no marker after its last segment, and 17 original lines
    # follow: kept or removed? A window of those lines cannot show the model that the
    # file ends there (a validation edit served wrong that way: the commit had removed
    # them), so no window is offered and the whole file is witnessed.
    import pytest

    from fastapply.merge.windows import NoWindows, window_tasks

    original = "".join(f"line {i}\n" for i in range(30))
    for snippet in ("// ...\nline 10\nline 11 changed\nline 12\n",      # the end
                    "line 12\nline 13 changed\nline 14\n// ...\n"):     # the start
        result = apply_snippet(original, snippet).with_readings()
        assert result.uncertain and not any(u.local for u in result.uncertain)
        with pytest.raises(NoWindows):
            window_tasks(original, snippet, result)
