"""Triton Python-backend model ``fast_apply``: tensors in, fastapply.service, tensors out.

All logic lives in the ``fastapply`` package: this file cannot be imported outside the
server, so it only translates tensors (see TritonPythonModel for the contract).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
INPUTS = ("initial_code", "edit_snippet", "instruction", "stream", "max_tokens")
OUTCOMES = ("success", "invalid", "cancelled", "error")


def _text_tensor(name: str, text: str) -> Any:
    return pb_utils.Tensor(name, np.array([text.encode("utf-8")], dtype=np.object_))


def _scalar(request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    values = tensor.as_numpy().reshape(-1)
    if not values.size:
        return None
    value = values[0]
    # numpy scalars (BOOL, INT64) as Python's bool/int, for fastapply.service's checks
    return value.item() if isinstance(value, np.generic) else value


class _MetricsFlusher:
    """Adds metric increments up and applies them at most every ``period_s``.

    Each ``Metric.increment`` is a round trip to the server process (~0.3 ms), and
    increments from several threads at once crash the 2.51 stub (SIGSEGV, boost
    lock_exception). So request threads add to a dict, and the one that finds the last
    flush older than ``period_s`` applies the sums, alone: an isolated request shows at
    once, a busy server pays a few round trips per period instead of ~7 per request.
    (A flusher thread of its own slowed every request down: measured 3.4 -> 5.3 ms.)
    """

    def __init__(self, metrics: dict[str, Any], period_s: float = 0.1) -> None:
        self.metrics = metrics  # name (Stats field or outcome) -> pb_utils Metric
        self.names = tuple(metrics)
        self.period_s = period_s
        self.pending: dict[str, float] = {}
        self.last_flush_s = 0.0
        self.lock = threading.Lock()  # guards pending and last_flush_s
        self.flushing = threading.Lock()  # one thread talks to the server at a time

    def add(self, values: dict[str, float], outcome: str) -> None:
        now = time.monotonic()
        with self.lock:
            for name, value in [*values.items(), (outcome, 1.0)]:
                if value:
                    self.pending[name] = self.pending.get(name, 0.0) + value
            if now - self.last_flush_s < self.period_s:
                return
            self.last_flush_s = now
        self.flush()

    def flush(self) -> None:
        with self.flushing:
            with self.lock:
                pending, self.pending = self.pending, {}
            for name, value in pending.items():
                self.metrics[name].increment(value)


def _log_failure(future: Future[None]) -> None:
    exc = future.exception()
    if exc is not None:
        pb_utils.Logger.log_error(f"fast_apply: request handler failed: {exc!r}")


class TritonPythonModel:
    """The fast_apply model (Python backend, decoupled).

    Tensor contract (all shape [1]):

    ======================  =====  =============================================================
    input ``initial_code``  BYTES  the original file (UTF-8)
    input ``edit_snippet``  BYTES  lazy / SEARCH-REPLACE / udiff / mixed edit (UTF-8)
    input ``instruction``   BYTES  optional: what the edit is for (Morph-style prompts)
    input ``stream``        BOOL   optional: send text deltas as they are produced
    input ``max_tokens``    INT64  optional: output token budget, 1 to the context limit
    output ``merged_code``  BYTES  the merged file; when streaming, one delta per response
    output ``stats``        BYTES  JSON of fastapply.metrics.Stats (last response only)
    ======================  =====  =============================================================

    Bad input gets an ``INVALID_ARG`` error naming the problem, and so does a file the
    model did not finish (max_tokens or the context ran out): never a fragment as
    success. Every request ends with a response flagged
    ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, also on failure.

    Parameters (config.pbtxt, rendered by fastapply.model_repo) map onto ServiceConfig.
    """

    def initialize(self, args: dict[str, Any]) -> None:
        from fastapply.metrics import PROMETHEUS_COUNTERS, PROMETHEUS_LATENCY, PROMETHEUS_REQUESTS
        from fastapply.model_repo import config_from_parameters
        from fastapply.service import FastApplyService, InvalidRequest, RequestCancelled, as_flag

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

        def counter(name: str, description: str) -> Any:
            self.families.append(pb_utils.MetricFamily(
                name=name, description=description, kind=pb_utils.MetricFamily.COUNTER))
            return self.families[-1]

        # Stats field or request outcome -> its Prometheus counter
        metrics = {field: counter(name, text).Metric(labels={})
                   for name, text, field in PROMETHEUS_COUNTERS}
        metrics["total_ms"] = counter(*PROMETHEUS_LATENCY).Metric(labels={})
        requests = counter(*PROMETHEUS_REQUESTS)
        metrics.update({o: requests.Metric(labels={"outcome": o}) for o in OUTCOMES})
        self.metrics = _MetricsFlusher(metrics)
        pb_utils.Logger.log_info(f"fast_apply ready: runtime={config.runtime} "
                                 f"workers={workers}")

    def execute(self, requests: list[Any]) -> None:
        # Decoupled: read the inputs here (their memory is released when execute
        # returns), then answer from the pool, so a long request does not hold up the
        # ones behind it.
        for request in requests:
            inputs = {name: _scalar(request, name) for name in INPUTS}
            sender = request.get_response_sender()
            self.pool.submit(self._handle, inputs, sender).add_done_callback(_log_failure)
        return None

    def _handle(self, inputs: dict[str, Any], sender: Any) -> None:
        """Serve one request; whatever happens, its last response carries FINAL."""
        try:
            stats = self._merge(inputs, sender)
        except self.invalid_request as exc:
            self._fail(sender, "invalid", pb_utils.TritonError(
                str(exc), pb_utils.TritonError.INVALID_ARG))
            return
        except self.cancelled:
            self._fail(sender, "cancelled", pb_utils.TritonError(
                "request cancelled by the client", pb_utils.TritonError.CANCELLED))
            return
        except Exception as exc:  # the client must always get a final response
            pb_utils.Logger.log_error(f"fast_apply: {type(exc).__name__}: {exc}")
            self._fail(sender, "error", pb_utils.TritonError(
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
            sender.send(pb_utils.InferenceResponse(
                output_tensors=[_text_tensor("merged_code", delta)]))

        result = self.service.apply(
            inputs["initial_code"], inputs["edit_snippet"], inputs["instruction"],
            max_tokens=inputs["max_tokens"], on_delta=on_delta if stream else None,
            is_cancelled=sender.is_cancelled)
        stats: dict[str, Any] = result.stats.to_dict()
        sender.send(pb_utils.InferenceResponse(output_tensors=[
            _text_tensor("merged_code", "" if stream else result.merged_code),
            _text_tensor("stats", json.dumps(stats))]), flags=FINAL)
        return stats

    def _fail(self, sender: Any, outcome: str, error: Any) -> None:
        self.metrics.add({}, outcome)
        sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)

    def finalize(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.metrics.flush()
