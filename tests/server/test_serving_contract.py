"""The serving contract on a real tritonserver: exact or refused, on every path.

* A file the model did not finish (``max_tokens`` or the context ran out) is an error
  naming the budget on gRPC (unary-style and streaming), HTTP ``generate`` and
  ``generate_stream``, and in the Python client; never a fragment as success.
* A client that goes away cancels its request, streaming or not.
* Bad HTTP input is a 4xx with a message; Triton's admin APIs need the operator's key.
* A stream the caller stops reading does not block the client's next request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import TINY_COMPLETE, TINY_CONTEXT_LIMIT_TOKENS

ORIGINAL = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
SNIPPET = "<<<<<<< SEARCH\n    return 1\n=======\n    return 10\n>>>>>>> REPLACE\n"
MERGED = "def a():\n    return 10\n\n\ndef b():\n    return 2\n"
#: Noise the tiny model never ends: it writes until the context is full (~800 tokens).
ENDLESS = ("a = 1\n", "a = 2\n")
#: max_tokens of a slow request: the whole context, as without max_tokens an answer may
#: only be a little longer than its prompt (fastapply.service.UNASKED_MARGIN_TOKENS).
SLOW_MAX_TOKENS = TINY_CONTEXT_LIMIT_TOKENS


def client(server: Any) -> Any:
    from fastapply.client import FastApplyClient

    return FastApplyClient(server.grpc_url, timeout_s=120)


def http(server: Any, method: str, path: str, body: bytes | str | dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, str]:
    """(status, body) of one raw HTTP request to the server's HTTP port."""
    import http.client

    data = json.dumps(body) if isinstance(body, dict) else body
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def metric(server: Any, name: str, label: str = "") -> float:
    """The sum of the Prometheus samples of ``name`` whose labels contain ``label``."""
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + "{") and label in line)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` (a bound on a wait, not a speed check)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.1)


GENERATE = "/v2/models/fast_apply/generate"


# -- a file the model did not finish is refused ---------------------------------------


@pytest.mark.server
@pytest.mark.slow
def test_a_cut_file_is_an_error_on_grpc_and_in_the_client(tiny_server: Any,
                                                          raw_infer: Any) -> None:
    from fastapply.client import FastApplyError

    budget = "reached max_tokens=5 before it finished the file"
    with client(tiny_server) as c:
        with pytest.raises(FastApplyError, match=budget):
            c.apply(*ENDLESS, max_tokens=5)
        stream = c.stream(*ENDLESS, max_tokens=5)
        deltas: list[str] = []
        with pytest.raises(FastApplyError, match=budget):
            deltas.extend(stream)  # the deltas come first, then the error
        assert deltas and "".join(deltas) == stream.merged_code
        assert stream.stats is None
        assert c.apply(*TINY_COMPLETE).stats.finish_reason == "stop"  # the stream recovered
    texts, error = raw_infer(tiny_server.grpc_url, {
        "initial_code": ENDLESS[0].encode(), "edit_snippet": ENDLESS[1].encode(),
        "max_tokens": 5})
    assert texts == [] and error is not None and budget in error


@pytest.mark.server
def test_a_file_holding_a_stop_tokens_text_is_refused(tiny_server: Any) -> None:
    # The tokenizer read '<|im_end|>' in the file as the stop token: a model copying the
    # file would end there, and the file up to it came back as the merge.
    from fastapply.client import FastApplyError

    with client(tiny_server) as c, pytest.raises(FastApplyError, match="'<\\|im_end\\|>' "
                                                 "\\(line 1\\), which this model's tokenizer"):
        c.apply('END = "<|im_end|>"\n', "END = 1\n")


@pytest.mark.server
@pytest.mark.slow
def test_a_cut_file_is_a_400_on_http(tiny_server: Any) -> None:
    request = {"initial_code": ENDLESS[0], "edit_snippet": ENDLESS[1], "max_tokens": 5}
    status, body = http(tiny_server, "POST", GENERATE, request)
    assert status == 400 and "reached max_tokens=5" in json.loads(body)["error"]
    assert "merged_code" not in body

    status, body = http(tiny_server, "POST", "/v2/models/fast_apply/generate_stream",
                        {**request, "stream": True})
    events = [json.loads(line[len("data: "):]) for line in body.splitlines()
              if line.startswith("data: ")]
    assert "reached max_tokens=5" in events[-1]["error"]  # the stream ends with the error
    assert all("stats" not in e for e in events)


@pytest.mark.server
@pytest.mark.slow
def test_a_file_cut_by_the_context_limit_is_refused(tiny_server: Any) -> None:
    from fastapply.client import FastApplyError

    with client(tiny_server) as c, pytest.raises(
            FastApplyError, match=rf"filled the context limit of {TINY_CONTEXT_LIMIT_TOKENS} "
                                  rf"tokens before the model finished the file"):
        # A 966-token prompt: the noise after it runs into the limit within 58 tokens.
        c.apply("".join(f"v{i} = {i}\n" for i in range(96)),
                "v1 = 2\n# ... existing code ...\n")


# -- cancellation ------------------------------------------------------------------------

#: A client process sending one non-streaming request that would run for ~30 s here.
SLOW_CLIENT = f"""
import sys
from fastapply.client import FastApplyClient
with FastApplyClient(sys.argv[1], timeout_s=600) as client:
    client.apply({ENDLESS[0]!r}, {ENDLESS[1]!r}, max_tokens={SLOW_MAX_TOKENS})
"""


@pytest.mark.server
@pytest.mark.slow
def test_a_killed_client_cancels_its_non_streaming_request(tiny_server: Any) -> None:
    requests = 'nv_inference_count'
    seen = metric(tiny_server, requests, 'model="fast_apply"')
    cancelled = metric(tiny_server, "fastapply_requests_total", 'outcome="cancelled"')
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLIENT, tiny_server.grpc_url])
    try:
        wait_for(lambda: metric(tiny_server, requests, 'model="fast_apply"') > seen,
                 "the slow request reached the model")
    finally:
        proc.kill()
        proc.wait()
    with client(tiny_server) as c:
        def counted() -> bool:
            # Counters are applied on a request's way out (at most every 0.1 s): a cheap
            # request (refused at once) lets the cancellation's count through.
            with pytest.raises(Exception, match="reached max_tokens=1"):
                c.apply(*ENDLESS, max_tokens=1)
            return metric(tiny_server, "fastapply_requests_total",
                          'outcome="cancelled"') > cancelled

        wait_for(counted, "the server counted the killed client's request as cancelled")
        assert c.apply(*TINY_COMPLETE).stats.finish_reason == "stop"  # still serving


# -- HTTP: input checks and the admin APIs -----------------------------------------------


@pytest.mark.server
@pytest.mark.parametrize("max_tokens, message", [
    (0, "max_tokens is 0; send a number of at least 1"),
    (-3, "max_tokens is -3;"),
])
def test_http_max_tokens_out_of_range_is_a_400(det_server: Any, max_tokens: int,
                                                message: str) -> None:
    status, body = http(det_server, "POST", GENERATE, {
        "initial_code": ORIGINAL, "edit_snippet": SNIPPET, "max_tokens": max_tokens})
    assert status == 400 and message in json.loads(body)["error"]


@pytest.mark.server
@pytest.mark.slow
def test_http_max_tokens_over_int32_is_not_wrapped(det_server: Any, tiny_server: Any) -> None:
    # INT32 wrapped 2**31 + 5 to a negative number and 2**32 + 5 to 5: now exact.
    status, body = http(det_server, "POST", GENERATE, {
        "initial_code": ORIGINAL, "edit_snippet": SNIPPET, "max_tokens": 2**31 + 5})
    assert status == 200 and json.loads(body)["merged_code"] == MERGED
    status, body = http(tiny_server, "POST", GENERATE, {
        "initial_code": ENDLESS[0], "edit_snippet": ENDLESS[1], "max_tokens": 2**32 + 5})
    assert status == 400
    assert (f"max_tokens is {2**32 + 5}; send a number from 1 to {TINY_CONTEXT_LIMIT_TOKENS}"
            in json.loads(body)["error"])


@pytest.mark.server
def test_admin_apis_need_the_operator_key(det_server: Any) -> None:
    from fastapply.server.triton import ADMIN_HEADER

    key = {ADMIN_HEADER: det_server.admin_key}
    level = {"log_verbose_level": 0}
    for method, path, body in [("POST", "/v2/logging", level),
                               ("GET", "/v2/models/fast_apply/config", None),
                               ("GET", "/v2/models/fast_apply/stats", None),
                               ("POST", "/v2/repository/index", {}),
                               ("POST", "/v2/repository/models/fast_apply/unload", {})]:
        status, text = http(det_server, method, path, body)
        assert status == 403 and f"expecting header '{ADMIN_HEADER}'" in text, (path, text)
    assert http(det_server, "POST", "/v2/logging", level, {ADMIN_HEADER: "wrong"})[0] == 403
    assert http(det_server, "POST", "/v2/logging", level, key)[0] == 200
    assert http(det_server, "GET", "/v2/models/fast_apply/config", None, key)[0] == 200
    # Clients need none of it: health, metadata and inference stay open.
    assert http(det_server, "GET", "/v2/health/ready")[0] == 200
    assert http(det_server, "GET", "/v2/models/fast_apply")[0] == 200
    assert http(det_server, "POST", GENERATE,
                {"initial_code": ORIGINAL, "edit_snippet": SNIPPET})[0] == 200


@pytest.mark.server
def test_grpc_admin_apis_need_the_operator_key(det_server: Any) -> None:
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    from fastapply.server.triton import ADMIN_HEADER

    with grpc.insecure_channel(det_server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelConfigRequest(name="fast_apply")
        with pytest.raises(grpc.RpcError, match="restricted"):
            stub.ModelConfig(request, timeout=30)
        header = f"triton-grpc-protocol-{ADMIN_HEADER}"
        config = stub.ModelConfig(request, timeout=30,
                                  metadata=[(header, det_server.admin_key)]).config
        assert config.name == "fast_apply"


def serve(*args: str, key: str) -> subprocess.Popen[str]:
    """``fastapply serve`` with FASTAPPLY_ADMIN_KEY=key on free ports (HTTP port last)."""
    import os

    from fastapply.server.processes import free_ports
    from fastapply.server.triton import ADMIN_KEY_ENV

    ports = [str(port) for port in free_ports(3)]
    return subprocess.Popen(
        [sys.executable, "-m", "fastapply", "serve", "--runtime", "deterministic",
         "--grpc-port", ports[0], "--http-port", ports[1], "--metrics-port", ports[2], *args],
        env={**os.environ, ADMIN_KEY_ENV: key}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.server
def test_serve_opens_the_admin_apis_with_the_operator_key() -> None:
    from fastapply.server.triton import ADMIN_HEADER

    key = "operator-key-0123456789"
    proc = serve(key=key)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(6)]
        http_line = next(line for line in lines if "HTTP" in line)
        assert any(f"header {ADMIN_HEADER}" in line for line in lines), lines
        server = SimpleNamespace(http_port=int(http_line.rsplit(":", 1)[1]))
        path = "/v2/models/fast_apply/config"
        assert http(server, "GET", path)[0] == 403
        assert http(server, "GET", path, None, {ADMIN_HEADER: key})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_serve_refuses_a_weak_admin_key() -> None:
    proc = serve(key="short")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "the admin key must be at least 16 characters" in err


# -- the client: a stream left unread ---------------------------------------------------


def in_a_thread(work: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """``work()`` run in a thread of its own: its result, or a failure if it hangs."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        pytest.fail(f"{work.__name__} hung (a deadlock)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


@pytest.mark.server
def test_a_stream_left_unread_does_not_block_the_next_request(det_server: Any) -> None:
    from fastapply.client import FastApplyError

    def abandon_then_apply() -> tuple[str, Any, str]:
        with client(det_server) as c:
            stream = c.stream(ORIGINAL, SNIPPET)
            first = next(iter(stream))  # stop reading after one delta, keep the stream
            after = c.apply(ORIGINAL, SNIPPET)  # same thread: the old stream is dropped
            with pytest.raises(FastApplyError, match="this stream was abandoned"):
                list(stream)
            return first, after, c.apply(ORIGINAL, SNIPPET).merged_code

    first, after, again = in_a_thread(abandon_then_apply)
    assert first == MERGED and after.merged_code == again == MERGED
    assert after.stats.finish_reason == "merged"


@pytest.mark.server
def test_a_closed_stream_frees_the_client_for_another_thread(det_server: Any) -> None:
    with client(det_server) as c:
        stream = c.stream(ORIGINAL, SNIPPET)
        assert next(iter(stream)) == MERGED
        stream.close()
        assert in_a_thread(lambda: c.apply(ORIGINAL, SNIPPET)).merged_code == MERGED
