"""``generate`` through :mod:`fastapply.server.http.guard`: sent as a stream, answered whole.

Triton 2.51 never cancels a ``generate`` request whose client went away: the model
generated on to the end and counted a success. It cancels a ``generate_stream``, but
only when it next writes to the gone client. So for a model with a BOOL ``stream`` input
the guard sends a ``generate`` request to ``generate_stream`` with ``"stream": true``,
joins the events into the one JSON answer ``generate`` gives (text outputs concatenated,
the rest from the events as they come), and closes the upstream connection when its
client leaves: Triton cancels the request at the model's next delta.

Also: Triton answers a ``generate`` request that streams (``"stream": true``) with
status 200 and an error; the guard answers 400, saying to use ``generate_stream``.

>>> join_events([{"id": "r", "merged_code": "x = "}, {"merged_code": "1\\n", "stats": "{}"}],
...             ["merged_code", "stats"])
{'id': 'r', 'merged_code': 'x = 1\\n', 'stats': '{}'}
>>> late_error_status("the server is shutting down: ...")
503
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapply.server.http.upstream import Upstream, UpstreamError

Send = Callable[[dict[str, Any]], Awaitable[None]]


def join_events(events: list[dict[str, Any]], text_outputs: list[str]) -> dict[str, Any]:
    """The ``generate`` answer from a stream's events: each text output's pieces joined,
    every other key as its last event has it (key order as first seen)."""
    joined: dict[str, Any] = {}
    for event in events:
        for key, value in event.items():
            if key in text_outputs and isinstance(value, str):
                joined[key] = joined.get(key, "") + value
            else:
                joined[key] = value
    return joined


#: How the model's UNAVAILABLE answers at shutdown begin (model.py).
SHUTTING_DOWN = "the server is shutting down"


def late_error_status(message: str) -> int:
    """The status for an error the model sent after some deltas (by then the stream's
    own status, 200, is sent), or for its UNAVAILABLE at shutdown (Triton 2.51 answers
    that 400, as if the request were wrong): the model's wording tells its code
    (model.py: UNAVAILABLE at shutdown, INTERNAL for its own faults, else INVALID_ARG,
    such as a file cut off by max_tokens)."""
    lowered = message.lower()
    if lowered.startswith(SHUTTING_DOWN):
        return 503
    if lowered.startswith("internal error"):
        return 500
    return 400


async def respond_json(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _dumps(data: Any) -> bytes:
    # surrogateescape: bytes that were not UTF-8 (fastapply.server.http.checks.parse_body) go
    # back out as they came, for the model to name
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogateescape")


async def generate_as_stream(upstream: Upstream, target: bytes,
                             headers: list[tuple[bytes, bytes]], request: dict[str, Any],
                             text_outputs: list[str], send: Send,
                             client_gone: Callable[[Callable[[], None]], Awaitable[None]]
                             ) -> None:
    """Answer the ``generate`` request ``request`` (parsed, checked; ``target`` is its
    path) through ``generate_stream``. ``client_gone(then)`` returns once the client has
    left, after calling ``then()``."""
    if request.get("stream") in (True, [True]):
        await respond_json(send, 400, _dumps({"error": (
            "stream is true, and generate answers with one response: send the request to "
            "generate_stream, or leave stream out")}))
        return
    exchange = upstream.exchange()
    watcher = asyncio.ensure_future(client_gone(exchange.abort))
    events: list[dict[str, Any]] = []
    error = None
    try:
        await exchange.send("POST", target + b"_stream", headers,
                            _dumps({**request, "stream": True}))
        streamed = any(n.lower() == b"content-type" and v.startswith(b"text/event-stream")
                       for n, v in exchange.headers)
        buffer = b""
        # Leaving the loop early (an error event) closes the connection.
        async with contextlib.aclosing(exchange.chunks()) as parts:
            async for part in parts:
                buffer += part
                if not streamed:
                    continue
                *done, buffer = buffer.split(b"\n\n")
                new = [json.loads(e[len(b"data: "):]) for e in done if e.startswith(b"data: ")]
                events += new
                error = next((e["error"] for e in new if "error" in e), None)
                if error is not None:
                    break
    except UpstreamError as exc:
        if not exchange.aborted:  # else the client left: nobody to tell
            await respond_json(send, 502, _dumps({"error": str(exc)}))
        return
    finally:
        watcher.cancel()
    if not streamed:  # refused before the model ran: Triton's JSON error as it is
        await respond_json(send, exchange.status, buffer)
    elif error is not None:
        status = exchange.status if len(events) == 1 and not str(error).startswith(
            SHUTTING_DOWN) else late_error_status(str(error))
        await respond_json(send, status, _dumps({"error": error}))
    elif not events:
        await respond_json(send, 502, _dumps({"error": "tritonserver ended its answer "
                                                       "without a response"}))
    elif not all(name in events[-1] for name in text_outputs):
        # The model's last response carries every output (stats too): a stream that
        # ended without it holds a fragment, never an answer.
        await respond_json(send, 502, _dumps({"error": "tritonserver ended the answer "
                                                       "before its final response"}))
    else:
        await respond_json(send, exchange.status, _dumps(join_events(events, text_outputs)))
