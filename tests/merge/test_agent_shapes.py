"""Snippets written the way coding agents write them (issue 45): each shape that was served
wrong as a *certain* merge is now either right or unsure with the truth among its
readings. Small files written here; the shapes come from ../shared/data/agent-train.jsonl."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet
from fastapply.merge.doubts.region import blank_led, blank_run_edge
from fastapply.merge.doubts.unmarked import unlike_edges
from fastapply.merge.merger import _Merger
from fastapply.merge.segment import Segment

PHP = """<?php
class A
{
    public function a()
    {
        return 1;
    }

    /**
     * Doc of b.
     */
    #[Pure]
    public function b($x)
    {
        return $x;
    }

    public function c()
    {
        return 3;
    }
}
"""


def readings(original: str, snippet: str) -> list[str]:
    return [c.text for c in apply_snippet(original, snippet).with_readings().candidates]


def test_the_doc_comment_above_a_shown_declaration_is_kept_and_the_merge_is_unsure() -> None:
    # marker, blank line, the signature: the blank line is layout, not the line above the
    # doc comment, so the doc comment and the attribute stay
    snippet = ("// ... existing code ...\n\n    public function b($x)\n    {\n"
               "        return $x + 1;\n    }\n\n// ... existing code ...\n")
    result = apply_snippet(PHP, snippet)
    assert result.text == PHP.replace("return $x;", "return $x + 1;")
    assert result.uncertain and "only blank lines stand between its marker" in \
        result.uncertain[0].message
    assert "original lines 9-12 ('/**')" in result.uncertain[0].message
    # the rival reads the blank line as context: the lines between it and b() removed
    removed = PHP.replace("return $x;", "return $x + 1;").replace(
        "    /**\n     * Doc of b.\n     */\n    #[Pure]\n", "")
    assert removed in readings(PHP, snippet)[1:]


def test_lines_after_a_segment_that_ends_with_blank_lines_are_read_both_ways() -> None:
    # read with one line of context (the blank line) the comment goes, read freely it
    # stays: unsure, with both files among the readings
    original = "def f():\n    return 1\n# about g\n\ndef g():\n    return 2\n"
    snippet = "def f():\n    x = 10\n    return 1\n\n# ... existing code ...\n"
    result = apply_snippet(original, snippet)
    assert [u.line for u in result.uncertain] == [3]
    assert "'# about g'" in result.uncertain[0].message
    kept = original.replace("    return 1", "    x = 10\n    return 1")
    assert {kept, kept.replace("# about g\n", "")} <= set(readings(original, snippet))


def test_a_removal_shown_by_context_that_is_not_blank_stays_certain() -> None:
    # the line above the removed doc comment is shown: the removal is the snippet's own
    snippet = ("// ... existing code ...\n        return 1;\n    }\n\n    public function b($x)\n"
               "// ... existing code ...\n")
    result = apply_snippet(PHP, snippet)
    assert not result.uncertain
    assert "Doc of b" not in result.text and "#[Pure]" not in result.text


def test_lines_the_snippet_shows_elsewhere_were_moved_and_may_go() -> None:
    original = "a = 1\n# note\nb = 2\n\nc = 3\n"
    snippet = "# ... existing code ...\n\nc = 3\n# note\n"
    result = apply_snippet(original, snippet)
    assert not any("only blank lines" in u.message for u in result.uncertain)


SETUP = ("from setuptools import setup\n\nsetup(\n    name='x',\n    license='BSD',\n"
         "    description='Blazingly fast & beautifully expressive Web APIs',\n"
         "    author='me',\n)\n")
NEW = "An ASGI server, using Gunicorn and uvloop."


def test_a_changed_line_shown_in_place_replaces_the_line_there_and_is_unsure() -> None:
    # one anchor, the changed line, a marker: read literally the new line goes in beside
    # the old one (two descriptions); it sets the same key, so it replaces it
    snippet = f"# ... existing code ...\n    license='BSD',\n    description='{NEW}',\n# ...\n"
    result = apply_snippet(SETUP, snippet)
    old = "Blazingly fast & beautifully expressive Web APIs"
    assert result.text == SETUP.replace(old, NEW)
    assert "nearly equal original lines 6-6" in result.uncertain[0].message
    beside = SETUP.replace(f"    description='{old}',", f"    description='{NEW}',\n"
                                                        f"    description='{old}',")
    assert beside in readings(SETUP, snippet)


def test_a_changed_line_before_its_anchor_replaces_the_line_there() -> None:
    snippet = f"# ... existing code ...\n    description='{NEW}',\n    author='me',\n# ...\n"
    result = apply_snippet(SETUP, snippet)
    assert result.text == SETUP.replace("Blazingly fast & beautifully expressive Web APIs", NEW)
    assert "nearly equal original lines 6-6" in result.uncertain[0].message


def test_a_new_line_unlike_the_line_at_its_place_is_inserted_and_certain() -> None:
    snippet = "# ... existing code ...\n    license='BSD',\n    zip_safe=False,\n# ...\n"
    result = apply_snippet(SETUP, snippet)
    assert not result.uncertain
    assert result.text == SETUP.replace("    license='BSD',\n",
                                        "    license='BSD',\n    zip_safe=False,\n")


WORKFLOW = """jobs:
  test:
    steps:
      - uses: actions/checkout@v4

      - name: Install
        run: >
          mkdir -p bin
          curl -o bin/tool https://example.com/tool
          chmod +x bin/tool

      - name: Check
        run: go run build.go check

      - name: Diff
        run: |
          git diff --exit-code
"""


def test_a_one_line_change_under_an_anchor_keeps_the_block_under_it() -> None:
    # `run: |` is also the line under the Diff step: matched there, everything between
    # the anchor and it (the block, two steps) would go; the merge is unsure and reads
    # it as the changed line at its place
    snippet = "# ...\n      - name: Install\n        run: |\n# ... existing code ...\n"
    result = apply_snippet(WORKFLOW, snippet)
    assert any("found at several places" in u.message for u in result.uncertain)
    assert WORKFLOW.replace("run: >", "run: |") in readings(WORKFLOW, snippet)


AVA = """import test from 'ava';

test('a', t => {
	t.is(1, 1);
});

test('b', async t => {
	const {body} = await get('');
	t.is(body, '/');
});

test('c', t => {
	t.pass();
});
"""


def test_a_doubted_removal_by_adjacency_has_a_reading_that_keeps_it() -> None:
    # a() and c() shown back to back: b() goes by adjacency, but `});` recurs in it, so
    # the merge doubts it; one rival keeps b()
    snippet = ("// ... existing code ...\ntest('a', t => {\n\tt.is(1, 2);\n});\n\n"
               "test('c', t => {\n// ... existing code ...\n")
    result = apply_snippet(AVA, snippet)
    assert "test('b'" not in result.text and result.uncertain
    assert AVA.replace("t.is(1, 1)", "t.is(1, 2)") in readings(AVA, snippet)


GO = """package cli

import "os"

// The action to execute when no subcommands are specified
var DefaultAction = ShowHelp

func Run(args []string) {
	DefaultAction("")
}

func ShowHelp(name string) {
	os.Exit(0)
}
"""


def test_a_renamed_declaration_shown_with_its_comment_replaces_the_old_one() -> None:
    # the comment is the original's, the declaration renamed: read literally both the
    # comment and the declaration are new lines beside the old ones (doubled)
    snippet = ("// ... existing code ...\n\n// The action to execute when no subcommands are "
               "specified\nvar Action = ShowHelp\n\nfunc Run(args []string) {\n"
               "\tAction(\"\")\n}\n// ... existing code ...\n")
    result = apply_snippet(GO, snippet)
    assert result.text == GO.replace("DefaultAction", "Action")
    assert any("nearly equal original lines" in u.message for u in result.uncertain)


ASSERTS = "".join(f"// {name} asserts.\nfunc {name}(t *testing.T, a, b interface{{}}) bool {{\n"
                  f"\treturn a == b\n}}\n\n" for name in ("Equal", "Exactly", "NotNil"))


def test_a_changed_line_alone_between_markers_replaces_the_line_it_edits() -> None:
    # no line of the segment is in the original: it is inserted where it matches best,
    # beside the line it edits, unless read as replacing that line (unsure)
    snippet = ("// ... existing code ...\nfunc Exactly(t TestingT, a, b interface{}) bool {\n"
               "// ... existing code ...\n")
    result = apply_snippet(ASSERTS, snippet)
    assert result.text == ASSERTS.replace("Exactly(t *testing.T", "Exactly(t TestingT")
    assert any("no line of it matches the original, but its lines nearly equal" in u.message
               for u in result.uncertain)


IMPORTS = ("import base64\nimport string\nimport struct\n\nfrom ._compat import text_type\n"
           "from .exc import BadData\n\n\ndef want_bytes(s):\n    if isinstance(s, text_type):\n"
           "        s = s.encode()\n    return s\n\n\ndef other():\n    pass\n")


def test_a_snippet_without_a_leading_marker_that_starts_at_the_files_second_line() -> None:
    # no marker before it: read as the file's start, `import base64` would go (certain);
    # its first lines are the original's own, further down, so it starts there (unsure)
    snippet = ("import string\nimport struct\n\nfrom .exc import BadData\n\n\n"
               "def want_bytes(s):\n    if isinstance(s, str):\n        s = s.encode()\n"
               "    return s\n# ... existing code ...\n")
    result = apply_snippet(IMPORTS, snippet)
    assert result.text == IMPORTS.replace("from ._compat import text_type\n", "").replace(
        "text_type)", "str)")
    assert "no marker comes before it but its first line is original line 2" in \
        result.uncertain[0].message


def test_the_blank_line_that_ends_the_file_stays_after_a_changed_last_line() -> None:
    # no marker after it and its last line changed: it runs to the file's end, but the
    # file's closing blank line is layout, not a line the snippet removes
    original = "steps:\n  - name: a\n    uses: x@1\n\n  - name: b\n    uses: y@1\n\n"
    snippet = "# ... existing code ...\n  - name: b\n    uses: y@2\n"
    assert apply_snippet(original, snippet).text == original.replace("y@1", "y@2")


def test_a_declaration_rewritten_after_a_marker_and_a_blank_line_with_no_marker_after() -> None:
    # Agents write a marker, a blank line, then the method again, and leave the last
    # marker out. Read as running to the file's end, only the blank line and `end` match
    # there, so it was appended after the file's last line, certain. Its first line is
    # the method's own signature, found once, above: it is read there, unsure, and the
    # file's end is the rival.
    more = "".join(f"\n    def helper_{i}(env)\n      env[{i}]\n    end\n" for i in range(60))
    original = ("module Rack\n  class ShowExceptions\n    def call(env)\n      x(env)\n"
                "    end\n\n    def prefers_plaintext?(env)\n      !accepts_html(env)\n"
                f"    end\n{more}  end\nend\n")
    snippet = ("# ... existing code ...\n\n    def prefers_plaintext?(env)\n"
               "      !accepts_html?(env)\n    end\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("!accepts_html(env)", "!accepts_html?(env)")
    assert got.uncertain and "first line" in got.uncertain[0].message
    rivals = [c.text for c in got.with_readings().candidates[1:]]
    assert any(t.endswith("end\n\n    def prefers_plaintext?(env)\n      !accepts_html?(env)\n"
                          "    end\n") for t in rivals)
    # a new function appended at the end that shares a line with one above is not moved
    appended = "# ... existing code ...\n  end\nend\n\ndef extra\n      env[3]\nend\n"
    assert apply_snippet(original, appended).check() == \
        original + "\ndef extra\n      env[3]\nend\n"


@pytest.mark.parametrize("snippet", [
    # the changed line, its anchor below, a marker: no marker before it
    "        path = request.url.raw_path\n        a2 = join(method, path)\n"
    "# ... existing code ...\n",
    # a marker, the anchor above, the changed line: no marker after it
    "# ... existing code ...\n        a1 = join(user, realm)\n"
    "        path = request.url.raw_path\n",
])
def test_a_one_line_change_with_one_anchor_and_one_marker_replaces_the_line_in_place(
        snippet: str) -> None:
    head = "".join(f"import mod_{i}\n" for i in range(30))
    tail = "".join(f"    def other_{i}(self):\n        return {i}\n\n" for i in range(30))
    original = (f"{head}\n\nclass Auth:\n    def digest(self, request):\n"
                f"        a1 = join(user, realm)\n        path = request.url.full_path\n"
                f"        a2 = join(method, path)\n        return a2\n\n{tail}")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("url.full_path", "url.raw_path")
    assert got.uncertain and "nearly equal" in got.uncertain[0].message
    # the textbook reading (the snippet starts or ends the file: 30 or more lines gone)
    # is the rival
    texts = [c.text for c in got.with_readings().candidates]
    assert any(len(t.splitlines()) < len(original.splitlines()) - 30 for t in texts[1:])


def test_blank_lines_above_a_new_first_line_meet_the_files_blank_run_once() -> None:
    # marker, two blank lines, a changed signature: where the alignment matched the first
    # blank line to the file's second one, one blank line was kept above and two written
    # (tqdm mkdocs.py, 3 in all); the region starts where the two runs are one
    orig = ['"""', "", "", "def f(a):", "    return a", "", "", "def g():"]
    n = len(orig)
    assert blank_run_edge(orig, n, 2, 5, 2, "before") == 1  # 2 blank lines, not 3
    assert blank_run_edge(orig, n, 2, 5, 1, "before") == 2  # the file's 2 stay: the longer run
    assert blank_run_edge(orig, n, 1, 5, 2, "before") == 1
    # after: the segment's last line new, then two blank lines and a marker
    assert blank_run_edge(orig, n, 3, 5, 2, "after") == 7
    assert blank_run_edge(orig, n, 3, 6, 2, "after") == 7
    assert blank_run_edge(orig, n, 3, 5, 3, "after") == 7


def test_a_new_line_that_doubles_the_unique_line_kept_beside_it_is_unsure() -> None:
    # the agent's call, rewritten on one line, then the unchanged `if` as context: the
    # alignment let the `if` go (its context run would be too long) and wrote it again
    # after the three-line call it kept (tqdm dask.py); the file would hold it twice
    original = ("class C(Base):\n    def __init__(self, a=None, b=None,\n"
                "                 c=None, **kw):\n        \"\"\"Doc.\n\n        More.\n"
                "        \"\"\"\n        super(C, self).__init__(\n"
                "            a=a, b=b,\n            c=c)\n        if kw_given_here:\n"
                "            kw = dict(kw)\n        self.kw = kw\n\n    def run(self):\n"
                "        return self.kw\n")
    snippet = ("class C(Base):\n    def __init__(self, a=None, **kw):\n"
               "        # ... docstring unchanged ...\n        super(C, self).__init__(a=a)\n"
               "        if kw_given_here:\n            kw = dict(kw)\n        self.kw = kw\n\n"
               "# ... existing code ...\n")
    result = apply_snippet(original, snippet)
    assert result.text.count("if kw_given_here:") == 2  # the chosen reading, as it is read
    assert any("kept right beside it, so the file would hold that line twice" in u.message
               for u in result.uncertain)


GO_STRUCT = """package v2

import (
	"fmt"
	"net/http"
)

type Article struct {
	*v3.Article

	// Additional fields.
	SelfURL string `json:"self_url"`
}

var Presenter = render.NewPresenter(Convert)

func Convert(from *v3.Article) *Article {
	return &Article{Article: from}
}
"""


def test_a_closing_line_after_a_deeper_marker_ends_the_block_that_marker_is_in() -> None:
    # the marker inside the struct stands for its other fields; the `}` after it closes
    # the struct, and the new functions after it replace what followed. Matched instead
    # at the file's last `}` (only lines found at several places anchor it there), the old
    # functions were kept, certain (chi article.go): now unsure, the block's end a reading
    snippet = ("// ... existing code ...\ntype Article struct {\n\t*data.Article\n\n"
               "\t// Additional fields.\n\t// ... existing code ...\n}\n\n"
               "func NewArticle(a *data.Article) *Article {\n\treturn &Article{Article: a}\n}\n")
    truth = GO_STRUCT.replace("\t*v3.Article\n", "\t*data.Article\n").split("var Presenter")[0] + \
        "func NewArticle(a *data.Article) *Article {\n\treturn &Article{Article: a}\n}\n"
    result = apply_snippet(GO_STRUCT, snippet)
    assert result.uncertain and any("indented deeper than its first line '}'" in u.message
                                    for u in result.uncertain)
    assert truth in readings(GO_STRUCT, snippet)


def test_a_closing_line_after_a_deeper_marker_anchored_by_a_unique_line_stays_certain() -> None:
    # the same shape where a line found once in the file follows the `}`: that line places
    # it, whatever the marker's depth says ("rest of the file" markers are often indented)
    original = ("type A struct {\n\tx int\n}\n\nfunc (a *A) One() int {\n\treturn 1\n}\n\n"
                "func (a *A) Two() int {\n\treturn 2\n}\n")
    snippet = ("type A struct {\n\tx int\n\t// ... rest of the file unchanged ...\n}\n\n"
               "func (a *A) Two() int {\n\treturn 22\n}\n")
    result = apply_snippet(original, snippet)
    assert result.text == original.replace("return 2\n", "return 22\n")
    assert not any("indented deeper" in u.message for u in result.uncertain)


PRE_COMMIT = """repos:
  - repo: https://github.com/psf/black
    rev: 21.11b1
    hooks:
      - id: black
        exclude: tests/test_pattern_matching.py
        language_version: python3.8

  - repo: https://github.com/PyCQA/isort
    rev: 5.10.1
    hooks:
      - id: isort
        additional_dependencies: [toml]
        files: \\.py$
        language_version: python3.10

  - repo: https://github.com/PyCQA/flake8
    rev: 4.0.1
    hooks:
      - id: flake8
        language_version: python3.10

  - repo: https://github.com/econchick/interrogate
    rev: 1.5.0
    hooks:
      - id: interrogate
        exclude: tests/test_pattern_matching.py
        args: [tests]
        language_version: python3.10
"""


def test_a_setting_edited_in_place_is_not_read_as_removing_the_next_block() -> None:
    # one hook's `language_version` changed, shown with two lines of context: the new
    # value is found (several times) in later hooks, and the alignment matched the next
    # one, removing the rest of this hook and the start of the next, certain (attrs
    # .pre-commit-config.yaml); the removed run's first line nearly equals that match and
    # the run leaves the hook: unsure
    snippet = ("# ... existing hooks ...\n      - id: black\n"
               "        exclude: tests/test_pattern_matching.py\n"
               "        language_version: python3.10\n# ... existing hooks ...\n")
    result = apply_snippet(PRE_COMMIT, snippet)
    assert any("nearly equals the nearest of them, so it may be that line edited in place"
               in u.message for u in result.uncertain)


def test_removing_a_list_item_beside_a_lookalike_stays_certain() -> None:
    # the same likeness inside one block (list items removed beside the item that stays)
    # is a plain removal: certain
    original = ("matrix:\n    include:\n        - php: 5.5\n          dist: trusty\n"
                "        - php: 5.6\n          dist: xenial\n        - php: 7.0\n"
                "          dist: xenial\n    fast_finish: true\n\nscript:\n    - make test\n")
    snippet = ("# ... existing config ...\n        - php: 5.5\n          dist: trusty\n"
               "    fast_finish: true\n# ... existing config ...\n")
    result = apply_snippet(original, snippet)
    assert result.text == original.replace(
        "        - php: 5.6\n          dist: xenial\n        - php: 7.0\n"
        "          dist: xenial\n", "")
    assert not result.uncertain


STYLES = """DEFAULT_STYLES = {
    "repr.attrib_value": Style(color="magenta", italic=False),
    "repr.number": Style(color="cyan", bold=True, italic=False),
    "repr.bool_true": Style(color="bright_green", italic=True),
    "repr.bool_false": Style(color="bright_red", italic=True),
}
"""


def test_a_new_line_unlike_the_line_it_was_written_over_is_unsure() -> None:
    # an anchor, a new line, a marker: the alignment wrote the new line over the line
    # after the anchor, certain (rich default_styles.py); it reads unlike that line, so
    # the merge is unsure and the insertion (the truth here) is a reading
    snippet = ('# ... existing styles ...\n'
               '    "repr.number": Style(color="cyan", bold=True, italic=False),\n'
               '    "repr.complex_number": Style(color="magenta", bold=True, italic=False),\n'
               '# ... existing styles ...\n')
    truth = STYLES.replace(
        '    "repr.bool_true"',
        '    "repr.complex_number": Style(color="magenta", bold=True, italic=False),\n'
        '    "repr.bool_true"')
    result = apply_snippet(STYLES, snippet)
    assert any("which they do not resemble" in u.message for u in result.uncertain)
    assert truth in readings(STYLES, snippet)


def test_a_new_line_alike_the_line_it_was_written_over_replaces_it_and_is_certain() -> None:
    # the agent's one-line change shown in place with one anchor: an edit of that line
    snippet = ('# ... existing styles ...\n'
               '    "repr.bool_true": Style(color="bright_green", italic=True),\n'
               '    "repr.bool_false": Style(color="red", italic=True),\n'
               '# ... existing styles ...\n')
    result = apply_snippet(STYLES, snippet)
    assert result.text == STYLES.replace('color="bright_red"', 'color="red"')
    assert not result.uncertain


def test_context_written_again_under_a_marker_and_a_blank_line_is_unsure() -> None:
    # a marker, a blank line, four lines of context, a new test: the blank line was
    # matched below the context, so the context was written a second time, certain (rich
    # test_segment.py); the new lines start with the lines kept right above them: unsure
    original = ('import sys\n\n\ndef test_divide_emoji():\n'
                '    segments = [Segment("Hello", bold), Segment("ab", italic)]\n'
                '    assert list(Segment.divide(segments, [8, 11])) == [\n'
                '        [Segment("Hello", bold), Segment("a", italic)],\n'
                '        [Segment("b", italic)],\n    ]\n'
                '    assert list(Segment.divide(segments, [9, 11])) == [\n'
                '        [Segment("Hello", bold), Segment("ab", italic)],\n'
                '        [Segment("", italic)],\n    ]\n\n\n'
                'def test_segment_lines_renderable():\n    lines = [[Segment("hello")]]\n')
    snippet = ('# ... existing tests ...\n\n'
               '    assert list(Segment.divide(segments, [9, 11])) == [\n'
               '        [Segment("Hello", bold), Segment("ab", italic)],\n'
               '        [Segment("", italic)],\n    ]\n\n\n'
               'def test_split_cells():\n'
               '    assert Segment("X").split_cells(1) == (Segment("X"), Segment(""))\n\n\n'
               'def test_segment_lines_renderable():\n# ... rest of tests unchanged ...\n')
    result = apply_snippet(original, snippet)
    assert any("so the file would hold that line twice" in u.message
               for u in result.uncertain)


PY_COMPAT = '''import sys

PY2 = sys.version_info[0] == 2

if PY2:
    ordered_dict = dict
else:
    from collections import OrderedDict
    ordered_dict = OrderedDict


if PY2:
    from UserDict import IterableUserDict

    def isclass(klass):
        return isinstance(klass, (type, types.ClassType))

    class ReadOnlyDict(IterableUserDict):
        """Doc."""

        def __setitem__(self, key, val):
            raise TypeError("'mappingproxy' object does not support item "
                            "assignment")

else:

    def isclass(klass):
        return isinstance(klass, type)
'''


def test_removing_a_blocks_first_line_while_its_body_stays_is_unsure() -> None:
    # the agent left out the lines between two blocks it showed (`if PY2:` and what
    # opens it) with no marker; read literally, `class ReadOnlyDict` would move under
    # `else:`, certain (attrs _compat.py): now unsure, and keeping them is a reading
    snippet = ('# ... existing code ...\n    ordered_dict = dict\nelse:\n'
               '    from collections import OrderedDict\n\n    ordered_dict = OrderedDict\n\n\n'
               '    class ReadOnlyDict(IterableUserDict):\n        # ... existing code ...\n\n'
               '        def __setitem__(self, key, val):\n            raise TypeError(\n'
               '                "\'mappingproxy\' object does not support item assignment"\n'
               '            )\n\n# ... existing code ...\n')
    result = apply_snippet(PY_COMPAT, snippet)
    assert any("among them a block's first line" in u.message for u in result.uncertain)
    assert any("if PY2:\n    from UserDict" in text for text in readings(PY_COMPAT, snippet))


SWIFT_TEST = """// Copyright (c) 2014 Alamofire
//
// Permission is hereby granted, free of charge.

import Foundation
import Alamofire
import XCTest

class AlamofireManagerTestCase: XCTestCase {
    func testSetStartRequestsImmediately() {
        let manager = Alamofire.Manager()
        manager.startRequestsImmediately = false

        let URL = NSURL(string: "http://httpbin.org/get")!
        manager.request(URL).resume()
    }

    func testReleasingManager() {
        var manager: Manager? = Alamofire.Manager()
        manager = nil
        XCTAssertNil(manager)
    }
}
"""


def test_a_files_old_imports_kept_above_its_new_ones_is_unsure() -> None:
    # a marker for the license, then the whole file written out with its imports
    # reordered: the old header and the first lines were kept above the new ones, every
    # import twice, certain (Alamofire ManagerTests.swift); now unsure
    snippet = """// ... license header ...

import Alamofire
import Foundation
import XCTest

class ManagerTestCase: BaseTestCase {
    func testSetStartRequestsImmediately() {
        // Given
        let manager = Alamofire.Manager()
        manager.startRequestsImmediately = false

        let URL = NSURL(string: "http://httpbin.org/get")!

        // When
        manager.request(URL).resume()
    }

    func testReleasingManager() {
        // Given
        var manager: Manager? = Alamofire.Manager()

        // When
        manager = nil

        // Then
        XCTAssertNil(manager, "manager should be nil")
    }
}
"""
    result = apply_snippet(SWIFT_TEST, snippet)
    assert any("the merged file holds the import lines 'import Foundation' and "
               "'import Alamofire' twice" in u.message for u in result.uncertain)


def test_a_removal_marker_with_a_path_in_its_words_is_a_marker() -> None:
    # "./common" in a marker's words: the parser read the line as code and wrote it into
    # the file, certain (immer proxy.ts); a dot followed by a character other than a space
    # or a dot belongs to the words
    original = ("const objectTraps = {}\n\n/**\n * Helpers\n */\n\n"
                "function latest(state) {\n  return state.copy\n}\n\n"
                "// Access a property without creating an Immer draft.\nfunction peek(d, p) {\n"
                "  return d[p]\n}\n")
    snippet = ("// ... existing code ...\n\n/**\n * Helpers\n */\n\n"
               "// ... (local latest() removed, now imported from ./common) ...\n\n"
               "// Access a property without creating an Immer draft.\n"
               "function peek(d, p) {\n// ... existing code ...\n")
    result = apply_snippet(original, snippet)
    assert "./common" not in result.text
    assert result.text == original.replace("function latest(state) {\n  return state.copy\n}\n\n",
                                           "")


def test_a_comment_opening_with_dots_that_is_no_marker_is_not_written_certain() -> None:
    # words a marker cannot hold (a sentence's full stop inside): the line is code to the
    # parser, so the merge would write it into the file; flagged instead
    original = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
    snippet = ("# ... existing code ...\n# ... (parse() moved to util.py). See there ...\n"
               "def b():\n    return 3\n")
    result = apply_snippet(original, snippet)
    assert any("looks like a marker; it is not one" in u.message for u in result.uncertain)


def test_a_changed_line_under_the_files_top_without_a_marker_keeps_the_lines_above() -> None:
    # the snippet starts at the changed `version` line with no marker before it; read
    # literally the file starts there and `[package]`, `name` go, certain (serde_json
    # Cargo.toml); the new line edits the line right above its first match, so the merge
    # is unsure and the reading that replaces that one line alone, the lines above kept,
    # is a reading (the literal one stays chosen: few lines above, see the next test)
    original = ('[package]\nname = "serde_json"\nversion = "1.0.63" # remember to update '
                'html_root_url\nauthors = ["Erick Tryzelaar", "David Tolnay"]\n'
                'license = "MIT OR Apache-2.0"\n\n[dependencies]\nserde = "1.0"\n')
    snippet = ('version = "1.0.64" # remember to update html_root_url\n'
               'authors = ["Erick Tryzelaar", "David Tolnay"]\n# ... existing code ...\n')
    result = apply_snippet(original, snippet)
    assert result.uncertain and "nearly equal original lines" in result.uncertain[0].message
    assert original.replace('"1.0.63"', '"1.0.64"') in readings(original, snippet)


def test_a_rewritten_file_header_without_a_marker_drops_the_punctuation_above() -> None:
    # the agent rewrote the file's first lines (spdlog's header: a bare `//` above the
    # copyright line went); the lines above the edited one say nothing: certain as before
    original = ("//\n// Copyright(c) 2015 Gabi Melman.\n// Distributed under the MIT License\n"
                "//\n\n#pragma once\n\nnamespace spdlog {\n}\n")
    snippet = ("// Copyright(c) 2015-present Gabi Melman & spdlog contributors.\n"
               "// Distributed under the MIT License\n\n#pragma once\n"
               "// ... rest of file unchanged ...\n")
    result = apply_snippet(original, snippet)
    assert result.text == ("// Copyright(c) 2015-present Gabi Melman & spdlog contributors.\n"
                           "// Distributed under the MIT License\n\n#pragma once\n\n"
                           "namespace spdlog {\n}\n")


def _merger_for(orig: list[str], snippet_lines: list[str]) -> _Merger:
    m = _Merger(orig, None, len(orig))
    m.snippet_lines = frozenset(s.strip() for s in snippet_lines if s.strip())
    return m


def test_new_lines_written_over_a_closing_line_are_unsure() -> None:
    # the alignment wrote a new test over the `})` that closes the test above it (immer
    # base.js); that `})` is shown in the snippet (the new test ends with one), but a line
    # of punctuation says nothing: the new lines do not resemble it, so the merge is unsure
    from fastapply.merge.costs import Placement
    from fastapply.merge.syntax import Hunk

    orig = ['    it("a", () => {', "        expect(1).toBe(1)", "    })", "",
            '    it("dates", () => {', "        expect(2).toBe(2)", "    })"]
    seg = ['    it("new", () => {', "        expect(produce(base)).toEqual(base)", "    })", "",
           '    it("dates", () => {']
    hunk = Hunk("lazy", (), tuple(seg), 1, 2, marker_before=True, marker_after=True)
    m = _merger_for(orig, seg)
    s = Segment(hunk, seg, placement=Placement((2, 3), (5, 5), ((3, 3), (4, 4))))
    s.region()
    unlike_edges(m, s)
    assert (s.start, s.end) == (2, 5)
    assert any("which they do not resemble" in u.message for u in m.uncertain)


def test_a_segment_anchored_by_a_blank_line_alone_before_new_code_is_unsure() -> None:
    # marker, blank line, a new test: the blank line was matched above the last subtest
    # of the test before, whose lines (sharing the new test's generic ones) were removed
    # (fiber security_test.go); only the blank line places it there: unsure
    from fastapply.merge.costs import Placement
    from fastapply.merge.syntax import Hunk

    orig = ["func TestA(t *testing.T) {", '\tt.Run("x", func(t *testing.T) {', "\t})", "",
            '\tt.Run("same-host", func(t *testing.T) {', "\t\treq := acquire()",
            '\t\treq.Header.Set("Authorization", "Bearer")', "\t\tdefer release(req)",
            "\t})", "}", "", "func TestJoin(t *testing.T) {"]
    seg = ["", "func TestScheme(t *testing.T) {", "\treq := acquire()",
           "\trequire.NoError(t, do(req))", "}", "", "func TestJoin(t *testing.T) {"]
    hunk = Hunk("lazy", (), tuple(seg), 1, 2, marker_before=True, marker_after=True)
    m = _merger_for(orig, seg)
    s = Segment(hunk, seg, placement=Placement((3, 3), (12, 12),
                                               ((0, 3), (4, 9), (5, 10), (6, 11))))
    s.region()
    blank_led(m, s)
    assert m.uncertain and "only a blank line (original line 4) anchors it" in \
        m.uncertain[0].message


def test_a_package_clause_kept_beside_its_new_form_is_unsure() -> None:
    # the agent added a package doc comment and wrote the clause with its import comment
    # (zap observer.go); the merge put them above the old `package observer`, which it
    # kept: a Go file with two package clauses, certain. A source file has one package
    # clause, so two where the original had one make the merge unsure
    original = ("// Copyright (c) 2016 Uber Technologies, Inc.\n\npackage observer\n\n"
                "import (\n\t\"strings\"\n)\n\nfunc Join(a []string) string {\n"
                "\treturn strings.Join(a, \",\")\n}\n")
    snippet = ("// ... license header ...\n\n// Package observer keeps log entries in memory.\n"
               "package observer // import \"go.uber.org/zap/zaptest/observer\"\n\nimport (\n"
               "// ... rest of file unchanged ...\n")
    result = apply_snippet(original, snippet)
    assert result.text.count("package observer") == 2
    assert result.uncertain and "declares 'observer' 2 times" in result.uncertain[0].message
