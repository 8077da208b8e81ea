"""``fastapply judge``: the judge's training data (``data``) and its training (``train``)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from fastapply.judge import data, train

    sub = p.add_subparsers(dest="judge_command", required=True, metavar="STEP")
    for name, module, help_text in (
            ("data", data, "label every reading the merge builds for a records file"),
            ("train", train, "train the judge on labelled readings, validated by repository")):
        step = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(step)
        step.set_defaults(judge_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args.judge_run(args))
