"""Exact-match rate of a trained LoRA adapter on validation examples, through the served
path: base + ``adapter`` merged into one checkpoint, each example merged in its own
prompt format by the service (torch runtime, speculative decoding, float32, policy
``model``: the model alone). Prints one line per key (style, format, all) and the figures,
and writes them to ``OUT/validation.json``.

    fastapply train sft-tune.jsonl --out run1 ...
    python -m fastapply.bench adapter run1/adapter --valid sft-valid.jsonl --limit 60 --out run1
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("adapter", type=Path, help="the LoRA adapter (`fastapply train`'s OUT/adapter)")
    p.add_argument("--valid", type=Path, required=True,
                   help="examples of the validation split (`fastapply model sft VALID`)")
    p.add_argument("--limit", type=int, default=60,
                   help="examples merged, a seeded sample over every repository (default 60)")
    p.add_argument("--base", type=Path, default=None,
                   help="base checkpoint (default: `fastapply model base`)")
    p.add_argument("--out", type=Path, default=None,
                   help="where validation.json goes (default: the adapter's run directory)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.model.base import base_checkpoint

    base = args.base or base_checkpoint()
    out = args.out or args.adapter.parent
    print(f"validation: {args.limit} examples of {args.valid}", flush=True)
    return evaluate(base, args.adapter, args.valid, args.limit, out)


def evaluate(base: Path, adapter: Path, examples_path: Path, limit: int,
             out: Path) -> dict[str, Any]:
    """Exact-match rate of base + ``adapter`` on ``limit`` examples (a seeded sample) of
    ``examples_path`` (from ``fastapply model sft`` on the validation split), each merged
    in its own prompt format through the served path (speculative decoding, float32,
    policy ``model``: the model alone). Prints one line per key and the figures."""
    from fastapply.model.default import merge_adapter
    from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

    merged = merge_adapter(base, adapter, out / "merged")
    services: dict[str, Any] = {}
    seen: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    t0 = time.monotonic()
    with examples_path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rows = random.Random(0).sample(rows, min(limit, len(rows)))  # every repository, seeded
    for ex in rows:
        if ex["format"] not in services:
            services[ex["format"]] = FastApplyService(ServiceConfig(
                runtime="torch", model_dir=str(merged), device="cpu", dtype="float32",
                prompt_format=ex["format"], policy="model"))
        try:
            got = services[ex["format"]].apply(ex["original"], ex["snippet"]).merged_code
        except InvalidRequest:
            got = None
        for key in (ex["style"], ex["format"], "all"):
            seen[key] += 1
            exact[key] += int(got == ex["updated"])
    figures = {"examples": seen["all"], "exact_rate": exact["all"] / max(1, seen["all"]),
               "exact_rate_by_key": {k: round(exact[k] / seen[k], 3) for k in sorted(seen)},
               "eval_s": round(time.monotonic() - t0, 1)}
    for key in sorted(seen):
        print(f"  {key:15s} {exact[key]:4d} / {seen[key]:<4d} exact", flush=True)
    (out / "validation.json").write_text(json.dumps(figures, indent=1) + "\n")
    shutil.rmtree(merged, ignore_errors=True)
    return figures
