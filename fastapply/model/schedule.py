"""A learning-rate schedule that ends where the run ends: at its last step or at its time limit.

A cosine schedule over ``max_steps`` is at a high rate wherever a time limit cuts the run;
the adapter then comes from the middle of the schedule. Here the run's progress is the
larger of its share of steps done and its share of the time budget spent, so a run cut by
``--max-minutes`` is annealed to zero at the deadline, and a run that reaches its step
count first ends exactly as a plain cosine schedule does.

Time spent is counted across resumes: every checkpoint holds a ``clock.json`` with the
training seconds spent up to it, and a resumed run starts its clock from there.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

#: File in each checkpoint directory holding the training seconds spent up to it.
CLOCK_FILE = "clock.json"


def lr_factor(step: int, warmup_steps: int, max_steps: int, time_fraction: float) -> float:
    """Multiplier of the peak learning rate at optimizer ``step`` (0-based).

    Linear warm-up over ``warmup_steps``, then a cosine from 1 to 0 over the run's
    progress: the larger of the share of post-warm-up steps done and ``time_fraction``
    (the share of the time budget spent; 0 without a budget).

    >>> [round(lr_factor(s, 2, 10, 0.0), 3) for s in (0, 1, 2, 6, 10)]
    [0.5, 1.0, 1.0, 0.5, 0.0]
    >>> round(lr_factor(3, 2, 10, 0.5), 3)   # half the time spent: mid-cosine already
    0.5
    >>> lr_factor(3, 2, 10, 1.0)              # deadline reached: annealed
    0.0
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    by_steps = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    progress = min(1.0, max(by_steps, time_fraction))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


class Clock:
    """Training seconds spent against a budget, carried across resumes."""

    def __init__(self, budget_s: float, spent_before_s: float = 0.0) -> None:
        #: the time budget of the whole run in seconds (0: none)
        self.budget_s = budget_s
        #: seconds spent by earlier invocations of this run (read from its checkpoint)
        self.spent_before_s = spent_before_s
        self._start = time.monotonic()

    def restart(self) -> None:
        """Count from now (training starts after loading data and model)."""
        self._start = time.monotonic()

    def spent_s(self) -> float:
        return self.spent_before_s + time.monotonic() - self._start

    def fraction(self) -> float:
        """Share of the budget spent, 0 without a budget."""
        return min(1.0, self.spent_s() / self.budget_s) if self.budget_s > 0 else 0.0

    def save(self, checkpoint: Path) -> None:
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / CLOCK_FILE).write_text(json.dumps({"spent_s": round(self.spent_s(), 1)}))

    @staticmethod
    def spent_in(checkpoint: Path | None) -> float:
        """Seconds spent up to ``checkpoint`` (0 for none, or one written before clocks)."""
        if checkpoint is None or not (checkpoint / CLOCK_FILE).is_file():
            return 0.0
        return float(json.loads((checkpoint / CLOCK_FILE).read_text())["spent_s"])


def last_checkpoint(out: Path) -> Path | None:
    """The checkpoint a resumed run starts from: the highest ``checkpoint-N`` in ``out``."""
    found = [(int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*")
             if p.name.split("-")[1].isdigit()]
    return max(found)[1] if found else None
