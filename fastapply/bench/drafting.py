"""Drafters against an oracle target: tokens per step and per-step overhead.

The oracle model's output is the tokenised ``updated`` file; a step accepts the matching
draft prefix plus one token (bound: K + 1 tokens per step). Drafters:

* ``speculative_edits``: ours, sources = candidate merge, original, snippet;
* ``prompt_lookup``: n-gram lookup in prompt + output (vLLM / TRT-LLM / transformers);
* ``original_cursor``: one cursor over the original file only.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from fastapply.bench.common import load_edits, print_table

FIELDS = {"lazy": "lazy_snippet", "search_replace": "search_replace", "udiff": "udiff"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of edits (default: shipped examples)")
    p.add_argument("--format", choices=sorted(FIELDS), default="lazy")
    p.add_argument("--k", type=int, default=64, help="max draft length K (default 64)")
    p.add_argument("--tokenizer", type=Path,
                   help="directory with tokenizer.json (default: the tiny model's)")
    p.add_argument("--limit", type=int, help="only the first N edits")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from fastapply.drafting import (
        Drafter,
        OriginalCursorDrafter,
        PromptLookupDrafter,
        SpeculativeEditsDrafter,
        simulate,
    )
    from fastapply.service import draft_texts

    if args.tokenizer is None:
        from fastapply.tinymodel import ensure_tiny_model

        args.tokenizer = ensure_tiny_model()
    tok = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))

    def enc(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False).ids)

    k, field = args.k, FIELDS[args.format]
    edits = load_edits(args.data, args.limit)
    names = ("speculative_edits", "prompt_lookup", "original_cursor")
    steps = dict.fromkeys(names, 0)
    times: dict[str, list[int]] = {n: [] for n in names}
    target_tokens = 0
    for rec in edits:
        target = enc(rec["updated"])
        original, snippet = enc(rec["original"]), enc(rec[field])
        sources = [enc(t) for t in draft_texts(rec["original"], rec[field])]
        drafters: dict[str, Drafter] = {
            "speculative_edits": SpeculativeEditsDrafter(sources, max_k=k),
            "prompt_lookup": PromptLookupDrafter(original + snippet, max_k=k),
            "original_cursor": OriginalCursorDrafter(original, max_k=k),
        }
        target_tokens += len(target)
        for name, drafter in drafters.items():
            sim = simulate(drafter, target, k)
            steps[name] += sim.steps
            times[name].extend(sim.propose_ns)

    result: dict[str, Any] = {
        "k": k, "format": args.format, "edits": len(edits), "target_tokens": target_tokens,
        "bound_tokens_per_step": k + 1, "drafters": {},
    }
    rows = []
    for name in names:
        tps = target_tokens / steps[name] if steps[name] else 0.0
        p50_us = statistics.median(times[name]) / 1e3 if times[name] else 0.0
        result["drafters"][name] = {"steps": steps[name], "tokens_per_step": tps,
                                    "step_overhead_us_p50": p50_us}
        rows.append([name, steps[name], tps, tps / (k + 1), p50_us])
    print_table(["drafter", "steps", "tokens_per_step", "fraction_of_bound",
                 "step_overhead_us_p50"], rows)
    return result
