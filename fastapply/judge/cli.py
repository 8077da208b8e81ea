"""``fastapply judge``: the judge's training data (``data``), its training (``train``)
and the language-model judge measured beside it (``lm``)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from fastapply.judge import data, lm, train

    sub = p.add_subparsers(dest="judge_command", required=True, metavar="STEP")
    for name, module, help_text in (
            ("data", data, "label every reading the merge builds for a records file"),
            ("train", train, "train the judge on labelled readings, validated by repository"),
            ("lm", lm, "a LoRA language-model judge, validated by repository (measured, "
                       "not shipped)")):
        step = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(step)
        step.set_defaults(judge_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args.judge_run(args))
