"""Hard-case window examples: the windowed witness's own prompts, answered by the truth."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fastapply.merge import apply_snippet
from fastapply.merge.windows import window_tasks
from fastapply.model.hard_windows import hard_examples, true_window
from fastapply.model.sft_data import snippet_of

DATA = Path(__file__).resolve().parents[1] / "data" / "multirepo-valid-sample.jsonl"


@pytest.fixture(scope="module")
def hard() -> tuple[list[dict], list[dict], Counter[str]]:
    recs = [json.loads(line) for line in DATA.open()]
    counts: Counter[str] = Counter()
    return recs, list(hard_examples(recs, seed=0, counts=counts)), counts


def test_each_hard_case_is_a_window_of_an_unsure_merge_answered_by_the_true_window(
        hard: tuple[list[dict], list[dict], Counter[str]]) -> None:
    recs, rows, counts = hard
    assert rows, "the sample has unsure merges"
    by_id = {r["id"]: r for r in recs}
    whole = 0
    for ex in rows:
        rec = by_id[ex["id"]]
        assert ex["hard"] and not ex["whole_file"] and ex["format"] in ("kortix", "morph")
        # the window is a run of the original's lines; the answer is what the commit made
        # of exactly those lines (a run of the true file's lines)
        assert ex["original"] in rec["original"] and ex["updated"] in rec["updated"]
        assert ex["original"].count("\n") <= 120
        # where the commit changed nothing outside the window, putting the answer back in
        # place gives the true file
        whole += rec["original"].replace(ex["original"], ex["updated"], 1) == rec["updated"]
    assert whole > len(rows) // 4
    assert counts["unsure, windows"] > 0 and counts["certain right"] > 0
    assert sum(counts[k] for k in ("truth chosen", "truth rival", "truth none")) == len(rows)


def test_the_prompt_is_the_one_the_windowed_witness_sends() -> None:
    # a record whose merge is unsure: its first window's prompt parts are window_tasks'
    recs = [json.loads(line) for line in DATA.open()]
    for rec in recs:
        ex = next(hard_examples([rec], seed=0, styles=["named"]), None)
        if ex is None:
            continue
        import random

        snippet = snippet_of("named", rec["original"], rec["updated"], rec["language"],
                             rec["path"], random.Random(0))
        tasks = window_tasks(rec["original"], snippet,
                             apply_snippet(rec["original"], snippet).with_readings())
        assert ex["snippet"] == tasks[0].snippet
        if ex["truth"] >= 0:  # the window was not widened: the prompt's code is the task's
            assert ex["original"] == tasks[0].original
            assert ex["updated"] == tasks[0].texts[ex["truth"]]
        return
    pytest.fail("no record of the sample gave a hard case in the named style")


def test_a_window_is_widened_until_no_change_straddles_its_edges() -> None:
    orig = [f"{c}\n" for c in "abcdefgh"]
    new = orig[:3] + ["X\n", "Y\n"] + orig[5:]  # d, e -> X, Y
    assert true_window(orig, new, 4, 7) == (3, 7, "X\nY\nf\ng\n")
    assert true_window(orig, new, 0, 3) == (0, 3, "a\nb\nc\n")
    added = orig[:2] + ["N\n"] + orig[2:]  # an insertion right before line 2
    assert true_window(orig, added, 2, 4) == (1, 4, "b\nN\nc\nd\n")


def test_model_sft_hard_windows_adds_them_and_reports_the_yield(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        hard: tuple[list[dict], list[dict], Counter[str]]) -> None:
    from fastapply.cli import main

    out = tmp_path / "sft.jsonl"
    assert main(["model", "sft", str(DATA), "--out", str(out), "--variants", "0",
                 "--hard-windows"]) == 0
    written = [json.loads(line) for line in out.open()]
    assert written == hard[1]
    printed = capsys.readouterr().out
    assert "unsure window" in printed and f"hard cases: {len(written)} unsure windows" in printed
