"""Would the witness agree? Each unsure merge's chosen reading, teacher-forced, no time budget.

The served witness (policy ``auto`` on the torch runtime) serves an unsure merge where the
model, decoding greedily, writes the merge's chosen reading exactly, every token at a
probability of at least the threshold. Under ``bench served`` whether it gets to decide
depends on the witness budget, and so on how busy the machine is. Here one forward pass
over prompt + reading + stop token tells the same without a clock: greedy decoding writes
the reading exactly when the model's argmax equals the reading's token at every answer
position and a stop token comes after it (the same tokenization of the reading; the
served witness compares text, which can also match another tokenization). So two models
compare on the same merges in any order, on a loaded machine too.

Per model: the unsure merges scored (prompt + answer at most ``--max-tokens``), those
whose chosen reading is the true file, and what the witness would serve: right, wrong,
and agreements under the threshold (refused).

    python -m fastapply.bench agreement --data agent-ours7.jsonl --also /tmp/model-wa2 \\
        --save rows.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapply.bench.common import (
    add_cpu_model_arguments,
    cpu_description,
    cpu_model,
    load_edits,
    print_table,
)


@dataclass(frozen=True)
class Agreement:
    """What greedy decoding does with one answer, teacher-forced."""

    #: Whether greedy decoding writes ``answer`` exactly (its last token a stop token).
    agrees: bool
    #: The lowest probability among the answer's tokens (the stop token: the argmax's).
    min_prob: float
    #: Index in the answer of the first token greedy decoding would write otherwise (-1).
    first_departure: int


def agreement(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int],
              stop_ids: Collection[int]) -> Agreement:
    """Teacher-force ``answer_ids`` (the reading's tokens, then one stop token) after
    ``prompt_ids``: one forward pass, logits for the answer's positions only."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=model.device)
    with torch.inference_mode():
        logits = model(input_ids=ids, logits_to_keep=len(answer_ids) + 1).logits[0, :-1]
    probs = torch.softmax(logits.float(), dim=-1)
    argmax = probs.argmax(dim=-1).tolist()
    body = list(answer_ids[:-1])
    token_probs = [float(probs[i, t]) for i, t in enumerate(body)]
    last = len(body)
    token_probs.append(float(probs[last, argmax[last]]))
    departure = next((i for i, t in enumerate(body) if argmax[i] != t), -1)
    if departure < 0 and argmax[last] not in stop_ids:
        departure = last
    return Agreement(departure < 0, min(token_probs), departure)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True,
                   help="JSONL of records: original, updated, lazy_snippet")
    add_cpu_model_arguments(p)
    p.add_argument("--also", type=Path, nargs="*", default=[],
                   help="more model dirs, scored on the same merges after --model")
    p.add_argument("--max-tokens", type=int, default=7000,
                   help="merges whose prompt + answer is longer are left out (default 7000)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="lowest token probability the witness serves at (default 0.5, "
                        "the shipped one)")
    p.add_argument("--limit", type=int, default=0, help="first N records (0: all)")
    p.add_argument("--save", type=Path, help="one JSON row per model and unsure merge")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fastapply.decoding import prompts, witness

    records = load_edits(args.data, args.limit or None)
    unsure = []  # (record, reading text) of every unsure merge
    for rec in records:
        if not rec.get("lazy_snippet"):
            continue
        reading = witness.deterministic_reading(rec["original"], rec["lazy_snippet"])
        if reading.text is not None and not reading.certain:
            unsure.append((rec, reading.text))
    rows: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    for model_dir in [cpu_model(args), *args.also]:
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        stop_ids = prompts.stop_token_ids(tok, model.generation_config.eos_token_id)
        end = tok.convert_tokens_to_ids("<|im_end|>")
        stop = end if end in stop_ids else min(stop_ids)
        n: dict[str, Any] = {"model": str(model_dir), "unsure": len(unsure), "scored": 0,
                             "chosen_right": 0, "served_right": 0, "served_wrong": 0,
                             "under_threshold": 0}
        for rec, text in unsure:
            prompt = prompts.build_prompt_ids(tok, prompts.KORTIX, rec["original"],
                                              rec["lazy_snippet"])
            answer = prompts.encode(tok, prompts.KORTIX.expected_output(text)) + [stop]
            if len(prompt) + len(answer) > args.max_tokens:
                continue
            got = agreement(model, prompt, answer, stop_ids)
            right = text == rec["updated"]
            served = got.agrees and got.min_prob >= args.threshold
            n["scored"] += 1
            n["chosen_right"] += right
            n["served_right"] += served and right
            n["served_wrong"] += served and not right
            n["under_threshold"] += got.agrees and not served
            rows.append({"model": str(model_dir), "id": rec.get("id"), "chosen_right": right,
                         "agrees": got.agrees, "min_prob": round(got.min_prob, 4),
                         "first_departure": got.first_departure,
                         "tokens": len(prompt) + len(answer)})
        figures.append(n)
    print_table(["model", "unsure", "scored", "chosen right", "served right", "served wrong",
                 "agreed under threshold"],
                [[Path(f["model"]).name, f["unsure"], f["scored"], f["chosen_right"],
                  f["served_right"], f["served_wrong"], f["under_threshold"]] for f in figures])
    if args.save:
        with args.save.open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(r) + "\n" for r in rows)
    return {"bench": "agreement", "data": str(args.data), "records": len(records),
            "threshold": args.threshold, "max_tokens": args.max_tokens, "models": figures,
            "cpu": cpu_description()}
