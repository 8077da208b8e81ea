"""Supervised fine-tuning examples from edit records (``fastapply model sft``).

Each record of a corpus (see :mod:`fastapply.corpus`) gives one example: a crop of the
file around some of its changes (:func:`~fastapply.corpus.crop.window`), or the
whole file (up to :attr:`SftConfig.whole_file_lines`, about the longest file whose prompt
and answer fit the model's 8,192-token context); a snippet of that change in one of
:data:`STYLES`; and a prompt format (kortix or morph). The answer is the true updated crop
(or file), wrapped as the format's model writes it (``<updated-code>...</updated-code>``
for kortix). Everything
is drawn from one ``random.Random(seed)`` in record order, so the same corpus and seed
give the same file, byte for byte.

Use the tune split only: the validation split and the shared corpus are for measuring.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapply.corpus.agent_style import agent_snippet
from fastapply.corpus.crop import window
from fastapply.corpus.snippets import lazy_parts, search_replace, udiff

#: snippet style -> weight in the mix. ``lazy`` is the corpus generator's textbook style,
#: the nine after it are the agent styles (:data:`~fastapply.corpus.agent_style.AGENT_STYLES`),
#: then the two exact notations. A style that does not apply to a change falls back to lazy.
STYLES: dict[str, float] = {
    "lazy": 0.18, "signature": 0.10, "named": 0.08, "whole_block": 0.04, "whole_file": 0.03,
    "removed": 0.06, "blank_after_marker": 0.05, "no_doc": 0.03, "in_place": 0.05,
    "one_anchor": 0.05, "search_replace": 0.17, "udiff": 0.16,
}
#: prompt format -> weight (kortix is the served default).
FORMATS: dict[str, float] = {"kortix": 0.75, "morph": 0.25}


@dataclass(frozen=True)
class SftConfig:
    """What one example may look like."""

    #: chance that a file of at most ``whole_file_lines`` is shown whole instead of cropped.
    #: The served unit is a whole file, where a marker stands for hundreds of lines: with
    #: this share most answer tokens come from whole files (:func:`mix` reports it).
    whole_file_chance: float = 0.5
    #: files of at most this many lines may be shown whole (~300 lines of code fill the
    #: 8,192-token context with prompt and answer).
    whole_file_lines: int = 300
    #: records whose file has fewer lines are skipped (a whole-file-only set: 81, say).
    min_lines: int = 0
    #: only whole files: a record that cannot be shown whole is skipped.
    whole_only: bool = False
    #: a crop holds the changes plus this many lines each side (drawn uniformly).
    margin: tuple[int, int] = (2, 12)
    #: crops longer than this many lines (after the change) are skipped.
    max_lines: int = 50
    #: examples whose original + snippet + answer pass this many characters are skipped
    #: (the trainer's ``--max-tokens`` is the exact limit).
    max_chars: int = 32000
    #: where the drawn style does not apply, other crops of the record tried for it
    #: before the textbook style stands in (agent styles that need one changed line or
    #: one removal apply to few whole files).
    retries: int = 0


def _example(rec: dict[str, Any], style: str, fmt: str, whole: bool, original: str,
             snippet: str, updated: str) -> dict[str, Any]:
    """One training example of ``rec`` (its crop or whole file, snippet and answer)."""
    example: dict[str, Any] = {
        "id": rec["id"], "repo": rec["repo"], "language": rec["language"],
        "style": style, "format": fmt, "whole_file": whole,
        "original": original, "snippet": snippet, "updated": updated}
    if "license" in rec:  # a window of a file stays under its repository's licence
        example["license"] = rec["license"]
    return example


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
        n_lines = original.count("\n")
        if n_lines < config.min_lines or (config.whole_only
                                          and n_lines > config.whole_file_lines):
            continue
        whole = n_lines <= config.whole_file_lines and (
            config.whole_only or rng.random() < config.whole_file_chance)
        if not whole:
            crop = window(original, updated, rng, config.max_lines, config.margin)
            if crop is None:
                continue
            original, updated = crop
        style = _pick(rng, STYLES)
        fmt = _pick(rng, FORMATS)
        snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
        for _ in range(config.retries if style != "lazy" else 0):
            if snippet.strip():
                break
            crop = window(rec["original"], rec["updated"], rng, config.max_lines, config.margin)
            if crop is not None:
                (original, updated), whole = crop, False
                snippet = snippet_of(style, original, updated, rec["language"], rec["path"],
                                     rng)
        if not snippet.strip():
            style = "lazy"  # the textbook style applies to every change
            snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
        if not snippet.strip() or len(original) + len(snippet) + len(updated) > config.max_chars:
            continue
        yield _example(rec, style, fmt, whole, original, snippet, updated)


def agent_examples(records: Iterable[dict[str, Any]], seed: int = 0,
                   config: SftConfig = SftConfig()) -> Iterator[dict[str, Any]]:
    """One whole-file example per record whose ``lazy_snippet`` a coding agent wrote
    (``agent-train.jsonl``: the snippet as it is, not drawn), style ``agent``; records
    whose file is longer than ``config.whole_file_lines`` are skipped (a crop would not
    be the snippet's file)."""
    rng = random.Random(seed)
    for rec in records:
        original, updated, snippet = rec["original"], rec["updated"], rec.get("lazy_snippet")
        if not snippet or not snippet.strip() or \
                original.count("\n") > config.whole_file_lines or \
                len(original) + len(snippet) + len(updated) > config.max_chars:
            continue
        yield _example(rec, "agent", _pick(rng, FORMATS), True, original, snippet, updated)


def write_examples(records: list[dict[str, Any]], out: Path, seed: int = 0,
                   config: SftConfig = SftConfig(), variants: int = 1,
                   extra: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """Write :func:`examples` to ``out`` (JSONL), then ``extra`` (the hard cases of
    :mod:`fastapply.model.hard_windows`, say); return their :func:`mix` (characters stand
    for tokens here; the trainer reports tokens). With ``variants`` > 1 every record is
    drawn again with seeds ``seed + 1``, ...: other windows, styles and formats of the
    same changes. ``variants`` 0 writes ``extra`` alone."""
    import itertools

    kept: list[dict[str, Any]] = []
    drawn = (examples(records, seed + k, config) for k in range(variants))
    with out.open("w", encoding="utf-8") as f:
        for ex in itertools.chain(*drawn, extra):
            kept.append({"style": ex["style"], "whole_file": ex["whole_file"],
                         "hard": ex.get("hard", False),
                         "lines": ex["original"].count("\n"),
                         "tokens": len(ex["original"]) + len(ex["snippet"])
                         + len(ex["updated"]), "answer_tokens": len(ex["updated"])})
            f.write(json.dumps(ex, ensure_ascii=False) + "\n")
    return mix(kept)


#: (name, most lines) of the buckets :func:`mix` reports whole files in.
BUCKETS = (("whole <=80", 80), ("whole 81-200", 200), ("whole 201-300", 300),
           ("whole >300", 10**9))


def bucket(whole_file: bool, lines: int, hard: bool = False) -> str:
    """The mix bucket of an example: ``unsure window`` (a hard case,
    :mod:`fastapply.model.hard_windows`), ``window``, or its whole file's length bucket.

    >>> bucket(False, 500), bucket(True, 80), bucket(True, 81), bucket(True, 301)
    ('window', 'whole <=80', 'whole 81-200', 'whole >300')
    >>> bucket(False, 20, hard=True)
    'unsure window'
    """
    if hard:
        return "unsure window"
    if not whole_file:
        return "window"
    return next(name for name, most in BUCKETS if lines <= most)


def mix(kept: list[dict[str, Any]]) -> dict[str, Any]:
    """Examples, tokens and answer tokens (and the share of all answer tokens) by bucket
    and by style, from one dict per example: ``style``, ``whole_file``, ``lines``
    (of the original), ``tokens``, ``answer_tokens``."""
    total = sum(k["answer_tokens"] for k in kept) or 1
    out: dict[str, Any] = {"examples": len(kept), "answer_tokens": total}
    for name, key in (("by_bucket", lambda k: bucket(k["whole_file"], k["lines"],
                                                      k.get("hard", False))),
                      ("by_style", lambda k: k["style"])):
        rows: dict[str, dict[str, float]] = {}
        for k in kept:
            r = rows.setdefault(key(k), {"examples": 0, "tokens": 0, "answer_tokens": 0})
            r["examples"] += 1
            r["tokens"] += k["tokens"]
            r["answer_tokens"] += k["answer_tokens"]
        for r in rows.values():
            r["answer_share"] = round(r["answer_tokens"] / total, 3)
        out[name] = dict(sorted(rows.items()))
    return out


def mix_table(figures: dict[str, Any], unit: str = "tokens") -> str:
    """:func:`mix` as a plain table, one row per bucket then per style."""
    lines = [f"{'':16s} {'examples':>9s} {unit:>11s} {'answer ' + unit:>14s} {'share':>6s}"]
    for name in ("by_bucket", "by_style"):
        for key, r in figures[name].items():
            lines.append(f"{key:16s} {r['examples']:9d} {r['tokens']:11d} "
                         f"{r['answer_tokens']:14d} {r['answer_share']:6.3f}")
    return "\n".join(lines)
