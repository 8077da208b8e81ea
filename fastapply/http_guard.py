"""The HTTP port of ``fastapply serve``: Triton's HTTP API, with generate requests checked.

Triton 2.51's own JSON parsing of ``POST /v2/models/{model}/generate`` and
``generate_stream`` answers **500** for client errors it finds before the model runs
(malformed JSON, an empty body, a top-level array, a value of the wrong JSON type, a
number beyond INT64), with messages such as "attempt to access JSON non-boolean as
boolean" that name no field. This guard sits on the public HTTP port, in front of
tritonserver's HTTP bound to a loopback port of its own, and:

* for ``POST /v2/models/{model}[/versions/{v}]/generate[_stream]``, parses the body and
  refuses with **400** and Triton's error shape ``{"error": "..."}`` naming the field, what
  was sent and what to send, everything Triton would answer 500 (see :func:`parse_body`
  and :func:`check_request`; the inputs' names and types come from the model's metadata,
  ``GET /v2/models/{model}``, read once per model); a valid body goes to Triton as is;
* passes every other request through verbatim (method, path, headers, among them the
  operator's admin key, body), and every answer back as it arrives: status, headers,
  Triton's own 400s, a ``generate_stream``'s events one by one;
* closes the upstream request when its client goes away, so Triton cancels a streamed
  generation as it does for a direct client.

Run: ``fastapply serve`` starts it (``--http-guard off``: Triton's port as is), or in
front of a Triton started otherwise:
``python -m fastapply.http_guard --upstream 127.0.0.1:8000 --port 8080``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapply.http_generate import SHUTTING_DOWN, generate_as_stream
from fastapply.http_upstream import HOP_BY_HOP, Upstream, UpstreamError

#: The paths of Triton's generate extension (POST).
GENERATE_PATH = re.compile(
    r"/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[^/]+))?/generate(?:_stream)?")
#: Largest request body accepted, in bytes (413 above it): the model's input limit
#: (fastapply.service, 4 MiB by default) with room for JSON escapes and binary tensors.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
#: Longest header name or value tritonserver 2.51 takes (it resets the connection on
#: a longer one, which read as "tritonserver did not answer").
MAX_HEADER_BYTES = 8191
#: Inclusive value range of each integer tensor type.
INT_RANGES = {f"{kind}INT{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == ""
              else (0, 2 ** bits - 1) for kind in ("", "U") for bits in (8, 16, 32, 64)}
FLOAT_TYPES = ("FP16", "FP32", "FP64", "BF16")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _ClientLeft(Exception):
    """The client went away before it sent its whole request."""


class BadRequest(ValueError):
    """A client error in a generate request; the message says what to send instead."""


# -- the checks (pure functions) ----------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen = dict(pairs)
    if len(seen) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise BadRequest(f"the key {json.dumps(twice)} appears more than once in a JSON "
                         f"object of the request body; send each key once")
    return seen


def parse_body(body: bytes) -> dict[str, Any]:
    """The body of a generate request as a JSON object, or BadRequest saying what is wrong.

    >>> parse_body(b'{"initial_code": "x = 1\\\\n", "stream": true}')
    {'initial_code': 'x = 1\\n', 'stream': True}
    >>> parse_body(b'')
    Traceback (most recent call last):
    ...
    fastapply.http_guard.BadRequest: the request body is empty; send a JSON object ...
    >>> parse_body(b'{"stream": tru}')
    Traceback (most recent call last):
    ...
    fastapply.http_guard.BadRequest: the request body is not valid JSON (Expecting value at ...
    >>> parse_body(b'["x"]')
    Traceback (most recent call last):
    ...
    fastapply.http_guard.BadRequest: the request body is a JSON array; send a JSON object ...

    Work is linear in the body's size: a body that does not start with ``{`` is refused
    before it is parsed, and a parse stops at the first error. Bytes that are not UTF-8
    are left to the model, which names the input they are in.
    """
    text = body.decode("utf-8", "surrogateescape")
    start = text.lstrip(" \t\r\n")[:1]
    send = ("send a JSON object whose keys are the model's inputs, e.g. "
            '{"initial_code": "...", "edit_snippet": "..."}')
    if not start:
        raise BadRequest(f"the request body is empty; {send}")
    if start != "{":
        kind = {"[": "a JSON array", '"': "a JSON string", "n": "null", "t": "true",
                "f": "false"}.get(start, "a JSON number" if start in "-0123456789" else "")
        what = f"is {kind}" if kind else "is not a JSON object"
        raise BadRequest(f"the request body {what}; {send}")
    try:
        request = json.loads(text, object_pairs_hook=_no_duplicates,
                             parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}); {send}") from None
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"the request body nests JSON too deeply; {send}") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits()
        raise BadRequest(f"the request body holds a number of more digits than any input "
                         f"takes ({str(exc).split(':')[0]}); send smaller numbers") from None
    assert isinstance(request, dict)  # it starts with "{"
    where = lone_surrogate(request, body)
    if where is not None:
        raise BadRequest(f"the request body holds a lone UTF-16 surrogate {where}, which is "
                         f"no character (Triton's parser answers 500); escape a character "
                         f"outside the BMP as a pair (\\ud83d\\ude00) or send it as UTF-8")
    return request


_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(data: Any, body: bytes) -> str | None:
    """Where ``data``, parsed from the JSON ``body``, holds a lone UTF-16 surrogate (from
    an escape such as ``"\\ud800"``: Python's parser takes it, but it is no character and
    cannot be UTF-8 encoded), as ``"(\\ud800) in a string"``; None if none. Walks
    ``data`` (without recursion) only when ``body`` holds such an escape.

    >>> lone_surrogate({"a": ["x", {"b": "\\ud800"}]}, b'... \\\\uD800 ...')
    '(\\\\ud800) in a string'
    >>> lone_surrogate({"a": "\\U0001f600"}, b'"\\\\ud83d\\\\ude00"') is None
    True
    """
    if not _SURROGATE_ESCAPE.search(body):
        return None
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return f"(\\u{ord(found.group()):04x}) in a string"
    return None


def _refuse_constant(name: str) -> Any:
    raise BadRequest(f"the request body holds {name}, which JSON does not have; send numbers "
                     f"as digits")


def _describe(value: Any) -> str:
    """What a JSON value is, for a message: ``the string "yes"``, ``the number 5.5``."""
    if isinstance(value, str):
        shown = json.dumps(value[:40], ensure_ascii=False)
        return f"the string {shown}{'...' if len(value) > 40 else ''}"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        shown = str(value) if isinstance(value, float) or abs(value) < 10 ** 40 else \
            f"{str(value)[:40]}... ({len(str(abs(value)))} digits)"
        return f"the number {shown}"
    return {list: "an array", dict: "an object", type(None): "null"}.get(type(value), "?")


def _expected(dtype: str) -> str:
    if dtype in INT_RANGES:
        low, high = INT_RANGES[dtype]
        return f"a whole number from {low} to {high}"
    return {"BYTES": "a JSON string", "BOOL": "true or false"}.get(dtype, "a number")


def _fits(dtype: str, value: Any) -> bool:
    if dtype == "BYTES":
        return isinstance(value, str)
    if dtype == "BOOL":
        return isinstance(value, bool)
    if dtype in INT_RANGES:
        low, high = INT_RANGES[dtype]
        return type(value) is int and low <= value <= high
    if dtype in FLOAT_TYPES:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True  # a type Triton parses on its own terms


def check_request(request: dict[str, Any], inputs: dict[str, str], model: str) -> None:
    """Refuse (BadRequest) the values Triton's generate parsing would answer with a 500:
    an input of the wrong JSON type or out of its type's range (arrays of such values
    are tensors: each element is checked), a non-string ``id``, a non-object
    ``parameters``. Other keys are request parameters: Triton checks those itself.

    >>> inputs = {"initial_code": "BYTES", "stream": "BOOL", "max_tokens": "INT64"}
    >>> check_request({"initial_code": "x", "stream": True, "max_tokens": 5}, inputs, "m")
    >>> check_request({"stream": "yes"}, inputs, "m")
    Traceback (most recent call last):
    ...
    fastapply.http_guard.BadRequest: stream is the string "yes": send true or false (input ...
    >>> check_request({"max_tokens": [2 ** 63]}, inputs, "m")
    Traceback (most recent call last):
    ...
    fastapply.http_guard.BadRequest: max_tokens[0] is the number 9223372036854775808: send ...
    """
    for name, value in request.items():
        if name == "id" and not isinstance(value, str):
            raise BadRequest(f"id is {_describe(value)}: send the request id as a JSON "
                             f"string, or leave it out")
        if name == "parameters" and not isinstance(value, dict):
            raise BadRequest(f"parameters is {_describe(value)}: send a JSON object of "
                             f"parameters, e.g. {{\"name\": 1}}, or leave it out")
        dtype = inputs.get(name)
        if dtype is not None and name not in ("id", "parameters"):
            _check_value(name, value, dtype, model, name)


def _check_value(name: str, value: Any, dtype: str, model: str, where: str) -> None:
    if isinstance(value, list):  # a tensor's elements (Triton checks the shape)
        for i, item in enumerate(value):
            _check_value(name, item, dtype, model, f"{where}[{i}]")
    elif not _fits(dtype, value):
        raise BadRequest(f"{where} is {_describe(value)}: send {_expected(dtype)} (input "
                         f"{name} of model {model} is {dtype})")


# -- the ASGI application ---------------------------------------------------------------


async def _respond(send: Send, status: int, message: str) -> None:
    """An error in Triton's shape, ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI application: check generate requests, relay everything through
    ``upstream`` (tritonserver's HTTP port)."""

    def __init__(self, upstream: Upstream,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.upstream = upstream
        self.max_body_bytes = max_body_bytes
        #: metadata path -> ({input name: Triton datatype}, names of its BYTES outputs),
        #: read once per model
        self.models: dict[str, tuple[dict[str, str], list[str]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        for name, value in scope["headers"]:
            if max(len(name), len(value)) > MAX_HEADER_BYTES and name not in HOP_BY_HOP:
                part = "name" if len(name) > MAX_HEADER_BYTES else "value"
                await _respond(send, 431, f"a header's {part} ({name[:40].decode('latin-1')}"
                                          f"...) is {max(len(name), len(value))} bytes; "
                                          f"tritonserver takes header names and values of "
                                          f"up to {MAX_HEADER_BYTES} bytes: send a shorter one")
                return
        try:
            body = await self._read_body(scope, receive)
        except _ClientLeft:
            return
        if body is None:
            await _respond(send, 413, f"the request body is over {self.max_body_bytes} bytes; "
                                      f"send a smaller one")
            return
        if scope["method"] == "POST":
            match = GENERATE_PATH.fullmatch(scope["path"])
            if match is not None:
                try:
                    checked = await self._check(match, body)
                except BadRequest as exc:
                    await _respond(send, 400, str(exc))
                    return
                if checked is not None and not scope["path"].endswith("_stream") and \
                        checked[1].get("stream") == "BOOL":  # see fastapply.http_generate
                    await generate_as_stream(
                        self.upstream, scope["raw_path"] or scope["path"].encode(),
                        scope["headers"], checked[0], checked[2], send,
                        lambda then: _on_disconnect(receive, then))
                    return
        await self._relay(scope, receive, send, body)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.upstream.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole request body; None once it is over the limit (not read further)."""
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and \
                    int(value) > self.max_body_bytes:
                return None
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _ClientLeft
            part = message.get("body", b"")
            size += len(part)
            if size > self.max_body_bytes:
                return None
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _check(self, match: re.Match[str], body: bytes
                     ) -> tuple[dict[str, Any], dict[str, str], list[str]] | None:
        """Parse and check a generate request (BadRequest); (the request, the model's
        inputs, its BYTES outputs), or None where the model's metadata is unknown."""
        request = parse_body(body)
        model, version = match["model"], match["version"]
        path = f"/v2/models/{quote(model, safe='')}" + (
            f"/versions/{quote(version, safe='')}" if version else "")
        known = self.models.get(path)
        if known is None:
            try:
                status, answer = await self.upstream.get(path)
            except UpstreamError:
                return None  # the request itself will tell the client
            try:
                metadata = json.loads(answer)
                known = ({i["name"]: i["datatype"] for i in metadata["inputs"]},
                         [o["name"] for o in metadata["outputs"] if o["datatype"] == "BYTES"])
            except (ValueError, KeyError, TypeError):
                known = None
            if status != 200 or known is None:
                return None  # unknown model or version: Triton answers the request itself
            self.models[path] = known
        check_request(request, known[0], model)
        return request, *known

    async def _relay(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        """Send the request to Triton, its answer back as it comes; abort the upstream
        request when the client leaves."""
        target = scope["raw_path"] or scope["path"].encode()
        if scope["query_string"]:
            target += b"?" + scope["query_string"]
        exchange = self.upstream.exchange()
        watcher = asyncio.ensure_future(_on_disconnect(receive, exchange.abort))
        started = False  # the answer's status and headers went to the client
        try:
            try:
                await exchange.send(scope["method"], target, scope["headers"], body)
            except UpstreamError as exc:
                if not exchange.aborted:
                    await _respond(send, 502, str(exc))
                return
            async with contextlib.aclosing(exchange.chunks()) as parts:
                status, first = exchange.status, b""
                if status == 400:  # Triton 2.51 answers the model's UNAVAILABLE 400
                    first = await anext(parts, b"")
                    if b'{"error":"%s' % SHUTTING_DOWN.encode() in first[:64]:
                        status = 503
                await send({"type": "http.response.start", "status": status,
                            "headers": [(n, v) for n, v in exchange.headers
                                        if n.lower() not in HOP_BY_HOP]})
                started = True
                if first:
                    await send({"type": "http.response.body", "body": first,
                                "more_body": True})
                async for part in parts:
                    await send({"type": "http.response.body", "body": part,
                                "more_body": True})
            watcher.cancel()
            await send({"type": "http.response.body", "body": b""})
        except UpstreamError as exc:
            if not exchange.aborted and not started:
                await _respond(send, 502, str(exc))
            elif not exchange.aborted:  # else the client left: nobody to tell
                # Returning mid-answer makes uvicorn close the client's connection: the
                # answer ends cut off, never cleanly as if it were complete.
                logging.getLogger(__name__).warning(
                    "%s %s: %s; the client's answer is cut off", scope["method"],
                    scope["path"], exc)
        finally:
            watcher.cancel()


async def _on_disconnect(receive: Receive, then: Callable[[], None]) -> None:
    """Call ``then()`` once the client has gone (its request body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    then()


# -- running it -------------------------------------------------------------------------


def spawn(upstream: str, host: str, port: int, log_path: Path | None) -> Any:
    """``python -m fastapply.http_guard`` as a child process we own (fastapply.serving)."""
    from fastapply.serving import spawn_server

    return spawn_server([sys.executable, "-m", "fastapply.http_guard", "--upstream", upstream,
                         "--host", host, "--port", str(port)], log_path)


def stop(proc: Any, timeout_s: float = 10.0) -> str | None:
    """SIGTERM ``proc`` (a spawned guard), kill it if it lingers. Returns what went
    wrong, or None after a clean stop (uvicorn re-raises the SIGTERM once it closed)."""
    import signal
    import subprocess

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            return f"the HTTP guard did not stop within {timeout_s:g} s of SIGTERM; killed it"
    if proc.returncode in (0, -signal.SIGTERM):
        return None
    return f"the HTTP guard exited with status {proc.returncode}"


def main(argv: list[str] | None = None) -> int:
    from fastapply.processes import front_parser, positive, run_front

    parser = front_parser("python -m fastapply.http_guard", __doc__)
    parser.add_argument("--upstream", default="127.0.0.1:8000",
                        help="tritonserver's HTTP address, HOST:PORT (default 127.0.0.1:8000)")
    parser.add_argument("--max-body-bytes", type=positive(int), default=DEFAULT_MAX_BODY_BYTES,
                        help=f"largest request body, in bytes ({DEFAULT_MAX_BODY_BYTES})")
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    app = Guard(Upstream(host or "127.0.0.1", int(port)), args.max_body_bytes)
    # Triton's answers carry no server or date header; the guard adds none either.
    with contextlib.suppress(KeyboardInterrupt):
        run_front(app, args.host, args.port, server_header=False, date_header=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
