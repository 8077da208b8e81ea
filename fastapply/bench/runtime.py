"""Greedy vs transformers' prompt lookup vs speculative edits, on a real model.

For each edit the four generators run back to back (interleaved, so machine noise hits
them alike) with the same prompt and token budget:

* ``greedy``: ``model.generate(do_sample=False)``, the reference;
* ``prompt_lookup``: ``model.generate(prompt_lookup_num_tokens=N)``, transformers' own;
* ``corpus``: our loop with drafts from the files (candidate merge, original, snippet);
* ``oracle``: our loop whose only source is the greedy output itself (the upper bound).

``lossless`` is true only when every output equals greedy's. Speedups are tokens/s
against greedy from the same run. With the tiny random model the corpus drafts are
mostly rejected: that run shows what speculation costs when it cannot help.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from fastapply.bench.common import load_edits, print_table

METHODS = ("greedy", "prompt_lookup", "corpus", "oracle")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of edits (default: shipped examples)")
    p.add_argument("--limit", type=int, default=5, help="number of edits (default 5)")
    p.add_argument("--max-lines", type=int, default=300,
                   help="skip files longer than this many lines (default 300)")
    p.add_argument("--format", choices=["lazy", "search_replace", "udiff"], default="lazy")
    p.add_argument("--model", type=Path, help="HF model dir (default: the tiny random model)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None)
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None)
    p.add_argument("--k", type=int, default=64, help="max draft length (default 64)")
    p.add_argument("--prompt-lookup-tokens", type=int, default=10,
                   help="transformers' prompt_lookup_num_tokens (default 10)")
    p.add_argument("--prompt-format", default="kortix")


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from fastapply.decoding import prompts
    from fastapply.decoding.runtimes.torch import TorchRuntime
    from fastapply.model.tiny import ensure_tiny_model

    model_dir = args.model or ensure_tiny_model()
    runtime = TorchRuntime(model_dir, device=args.device, dtype=args.dtype)
    tok = AutoTokenizer.from_pretrained(model_dir)
    fmt = prompts.get_format(args.prompt_format)
    stop_ids = prompts.stop_token_ids(tok, runtime.eos_token_id)
    model, device = runtime.model, runtime.device
    field = {"lazy": "lazy_snippet"}.get(args.format, args.format)

    edits = [r for r in load_edits(args.data)
             if len(r["original"].splitlines()) <= args.max_lines][: args.limit]
    if not edits:
        raise SystemExit("no edit fits --max-lines; raise it or pass other --data")

    def hf_generate(prompt: list[int], n: int, **kw: Any) -> list[int]:
        with torch.inference_mode():
            out = model.generate(torch.tensor([prompt], device=device), max_new_tokens=n,
                                 do_sample=False, eos_token_id=sorted(stop_ids),
                                 pad_token_id=tok.pad_token_id, **kw)
        ids = out[0, len(prompt):].tolist()
        # generate pads after EOS; cut at the first stop token, keeping it.
        stop = next((i for i, t in enumerate(ids) if t in stop_ids), None)
        return ids if stop is None else ids[: stop + 1]

    totals = {m: {"tokens": 0, "seconds": 0.0, "passes": 0} for m in METHODS}
    rows, lossless = [], True
    warm = edits[0]
    hf_generate(prompts.build_prompt_ids(tok, fmt, warm["original"], warm[field]), 8)
    for rec in edits:
        original, snippet = rec["original"], rec[field]
        budget = len(prompts.encode(tok, fmt.expected_output(rec["updated"]))) + 8
        request = prompts.build_request(tok, fmt, original, snippet, stop_ids=stop_ids,
                                        max_new_tokens=budget, max_draft_len=args.k)
        prompt = request.prompt_ids
        outputs: dict[str, list[int]] = {}
        for method in METHODS:
            _sync(device)
            t0 = time.perf_counter()
            if method == "greedy":
                ids, passes = hf_generate(prompt, budget), 0
            elif method == "prompt_lookup":
                ids, passes = hf_generate(
                    prompt, budget, prompt_lookup_num_tokens=args.prompt_lookup_tokens), 0
            else:
                if method == "oracle":  # the greedy output as the only source
                    request = dataclasses.replace(request, sources=[outputs["greedy"]])
                gen = runtime.generate(request)
                ids, passes = gen.token_ids, gen.stats.forward_passes
            _sync(device)
            seconds = time.perf_counter() - t0
            outputs[method] = ids
            totals[method]["tokens"] += len(ids)
            totals[method]["seconds"] += seconds
            totals[method]["passes"] += passes
        same = all(outputs[m] == outputs["greedy"] for m in METHODS)
        lossless &= same
        rows.append([rec["id"][:48], len(prompt), len(outputs["greedy"]),
                     "yes" if same else "NO"])

    print_table(["edit", "prompt_tokens", "output_tokens", "all equal greedy"], rows)
    print()
    tps = {m: totals[m]["tokens"] / totals[m]["seconds"] for m in METHODS}
    print_table(["method", "tokens", "seconds", "forward_passes", "tokens_per_s",
                 "speedup_vs_greedy"],
                [[m, totals[m]["tokens"], totals[m]["seconds"], totals[m]["passes"] or "-",
                  tps[m], tps[m] / tps["greedy"]] for m in METHODS])
    return {
        "model": str(model_dir), "device": device, "dtype": runtime.dtype,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "edits": len(edits), "k": args.k, "lossless": lossless,
        "greedy_tokens_per_s": tps["greedy"],
        "prompt_lookup_tokens_per_s": tps["prompt_lookup"],
        "corpus_tokens_per_s": tps["corpus"],
        "oracle_tokens_per_s": tps["oracle"],
        "prompt_lookup_speedup": tps["prompt_lookup"] / tps["greedy"],
        "corpus_speedup": tps["corpus"] / tps["greedy"],
        "oracle_speedup": tps["oracle"] / tps["greedy"],
    }
