"""Locust event hooks of a fastapply run: options, the run record, progress, the end.

Imported by :mod:`fastapply.loadtest.users` (so a locustfile needs only that import):

* ``--fa-*`` options on Locust's command line (:class:`LoadOptions`);
* :data:`RECORD`, this process's :class:`~fastapply.loadtest.figures.RunRecord`: started
  on ``test_start``, stopped on ``test_stop`` (after the users stopped: requests in
  flight at the end are in it), filled by the users; on a distributed run each worker
  sends what it gathered with every stats report and the master merges it;
* a progress line every ``--fa-progress-interval`` seconds (local or master process):
  requests, failures, timeouts, completed requests/s, p50 latency, token throughput;
* on quit: clients closed, ``--fa-run-file`` (the record) and ``--fa-errors-file``
  written, the exit code set by the failure ratio, and the figures printed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import gevent
from locust import events
from locust.runners import WorkerRunner

from fastapply.loadtest.figures import (
    LOCUST_MERGE,
    LOCUST_REQUEST_TYPE,
    TIMEOUT,
    UNFINISHED,
    RunRecord,
)
from fastapply.loadtest.workload import FORMATS, parse_think_time

logger = logging.getLogger("fastapply.loadtest")

#: What this process saw besides Locust's request rows (the master's: the whole run).
RECORD = RunRecord()
#: Clients still open, closed on quit whatever state their users are in.
OPEN_CLIENTS: set[Any] = set()
#: Key of the run record in a worker's stats report.
_REPORT_KEY = "fastapply_run"
#: The progress greenlet of the current run (local or master process only).
_progress: list[Any] = []


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
    run_file: str | None = None
    progress_interval_s: float = 10.0

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
                   errors_file=o.fa_errors_file or None, run_file=o.fa_run_file or None,
                   progress_interval_s=o.fa_progress_interval)


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
    g.add_argument("--fa-run-file", default="",
                   help="write the run record here (JSON: wall time, figures, failure kinds)")
    g.add_argument("--fa-progress-interval", type=float, default=10.0,
                   help="seconds between progress lines (0: none)")


def _is_worker(environment: Any) -> bool:
    return isinstance(getattr(environment, "runner", None), WorkerRunner)


def request_totals(environment: Any) -> tuple[int, int]:
    """(requests, failures) over the ``fast_apply`` rows (merge and failed connects)."""
    rows = [e for (_, method), e in environment.stats.entries.items()
            if method == LOCUST_REQUEST_TYPE]
    return sum(e.num_requests for e in rows), sum(e.num_failures for e in rows)


def progress_line(environment: Any, record: RunRecord, now_s: float) -> str:
    """One progress line: totals so far and rates over the elapsed wall time."""
    requests, failures = request_totals(environment)
    elapsed = record.elapsed_s(now_s) or 0.0
    completed = requests - failures
    merge = environment.stats.entries.get((LOCUST_MERGE, LOCUST_REQUEST_TYPE))
    p50 = merge.get_response_time_percentile(0.5) if merge and merge.num_requests else None
    timeouts = record.failures[TIMEOUT] + record.failures[UNFINISHED]
    tokens = (f"{record.completion_tokens / elapsed:.0f} tokens/s"
              if record.completion_tokens and elapsed > 0 else "- tokens/s")
    return (f"fastapply progress: {elapsed:.0f} s, {requests} requests, {failures} failed "
            f"({timeouts} timeouts), "
            f"{completed / elapsed if elapsed > 0 else 0.0:.1f} completed/s, "
            f"p50 {'-' if p50 is None else f'{p50:.0f}'} ms, {tokens}")


def _print_progress(environment: Any, interval_s: float) -> None:
    while True:
        gevent.sleep(interval_s)
        logger.info(progress_line(environment, RECORD, time.time()))


@events.test_start.add_listener
def _on_test_start(environment: Any, **_kwargs: Any) -> None:
    RECORD.start(time.time())
    interval = LoadOptions.from_environment(environment).progress_interval_s
    if interval > 0 and not _is_worker(environment):
        _progress.append(gevent.spawn(_print_progress, environment, interval))


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_kwargs: Any) -> None:
    RECORD.stop(time.time())
    if _progress:  # the last line: the totals once the users have stopped
        while _progress:
            _progress.pop().kill(block=False)
        logger.info(progress_line(environment, RECORD, time.time()))


@events.report_to_master.add_listener
def _on_report_to_master(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    data[_REPORT_KEY] = RECORD.take()


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    if _REPORT_KEY in data:
        RECORD.merge(data[_REPORT_KEY])


def close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception as exc:  # closing must never keep Locust from exiting
        logger.warning("closing a fastapply client failed: %s", exc)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_kwargs: Any) -> None:
    """Close clients left open, write the files, set the exit code by failure ratio."""
    for client in list(OPEN_CLIENTS):
        OPEN_CLIENTS.discard(client)
        close_quietly(client)
    if _is_worker(environment):
        return  # the master writes the files and decides the exit code
    options = LoadOptions.from_environment(environment)
    if options.errors_file:
        errors = sorted(environment.stats.serialize_errors().values(),
                        key=lambda e: -e["occurrences"])
        with open(options.errors_file, "w", encoding="utf-8") as fh:
            json.dump([{k: e[k] for k in ("method", "name", "error", "occurrences")}
                       for e in errors], fh, indent=1)
    if options.run_file:  # `fastapply loadtest` prints its own table from this file
        with open(options.run_file, "w", encoding="utf-8") as fh:
            json.dump(RECORD.to_dict(), fh)
    else:  # bare `locust -f`: the figures Locust's tables no longer carry
        from fastapply.loadtest.report import format_table, summarise

        rows = [e.serialize() for e in environment.stats.entries.values()]  # no reset
        logger.info("fastapply figures:\n%s", format_table(summarise(rows, run=RECORD)))
    requests, failures = request_totals(environment)
    if requests == 0 or failures / requests > options.max_failure_ratio:
        logger.error("fastapply: %d of %d requests failed (limit %.2f%%)", failures, requests,
                     100 * options.max_failure_ratio)
        environment.process_exit_code = 1
