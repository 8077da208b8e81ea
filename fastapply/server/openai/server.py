"""HTTP front for OpenAI, Morph and Relace clients, beside Triton (Starlette + uvicorn).

Routes (request and response shapes in :mod:`fastapply.server.openai.api`):

* ``POST /v1/chat/completions`` (also ``/v1/apply/chat/completions``, Relace's
  OpenAI-compatible base URL ``.../v1/apply``): Morph/Relace tags or Predicted Outputs;
  ``stream: true`` answers ``chat.completion.chunk`` events, then ``data: [DONE]``;
* ``POST /v1/code/apply``: Relace's REST shape, JSON or server-sent events;
* ``GET /v1/models``, ``GET /v1/models/{name}``: any name is accepted.

Every merge is one request to Triton's gRPC stream through
:class:`fastapply.client.FastApplyClient`. Its calls block, so they run on a thread
pool, one client per request in flight (idle clients are kept for the next request).
A stream is read one delta at a time, only once the previous one was handed to the
socket (back-pressure), and a client that goes away (mid-stream or while a non-streaming
request runs) cancels the upstream request.

Exact or refused: a request that fails before any output answers an HTTP error in
OpenAI's shape (4xx for the client's faults, with Triton's message for bad input; 5xx for
the server's); a stream that fails later ends with an ``{"error": ...}`` event and no
``[DONE]``; a merged file cut off by the token budget is an error, never a success.

Run: ``fastapply serve --openai-port 8080`` (beside its Triton), or standalone against a
running Triton: ``python -m fastapply.server.openai.server --grpc-url HOST:8001 --port 8080``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from fastapply.server.auth import (
    API_KEYS_ENV,
    REFUSAL,
    ApiKeyError,
    KeyCheck,
    api_keys,
    keys_env,
    presented,
)
from fastapply.server.http.guard import DEFAULT_MAX_BODY_BYTES
from fastapply.server.openai.api import (
    MergeRequest,
    parse_chat,
    parse_completion,
    parse_json,
    parse_relace,
)
from fastapply.server.openai.errors import ApiError, check_complete
from fastapply.server.openai.responses import (
    chat_completion,
    dumps,
    model_card,
    models_list,
    relace_usage,
    text_completion,
)
from fastapply.server.openai.streaming import ChatEvents, RelaceEvents, TextEvents
from fastapply.server.openai.upstream import DEFAULT_CONCURRENCY, Upstream

#: Largest request body, in bytes (413 above it): the HTTP guard's limit.
MAX_BODY_BYTES = DEFAULT_MAX_BODY_BYTES


async def _chain(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for item in rest:
        yield item


async def read_body(request: Any, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, or a 413 once it is over ``limit`` bytes (at once when its
    Content-Length says so): without a limit one request could fill the memory."""
    too_large = ApiError(413, f"the request body is over {limit} bytes; send a smaller file",
                         code="request_too_large")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_large
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise too_large
        parts.append(part)
    return b"".join(parts)


def build_app(upstream: Upstream, keys: KeyCheck | None = None) -> Any:
    """The Starlette application serving the routes above through ``upstream``; with
    ``keys``, every route but ``GET /health`` answers 401 to a request without one."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    def json_response(data: Any, status: int = 200) -> Response:
        return Response(dumps(data), status_code=status, media_type="application/json")

    def error_response(exc: ApiError) -> Response:
        response = json_response(exc.body(), exc.status)
        if exc.status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    def refused(request: Request) -> Response | None:
        """401 for a request without a key ``keys`` knows (None: let it through)."""
        if keys and not keys.accepts(presented(request.headers)):
            return error_response(ApiError(401, REFUSAL, code="invalid_api_key"))
        return None

    async def merge(request: Request, parse: Callable[[dict[str, Any]], MergeRequest],
                    events: Callable[[MergeRequest], Any],
                    answer: Callable[[MergeRequest, Any], Any]) -> Response:
        if (no := refused(request)) is not None:
            return no
        try:
            req = parse(parse_json(await read_body(request)))
            if req.stream:
                body = upstream.stream(req, events(req))
                first = await body.__anext__()  # bad input raises here, as an HTTP error
                return StreamingResponse(_chain(first, body), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            result = await upstream.apply(req, request.receive)
            if result is None:  # nobody is listening any more
                return Response(status_code=499)
            check_complete(result.stats)
            return json_response(answer(req, result))
        except ApiError as exc:
            return error_response(exc)

    def chat_answer(req: MergeRequest, result: Any) -> Any:
        return chat_completion(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), req.model,
                               req.answer(result.merged_code), result.stats)

    def text_answer(req: MergeRequest, result: Any) -> Any:
        return text_completion(f"cmpl-{uuid.uuid4().hex}", int(time.time()), req.model,
                               req.answer(result.merged_code), result.stats)

    def relace_answer(req: MergeRequest, result: Any) -> Any:
        return {"mergedCode": result.merged_code, "usage": relace_usage(result.stats),
                "stats": result.stats.to_dict()}

    async def chat(request: Request) -> Response:
        return await merge(request, parse_chat, ChatEvents, chat_answer)

    async def completions(request: Request) -> Response:
        return await merge(request, parse_completion, TextEvents, text_answer)

    async def code_apply(request: Request) -> Response:
        return await merge(request, parse_relace, RelaceEvents, relace_answer)

    async def list_models(request: Request) -> Response:
        return refused(request) or json_response(models_list(int(time.time())))

    async def get_model(request: Request) -> Response:
        return refused(request) or json_response(model_card(request.path_params["name"],
                                                            int(time.time())))

    async def health(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        what = {404: f"no route {request.url.path}; this server answers POST "
                     f"/v1/chat/completions, POST /v1/completions, POST /v1/code/apply and "
                     f"GET /v1/models",
                405: f"{request.method} is not allowed on {request.url.path}"}
        return error_response(ApiError(exc.status_code, what.get(exc.status_code, exc.detail),
                                       code="not_found" if exc.status_code == 404 else None))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        upstream.close()

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/apply/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/code/apply", code_apply, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{name:path}", get_model, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ], exception_handlers={HTTPException: http_error}, lifespan=lifespan)


# -- running it -------------------------------------------------------------------------


class OpenAIFront:
    """``python -m fastapply.server.openai.server`` as a child process, stopped (by PID) on exit."""

    def __init__(self, grpc_url: str, host: str = "127.0.0.1", port: int | None = None,
                 concurrency: int = DEFAULT_CONCURRENCY, log_path: str | Path | None = None,
                 startup_timeout_s: float = 30.0, api_keys: tuple[str, ...] = ()) -> None:
        from fastapply.server.processes import free_port

        self.grpc_url = grpc_url
        self.host = host
        self.port = port or free_port()
        self.concurrency = concurrency
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        #: The keys it takes (in its environment, never on its command line).
        self.api_keys = tuple(api_keys)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> OpenAIFront:
        from fastapply.server.processes import spawn_server
        from fastapply.server.triton import ServerError

        cmd = [sys.executable, "-m", "fastapply.server.openai.server", "--grpc-url", self.grpc_url,
               "--host", self.host, "--port", str(self.port),
               "--concurrency", str(self.concurrency)]
        self.process = spawn_server(cmd, self.log_path, keys_env(self.api_keys))
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                status = self.process.returncode
                self.stop()
                tail = ""
                if self.log_path is not None:
                    with contextlib.suppress(OSError):
                        tail = "; log tail:\n" + "\n".join(
                            self.log_path.read_text(errors="replace").splitlines()[-5:])
                raise ServerError(f"the OpenAI front exited with status {status} on start"
                                  f"{tail}")
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                if r.status == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"the OpenAI front did not answer within {self.startup_timeout_s:g} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def __enter__(self) -> OpenAIFront:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    from fastapply.server.processes import front_parser, positive, run_front

    parser = front_parser("python -m fastapply.server.openai.server", __doc__)
    parser.add_argument("--grpc-url", default="127.0.0.1:8001",
                        help="Triton's gRPC address, HOST:PORT (default 127.0.0.1:8001)")
    parser.add_argument("--concurrency", type=positive(int), default=DEFAULT_CONCURRENCY,
                        help=f"requests in flight to Triton at once ({DEFAULT_CONCURRENCY})")
    parser.add_argument("--timeout-s", type=positive(float), default=300.0,
                        help="longest wait for each answer from Triton, in s (300)")
    args = parser.parse_args(argv)
    try:
        keys = KeyCheck(api_keys(None, os.environ.get(API_KEYS_ENV)))
    except ApiKeyError as exc:
        parser.error(str(exc))
    run_front(build_app(Upstream(args.grpc_url, args.concurrency, args.timeout_s, keys.first),
                        keys), args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
