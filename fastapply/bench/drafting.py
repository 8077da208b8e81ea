"""Drafters against an oracle target: tokens per step and per-step overhead.

The oracle model's output is the tokenised ``updated`` file; prefill yields its first
token, then a step accepts the matching draft prefix plus one token (bound: K + 1 tokens
per step). Drafters:

* ``speculative_edits``: ours, sources = candidate merge, original, snippet;
* ``prompt_lookup``: n-gram lookup in prompt (original + snippet) + output, first
  occurrence, K fixed (vLLM / TRT-LLM / transformers);
* ``original_cursor``: one cursor over the original file only, K fixed.

``step_overhead_us_p50`` is the median wall time of one ``propose`` call.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapply.bench.common import load_edits, percentile, print_table

#: Snippet field of an edit record, per ``--format``.
FIELDS = {"lazy": "lazy_snippet", "search_replace": "search_replace", "udiff": "udiff"}
#: Drafters compared, in table order.
NAMES = ("speculative_edits", "prompt_lookup", "original_cursor")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of edits (default: shipped examples)")
    p.add_argument("--format", choices=sorted(FIELDS), default="lazy")
    p.add_argument("--k", type=int, default=64, help="max draft length K (default 64)")
    p.add_argument("--tokenizer", type=Path,
                   help="directory with tokenizer.json (default: the tiny model's)")
    p.add_argument("--limit", type=int, help="only the first N edits")


def candidate_merger() -> Callable[[str, str], str | None]:
    """``merge(original, snippet) -> candidate text`` (None when the snippet is refused).

    Falls back to no candidate, with a warning, when :mod:`fastapply.merge` cannot be
    imported: the numbers then measure the original and snippet sources only.
    """
    try:
        from fastapply.merge import apply_snippet
        from fastapply.merge.edits import EditError
    except ImportError as exc:
        print(f"warning: no candidate source ({exc}); speculative_edits drafts from the "
              "original and the snippet only", file=sys.stderr)
        return lambda original, snippet: None

    def merge(original: str, snippet: str) -> str | None:
        try:
            return apply_snippet(original, snippet).text
        except EditError:  # counted in the result as candidate_errors
            return None

    return merge


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from fastapply.bench.baselines import OriginalCursorDrafter, PromptLookupDrafter, simulate
    from fastapply.decoding.drafting import Drafter, SpeculativeEditsDrafter

    if args.tokenizer is None:
        from fastapply.model.tiny import ensure_tiny_model

        args.tokenizer = ensure_tiny_model()
    tok = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))

    def enc(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False).ids)

    k, field = args.k, FIELDS[args.format]
    merge = candidate_merger()
    edits = load_edits(args.data, args.limit)
    steps, drafted = dict.fromkeys(NAMES, 0), dict.fromkeys(NAMES, 0)
    times: dict[str, list[int]] = {n: [] for n in NAMES}
    target_tokens = candidate_errors = 0
    for rec in edits:
        target = enc(rec["updated"])
        original, snippet = enc(rec["original"]), enc(rec[field])
        candidate_text = merge(rec["original"], rec[field])
        candidate_errors += candidate_text is None
        # as fastapply.service does: a refused snippet leaves two sources
        sources = ([enc(candidate_text)] if candidate_text is not None else []) + [
            original, snippet]
        drafters: dict[str, Drafter] = {
            "speculative_edits": SpeculativeEditsDrafter(sources, max_k=k),
            "prompt_lookup": PromptLookupDrafter(original + snippet, max_k=k),
            "original_cursor": OriginalCursorDrafter(original, max_k=k),
        }
        target_tokens += len(target)
        for name, drafter in drafters.items():
            sim = simulate(drafter, target, k)
            steps[name] += sim.steps
            drafted[name] += sim.drafted_tokens
            times[name].extend(sim.propose_ns)

    result: dict[str, Any] = {
        "k": k, "format": args.format, "edits": len(edits), "target_tokens": target_tokens,
        "bound_tokens_per_step": k + 1, "candidate_errors": candidate_errors, "drafters": {},
    }
    rows = []
    for name in NAMES:
        tps = target_tokens / steps[name] if steps[name] else 0.0
        p50_us = percentile(times[name], 50) / 1e3
        # each step (prefill included) yields one token of its own; the rest were drafted
        accepted = target_tokens - steps[name]
        acceptance = accepted / drafted[name] if drafted[name] else 0.0
        result["drafters"][name] = {"steps": steps[name], "tokens_per_step": tps,
                                    "step_overhead_us_p50": p50_us,
                                    "draft_acceptance_rate": acceptance}
        rows.append([name, steps[name], tps, tps / (k + 1), acceptance, p50_us])
    print_table(["drafter", "steps", "tokens_per_step", "fraction_of_bound",
                 "draft_acceptance_rate", "step_overhead_us_p50"], rows)
    return result
