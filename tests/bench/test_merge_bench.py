"""``python -m fastapply.bench merge``: an unsure merge whose truth is one of its rival
readings counts toward the ceiling (the share of unsure merges with the truth among their
readings), not as a plain wrong merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastapply.bench.__main__ import main

AVA = ("import test from 'ava';\n\ntest('a', t => {\n\tt.is(1, 1);\n});\n\n"
       "test('b', async t => {\n\tconst {body} = await get('');\n\tt.is(body, '/');\n});\n\n"
       "test('c', t => {\n\tt.pass();\n});\n")
# a() and c() back to back: b() goes by adjacency, doubted (`});` recurs in it)
SNIPPET = ("// ... existing code ...\ntest('a', t => {\n\tt.is(1, 2);\n});\n\n"
           "test('c', t => {\n// ... existing code ...\n")


def test_the_ceiling_counts_a_truth_among_the_rival_readings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "edits.jsonl"
    rows = [  # the truth keeps b(): a rival; then the truth removes it: the chosen reading
        {"id": "kept", "original": AVA, "updated": AVA.replace("t.is(1, 1)", "t.is(1, 2)")},
        {"id": "gone", "original": AVA, "updated": AVA.replace("t.is(1, 1)", "t.is(1, 2)")
         .replace("test('b', async t => {\n\tconst {body} = await get('');\n"
                  "\tt.is(body, '/');\n});\n\n", "")},
        {"id": "other", "original": AVA, "updated": AVA.replace("t.pass()", "t.fail()")},
    ]
    data.write_text("".join(json.dumps({**r, "lazy_snippet": SNIPPET, "search_replace": "",
                                        "udiff": ""}) + "\n" for r in rows))
    assert main(["merge", "--data", str(data), "--formats", "lazy"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["formats"]["lazy"]
    assert (figures["exact_but_flagged"], figures["wrong_flagged"],
            figures["wrong_flagged_rival"]) == (1, 2, 1)
    assert figures["ceiling"] == pytest.approx(2 / 3)
