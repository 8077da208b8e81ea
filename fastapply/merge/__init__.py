"""The deterministic merge: parse an edit snippet, place it in the original, review it.

``apply_snippet(original, snippet)`` is the whole of it for most callers: it reads a lazy
snippet, SEARCH/REPLACE blocks, a unified diff or a mix (:mod:`.edits`), lays each hunk into
the original (:mod:`.apply`, :mod:`.merger`; a SEARCH/REPLACE block or diff hunk by
:mod:`.blocks`, a lazy segment by the steps and doubts of :data:`.doubts.PIPELINE`, placed by
:mod:`.lazy` with :mod:`.locate`, :mod:`.align`,
:mod:`.lines`, :mod:`.definitions`, :mod:`.text` and :mod:`.indent`, within the
:mod:`.costs` budget) and reports every place it was unsure, after the :mod:`.precision`
review and the :mod:`.edges` check. Pure Python: nothing here imports Triton or torch.

>>> apply_snippet("a\\nb\\nc\\n", "a\\n# ... existing code ...\\nc\\nc2\\n").text
'a\\nb\\nc\\nc2\\n'
"""

from fastapply.merge.apply import MergeResult, apply_snippet, merge
from fastapply.merge.costs import WorkBudget
from fastapply.merge.edits import detect_format, parse_edit
from fastapply.merge.merger import Uncertainty
from fastapply.merge.precision import Removal, removals, strict_runs, unanchored_removals
from fastapply.merge.review import review
from fastapply.merge.syntax import EditError, EditPlan, Hunk, is_marker

__all__ = ["EditError", "EditPlan", "Hunk", "MergeResult", "Removal", "Uncertainty",
           "WorkBudget", "apply_snippet", "detect_format", "is_marker", "merge", "parse_edit",
           "removals", "review", "strict_runs", "unanchored_removals"]
