"""Hard-case window examples: the windowed witness's own task, from the tune split.

The windowed witness (:mod:`fastapply.service.windows`) asks the model about an unsure
merge only in windows: the original lines of a window and the part of the snippet placed
there (:func:`fastapply.merge.windows.window_tasks`), in the served prompt format. This
module builds exactly those prompts from corpus records whose deterministic merge is
unsure, in every snippet style, and answers each with the **true** window: the lines the
commit made of the window's original lines (:func:`true_window`). The chosen reading may be
right (the model must agree with it), a rival may be (it must pick that one), or none
(it must write the change).

A window whose true text is the original's unchanged while no reading keeps it so is left
out: there the snippet's change belongs elsewhere, and the window alone cannot tell the
model so. Merges that are certain (served without the model) and unsure merges no window
holds (read as a whole file) give no window; they are counted, not trained on.

Use the tune split only: the validation split and the shared corpus are for measuring.
"""

from __future__ import annotations

import difflib
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

#: Largest window (lines of its original or its answer) kept as an example.
MAX_WINDOW_LINES = 120


def _clean(ops: Sequence[tuple[str, int, int, int, int]], x: int, n: int) -> int | None:
    """The answer-side line matching original line boundary ``x``, or None where ``x``
    cuts through a change or has lines inserted right at it (whether they belong inside
    the window or outside, no line says): a change that ends or starts at ``x`` is wholly
    on one side."""
    if x == 0:
        return 0
    if x == n:
        return ops[-1][4] if ops else 0
    for tag, i1, i2, _j1, _j2 in ops:
        if tag != "equal" and (i1 < x < i2 or i1 == i2 == x):
            return None
    return next(j1 + (x - i1) for _tag, i1, i2, j1, _j2 in ops if i1 <= x < i2)


def _opcodes(orig: Sequence[str], new: Sequence[str]
             ) -> Sequence[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, orig, new, autojunk=False).get_opcodes()


def true_window(orig: Sequence[str], new: Sequence[str], lo: int, hi: int,
                ops: Sequence[tuple[str, int, int, int, int]] | None = None
                ) -> tuple[int, int, str] | None:
    """Original lines ``lo:hi`` widened until neither edge cuts a change of the true edit
    ``orig`` -> ``new``; (lo, hi, the true text of those lines), or None past
    :data:`MAX_WINDOW_LINES`. ``ops``: the edit's opcodes, where the caller has them
    (one diff per record, not per window).

    >>> o = ["a\\n", "b\\n", "c\\n", "d\\n", "e\\n"]
    >>> true_window(o, ["a\\n", "b\\n", "X\\n", "d\\n", "e\\n"], 1, 4)
    (1, 4, 'b\\nX\\nd\\n')
    >>> true_window(o, ["a\\n", "b\\n", "X\\n", "e\\n"], 3, 5)  # c, d -> X: widened to take it
    (2, 5, 'X\\ne\\n')
    """
    if ops is None:
        ops = _opcodes(orig, new)
    n = len(orig)
    while (start := _clean(ops, lo, n)) is None:
        lo -= 1
    while (end := _clean(ops, hi, n)) is None:
        hi += 1
    if hi - lo > MAX_WINDOW_LINES or end - start > MAX_WINDOW_LINES:
        return None
    return lo, hi, "".join(new[start:end])


def hard_examples(records: Iterable[dict[str, Any]], seed: int = 0,
                  styles: Sequence[str] | None = None,
                  counts: Counter[str] | None = None,
                  readings: bool = False) -> Iterator[dict[str, Any]]:
    """Window examples (the fields of :func:`fastapply.model.sft_data.examples`, with
    ``hard`` True and ``truth``: which reading's window is the true one, -1 for none)
    from every record and style whose merge is unsure. ``counts`` (if given) gathers
    why the others gave none; with ``readings`` each example also lists every reading's
    text of its window (``readings``: what the windowed witness may serve there)."""
    from fastapply.merge import EditError, apply_snippet
    from fastapply.merge.windows import NoWindows, window_tasks
    from fastapply.model.sft_data import FORMATS, STYLES, _pick, snippet_of

    counts = Counter() if counts is None else counts
    rng = random.Random(seed)
    for rec in records:
        original, updated = rec["original"], rec["updated"]
        orig_lines = original.splitlines(keepends=True)
        new_lines = updated.splitlines(keepends=True)
        ops: Sequence[tuple[str, int, int, int, int]] | None = None
        for style in styles or list(STYLES):
            snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
            if not snippet.strip():
                continue
            counts["merges"] += 1
            try:
                result = apply_snippet(original, snippet)
            except EditError:
                counts["refused"] += 1
                continue
            if not result.uncertain:
                counts["certain right" if result.text == updated else "certain wrong"] += 1
                continue
            try:
                tasks = window_tasks(original, snippet, result.with_readings())
            except NoWindows:
                counts["unsure, whole file"] += 1
                continue
            counts["unsure, windows"] += 1
            if ops is None:  # the true edit's diff, once per record
                ops = _opcodes(orig_lines, new_lines)
            for task in tasks:
                w = task.window
                found = true_window(orig_lines, new_lines, w.orig_start, w.orig_end, ops)
                if found is None:
                    counts["window too long"] += 1
                    continue
                lo, hi, truth = found
                window_original = "".join(orig_lines[lo:hi])
                texts = task.texts if (lo, hi) == (w.orig_start, w.orig_end) else ()
                picked = texts.index(truth) if truth in texts else -1
                if picked < 0 and truth == window_original:
                    counts["change elsewhere"] += 1
                    continue
                counts["truth " + ("chosen" if picked == 0 else "rival" if picked > 0
                                   else "none")] += 1
                example: dict[str, Any] = {
                    "id": rec["id"], "repo": rec["repo"], "language": rec["language"],
                    "style": style, "format": _pick(rng, FORMATS), "whole_file": False,
                    "hard": True, "truth": picked, "original": window_original,
                    "snippet": task.snippet, "updated": truth}
                if "license" in rec:
                    example["license"] = rec["license"]
                if readings:
                    # None where the window was widened past the readings' windows
                    example["readings"] = list(texts) if texts else None
                yield example
