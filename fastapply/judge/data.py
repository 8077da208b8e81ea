"""The judge's training data: every reading the merge builds for a record, labelled right
or wrong against the commit (``updated``).

Each records file is one corpus (its name and its repositories kept on every row, so the
judge is validated by repository). A record gives one merge per snippet: its
``lazy_snippet`` (agent-written in the agent sets, generated in the corpus) and, with
``--agent-styles N``, N snippets of the corpus' generated agent styles
(:data:`fastapply.corpus.agent_style.AGENT_STYLES`) drawn per record. A merge the
merge refuses has no reading and is counted, not written.

    fastapply judge data --records ../shared/data/agent-train.jsonl --corpus agent-train \\
        --out readings.jsonl
    fastapply judge data --records tune.jsonl --corpus tune --agent-styles 2 --out readings.jsonl

Rows are appended, one per reading: ``corpus``, ``repo``, ``id``, ``style``, ``merge`` (one
key per merge), ``lines``, ``label`` (1: the reading is the commit's file),
``certain``/``chosen`` and every feature of :data:`fastapply.judge.features.FEATURES`;
with ``--text``, also ``snippet`` and ``diff`` (the reading's change to the original).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def snippets(rec: dict[str, Any], agent_styles: int, rng: random.Random
             ) -> Iterator[tuple[str, str]]:
    """(style, snippet) of every merge a record gives (see the module docstring)."""
    if rec.get("lazy_snippet", "").strip():
        yield "lazy_snippet", rec["lazy_snippet"]
    if agent_styles:
        from fastapply.corpus.agent_style import AGENT_STYLES
        from fastapply.model.sft_data import snippet_of

        # not whole_file: a whole new file has one reading, the snippet itself
        for style in rng.sample([s for s in AGENT_STYLES if s != "whole_file"], agent_styles):
            snippet = snippet_of(style, rec["original"], rec["updated"], rec["language"],
                                 rec["path"], rng)
            if snippet.strip():
                yield style, snippet


def labelled(rec: dict[str, Any], corpus: str, style: str, snippet: str, text: bool = False
             ) -> tuple[list[dict[str, Any]], str]:
    """The rows of one merge and its outcome (certain_right, certain_wrong, unsure_chosen,
    unsure_rival, unsure_none, refused); ``text``: with the snippet and the reading's diff
    (what the language-model judge reads, :mod:`fastapply.judge.lm`)."""
    from fastapply.judge.readings import readings_of

    rs = readings_of(rec["original"], snippet)
    if not rs.readings:
        return [], "refused"
    key = f"{corpus}|{rec['id']}|{style}"
    rows = [{"corpus": corpus, "repo": rec["repo"], "id": rec["id"], "style": style,
             "merge": key, "lines": rec["original"].count("\n"),
             "label": int(r.text == rec["updated"]), **r.features} for r in rs.readings]
    if text:
        from fastapply.judge.lm import diff_of

        for row, r in zip(rows, rs.readings, strict=True):
            row.update(snippet=snippet, diff=diff_of(rec["original"], r.text))
    truth = next((k for k, r in enumerate(rs.readings) if r.text == rec["updated"]), None)
    if rs.certain:
        outcome = "certain_right" if truth == 0 else "certain_wrong"
    else:
        outcome = "unsure_none" if truth is None else \
            "unsure_chosen" if truth == 0 else "unsure_rival"
    return rows, outcome


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", type=Path, required=True, help="JSONL records")
    p.add_argument("--corpus", required=True, help="the corpus' name on every row")
    p.add_argument("--out", type=Path, required=True, help="JSONL rows, appended")
    p.add_argument("--agent-styles", type=int, default=0,
                   help="generated agent-style snippets drawn per record (default 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None, help="the first N records only")
    p.add_argument("--text", action="store_true",
                   help="keep the snippet and each reading's diff (for `judge lm`)")


def run(args: argparse.Namespace) -> int:
    from fastapply.examples import load_edits

    rng = random.Random(args.seed)
    outcomes: Counter[str] = Counter()
    readings = 0
    start = time.perf_counter()
    with args.out.open("a") as out:
        for n, rec in enumerate(load_edits(args.records, args.limit), 1):
            for style, snippet in snippets(rec, args.agent_styles, rng):
                rows, outcome = labelled(rec, args.corpus, style, snippet, args.text)
                outcomes[outcome] += 1
                readings += len(rows)
                out.writelines(json.dumps(r) + "\n" for r in rows)
            if n % 100 == 0:
                print(f"{n} records, {readings} readings, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    print(json.dumps({"corpus": args.corpus, "readings": readings, **outcomes}))
    return 0
