"""The front's way to Triton: :class:`Upstream` sends each merge as one request on Triton's
gRPC stream through :class:`fastapply.client.FastApplyClient`, whose calls block, so they run
on a thread pool, one client per request in flight (idle clients are kept for the next
request); a stream is read one delta at a time, only once the previous one was handed to
the socket, and a client that goes away cancels the upstream request."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapply.server.openai.api import MergeRequest
from fastapply.server.openai.errors import ApiError, check_complete, upstream_error
from fastapply.server.openai.responses import sse

#: Requests in flight to Triton at once (each holds a gRPC client and a thread).
DEFAULT_CONCURRENCY = 32


class Upstream:
    """gRPC clients of one Triton server and the threads their blocking calls run on."""

    def __init__(self, grpc_url: str, concurrency: int = DEFAULT_CONCURRENCY,
                 timeout_s: float = 300.0, api_key: str | None = None) -> None:
        self.grpc_url = grpc_url
        #: The key Triton's gRPC port takes ("" where it takes none).
        self.api_key = api_key or ""
        self.timeout_s = timeout_s
        # One thread per request in flight, plus one for clean-ups after cancellations.
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=concurrency + 1, thread_name_prefix="fastapply-openai")
        self.idle: collections.deque[Any] = collections.deque()  # FastApplyClients
        self.slots = asyncio.Semaphore(concurrency)

    def _connect(self) -> Any:
        from fastapply.client import FastApplyClient

        return FastApplyClient(self.grpc_url, timeout_s=self.timeout_s, api_key=self.api_key)

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.wrap_future(self.pool.submit(fn, *args))

    async def _acquire(self) -> Any:
        from fastapply.client import FastApplyError

        await self.slots.acquire()
        try:
            return self.idle.pop() if self.idle else await self._call(self._connect)
        except FastApplyError as exc:
            self.slots.release()
            raise upstream_error(str(exc), exc.reported) from None
        except BaseException:
            self.slots.release()
            raise

    def _give_back(self, client: Any, pending: concurrent.futures.Future[Any] | None,
                   stream: Any = None) -> None:
        """Return ``client`` to the idle list once its call ``pending`` has ended (called
        on the event loop, from the request's clean-up)."""
        def finish() -> None:
            if pending is not None:
                concurrent.futures.wait([pending])
            if stream is not None:
                stream.close()
            self.idle.append(client)

        if pending is None or pending.done():
            finish()
            self.slots.release()
        else:  # cancelled mid-call: the call fails soon (client.cancel()); wait off the loop
            loop = asyncio.get_running_loop()
            self.pool.submit(finish).add_done_callback(
                lambda _: loop.call_soon_threadsafe(self.slots.release))

    async def apply(self, req: MergeRequest, receive: Callable[[], Any]) -> Any:
        """The whole merge (an ApplyResult), or None if the HTTP client went away first."""
        from fastapply.client import FastApplyError

        client = await self._acquire()
        pending = self.pool.submit(client.apply, req.initial_code, req.edit_snippet,
                                   req.instruction, req.max_tokens)
        waiter = asyncio.wrap_future(pending)
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((waiter, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not waiter.done():  # the client left, or this task was cancelled
                client.cancel()
                waiter.cancel()
            self._give_back(client, pending)
        if waiter.cancelled():
            return None
        try:
            return waiter.result()
        except FastApplyError as exc:
            raise upstream_error(str(exc), exc.reported) from None

    async def stream(self, req: MergeRequest, events: Any) -> AsyncIterator[bytes]:
        """The events of a streamed merge. The first item comes once the first delta is
        in (await it before answering: bad input still raises ApiError, so it becomes an
        HTTP error); from then on a failure is an error event."""
        from fastapply.client import FastApplyError

        client = await self._acquire()
        stream = client.stream(req.initial_code, req.edit_snippet, req.instruction,
                               req.max_tokens)
        chunks = iter(stream)
        pending = self.pool.submit(next, chunks, None)
        ended = False
        try:
            try:
                text = await asyncio.wrap_future(pending)
            except FastApplyError as exc:  # before any output: the caller answers an error
                ended = True
                raise upstream_error(str(exc), exc.reported) from None
            yield events.start() + (events.delta(text) if text is not None else b"")
            try:
                while text is not None:
                    pending = self.pool.submit(next, chunks, None)
                    text = await asyncio.wrap_future(pending)
                    if text is not None:
                        yield events.delta(text)
                ended = True
                yield events.end(check_complete(stream.stats))
            except FastApplyError as exc:
                ended = True
                yield sse(upstream_error(str(exc), exc.reported).body())
            except ApiError as exc:  # cut off by the token budget
                yield sse(exc.body())
        finally:
            if not ended:  # the HTTP client went away: stop the upstream request
                client.cancel()
            self._give_back(client, pending, stream)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        while self.idle:
            self.idle.pop().close()


async def _disconnected(receive: Callable[[], Any]) -> None:
    """Returns once the HTTP client has gone (the request body was already read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
