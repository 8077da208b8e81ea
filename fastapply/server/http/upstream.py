"""A small HTTP/1.1 client of one upstream server, for :mod:`fastapply.server.http.guard`.

It only ever talks to tritonserver's HTTP port on loopback, so it does little: keeps
connections alive for the next request, hands a response on as it arrives (a
``generate_stream`` answer is relayed event by event, never buffered), and aborts a
request nobody waits for any more by closing its connection, which is how an HTTP
client tells Triton it went away (Triton then cancels a streamed generation).

Built on asyncio streams and httptools (llhttp, the parser uvicorn already uses) rather
than a general client such as httpx or aiohttp, because the guard's budget is about a
millisecond per request and a general client spends a good part of that on its own.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncGenerator
from typing import Any

#: Headers that describe one connection, not the message: never forwarded either way.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection",
                        b"transfer-encoding", b"te", b"trailer", b"upgrade"})
#: Request headers not forwarded: ``expect`` (uvicorn already answered the client's
#: 100-continue) and content-length (set for the body actually sent).
REQUEST_DROP = HOP_BY_HOP | {b"expect", b"content-length"}
#: Bytes read from the upstream socket at a time.
READ_SIZE = 256 * 1024


class UpstreamError(ConnectionError):
    """The upstream server could not be reached, or broke off its answer."""


class _Parsed:
    """httptools' callbacks for one response: what has arrived so far."""

    __slots__ = ("body", "done", "headers", "headers_done", "keep_alive", "parser")

    def __init__(self) -> None:
        self.parser: Any = None  # the httptools parser these callbacks belong to
        self.keep_alive = False  # the server keeps the connection open after this answer
        self.headers: list[tuple[bytes, bytes]] = []  # as sent, in order
        self.headers_done = False
        self.body: list[bytes] = []  # parts not handed on yet (de-chunked)
        self.done = False  # the whole response is in

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        # llhttp answers this from the headers, and only until the message is complete
        self.keep_alive = bool(self.parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Exchange:
    """One request and its response, on a connection of ``upstream``'s.

    ``await send(...)`` writes the request and reads up to the end of the response's
    headers (``status``, ``headers``); ``chunks()`` yields the body as it arrives and
    gives the connection back for reuse once the response is complete. ``abort()``
    (from any task) closes the connection: a pending read ends, and Triton sees the
    client leave.
    """

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.aborted = False
        self._conn: Connection | None = None
        self._parsed = _Parsed()
        self._parser: Any = None
        self._head = False  # a HEAD request: its response has no body whatever it says

    async def send(self, method: str, target: bytes, headers: list[tuple[bytes, bytes]],
                   body: bytes) -> None:
        """Send the request; return once the response's status and headers are in. A
        kept-alive connection the server closed meanwhile is retried once, fresh."""
        head = [f"{method} ".encode(), target, b" HTTP/1.1\r\n"]
        for name, value in headers:
            if name.lower() not in REQUEST_DROP:
                head += [name, b": ", value, b"\r\n"]
        if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            head.append(b"content-length: %d\r\n" % len(body))
        request = b"".join(head) + b"\r\n" + body
        self._head = method == "HEAD"
        while True:
            reused = bool(self.upstream.idle)
            try:
                self._conn = self.upstream.idle.pop() if reused else await self.upstream.open()
                if self.aborted:
                    raise UpstreamError("the request was aborted")
                self._start_response()
                self._conn[1].write(request)
                await self._conn[1].drain()
                if await self._read_until(lambda: self._parsed.headers_done):
                    break
                why: object = "it closed the connection"
            except UpstreamError:
                self._close()
                raise
            except OSError as exc:  # refused, reset: ConnectionError is an OSError
                why = exc
            self._close()  # nothing came back: on a reused connection, try a fresh one
            if not reused or self.aborted:
                raise UpstreamError("the request was aborted" if self.aborted else
                                    f"tritonserver did not answer at {self.upstream.host}:"
                                    f"{self.upstream.port} ({why}); it may be starting or "
                                    f"stopping: try again shortly")
        self.status = int(self._parser.get_status_code())
        self.headers = self._parsed.headers

    def _start_response(self) -> None:
        import httptools

        self._parsed = _Parsed()
        self._parser = self._parsed.parser = httptools.HttpResponseParser(self._parsed)

    async def _read_until(self, condition: Any) -> bool:
        """Feed the parser until ``condition()``: True; False if the connection ended
        before any byte came; UpstreamError if it ended (or made no sense) later."""
        import httptools

        assert self._conn is not None
        reader = self._conn[0]
        started = False
        while not condition():
            data = await reader.read(READ_SIZE)
            if not data:
                if not started:
                    return False
                raise UpstreamError("the request was aborted" if self.aborted else
                                    "tritonserver closed the connection mid-answer")
            started = True
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise UpstreamError(f"tritonserver's answer is not HTTP/1.1: {exc}") from None
        return True

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The response body as it arrives (de-chunked); the connection goes back to the
        pool after the last part when the server keeps it alive."""
        parsed = self._parsed
        try:
            while True:
                if parsed.body:
                    parts, parsed.body = parsed.body, []
                    yield b"".join(parts)
                if parsed.done or self._head:
                    break
                try:
                    started = await self._read_until(lambda: parsed.body or parsed.done)
                except UpstreamError:
                    raise
                except OSError as exc:
                    raise UpstreamError(f"tritonserver broke off its answer ({exc})") from None
                if not started:
                    raise UpstreamError("the request was aborted" if self.aborted else
                                        "tritonserver closed the connection mid-answer")
        finally:
            if parsed.done and not self._head and not self.aborted and parsed.keep_alive \
                    and self._conn is not None:
                self.upstream.give_back(self._conn)
                self._conn = None
            else:
                self._close()

    def abort(self) -> None:
        """Close the connection now (the client left): Triton cancels the request."""
        self.aborted = True
        self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn[1].transport.abort()


class Upstream:
    """Kept-alive connections to one HTTP server (``host``:``port``)."""

    def __init__(self, host: str, port: int, max_idle: int = 64) -> None:
        self.host = host
        self.port = port
        self.max_idle = max_idle
        self.idle: collections.deque[Connection] = collections.deque()

    async def open(self) -> Connection:
        import socket

        reader, writer = await asyncio.open_connection(self.host, self.port)
        sock = writer.get_extra_info("socket")
        if sock is not None:  # small requests and answers go out at once
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    def give_back(self, conn: Connection) -> None:
        if len(self.idle) < self.max_idle and not conn[1].is_closing():
            self.idle.append(conn)
        else:
            conn[1].transport.abort()

    def exchange(self) -> Exchange:
        return Exchange(self)

    async def get(self, target: str) -> tuple[int, bytes]:
        """(status, body) of ``GET target``."""
        exchange = self.exchange()
        await exchange.send("GET", target.encode(), [(b"host", self.host.encode())], b"")
        return exchange.status, b"".join([part async for part in exchange.chunks()])

    def close(self) -> None:
        while self.idle:
            self.idle.pop()[1].transport.abort()
