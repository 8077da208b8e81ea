"""``python -m fastapply.bench quality`` and ``refusals`` on a real (tiny) model: readings
are saved and re-decided, the deterministic merge alone is read without a model, and a
refusal under agree_or_exact comes after fewer forward passes than the whole file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fastapply.bench.__main__ import main


@pytest.fixture()
def records(tmp_path: Path) -> Path:
    original = "".join(f"value_{i} = {i}\n" for i in range(40))
    updated = original.replace("value_20 = 20\n", "value_20 = 200\n")
    data = tmp_path / "records.jsonl"
    data.write_text(json.dumps({"id": "x/y@1:a.py", "repo": "x/y", "language": "python",
                                "path": "a.py", "original": original,
                                "updated": updated}) + "\n")
    return data


def _last_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_whole_files_by_length_the_deterministic_alone_and_a_prompt_refusal(
        records: Path, tmp_path: Path, tiny_model_dir: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "readings.jsonl"
    assert main(["quality", "--data", str(records), "--model", str(tiny_model_dir),
                 "--styles", "lazy,search_replace", "--save", str(saved)]) == 0
    result = _last_json(capsys)
    rows = [json.loads(line) for line in saved.open()]
    assert [r["style"] for r in rows] == ["lazy", "search_replace"]
    assert all(r["lines"] == 40 for r in rows)  # the whole file, not a window
    det = result["policies"]["deterministic"]
    assert det["<=80 lines"]["n"] == 2 and det["lazy"]["n"] == 1  # counted once each
    assert det["all"]["served_exact"] == 1.0
    # the random model never writes the file: agree_or_exact serves SR only, no wrong
    shipped = result["policies"]["agree_or_exact"]["all"]
    assert shipped["served_exact"] == 0.5 and shipped["wrong_served_count"] == 0

    assert main(["quality", "--data", str(records), "--no-model",
                 "--styles", "lazy,search_replace"]) == 0
    assert _last_json(capsys)["policies"]["deterministic"]["all"]["served_exact"] == 1.0

    assert main(["refusals", "--load", str(saved), "--model", str(tiny_model_dir),
                 "--policy", "agree_or_exact"]) == 0  # (the default serves it: certain)
    refusals = _last_json(capsys)
    assert refusals["readings"] == 1 and refusals["refused"] == 1  # the lazy one
    item = refusals["items"][0]
    assert item["refusal_forward_passes"] < item["whole_file_forward_passes"]


def test_unsure_windows_are_measured_by_which_reading_was_true(
        tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The unit is the windowed witness's window of an unsure merge, answered by the true
    # window; the random model writes none of them, so nothing is served.
    data = Path(__file__).resolve().parents[1] / "data" / "multirepo-valid-sample.jsonl"
    saved = tmp_path / "readings.jsonl"
    assert main(["quality", "--data", str(data), "--model", str(tiny_model_dir),
                 "--unsure-windows", "--limit", "6", "--styles", "named,lazy",
                 "--save", str(saved)]) == 0
    result = _last_json(capsys)
    rows = [json.loads(line) for line in saved.open()]
    windows = result["unsure_windows"]
    assert rows and windows["n"] == len(rows)
    assert sum(windows[f"truth_{k}"]["n"] for k in ("chosen", "rival", "none")) == len(rows)
    for row in rows:
        assert row["style"] in ("named", "lazy") and row["original"] in \
            next(json.loads(x)["original"] for x in data.open()
                 if json.loads(x)["id"] == row["id"])
        if row["readings"] is not None and row["truth"] >= 0:
            assert row["readings"][row["truth"]] == row["updated"]
    assert windows["witness"]["served_wrong"] == 0
    assert result["copied_markers"]["model_answers"] <= len(rows)
