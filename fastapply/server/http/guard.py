"""The HTTP port of ``fastapply serve``: Triton's HTTP API, with generate requests checked.

Triton 2.51's own JSON parsing of ``POST /v2/models/{model}/generate`` and
``generate_stream`` answers **500** for client errors it finds before the model runs
(malformed JSON, an empty body, a top-level array, a value of the wrong JSON type, a
number beyond INT64), with messages such as "attempt to access JSON non-boolean as
boolean" that name no field. This guard sits on the public HTTP port, in front of
tritonserver's HTTP bound to a loopback port of its own, and:

* for ``POST /v2/models/{model}[/versions/{v}]/generate[_stream]``, parses the body and
  refuses with **400** and Triton's error shape ``{"error": "..."}`` naming the field, what
  was sent and what to send, everything Triton would answer 500 (the checks are
  :mod:`fastapply.server.http.checks`; the inputs' names and types come from the model's
  metadata, ``GET /v2/models/{model}``, read once per model); a valid ``generate_stream``
  body goes to Triton as is, a ``generate`` one as a stream
  (:mod:`fastapply.server.http.generate`, so that a client that leaves cancels it);
* passes every other request through verbatim (method, path, headers, among them the
  operator's admin key, body), and every answer back as it arrives: status, headers,
  Triton's own 400s, a ``generate_stream``'s events one by one. One header is changed:
  a body sent as ``application/x-www-form-urlencoded`` (curl's default for ``-d``) goes
  on as ``application/json``, because tritonserver's HTTP library parses such a body as
  form fields and dies (signal 11) on one of about 4 MiB or more (measured: 4,180,000
  bytes answered, 4,190,000 killed the server; as JSON, 30 MB is answered). Triton
  reads no form fields, so nothing else changes;
* closes the upstream request when its client goes away, so Triton cancels a streamed
  generation as it does for a direct client.

Run: ``fastapply serve`` starts it (``--http-guard off``: Triton's port as is), or in
front of a Triton started otherwise:
``python -m fastapply.server.http.guard --upstream 127.0.0.1:8000 --port 8080``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapply.server.auth import (
    API_KEY_HEADER,
    API_KEYS_ENV,
    REFUSAL,
    KeyCheck,
    api_keys,
    keys_env,
    presented,
)
from fastapply.server.http.checks import BadRequest, check_request, parse_body
from fastapply.server.http.generate import SHUTTING_DOWN, generate_as_stream
from fastapply.server.http.upstream import HOP_BY_HOP, Upstream, UpstreamError

#: The paths of Triton's generate extension (POST).
GENERATE_PATH = re.compile(
    r"/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[^/]+))?/generate(?:_stream)?")
#: Triton's inference routes (its restricted API group ``inference``): with API keys set,
#: a request to one needs a key (fastapply.server.auth).
INFERENCE_PATH = re.compile(
    r"/v2/models/[^/]+(?:/versions/[^/]+)?/(?:infer|generate|generate_stream)")
#: Largest request body accepted, in bytes (413 above it): the model's input limit
#: (fastapply.service, 4 MiB by default) with room for JSON escapes and binary tensors.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
#: Longest header name or value tritonserver 2.51 takes (it resets the connection on
#: a longer one, which read as "tritonserver did not answer").
MAX_HEADER_BYTES = 8191

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _ClientLeft(Exception):
    """The client went away before it sent its whole request."""


# -- the ASGI application ---------------------------------------------------------------


async def _respond(send: Send, status: int, message: str) -> None:
    """An error in Triton's shape, ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


#: The form content type tritonserver's HTTP library parses (and dies on when large).
_FORM = b"application/x-www-form-urlencoded"


def _as_json(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with a form content type replaced by JSON (see the module's doc).

    >>> _as_json([(b"Content-Type", b"application/x-www-form-urlencoded"), (b"a", b"b")])
    [(b'Content-Type', b'application/json'), (b'a', b'b')]
    """
    return [(n, b"application/json") if n.lower() == b"content-type" and
            v.strip().lower().startswith(_FORM) else (n, v) for n, v in headers]


def _with_key(body: bytes, key: str) -> bytes:
    """A generate request's JSON with the API key as a field of its own (a request
    parameter to the model, which checks it where several keys are live: Triton 2.51
    forwards no header to a generate request); any other body as it is (Triton refuses
    it, and the model finds no key).

    >>> _with_key(b'{"a": 1}', "k")
    b'{"a": 1, "fastapply-api-key": "k"}'
    """
    try:
        request = json.loads(body)
    except ValueError:
        return body
    if not isinstance(request, dict):
        return body
    return json.dumps({**request, API_KEY_HEADER: key}).encode()


class Guard:
    """The ASGI application: check generate requests, relay everything through
    ``upstream`` (tritonserver's HTTP port)."""

    def __init__(self, upstream: Upstream,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 keys: KeyCheck | None = None) -> None:
        self.upstream = upstream
        self.max_body_bytes = max_body_bytes
        #: The API keys an inference request must carry one of (none: open).
        self.keys = keys or KeyCheck(())
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
        if self.keys and INFERENCE_PATH.fullmatch(scope["path"]):
            headers = {n.decode("latin-1").lower(): v.decode("latin-1")
                       for n, v in scope["headers"]}
            if not self.keys.accepts(presented(headers)):
                await _respond(send, 401, REFUSAL)
                return
            # Triton's own port takes the key (restricted by Triton with one key; with
            # several, the model checks the key the guard adds to the JSON: _with_key)
            relayed = [(n, v) for n, v in scope["headers"]
                       if n.lower() not in (b"authorization", API_KEY_HEADER.encode())]
            scope = {**scope, "headers": [*relayed, (API_KEY_HEADER.encode(),
                                                     (self.keys.first or "").encode())]}
        try:
            body = await self._read_body(scope, receive)
        except _ClientLeft:
            return
        if body is None:
            await _respond(send, 413, f"the request body is over {self.max_body_bytes} bytes; "
                                      f"send a smaller one")
            return
        if len(self.keys) > 1 and scope["method"] == "POST" and \
                GENERATE_PATH.fullmatch(scope["path"]):
            body = _with_key(body, self.keys.first or "")
        if scope["method"] == "POST":
            match = GENERATE_PATH.fullmatch(scope["path"])
            if match is not None:
                try:
                    checked = await self._check(match, body)
                except BadRequest as exc:
                    await _respond(send, 400, str(exc))
                    return
                if checked is not None and not scope["path"].endswith("_stream") and \
                        checked[1].get("stream") == "BOOL":  # see fastapply.server.http.generate
                    await generate_as_stream(
                        self.upstream, scope["raw_path"] or scope["path"].encode(),
                        _as_json(scope["headers"]), checked[0], checked[2], send,
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
                await exchange.send(scope["method"], target, _as_json(scope["headers"]), body)
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


def spawn(upstream: str, host: str, port: int, log_path: Path | None,
          keys: tuple[str, ...] = ()) -> Any:
    """``python -m fastapply.server.http.guard`` as a child process we own (started and
    stopped by :class:`fastapply.server.triton.TritonServer`); the API keys go to it in
    its environment, never on its command line."""
    from fastapply.server.processes import spawn_server

    return spawn_server([sys.executable, "-m", "fastapply.server.http.guard",
                         "--upstream", upstream, "--host", host, "--port", str(port)], log_path,
                        keys_env(keys))


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
    from fastapply.server.processes import front_parser, positive, run_front

    parser = front_parser("python -m fastapply.server.http.guard", __doc__)
    parser.add_argument("--upstream", default="127.0.0.1:8000",
                        help="tritonserver's HTTP address, HOST:PORT (default 127.0.0.1:8000)")
    parser.add_argument("--max-body-bytes", type=positive(int), default=DEFAULT_MAX_BODY_BYTES,
                        help=f"largest request body, in bytes ({DEFAULT_MAX_BODY_BYTES})")
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    keys = KeyCheck(api_keys(None, os.environ.get(API_KEYS_ENV)))
    app = Guard(Upstream(host or "127.0.0.1", int(port)), args.max_body_bytes, keys)
    # Triton's answers carry no server or date header; the guard adds none either.
    with contextlib.suppress(KeyboardInterrupt):
        run_front(app, args.host, args.port, server_header=False, date_header=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
