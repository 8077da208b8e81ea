"""The load test's own record of a run: figures, failure kinds, wall time (no Locust import).

Locust's request events are kept for real requests only (the ``merge`` request and failed
connections), so that Locust's tables and its "Aggregated" row count requests and
nothing else. Every other figure (TTFT, tokens/s, acceptance, ...) goes into a
:class:`RunRecord`: histograms of per-request values, counts of failures by kind, the
completion tokens of successful requests, and the run's start and stop. Workers of a
distributed run send theirs to the master (:meth:`RunRecord.take`, :meth:`RunRecord.merge`).

Histogram values are rounded to three significant digits (1234.5 -> 1230, 0.01234 ->
0.0123); counts, sums, min and max are exact.

>>> record = RunRecord()
>>> record.start(100.0)
>>> record.add_success({"ttft_ms": 12.0, "chars_per_s": 4000.0}, completion_tokens=50)
>>> record.add_failure(TIMEOUT)
>>> record.stop(110.0)
>>> record.wall_s, record.completed, dict(record.failures), record.completion_tokens
(10.0, 1, {'timeout': 1}, 50)
>>> record.figures["ttft_ms"].percentile(50)
12.0
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Locust request_type and names of the only request events fired: the request itself
#: (response_time = latency in ms) and a failed connection. Everything else is recorded
#: here, not as Locust requests, so Locust's "Aggregated" row counts real requests only.
LOCUST_REQUEST_TYPE = "fast_apply"
LOCUST_MERGE = "merge"
LOCUST_CONNECT = "connect"

#: Failure kinds, as counted in the report (``failures_by_kind``).
TIMEOUT = "timeout"        # no answer within the request timeout
UNFINISHED = "unfinished"  # still in flight when the run stopped (after the stop timeout)
CONNECT = "connect"        # a user could not open its client
MISMATCH = "mismatch"      # --verify: the merge differs from the record's `updated`
ERROR = "error"            # the server refused or failed the request, or the stream broke
FAILURE_KINDS = (TIMEOUT, UNFINISHED, CONNECT, MISMATCH, ERROR)


def bucket(value: float) -> float:
    """``value`` rounded to three significant digits (the histogram's resolution).

    >>> bucket(1234.5), bucket(0.012345), bucket(0.0), bucket(-7.777)
    (1230.0, 0.0123, 0.0, -7.78)
    """
    if value == 0 or not math.isfinite(value):
        return float(value)
    digits = 2 - math.floor(math.log10(abs(value)))
    return round(value, digits)


@dataclass
class Histogram:
    """Counts of rounded values, with the exact count, sum, min and max."""

    counts: Counter[float] = field(default_factory=Counter)
    count: int = 0
    total: float = 0.0
    min: float | None = None
    max: float | None = None

    def add(self, value: float) -> None:
        self.counts[bucket(value)] += 1
        self.count += 1
        self.total += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def merge(self, other: Histogram) -> None:
        self.counts.update(other.counts)
        self.count += other.count
        self.total += other.total
        for name, pick in (("min", min), ("max", max)):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else
                    mine if theirs is None else pick(mine, theirs))

    def percentile(self, q: float) -> float | None:
        """Nearest-rank ``q``-th percentile (None when empty).

        >>> h = Histogram()
        >>> for v in (1, 2, 10, 10):
        ...     h.add(v)
        >>> h.percentile(50), h.percentile(99), Histogram().percentile(50)
        (2.0, 10.0, None)
        """
        return percentile(self.counts, q)

    def summary(self, percentiles: tuple[int, ...] = (50, 90, 95, 99)) -> dict[str, Any]:
        """count, mean, min, max and the percentiles, as in the report's ``figures``."""
        out: dict[str, Any] = {"count": self.count,
                               "mean": self.total / self.count if self.count else None,
                               "min": self.min, "max": self.max}
        out.update({f"p{q}": self.percentile(q) for q in percentiles})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"counts": [[v, n] for v, n in sorted(self.counts.items())], "count": self.count,
                "total": self.total, "min": self.min, "max": self.max}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        return cls(Counter({float(v): int(n) for v, n in data["counts"]}), int(data["count"]),
                   float(data["total"]), data["min"], data["max"])


def percentile(histogram: dict[Any, int], q: float) -> float | None:
    """Nearest-rank ``q``-th percentile of a {value: count} histogram (None when empty).

    >>> percentile({"1": 1, "2": 1, "10": 2}, 50), percentile({"1": 1, "2": 1, "10": 2}, 99)
    (2.0, 10.0)
    """
    items = sorted((float(k), int(n)) for k, n in histogram.items())
    total = sum(n for _, n in items)
    if total == 0:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for value, n in items:
        seen += n
        if seen >= rank:
            return value
    return items[-1][0]


@dataclass
class RunRecord:
    """What one process (or, merged, a whole distributed run) saw besides Locust's rows."""

    #: figure name (fastapply.metrics.LOADTEST_DEFINITIONS) -> its per-request values
    figures: dict[str, Histogram] = field(default_factory=dict)
    #: successful requests
    completed: int = 0
    #: failed requests by kind (FAILURE_KINDS)
    failures: Counter[str] = field(default_factory=Counter)
    #: completion tokens of the successful requests (0 without a model)
    completion_tokens: int = 0
    #: wall-clock start and stop of the run (time.time(), seconds); None until seen
    started_s: float | None = None
    stopped_s: float | None = None

    def start(self, now_s: float) -> None:
        """A new run: forget the previous one (Locust's web UI can run several)."""
        self.take()
        self.started_s, self.stopped_s = now_s, None

    def stop(self, now_s: float) -> None:
        self.stopped_s = now_s

    def add_success(self, figures: dict[str, float], completion_tokens: int = 0) -> None:
        self.completed += 1
        self.completion_tokens += completion_tokens
        for name, value in figures.items():
            self.figures.setdefault(name, Histogram()).add(value)

    def add_failure(self, kind: str) -> None:
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {kind!r}; use one of {FAILURE_KINDS}")
        self.failures[kind] += 1

    @property
    def wall_s(self) -> float | None:
        """Seconds from the run's start to its stop (to now's caller: see ``elapsed_s``)."""
        if self.started_s is None or self.stopped_s is None:
            return None
        return self.stopped_s - self.started_s

    def elapsed_s(self, now_s: float) -> float | None:
        """Seconds since the start, up to the stop when the run is over."""
        if self.started_s is None:
            return None
        return (self.stopped_s if self.stopped_s is not None else now_s) - self.started_s

    # -- transfer (worker -> master, and the file the wrapper reads) -----------------
    def to_dict(self) -> dict[str, Any]:
        return {"figures": {k: h.to_dict() for k, h in self.figures.items()},
                "completed": self.completed, "failures": dict(self.failures),
                "completion_tokens": self.completion_tokens,
                "started_s": self.started_s, "stopped_s": self.stopped_s,
                "wall_s": self.wall_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        return cls({k: Histogram.from_dict(h) for k, h in data["figures"].items()},
                   int(data["completed"]), Counter(data["failures"]),
                   int(data["completion_tokens"]), data.get("started_s"), data.get("stopped_s"))

    def take(self) -> dict[str, Any]:
        """The counts gathered since the last take, serialised, and reset them (workers)."""
        data = self.to_dict()
        self.figures, self.completed, self.failures = {}, 0, Counter()
        self.completion_tokens = 0
        return data

    def merge(self, data: dict[str, Any]) -> None:
        """Add a worker's :meth:`take` (its start and stop are the master's own)."""
        other = RunRecord.from_dict(data)
        for name, h in other.figures.items():
            self.figures.setdefault(name, Histogram()).merge(h)
        self.completed += other.completed
        self.failures.update(other.failures)
        self.completion_tokens += other.completion_tokens
