"""The ``fastapply`` command line.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status); this file only dispatches, so that a command's
heavy imports happen only when that command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("fastapply.demo", "start a server, send one real edit, show the diff and stats"),
    "serve": ("fastapply.server.cli", "run tritonserver with the fast_apply model"),
    "apply": ("fastapply.client.cli", "merge an edit snippet into a file through a server"),
    "build": ("fastapply.engine_build.cli", "LoRA merge -> FP8 -> TensorRT-LLM engine"),
    "loadtest": ("fastapply.loadtest.cli", "Locust load test against a server"),
    "data": ("fastapply.corpus.cli", "build edit corpora from local git history; split them"),
    "model": ("fastapply.model.cli", "the base model as a checkpoint; the default model; "
                                   "training examples (sft)"),
    "train": ("fastapply.model.train", "fine-tune the apply model (LoRA) on `model sft` examples"),
    "judge": ("fastapply.judge.cli", "the judge of the merge's readings: its data and training"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fastapply", description="Fast apply with speculative edits, served by Triton.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != chosen:
            continue  # only the chosen command's module is imported
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or "?"
            print(f"fastapply {name}: cannot import {missing}; install the extra it needs "
                  f"(see README.md)", file=sys.stderr)
            return 2
        module.add_arguments(p)
        modules[name] = module
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args))


if __name__ == "__main__":
    sys.exit(main())
