"""FastApplyClient over Triton's gRPC stream (the generated stub, no tritonclient wrapper).

The fast_apply model is decoupled, so Triton refuses unary ``ModelInfer`` for it: every
call goes through the bidirectional ``ModelStreamInfer`` stream. One client keeps one
stream open and runs one request at a time on it: a request from another thread waits
for the current one (at most ``timeout_s``); a new request from the thread that stopped
reading a stream drops that stream (the server cancels its request). Use one client per
thread or greenlet for concurrency, as the load test does.

A file the server did not finish (``max_tokens`` or the context ran out) is a
FastApplyError, never a result: the server refuses it, and the client also refuses a
final answer whose ``stats.finish_reason`` is not complete (servers before that fix).

Why not ``tritonclient.grpc.InferenceServerClient.start_stream``: it hands every
response from a reader thread to a callback and on to the caller through a queue, and
builds tensors through numpy object arrays. Here the calling thread reads the stream
itself and the tensors are raw bytes (BYTES: 4-byte little-endian length, then data).
Interleaved on one server (500-line edit, 2-core machine, 200 requests each), serving
overhead went 2.17 -> 1.88, 1.97 -> 1.64 and 2.11 -> 1.84 ms in three runs; timestamps
in the server put ~0.1 ms of it before ``execute`` and ~0.2 ms after the response is
sent. A new stream per request cost 1.5-2 ms more (stream setup and a request thread
each time), and grpc.aio was no faster, so one stream stays open, read synchronously,
and a watchdog thread enforces ``timeout_s``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import struct
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from typing import Any

from fastapply.metrics import Stats
from fastapply.service import ApplyResult  # the same result type in and out of process

__all__ = ["ApplyResult", "FastApplyClient", "FastApplyError", "Stream"]

MODEL_NAME = "fast_apply"
#: Environment variable a client reads its API key from (``fastapply serve --api-key``).
API_KEY_ENV = "FASTAPPLY_API_KEY"
#: The header that carries the API key on Triton's HTTP port; on gRPC Triton expects it
#: behind its restricted-protocol prefix (GRPC_KEY_HEADER).
API_KEY_HEADER = "fastapply-api-key"
GRPC_KEY_HEADER = "triton-grpc-protocol-" + API_KEY_HEADER
#: What a refusal for a missing or unknown key says (never the key itself).
NO_KEY = (f"the server needs an API key it knows: set ${API_KEY_ENV} (or pass api_key=, "
          f"fastapply apply --api-key) to one of the keys it was started with")

#: Triton accepts and returns messages up to 2 GiB (tritonclient's own setting); gRPC's
#: 4 MiB default would refuse a merged file near the server's input limit.
_MAX_MESSAGE = 2**31 - 1
_CHANNEL_OPTIONS = [("grpc.max_send_message_length", _MAX_MESSAGE),
                    ("grpc.max_receive_message_length", _MAX_MESSAGE)]


class FastApplyError(RuntimeError):
    """A failed request; ``str(err)`` is the server's own message when it sent one.

    ``reported`` is True when the server answered the request with this error (bad input,
    its own fault), False for transport failures (unreachable, stream broken, timed out).
    """

    def __init__(self, message: str, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class FastApplyTimeout(FastApplyError):
    """No response from the server within the client's ``timeout_s``."""


class Stream:
    """Iterates text deltas; ``stats`` (and ``merged_code``) are set once exhausted.

    A request that fails after some deltas (e.g. the file was cut at ``max_tokens``)
    raises FastApplyError at the end: ``merged_code`` then holds a fragment, not a file.
    Stopping early: ``close()`` it (or use it as a context manager) to cancel the
    request and free the client for other threads.
    """

    def __init__(self, chunks: Generator[tuple[str, Stats | None], None, None]) -> None:
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

    def drain(self) -> str | None:
        """Read to the end; None, or the message of the error the stream ended with.

        For parity checks of models that rarely finish a file (the tiny random model):
        after an error ``merged_code`` is the fragment streamed before it, never a file.
        """
        try:
            for _ in self:
                pass
        except FastApplyError as exc:
            return str(exc)
        return None

    def close(self) -> None:
        """Stop reading: the server cancels the request if it is still running."""
        self._chunks.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bytes_element(text: str) -> bytes:
    """One BYTES tensor element in Triton's raw layout: 4-byte little-endian length, data."""
    data = text.encode("utf-8")
    return struct.pack("<I", len(data)) + data


def _first_bytes_element(raw: bytes) -> bytes:
    (length,) = struct.unpack_from("<I", raw)
    return raw[4:4 + length]


def _outputs(result: Any) -> dict[str, bytes]:
    """Output name -> its (single) BYTES element. Triton sends tensors as raw contents;
    typed ``contents`` are read too, as the protocol allows them."""
    raw = result.raw_output_contents
    return {tensor.name: (_first_bytes_element(raw[i]) if i < len(raw)
                          else tensor.contents.bytes_contents[0])
            for i, tensor in enumerate(result.outputs)}


class _Watchdog:
    """Cancels the stream when an awaited response is later than ``timeout_s``.

    gRPC's streaming iterator has no per-message timeout, so one thread per client
    waits for the current deadline and cancels the call, which makes the blocked read
    raise. Requests only set the deadline (no wake-up unless the timeout shrank): when idle the
    thread sleeps ``timeout_s`` at a time, so it is always awake before a new deadline.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._call: Any = None  # the call awaiting a response, else None
        self._deadline = 0.0
        self._expired = False
        self._cancelled: Any = None  # the last call cancelled for lateness (cancel pending)
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self, call: Any, timeout_s: float) -> None:
        """A response is awaited on ``call`` from now on, for at most ``timeout_s``."""
        with self._cond:
            # A call whose deadline passed is being cancelled (outside the lock): a response
            # that slipped in before the cancel does not make its next read on time.
            self._call, self._expired = call, call is self._cancelled
            if timeout_s < self.timeout_s:  # the idle thread sleeps timeout_s at a time
                self._cond.notify()
            self.timeout_s = timeout_s
            self._deadline = time.monotonic() + timeout_s
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="fastapply-client-watchdog")
                self._thread.start()

    def disarm(self) -> bool:
        """Nothing awaited any more; True if the deadline had passed and the call was cancelled."""
        with self._cond:
            self._call = None
            return self._expired

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            late = None
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                if self._call is not None and now >= self._deadline:
                    late, self._call, self._expired = self._call, None, True
                    self._cancelled = late
                else:
                    self._cond.wait(self._deadline - now if self._call is not None
                                    else self.timeout_s)
            if late is not None:
                late.cancel()


class _Turn:
    """One request's hold on the client's stream."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()  # the thread (greenlet) that started it
        self.superseded = False  # a newer request of the same thread took the stream


class FastApplyClient:
    """Client of one fastapply server at ``url`` (``HOST:PORT`` of Triton's gRPC port)."""

    def __init__(self, url: str, timeout_s: float = 300.0, model_name: str = MODEL_NAME,
                 connect_timeout_s: float = 10.0, api_key: str | None = None) -> None:
        import os

        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        self.url = url
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
        #: gRPC metadata of every inference call: the API key, where one is set.
        self._metadata: tuple[tuple[str, str], ...] = \
            ((GRPC_KEY_HEADER, key.strip()),) if key.strip() else ()
        self.timeout_s = timeout_s
        self.model_name = model_name
        self._grpc = grpc
        self._pb = service_pb2
        self._channel = grpc.insecure_channel(url, options=_CHANNEL_OPTIONS)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._turns = threading.Condition()  # guards _turn
        self._turn: _Turn | None = None  # the request that owns the stream now
        self._watchdog = _Watchdog(timeout_s)
        self._requests: queue.SimpleQueue[Any] | None = None  # feeds the open stream
        self._call: Any = None  # the open stream: its responses, read by the caller
        try:
            live = self._stub.ServerLive(service_pb2.ServerLiveRequest(),
                                         timeout=connect_timeout_s).live
        except grpc.RpcError as exc:
            self._channel.close()
            raise FastApplyError(f"cannot reach a fastapply server at {url}: "
                                 f"{exc.details() or exc.code()}") from None
        if not live:
            self._channel.close()
            raise FastApplyError(f"the server at {url} is not live")

    # -- plumbing -----------------------------------------------------------------------
    def _ensure_stream(self) -> Any:
        if self._call is not None and self._call.done():  # cancelled (cancel()) or broken
            self._reset_stream()
        if self._call is None:
            # queue.SimpleQueue is looked up here, not imported: under gevent's monkey
            # patching (the load test) it must be gevent's cooperative queue.
            self._requests = queue.SimpleQueue()
            # gRPC feeds the requests from a thread of its own; None ends the stream.
            self._call = self._stub.ModelStreamInfer(iter(self._requests.get, None),
                                                     metadata=self._metadata)
        return self._call

    def _reset_stream(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            with contextlib.suppress(Exception):  # closing a broken stream may fail too
                call.cancel()
            if self._requests is not None:
                self._requests.put(None)  # lets gRPC's request thread finish

    def _request(self, request_id: str, initial_code: str, edit_snippet: str,
                 instruction: str | None, stream: bool, max_tokens: int | None) -> Any:
        request = self._pb.ModelInferRequest(model_name=self.model_name, id=request_id)
        # Every request ends with a response flagged final (also an empty one).
        request.parameters["triton_enable_empty_final_response"].bool_param = True

        def add(name: str, datatype: str, raw: bytes) -> None:
            request.inputs.add(name=name, datatype=datatype, shape=[1])
            request.raw_input_contents.append(raw)

        add("initial_code", "BYTES", _bytes_element(initial_code))
        add("edit_snippet", "BYTES", _bytes_element(edit_snippet))
        if instruction is not None:
            add("instruction", "BYTES", _bytes_element(instruction))
        add("stream", "BOOL", b"\x01" if stream else b"\x00")
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) \
                    or not -2**63 <= max_tokens < 2**63:
                raise FastApplyError(f"max_tokens is {max_tokens!r}; send a whole number of "
                                     f"tokens (the server accepts 1 to its context limit)")
            add("max_tokens", "INT64", struct.pack("<q", max_tokens))
        return request

    def _take_turn(self) -> _Turn:
        """Wait until no other thread's request owns the stream (at most ``timeout_s``).

        A request of this same thread that still owns it was abandoned (a stream left
        unread: the thread is here, not reading it), so it is dropped, not waited for.
        """
        deadline = time.monotonic() + self.timeout_s
        with self._turns:
            while self._turn is not None and self._turn.thread != threading.get_ident():
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    raise FastApplyError(
                        f"the client is busy: another thread's request on it did not finish "
                        f"within {self.timeout_s:g} s; use one client per thread, and close() "
                        f"a stream you stop reading")
                self._turns.wait(left_s)
            if self._turn is not None:
                self._turn.superseded = True
                self._reset_stream()
            self._turn = _Turn()
            return self._turn

    def _end_turn(self, turn: _Turn, finished: bool) -> None:
        with self._turns:
            if self._turn is not turn:
                return  # superseded: the stream is a newer request's now
            if not finished:  # abandoned mid-stream, timed out or broken: drop the stream
                self._reset_stream()
            self._turn = None
            self._turns.notify()

    def _run(self, initial_code: str, edit_snippet: str, instruction: str | None,
             stream: bool, max_tokens: int | None
             ) -> Generator[tuple[str, Stats | None], None, None]:
        request_id = uuid.uuid4().hex
        request = self._request(request_id, initial_code, edit_snippet, instruction, stream,
                                max_tokens)
        turn = self._take_turn()
        finished = False
        try:
            call = self._ensure_stream()
            assert self._requests is not None
            self._requests.put(request)
            while True:
                if turn.superseded:
                    raise FastApplyError(
                        "this stream was abandoned: the same thread started another request "
                        "on the client before reading it to the end")
                response = self._next_response(call)
                if response.error_message:
                    # The request's own error: the stream stays usable.
                    finished = True
                    raise FastApplyError(response.error_message, reported=True)
                result = response.infer_response
                if result.id != request_id:
                    continue  # a late answer to an abandoned request
                outputs = _outputs(result)
                delta = outputs.get("merged_code")
                text = delta.decode("utf-8") if delta is not None else ""
                stats = outputs.get("stats")
                parsed = Stats.from_dict(json.loads(stats)) if stats is not None else None
                final = result.parameters.get("triton_final_response")
                finished = final is not None and final.bool_param
                if parsed is not None and not parsed.complete:
                    raise FastApplyError(
                        f"the server returned an incomplete file (finish_reason="
                        f"{parsed.finish_reason!r} after {parsed.completion_tokens} tokens); "
                        f"refused: send a larger max_tokens or leave it out")
                yield text, parsed
                if finished:
                    return
        finally:
            self._end_turn(turn, finished)

    def _next_response(self, call: Any) -> Any:
        self._watchdog.arm(call, self.timeout_s)
        try:
            return next(call)
        except self._grpc.RpcError as exc:
            if self._watchdog.disarm():
                raise FastApplyTimeout(f"no answer from {self.url} within {self.timeout_s:g} s"
                                       ) from None
            details = exc.details() or str(exc.code())
            if "restricted" in details and API_KEY_HEADER in details:
                # Triton's restricted protocol: no key, or not the server's
                raise FastApplyError(f"{self.url} refused the request: {NO_KEY}",
                                     reported=True) from None
            raise FastApplyError(f"stream to {self.url} failed: {details}") from None
        except StopIteration:
            raise FastApplyError(f"the server at {self.url} closed the stream") from None
        finally:
            self._watchdog.disarm()

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

    def cancel(self) -> None:
        """Abandon the request in progress, from any thread: the open stream is cancelled
        (Triton sees the request cancelled) and the caller blocked on it gets a
        FastApplyError; the next request opens a new stream."""
        call = self._call
        if call is not None:
            call.cancel()

    def close(self) -> None:
        with self._turns:
            self._turn = None
            self._reset_stream()
            self._turns.notify_all()
        self._watchdog.close()
        self._channel.close()

    def __enter__(self) -> FastApplyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
