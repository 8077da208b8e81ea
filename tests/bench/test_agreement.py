"""``python -m fastapply.bench agreement``: the teacher-forced check says what greedy
decoding writes, on the tiny random model, and the command scores unsure merges only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fastapply.bench.__main__ import main
from fastapply.bench.agreement import agreement

TWINS = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x\n"
SHORT = "".join(f"value_{i} = {i}\n" for i in range(40))


def _greedy(model: Any, prompt: list[int], n: int) -> tuple[list[int], list[float]]:
    """Plain greedy decoding, one full forward pass a token: tokens and their probabilities."""
    import torch

    ids, probs = list(prompt), []
    with torch.inference_mode():
        for _ in range(n):
            p = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
            ids.append(int(p.argmax()))
            probs.append(float(p.max()))
    return ids[len(prompt):], probs


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


def test_teacher_forcing_tells_what_greedy_decoding_writes(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    prompt = list(tok.encode("def f(a):\n    return a + 1\n", add_special_tokens=False))
    written, probs = _greedy(model, prompt, 12)
    stop = {written[-1]}  # the last token greedy writes stands for the stop token here
    same = agreement(model, prompt, written, stop)
    assert same.agrees and same.first_departure == -1
    assert same.min_prob == pytest.approx(min(probs), rel=1e-4)
    other = next(t for t in range(50) if t != written[5])
    changed = agreement(model, prompt, written[:5] + [other] + written[6:], stop)
    assert not changed.agrees and changed.first_departure == 5
    unstopped = agreement(model, prompt, written, {-1})  # no stop token after the reading
    assert not unstopped.agrees and unstopped.first_departure == len(written) - 1


def test_the_command_scores_each_unsure_merge_once_per_model(
        tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, rows = tmp_path / "records.jsonl", tmp_path / "rows.jsonl"
    records = [
        # the snippet's anchors match both functions equally well: unsure, chosen right
        {"id": "twins", "original": TWINS,
         "updated": TWINS.replace("x = 1\n", "x = 1\n    y = 2\n", 1),
         "lazy_snippet": "    x = 1\n    y = 2\n    return x\n"},
        # a certain merge: no model is asked
        {"id": "certain", "original": SHORT,
         "updated": SHORT.replace("value_3 = 3\n", "value_3 = 4\n"),
         "lazy_snippet": "<<<<<<< SEARCH\nvalue_3 = 3\n=======\nvalue_3 = 4\n>>>>>>> REPLACE\n"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["agreement", "--data", str(data), "--model", str(tiny_model_dir),
                 "--also", str(tiny_model_dir), "--save", str(rows)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [f["model"] for f in result["models"]] == [str(tiny_model_dir)] * 2
    for figures in result["models"]:
        assert figures["unsure"] == figures["scored"] == figures["chosen_right"] == 1
        assert figures["served_wrong"] == 0
    saved = [json.loads(line) for line in rows.read_text().splitlines()]
    assert [r["id"] for r in saved] == ["twins", "twins"]  # both models, the unsure merge only
    assert saved[0] == saved[1]
