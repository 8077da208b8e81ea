"""What the load test sends: edits from a JSONL, mixed over snippet formats and file sizes.

Pure Python (no Locust, no gRPC), so it is tested and used outside a load run as well.
Records are split into size classes by the length of their original file (terciles);
each pick chooses a size class, then a record in it, then one of the record's snippet
formats, uniformly, so that small and large files are both exercised however skewed the
data file is.

>>> records = [{"id": str(n), "original": "x" * n, "updated": "y",
...             "udiff": "d", "lazy_snippet": ""} for n in (10, 20, 30)]
>>> w = Workload(records, formats=("udiff", "lazy_snippet"), seed=0)
>>> [len(c) for c in w.size_classes]      # one record per size class
[1, 1, 1]
>>> w.pick().format                       # empty snippets are never sent
'udiff'
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The snippet fields of an edit record, in the order they are documented.
FORMATS: tuple[str, ...] = ("lazy_snippet", "search_replace", "udiff")


class WorkloadError(ValueError):
    """A data file or format choice that leaves nothing to send; the message says why."""


@dataclass(frozen=True)
class Edit:
    """One request to send: which record, which snippet format."""

    id: str
    format: str
    original: str
    snippet: str
    updated: str


class Workload:
    """Random picks over (record, format) pairs, balanced over file-size classes."""

    def __init__(self, records: Sequence[dict[str, Any]], formats: Sequence[str] = FORMATS,
                 seed: int | None = None, size_classes: int = 3) -> None:
        unknown = sorted(set(formats) - set(FORMATS))
        if unknown or not formats:
            raise WorkloadError(f"unknown snippet format(s) {', '.join(unknown) or '(none)'}; "
                                f"use some of: {', '.join(FORMATS)}")
        edits = [Edit(str(r["id"]), f, r["original"], r[f], r["updated"])
                 for r in records for f in formats
                 if isinstance(r.get(f), str) and r[f].strip()]
        if not edits:
            raise WorkloadError(f"no record carries a non-empty {' or '.join(formats)} field")
        #: the edits split into size classes by original length, smallest first
        self.size_classes = _split_by_size(edits, size_classes)
        #: the random source (seeded for reproducible runs)
        self.random = random.Random(seed)

    def pick(self) -> Edit:
        """The next edit: a size class, then an edit within it, uniformly."""
        return self.random.choice(self.random.choice(self.size_classes))


def _split_by_size(edits: list[Edit], parts: int) -> list[list[Edit]]:
    """Group edits by record into ``parts`` classes of about equal record counts."""
    ids = sorted({e.id: len(e.original) for e in edits}.items(), key=lambda kv: kv[1])
    parts = max(1, min(parts, len(ids)))
    rank = {rid: i * parts // len(ids) for i, (rid, _) in enumerate(ids)}
    classes: list[list[Edit]] = [[] for _ in range(parts)]
    for e in edits:
        classes[rank[e.id]].append(e)
    return classes


def load_workload(path: str | Path | None, formats: Sequence[str] = FORMATS,
                  seed: int | None = None) -> Workload:
    """A Workload over a JSONL of edits (the shipped examples when ``path`` is None)."""
    from fastapply.examples import load_edits

    return Workload(load_edits(path), formats, seed)


def parse_think_time(text: str) -> tuple[float, float]:
    """``"2"`` -> (2.0, 2.0); ``"0.5,2"`` -> (0.5, 2.0): seconds between a user's requests."""
    parts = [float(p) for p in str(text).split(",")]
    low, high = (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    if len(parts) > 2 or low < 0 or high < low:
        raise ValueError(f"think time {text!r}: give SECONDS or MIN,MAX with 0 <= MIN <= MAX")
    return low, high


def first_difference(got: str, expected: str) -> str:
    """Where two files first differ, for a failure message.

    >>> first_difference("a\\nb\\n", "a\\nc\\n")
    "line 2: got 'b', expected 'c'"
    """
    g, e = got.splitlines(), expected.splitlines()
    for i, (x, y) in enumerate(zip(g, e, strict=False), 1):
        if x != y:
            return f"line {i}: got {x[:60]!r}, expected {y[:60]!r}"
    if len(g) != len(e):
        return f"{len(g)} lines, expected {len(e)}"
    return "line endings or the final newline differ"
