"""The OpenAI/Morph/Relace HTTP front against a real tritonserver, through real clients.

The ``openai`` package (sync, streaming, errors) and raw HTTP (Relace's REST shape, SSE)
talk to ``python -m fastapply.server.openai.server`` on a loopback port, which talks gRPC to the
deterministic-runtime server of conftest.py; the tiny random model's server checks that a
file cut off by the token budget is refused, and that a client leaving mid-stream cancels
the request in Triton.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import reaped
from test_serving import MERGED, ORIGINAL, SNIPPET, mergeable

from fastapply.server.openai.server import OpenAIFront

pytestmark = pytest.mark.server
MORPH = f"<instruction>return 10</instruction>\n<code>{ORIGINAL}</code>\n<update>{SNIPPET}</update>"


def start_front(server: Any, tmp_path_factory: pytest.TempPathFactory) -> OpenAIFront:
    log = tmp_path_factory.mktemp("front") / "front.log"
    return OpenAIFront(server.grpc_url, log_path=log).start()


@pytest.fixture(scope="module")
def front(det_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIFront]:
    f = start_front(det_server, tmp_path_factory)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def sdk(front: OpenAIFront) -> Any:
    import openai

    return openai.OpenAI(base_url=f"{front.url}/v1", api_key="any", max_retries=0)


def post(front: OpenAIFront, path: str, body: bytes | dict[str, Any]
         ) -> tuple[int, str, bytes]:
    """(status, content type, body) of a raw HTTP POST."""
    conn = http.client.HTTPConnection("127.0.0.1", front.port, timeout=60)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[Any]:
    """The data of each server-sent event ('[DONE]' as the string)."""
    out = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


# -- the openai package -------------------------------------------------------------------


@pytest.mark.parametrize("model", ["auto", "morph-v3-fast", "morph-v3-large",
                                   "relace-apply-3", "anything"])
def test_morph_style_chat_completion(sdk: Any, model: str) -> None:
    done = sdk.chat.completions.create(model=model,
                                       messages=[{"role": "user", "content": MORPH}])
    assert done.choices[0].message.content == MERGED
    assert done.choices[0].finish_reason == "stop" and done.model == model
    assert done.usage.completion_tokens_details.accepted_prediction_tokens == 0
    assert done.model_extra["stats"]["finish_reason"] == "merged"  # an object


def test_corpus_edits_equal_the_direct_grpc_merge(sdk: Any, det_server: Any,
                                                  corpus: Any) -> None:
    from fastapply.client import FastApplyClient

    with FastApplyClient(det_server.grpc_url) as direct:
        for edit, fmt in mergeable(corpus, 9):
            snippet = edit[fmt]
            morph = sdk.chat.completions.create(model="auto", messages=[{
                "role": "user",
                "content": f"<code>{edit['original']}</code>\n<update>{snippet}</update>"}])
            predicted = sdk.chat.completions.create(
                model="auto", messages=[{"role": "user", "content": snippet}],
                prediction={"type": "content", "content": edit["original"]})
            expected = direct.apply(edit["original"], snippet).merged_code
            assert expected == edit["updated"]
            assert morph.choices[0].message.content == expected, edit["id"]
            assert predicted.choices[0].message.content == expected, edit["id"]


def test_streaming_chunks_then_done(sdk: Any, front: OpenAIFront) -> None:
    stream = sdk.chat.completions.create(model="auto", stream=True,
                                         messages=[{"role": "user", "content": MORPH}],
                                         stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == MERGED
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    assert finish[0].model_extra["stats"]["finish_reason"] == "merged"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    status, ctype, raw = post(front, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": MORPH}], "stream": True})
    assert (status, ctype.split(";")[0]) == (200, "text/event-stream")
    assert events(raw)[-1] == "[DONE]"


def test_client_errors_are_4xx_with_the_reason(sdk: Any) -> None:
    import openai

    with pytest.raises(openai.BadRequestError, match="no <update>") as missing:
        sdk.chat.completions.create(model="auto", messages=[{
            "role": "user", "content": f"<code>{ORIGINAL}</code>"}])
    assert missing.value.code == "missing_update"
    unmergeable = f"<code>{ORIGINAL}</code>\n<update><<<<<<< SEARCH\nnope\n=======\nx\n" \
                  f">>>>>>> REPLACE\n</update>"
    for stream in (False, True):  # a streamed request refused up front is an HTTP 400 too
        with pytest.raises(openai.BadRequestError, match="SEARCH block 1"):  # Triton's words
            sdk.chat.completions.create(model="auto", stream=stream, messages=[
                {"role": "user", "content": unmergeable}])
    with pytest.raises(openai.BadRequestError, match="stream must be true or false"):
        sdk.chat.completions.create(model="auto", messages=[{"role": "user",
                                                              "content": MORPH}],
                                    extra_body={"stream": "yes"})
    again = sdk.chat.completions.create(model="auto", messages=[{"role": "user",
                                                                  "content": MORPH}])
    assert again.choices[0].message.content == MERGED  # still serving


def test_models_accept_any_name(sdk: Any) -> None:
    names = [m.id for m in sdk.models.list()]
    assert {"auto", "morph-v3-fast", "morph-v3-large", "relace-apply-3"} <= set(names)
    assert sdk.models.retrieve("my-own-name").id == "my-own-name"


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"{", 400, "invalid_json"),
    (b"", 400, "invalid_json"),
    (b'{"messages": "hi"}', 400, "invalid_type"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 99999999999}', 400,
     "invalid_value"),
    # These two were a bare 500 "Internal Server Error" (RecursionError; a lone surrogate
    # cannot be UTF-8 encoded for the gRPC request).
    (b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "invalid_json"),
    (b'{"messages": [{"role": "user", "content": "<code>\\ud800</code><update>x</update>"}]}',
     400, "invalid_json"),
])
def test_raw_bad_bodies_get_openai_error_json(front: OpenAIFront, body: bytes, status: int,
                                              code: str) -> None:
    got, ctype, raw = post(front, "/v1/chat/completions", body)
    error = json.loads(raw)["error"]
    assert (got, ctype, error["code"]) == (status, "application/json", code)
    assert set(error) == {"message", "type", "param", "code"}


def test_a_body_over_the_limit_is_refused_before_it_is_read(front: OpenAIFront) -> None:
    # The front read any body whole into memory (the guard refuses over 64 MiB).
    with socket.create_connection(("127.0.0.1", front.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/code/apply HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\n\r\n{\"initialCode\": "
                     % (2**30))
        answer = b""
        while b"request_too_large" not in answer and (part := sock.recv(65536)):
            answer += part
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert b"request_too_large" in answer


def test_unknown_routes_and_methods(front: OpenAIFront) -> None:
    status, _, raw = post(front, "/v1/embeddings", {})
    assert status == 404 and "/v1/completions" in json.loads(raw)["error"]["message"]
    status, _, raw = post(front, "/v1/models", {})
    assert status == 405 and "not allowed" in json.loads(raw)["error"]["message"]


# -- Relace /v1/code/apply ----------------------------------------------------------------


@pytest.mark.parametrize("names", [("initialCode", "editSnippet"),
                                   ("initial_code", "edit_snippet")])
def test_relace_apply_json(front: OpenAIFront, names: tuple[str, str]) -> None:
    status, ctype, raw = post(front, "/v1/code/apply", {names[0]: ORIGINAL,
                                                        names[1]: SNIPPET})
    answer = json.loads(raw)
    assert (status, ctype, answer["mergedCode"]) == (200, "application/json", MERGED)
    assert set(answer["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert isinstance(answer["stats"], dict) and answer["stats"]["finish_reason"] == "merged"


def test_relace_apply_streams_server_sent_events(front: OpenAIFront) -> None:
    status, ctype, raw = post(front, "/v1/code/apply", {
        "initialCode": ORIGINAL, "editSnippet": SNIPPET, "stream": True})
    got = events(raw)
    assert (status, ctype.split(";")[0], got[-1]) == (200, "text/event-stream", "[DONE]")
    assert "".join(e["chunk"] for e in got if "chunk" in e) == MERGED
    assert isinstance(got[-2]["stats"], dict) and "usage" in got[-2]


def test_relace_apply_errors(front: OpenAIFront) -> None:
    status, _, raw = post(front, "/v1/code/apply", {"initialCode": ORIGINAL})
    assert status == 400 and "editSnippet is missing" in json.loads(raw)["error"]["message"]
    for stream in (b"false", b"true"):  # a lone surrogate was a 500
        status, _, raw = post(front, "/v1/code/apply", b'{"initialCode": "\\udfff", '
                              b'"editSnippet": "x", "stream": ' + stream + b"}")
        assert status == 400 and "lone UTF-16 surrogate" in json.loads(raw)["error"]["message"]
    status, _, raw = post(front, "/v1/code/apply", {"initialCode": ORIGINAL,
                                                    "editSnippet": " "})
    assert status == 400 and "edit_snippet is empty" in json.loads(raw)["error"]["message"]


@pytest.mark.slow
def test_aiperf_profiles_the_chat_endpoint_without_errors(front: OpenAIFront, tmp_path: Path,
                                                          tiny_model_dir: Path) -> None:
    """NVIDIA's AIPerf (genai-perf's successor; genai-perf itself needs the perf_analyzer
    binary, which pip does not provide) drives the streamed chat endpoint. Opt-in: it
    pulls ~1.2 GB, so install it in a venv of its own and set FASTAPPLY_AIPERF."""
    import os
    import subprocess

    aiperf = os.environ.get("FASTAPPLY_AIPERF")
    if not aiperf:
        pytest.skip("set FASTAPPLY_AIPERF to an aiperf executable (pip install aiperf in "
                    "a separate venv) to run this")
    dataset = tmp_path / "edits.jsonl"
    dataset.write_text(json.dumps({"text": MORPH}) + "\n")
    out = tmp_path / "aiperf"
    done = subprocess.run(
        [aiperf, "profile", "--model", "fast_apply", "--url", front.url, "--endpoint-type",
         "chat", "--streaming", "--input-file", str(dataset), "--custom-dataset-type",
         "single_turn", "--tokenizer", str(tiny_model_dir), "--request-count", "20",
         "--concurrency", "2", "--ui", "none", "--artifact-dir", str(out)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    report = json.loads((out / "profile_export_aiperf.json").read_text())
    assert report["request_count"]["avg"] == 20 and report["error_summary"] == []
    assert report["time_to_first_token"]["unit"] == "ms"


# -- the tiny model: truncation refused, departures cancel --------------------------------


@pytest.fixture(scope="module")
def tiny_front(tiny_server: Any, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[OpenAIFront]:
    f = start_front(tiny_server, tmp_path_factory)
    yield f
    f.stop()


@pytest.mark.slow
def test_a_file_cut_off_by_max_tokens_is_never_a_success(tiny_front: OpenAIFront) -> None:
    import openai

    sdk = openai.OpenAI(base_url=f"{tiny_front.url}/v1", api_key="any", max_retries=0)
    ask: Any = {"model": "auto", "max_tokens": 5,
                "messages": [{"role": "user", "content": MORPH}]}
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(**ask)
    with pytest.raises(openai.APIError):  # an HTTP 400, or an error event after deltas
        for _ in sdk.chat.completions.create(**ask, stream=True):
            pass
    status, _, raw = post(tiny_front, "/v1/code/apply", {
        "initialCode": ORIGINAL, "editSnippet": SNIPPET, "max_tokens": 5, "stream": True})
    got = events(raw) if status == 200 else [json.loads(raw)]
    assert "[DONE]" not in got and "error" in got[-1]


def outcomes(server: Any) -> dict[str, float]:
    """fastapply_requests_total by outcome, from the server's metrics port."""
    with urllib.request.urlopen(server.metrics_url, timeout=5) as r:
        text = r.read().decode()
    return {line.split('outcome="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("fastapply_requests_total{")}


@pytest.mark.slow
def test_leaving_mid_stream_cancels_the_request_in_triton(tiny_front: OpenAIFront,
                                                          tiny_server: Any) -> None:
    before = outcomes(tiny_server)
    leave_mid_request(tiny_front, "/v1/code/apply", {
        "initialCode": "a = 1\n", "editSnippet": "a = 2\n", "max_tokens": 900, "stream": True})
    # The model applies its counters at most every 0.1 s, on a request's way out: refused
    # requests (an empty snippet) carry the cancellation's count out. A bounded wait.
    deadline = time.monotonic() + 60
    while outcomes(tiny_server)["cancelled"] == before["cancelled"] and \
            time.monotonic() < deadline:
        time.sleep(0.2)
        status, _, raw = post(tiny_front, "/v1/code/apply", {"initialCode": ORIGINAL,
                                                             "editSnippet": " "})
        assert status == 400 and b"edit_snippet is empty" in raw  # and the front serves on
    after = outcomes(tiny_server)
    assert after["cancelled"] == before["cancelled"] + 1, (before, after)


def leave_mid_request(front: OpenAIFront, path: str, body: dict[str, Any]) -> None:
    """Send a request, wait until the server is at work on it, and hang up."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", front.port), timeout=60) as s:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
        if body.get("stream"):
            assert s.recv(65536).startswith(b"HTTP/1.1 200")  # streaming has begun
        else:
            s.settimeout(0.5)
            with pytest.raises(TimeoutError):  # still merging: no answer yet
                s.recv(1)


@pytest.mark.slow
def test_clients_that_leave_give_their_slot_back(tiny_server: Any, tmp_path: Path) -> None:
    # One request in flight at a time: a slot kept by a departed client would make the
    # last request wait forever (here: fail after the client's 60 s timeout).
    with OpenAIFront(tiny_server.grpc_url, concurrency=1,
                     log_path=tmp_path / "front.log") as front:
        long_merge = {"initialCode": "a = 1\n", "editSnippet": "a = 2\n", "max_tokens": 900}
        leave_mid_request(front, "/v1/code/apply", long_merge)
        leave_mid_request(front, "/v1/code/apply", {**long_merge, "stream": True})
        status, _, raw = post(front, "/v1/code/apply", {
            "initialCode": ORIGINAL, "editSnippet": " "})
        assert status == 400 and b"edit_snippet is empty" in raw


@pytest.mark.parametrize("args", [["--concurrency", "0"], ["--concurrency", "-1"],
                                  ["--timeout-s", "-1"], ["--timeout-s", "nan"]])
def test_the_front_refuses_settings_that_break_every_request(args: list[str]) -> None:
    # --concurrency 0 left every request waiting forever, -1 was a traceback, and a
    # timeout of -1 failed every request.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fastapply.server.openai.server", "--port", "1",
                           *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "above 0" in done.stderr, done.stderr


def test_a_front_that_cannot_bind_says_so(tmp_path: Path) -> None:
    from fastapply.server.triton import ServerError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        front = OpenAIFront("127.0.0.1:1", port=taken.getsockname()[1],
                            log_path=tmp_path / "front.log")
        with pytest.raises(ServerError, match=r"(?is)exited with status .*address already in use"):
            front.start()
    assert front.process is None


def test_unreachable_triton_is_a_502_not_a_crash(tmp_path: Path) -> None:
    from fastapply.server.processes import free_port

    with OpenAIFront(f"127.0.0.1:{free_port()}", log_path=tmp_path / "front.log") as front:
        status, _, raw = post(front, "/v1/code/apply", {"initialCode": "a", "editSnippet": "b"})
    error = json.loads(raw)["error"]
    assert (status, error["type"]) == (502, "server_error")
    assert "cannot reach a fastapply server" in error["message"]


# -- `fastapply serve --openai-port` ------------------------------------------------------


def test_serve_starts_the_front_and_stops_it(tmp_path: Path) -> None:
    import signal
    import subprocess

    import openai
    from test_serving import serve_command

    from fastapply.server.processes import free_port

    port = free_port()
    proc = subprocess.Popen(serve_command("--openai-port", str(port)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(6)]
        assert any(f"OpenAI   http://127.0.0.1:{port}/v1" in line for line in lines), lines
        sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        done = sdk.chat.completions.create(model="auto",
                                           messages=[{"role": "user", "content": MORPH}])
        assert done.choices[0].message.content == MERGED
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
