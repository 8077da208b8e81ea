"""Plumbing of the fastapply Locust users: gevent-safe gRPC, one client per user, events.

:class:`FastApplyBaseUser` (abstract) holds everything a locustfile should not have to
think about; a locustfile only says what to send (see ``locustfile.py``):

* gRPC is made gevent-safe (``grpc.experimental.gevent.init_gevent()``) when this module
  is imported, after Locust has monkey-patched the standard library and before any
  channel exists; without it the tritonclient stream blocks the whole process.
* One :class:`fastapply.client.FastApplyClient` (one gRPC stream) per user, created in
  ``on_start`` without raising: a failed connection is a failed request named
  ``connect`` and is retried on the next task. Clients are closed in ``on_stop`` and,
  for any still open, when Locust quits (otherwise it can hang on exit).
* Locust sees real requests only: request_type ``fast_apply`` name ``merge`` with
  response_time = latency in ms (and name ``connect`` for a failed connection), so its
  tables and "Aggregated" row count requests and nothing else. The other figures
  (``ttft_ms``, ``tokens_per_s``, ... defined in fastapply.metrics) and the kind of every
  failure go into the run record of :mod:`fastapply.loadtest.hooks`, which also adds the
  ``--fa-*`` options to Locust's command line and prints progress lines.
"""

from __future__ import annotations

import random
import time
from typing import Any

import grpc.experimental.gevent as grpc_gevent
from locust import User

from fastapply.loadtest import figures
from fastapply.loadtest.figures import LOCUST_CONNECT, LOCUST_MERGE, LOCUST_REQUEST_TYPE
from fastapply.loadtest.hooks import OPEN_CLIENTS, RECORD, LoadOptions, close_quietly
from fastapply.loadtest.workload import Edit, Workload, first_difference, load_workload
from fastapply.metrics import Stats, client_figures

grpc_gevent.init_gevent()  # Locust patched the standard library on import; no channel yet

#: Seconds a user waits after a failed connection before trying again.
RECONNECT_WAIT_S = 1.0


class MergeMismatch(AssertionError):
    """``--fa-verify``: the served merge differs from the record's ``updated`` text."""


class FastApplyBaseUser(User):
    """Abstract user: a FastApplyClient of ``self.host`` and :meth:`merge` that fires events."""

    abstract = True
    #: the workload of this process, loaded once from the options and shared by all users
    _workload: Workload | None = None

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        #: the --fa-* options
        self.options = LoadOptions.from_environment(environment)
        #: this user's client (None until connected, or after a broken connection)
        self.client: Any = None
        #: the request being sent and its start (perf_counter), None between requests
        self._in_flight: tuple[Edit, float] | None = None

    # -- Locust hooks -------------------------------------------------------------------
    def wait_time(self) -> float:
        low, high = self.options.think_time
        return random.uniform(low, high)

    def on_start(self) -> None:
        self.connect()

    def on_stop(self) -> None:
        if self._in_flight is not None:  # killed mid-call: count it, never drop it
            edit, start = self._in_flight
            self._in_flight = None
            self._fail(figures.UNFINISHED, LOCUST_MERGE, start,
                       RuntimeError(f"{edit.id} [{edit.format}]: still in flight when the "
                                    "run stopped"), id=edit.id, format=edit.format)
        self.close()

    # -- plumbing -------------------------------------------------------------------------
    @property
    def workload(self) -> Workload:
        cls = FastApplyBaseUser
        if cls._workload is None:
            cls._workload = load_workload(self.options.data, self.options.formats,
                                          self.options.seed)
        return cls._workload

    def _fire(self, name: str, latency_ms: float, length: int = 0,
              exception: BaseException | None = None, **context: Any) -> None:
        self.environment.events.request.fire(
            request_type=LOCUST_REQUEST_TYPE, name=name, response_time=latency_ms,
            response_length=length, exception=exception, context=context)

    def _fail(self, kind: str, name: str, start: float, exception: BaseException,
              **context: Any) -> None:
        """A failed request: a Locust failure event and its kind in the run record."""
        RECORD.add_failure(kind)
        self._fire(name, (time.perf_counter() - start) * 1e3, exception=exception, **context)

    def connect(self) -> bool:
        """Open this user's client; a failure is a failed ``connect`` request, not a raise."""
        from fastapply.client import FastApplyClient

        start = time.perf_counter()
        try:
            self.client = FastApplyClient(self.host or "", timeout_s=self.options.request_timeout_s,
                                          connect_timeout_s=self.options.connect_timeout_s)
        except Exception as exc:  # reported as a request failure, never raised
            self.client = None
            self._fail(figures.CONNECT, LOCUST_CONNECT, start, exc)
            return False
        OPEN_CLIENTS.add(self.client)
        return True

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            OPEN_CLIENTS.discard(client)
            close_quietly(client)

    def merge(self, edit: Edit) -> None:
        """Send one edit; fire the ``merge`` event and, when it succeeded, the figures."""
        if self.client is None and not self.connect():
            time.sleep(RECONNECT_WAIT_S)  # gevent-patched: lets the other users run
            return
        start = time.perf_counter()
        ttft_s: float | None = None
        self._in_flight = (edit, start)
        try:
            if self.options.stream:
                stream = self.client.stream(edit.original, edit.snippet)
                for _delta in stream:
                    if ttft_s is None:
                        ttft_s = time.perf_counter() - start
                merged, stats = stream.merged_code, stream.stats or Stats()
            else:
                result = self.client.apply(edit.original, edit.snippet)
                merged, stats = result.merged_code, result.stats
        except Exception as exc:  # FastApplyError or a broken channel
            from fastapply.client import FastApplyError, FastApplyTimeout

            self._in_flight = None
            failure: Exception
            if isinstance(exc, FastApplyError):
                failure = type(exc)(f"{edit.id} [{edit.format}]: {exc}")
            else:
                self.close()  # a broken client: reconnect on the next task
                failure = RuntimeError(f"{edit.id} [{edit.format}]: {type(exc).__name__}: {exc}")
            kind = figures.TIMEOUT if isinstance(exc, FastApplyTimeout) else figures.ERROR
            self._fail(kind, LOCUST_MERGE, start, failure, id=edit.id, format=edit.format)
            return
        latency_s = time.perf_counter() - start
        self._in_flight = None
        mismatch = None
        if self.options.verify and merged != edit.updated:
            mismatch = MergeMismatch(f"{edit.id} [{edit.format}]: merge differs from 'updated', "
                                     f"{first_difference(merged, edit.updated)}")
        if mismatch is not None:
            RECORD.add_failure(figures.MISMATCH)
        else:
            RECORD.add_success(client_figures(stats, latency_s, ttft_s, len(merged)),
                               stats.completion_tokens)
        self._fire(LOCUST_MERGE, latency_s * 1e3, len(merged), mismatch,
                   id=edit.id, format=edit.format)
