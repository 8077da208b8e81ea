"""The lazy merge's coarse pass (*locate* in :mod:`fastapply.merge.lazy`): candidate
regions of a segment from the best chains of matched lines, kept in a Fenwick tree of
prefix maxima; and the longest increasing chain of anchors."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from fastapply.merge.costs import (
    _NEG,
    CANDIDATES,
    EDGE_COST,
    LOCATE_COST,
    LOCATE_WORK,
    PRUNE,
    WorkBudget,
)
from fastapply.merge.lines import weight


class _PrefixMax:
    """Fenwick tree: prefix maxima of (score, -chain start, pair index) over columns
    (the ranks of the matched original lines)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree: list[tuple[int, int, int]] = [(_NEG, 0, -1)] * (n + 1)

    def update(self, j: int, value: tuple[int, int, int]) -> None:
        j += 1
        while j <= self.n:
            if value > self.tree[j]:
                self.tree[j] = value
            j += j & -j

    def query(self, j: int) -> tuple[int, int, int]:
        """Max over positions < j."""
        best = (_NEG, 0, -1)
        while j > 0:
            if self.tree[j] > best:
                best = self.tree[j]
            j -= j & -j
        return best


def _locate(skeys: Sequence[str], table: dict[str, list[int]], lo: int, n: int,
            marker_before: bool, marker_after: bool, budget: WorkBudget
            ) -> list[tuple[int, int]]:
    """Candidate regions (first, last matched original line) of a segment, best first:
    the best chains of matched pairs (LOCATE_COST per skipped line), at most CANDIDATES
    disjoint ones scoring within PRUNE of the best; [] when no line matches.

    >>> from fastapply.merge.lines import key_exact, positions
    >>> table = positions(["x", "a", "b", "y", "a", "b"], key_exact)
    >>> _locate(["a", "b"], table, 0, 6, True, True, WorkBudget())
    [(1, 2), (4, 5)]
    """
    last = len(skeys) - 1
    pairs: list[tuple[int, int]] = []
    finals: list[tuple[int, int, int]] = []  # (final score, -start, pair index)
    found = [js[bisect_left(js, lo):] for k in skeys for js in [table.get(k, [])]]
    budget.spend(LOCATE_WORK * sum(len(js) for js in found))
    cols = sorted({j for js in found for j in js})  # the tree's columns: matched lines
    tree = _PrefixMax(len(cols))
    for i, k in enumerate(skeys):
        js = found[i]
        if not js:
            continue
        w = weight(k, len(table.get(k, ())))
        fresh = []
        for j in js:
            begin = (EDGE_COST if i > 0 else 0) if marker_before else LOCATE_COST * (j - lo)
            value, start = w - begin, j
            prev = tree.query(bisect_left(cols, j))  # the best chain ending before line j
            if prev[2] >= 0:
                chained = prev[0] - LOCATE_COST * (j - 1) + w
                if chained > value or (chained == value and -prev[1] < start):
                    value, start = chained, -prev[1]
            fresh.append((j, value, start))
        for j, value, start in fresh:
            idx = len(pairs)
            pairs.append((i, j))
            tree.update(bisect_left(cols, j), (value + LOCATE_COST * j, -start, idx))
            end_cost = (EDGE_COST if i < last else 0) if marker_after \
                else LOCATE_COST * (n - 1 - j)
            finals.append((value - end_cost, -start, idx))
    finals.sort(reverse=True)
    cands: list[tuple[int, int]] = []  # distinct (first, last) matched lines, best first
    for final, neg_start, idx in finals:
        if final < finals[0][0] - PRUNE:
            break
        region = (-neg_start, pairs[idx][1])
        if all(region[1] < c[0] or region[0] > c[1] for c in cands):
            cands.append(region)
            if len(cands) == CANDIDATES:
                break
    return cands


def _increasing_chain(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of ``pairs`` (sorted by their first item) increasing in the second.

    >>> _increasing_chain([(0, 3), (1, 1), (2, 2), (3, 0), (4, 4)])
    [(1, 1), (2, 2), (4, 4)]
    """
    tails: list[int] = []  # tails[k]: second item ending the best chain of length k + 1
    ends: list[int] = []  # index of that pair
    back = [-1] * len(pairs)
    for p, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        back[p] = ends[k - 1] if k else -1
        if k == len(tails):
            tails.append(j)
            ends.append(p)
        else:
            tails[k], ends[k] = j, p
    chain = []
    p = ends[-1] if ends else -1
    while p >= 0:
        chain.append(pairs[p])
        p = back[p]
    return chain[::-1]
