"""A language-model judge, measured beside the shipped trees: a LoRA sequence classifier
(``AutoModelForSequenceClassification`` + peft, the transformers ``Trainer``) that reads the
snippet and one reading's change to the original, and scores "this reading is what the
snippet means".

Its input is the edit, not the file (:func:`edit_ids`): the snippet, then the reading's
unified diff against the original (:func:`diff_of`, 3 lines of context), cut to
``--max-tokens`` with the diff given the larger share, so its cost follows the edit.

Validation is by repository, as the trees' (:mod:`fastapply.judge.train`): ``--folds``
``GroupKFold`` folds over repositories; each fold's adapter trains on the others (with
checkpoints; a run cut short resumes) and scores its held-out readings, written to
``DIR/fold-K/scores.jsonl``. Out-of-fold scores of every fold are then replayed through the
same policy and calibration as the trees and written to ``DIR/lm_scores.jsonl``, so that
they can also be fed to the trees as one more feature.

    fastapply judge data --records ../shared/data/agent-train.jsonl --corpus agent-train \\
        --text --out rows.jsonl
    fastapply judge lm rows.jsonl --base smollm2-135m --out /work/runs/lm-smol --folds 2
"""

from __future__ import annotations

import argparse
import difflib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: Default token budget of one input: snippet and diff together.
MAX_TOKENS = 320


def diff_of(original: str, reading: str) -> str:
    """The reading's change to the original: unified diff hunks, 3 lines of context,
    without the file header.

    >>> print(diff_of("a\\nb\\nc\\n", "a\\nB\\nc\\n"))
    @@ -1,3 +1,3 @@
     a
    -b
    +B
     c
    """
    lines = difflib.unified_diff(original.splitlines(), reading.splitlines(), n=3,
                                 lineterm="")
    return "\n".join(line for k, line in enumerate(lines) if k >= 2)


def edit_ids(tokenizer: Any, snippet: str, diff: str, max_tokens: int) -> list[int]:
    """The judge's input ids: ``snippet:`` and its head, ``change:`` and the diff's head,
    within ``max_tokens``; the diff keeps at least 60% of the budget when both are long."""
    head = tokenizer("snippet:\n", add_special_tokens=False)["input_ids"]
    mid = tokenizer("\nchange:\n", add_special_tokens=False)["input_ids"]
    s = tokenizer(snippet, add_special_tokens=False)["input_ids"]
    d = tokenizer(diff, add_special_tokens=False)["input_ids"]
    room = max_tokens - len(head) - len(mid)
    if len(s) + len(d) > room:
        keep_d = min(len(d), max(room - len(s), int(room * 0.6)))
        s, d = s[:room - keep_d], d[:keep_d]
    return [*head, *s, *mid, *d]


def _classifier(base: Path, tokenizer: Any) -> Any:
    """The base as a two-label sequence classifier (float32 weights; its score head new)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model: Any = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=2, dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model


def _fold_model(args: argparse.Namespace, base: Path, tokenizer: Any,
                fit_items: list[dict[str, Any]], fold_dir: Path) -> Any:
    """One fold's judge: its adapter trained on ``fit_items`` into ``fold_dir/adapter``
    (checkpoints in ``fold_dir``; a run cut short resumes from the last one), or loaded
    from there where an earlier run finished training it."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from fastapply.model.schedule import last_checkpoint
    from fastapply.model.train import cpu_has_bf16

    if (fold_dir / "adapter").exists():
        return PeftModel.from_pretrained(_classifier(base, tokenizer), str(fold_dir / "adapter"))
    if args.limit_fold_rows and len(fit_items) > args.limit_fold_rows:
        step = len(fit_items) / args.limit_fold_rows
        fit_items = [fit_items[int(j * step)] for j in range(args.limit_fold_rows)]
    model = get_peft_model(_classifier(base, tokenizer), LoraConfig(
        r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.05, task_type="SEQ_CLS",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                        "down_proj"]))
    targs = TrainingArguments(
        output_dir=str(fold_dir), per_device_train_batch_size=args.batch_size,
        num_train_epochs=args.epochs, learning_rate=args.learning_rate, warmup_steps=10,
        lr_scheduler_type="cosine", logging_steps=5, save_steps=20, save_total_limit=1,
        seed=0, data_seed=0, report_to=[], disable_tqdm=True, use_cpu=True,
        bf16=cpu_has_bf16(), dataloader_num_workers=0,
        train_sampling_strategy="group_by_length")
    trainer = Trainer(model=model, args=targs, train_dataset=fit_items,
                      data_collator=DataCollatorWithPadding(tokenizer))
    resume = last_checkpoint(fold_dir)
    print(f"{fold_dir.name}: training on {len(fit_items)} readings"
          + (f", resuming from {resume.name}" if resume else ""), flush=True)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    model.save_pretrained(str(fold_dir / "adapter"))
    return model


def _scores(model: Any, tokenizer: Any, items: list[dict[str, Any]], batch: int
            ) -> list[float]:
    """P(right) of each item, in order, batched by length (bf16 autocast where the CPU
    has it, as in training)."""
    import torch
    from transformers import DataCollatorWithPadding

    from fastapply.model.train import cpu_has_bf16

    model.eval()
    pad = DataCollatorWithPadding(tokenizer)
    order = sorted(range(len(items)), key=lambda k: len(items[k]["input_ids"]))
    out = [0.0] * len(items)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu_has_bf16()):
        for start in range(0, len(order), batch):
            ks = order[start:start + batch]
            inputs = pad([{"input_ids": items[k]["input_ids"]} for k in ks])
            logits = model(**inputs).logits.float()
            for j, p in zip(ks, torch.softmax(logits, -1)[:, 1].tolist(), strict=True):
                out[j] = float(p)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", type=Path, nargs="+",
                   help="JSONL rows of `fastapply judge data --text`")
    p.add_argument("--base", default="smollm2-135m", help="a base name or checkpoint dir")
    p.add_argument("--out", type=Path, required=True, help="run directory (resumes)")
    p.add_argument("--folds", type=int, default=2, help="repository folds (default 2)")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--unsure-only", action="store_true",
                   help="train and score the unsure merges' readings only (a certain "
                        "merge then scores 1: served, as with no veto)")
    p.add_argument("--max-wrong", type=float, default=0.005)
    p.add_argument("--limit-fold-rows", type=int, default=None,
                   help="train each fold on at most N readings (drawn evenly)")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold
    from transformers import AutoTokenizer

    from fastapply.judge.train import calibrate, load_rows, merges, replay
    from fastapply.model.base import resolve_base

    start = time.perf_counter()
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    base = resolve_base(args.base, quiet=False)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows = load_rows(args.rows)
    missing = [r["merge"] for r in rows if "diff" not in r]
    if missing:
        raise SystemExit(f"{len(missing)} rows have no text (first: {missing[0]}): "
                         "make them with `fastapply judge data --text`")
    judged = [k for k, r in enumerate(rows) if not (args.unsure_only and r["certain"])]
    items: list[dict[str, Any]] = [
        {"input_ids": edit_ids(tokenizer, rows[k]["snippet"], rows[k]["diff"], args.max_tokens),
         "labels": int(rows[k]["label"])} for k in judged]
    repos = np.array([rows[k]["repo"] for k in judged])
    print(f"{len(items)} readings to judge, {sum(len(i['input_ids']) for i in items)} "
          f"tokens, {len(set(repos))} repositories, base {base}", flush=True)
    scores = np.ones(len(rows))
    folds = GroupKFold(n_splits=args.folds).split(items, groups=repos)
    for fold, (fit, held) in enumerate(folds):
        fold_dir = args.out / f"fold-{fold}"
        done = fold_dir / "scores.jsonl"
        if not done.exists():
            model = _fold_model(args, base, tokenizer, [items[k] for k in fit], fold_dir)
            held_scores = _scores(model, tokenizer, [items[k] for k in held], args.batch_size)
            with done.open("w") as f:
                for k, s in zip(held, held_scores, strict=True):
                    r = rows[judged[k]]
                    f.write(json.dumps({"merge": r["merge"], "reading_index":
                                        r["reading_index"], "score": s}) + "\n")
            print(f"fold {fold}: scored {len(held)} held-out readings, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        by = {(s["merge"], s["reading_index"]): s["score"]
              for s in map(json.loads, done.read_text().splitlines())}
        for k in held:
            r = rows[judged[k]]
            scores[judged[k]] = by[(r["merge"], r["reading_index"])]
    y = np.array([r["label"] for r in rows])
    unsure = np.array([not r["certain"] for r in rows])
    groups = merges(rows, scores)
    chosen = calibrate(groups, args.max_wrong)  # accept None: no threshold is safe
    at_half = replay(groups, 0.5, 0.0)
    report = {
        "base": str(base), "readings": len(items), "folds_by_repository": args.folds,
        "auc_unsure_readings": round(float(roc_auc_score(y[unsure], scores[unsure])), 4),
        "accept": chosen["accept"], "veto": chosen["veto"],
        "policy_out_of_fold": chosen["figures"], "at_0.5": dict(at_half),
        "counts": dict(Counter(r["corpus"] for r in rows)),
        "seconds": round(time.perf_counter() - start)}
    if not args.unsure_only:
        report["auc_all_readings"] = round(float(roc_auc_score(y, scores)), 4)
    with (args.out / "lm_scores.jsonl").open("w") as f:
        for r, s in zip(rows, scores, strict=True):
            f.write(json.dumps({"merge": r["merge"], "reading_index": r["reading_index"],
                                "lm_score": float(s)}) + "\n")
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0
