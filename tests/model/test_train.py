"""`fastapply train` on the tiny model: the whole recipe's mechanics on a CPU in seconds.

The same command trains on a GPU (``--device cuda``, a larger ``--batch-size``); here it
proves what a run that is cut, resumed or batched does: a time limit anneals the learning
rate instead of stopping at a high one, the time spent survives a resume, batches are
grouped by length, and the mix of the data is reported.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fastapply.model.schedule import CLOCK_FILE, lr_factor
from fastapply.model.sft_data import SftConfig, examples, mix
from fastapply.model.train import main as train_main

DATA = Path(__file__).resolve().parents[1] / "data" / "multirepo-valid-sample.jsonl"


@pytest.fixture(scope="module")
def sft_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    recs = [json.loads(line) for line in DATA.open()]
    rows = list(examples(recs, seed=3))
    out = tmp_path_factory.mktemp("sft") / "sft.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _log(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "train_log.jsonl").open()]


def _train(sft: Path, run: Path, model: Path, *extra: str) -> None:
    assert train_main([str(sft), "--out", str(run), "--base", str(model), "--max-tokens", "600",
                       "--save-steps", "2", "--log-steps", "1", "--warmup-steps", "1",
                       "--grad-accum", "1", "--precision", "float32", *extra]) == 0


class _TickingClock:
    """The schedule's clock, advanced 50 ms each time it is read, so the
    run's time budget runs out after the same steps on an idle or a loaded machine."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 0.05
        return self.now


def test_a_run_cut_by_its_time_limit_ends_annealed_and_a_resume_keeps_the_time_spent(
        sft_file: Path, tiny_model_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fastapply.model.schedule.time", _TickingClock())
    run = tmp_path / "run"
    # 10,000 steps cannot run in 4.2 seconds of the schedule's clock: the time limit ends it
    _train(sft_file, run, tiny_model_dir, "--max-steps", "10000", "--max-minutes", "0.07")
    log = _log(run)
    assert 2 <= log[-1]["step"] < 10000
    rates = [row["learning_rate"] for row in log]
    assert rates[-1] < 0.1 * max(rates), "the schedule was not annealed at the deadline"
    assert (run / "adapter" / "adapter_model.safetensors").is_file()
    checkpoints = sorted(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert json.loads((checkpoints[-1] / CLOCK_FILE).read_text())["spent_s"] > 0
    # resumed, the budget is already spent: it does not start the schedule again
    last = int(checkpoints[-1].name.split("-")[1])
    _train(sft_file, run, tiny_model_dir, "--max-steps", "10000", "--max-minutes", "0.07")
    assert _log(run)[-1]["step"] <= last + 2


def test_batches_grouped_by_length_and_the_mix_is_reported(
        sft_file: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _train(sft_file, run, tiny_model_dir, "--max-steps", "3", "--batch-size", "3")
    log = _log(run)
    assert [row["step"] for row in log] == [1, 2, 3]
    assert all(row["loss"] > 0 for row in log)
    figures = json.loads((run / "mix.json").read_text())
    assert figures["examples"] == sum(r["examples"] for r in figures["by_bucket"].values())
    assert abs(sum(r["answer_share"] for r in figures["by_style"].values()) - 1) < 0.01
    assert json.loads((run / "train_config.json").read_text())["batch_size"] == 3


def test_the_schedule_follows_steps_or_time_whichever_is_further() -> None:
    assert lr_factor(0, 10, 100, 0.0) == pytest.approx(0.1)  # warm-up
    assert lr_factor(55, 10, 100, 0.0) == pytest.approx(0.5)  # half the steps
    assert lr_factor(20, 10, 100, 0.5) == pytest.approx(0.5)  # half the time
    assert lr_factor(20, 10, 100, 1.0) == 0.0  # deadline


def test_most_answer_tokens_come_from_whole_files_over_80_lines() -> None:
    """The default mix (issue 26): whole files up to 300 lines beside windows, and the
    answer tokens mostly from files of more than 80 lines."""
    rng = random.Random(0)
    recs = []
    for k in range(60):  # files of 40-290 lines, one change in the middle
        n = 40 + 5 * k
        old = [f"line_{k}_{i} = {rng.randint(0, 99)}" for i in range(n)]
        new = list(old)
        new[n // 2] = f"changed_{k} = 1"
        recs.append({"id": f"r{k}", "repo": "x/y", "language": "python", "path": "a.py",
                     "original": "\n".join(old) + "\n", "updated": "\n".join(new) + "\n"})
    kept = [{"style": ex["style"], "whole_file": ex["whole_file"],
             "lines": ex["original"].count("\n"), "tokens": 0,
             "answer_tokens": len(ex["updated"])} for ex in examples(recs, 0, SftConfig())]
    figures = mix(kept)
    over_80 = sum(r["answer_share"] for name, r in figures["by_bucket"].items()
                  if name in ("whole 81-200", "whole 201-300"))
    assert over_80 > 0.5
    assert "window" in figures["by_bucket"]


def test_model_sft_command_writes_the_examples_and_prints_their_mix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fastapply model sft` (the model's command, not the corpus's) writes what
    ``examples`` yields for the seed, and prints the mix."""
    from fastapply.cli import main

    out = tmp_path / "sft.jsonl"
    assert main(["model", "sft", str(DATA), "--out", str(out), "--seed", "3"]) == 0
    written = [json.loads(line) for line in out.open()]
    recs = [json.loads(line) for line in DATA.open()]
    assert written == list(examples(recs, seed=3))
    assert "window" in capsys.readouterr().out


def test_full_fine_tuning_writes_a_whole_checkpoint_whose_weights_moved(
        sft_file: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    run = tmp_path / "run"
    _train(sft_file, run, tiny_model_dir, "--max-steps", "2", "--full",
           "--learning-rate", "1e-3")
    assert (run / "model" / "config.json").is_file() and not (run / "adapter").exists()
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(run / "model" / "model.safetensors"))
    assert before.keys() == after.keys()
    assert any(not (before[k] == after[k]).all() for k in before)


def test_a_run_whose_weights_go_nan_stops_there_and_writes_nothing_from_them(
        sft_file: Path, tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # an absurd learning rate overflows the weights within a few steps, as one NaN batch did
    # under bf16 on a GPU; the run must stop there, not anneal a NaN adapter and ship it
    run = tmp_path / "run"
    code = train_main([str(sft_file), "--out", str(run), "--base", str(tiny_model_dir),
                       "--max-tokens", "600", "--save-steps", "1", "--log-steps", "1",
                       "--warmup-steps", "0", "--grad-accum", "1", "--precision", "float32",
                       "--max-steps", "30", "--learning-rate", "1e38"])
    err = capsys.readouterr().err
    assert code == 2
    assert "training diverged at step" in err and "--learning-rate" in err
    step = int(err.split("training diverged at step ")[1].split(":")[0])
    assert 1 <= step < 30
    assert not (run / "adapter").exists()
    saved = sorted(int(p.name.split("-")[1]) for p in run.glob("checkpoint-*"))
    assert all(s < step for s in saved), (saved, step)
    import torch
    from safetensors.torch import load_file
    for s in saved:  # what was saved before it is finite
        weights = load_file(str(run / f"checkpoint-{s}" / "adapter_model.safetensors"))
        assert all(bool(torch.isfinite(w).all()) for w in weights.values())
