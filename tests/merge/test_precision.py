"""Precision: flagged when unsure, never a wrong file served. The review's checks, and
floors on the repository-split validation sample shipped in tests/data (built by
``fastapply data build|split|sample``; commands in docs/benchmarks.md)."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

import pytest
from conftest import DATA

from fastapply.merge import apply_snippet
from fastapply.merge.edits import parse_edit
from fastapply.merge.precision import removals, strict_runs, unanchored_removals
from fastapply.merge.review import review

VALID_SAMPLE = DATA / "multirepo-valid-sample.jsonl"
PY = "import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"


def test_a_marker_written_without_a_comment_is_flagged_not_merged_as_text() -> None:
    got = apply_snippet(PY, "... existing code ...\ndef b():\n    return 3\n")
    assert got.uncertain and "looks like a marker" in got.uncertain[0].message
    with pytest.raises(ValueError, match="looks like a marker"):
        got.check()
    # a line the file itself holds (prose in a README) is context, not a finding
    doc = "Intro\n\n... existing code ...\n\nOutro\n"
    assert not review(parse_edit("... existing code ...\n\nOutro!\n"), doc,
                      doc.replace("Outro", "Outro!"))
    assert apply_snippet(PY, "# ... existing code ...\ndef b():\n    return 3\n").check() \
        == PY.replace("return 2", "return 3")


def test_a_segment_whose_lines_are_split_up_is_flagged() -> None:
    plan = parse_edit("# ...\ndef b():\n    return 3\n")
    assert review(plan, PY, PY.replace("return 2", "return 3")) == []
    split = PY.replace("def b():\n    return 2", "def b():\n    pass\n    return 3")
    assert "do not follow each other" in review(plan, PY, split)[0][1]
    b_then_a = parse_edit("# ...\ndef b():\n    return 3\n# ...\ndef a():\n# ...\n")
    assert "come before an earlier segment's" in review(
        b_then_a, PY, PY.replace("return 2", "return 3"))[0][1]


JAVA = ("class A {\n    void open() {\n        start();\n    }\n\n    void build() {\n"
        "        log(first);\n        log(second);\n        log(third);\n        flush();\n"
        "    }\n}\n")


def test_a_segment_anchored_only_by_generic_lines_that_removes_unshown_code_is_flagged() -> None:
    # A new method after "    }": the closing brace is found twice, so the segment also
    # reads as a rewrite of build() whose body the snippet never shows. Never served wrong.
    want = JAVA.replace("    }\n}\n", "    }\n\n    void close() {\n    }\n}\n")
    got = apply_snippet(JAVA, "// ...\n    }\n\n    void close() {\n    }\n}\n")
    assert got.text == want or any("never shows" in u.message for u in got.uncertain), got
    # the same change with a unique line of context is merged
    shown = "// ...\n        flush();\n    }\n\n    void close() {\n    }\n}\n"
    assert apply_snippet(JAVA, shown).check() == want


def test_a_lazy_snippet_that_changes_nothing_is_flagged() -> None:
    # The deletion of dead() is shown by making "}" and "int keep() {" neighbours, but
    # dead()'s own "}" already stands before "int keep() {": read that way, nothing changes.
    c = "int a() {\n  x();\n}\n\n\nint dead() {\n  return 0;\n}\n\n\nint keep() {\n  y();\n}\n"
    got = apply_snippet(c, "// ...\n}\n\n\nint keep() {\n  y();\n// ...\n")
    assert got.text != c or any("changes nothing" in u.message for u in got.uncertain), got
    # a snippet without markers that repeats the whole file is no change, and no doubt
    assert apply_snippet(c, c).check() == c


def test_unanchored_removals_counts_only_runs_between_generic_lines() -> None:
    orig = JAVA.split("\n")
    seg = ["    }", "", "    void close() {", "    }", "}"]
    table: dict[str, list[int]] = {}
    for j, line in enumerate(orig):
        table.setdefault(line.strip(), []).append(j)
    shown = frozenset(s.strip() for s in seg if s.strip())
    # "    }" on line 4 and "}" on line 12 (each "}" found 3 times): lines 6-11 go, and
    # build()'s five lines are nowhere in the snippet (only "void" of their words is)
    found = removals(orig, 3, 12, [(0, 3), (1, 4), (4, 11)], seg, shown, table, "seg")
    assert [(r.line, r.unshown, r.inserted, r.before, r.after, r.unique) for r in found] == \
        [(6, 5, 2, 3, 3, 0)]
    assert [line for line, _ in unanchored_removals(found)] == [6]
    assert found[0].shared == 1 / 7
    # an edit in place (each removed line's words kept by the line written instead)
    renamed = [s.replace("log(", "trace(") for s in orig[5:11]]
    seg = ["    }", "", *renamed, "}"]
    edit = removals(orig, 3, 12, [(0, 3), (1, 4), (8, 11)], seg,
                    frozenset(s.strip() for s in seg if s.strip()), table, "seg")
    assert edit[0].unshown == 3 and edit[0].shared >= 0.7 and unanchored_removals(edit) == []


def test_a_short_removal_between_generic_lines_is_flagged() -> None:
    # build() has only two lines: the segment after "    }" reads as a rewrite of it (two
    # unshown lines lost) as well as an insertion after it; under the old three-line floor
    # this was served. Now refused, and with a unique line of context merged.
    short = JAVA.replace("        log(first);\n        log(second);\n        log(third);\n", "")
    got = apply_snippet(short, "// ...\n    }\n\n    void close() {\n    }\n}\n")
    # (refused by the generic-removal rule, or, since build() counts as a definition the
    # segment never names, by the lookalike-anchor rule)
    assert any("between lines found at several places" in u.message or
               "recurs among them" in u.message for u in got.uncertain), got
    want = short.replace("    }\n}\n", "    }\n\n    void close() {\n    }\n}\n")
    assert apply_snippet(short, "// ...\n        flush();\n    }\n\n    void close() {\n"
                                "    }\n}\n").check() == want


def test_an_edit_read_as_an_insertion_beside_generic_lines_is_flagged() -> None:
    # The copyright line was edited, but "//" (found twice) lets the merge keep the old
    # line and insert the new one above it: a duplicated header served as success before.
    header = ("//  Tests.swift\n//\n//  Copyright (c) 2014 - 2016 Pinglin Tang\n//\n\n"
              "import XCTest\n")
    got = apply_snippet(header, "//  Tests.swift\n//\n//  Copyright (c) 2014 - 2017 Pinglin "
                                "Tang\n//\n// ...\n")
    assert got.text == header.replace("2016", "2017") or any(
        "nearly repeat original lines" in u.message for u in got.uncertain), got


def test_a_removal_whose_context_line_recurs_in_it_is_a_lookalike() -> None:
    # A new doc comment placed after the "/// <summary>" of HasResult's doc block instead
    # of the one of TryGet's (both "/// <summary>"): HasResult is lost unless refused.
    orig = ["class O", "{", "    /// <summary>", "    /// Gets the result.", "    /// </summary>",
            "    public int Result { get; }", "", "    /// <summary>",
            "    /// Gets whether it has a result.", "    /// </summary>",
            "    public bool HasResult => true;", "", "    /// <summary>",
            "    /// Tries to get the result.", "    /// </summary>", "}"]
    seg = ["", "    /// <summary>", "    /// Throws on failure.", "    /// </summary>",
           "    public void EnsureSuccess() { }", "", "    /// <summary>",
           "    /// Tries to get the result.", "    /// </summary>"]
    table: dict[str, list[int]] = {}
    for j, line in enumerate(orig):
        table.setdefault(line.strip(), []).append(j)
    shown = frozenset(s.strip() for s in seg if s.strip())
    found = removals(orig, 6, 15, [(0, 6), (1, 7), (7, 13), (8, 14)], seg, shown, table, "s")
    assert [(r.line, r.unshown, r.inserted, r.lookalike) for r in found] == [(9, 2, 4, True)]
    assert "recurs among them" in strict_runs(found)[0][1]
    # an insertion between unique lines is no finding
    assert strict_runs(removals(orig, 13, 15, [(0, 13), (1, 14)], ["    /// Tries to get the "
                                "result.", "    /// </summary>"], shown, table, "s")) == []


@cache
def _figures(field: str) -> dict[str, int]:
    recs: list[dict[str, Any]] = [json.loads(s) for s in VALID_SAMPLE.read_text().splitlines()]
    served = wrong_unflagged = losing = 0
    for r in recs:
        got = apply_snippet(r["original"], r[field])
        served += got.text == r["updated"] and not got.uncertain
        if got.text != r["updated"] and not got.uncertain:
            wrong_unflagged += 1
            # does it lose a non-blank line of the original that the true file keeps?
            kept = Counter(r["updated"].split("\n")) & Counter(r["original"].split("\n"))
            losing += any(k.strip() for k in kept - Counter(got.text.split("\n")))
    return {"total": len(recs), "served": served, "wrong_unflagged": wrong_unflagged,
            "losing": losing}


# Floors on the sample (70 records, 14 repositories the merge rules were not tuned on).
# When it was made: lazy served exact 66/70 with 3 wrong and unflagged; with the checks
# for unshown removals between generic anchors and for no change: 66/70 with 2. Both
# other formats 70/70. With strict_runs (refuse when another reading fits as well,
# trading served exact for precision, see docs/benchmarks.md): 62/70 with 2. With
# definitions read in every language (session 17): 62/70 with 3, none of which loses a
# line of the original (before: 1 of the 2 did); on the whole validation set wrong and
# unflagged stays at 30 of 1,680 while those losing lines fall from 14 to 8 (the
# sample's third is a rename, set_default -> set_global_level, read as a new method
# beside the old one). They may only rise (wrong_unflagged and losing only fall).
@pytest.mark.parametrize("field,served_floor,wrong_unflagged_ceiling,losing_ceiling", [
    ("lazy_snippet", 62, 3, 0), ("search_replace", 70, 0, 0), ("udiff", 70, 0, 0)])
def test_validation_sample_precision_floor(field: str, served_floor: int,
                                           wrong_unflagged_ceiling: int,
                                           losing_ceiling: int) -> None:
    got = _figures(field)
    assert got["total"] == 70
    assert got["served"] >= served_floor, got
    assert got["wrong_unflagged"] <= wrong_unflagged_ceiling, got
    assert got["losing"] <= losing_ceiling, got


def test_the_deterministic_service_refuses_a_flagged_merge() -> None:
    from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

    service = FastApplyService(ServiceConfig(runtime="deterministic", policy="deterministic"))
    with pytest.raises(InvalidRequest, match=r"cannot be merged: .*looks like a marker"):
        service.apply(PY, "... existing code ...\ndef b():\n    return 3\n")
    assert service.apply(PY, "# ...\ndef b():\n    return 3\n").merged_code == \
        PY.replace("return 2", "return 3")


@pytest.mark.parametrize(("line", "inside"), [
    ("f(a, // ... existing ..., b);", True), ("  login(/* ... rest ... */) {", True),
    ("    // ... existing code ...", False), ("x = 1  # ... same as before", True),
    ("var y = '" + "ab" * 5000 + "';", False), ("#... existing", False)])
def test_a_marker_inside_a_line_is_found_after_code_only(line: str, inside: bool) -> None:
    # (looked for without a leading `\S.*?`, which made the search quadratic in the
    # line: 43 s for a 1.2 MB file of 40,000-character lines, now 0.1 s)
    from fastapply.merge.review import _inline_marker

    assert _inline_marker(line) is inside
