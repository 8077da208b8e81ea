"""Time to first token against prompt size, float32 against bfloat16 (torch runtime).

Files of ``--data`` (whole files: ``valid.jsonl``) are cut to their first N lines for
each N of ``--lines``; each cut file and a short lazy snippet (its last lines under an
elision marker) make one kortix prompt. Every prompt runs through the torch runtime's
own path (``runtime.generate`` with a budget of one token: the prefill pass and its
argmax) once per dtype, the dtypes taking turns on the same prompt, ``--repeats`` times
(after one warm-up round on the smallest prompts). Prompts that do not fit the model's
context are skipped and counted.

``ttft_ms`` is the runtime's own ``Stats.ttft_ms`` (session start -> first token);
``prefill_tokens_per_s`` is prompt tokens / ttft. The table shows medians per size.

    python -m fastapply.bench ttft --data /work/data/valid.jsonl --lines 25,50,100,200,400,800
"""

from __future__ import annotations

import argparse
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of whole-file edits (default: shipped)")
    p.add_argument("--lines", default="25,50,100,200,400,800",
                   help="file sizes in lines, comma-separated")
    p.add_argument("--files", type=int, default=2, help="files per size (default 2)")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds (default 3)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--seed", type=int, default=0)
    add_cpu_model_arguments(p)


def cut_prompt(original: str, lines: int) -> tuple[str, str]:
    """(the file's first ``lines`` lines, a lazy snippet that edits its last line).

    >>> cut_prompt("a\\nb\\nc\\n", 2)
    ('a\\nb\\n', '// ... existing code ...\\nb  // edited\\n')
    """
    kept = original.splitlines(keepends=True)[:lines]
    text = "".join(kept)
    last = kept[-1].rstrip("\r\n") if kept else ""
    return text, f"// ... existing code ...\n{last}  // edited\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from fastapply.decoding import prompts
    from fastapply.decoding.runtimes.torch import TorchRuntime
    from fastapply.decoding.speculate import ContextLimitError

    model = cpu_model(args)
    dtypes = args.dtypes.split(",")
    runtimes = {d: TorchRuntime(model, device="cpu", dtype=d, prompt_cache_mb=0)
                for d in dtypes}
    tok = AutoTokenizer.from_pretrained(model)
    fmt = prompts.KORTIX
    stop_ids = prompts.stop_token_ids(tok, runtimes[dtypes[0]].eos_token_id)
    limit = runtimes[dtypes[0]].context_limit
    records = load_edits(args.data)

    sizes = [int(n) for n in args.lines.split(",")]
    prompts_by_size: dict[int, list[Any]] = {}
    skipped = 0
    for n in sizes:
        long_enough = [r for r in records if r["original"].count("\n") >= n]
        chosen = []
        for rec in spread_over_repos(long_enough, len(long_enough), args.seed):
            text, snippet = cut_prompt(rec["original"], n)
            request = prompts.build_request(tok, fmt, text, snippet, stop_ids=stop_ids,
                                            max_new_tokens=1, max_draft_len=0)
            if len(request.prompt_ids) >= limit:
                skipped += 1
                continue
            chosen.append(request)
            if len(chosen) == args.files:
                break
        if chosen:
            prompts_by_size[n] = chosen

    def ttft_ms(dtype: str, request: Any) -> float:
        try:
            return float(runtimes[dtype].generate(request).stats.ttft_ms)
        except ContextLimitError:  # measured above; kept for safety
            return float("nan")

    for request in prompts_by_size[min(prompts_by_size)]:  # warm-up
        for d in dtypes:
            ttft_ms(d, request)
    times: dict[tuple[int, str], list[float]] = {(n, d): [] for n in prompts_by_size
                                                  for d in dtypes}
    for _ in range(args.repeats):
        for n, requests in prompts_by_size.items():
            for request in requests:
                for d in dtypes:  # interleaved: every dtype sees the same load
                    times[n, d].append(ttft_ms(d, request))

    rows, sizes_out = [], []
    for n, requests in prompts_by_size.items():
        tokens = statistics.mean(len(r.prompt_ids) for r in requests)
        entry: dict[str, Any] = {"lines": n, "prompt_tokens": round(tokens), "prompts":
                                 len(requests)}
        row: list[Any] = [n, round(tokens)]
        for d in dtypes:
            ms = statistics.median(times[n, d])
            entry[f"{d}_ttft_ms"] = ms
            entry[f"{d}_prefill_tokens_per_s"] = tokens / ms * 1e3
            row += [ms, tokens / ms * 1e3]
        if len(dtypes) == 2:
            ratio = entry[f"{dtypes[0]}_ttft_ms"] / entry[f"{dtypes[1]}_ttft_ms"]
            entry[f"{dtypes[1]}_speedup"] = ratio
            row.append(ratio)
        rows.append(row)
        sizes_out.append(entry)
    headers = ["lines", "prompt_tokens"]
    for d in dtypes:
        headers += [f"{d}_ttft_ms", f"{d}_tokens_per_s"]
    if len(dtypes) == 2:
        headers.append(f"{dtypes[1]}_speedup")
    cpu = cpu_description()
    print(f"cpu: {cpu['cpu_model']}, {cpu['logical_cpus']} logical CPUs, torch threads "
          f"{cpu['torch_threads']}, flags {cpu['cpu_flags']}")
    print_table(headers, rows)
    return {"bench": "ttft", "model": str(model), "repeats": args.repeats,
            "skipped_over_context": skipped, "sizes": sizes_out, **cpu}
