"""The HTTP guard (fastapply.server.http.guard) on a real tritonserver: client errors in generate
requests are a 400 naming the field, where Triton's own parsing answers 500; everything
else passes through unchanged, streams included; a client that leaves cancels.

The test servers (conftest) run behind the guard, as ``fastapply serve`` does:
``server.http_port`` is the guard, ``server.triton_http_port`` tritonserver's own HTTP.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import TINY_COMPLETE, TINY_SERVING
from test_serving_contract import (
    ENDLESS,
    MERGED,
    ORIGINAL,
    SLOW_MAX_TOKENS,
    SNIPPET,
    http,
    metric,
    wait_for,
)

MODEL = "/v2/models/fast_apply"
GENERATE_PATHS = [f"{MODEL}/generate", f"{MODEL}/generate_stream",
                  f"{MODEL}/versions/1/generate"]
GOOD = {"initial_code": ORIGINAL, "edit_snippet": SNIPPET}
SEND_OBJECT = "send a JSON object whose keys are the model's inputs"
INT64 = "a whole number from -9223372036854775808 to 9223372036854775807"

#: A form upload (``curl -F initial_code=... -F edit_snippet=...``).
MULTIPART = (b'--x7\r\nContent-Disposition: form-data; name="initial_code"\r\n\r\nx = 1\r\n'
             b'--x7\r\nContent-Disposition: form-data; name="edit_snippet"\r\n\r\nx = 2\r\n'
             b"--x7--\r\n")
#: (body, what the 400's message must say): each was a 500 from Triton 2.51 itself.
CLIENT_ERRORS: dict[str, tuple[bytes | dict[str, Any], str]] = {
    "empty body": (b"", f"the request body is empty; {SEND_OBJECT}"),
    "blank body": (b" \n ", "the request body is empty"),
    "malformed": (b'{"initial_code": ', "the request body is not valid JSON (Expecting value "
                                         "at line 1 column 18)"),
    "trailing data": (json.dumps(GOOD).encode() + b" x", "not valid JSON (Extra data"),
    "top-level array": (b'[{"initial_code": "x"}]', f"the request body is a JSON array; "
                                                    f"{SEND_OBJECT}"),
    "top-level string": (b'"x"', "the request body is a JSON string"),
    "top-level null": (b"null", "the request body is null"),
    "stream a string": ({**GOOD, "stream": "yes"}, 'stream is the string "yes": send true or '
                                                   'false (input stream of model fast_apply '
                                                   'is BOOL)'),
    "stream a number": ({**GOOD, "stream": 1}, "stream is the number 1: send true or false"),
    "max_tokens a string": ({**GOOD, "max_tokens": "5"},
                            f'max_tokens is the string "5": send {INT64} (input max_tokens of '
                            f'model fast_apply is INT64)'),
    "max_tokens a fraction": ({**GOOD, "max_tokens": 5.5}, "max_tokens is the number 5.5"),
    "max_tokens 5.0": ({**GOOD, "max_tokens": 5.0}, "max_tokens is the number 5.0"),
    "max_tokens a boolean": ({**GOOD, "max_tokens": True}, f"max_tokens is true: send {INT64}"),
    "max_tokens over INT64": ({**GOOD, "max_tokens": 2**63}, f"max_tokens is the number "
                                                             f"{2**63}: send {INT64}"),
    "max_tokens under INT64": ({**GOOD, "max_tokens": -(2**63) - 1}, "max_tokens is the number "
                                                                     "-9223372036854775809"),
    "max_tokens 30 digits": ({**GOOD, "max_tokens": 10**30}, f"max_tokens is the number "
                                                             f"{10**30}: send {INT64}"),
    "initial_code a number": ({**GOOD, "initial_code": 5}, "initial_code is the number 5: send "
                                                           "a JSON string (input initial_code "
                                                           "of model fast_apply is BYTES)"),
    "initial_code null": ({**GOOD, "initial_code": None}, "initial_code is null: send a JSON "
                                                          "string"),
    "initial_code an object": ({**GOOD, "initial_code": {}}, "initial_code is an object"),
    "edit_snippet in a mixed array": ({**GOOD, "edit_snippet": [SNIPPET, 3]},
                                      "edit_snippet[1] is the number 3: send a JSON string"),
    "instruction a number": ({**GOOD, "instruction": 3}, "instruction is the number 3"),
    "id a number": ({**GOOD, "id": 3}, "id is the number 3: send the request id as a JSON "
                                       "string"),
    "parameters a string": ({**GOOD, "parameters": "x"}, 'parameters is the string "x": send '
                                                         'a JSON object of parameters'),
    "a key twice": (b'{"stream": "yes", "stream": true, "initial_code": "a", '
                    b'"edit_snippet": "b"}', 'the key "stream" appears more than once'),
    "max_tokens of 5000 digits": (b'{"initial_code": "a", "edit_snippet": "b", "max_tokens": '
                                  + b"9" * 5000 + b"}", "holds a number of more digits than"),
    "NaN": (b'{"initial_code": "a", "edit_snippet": "b", "max_tokens": NaN}',
            "the request body holds NaN, which JSON does not have"),
    "a lone surrogate": (b'{"initial_code": "x\\ud800", "edit_snippet": "b"}',
                         "holds a lone UTF-16 surrogate (\\ud800) in a string"),
    "a lone surrogate in a key": (b'{"initial_code": "a", "edit_snippet": "b", '
                                  b'"parameters": {"\\uDBFF": 1}}', "lone UTF-16 surrogate"),
    "a multipart form": (MULTIPART, "the request body is multipart/form-data"),
}


def test_a_multipart_form_body_is_named_and_told_what_to_send() -> None:
    # It starts with "--": it was answered "the request body is a JSON number".
    from fastapply.server.http.checks import BadRequest, parse_body

    with pytest.raises(BadRequest) as refused:
        parse_body(MULTIPART)
    message = str(refused.value)
    assert message.startswith("the request body is multipart/form-data")
    assert "Content-Type: application/json" in message and "JSON number" not in message
    with pytest.raises(BadRequest, match="is a JSON number"):
        parse_body(b"-12")


def post(server: Any, path: str, body: bytes | dict[str, Any]) -> tuple[int, str]:
    return http(server, "POST", path, body if isinstance(body, bytes) else json.dumps(body))


def events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of a server-sent-events body."""
    return [json.loads(line[len("data: "):]) for line in body.splitlines()
            if line.startswith("data: ")]


def direct(server: Any) -> Any:
    """tritonserver's own HTTP port, without the guard, where ``http()`` can reach it."""
    from types import SimpleNamespace

    return SimpleNamespace(http_port=server.triton_http_port)


@pytest.mark.server
@pytest.mark.parametrize("path", GENERATE_PATHS)
@pytest.mark.parametrize("case", sorted(CLIENT_ERRORS))
def test_a_client_error_in_a_generate_request_is_a_400_naming_it(det_server: Any, path: str,
                                                                 case: str) -> None:
    body, message = CLIENT_ERRORS[case]
    status, answer = post(det_server, path, body)
    assert status == 400, answer
    assert message in json.loads(answer)["error"]


@pytest.mark.server
def test_triton_itself_answers_those_errors_with_500(det_server: Any) -> None:
    # Why the guard exists; if a Triton upgrade fixes this, the guard's checks can go.
    for case in ("empty body", "top-level array", "stream a string", "max_tokens over INT64"):
        status, answer = post(direct(det_server), GENERATE_PATHS[0], CLIENT_ERRORS[case][0])
        assert status == 500, (case, answer)


@pytest.mark.server
def test_valid_requests_get_what_triton_answers(det_server: Any) -> None:
    for server in (det_server, direct(det_server)):
        status, answer = post(server, f"{MODEL}/generate", {**GOOD, "id": "r1"})
        assert status == 200, answer
        assert json.loads(answer)["merged_code"] == MERGED and json.loads(answer)["id"] == "r1"
        status, answer = post(server, f"{MODEL}/generate_stream", {**GOOD, "stream": True})
        assert status == 200 and "".join(e["merged_code"] for e in events(answer)) == MERGED
        # What Triton accepts stays accepted: one-element arrays, extra parameters.
        status, answer = post(server, f"{MODEL}/generate", {
            "initial_code": [ORIGINAL], "edit_snippet": SNIPPET, "stream": [False],
            "max_tokens": 2**62, "parameters": {"a": 1}, "b": 1.5})
        assert status == 200 and json.loads(answer)["merged_code"] == MERGED, answer
    # Triton's own 4xx answers are passed on unchanged.
    triton_errors: list[tuple[dict[str, Any], str]] = [
        ({**GOOD, "edit_snippet": ""}, "edit_snippet is empty"),
        ({**GOOD, "b": [1]}, "parameter 'b' has invalid type")]
    for body, message in triton_errors:
        assert post(det_server, f"{MODEL}/generate", body) == \
            post(direct(det_server), f"{MODEL}/generate", body)
        status, answer = post(det_server, f"{MODEL}/generate", body)
        assert status == 400 and message in answer
    # generate goes to Triton as a stream (fastapply.server.http.generate), so with the stream
    # input added Triton's count of inputs lets a missing one through to the model
    status, answer = post(det_server, f"{MODEL}/generate", {"edit_snippet": SNIPPET})
    assert status == 400 and "initial_code is missing" in answer
    status, answer = post(det_server, "/v2/models/nope/generate", GOOD)
    assert status == 404 and "unknown model" in answer


@pytest.mark.server
def test_a_header_longer_than_triton_takes_is_a_431_not_a_502(det_server: Any) -> None:
    # Triton resets the connection on a header name or value of 8 KiB: the guard said
    # "tritonserver did not answer ... try again shortly", which never helps.
    ok = http(det_server, "GET", "/v2/health/ready", headers={"X-A": "a" * 8191})
    assert ok[0] == 200
    status, answer = http(det_server, "GET", "/v2/health/ready", headers={"X-A": "a" * 8192})
    assert status == 431 and "a header's value (x-a...) is 8192 bytes" in answer, answer


@pytest.mark.server
def test_other_paths_pass_through(det_server: Any) -> None:
    from fastapply.server.triton import ADMIN_HEADER

    for method, path, body, headers, status in [
            ("GET", "/v2/health/live", None, {}, 200),
            ("GET", "/v2/health/ready", None, {}, 200),
            ("GET", f"{MODEL}/ready", None, {}, 200),
            ("GET", "/v2", None, {}, 200),
            ("GET", f"{MODEL}/config", None, {}, 403),
            ("GET", f"{MODEL}/config", None, {ADMIN_HEADER: det_server.admin_key}, 200),
            ("POST", "/v2/logging", "{}", {ADMIN_HEADER: det_server.admin_key}, 200),
            ("POST", f"{MODEL}/infer", '{"inputs": []}', {}, 501),  # decoupled
            ("GET", "/nothing/here", None, {}, 404)]:
        guarded = http(det_server, method, path, body, headers)
        assert guarded[0] == status, (path, guarded)
        assert guarded == http(direct(det_server), method, path, body, headers), path


@pytest.mark.server
def test_the_server_keeps_serving_after_a_burst_of_bad_requests(det_server: Any) -> None:
    bodies = [body for body, _ in CLIENT_ERRORS.values()]  # 26 kinds of mistake
    statuses: list[int] = []

    def hammer() -> None:
        for body in bodies * 4:
            statuses.append(post(det_server, f"{MODEL}/generate", body)[0])

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert statuses == [400] * (len(bodies) * 16)
    status, answer = post(det_server, f"{MODEL}/generate", GOOD)
    assert status == 200 and json.loads(answer)["merged_code"] == MERGED
    assert http(det_server, "GET", "/v2/health/ready")[0] == 200


@pytest.fixture
def small_guard(det_server: Any) -> Iterator[Any]:
    """A second guard in front of det_server's Triton, run as its command line does,
    with a 2 MB body limit."""
    from types import SimpleNamespace

    from fastapply.server.http import guard as http_guard
    from fastapply.server.processes import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fastapply.server.http.guard", "--upstream",
                             f"127.0.0.1:{det_server.triton_http_port}", "--port", str(port),
                             "--max-body-bytes", str(2_000_000)])
    guard = SimpleNamespace(http_port=port)
    try:
        wait_for(lambda: _answers(guard), "the guard answered")
        yield guard
    finally:
        assert http_guard.stop(proc) is None


def _answers(server: Any) -> bool:
    try:
        return http(server, "GET", "/v2/health/ready")[0] == 200
    except OSError:
        return False


@pytest.mark.server
def test_large_malformed_bodies_are_refused_and_oversized_ones_are_413(small_guard: Any
                                                                       ) -> None:
    unterminated = b'{"initial_code": "' + b"a" * 1_900_000
    status, answer = post(small_guard, f"{MODEL}/generate", unterminated)
    assert status == 400 and "Unterminated string" in answer
    status, answer = post(small_guard, f"{MODEL}/generate", b'{"a": ' + b"[" * 1_000_000)
    assert status == 400 and "nests JSON too deeply" in answer
    status, answer = post(small_guard, f"{MODEL}/generate", b"[0," * 600_000 + b"0]")
    assert status == 400 and "is a JSON array" in answer
    status, answer = post(small_guard, f"{MODEL}/generate", b" " * 2_000_001)
    assert status == 413 and "over 2000000 bytes" in json.loads(answer)["error"]
    status, answer = post(small_guard, f"{MODEL}/generate", GOOD)
    assert status == 200 and json.loads(answer)["merged_code"] == MERGED


@pytest.mark.server
def test_a_large_body_sent_as_a_form_does_not_kill_triton(det_server: Any) -> None:
    # curl -d sends Content-Type application/x-www-form-urlencoded; tritonserver's HTTP
    # library parses such a body as form fields and died (signal 11) on one of 4.2 MB,
    # taking the whole server down. The guard sends it on as JSON: the model answers.
    body = json.dumps({"initial_code": ORIGINAL + "#\n" * 1_400_000,
                       "edit_snippet": SNIPPET}).encode()  # 4.2 MB once escaped
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, answer = http(det_server, "POST", f"{MODEL}/generate", body, form)
    assert status == 400 and "over the limit of" in json.loads(answer)["error"], answer
    status, answer = http(det_server, "POST", f"{MODEL}/generate", json.dumps(GOOD), form)
    assert status == 200 and json.loads(answer)["merged_code"] == MERGED
    assert det_server.process.poll() is None


def test_an_unreachable_triton_is_a_502_that_says_so() -> None:
    from types import SimpleNamespace

    from fastapply.server.http import guard as http_guard
    from fastapply.server.processes import free_port

    port, nobody = free_port(), free_port()
    proc = http_guard.spawn(f"127.0.0.1:{nobody}", "127.0.0.1", port, None)
    guard = SimpleNamespace(http_port=port)
    try:
        def refused() -> bool:
            try:
                return http(guard, "GET", "/v2/health/ready")[0] == 502
            except OSError:
                return False

        wait_for(refused, "the guard answered 502")
        answer = http(guard, "GET", "/v2/health/ready")[1]
        assert f"tritonserver did not answer at 127.0.0.1:{nobody}" in json.loads(answer)["error"]
    finally:
        assert http_guard.stop(proc) is None


# -- a client that leaves, a server that breaks off ----------------------------------


@contextlib.contextmanager
def endless_stream(port: int) -> Iterator[tuple[socket.socket, bytes]]:
    """A raw ``generate_stream`` request the tiny model never finishes, once its first
    event came: (the socket, what was received); the socket closes on exit."""
    body = json.dumps({"initial_code": ENDLESS[0], "edit_snippet": ENDLESS[1],
                       "stream": True, "max_tokens": SLOW_MAX_TOKENS}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST %s/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                     b"\r\n%s" % (MODEL.encode(), len(body), body))
        received = b""
        while b"data: " not in received:  # the first event: the model is generating
            part = sock.recv(4096)
            assert part, f"the stream ended before its first event: {received!r}"
            received += part
        yield sock, received


CANCELLED = 'outcome="cancelled"'


def assert_cancelled_then_serving(tiny_server: Any, before: float) -> None:
    """The model counts one more cancelled request than ``before``, and still serves."""
    def counted() -> bool:
        # Counters go out with a request's answer: a cheap request carries them.
        post(tiny_server, f"{MODEL}/generate", {"initial_code": "a", "edit_snippet": ""})
        return metric(tiny_server, "fastapply_requests_total", CANCELLED) > before

    wait_for(counted, "the model counted the request as cancelled")
    status, answer = post(tiny_server, f"{MODEL}/generate",
                          {"initial_code": TINY_COMPLETE[0], "edit_snippet": TINY_COMPLETE[1]})
    assert status == 200 and json.loads(json.loads(answer)["stats"])["finish_reason"] == "stop"


@pytest.mark.server
@pytest.mark.slow
def test_leaving_a_stream_through_the_guard_cancels_it(tiny_server: Any) -> None:
    before = metric(tiny_server, "fastapply_requests_total", CANCELLED)
    with endless_stream(tiny_server.http_port):
        pass  # the client leaves after the first event

    assert_cancelled_then_serving(tiny_server, before)


@pytest.mark.server
@pytest.mark.slow
def test_a_killed_generate_client_cancels_its_request(tiny_server: Any) -> None:
    # Triton 2.51 never cancels a (non-streaming) generate request whose client left:
    # the model generated the whole answer (~8 s here) for nobody and counted a success.
    before = metric(tiny_server, "fastapply_requests_total", CANCELLED)
    seen = metric(tiny_server, "nv_inference_count", 'model="fast_apply"')
    body = json.dumps({"initial_code": ENDLESS[0], "edit_snippet": ENDLESS[1],
                       "max_tokens": SLOW_MAX_TOKENS}).encode()
    with socket.create_connection(("127.0.0.1", tiny_server.http_port), timeout=60) as sock:
        sock.sendall(b"POST %s/generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                     % (MODEL.encode(), len(body), body))
        wait_for(lambda: metric(tiny_server, "nv_inference_count", 'model="fast_apply"') > seen,
                 "the request reached the model")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")  # RST

    assert_cancelled_then_serving(tiny_server, before)


@pytest.mark.server
def test_generate_with_stream_true_is_a_400_not_a_200(det_server: Any) -> None:
    # Triton answers it 200 {"error": "generate expects model to produce exactly 1 ..."}.
    status, answer = post(det_server, f"{MODEL}/generate", {**GOOD, "stream": True})
    assert status == 400 and "send the request to generate_stream" in answer, answer


@pytest.mark.server
@pytest.mark.slow
def test_a_stream_triton_breaks_off_is_cut_off_for_the_client_too(
        tmp_path: Any, tiny_model_dir: Any) -> None:
    import os
    import signal

    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import TritonServer

    repo = render_repository(tmp_path, runtime="torch", model_dir=tiny_model_dir,
                             device="cpu", dtype="float32", worker_threads=1, **TINY_SERVING)
    server = TritonServer(repo, log_path=tmp_path / "server.log").start()
    try:
        with endless_stream(server.http_port) as (sock, received):
            assert server.process is not None
            os.kill(server.process.pid, signal.SIGKILL)  # tritonserver dies mid-stream
            while part := sock.recv(65536):
                received += part
        # Chunked transfer ends with an empty chunk: without it the client knows the
        # answer is incomplete (http.client raises IncompleteRead).
        assert not received.endswith(b"0\r\n\r\n"), received[-200:]
        assert server.guard is not None and server.guard.poll() is None  # still serving
        status, answer = http(server, "GET", "/v2/health/live")
        assert status == 502 and "tritonserver did not answer" in answer
    finally:
        server.stop()


@pytest.mark.server
def test_connections_to_triton_are_kept_for_the_next_request(det_server: Any) -> None:
    # Reading llhttp's keep-alive flag once the answer was complete (always false then)
    # made the guard connect anew for every request, doubling what it adds.
    import asyncio

    from fastapply.server.http.upstream import Upstream

    async def three_requests() -> list[tuple[int, bytes, Any]]:
        upstream = Upstream("127.0.0.1", det_server.triton_http_port)
        answers = []
        for path in ("/v2/health/ready", "/v2/models/fast_apply", "/v2/health/live"):
            status, body = await upstream.get(path)
            answers.append((status, body, upstream.idle[-1] if upstream.idle else None))
        upstream.close()
        return answers

    answers = asyncio.run(three_requests())
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert b'"name":"fast_apply"' in answers[1][1]
    assert answers[0][2] is not None and all(a[2] is answers[0][2] for a in answers)


def test_a_kept_connection_the_server_closed_meanwhile_is_retried_fresh() -> None:
    # An HTTP/1.1 server that answers without "Connection: close" and then closes: the
    # guard's kept connection is dead when the next request comes.
    import asyncio
    import http.server

    from fastapply.server.http.upstream import Upstream

    class CloseAfterAnswer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    closed = threading.Event()  # set once the server closed a connection it answered

    class Server(http.server.ThreadingHTTPServer):
        def shutdown_request(self, request: Any) -> None:
            super().shutdown_request(request)
            closed.set()

    server = Server(("127.0.0.1", 0), CloseAfterAnswer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    async def twice() -> list[tuple[int, bytes]]:
        upstream = Upstream("127.0.0.1", server.server_address[1])
        first = await upstream.get("/a")
        assert len(upstream.idle) == 1  # kept: the server did not say it would close
        # the server's close happens meanwhile (waited for, not slept on: on a busy
        # machine 0.2 s was not always enough); the timeout only guards against a hang
        assert closed.wait(60), "the test server never closed the connection"
        second = await upstream.get("/b")
        upstream.close()
        return [first, second]

    try:
        assert asyncio.run(twice()) == [(200, b"ok"), (200, b"ok")]
    finally:
        server.shutdown()
        server.server_close()
