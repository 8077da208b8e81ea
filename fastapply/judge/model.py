"""The shipped judge: a LightGBM model in its text format and its card (JSON), read from
the package (``fastapply/judge/weights/``), or from a directory passed in. Nothing is
downloaded or unpickled: LightGBM parses its own text file.

>>> judge = Judge.load()
>>> 0 < judge.accept < 1 and 0 <= judge.veto < judge.accept
True
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fastapply.judge.features import FEATURES
from fastapply.judge.policy import verdict
from fastapply.judge.readings import Readings, readings_of

#: The shipped judge's directory: ``judge.txt`` (LightGBM) and ``card.json``.
WEIGHTS = Path(__file__).with_name("weights")


@dataclass(frozen=True)
class Judged:
    """The judge's answer for one merge: the reading to serve (None: refuse), every
    reading's score, and the readings themselves."""

    served: int | None
    scores: tuple[float, ...]
    readings: Readings


class Judge:
    """Scores each reading of a merge (the probability that it is the file the snippet
    means) and applies the policy (:func:`fastapply.judge.policy.verdict`) at the card's
    thresholds."""

    def __init__(self, booster: Any, card: dict[str, Any]) -> None:
        if list(card["features"]) != list(FEATURES):
            raise ValueError("the judge's card names other features than this package "
                             "computes: retrain it (fastapply judge train)")
        self.booster = booster
        self.card = card
        #: A reading is accepted at or above this score.
        self.accept: float = float(card["accept"])
        #: A certain merge whose reading scores under this is refused.
        self.veto: float = float(card["veto"])
        self._lock = threading.Lock()  # LightGBM's predict is not documented thread-safe

    @classmethod
    def load(cls, directory: str | Path | None = None) -> Judge:
        """The judge in ``directory`` (default: the shipped one)."""
        return _load(str(directory or WEIGHTS))

    def scores(self, readings: Readings) -> tuple[float, ...]:
        """Each reading's score, in one pass over all of them."""
        import numpy as np

        if not readings.readings:
            return ()
        x = np.array([[float(r.features.get(f, np.nan)) for f in FEATURES]
                      for r in readings.readings], dtype=np.float64)
        with self._lock:
            return tuple(float(p) for p in self.booster.predict(x))

    def judge(self, original: str, snippet: str) -> Judged:
        """Propose (the merge's readings), judge (score each), decide (the policy)."""
        readings = readings_of(original, snippet)
        scores = self.scores(readings)
        served = verdict(scores, readings.certain, readings.exact_format, self.accept,
                         self.veto) if scores else None
        return Judged(served, scores, readings)


@cache
def _load(directory: str) -> Judge:
    import lightgbm

    path = Path(directory)
    model, card = path / "judge.txt", path / "card.json"
    for p in (model, card):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no judge here (a directory with judge.txt and "
                                    f"card.json, written by `fastapply judge train`)")
    return Judge(lightgbm.Booster(model_file=str(model)), json.loads(card.read_text()))
