"""Supervised fine-tuning examples from edit records (``fastapply data sft``).

Each record of a corpus (see :mod:`fastapply.corpus`) gives one example: a crop of the
file around some of its changes (:func:`~fastapply.corpus.agent_style.window`), or the
whole file when it is short; a snippet of that change in one of :data:`STYLES`; and a
prompt format (kortix or morph). The answer is the true updated crop, wrapped as the
format's model writes it (``<updated-code>...</updated-code>`` for kortix). Everything
is drawn from one ``random.Random(seed)`` in record order, so the same corpus and seed
give the same file, byte for byte.

Use the tune split only: the validation split and the shared corpus are for measuring.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapply.corpus.agent_style import agent_snippet, window
from fastapply.corpus.snippets import lazy_parts, search_replace, udiff

#: snippet style -> weight in the mix. ``lazy`` is the corpus generator's textbook style,
#: the four after it are the agent styles, then the two exact notations.
STYLES: dict[str, float] = {
    "lazy": 0.24, "signature": 0.16, "named": 0.10, "whole_block": 0.06, "whole_file": 0.04,
    "search_replace": 0.20, "udiff": 0.20,
}
#: prompt format -> weight (kortix is the served default).
FORMATS: dict[str, float] = {"kortix": 0.75, "morph": 0.25}


@dataclass(frozen=True)
class SftConfig:
    """What one example may look like."""

    #: chance that a short file is shown whole instead of cropped.
    whole_file_chance: float = 0.08
    #: files of at most this many lines may be shown whole.
    whole_file_lines: int = 80
    #: a crop holds the changes plus this many lines each side (drawn uniformly).
    margin: tuple[int, int] = (2, 12)
    #: crops longer than this many lines (after the change) are skipped.
    max_lines: int = 50
    #: examples whose original + snippet + answer pass this many characters are skipped.
    max_chars: int = 7000


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


def snippet_of(style: str, original: str, updated: str, language: str, path: str,
               rng: random.Random) -> str:
    """The snippet of one style for a true edit, or "" where the style does not apply."""
    if style == "lazy":
        snippet, expanded = lazy_parts(original, updated, language, rng)
        return snippet if expanded == updated else ""
    if style == "search_replace":
        return search_replace(original, updated) or ""
    if style == "udiff":
        return udiff(original, updated, path)
    return agent_snippet(original, updated, language, style, rng)


def examples(records: Iterable[dict[str, Any]], seed: int = 0,
             config: SftConfig = SftConfig()) -> Iterator[dict[str, Any]]:
    """One example per usable record: ``id``, ``repo``, ``language``, ``style``,
    ``format``, ``original``, ``snippet``, ``updated`` (the true crop), and the source's
    ``license`` where it names one."""
    rng = random.Random(seed)
    for rec in records:
        original, updated = rec["original"], rec["updated"]
        whole = (original.count("\n") <= config.whole_file_lines
                 and rng.random() < config.whole_file_chance)
        if not whole:
            crop = window(original, updated, rng, config.max_lines, config.margin)
            if crop is None:
                continue
            original, updated = crop
        style = _pick(rng, STYLES)
        fmt = _pick(rng, FORMATS)
        snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
        if not snippet.strip():
            style = "lazy"  # the textbook style applies to every change
            snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
        if not snippet.strip() or len(original) + len(snippet) + len(updated) > config.max_chars:
            continue
        example: dict[str, Any] = {
            "id": rec["id"], "repo": rec["repo"], "language": rec["language"],
            "style": style, "format": fmt, "whole_file": whole,
            "original": original, "snippet": snippet, "updated": updated}
        if "license" in rec:  # a window of a file stays under its repository's licence
            example["license"] = rec["license"]
        yield example


def write_examples(records: list[dict[str, Any]], out: Path, seed: int = 0,
                   config: SftConfig = SftConfig(), variants: int = 1) -> Counter[str]:
    """Write :func:`examples` to ``out`` (JSONL); return the count per style. With
    ``variants`` > 1 every record is drawn again with seeds ``seed + 1``, ...: other
    windows, styles and formats of the same changes."""
    counts: Counter[str] = Counter()
    with out.open("w", encoding="utf-8") as f:
        for k in range(variants):
            for ex in examples(records, seed + k, config):
                counts[ex["style"]] += 1
                f.write(json.dumps(ex, ensure_ascii=False) + "\n")
    return counts
