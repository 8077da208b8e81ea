"""Split records by repository (never by record) into a tune set and a validation set."""

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
