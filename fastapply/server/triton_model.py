"""The ``fast_apply`` Triton model's work: requests in, :mod:`fastapply.service`, responses out.

``model_repository/fast_apply/1/model.py`` is the thin class Triton loads; everything it
does happens here, where it can be tested without a server: the Python backend's module
(``triton_python_backend_utils``, importable only inside the server's stub) is passed in
as ``pb_utils`` instead of imported. :class:`FastApplyModel` reads each request's tensors,
queues it for a worker thread (:class:`fastapply.server.lifecycle.Backlog`), runs the
service and answers through a guarded :class:`Responder`; Prometheus figures go out
through a :class:`MetricsFlusher`; the drain protocol with ``fastapply serve`` (see
:mod:`fastapply.server.lifecycle`) refuses new requests and answers the rest on shutdown.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

INPUTS = ("initial_code", "edit_snippet", "instruction", "stream", "max_tokens")
OUTCOMES = ("success", "invalid", "cancelled", "error", "unavailable")
#: At most this long finalize waits for workers still running (aborted) requests, in s.
FINALIZE_WAIT_S = 5.0


class MetricsFlusher:
    """Adds metric updates up and applies them, one thread at a time, at most every
    ``period_s``.

    Each ``Metric.increment``/``set`` is a round trip to the server process (~0.3 ms),
    and updates from several threads at once crash the 2.51 stub (SIGSEGV, boost
    lock_exception). So request threads add counter increments to a dict, and the
    gauges are read (latest values win) when a flush runs: a request thread on its way
    out (its response sent) that finds the last flush older than ``period_s`` applies
    them, alone, gauges only where they changed: an isolated request shows at once, a
    busy server pays a few round trips per period instead of ~7 per request. Updates
    nobody flushes that way (the gauges back at 0 when the server goes idle, the queue
    growing while every worker is busy) are applied by a thread of its own within
    ``2 * period_s``; it only wakes when something waits, so it stays off the response
    path (a thread flushing every period slowed requests: 3.4 -> 5.3 ms).
    """

    def __init__(self, counters: dict[str, Any], gauges: dict[str, Any],
                 levels: Callable[[], tuple[int, ...]], period_s: float = 0.1) -> None:
        self.counters = counters  # name (Stats field, outcome, ...) -> pb_utils Metric
        self.gauges = gauges  # name -> pb_utils Metric (a GAUGE family's)
        self.levels = levels  # the gauges' values now, in the order of ``gauges``
        self.applied: dict[str, float] = {}  # gauge values last set
        self.names = tuple(counters)
        self.period_s = period_s
        self.pending: dict[str, float] = {}  # counter increments not applied yet
        self.last_flush_s = 0.0
        self.lock = threading.Lock()  # guards pending and last_flush_s
        self.flushing = threading.Lock()  # one thread talks to the server at a time
        self.wake = threading.Event()  # set: an update waits for the flusher thread
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="fast_apply-metrics",
                                       daemon=True)
        self.thread.start()

    def add(self, values: dict[str, float], outcome: str | None = None,
            may_flush: bool = True) -> None:
        """Add counter increments (and one to ``outcome``'s), or with none, say that the
        gauges changed; apply now if due and ``may_flush`` (the caller's response is
        out), else within 2 * period_s."""
        now = time.monotonic()
        with self.lock:
            for name, value in [*values.items(), *([(outcome, 1.0)] if outcome else [])]:
                if value:
                    self.pending[name] = self.pending.get(name, 0.0) + value
            due = may_flush and now - self.last_flush_s >= self.period_s
            if due:
                self.last_flush_s = now
        if due:
            self.flush()
        else:
            self.wake.set()

    def flush(self) -> None:
        with self.flushing:
            if not self.counters:
                return  # closed: the Metrics are gone
            with self.lock:
                pending, self.pending = self.pending, {}
            for name, value in pending.items():
                self.counters[name].increment(value)
            for name, value in zip(self.gauges, self.levels(), strict=True):
                if self.applied.get(name) != value:
                    self.gauges[name].set(float(value))
                    self.applied[name] = value

    def _run(self) -> None:
        while not self.closed:
            self.wake.wait()
            time.sleep(2 * self.period_s)  # request threads flush on their way out first
            with self.lock:
                now = time.monotonic()
                if now - self.last_flush_s < self.period_s:
                    continue  # flushed just now; wake stays set: look again next round
                self.last_flush_s = now
                self.wake.clear()  # before the flush reads: a later update sets it again
            if not self.closed:
                self.flush()

    def close(self) -> None:
        """Stop the thread, apply what is left, and drop every Metric (call once, from
        finalize: metrics destroyed at the stub's exit instead crash it)."""
        self.closed = True
        self.wake.set()
        self.thread.join(timeout=5)
        self.flush()
        with self.flushing:
            self.counters, self.gauges = {}, {}


class Responder:
    """A request's response sender, guarded: after its final response (also one sent by
    shutdown for an aborted request) later sends are dropped and ``is_cancelled()`` is
    true, so a worker still generating for an aborted request stops early.

    The final response also lets go of the backend's sender: Triton 2.51 counts a
    decoupled request in flight (and will not unload the model) until that object is
    gone, so an aborted request whose worker still runs would otherwise hold up the stop.
    """

    def __init__(self, sender: Any, final_flag: int) -> None:
        self.sender: Any = sender  # None once the final response went out
        self.final_flag = final_flag  # pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        # One call at a time, a worker's or shutdown's: after the final response the
        # server frees the sender's state, and is_cancelled() on it then crashes it.
        self.lock = threading.Lock()

    def is_cancelled(self) -> bool:
        """The client cancelled, or the request was answered already (by shutdown)."""
        with self.lock:
            return self.sender is None or bool(self.sender.is_cancelled())

    def send(self, response: Any = None, flags: int = 0) -> bool:
        """Send unless the final response went out already; whether it was sent."""
        with self.lock:
            if self.sender is None:
                return False
            self.sender.send(response, flags=flags)
            if flags & self.final_flag:
                self.sender = None
            return True


class FastApplyModel:
    """The fast_apply model (Python backend, decoupled): see ``model.py`` for the tensor
    contract. ``pb_utils`` is the backend's ``triton_python_backend_utils`` module (or a
    stand-in with the same names); ``args`` is what Triton passes to ``initialize``.

    Bad input gets an ``INVALID_ARG`` error naming the problem, and so does a file the
    model did not finish (max_tokens or the context ran out): never a fragment as
    success. Every request ends with a response flagged
    ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, also on failure.

    Parameters (config.pbtxt, rendered by fastapply.server.model_repo) map onto ServiceConfig.
    """

    def __init__(self, pb_utils: Any, args: dict[str, Any]) -> None:
        self.pb = pb_utils
        self.final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self.initialize(args)

    def initialize(self, args: dict[str, Any]) -> None:
        """Read the configuration once, start the service, the workers and the metrics."""
        pb_utils = self.pb
        from fastapply.metrics import (
            PROMETHEUS_COUNTERS,
            PROMETHEUS_LATENCY,
            PROMETHEUS_QUEUE,
            PROMETHEUS_REQUESTS,
        )
        from fastapply.server import lifecycle
        from fastapply.server.model_repo import config_from_parameters
        from fastapply.service import FastApplyService, InvalidRequest, RequestCancelled
        from fastapply.service.inputs import as_flag

        model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(model_config):
            raise pb_utils.TritonModelException(
                "fast_apply must be decoupled: set model_transaction_policy { decoupled: true }")
        params = {k: v["string_value"] for k, v in model_config.get("parameters", {}).items()}
        config, workers = config_from_parameters(params)
        self.invalid_request = InvalidRequest
        self.cancelled = RequestCancelled
        self.as_flag = as_flag
        self.service = FastApplyService(config)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fast_apply")
        # A Metric dies with its MetricFamily: keep the families as long as the model.
        self.families: list[Any] = []

        def family(name: str, description: str, kind: Any = pb_utils.MetricFamily.COUNTER
                   ) -> Any:
            self.families.append(pb_utils.MetricFamily(
                name=name, description=description, kind=kind))
            return self.families[-1]

        # Stats field or request outcome -> its Prometheus counter
        metrics = {field: family(name, text).Metric(labels={})
                   for name, text, field in PROMETHEUS_COUNTERS}
        metrics["total_ms"] = family(*PROMETHEUS_LATENCY).Metric(labels={})
        requests = family(*PROMETHEUS_REQUESTS)
        metrics.update({o: requests.Metric(labels={"outcome": o}) for o in OUTCOMES})
        # The backlog the model keeps from Triton (see fastapply.server.lifecycle): two gauges
        # (queued, in_flight) and the queue-time counter.
        *levels, queue_time = PROMETHEUS_QUEUE
        gauges = {name: family(name, text, pb_utils.MetricFamily.GAUGE).Metric(labels={})
                  for name, text in levels}
        metrics["queue_time_ms"] = family(*queue_time).Metric(labels={})
        self.backlog = lifecycle.Backlog()
        self.metrics = MetricsFlusher(metrics, gauges, self.backlog.counts)
        self.lifecycle = lifecycle
        # `fastapply serve` asks for a drain before it stops the server (see lifecycle).
        self.shutdown_dir = os.environ.get(lifecycle.SHUTDOWN_DIR_ENV)
        self.stopping = threading.Event()
        self.draining = threading.Event()  # serve asked for a drain: refuse new requests
        self.futures: set[Future[None]] = set()  # submitted to the pool, not done
        # The API keys a request must carry one of (fastapply.server.auth), where several
        # are live: Triton's restricted protocol holds one, so serve forwards the key's
        # header to the model instead and the model checks it. Empty: Triton checks (one
        # key) or nobody does (none).
        from fastapply.server import auth

        self.auth = auth
        self.keys = auth.KeyCheck(auth.api_keys(None, os.environ.get(auth.MODEL_KEYS_ENV)))
        if self.shutdown_dir:
            threading.Thread(target=lifecycle.watch_for_drain, name="fast_apply-drain",
                             args=(self.shutdown_dir, self.backlog.idle,
                                   self._drain_deadline_passed, self.stopping,
                                   self.draining),
                             daemon=True).start()
        pb_utils.Logger.log_info(f"fast_apply ready: runtime={config.runtime} "
                                 f"workers={workers}")

    def _text_tensor(self, name: str, text: str) -> Any:
        return self.pb.Tensor(name, np.array([text.encode("utf-8")], dtype=np.object_))

    def _scalar(self, request: Any, name: str) -> Any:
        tensor = self.pb.get_input_tensor_by_name(request, name)
        if tensor is None:
            return None
        values = tensor.as_numpy().reshape(-1)
        if not values.size:
            return None
        value = values[0]
        # numpy scalars (BOOL, INT64) as Python's bool/int, for fastapply.service's checks
        return value.item() if isinstance(value, np.generic) else value

    def _key_of(self, request: Any) -> str | None:
        """The API key header Triton forwarded as a request parameter (gRPC metadata or
        HTTP header; see fastapply.server.triton), or None."""
        try:
            params = json.loads(request.parameters() or "{}")
        except (AttributeError, ValueError):
            return None
        for name in (self.auth.GRPC_KEY_HEADER, self.auth.API_KEY_HEADER):
            value = params.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

    def _log_failure(self, future: Future[None]) -> None:
        if future.cancelled():
            return  # never started: whoever cancelled it answered the request
        exc = future.exception()
        if exc is not None:
            self.pb.Logger.log_error(f"fast_apply: request handler failed: {exc!r}")

    def execute(self, requests: list[Any]) -> None:
        # Decoupled: read the inputs here (their memory is released when execute
        # returns), then answer from the pool, so a long request does not hold up the
        # ones behind it.
        for request in requests:
            sender = Responder(request.get_response_sender(), self.final)
            if self.keys and not self.keys.accepts(self._key_of(request)):
                self._fail(sender, "invalid", self.pb.TritonError(
                    self.auth.REFUSAL, self.pb.TritonError.INVALID_ARG))
                continue
            inputs = {name: self._scalar(request, name) for name in INPUTS}
            job = self.backlog.accept((inputs, sender))
            if self.draining.is_set():  # after accept: see lifecycle.watch_for_drain
                self._refuse(job)
                continue
            future = self.pool.submit(self._run, job)
            self.futures.add(future)
            future.add_done_callback(self._done)
        self.metrics.add({}, may_flush=False)  # the queue grew
        return None

    def _done(self, future: Future[None]) -> None:
        self.futures.discard(future)
        self._log_failure(future)

    def _run(self, job: Any) -> None:
        """A worker took ``job``: count it as started, serve it, count it as done."""
        waited_ms = self.backlog.start(job)
        if waited_ms is None:
            return  # shutdown answered it while it waited
        self.metrics.add({"queue_time_ms": waited_ms}, may_flush=False)
        try:
            self._handle(*job.payload)
        finally:
            self.backlog.finish(job)
            self.metrics.add({})

    def _handle(self, inputs: dict[str, Any], sender: Any) -> None:
        """Serve one request; whatever happens, its last response carries FINAL."""
        try:
            stats = self._merge(inputs, sender)
        except self.invalid_request as exc:
            self._fail(sender, "invalid", self.pb.TritonError(
                str(exc), self.pb.TritonError.INVALID_ARG))
            return
        except self.cancelled:
            self._fail(sender, "cancelled", self.pb.TritonError(
                "request cancelled by the client", self.pb.TritonError.CANCELLED))
            return
        except Exception as exc:  # the client must always get a final response
            self.pb.Logger.log_error(f"fast_apply: {type(exc).__name__}: {exc}")
            self._fail(sender, "error", self.pb.TritonError(
                f"internal error: {type(exc).__name__}: {exc}"))
            return
        self.metrics.add({field: float(stats[field]) for field in self.metrics.names
                          if field in stats}, "success")

    def _merge(self, inputs: dict[str, Any], sender: Any) -> dict[str, Any]:
        """Run the service; send deltas (if streaming) and the final response.

        A file the model did not finish is an IncompleteOutput (INVALID_ARG): when
        streaming, the deltas already sent are followed by that error as the final
        response. The service asks ``sender.is_cancelled`` while it generates, so a
        client that went away stops the work, streaming or not.
        """
        stream = self.as_flag("stream", inputs["stream"])

        def on_delta(delta: str) -> None:
            if sender.is_cancelled():
                raise self.cancelled
            sender.send(self.pb.InferenceResponse(
                output_tensors=[self._text_tensor("merged_code", delta)]))

        result = self.service.apply(
            inputs["initial_code"], inputs["edit_snippet"], inputs["instruction"],
            max_tokens=inputs["max_tokens"], on_delta=on_delta if stream else None,
            is_cancelled=sender.is_cancelled)
        stats: dict[str, Any] = result.stats.to_dict()
        sender.send(self.pb.InferenceResponse(output_tensors=[
            self._text_tensor("merged_code", "" if stream else result.merged_code),
            self._text_tensor("stats", json.dumps(stats))]), flags=self.final)
        return stats

    def _fail(self, sender: Any, outcome: str, error: Any) -> None:
        self.metrics.add({}, outcome)
        sender.send(self.pb.InferenceResponse(error=error), flags=self.final)

    def _refuse(self, job: Any) -> None:
        """A request that came after the drain began: UNAVAILABLE at once, so that its
        client sends it to another replica, rather than starting work the grace period
        may cut off (it is no dropped request: nothing of it had started)."""
        self.backlog.finish(job)
        self._fail(job.payload[1], "unavailable", self.pb.TritonError(
            "the server is shutting down and takes no new requests; send the request "
            "again (to another replica)", self.pb.TritonError.UNAVAILABLE))

    def _abort(self, reason: str) -> None:
        """Answer every request not finished yet with UNAVAILABLE (running ones also stop
        at their next cancellation check) and record them for `fastapply serve`."""
        now_s = time.monotonic()
        error = self.pb.TritonError(
            f"the server is shutting down: {reason}; send the request again (to another "
            f"replica)", self.pb.TritonError.UNAVAILABLE)
        jobs = [job for job in self.backlog.abort_all()  # those a worker did not answer
                if job.payload[1].send(self.pb.InferenceResponse(error=error), flags=self.final)]
        if not jobs:
            return
        self.metrics.add({"unavailable": float(len(jobs))})
        described = [job.describe(now_s) for job in jobs]
        self.pb.Logger.log_error(f"fast_apply: shutdown: {reason}: answered "
                                  f"{len(jobs)} request(s) UNAVAILABLE: {described}")
        if self.shutdown_dir:
            self.lifecycle.write_dropped(self.shutdown_dir, reason, described)

    def _drain_deadline_passed(self) -> None:
        self._abort("the drain grace period ran out before the request finished")

    def finalize(self) -> None:
        self.stopping.set()
        # Triton 2.51 unloads a decoupled model once every request had its final
        # response, so nothing should be left; whatever is (another unload path) gets an
        # answer now rather than silence.
        self._abort("the model was unloaded before the request finished")
        # Aborted workers stop at their next cancellation check; the stub must not be
        # torn down under one that is still running, nor wait past Triton's exit timeout.
        self.pool.shutdown(wait=False, cancel_futures=True)
        wait(list(self.futures), timeout=FINALIZE_WAIT_S)
        self.metrics.close()
        self.families.clear()  # while the stub still works: at its exit they crash it
