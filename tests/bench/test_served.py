"""``python -m fastapply.bench served``: every record is one request to the service as
``fastapply serve`` sets it up, counted as served exact, served wrong or refused (with the
refusal's kind); saved rows are re-tabled, and a run resumes after them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fastapply.bench.__main__ import main
from fastapply.bench.served import served_config
from fastapply.service import FastApplyService

SHORT = "".join(f"value_{i} = {i}\n" for i in range(40))
LONG = "".join(f"value_{i} = {i}\n" for i in range(1200))
TWINS = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x\n"


def _replace(old: str, new: str) -> str:
    return f"<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def _record(rid: str, original: str, updated: str, snippet: str) -> dict[str, Any]:
    return {"id": rid, "original": original, "updated": updated, "lazy_snippet": snippet}


@pytest.fixture()
def records(tmp_path: Path) -> Path:
    data = tmp_path / "records.jsonl"
    rows = [
        # a certain merge of the true change, in a file of over 1,000 lines
        _record("exact", LONG, LONG.replace("value_600 = 600\n", "value_600 = 6\n"),
                _replace("value_600 = 600\n", "value_600 = 6\n")),
        # a SEARCH/REPLACE block without its ======= line: an EditError
        _record("broken", SHORT, SHORT, "<<<<<<< SEARCH\nvalue_3 = 3\n>>>>>>> REPLACE\n"),
        # the merge is certain, but the truth is another file: served wrong
        _record("wrong", SHORT, SHORT.replace("value_20 = 20\n", "value_20 = 201\n"),
                _replace("value_20 = 20\n", "value_20 = 200\n")),
        # the snippet's anchors match both functions equally well: an unsure merge
        _record("twins", TWINS, TWINS.replace("x = 1\n", "x = 1\n    y = 2\n", 1),
                "    x = 1\n    y = 2\n    return x\n"),
        _record("empty", SHORT, SHORT, "   \n"),
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def _last_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_deterministic_outcomes_and_kinds_by_length_saved_loaded_and_resumed(
        records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "rows.jsonl"
    assert main(["served", "--data", str(records), "--runtime", "deterministic",
                 "--policy", "deterministic", "--save", str(saved)]) == 0
    result = _last_json(capsys)
    every = result["buckets"]["all"]
    assert (every["records"], every["served_exact"], every["wrong"], every["refused"]) == \
        (5, 1, 1, 3)
    assert every["wrong_rate"] == 0.2 and every["served_exact_rate"] == 0.2
    assert result["buckets"][">1000 lines"]["served_exact"] == 1
    assert result["buckets"]["<=200 lines"]["records"] == 4
    kinds = {k: n for k, n in result["refusal_kinds"]["all"].items() if n}
    assert kinds == {"merge_error": 1, "unsure": 1, "invalid_input": 1}
    assert result["wrong_ids"] == ["wrong"] and result["wrong_certain"] == 1
    assert result["config"]["runtime"] == "deterministic"

    rows = {r["id"]: r for r in map(json.loads, saved.open())}
    assert rows["broken"]["kind"] == "merge_error" and "=======" in rows["broken"]["message"]
    assert rows["wrong"]["certain"] is True and rows["exact"]["lines"] == 1200

    assert main(["served", "--load", str(saved)]) == 0
    loaded = _last_json(capsys)
    assert loaded["buckets"] == result["buckets"] and loaded["wrong_ids"] == ["wrong"]

    # run again on the same rows: nothing is served again, nothing is lost
    assert main(["served", "--data", str(records), "--runtime", "deterministic",
                 "--policy", "deterministic", "--save", str(saved)]) == 0
    assert _last_json(capsys)["buckets"]["all"] == every
    assert len(saved.read_text().splitlines()) == 5


def test_an_unexpected_exception_is_a_refusal_of_kind_error(
        records: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    real_apply = FastApplyService.apply

    def apply(self: FastApplyService, initial_code: Any, edit_snippet: Any,
              *args: Any, **kwargs: Any) -> Any:
        if initial_code == TWINS:
            raise RuntimeError("the runtime fell over")
        return real_apply(self, initial_code, edit_snippet, *args, **kwargs)

    monkeypatch.setattr(FastApplyService, "apply", apply)
    assert main(["served", "--data", str(records), "--runtime", "deterministic"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["refusal_kinds"]["all"]["error"] == 1
    assert result["buckets"]["all"]["served_exact"] == 1  # the others still served


def test_the_config_is_the_one_serve_renders_with_no_options(tiny_model_dir: Path) -> None:
    config = served_config("torch", tiny_model_dir)
    assert (config.runtime, config.policy, config.witness) == ("torch", "judge", "file")
    assert config.model_dir == str(tiny_model_dir.resolve()) and config.witness_budget_s > 0
    assert served_config("deterministic").runtime == "deterministic"


def test_an_unsure_merge_the_model_reads_otherwise_is_refused_as_disagreed(
        records: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the random model never writes the unsure merge's file: it is refused, the certain
    # merges are served without the model (as the default policy serves them)
    assert main(["served", "--data", str(records), "--model", str(tiny_model_dir)]) == 0
    result = _last_json(capsys)
    kinds = {k: n for k, n in result["refusal_kinds"]["all"].items() if n}
    assert kinds == {"merge_error": 1, "disagreed": 1, "invalid_input": 1}
    assert result["wrong_ids"] == ["wrong"] and result["served_certain"] == 2
