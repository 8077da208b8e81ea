"""``python -m fastapply.bench {drafting,merge,decoders,ttft,quality,served,...} ...``

Each subcommand lives in ``fastapply/bench/<name>.py`` and exposes
``add_arguments(parser)`` and ``run(args) -> dict``; the dict is printed as the last line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fastapply.bench.common import emit

SUBCOMMANDS = {
    "drafting": "drafter tokens/step against an oracle target, and per-step overhead",
    "merge": "exact-match rate of the deterministic merge per snippet format",
    "decoders": "greedy vs prompt lookup vs speculative edits on one model, side by side",
    "ttft": "time to first token against prompt size, float32 vs bfloat16 (CPU)",
    "dtype_parity": "float32 vs bfloat16 merges on validation windows: identical, exact, speed",
    "prompt_reuse": "time to first token of a second edit of one file, prompt KV reuse off/on",
    "quality": "model vs deterministic merge vs serving policies: served exact, wrong served",
    "served": "what the default server serves on a records file: exact, refused (why), wrong",
    "agreement": "would the witness agree? unsure merges teacher-forced, no time budget",
    "adapter": "exact-match rate of a trained LoRA adapter on validation examples",
    "refusals": "how soon a policy's refusal comes, against the model writing the whole file",
    "windows": "the windowed witness against the whole-file one, by file length, side by side",
    "serve": "Triton/gRPC overhead against in-process merges",
    "openai_front": "what the OpenAI/Morph/Relace HTTP front adds over direct gRPC",
    "http_guard": "what the HTTP guard adds per generate request over Triton's own port",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastapply.bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, help_text in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(f"fastapply.bench.{name}")
        except ModuleNotFoundError as exc:  # a benchmark whose extra is not installed
            if exc.name and exc.name.startswith("fastapply"):
                continue
            raise
        modules[name] = module
        p = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(p)
    args = parser.parse_args(argv)
    result = modules[args.command].run(args)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
