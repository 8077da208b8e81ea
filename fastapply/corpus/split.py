"""Split records by repository (never by record) into a tune set and a validation set;
draw small per-repository samples (the ones shipped in tests/data)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any


def split_repos(records: Sequence[dict[str, Any]], valid_fraction: float, seed: int
                ) -> tuple[list[str], list[str]]:
    """(tune repositories, validation repositories).

    Repositories are grouped by their main language and each group is shuffled with
    ``seed``; every ``1/valid_fraction``-th repository of the walk over the groups goes to
    validation (a running quota), so a language with several repositories lands in both.

    >>> recs = [{"repo": f"r{i}", "language": "go" if i < 4 else "c"} for i in range(8)]
    >>> tune, valid = split_repos(recs, 0.5, 0)
    >>> sorted(tune + valid) == [f"r{i}" for i in range(8)], len(valid)
    (True, 4)
    """
    langs: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        langs[r["repo"]][r["language"]] += 1
    groups: dict[str, list[str]] = defaultdict(list)
    for repo, counts in sorted(langs.items()):
        groups[counts.most_common(1)[0][0]].append(repo)
    rng = random.Random(seed)
    tune: list[str] = []
    valid: list[str] = []
    quota = 0.0
    for lang in sorted(groups):
        repos = groups[lang]
        rng.shuffle(repos)
        for repo in repos:
            quota += valid_fraction
            if quota >= 1.0 - 1e-9:
                quota -= 1.0
                valid.append(repo)
            else:
                tune.append(repo)
    return tune, valid


def sample(records: Sequence[dict[str, Any]], per_repo: int, max_chars: int, seed: int
           ) -> list[dict[str, Any]]:
    """Up to ``per_repo`` records of each repository whose files are at most
    ``max_chars`` characters, drawn with ``seed``; in input order.

    >>> recs = [{"repo": r, "original": "x" * n, "updated": ""} for r in "ab" for n in (1, 9)]
    >>> [(r["repo"], len(r["original"])) for r in sample(recs, 5, 5, 0)]
    [('a', 1), ('b', 1)]
    """
    by_repo: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(records):
        if max(len(r["original"]), len(r["updated"])) <= max_chars:
            by_repo[r["repo"]].append(k)
    rng = random.Random(seed)
    chosen = sorted(k for repo in sorted(by_repo)
                    for k in rng.sample(by_repo[repo], min(per_repo, len(by_repo[repo]))))
    return [records[k] for k in chosen]
