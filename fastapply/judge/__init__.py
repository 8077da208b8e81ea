"""The judge: which of the merge's readings is the file the snippet means.

The deterministic merge proposes (a certain merge, or an unsure one's readings:
:mod:`.readings`); the judge scores each reading from its change to the original beside the
snippet (:mod:`.features`, with a parser's signals from :mod:`.syntax`), and the policy
serves the single reading it accepts or refuses (:mod:`.policy`). The shipped judge is a
LightGBM model in its text format with a card of the figures it was chosen by
(:mod:`.model`, ``weights/``); ``fastapply judge data`` and ``fastapply judge train``
(:mod:`.data`, :mod:`.train`) rebuild it from labelled readings, validated by repository.
"""

from fastapply.judge.model import Judge, Judged
from fastapply.judge.policy import verdict
from fastapply.judge.readings import Reading, Readings, readings_of

__all__ = ["Judge", "Judged", "Reading", "Readings", "readings_of", "verdict"]
