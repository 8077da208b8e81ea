"""Propose, judge, serve: which of the merge's readings is served, from the judge's scores.

* A merge of SEARCH/REPLACE or udiff blocks is exact by construction where it is certain:
  served; where it is unsure (a block found twice, or nowhere), refused: never judged.
* A certain lazy merge is served unless the judge scores it under ``veto`` (it is then
  refused: the merge was sure, the judge is confident it is wrong).
* An unsure merge serves the single reading scored at or above ``accept``; none, or more
  than one, is a refusal that names the readings weighed and where they part.

>>> verdict([0.97], certain=True, exact=False, accept=0.9, veto=0.05)
0
>>> verdict([0.01], certain=True, exact=False, accept=0.9, veto=0.05) is None
True
>>> verdict([0.2, 0.95], certain=False, exact=False, accept=0.9, veto=0.05)
1
>>> verdict([0.93, 0.95], certain=False, exact=False, accept=0.9, veto=0.05) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence


def verdict(scores: Sequence[float], certain: bool, exact: bool, accept: float,
            veto: float) -> int | None:
    """The reading to serve (its index: 0 is the merge's chosen reading), or None."""
    if exact:
        return 0 if certain else None
    if certain:
        return 0 if scores[0] >= veto else None
    passing = [k for k, s in enumerate(scores) if s >= accept]
    return passing[0] if len(passing) == 1 else None
