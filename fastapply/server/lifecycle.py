"""Where the Triton model's requests stand, and how a stopping server drains them.

The fast_apply model is decoupled: ``execute`` hands each request to a thread pool and
returns at once, so Triton neither sees the backlog (its pending-request count stays 0)
nor waits for it when it stops. Two pieces here, importable without Triton:

* :class:`Backlog` counts the model's requests: accepted and waiting for a worker
  (``queued``), running on one (``in_flight``), and the milliseconds they waited
  (published as ``fastapply.metrics.PROMETHEUS_QUEUE``). At shutdown it hands back the
  requests still unanswered, so each gets a final error instead of silence.
* The drain protocol between ``fastapply serve`` and the model, through a folder named
  by ``$FASTAPPLY_SHUTDOWN_DIR`` (serve sets it for tritonserver; the Python-backend stub
  inherits it). Triton 2.51 calls the model's ``finalize`` only after every decoupled
  request has sent its final response, so the model cannot learn from Triton that a stop
  began or when Triton's exit timeout runs out (then tritonserver exits "immediately",
  crashing: SIGSEGV, ``malloc_consolidate`` abort, or a hang). So serve writes the drain
  deadline (Unix time, seconds) into ``drain`` before it sends SIGTERM; the model polls
  for it, lets requests finish until the deadline, answers the rest ``UNAVAILABLE``, and
  writes what it dropped to ``dropped-<pid>-<n>.json`` for serve to report.

>>> book = Backlog()
>>> job = book.accept("request 1", now_s=10.0)
>>> book.counts()
(1, 0)
>>> book.start(job, now_s=10.25)        # waited 250 ms for a worker
250.0
>>> book.counts(), book.queue_time_ms
((0, 1), 250.0)
>>> book.finish(job)
>>> book.counts(), book.idle()
((0, 0), True)
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Environment variable naming the folder serve and the model share at shutdown.
SHUTDOWN_DIR_ENV = "FASTAPPLY_SHUTDOWN_DIR"
DRAIN_FILE = "drain"
DRAINED_PREFIX = "drained-"
#: How often the model looks for the drain file, in seconds.
DRAIN_POLL_S = 0.2


@dataclass(eq=False)
class Job:
    """One accepted request: what the worker needs, and where it stands."""

    payload: Any  # the request's inputs and response sender (the model decides)
    accepted_s: float  # time.monotonic() when execute accepted it
    started_s: float | None = None  # when a worker took it
    aborted: bool = False  # shutdown answered it: the worker must not (or stop)

    def describe(self, now_s: float) -> dict[str, Any]:
        """For the dropped-request report: its state and how long it has been there."""
        if self.started_s is None:
            return {"state": "queued", "waited_ms": round((now_s - self.accepted_s) * 1e3, 1)}
        return {"state": "running", "waited_ms": round(
            (self.started_s - self.accepted_s) * 1e3, 1),
                "ran_ms": round((now_s - self.started_s) * 1e3, 1)}


class Backlog:
    """Counts of the model's requests by state; thread-safe.

    ``accept`` (in execute) -> ``start`` (a worker took it; returns ms waited, or None
    when shutdown already answered it) -> ``finish``. ``abort_all`` takes every request
    not yet finished out of the book, marked aborted, for the caller to answer.
    """

    def __init__(self) -> None:
        self._jobs: dict[Job, None] = {}  # accepted, not finished, in order
        self._running = 0
        self.queue_time_ms = 0.0  # summed ms requests waited before a worker took them
        self._lock = threading.Lock()  # guards all of the above

    def accept(self, payload: Any, now_s: float | None = None) -> Job:
        job = Job(payload, time.monotonic() if now_s is None else now_s)
        with self._lock:
            self._jobs[job] = None
        return job

    def start(self, job: Job, now_s: float | None = None) -> float | None:
        now_s = time.monotonic() if now_s is None else now_s
        with self._lock:
            if job.aborted:
                return None
            job.started_s = now_s
            self._running += 1
            waited_ms = (now_s - job.accepted_s) * 1e3
            self.queue_time_ms += waited_ms
            return waited_ms

    def finish(self, job: Job) -> None:
        with self._lock:
            if job in self._jobs:
                del self._jobs[job]
                self._running -= job.started_s is not None

    def counts(self) -> tuple[int, int]:
        """(queued, in_flight): the values of PROMETHEUS_QUEUE's two gauges."""
        with self._lock:
            return len(self._jobs) - self._running, self._running

    def idle(self) -> bool:
        with self._lock:
            return not self._jobs

    def abort_all(self) -> list[Job]:
        """Every unfinished request, marked aborted and taken out of the counts."""
        with self._lock:
            jobs = list(self._jobs)
            for job in jobs:
                job.aborted = True
            self._jobs.clear()
            self._running = 0
        return jobs


# -- the drain protocol (serve <-> model) ------------------------------------------------


def request_drain(shutdown_dir: str | Path, deadline_s: float) -> None:
    """serve: ask the model to finish its requests by ``deadline_s`` (Unix time)."""
    path = Path(shutdown_dir) / DRAIN_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{deadline_s:.3f}\n")
    tmp.replace(path)  # the model never reads half a number


def drain_deadline(shutdown_dir: str | Path) -> float | None:
    """model: the drain deadline (Unix time) once serve asked for one, else None."""
    try:
        return float((Path(shutdown_dir) / DRAIN_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_dropped(shutdown_dir: str | Path, reason: str, jobs: list[dict[str, Any]]) -> None:
    """model: record the requests it had to answer with an error at shutdown."""
    path = Path(shutdown_dir) / f"dropped-{os.getpid()}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"reason": reason, "requests": jobs}))


def read_dropped(shutdown_dir: str | Path) -> Iterator[str]:
    """serve: one line per dropped request, from every model instance's report."""
    for path in sorted(Path(shutdown_dir).glob("dropped-*.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            yield f"unreadable shutdown report {path.name}: {exc}"
            continue
        for job in report["requests"]:
            detail = ", ".join(f"{k} {v}" for k, v in job.items() if k != "state")
            yield f"a {job['state']} request ({detail}): {report['reason']}"


def mark_drained(shutdown_dir: str | Path) -> None:
    """model: every request it accepted has had its final response."""
    (Path(shutdown_dir) / f"{DRAINED_PREFIX}{os.getpid()}").touch()


def drained(shutdown_dir: str | Path) -> bool:
    """serve: whether a model instance said it has answered everything."""
    return any(Path(shutdown_dir).glob(f"{DRAINED_PREFIX}*"))


def watch_for_drain(shutdown_dir: str, idle: Callable[[], bool],
                    on_deadline: Callable[[], None], stop: threading.Event,
                    draining: threading.Event) -> None:
    """model thread: wait for serve's drain request; then set ``draining`` (the model
    refuses new requests from then on), wait until its deadline for the requests to
    finish, else call ``on_deadline()`` (answer the rest); either way say so
    (``mark_drained``). Stops when ``stop`` is set (finalize: Triton is unloading).

    ``draining`` is set before ``idle()`` is first asked, and the model accepts a request
    into its book before it looks at ``draining``: so a request is either in the book
    when it is found idle, or refused; never started after serve was told "drained".
    Triton itself keeps taking requests while it stops (on gRPC, and on HTTP connections
    kept open, such as the guard's), so the model has to refuse them.

    serve needs the word: Triton does not unload the model, and so does not exit,
    while a client keeps a gRPC stream open, even an idle one (FastApplyClient and the
    OpenAI front keep theirs), so once the model has answered everything serve stops
    the server itself instead of waiting out its exit timeout.
    """
    while not stop.wait(DRAIN_POLL_S):
        deadline_s = drain_deadline(shutdown_dir)
        if deadline_s is None:
            continue
        draining.set()
        while not idle():
            if stop.wait(min(DRAIN_POLL_S, max(0.0, deadline_s - time.time()))):
                return
            if time.time() >= deadline_s:
                on_deadline()
                break
        mark_drained(shutdown_dir)
        return
