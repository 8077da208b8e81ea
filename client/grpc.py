"""FastApplyClient over the tritonclient gRPC stream.

The fast_apply model is decoupled, so Triton refuses unary ``ModelInfer`` for it: every
call goes through the bidirectional stream. One client keeps one stream open and runs
one request at a time on it (a lock serialises callers); use one client per thread or
greenlet for concurrency, as the load test does.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapply.metrics import Stats

MODEL_NAME = "fast_apply"


class FastApplyError(RuntimeError):
    """A failed request; ``str(err)`` is the server's own message when it sent one."""


@dataclass
class ApplyResult:
    """The merged file and the server's statistics for the request."""

    merged_code: str
    stats: Stats = field(default_factory=Stats)


class Stream:
    """Iterates text deltas; ``stats`` (and ``merged_code``) are set once exhausted."""

    def __init__(self, chunks: Iterator[tuple[str, Stats | None]]) -> None:
        self._chunks = chunks
        self.stats: Stats | None = None
        self.merged_code = ""

    def __iter__(self) -> Iterator[str]:
        for delta, stats in self._chunks:
            if delta:
                self.merged_code += delta
                yield delta
            if stats is not None:
                self.stats = stats


def _message(error: Any) -> str:
    """The server's own message from a tritonclient error."""
    message = error.message() if hasattr(error, "message") else None
    return str(message or error)


class FastApplyClient:
    """Client of one fastapply server at ``url`` (``HOST:PORT`` of Triton's gRPC port)."""

    def __init__(self, url: str, timeout_s: float = 300.0, model_name: str = MODEL_NAME,
                 connect_timeout_s: float = 10.0) -> None:
        import tritonclient.grpc as grpcclient

        self.url = url
        self.timeout_s = timeout_s
        self.model_name = model_name
        self._grpc = grpcclient
        self._client = grpcclient.InferenceServerClient(url=url)
        self._lock = threading.Lock()
        self._responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self._streaming = False
        try:
            live = self._client.is_server_live(client_timeout=connect_timeout_s)
        except Exception as exc:  # tritonclient raises its own exception types
            self._client.close()
            raise FastApplyError(f"cannot reach a fastapply server at {url}: {exc}") from None
        if not live:
            self._client.close()
            raise FastApplyError(f"the server at {url} is not live")

    # -- plumbing -----------------------------------------------------------------------
    def _ensure_stream(self) -> None:
        if not self._streaming:
            self._responses = queue.Queue()
            self._client.start_stream(
                callback=lambda result, error: self._responses.put((result, error)))
            self._streaming = True

    def _reset_stream(self) -> None:
        if self._streaming:
            with contextlib.suppress(Exception):  # closing a broken stream may fail too
                self._client.stop_stream(cancel_requests=True)
            self._streaming = False

    def _inputs(self, initial_code: str, edit_snippet: str, instruction: str | None,
                stream: bool, max_tokens: int | None) -> list[Any]:
        import numpy as np

        def text(name: str, value: str) -> Any:
            t = self._grpc.InferInput(name, [1], "BYTES")
            t.set_data_from_numpy(np.array([value.encode("utf-8")], dtype=np.object_))
            return t

        inputs = [text("initial_code", initial_code), text("edit_snippet", edit_snippet)]
        if instruction is not None:
            inputs.append(text("instruction", instruction))
        flag = self._grpc.InferInput("stream", [1], "BOOL")
        flag.set_data_from_numpy(np.array([stream], dtype=bool))
        inputs.append(flag)
        if max_tokens is not None:
            budget = self._grpc.InferInput("max_tokens", [1], "INT32")
            budget.set_data_from_numpy(np.array([max_tokens], dtype=np.int32))
            inputs.append(budget)
        return inputs

    def _run(self, initial_code: str, edit_snippet: str, instruction: str | None,
             stream: bool, max_tokens: int | None) -> Iterator[tuple[str, Stats | None]]:
        with self._lock:
            self._ensure_stream()
            request_id = uuid.uuid4().hex
            try:
                self._client.async_stream_infer(
                    self.model_name,
                    self._inputs(initial_code, edit_snippet, instruction, stream, max_tokens),
                    request_id=request_id, enable_empty_final_response=True)
            except Exception as exc:
                self._reset_stream()
                raise FastApplyError(f"could not send the request to {self.url}: {exc}") from None
            finished = False
            try:
                while True:
                    result, error = self._next_response()
                    if error is not None:
                        # A request's own error leaves the stream usable; a gRPC one
                        # (server gone, stream broken) carries a status: drop the stream.
                        finished = getattr(error, "status", lambda: None)() is None
                        raise FastApplyError(_message(error))
                    response = result.get_response()
                    if response.id != request_id:
                        continue  # a late answer to an abandoned request
                    delta = result.as_numpy("merged_code")
                    stats = result.as_numpy("stats")
                    text = delta.reshape(-1)[0].decode("utf-8") if delta is not None else ""
                    parsed = (Stats.from_dict(json.loads(stats.reshape(-1)[0]))
                              if stats is not None else None)
                    final = response.parameters.get("triton_final_response")
                    finished = final is not None and final.bool_param
                    yield text, parsed
                    if finished:
                        return
            finally:
                if not finished:  # abandoned mid-stream or timed out: drop the stream
                    self._reset_stream()

    def _next_response(self) -> tuple[Any, Any]:
        try:
            return self._responses.get(timeout=self.timeout_s)
        except queue.Empty:
            raise FastApplyError(f"no answer from {self.url} within {self.timeout_s:g} s"
                                 ) from None

    # -- API --------------------------------------------------------------------------
    def apply(self, initial_code: str, edit_snippet: str, instruction: str | None = None,
              max_tokens: int | None = None) -> ApplyResult:
        """Merge ``edit_snippet`` into ``initial_code``; raise FastApplyError on failure."""
        merged, stats = "", None
        for text, s in self._run(initial_code, edit_snippet, instruction, False, max_tokens):
            merged += text
            stats = s or stats
        return ApplyResult(merged, stats or Stats())

    def stream(self, initial_code: str, edit_snippet: str, instruction: str | None = None,
               max_tokens: int | None = None) -> Stream:
        """Text deltas as the server produces them; ``.stats`` once exhausted."""
        return Stream(self._run(initial_code, edit_snippet, instruction, True, max_tokens))

    def close(self) -> None:
        self._reset_stream()
        self._client.close()

    def __enter__(self) -> FastApplyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
