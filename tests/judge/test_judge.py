"""The judge of the merge's readings: its parser signals, its features, the shipped model,
the policy served through the service, and its own data and training commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastapply.examples import load_edits
from fastapply.judge import Judge, readings_of
from fastapply.judge.features import FEATURES, reading_features
from fastapply.judge.syntax import Syntax, guess_language
from fastapply.service import FastApplyService, InvalidRequest, Refused, ServiceConfig

DATA = Path(__file__).resolve().parents[1] / "data"

#: A tie: "b" is found twice, so the merge builds a rival reading.
TIED = ("a\nb\nc\nb\nd\n", "# ...\nb\nX\n# ...\n")


def test_the_language_is_the_grammar_that_reads_the_file_without_errors() -> None:
    assert guess_language("def f(x):\n    return x\n") == "python"
    assert guess_language("package main\n\nfunc main() {\n}\n") == "go"
    assert guess_language("<?php\n$a = 1;\n") == "php"
    # prose: no grammar reads it well, so the judge has no syntax signals for it
    assert guess_language("# A title\n\nSome prose, *emphasis*, a [link](x).\n") is None


def test_a_reading_that_breaks_the_syntax_or_doubles_a_definition_is_told() -> None:
    parsed = Syntax.of("class A:\n    def f(self):\n        return 1\n")
    same = parsed.signals("class A:\n    def f(self):\n        return 2\n")
    assert same == {"syntax_errors_added": 0, "definitions_doubled": 0}
    doubled = parsed.signals("class A:\n    def f(self):\n        return 1\n"
                             "    def f(self):\n        return 2\n")
    assert doubled["definitions_doubled"] == 1
    assert parsed.signals("class A:\n    def f(self:\n        return 1\n")[
        "syntax_errors_added"] > 0
    # a file no grammar here reads has no signals (NaN), not a guess
    unread = Syntax.of("# Notes\n\n* an item, with [a link](x)\n").signals("# Notes\n")
    assert all(v != v for v in unread.values())


def test_features_read_the_edit_not_the_whole_file() -> None:
    original = "".join(f"line {k}\n" for k in range(3000))
    snippet = "# ...\nline 1500\nnew line\nline 1501\n# ...\n"
    reading = original.replace("line 1500\n", "line 1500\nnew line\n")
    f = reading_features(original, snippet, reading)
    assert (f["added"], f["removed"], f["removed_unshown"], f["hunks"]) == (1, 0, 0, 1)
    # a reading that also drops a line the snippet never showed
    dropping = reading.replace("line 7\n", "")
    g = reading_features(original, snippet, dropping)
    assert (g["removed"], g["removed_unshown"], g["hunks"]) == (1, 1, 2)
    assert set(f) == set(FEATURES)


def test_an_unsure_merge_proposes_every_reading_chosen_first() -> None:
    rs = readings_of(*TIED)
    assert not rs.certain and len(rs.readings) == 2
    assert rs.readings[0].chosen and not rs.readings[1].chosen
    assert rs.readings[0].text == rs.merge.text  # type: ignore[union-attr]
    assert readings_of("a\nb\n", "<<<<<<< SEARCH\nb\n>>>>>>> REPLACE\n").error


def test_the_shipped_judge_loads_from_the_package_with_its_card() -> None:
    judge = Judge.load()
    card = judge.card
    assert card["features"] == list(FEATURES)
    assert 0 < judge.accept < 1
    assert card["validation"]["folds_by_repository"] >= 2
    assert card["data"]["readings"] > 1000
    scores = judge.scores(readings_of(*TIED))
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)


def test_a_judge_directory_without_its_files_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no judge here"):
        Judge.load(tmp_path)


@pytest.fixture(scope="module")
def judged_service() -> FastApplyService:
    return FastApplyService(ServiceConfig(runtime="deterministic", policy="judge"))


def test_the_judge_policy_serves_exact_formats_and_refuses_naming_the_readings(
        judged_service: FastApplyService) -> None:
    for rec in load_edits()[:4]:  # SEARCH/REPLACE and udiff: exact by construction
        for field in ("search_replace", "udiff"):
            result = judged_service.apply(rec["original"], rec[field])
            assert result.merged_code == rec["updated"]
            assert result.stats.witness == "deterministic-exact"
    with pytest.raises(Refused) as refused:
        judged_service.apply(*TIED)
    message = str(refused.value)
    assert "the judge accepts" in message and "scores" in message
    assert "differ at" in message and "rival" in message  # the place, both readings
    for broken in ("<<<<<<< SEARCH\nb\n>>>>>>> REPLACE\n",  # no =======: unreadable
                   "<<<<<<< SEARCH\nz\n=======\ny\n>>>>>>> REPLACE\n"):  # found nowhere
        with pytest.raises(InvalidRequest, match="cannot be merged"):
            judged_service.apply("a\nb\n", broken)


def test_the_judge_policy_on_agent_snippets_serves_only_what_it_accepts(
        judged_service: FastApplyService) -> None:
    judge = judged_service.judge
    served = refused = 0
    for rec in load_edits(DATA / "multirepo-valid-sample.jsonl")[:30]:
        verdict = judge.judge(rec["original"], rec["lazy_snippet"])
        try:
            result = judged_service.apply(rec["original"], rec["lazy_snippet"])
        except InvalidRequest:
            refused += 1
            assert verdict.served is None
            continue
        served += 1
        assert verdict.served is not None
        assert result.merged_code == verdict.readings.readings[verdict.served].text
        if not verdict.readings.certain:
            assert verdict.scores[verdict.served] >= judge.accept
    assert served and served + refused == 30


def test_judge_data_and_train_write_a_judge_that_loads(tmp_path: Path) -> None:
    from fastapply.cli import main

    rows = tmp_path / "rows.jsonl"
    records = DATA / "multirepo-valid-sample.jsonl"
    assert main(["judge", "data", "--records", str(records), "--corpus", "agent-sample",
                 "--out", str(rows), "--limit", "40"]) == 0
    lines = [json.loads(line) for line in rows.read_text().splitlines()]
    assert lines and {"label", "repo", "merge", *FEATURES} <= set(lines[0])
    assert {r["label"] for r in lines} == {0, 1}
    out = tmp_path / "judge"
    assert main(["judge", "train", str(rows), "--out", str(out), "--folds", "3",
                 "--max-wrong", "0.5"]) == 0
    trained = Judge.load(out)
    assert trained.card["data"]["readings"] == len(lines)
    assert trained.card["validation"]["folds_by_repository"] == 3


def test_where_a_model_runs_it_witnesses_what_the_judge_leaves_unsettled(
        tiny_model_dir: Path) -> None:
    service = FastApplyService(ServiceConfig(runtime="torch", model_dir=str(tiny_model_dir),
                                             prompt_format="morph", policy="judge"))
    assert service.policy == "certain_or_confident_agree"  # the model's part of it
    rec = load_edits()[0]  # a certain merge: served by the judge, the model not run
    result = service.apply(rec["original"], rec["search_replace"])
    assert result.merged_code == rec["updated"] and result.stats.forward_passes == 0
    # an unsure tie the judge does not settle: the random model writes neither reading
    with pytest.raises(Refused) as refused:
        service.apply(*TIED)
    message = str(refused.value)
    assert "the judge accepts" in message and "and the model's witness: " in message


def test_the_language_model_judge_trains_by_repository_and_scores_every_reading(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """`judge lm` on the tiny model: a LoRA sequence classifier per repository fold, with
    the transformers Trainer; every held-out reading scored, the policy replayed."""
    from fastapply.cli import main

    rows = tmp_path / "rows.jsonl"
    assert main(["judge", "data", "--records", str(DATA / "multirepo-valid-sample.jsonl"),
                 "--corpus", "agent-sample", "--text", "--out", str(rows),
                 "--limit", "24"]) == 0
    lines = [json.loads(line) for line in rows.read_text().splitlines()]
    assert all(r["diff"].startswith("@@") or r["diff"] == "" for r in lines)
    out = tmp_path / "lm"
    assert main(["judge", "lm", str(rows), "--base", str(tiny_model_dir), "--out", str(out),
                 "--folds", "2", "--epochs", "1", "--max-tokens", "96",
                 "--max-wrong", "0.5"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["readings"] == len(lines) and report["folds_by_repository"] == 2
    scored = [json.loads(line) for line in (out / "lm_scores.jsonl").read_text().splitlines()]
    assert len(scored) == len(lines) and all(0 <= s["lm_score"] <= 1 for s in scored)
    held = sum(len((out / f"fold-{k}" / "scores.jsonl").read_text().splitlines())
               for k in (0, 1))
    assert held == len(lines)  # each reading scored once, by the fold that held it out
    both = tmp_path / "trees-and-lm"
    assert main(["judge", "train", str(rows), "--lm-scores", str(out / "lm_scores.jsonl"),
                 "--out", str(both), "--folds", "2", "--max-wrong", "0.5"]) == 0
    card = json.loads((both / "card.json").read_text())
    assert card["features"][-1] == "lm_score" and card["params"]["monotone_constraints"][-1] == 1
    with pytest.raises(ValueError, match="other features"):
        Judge.load(both)  # the served judge computes no lm_score: it cannot load this one


def test_the_language_model_judge_reads_the_edit_within_its_token_budget(
        tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from fastapply.judge.lm import diff_of, edit_ids

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    original = "".join(f"line {k}\n" for k in range(400))
    reading = original.replace("line 200\n", "changed 200\n")
    diff = diff_of(original, reading)
    assert diff.count("\n") == 8  # one hunk of 9 lines, not the file
    long_snippet = "".join(f"shown {k}\n" for k in range(300))
    ids = edit_ids(tokenizer, long_snippet, diff * 40, 128)
    assert len(ids) <= 128
    text = str(tokenizer.decode(ids))
    assert text.startswith("snippet:") and "change:" in text
    short = edit_ids(tokenizer, "x = 1\n", diff, 512)
    assert str(tokenizer.decode(short)).endswith("line 203")  # short inputs are kept whole
