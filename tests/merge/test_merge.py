"""Deterministic merge: crafted cases, file formats, uncertainty, errors, the corpus."""

from __future__ import annotations

import json
from functools import cache

import pytest
from conftest import CORPUS

from fastapply.merge import MergeResult, Uncertainty, apply_snippet
from fastapply.merge.edits import EditError

PY = ("import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n\n\n"
      "def c():\n    return 3\n")
JS = "function a() {\n  return 1;\n}\n\nfunction b() {\n  return 2;\n}\n"


@pytest.mark.parametrize("marker", [
    "# ... existing code ...", "# ...", "# ... unchanged ...", "# ... rest of code ...",
    "# ... keep existing code ...", "# ... code remains the same ...", "...",
    "# ... keep a() ...", "# ... existing code remains the same ..."])
def test_lazy_edit_between_markers(marker: str) -> None:
    snippet = f"{marker}\ndef b():\n    return 20\n\n\ndef c():\n{marker}\n"
    assert apply_snippet(PY, snippet).check() == PY.replace("return 2\n", "return 20\n")


@pytest.mark.parametrize("marker", ["// ... existing code ...", "/* ... */", "// ..."])
def test_lazy_edit_in_c_style_comments(marker: str) -> None:
    snippet = f"{marker}\nfunction b() {{\n  return 22;\n}}\n"
    assert apply_snippet(JS, snippet).check() == JS.replace("return 2;", "return 22;")


def test_html_and_sql_markers() -> None:
    html = "<ul>\n  <li>a</li>\n  <li>b</li>\n</ul>\n"
    got = apply_snippet(html, "<!-- ... -->\n  <li>b</li>\n  <li>c</li>\n</ul>\n").check()
    assert got == "<ul>\n  <li>a</li>\n  <li>b</li>\n  <li>c</li>\n</ul>\n"
    sql = "SELECT a,\n  b\nFROM t\nWHERE x = 1;\n"
    assert apply_snippet(sql, "-- ...\nFROM t\nWHERE x = 2;\n").check() == sql.replace("1;", "2;")


def test_lazy_insertion_and_deletion() -> None:
    snippet = "import os\nimport sys\n# ... existing code ...\n"
    want = PY.replace("import os\n", "import os\nimport sys\n")
    assert apply_snippet(PY, snippet).check() == want
    deletion = "# ...\n    return 1\n\n\ndef c():\n# ...\n"
    assert apply_snippet(PY, deletion).check() == PY.replace("def b():\n    return 2\n\n\n", "")


def test_search_replace_and_udiff_and_mixed() -> None:
    sr = ("<<<<<<< SEARCH\ndef a():\n    return 1\n=======\ndef a():\n    return 10\n"
          ">>>>>>> REPLACE\n")
    assert apply_snippet(PY, sr).check() == PY.replace("return 1\n", "return 10\n")
    cline = sr.replace("<<<<<<< SEARCH", "------- SEARCH").replace(">>>>>>> REPLACE",
                                                                   "+++++++ REPLACE")
    assert apply_snippet(PY, cline).check() == PY.replace("return 1\n", "return 10\n")
    diff = "--- a/x.py\n+++ b/x.py\n@@ -8,2 +8,2 @@\n def b():\n-    return 2\n+    return 5\n"
    assert apply_snippet(PY, diff).check() == PY.replace("return 2\n", "return 5\n")
    bare = "@@ ... @@\n def b():\n-    return 2\n+    return 5\n"
    assert apply_snippet(PY, bare).check() == PY.replace("return 2\n", "return 5\n")
    mixed = sr + "# ... existing code ...\ndef c():\n    return 30\n"
    assert apply_snippet(PY, mixed).check() == PY.replace("return 1\n", "return 10\n").replace(
        "return 3\n", "return 30\n")


def test_crlf_tabs_non_ascii_and_final_newline_are_preserved() -> None:
    original = "func a() {\r\n\treturn \"héllo\"\r\n}\r\n\r\nfunc b() {\r\n\treturn 1\r\n}"
    snippet = "// ...\nfunc b() {\n\treturn \"日本\"\n}"
    got = apply_snippet(original, snippet).check()
    assert got == original.replace("\treturn 1", "\treturn \"日本\"")
    assert not got.endswith("\n")


def test_trailing_whitespace_and_indentation_offset_are_tolerated() -> None:
    # The snippet lost the class indentation: it is re-indented to the file's.
    original = "class K:\n    def f(self):   \n        return 1\n\n    def g(self):\n        pass\n"
    snippet = "# ...\ndef f(self):\n    return 2\n\ndef g(self):\n# ...\n"
    assert apply_snippet(original, snippet).check() == original.replace("return 1", "return 2")


def test_snippet_into_an_empty_file() -> None:
    assert apply_snippet("", "x = 1\ny = 2\n").check() == "x = 1\ny = 2\n"
    assert apply_snippet("", "<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n").check() == \
        "x = 1\n"


def test_fragment_without_markers_is_anchored_and_whole_file_replaces() -> None:
    assert apply_snippet(PY, "def b():\n    return 20\n").check() == \
        PY.replace("return 2\n", "return 20\n")
    whole = "import os\n\n\ndef c():\n    return 3\n"
    assert apply_snippet(PY, whole).check() == whole


def test_long_file_merges() -> None:
    body = "".join(f"def f{i}(x):\n    if x:\n        return {i}\n    return None\n\n"
                   for i in range(500))
    assert body.count("\n") == 2500
    snippet = "# ...\ndef f250(x):\n    if x:\n        return -1\n    return None\n# ...\n"
    result = apply_snippet(body, snippet)
    assert result.check() == body.replace("return 250\n", "return -1\n")
    sr = "<<<<<<< SEARCH\ndef f499(x):\n=======\ndef g(x):\n>>>>>>> REPLACE\n"
    assert apply_snippet(body, sr).check() == body.replace("def f499(x)", "def g(x)")


def test_ambiguous_anchor_is_reported_with_both_lines() -> None:
    original = "x = 1\ny = 2\nx = 1\n"
    result = apply_snippet(original, "<<<<<<< SEARCH\nx = 1\n=======\nz = 0\n>>>>>>> REPLACE\n")
    assert result.text == "z = 0\ny = 2\nx = 1\n"
    assert result.uncertain and "lines 1 and 3" in result.uncertain[0].message
    with pytest.raises(EditError, match="lines 1 and 3"):
        result.check()
    lazy = "if a:\n    b()\nelse:\n    c()\n\nif a:\n    b()\nelse:\n    c()\n"
    res = apply_snippet(lazy, "# ...\nif a:\n    b(1)\nelse:\n# ...\n")
    assert "b()" in res.text and res.text.count("b(1)") == 1
    assert any("lines 1 and 6" in u.message for u in res.uncertain)


def test_missing_search_text_names_the_closest_line() -> None:
    original = "".join(f"line {i}\n" for i in range(1, 60))
    original = original.replace("line 41\n", "def target(a, b):\n")
    sr = ("<<<<<<< SEARCH\nline 1\n=======\nfirst\n>>>>>>> REPLACE\n"
          "<<<<<<< SEARCH\ndef target(a, c):\n    pass\n=======\nx\n>>>>>>> REPLACE\n")
    result = apply_snippet(original, sr)
    assert result.text.startswith("first\n") and "def target(a, b):" in result.text
    assert result.uncertain == (Uncertainty(41, "SEARCH block 2 (snippet line 6) not found in "
                                                "the original; closest match at line 41"),)
    with pytest.raises(EditError, match=r"SEARCH block 2 .* closest match at line 41"):
        result.check()


def test_udiff_whose_context_is_missing_is_an_error_on_check() -> None:
    result = apply_snippet(PY, "@@ -8,2 +8,2 @@\n def nope():\n-    return 2\n+    return 5\n")
    assert result.text == PY
    with pytest.raises(EditError, match=r"diff hunk 1 .* not found"):
        result.check()


def test_code_is_never_silently_dropped_when_no_line_matches() -> None:
    result = apply_snippet(PY, "# ...\ndef zzz():\n    return 9\n# ...\n")
    assert all(line in result.text for line in PY.splitlines())
    assert result.uncertain and "no line of it matches" in result.uncertain[0].message


def test_merge_result_check_passes_text_through() -> None:
    assert MergeResult("abc").check() == "abc"


def _corpus() -> list[dict[str, str]]:
    if not CORPUS.exists():
        pytest.skip(f"edit corpus not found at {CORPUS} (set FASTAPPLY_DATA)")
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


@cache
def _exact_rate(field: str) -> float:
    recs = _corpus()
    return sum(apply_snippet(r["original"], r[field]).text == r["updated"]
               for r in recs) / len(recs)


@pytest.mark.parametrize("field,floor", [("search_replace", 0.99), ("udiff", 0.99),
                                         ("lazy_snippet", 0.95)])
def test_corpus_exact_rate(field: str, floor: float) -> None:
    assert _exact_rate(field) >= floor


def test_uneven_context_is_read_as_an_edit_not_a_copy() -> None:
    # Two lines of context before the change and three after, as LLMs write them. Read
    # with one line of context per side it would also fit, as a second copy of step_5
    # inserted before step_6; the reading that anchors step_5 itself must win.
    blocks = [f"def step_{i}(v):\n    v = v + {i}\n    return v * 2\n\n" for i in range(10)]
    original = "".join(blocks)
    snippet = ("# ... existing code ...\n\ndef step_5(v):\n    v = min(v + 5, 100)\n"
               "    return v * 2\n\ndef step_6(v):\n# ... existing code ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("v = v + 5", "v = min(v + 5, 100)")
    assert not got.uncertain


def test_a_blank_line_ending_the_last_segment_survives() -> None:
    # Lazy segments may match the empty "line" after the final newline; it is dropped
    # again only if no segment replaced it. Here the last segment runs to the end of
    # the file and ends with a blank line of its own, which must stay.
    original = "var a = 1;\nrequire('./request');\n"
    snippet = "// ...\nrequire('./request');\n\n// title\n\nexports.title = 'x';\n\n"
    got = apply_snippet(original, snippet).check()
    assert got == original + "\n// title\n\nexports.title = 'x';\n\n"


def test_equal_places_go_to_the_region_the_segment_resembles_and_are_flagged() -> None:
    # `else:` / changed line / blank fits both functions equally; the changed line keeps
    # most of `raise Timeout('late')`, nothing of `y = cert`.
    original = ("def a(x):\n    if x:\n        y = 1\n    else:\n        y = cert\n\n\n"
                "def b(x):\n    if x:\n        raise ValueError(x)\n    else:\n"
                "        raise Timeout('late')\n\n\ndef c():\n    pass\n")
    got = apply_snippet(original, "# ...\n    else:\n        raise\n\n# ...\n")
    assert got.text == original.replace("raise Timeout('late')", "raise")
    # (precision.strict_runs also flags the edit beside the generic `else:`)
    assert [u.line for u in got.uncertain if "equally well" in u.message] == [11]
    assert "lines 11 and 4" in got.uncertain[0].message


def test_a_segment_that_changes_nothing_is_not_a_reading() -> None:
    # Two context lines, a deletion, two more: the segment's lines also sit together at
    # the end of the file, where reading them changes nothing. That is not an edit.
    original = ("function f(v) {\n\tif (v) {\n\t\tx();\n\t}\n\n\tif (v.c === undefined) {\n"
                "\t\tv.c = {};\n\t}\n\n\treturn v;\n};\n")
    got = apply_snippet(original, "// ... existing code ...\n\t}\n\n\treturn v;\n};\n")
    assert got.text == original.replace("\tif (v.c === undefined) {\n\t\tv.c = {};\n\t}\n\n", "")


def test_a_segment_ending_on_a_changed_line_does_not_show_its_context() -> None:
    # Three lines of context, a deletion, `handlers = ...`, a deletion, three lines of
    # context. The last line of the segment (empty) also equals, up to trailing spaces,
    # the whitespace-only line after `code = None`: read that way the segment is an
    # insertion ending on a changed line, which shows no context after the change, so
    # it must not fit a three-line reading (it did, and duplicated the function's tail).
    body = "".join(f"    code_{i} = {i}\n" for i in range(8))
    checks = "".join(f"        check_{i}()\n" for i in range(5))
    original = (f"def register(key, f):\n    if bad(f):\n        raise ValueError(\n"
                f"            'not a handler'\n            .format(f))\n    \n{body}    \n"
                f"    handlers = spec(key)\n    \n    if is_code:\n{checks}    \n"
                f"    handlers[f] = f\n\ndef other():\n    pass\n")
    snippet = ("        # ...\n            'not a handler'\n            .format(f))\n    \n"
               "    handlers = spec(key)\n    \n    handlers[f] = f\n\n# ... existing code ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace(f"{body}    \n", "").replace(
        f"    \n    if is_code:\n{checks}", "")
    assert not got.uncertain


def _method(name: str, what: str, app: bool) -> str:
    key, fn = ("None" if app else "self.name"), name.replace("_app", "")
    return (f"    def {name}(self, f):\n"
            f"        \"\"\"Like :meth:`Flask.{fn}` but for a blueprint.\n"
            f"        Runs {what}.\n        \"\"\"\n"
            f"        self.record_once(lambda s: s.app.{fn}_funcs\n"
            f"            .setdefault({key}, []).append(f))\n        return f\n\n")


def _methods(name: str, what: str) -> str:
    return _method(name, what, False) + \
        _method(name.replace("_", "_app_", 1), what + " of any blueprint", True)


def test_new_functions_next_to_similar_ones_are_inserted_not_rewritten_over_them() -> None:
    # The leading context (`.setdefault(None, ...)`, `return f`, blank) ends every
    # `*_app_request` method. Read at `before_app_request`, the two new methods would
    # be a rewrite of `after_request` and `after_app_request`, line by similar line,
    # and both would vanish: removing definitions the snippet never names costs extra.
    new = _methods("teardown_request", "when tearing down a request")
    original = ("class Blueprint:\n\n" + _methods("before_request", "before a request")
                + _methods("after_request", "after a request")
                + _method("context_processor", "for templates", False))
    snippet = ("        # ...\n            .setdefault(None, []).append(f))\n        return f\n\n"
               + new + "    def context_processor(self, f):\n        \"\"\"Like "
               ":meth:`Flask.context_processor` but for a blueprint.\n        Runs for "
               "templates.\n        # ... existing code ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("    def context_processor",
                                        new + "    def context_processor")
    assert not got.uncertain


def test_a_new_section_before_a_similar_one_is_inserted_not_written_over_it() -> None:
    # The new <h3>/<ul> section resembles "Useful Links" line by line; read as its
    # rewrite, "Useful Links" would vanish. A heading the segment lacks costs extra to
    # remove, so the one-line-context reading (as the first segment shows) inserts it.
    original = ('<p>Intro</p>\n\n<h3>Get Updates</h3>\n<p>Receive updates.</p>\n'
                '<p><a href="http://list">Join Mailing List</a>.</p>\n\n'
                '<h3>Useful Links</h3>\n<ul>\n  <li><a href="http://a">A @ GitHub</a></li>\n'
                '  <li><a href="http://b">B @ PyPI</a></li>\n</ul>\n\n'
                '<h3>Translations</h3>\n<ul>\n  <li><a href="http://c">German</a></li>\n'
                '</ul>\n')
    new = ('\n<h3>Other Projects</h3>\n<ul>\n  <li><a href="http://d">D: for Humans</a></li>\n'
           '  <li><a href="http://e">E: for Humans</a></li>\n</ul>\n')
    join = '<p><a href="http://list">Join Mailing List</a>.</p>\n'
    snippet = ('<!-- ... -->\n\n<h3>Stay Informed</h3>\n<p>Receive updates.</p>\n'
               '<!-- ... -->\n' + join + new + '\n<!-- ... -->\n')
    got = apply_snippet(original, snippet)
    assert got.text == original.replace(join, join + new).replace("Get Updates",
                                                                  "Stay Informed")
    assert not got.uncertain


def _doc_function(name: str, body: str) -> str:
    return (f"/**\n * {name.title()} things.\n *\n * @param {{Object}} {name}Obj\n */\n\n"
            f"exports.{name} = function(obj){{\n  {body}\n}};\n\n")


def test_a_deletion_whose_context_also_sits_together_elsewhere_is_a_deletion() -> None:
    # `};` / blank / `/**` end every function, so the segment's lines also sit together
    # right before `slice`'s comment, where reading them changes nothing. Its head is
    # the earlier copy: `parse` (44 lines) is removed.
    parse = _doc_function("parse", "\n  ".join(f"var a{i} = obj.a{i};" for i in range(40)))
    original = (_doc_function("first", "return 1;") + parse
                + _doc_function("slice", "return [].slice.call(obj);")
                + _doc_function("last", "return 4;"))
    snippet = ("// ... rest of code ...\n};\n\n/**\n * Slice things.\n *\n"
               " * @param {Object} sliceObj\n// ... rest of code ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace(parse, "")
    # Read right, but shown only by generic lines whose copies sit in what it removes:
    # refused under "when unsure, refuse" (precision.strict_runs, docs/benchmarks.md).
    assert ["nearer copy may be the one meant" in u.message for u in got.uncertain] == [True]


def _mocha_case(name: str, cache: str, count: int) -> str:
    return (f"    it('{name}', function(done){{\n      var app = express();\n"
            f"      var count = 0;\n\n      function View(name){{\n        this.name = name;\n"
            f"        count++;\n      }}\n\n      app.set('view cache', {cache});\n"
            f"      app.set('view', View);\n\n      app.render('x', function(err, str){{\n"
            f"        if (err) return done(err);\n        count.should.equal({count});\n"
            f"        done();\n      }})\n    }})\n")


def test_new_test_cases_next_to_similar_ones_do_not_replace_them() -> None:
    # Two lines of context before, three after (uneven, as LLMs write). The three-line
    # reading fits by rewriting the existing `should use the view` case into the new
    # ones, so that test would vanish; the free reading inserts them and wins.
    original = ("describe('app', function(){\n  describe('.render', function(){\n"
                + _mocha_case("should render", "false", 1) + "\n"
                + _mocha_case("should use the view", "false", 1)
                + "  })\n\n  describe('.engine', function(){\n    it('should map', "
                  "function(){\n      done();\n    })\n  })\n})\n")
    new = ("\n" + _mocha_case("should always look up", "false", 2) + "\n"
           + _mocha_case("should cache", "true", 1))
    tail = "  })\n\n  describe('.engine', function(){\n"
    snippet = "// ... existing code ...\n      })\n    })\n" + new + tail + "// ...\n"
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("    })\n" + tail, "    })\n" + new + tail)
    assert not got.uncertain


def test_a_line_whose_indentation_changed_keeps_the_snippets_indentation() -> None:
    # The if/else collapses to its else branch, one level out. The line matches the
    # original only when indentation is ignored; as the other segment matched exactly,
    # that is a changed indentation, not a snippet that lost the file's indentation.
    original = ("import os\n\n\ndef make(self):\n    conn = self.cls()\n    conn.key = self.key\n"
                "\n    if self.version is None:\n        conn.version = DEFAULT\n    else:\n"
                "        conn.version = self.version\n\n    return conn\n")
    snippet = ("# ...\ndef make(self):\n    conn = self.cls(timeout=1)\n    conn.key = self.key\n"
               "    # ...\n\n    conn.version = self.version\n\n    # ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("self.cls()", "self.cls(timeout=1)").replace(
        "    if self.version is None:\n        conn.version = DEFAULT\n    else:\n"
        "        conn.version", "    conn.version")


def test_a_one_line_anchor_still_restores_lost_indentation() -> None:
    original = "class K:\n    def f(self):\n        return 1\n\n    def g(self):\n        pass\n"
    got = apply_snippet(original, "# ...\ndef f(self):\n    return 2\n# ...\n")
    assert got.text == original.replace("return 1", "return 2")


def test_a_tie_goes_to_the_place_that_lets_the_later_segments_fit() -> None:
    # Segment 1 fits a() and c() equally; c()'s `w = 7` resembles it more. Taken there,
    # segment 2 (b(), which comes before c()) would find no place after it and be
    # appended at the end. The other place lets it fit, so that one is used (flagged).
    original = ("def a():\n    x = 1\n    q()\n\ndef b():\n    y = 2\n\ndef c():\n    x = 1\n"
                "    w = 7\n\ndef d():\n    z = 3\n")
    snippet = "# ...\n    x = 1\n    w = 0  # new\n\n# ...\ndef b():\n    y = 20\n\n# ...\n"
    got = apply_snippet(original, snippet)
    assert got.text == original.replace("q()", "w = 0  # new").replace("y = 2\n", "y = 20\n")
    assert [u.line for u in got.uncertain if "equally well" in u.message] == [2]
    assert "lines 2 and 9" in got.uncertain[0].message


def test_an_import_is_a_definition_and_a_dedented_line_keeps_its_indentation() -> None:
    # The try/except import collapses to one unindented import, with blank lines as
    # the only context. Read as a rewrite of `from codecs import open` (a "similar"
    # line), `open` would vanish; an import counts as a definition. The line matches
    # only when indentation is ignored, and the code around its place is no deeper
    # than the snippet, so the snippet's indentation stands.
    original = ("#!/usr/bin/env python\n\nimport os\nimport sys\n\nfrom codecs import open\n\n"
                "try:\n    from setuptools import setup\nexcept ImportError:\n"
                "    from distutils.core import setup\n\nif sys.argv[-1] == 'publish':\n"
                "    os.system('upload')\n    sys.exit()\n\nwith open('README.rst') as f:\n"
                "    readme = f.read()\n\nsetup(name='x')\n")
    snippet = ("# ... keep existing code ...\n\nfrom setuptools import setup\n\n\n"
               "# ... keep existing code ...\n")
    got = apply_snippet(original, snippet)
    assert got.text == original.replace(
        "try:\n    from setuptools import setup\nexcept ImportError:\n"
        "    from distutils.core import setup\n", "from setuptools import setup\n\n")
    assert not got.uncertain


def test_a_function_moved_up_is_not_kept_at_its_old_place_too() -> None:
    # The snippet ends without a marker, so the file ends where it does; lines after
    # its last match are kept (and flagged) only if dropping them would lose code.
    # Here they are Bind(), which the snippet moved up: nothing is lost.
    bind = ("func (tomlBinding) Bind(req *http.Request, obj any) error {\n"
            "\treturn decodeToml(req.Body, obj)\n}\n")
    decode = ("func decodeToml(r io.Reader, obj any) error {\n\tdecoder := toml.NewDecoder(r)\n"
              "\tif err := check(obj); err != nil {\n\t\treturn err\n\t}\n"
              "\treturn decoder.Decode(obj)\n}\n")
    head = ("package binding\n\ntype tomlBinding struct{}\n\nfunc (tomlBinding) Name() string {\n"
            "\treturn \"toml\"\n}\n\n")
    original = head + decode + "\n" + bind
    snippet = ("// ... rest of code ...\n}\n\n" + bind + "\nfunc decodeToml(r io.Reader, obj any) "
               "error {\n\tdecoder := toml.NewDecoder(r)\n\t// ... unchanged ...\n"
               "\treturn decoder.Decode(obj)\n}\n")
    got = apply_snippet(original, snippet)
    assert got.text == head + bind + "\n" + decode
    assert not got.uncertain


def test_a_tie_after_generic_lines_goes_to_the_place_about_the_same_things() -> None:
    # The note goes after a closing fence and a blank line, which end two code blocks.
    # Both places fit equally (flagged); the one near the "Retries" section shares the
    # note's words (retry, request) and is used.
    usage = "".join(f"- `lib.{m}(url)` sends a {m.upper()}.\n"
                    for m in ("get", "post", "put", "patch", "head", "delete"))
    original = ("# Lib\n\n## Install\n\n```sh\nnpm install lib\n```\n\n## Usage\n\n" + usage * 4
                + "\n## Retries\n\nFailed requests are retried with exponential backoff.\n\n"
                "```js\nlib.get(url, {retry: 2});\n```\n\n## Hooks\n\nHooks run before each "
                "request.\n")
    note = "\n> Note: every retry replays the request body, so retried requests buffer it.\n"
    got = apply_snippet(original, "<!-- ... -->\n```\n" + note + "\n<!-- ... -->\n")
    assert got.text == original.replace("{retry: 2});\n```\n", "{retry: 2});\n```\n" + note)
    assert [u.line for u in got.uncertain] == [42]


def test_a_top_level_declaration_is_a_definition() -> None:
    # `}` then a blank line: lines were removed after some `}`. Removing the two
    # comment lines after `defaults` or the `const Version` line after `Engine` both
    # fit; the const is shorter, but it is a top-level declaration the snippet never
    # names, and removing it costs like removing a function.
    original = ("package gin\n\nvar defaults = []string{\n\t\"a\",\n}\n"
                "// Deprecated: kept for old callers.\n// It goes away in v2.\n\n"
                "type HandlerFunc func(*Context)\n\ntype Engine struct {\n\tpool sync.Pool\n}\n"
                "const Version = \"1.0\"\n\nfunc New() *Engine {\n\treturn &Engine{}\n}\n")
    got = apply_snippet(original, "// ... existing code ...\n}\n\n// ... existing code ...\n")
    assert got.text == original.replace(
        "// Deprecated: kept for old callers.\n// It goes away in v2.\n", "")


def test_a_segment_anchored_by_blank_lines_alone_is_flagged() -> None:
    # A new function between two blank lines: blank lines are everywhere, so where it
    # goes is a guess, and the merge says so (the deterministic runtime refuses it).
    original = "import os\n\nx = 1\n\n\ndef a():\n    return 1\n"
    got = apply_snippet(original, "# ...\n\ndef b2():\n    return 22\n\n# ...\n")
    assert got.text == original.replace("\n\n\n", "\n\ndef b2():\n    return 22\n\n")
    assert len(got.uncertain) == 1
    assert "only lines it shares with the original are blank lines" in \
        got.uncertain[0].message
    with pytest.raises(EditError, match="show a non-blank line of context"):
        got.check()


def test_a_segment_whose_best_reading_matches_nothing_is_unplaced_not_a_crash() -> None:
    # The only line it shares with the file is a blank one, and its best alignment
    # uses none: it was given a made-up anchor one past the end of the file (IndexError).
    got = apply_snippet("a\n\nb", "# ...\nc\n\n")
    assert [s for s in ("a", "b", "c") if s in got.text.split("\n")] == ["a", "b", "c"]
    assert got.uncertain


@pytest.mark.parametrize("snippet", [
    "@@ -1,1 +1,1 @@\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n",
    "@@ -1,9 +1,9 @@\n-x = 1\n+x = 10\n@@ -3,9 +3,9 @@\n-z = 3\n+z = 30\n",
    "@@ -1 +1 @@\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n\n",
    "@@ @@\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n",
    "--- a/x.py\n+++ b/x.py\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n",
    "diff --git a/x.py b/x.py\nindex 1a2b3c4..5d6e7f8 100644\n--- a/x.py\n+++ b/x.py\n"
    "@@ -1,1 +1,1 @@\n-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n",
    "-x = 1\n+x = 10\n y = 2\n-z = 3\n+z = 30\n",
])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_udiff_with_wrong_or_missing_counts_or_headers_merges_exactly(snippet: str,
                                                                      newline: str) -> None:
    original = "x = 1\ny = 2\nz = 3\n".replace("\n", newline)
    got = apply_snippet(original, snippet.replace("\n", newline))
    assert got.check() == "x = 10\ny = 2\nz = 30\n".replace("\n", newline)


def test_lazy_lines_that_are_a_diff_without_header_are_flagged() -> None:
    # A removed line kept its "-": read as lazy code it would be written into the file.
    original = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    got = apply_snippet(original, "# ...\n    a = 1\n-    b = 2\n+    b = 3\n    return a + b\n")
    assert any("looks like a unified diff" in u.message for u in got.uncertain)


@pytest.mark.parametrize("start", ["<<-- SEARCH", "-- SEARCH", "<< SEARCH", "=== SEARCH",
                                   "<<<<<<< SEARCH:", "SEARCH"])
def test_malformed_block_markers_are_refused_not_written(start: str) -> None:
    # Read as a lazy snippet without markers, the block text was the whole new file.
    original = "x = 1\ny = 2\nz = 3\n"
    snippet = f"{start}\nx = 1\n=======\nx = 10\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match=r"malformed.*<<<<<<< SEARCH.*=======.*>>>>>>> REPLACE"):
        apply_snippet(original, snippet)


def test_conflict_markers_are_never_written_unless_the_file_has_them() -> None:
    original = "x = 1\ny = 2\nz = 3\n"
    conflict = "# ...\n<<<<<<< HEAD\ny = 2\n=======\ny = 20\n>>>>>>> feature\n# ...\n"
    with pytest.raises(EditError, match="snippet line 2"):
        apply_snippet(original, conflict)
    # A file that holds such lines (a document about them) may keep them.
    doc = "Conflicts look like:\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\nEnd\n"
    got = apply_snippet(doc, "<!-- ... -->\n<<<<<<< HEAD\nmine\n=======\n<!-- ... -->\n")
    assert got.check() == doc.replace("ours", "mine")


@pytest.mark.parametrize("sep", ["=====", "=========="])
def test_search_replace_with_other_separator_lengths_merges(sep: str) -> None:
    snippet = f"<<<<<<< SEARCH\ndef a():\n    return 1\n{sep}\ndef a():\n    return 10\n" \
              ">>>>>>> REPLACE\n"
    assert apply_snippet(PY, snippet).check() == PY.replace("return 1\n", "return 10\n")



@pytest.mark.parametrize("snippet", [
    "# ...\nb = 2\nc = 30\nd = 4\n# ...\n",
    "<<<<<<< SEARCH\nc = 3\n=======\nc = 30\n>>>>>>> REPLACE\n",
    "@@ -3,1 +3,1 @@\n-c = 3\n+c = 30\n",
])
def test_a_file_that_mixes_line_endings_keeps_each_lines_own(snippet: str) -> None:
    # Mostly LF with CRLF lines (a file edited on two systems): every line the edit does
    # not touch keeps its bytes, its context lines included; the new line takes the
    # file's usual ending. (All lines used to take the majority's ending.)
    original = "a = 1\nb = 2\r\nc = 3\nd = 4\r\ne = 5\n"
    result = apply_snippet(original, snippet)
    assert result.check() == "a = 1\nb = 2\r\nc = 30\nd = 4\r\ne = 5\n"
    crlf_first = original.replace("a = 1\n", "a = 1\r\n").replace("e = 5\n", "e = 5")
    assert apply_snippet(crlf_first, snippet).check() == \
        "a = 1\r\nb = 2\r\nc = 30\r\nd = 4\r\ne = 5"  # CRLF is now the usual ending


@pytest.mark.parametrize("snippet", [
    "<<<<<<< SEARCH\nimport os\n=======\nimport sys\n>>>>>>> REPLACE\n",
    "import os\nimport sys\n# ...\n",
    "@@ -1,1 +1,1 @@\n-import os\n+import sys\n",
])
def test_a_byte_order_mark_is_kept_and_the_first_line_still_matches(snippet: str) -> None:
    # Sent as is over gRPC or HTTP (the CLI strips it itself), the mark made the first
    # line match nothing: the block was refused and a lazy edit inserted a second copy.
    result = apply_snippet("\ufeffimport os\nx = 1\n", snippet)
    assert result.check() == ("\ufeffimport os\nimport sys\nx = 1\n" if "# ..." in snippet
                              else "\ufeffimport sys\nx = 1\n")
    # a snippet that shows the mark edits it: here it removes it
    removal = "<<<<<<< SEARCH\n\ufeffimport os\n=======\nimport os\n>>>>>>> REPLACE\n"
    assert apply_snippet("\ufeffimport os\nx = 1\n", removal).check() == "import os\nx = 1\n"


GO_TABS = ("package main\n\nfunc f() {\n\tx := 1\n\tif x > 0 {\n\t\ty := 2\n\t\tprint(y)\n\t}\n"
           "\treturn\n}\n")


@pytest.mark.parametrize("width", [2, 4, 8])
def test_a_snippet_indented_with_spaces_keeps_a_tab_indented_file_in_tabs(width: int) -> None:
    # Chat interfaces turn tabs into spaces; merged as written, every context line of
    # the snippet replaced the original's tab-indented line with a space-indented copy.
    pad = " " * width
    snippet = (f"// ...\nfunc f() {{\n{pad}x := 1\n{pad}if x > 0 {{\n{pad * 2}y := 3\n"
               f"{pad * 2}print(y)\n{pad}}}\n// ...\n")
    assert apply_snippet(GO_TABS, snippet).check() == GO_TABS.replace("y := 2", "y := 3")


def test_a_makefile_recipe_written_with_spaces_gets_its_tab() -> None:
    makefile = "all: build\n\nbuild:\n\tgo build ./...\n\ntest:\n\tgo test ./...\n\tgo vet ./...\n"
    snippet = "# ...\ntest:\n    go test -race ./...\n    go vet ./...\n"
    assert apply_snippet(makefile, snippet).check() == makefile.replace("test ./", "test -race ./")


@pytest.mark.parametrize("original, snippet", [
    # a file indented with spaces: the snippet's spaces stand
    (GO_TABS.replace("\t", "    "), "// ...\n    if x > 0 {\n        y := 3\n// ...\n"),
    # the lines both show disagree on the width of a tab: nothing is rewritten
    (GO_TABS, "// ...\n    x := 1\n    if x > 0 {\n      y := 3\n      print(y)\n// ...\n"),
])
def test_spaces_are_only_rewritten_when_the_file_and_the_snippet_agree(
        original: str, snippet: str) -> None:
    from fastapply.merge.edits import parse_edit
    from fastapply.merge.indent import tabs_for_spaces

    plan = parse_edit(snippet)
    assert tabs_for_spaces(plan, original) == plan
