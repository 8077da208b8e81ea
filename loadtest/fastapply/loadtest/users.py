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
* Every figure is an ordinary Locust request event (fastapply.metrics, "Load test"):
  request_type ``fast_apply`` name ``merge`` with response_time = latency in ms, and
  request_type ``metric`` name ``ttft_ms``, ``tokens_per_s``, ... with response_time =
  the figure's value, so Locust's own tables, CSV, HTML and JSON carry them all.

The ``--fa-*`` options below are added to Locust's command line.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import grpc.experimental.gevent as grpc_gevent
from locust import User, events

from fastapply.loadtest.workload import (
    FORMATS,
    Edit,
    Workload,
    first_difference,
    load_workload,
    parse_think_time,
)
from fastapply.metrics import LOADTEST_METRIC_TYPE, LOADTEST_REQUEST, Stats, client_figures

grpc_gevent.init_gevent()  # Locust patched the standard library on import; no channel yet

logger = logging.getLogger("fastapply.loadtest")

#: Clients still open, closed on quit whatever state their users are in.
_OPEN_CLIENTS: set[Any] = set()

#: Seconds a user waits after a failed connection before trying again.
RECONNECT_WAIT_S = 1.0


class MergeMismatch(AssertionError):
    """``--fa-verify``: the served merge differs from the record's ``updated`` text."""


@dataclass(frozen=True)
class LoadOptions:
    """The ``--fa-*`` options, with the defaults used when Locust parsed none."""

    data: str | None = None
    formats: tuple[str, ...] = FORMATS
    verify: bool = False
    stream: bool = True
    think_time: tuple[float, float] = (0.0, 0.0)
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 5.0
    seed: int | None = None
    max_failure_ratio: float = 0.01
    errors_file: str | None = None

    @classmethod
    def from_environment(cls, environment: Any) -> LoadOptions:
        o = getattr(environment, "parsed_options", None)
        if o is None:
            return cls()
        return cls(data=o.fa_data or None,
                   formats=tuple(f.strip() for f in o.fa_formats.split(",") if f.strip()),
                   verify=o.fa_verify, stream=not o.fa_no_stream,
                   think_time=parse_think_time(o.fa_think_time),
                   request_timeout_s=o.fa_request_timeout, connect_timeout_s=o.fa_connect_timeout,
                   seed=o.fa_seed, max_failure_ratio=o.fa_max_failure_ratio,
                   errors_file=o.fa_errors_file or None)


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    g = parser.add_argument_group("fastapply")
    g.add_argument("--fa-data", default="", help="JSONL of edits (default: shipped examples)")
    g.add_argument("--fa-formats", default=",".join(FORMATS),
                   help="comma-separated snippet fields to send, mixed at random")
    g.add_argument("--fa-verify", action="store_true",
                   help="count a merge that differs from the record's 'updated' as a failure")
    g.add_argument("--fa-no-stream", action="store_true",
                   help="ask for the whole file at once (TTFT is then the server's)")
    g.add_argument("--fa-think-time", default="0", help="SECONDS or MIN,MAX between requests")
    g.add_argument("--fa-request-timeout", type=float, default=30.0,
                   help="seconds to wait for each response; keep --stop-timeout above it "
                        "so that users are rarely killed mid-call")
    g.add_argument("--fa-connect-timeout", type=float, default=5.0, help="seconds to connect")
    g.add_argument("--fa-seed", type=int, default=None, help="seed of the edit picks")
    g.add_argument("--fa-max-failure-ratio", type=float, default=0.01,
                   help="exit non-zero above this failed/all fast_apply requests")
    g.add_argument("--fa-errors-file", default="", help="write Locust's error table here (JSON)")


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
            self._fire(*LOADTEST_REQUEST, (time.perf_counter() - start) * 1e3,
                       exception=RuntimeError(f"{edit.id} [{edit.format}]: still in flight "
                                              "when the run stopped"),
                       id=edit.id, format=edit.format)
        self.close()

    # -- plumbing -------------------------------------------------------------------------
    @property
    def workload(self) -> Workload:
        cls = FastApplyBaseUser
        if cls._workload is None:
            cls._workload = load_workload(self.options.data, self.options.formats,
                                          self.options.seed)
        return cls._workload

    def _fire(self, request_type: str, name: str, value: float, length: int = 0,
              exception: BaseException | None = None, **context: Any) -> None:
        self.environment.events.request.fire(
            request_type=request_type, name=name, response_time=value,
            response_length=length, exception=exception, context=context)

    def connect(self) -> bool:
        """Open this user's client; a failure is a failed ``connect`` request, not a raise."""
        from fastapply.client import FastApplyClient

        start = time.perf_counter()
        try:
            self.client = FastApplyClient(self.host or "", timeout_s=self.options.request_timeout_s,
                                          connect_timeout_s=self.options.connect_timeout_s)
        except Exception as exc:  # reported as a request failure, never raised
            self.client = None
            self._fire(LOADTEST_REQUEST[0], "connect", (time.perf_counter() - start) * 1e3,
                       exception=exc)
            return False
        _OPEN_CLIENTS.add(self.client)
        return True

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            _OPEN_CLIENTS.discard(client)
            _close_quietly(client)

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
            from fastapply.client import FastApplyError

            self._in_flight = None
            failure: Exception
            if isinstance(exc, FastApplyError):
                failure = FastApplyError(f"{edit.id} [{edit.format}]: {exc}")
            else:
                self.close()  # a broken client: reconnect on the next task
                failure = RuntimeError(f"{edit.id} [{edit.format}]: {type(exc).__name__}: {exc}")
            self._fire(*LOADTEST_REQUEST, (time.perf_counter() - start) * 1e3,
                       exception=failure, id=edit.id, format=edit.format)
            return
        latency_s = time.perf_counter() - start
        self._in_flight = None
        mismatch = None
        if self.options.verify and merged != edit.updated:
            mismatch = MergeMismatch(f"{edit.id} [{edit.format}]: merge differs from 'updated', "
                                     f"{first_difference(merged, edit.updated)}")
        self._fire(*LOADTEST_REQUEST, latency_s * 1e3, len(merged), mismatch,
                   id=edit.id, format=edit.format)
        if mismatch is None:
            for name, value in client_figures(stats, latency_s, ttft_s, len(merged)).items():
                self._fire(LOADTEST_METRIC_TYPE, name, value)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception as exc:  # closing must never keep Locust from exiting
        logger.warning("closing a fastapply client failed: %s", exc)


def request_totals(environment: Any) -> tuple[int, int]:
    """(requests, failures) over the ``fast_apply`` rows (merge and failed connects)."""
    rows = [e for (_, method), e in environment.stats.entries.items()
            if method == LOADTEST_REQUEST[0]]
    return sum(e.num_requests for e in rows), sum(e.num_failures for e in rows)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_kwargs: Any) -> None:
    """Close clients left open, write the error table, set the exit code by failure ratio."""
    for client in list(_OPEN_CLIENTS):
        _OPEN_CLIENTS.discard(client)
        _close_quietly(client)
    options = LoadOptions.from_environment(environment)
    if options.errors_file:
        errors = sorted(environment.stats.serialize_errors().values(),
                        key=lambda e: -e["occurrences"])
        with open(options.errors_file, "w", encoding="utf-8") as fh:
            json.dump([{k: e[k] for k in ("method", "name", "error", "occurrences")}
                       for e in errors], fh, indent=1)
    requests, failures = request_totals(environment)
    if requests == 0 or failures / requests > options.max_failure_ratio:
        logger.error("fastapply: %d of %d requests failed (limit %.2f%%)", failures, requests,
                     100 * options.max_failure_ratio)
        environment.process_exit_code = 1
