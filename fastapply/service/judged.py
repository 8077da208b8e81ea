"""The ``judge`` policy's answer: propose (the merge's readings), judge (each scored by
:class:`fastapply.judge.Judge`), serve the one it accepts or refuse, naming the readings
it weighed and the line where they part. The model is not run for it, so the answer costs
what the merge and the judge cost, whatever the file's length and on every runtime; only
an unsure merge the judge does not settle (:class:`Unsettled`) is then, where a model
runs, witnessed by the model as its policy says (fastapply.service.apply)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapply.metrics import Stats
from fastapply.service.inputs import InvalidRequest
from fastapply.service.results import RESEND, ApplyResult, Refused

if TYPE_CHECKING:
    from fastapply.judge import Judge
    from fastapply.merge import MergeResult

#: Joins the judge's refusal and the model witness's, where a model was asked after it.
WITNESS_AFTER_JUDGE = "\nand the model's witness: "


class Unsettled(Refused):
    """An unsure merge the judge accepts no single reading of, or SEARCH/REPLACE or udiff
    blocks found at several places or none (never judged): where a model runs, it is asked
    to witness the merge (the model's policy), else the edit is refused. ``merge`` is the
    merge the judge weighed, so the witness does not merge the snippet again."""

    def __init__(self, message: str, merge: MergeResult) -> None:
        super().__init__(message)
        self.merge = merge


def _scores(scores: tuple[float, ...]) -> str:
    return ", ".join(f"{s:.2f}" for s in scores)


def judged(judge: Judge, original: str, snippet: str) -> ApplyResult:
    """The file the judge serves, or Refused / InvalidRequest saying why not."""
    from fastapply.decoding.witness import Reading, readings_there

    verdict = judge.judge(original, snippet)
    rs = verdict.readings
    if rs.exact_format and not rs.certain and rs.merge is not None:
        # blocks found at several places, or none: never judged; a model may witness them
        raise Unsettled(f"the snippet cannot be merged: "
                        f"{'; '.join(u.message for u in rs.merge.uncertain)}; nothing was "
                        f"merged: {RESEND}", rs.merge)
    if rs.error:  # the merge cannot read it
        raise InvalidRequest(f"the snippet cannot be merged: {rs.error}; nothing was merged: "
                             f"{RESEND}")
    if verdict.served is not None:
        witness = ("deterministic-exact" if rs.exact_format else "judge-certain") if \
            rs.certain else "judge"
        return ApplyResult(rs.readings[verdict.served].text,
                           Stats(finish_reason="merged", witness=witness))
    assert rs.merge is not None
    if rs.certain:
        raise Refused(f"the merge read the snippet one way, but the judge scores that reading "
                      f"{verdict.scores[0]:.2f}, under its veto of {judge.veto}: it is likely "
                      f"not what the snippet means; nothing was merged: {RESEND}")
    doubts = "; ".join(u.message for u in rs.merge.uncertain)
    passing = sum(1 for s in verdict.scores if s >= judge.accept)
    why = (f"the judge accepts {passing} of its {len(rs.readings)} readings (scores "
           f"{_scores(verdict.scores)}; it serves one at {judge.accept} or more), so which one "
           f"the snippet means is not settled" if passing else
           f"the judge accepts none of its {len(rs.readings)} readings (scores "
           f"{_scores(verdict.scores)}; it serves one at {judge.accept} or more)")
    there = readings_there(Reading(rs.merge.text, False, doubts, merge=rs.merge))
    message = f"the merge is unsure ({doubts}) and {why}; nothing was merged: {RESEND}"
    raise Unsettled(f"{message}\n{there}" if there else message, rs.merge)
