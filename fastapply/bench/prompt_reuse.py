"""Time to first token of a second edit of one file, with and without prompt KV reuse.

Agents send several edits in a row to one file. For each record of ``--data`` (whole
files: ``valid.jsonl``), a first edit (the file, its lazy snippet) runs on the torch
runtime with reuse on; then each second request below is timed on that runtime (its
prompt cache holding the first edit's prompt, and the earlier second requests', which
share no more with the next one than the first does) and on a runtime with reuse off,
taking turns:

* ``same_file``: the same file, another snippet (the record's SEARCH/REPLACE blocks);
* ``edited_file``: the file as the first edit left it (``updated``), another snippet:
  what an agent sends next. It shares the prompt up to the first changed line;
* ``other_file``: the first edit of the next record (another file): only the system
  turn and the instructions are shared; it shows what reuse costs when it cannot help.

The timed requests have a budget of one token (the prompt pass); ``ttft_ms`` is the
runtime's own ``Stats.ttft_ms``, ``reused_pct`` the share of prompt tokens reused.

    python -m fastapply.bench prompt_reuse --data /work/data/valid.jsonl --limit 20
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path
from typing import Any

from fastapply.bench.common import (
    add_cpu_model_arguments,
    cpu_description,
    cpu_model,
    load_edits,
    print_table,
    spread_over_repos,
)

CASES = ("same_file", "edited_file", "other_file")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of whole-file edits (default: shipped)")
    p.add_argument("--limit", type=int, default=20, help="records (default 20)")
    p.add_argument("--max-prompt-tokens", type=int, default=4000,
                   help="skip records whose prompt is longer (default 4000)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    add_cpu_model_arguments(p)
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from fastapply.decoding import prompts
    from fastapply.decoding.runtimes.torch import TorchRuntime

    model = cpu_model(args)
    reuse = TorchRuntime(model, device="cpu", dtype=args.dtype)
    plain = TorchRuntime(model, device="cpu", dtype=args.dtype, prompt_cache_mb=0)
    assert reuse.prompt_cache is not None, "this model's cache cannot be reused"
    tok = AutoTokenizer.from_pretrained(model)
    stop = prompts.stop_token_ids(tok, reuse.eos_token_id)

    def req(original: str, snippet: str) -> Any:
        return prompts.build_request(tok, prompts.KORTIX, original, snippet, stop_ids=stop,
                                     max_new_tokens=1, max_draft_len=0)

    records = []
    for rec in spread_over_repos(load_edits(args.data), 10**9, args.seed):
        if len(req(rec["original"], rec["lazy_snippet"]).prompt_ids) <= args.max_prompt_tokens \
                and len(req(rec["updated"], rec["search_replace"]).prompt_ids) \
                <= args.max_prompt_tokens:
            records.append(rec)
        if len(records) == args.limit + 1:
            break
    if len(records) < 2:
        raise SystemExit("bench prompt_reuse: fewer than 2 records fit --max-prompt-tokens")

    ttft: dict[tuple[str, str], list[float]] = {(c, m): [] for c in CASES
                                                for m in ("off", "on")}
    reused: dict[str, list[float]] = {c: [] for c in CASES}
    tokens: dict[str, list[int]] = {c: [] for c in CASES}
    plain.generate(req(records[0]["original"], records[0]["lazy_snippet"]))  # warm-up
    for rec, nxt in itertools.pairwise(records):
        first = req(rec["original"], rec["lazy_snippet"])
        second = {"same_file": req(rec["original"], rec["search_replace"]),
                  "edited_file": req(rec["updated"], rec["search_replace"]),
                  "other_file": req(nxt["original"], nxt["lazy_snippet"])}
        assert reuse.prompt_cache is not None
        reuse.prompt_cache.clear()
        reuse.generate(first)  # the first edit, into the cache
        for case in CASES:  # each shares with the others no more than with the first edit
            on = reuse.generate(second[case])
            off = plain.generate(second[case])
            if on.token_ids != off.token_ids:
                raise SystemExit(f"bench prompt_reuse: {rec['id']} {case}: the first token "
                                 f"differs with reuse")
            ttft[case, "on"].append(on.stats.ttft_ms)
            ttft[case, "off"].append(off.stats.ttft_ms)
            reused[case].append(on.stats.reused_prompt_tokens / on.stats.prompt_tokens)
            tokens[case].append(on.stats.prompt_tokens)

    rows, out = [], {}
    for case in CASES:
        off_ms, on_ms = statistics.median(ttft[case, "off"]), statistics.median(ttft[case, "on"])
        ratios = [a / b for a, b in zip(ttft[case, "off"], ttft[case, "on"], strict=True)]
        out[case] = {"prompt_tokens_median": statistics.median(tokens[case]),
                     "reused_pct_mean": 100 * statistics.mean(reused[case]),
                     "ttft_ms_off_median": off_ms, "ttft_ms_on_median": on_ms,
                     "speedup_median": statistics.median(ratios)}
        rows.append([case, round(statistics.median(tokens[case])),
                     100 * statistics.mean(reused[case]), off_ms, on_ms,
                     statistics.median(ratios)])
    cpu = cpu_description()
    print(f"cpu: {cpu['cpu_model']}, {cpu['logical_cpus']} logical CPUs, torch threads "
          f"{cpu['torch_threads']}; {len(records) - 1} records, {args.dtype}")
    print_table(["second_edit", "prompt_tokens", "reused_pct", "ttft_ms_off", "ttft_ms_on",
                 "speedup"], rows)
    return {"bench": "prompt_reuse", "model": str(model), "dtype": args.dtype,
            "records": len(records) - 1, "cases": out, **cpu}
