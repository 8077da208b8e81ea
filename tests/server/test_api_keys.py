"""API keys on every port that serves an edit (issue 57): a real tritonserver (the
deterministic runtime), its HTTP guard and the OpenAI front, started with two keys, asked by
real clients (the openai SDK, a Morph-shaped request, the gRPC client) with the right, a
wrong and no key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fastapply.server.auth import (
    API_KEYS_ENV,
    ApiKeyError,
    KeyCheck,
    api_keys,
    presented,
)

KEY = "first-key-0123456789abcdef"
SECOND = "second.key_~0123456789ABCDEF"
WRONG = "wrong-key-0123456789abcdefgh"
ORIGINAL = "def f():\n    return 1\n"
SNIPPET = "<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n"
MERGED = ORIGINAL.replace("return 1", "return 2")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A server and its OpenAI front that take KEY and SECOND (KEY given twice)."""
    from conftest import TEST_MAX_INPUT_BYTES

    from fastapply.server.model_repo import render_repository
    from fastapply.server.openai.server import OpenAIFront
    from fastapply.server.triton import ServerError, TritonServer, find_server

    try:
        find_server()
    except ServerError as exc:
        pytest.skip(f"no tritonserver: {exc}")
    out = tmp_path_factory.mktemp("keyed")
    repo = render_repository(out, runtime="deterministic", max_input_bytes=TEST_MAX_INPUT_BYTES)
    keys = api_keys([KEY, KEY, SECOND], None)
    assert keys == (KEY, SECOND)
    server = TritonServer(repo, log_path=out / "tritonserver.log", api_keys=keys).start()
    front = OpenAIFront(server.grpc_url, api_keys=keys, log_path=out / "front.log").start()
    try:
        yield server, front
    finally:
        front.stop()
        server.stop()


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None
          ) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _get(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_openai_sdk_is_served_with_either_key_and_refused_without_one(
        keyed: tuple[Any, Any]) -> None:
    import openai

    _, front = keyed
    messages: Any = [{"role": "user",
                      "content": f"<code>{ORIGINAL}</code>\n<update>{SNIPPET}</update>"}]
    for key in (KEY, SECOND):  # two keys live: a rotation
        sdk = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
        done = sdk.chat.completions.create(model="morph-v3-fast", messages=messages)
        assert done.choices[0].message.content == MERGED
    for key in (WRONG, KEY[:-1]):  # (a request without any: the Morph-shaped test)
        sdk = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            sdk.chat.completions.create(model="morph-v3-fast", messages=messages)
        assert caught.value.status_code == 401
        body = caught.value.body
        assert isinstance(body, dict) and body["code"] == "invalid_api_key"
        assert body["type"] == "invalid_request_error" and "FASTAPPLY_API_KEY" in body["message"]
        assert WRONG not in json.dumps(body)
    with pytest.raises(openai.AuthenticationError):  # the model list is closed too
        openai.OpenAI(base_url=f"{front.url}/v1", api_key=WRONG, max_retries=0).models.list()


def test_a_morph_shaped_request_needs_a_key_and_health_does_not(keyed: tuple[Any, Any]) -> None:
    _, front = keyed
    body = {"model": "morph-v3-large", "messages": [
        {"role": "user", "content": f"<instruction>bump</instruction>\n<code>{ORIGINAL}</code>"
                                    f"\n<update>{SNIPPET}</update>"}]}
    status, answer = _post(f"{front.url}/v1/chat/completions", body,
                           {"Authorization": f"Bearer {SECOND}"})
    assert status == 200 and answer["choices"][0]["message"]["content"] == MERGED
    for headers in ({}, {"Authorization": f"Bearer {WRONG}"}, {"Authorization": KEY}):
        status, answer = _post(f"{front.url}/v1/chat/completions", body, headers)
        assert status == 401 and answer["error"]["code"] == "invalid_api_key", headers
    status, answer = _post(f"{front.url}/v1/code/apply",  # Relace's shape
                           {"initialCode": ORIGINAL, "editSnippet": SNIPPET})
    assert status == 401
    assert _get(f"{front.url}/health") == 200


def test_the_grpc_client_needs_the_key_and_says_so_without_it(keyed: tuple[Any, Any]) -> None:
    from fastapply.client import FastApplyClient, FastApplyError

    server, _ = keyed
    for key in (KEY, SECOND):  # two keys live on gRPC too (the model checks them)
        with FastApplyClient(server.grpc_url, api_key=key) as client:
            assert client.apply(ORIGINAL, SNIPPET).merged_code == MERGED
    for key in ("", WRONG):
        with FastApplyClient(server.grpc_url, api_key=key) as client, \
                pytest.raises(FastApplyError, match=r"needs an API key it knows: set "
                                                    r"\$FASTAPPLY_API_KEY") as caught:
            client.apply(ORIGINAL, SNIPPET)
        assert not key or key not in str(caught.value)


def test_the_http_port_takes_either_key_and_triton_behind_it_the_first(
        keyed: tuple[Any, Any]) -> None:
    server, _ = keyed
    body = {"initial_code": ORIGINAL, "edit_snippet": SNIPPET}
    url = f"{server.http_url}/v2/models/fast_apply/generate"
    for key in (KEY, SECOND):
        status, answer = _post(url, body, {"Authorization": f"Bearer {key}"})
        assert status == 200 and answer["merged_code"] == MERGED
    status, answer = _post(url, body, {"fastapply-api-key": SECOND})
    assert status == 200
    for headers in ({}, {"Authorization": f"Bearer {WRONG}"}):
        status, answer = _post(url, body, headers)
        assert status == 401 and "FASTAPPLY_API_KEY" in answer["error"], headers
    assert _get(f"{server.http_url}/v2/health/ready") == 200
    # tritonserver's own HTTP (loopback, behind the guard): with several keys the model
    # checks the key, which Triton hands it only as a field of the JSON (the guard adds it)
    own = f"{server.triton_http_url}/v2/models/fast_apply/generate"
    assert _post(own, body)[0] != 200
    assert _post(own, body, {"fastapply-api-key": SECOND})[0] != 200
    assert _post(own, {**body, "fastapply-api-key": WRONG})[0] != 200
    assert _post(own, {**body, "fastapply-api-key": SECOND})[0] == 200


def test_one_key_closes_tritons_own_ports_with_its_restricted_protocol(
        tmp_path: Path) -> None:
    # One key (no rotation): Triton itself refuses, as it does for the admin APIs.
    from fastapply.client import FastApplyClient, FastApplyError
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import ServerError, TritonServer, find_server

    try:
        find_server()
    except ServerError as exc:
        pytest.skip(f"no tritonserver: {exc}")

    repo = render_repository(tmp_path / "repo", runtime="deterministic")
    server = TritonServer(repo, log_path=tmp_path / "t.log", api_keys=(KEY,),
                          http_guard=False).start()
    try:
        with FastApplyClient(server.grpc_url, api_key=KEY) as client:
            assert client.apply(ORIGINAL, SNIPPET).merged_code == MERGED
        with FastApplyClient(server.grpc_url, api_key="") as client, \
                pytest.raises(FastApplyError, match="needs an API key it knows"):
            client.apply(ORIGINAL, SNIPPET)
        url = f"{server.http_url}/v2/models/fast_apply/generate"
        body = {"initial_code": ORIGINAL, "edit_snippet": SNIPPET}
        assert _post(url, body)[0] == 403  # Triton's restricted API
        assert _post(url, body, {"fastapply-api-key": KEY})[0] == 200
        assert _get(f"{server.http_url}/v2/health/ready") == 200
    finally:
        server.stop()


def test_no_key_reaches_a_log_or_a_stats_field(keyed: tuple[Any, Any]) -> None:
    from fastapply.client import FastApplyClient

    server, front = keyed
    with FastApplyClient(server.grpc_url, api_key=KEY) as client:
        stats = client.apply(ORIGINAL, SNIPPET).stats.to_dict()
    _post(f"{front.url}/v1/chat/completions", {"messages": []},
          {"Authorization": f"Bearer {WRONG}"})
    logs = [server.log_path, server.guard_log_path, front.log_path]
    text = "\n".join(p.read_text(errors="replace") for p in logs if p and p.exists())
    for key in (KEY, SECOND, WRONG):
        assert key not in text and key not in json.dumps(stats)


def test_keys_are_read_from_options_or_the_environment_and_checked() -> None:
    assert api_keys(None, f" {KEY} ,{SECOND}") == (KEY, SECOND)
    assert api_keys([SECOND], KEY) == (SECOND,)  # an option wins over the variable
    assert api_keys(None, None) == api_keys(None, "  ") == ()
    for bad, where in (([""], "--api-key: key 1 is empty"),
                       ([KEY, "short"], "--api-key: key 2 (5 characters) is not a usable key")):
        with pytest.raises(ApiKeyError, match=re.escape(where)):
            api_keys(bad, None)
    with pytest.raises(ApiKeyError, match=f"{API_KEYS_ENV}: key 2 is empty"):
        api_keys(None, f"{KEY},,")
    with pytest.raises(ApiKeyError) as caught:
        api_keys([KEY + ":x"], None)
    assert KEY not in str(caught.value)  # the message names the key's place, not the key
    check = KeyCheck((KEY, SECOND))
    assert check.accepts(KEY) and check.accepts(SECOND) and check.first == KEY
    assert not check.accepts(KEY[:-1]) and not check.accepts(None) and not check.accepts("")
    assert KeyCheck(()).accepts(None)  # no keys: open
    assert presented({"authorization": f"Bearer {KEY}"}) == KEY
    assert presented({"fastapply-api-key": KEY}) == KEY
    assert presented({"authorization": KEY}) is None


def test_serve_refuses_an_empty_key_at_start_up_with_its_reason() -> None:
    for args, env, message in (
            (["--api-key", ""], {}, "--api-key: key 1 is empty"),
            ([], {API_KEYS_ENV: f"{KEY},"}, f"{API_KEYS_ENV}: key 2 is empty")):
        got = subprocess.run([sys.executable, "-m", "fastapply.cli", "serve", "--runtime",
                              "deterministic", *args], capture_output=True, text=True,
                             timeout=120, env={**os.environ, **env})
        assert got.returncode == 2 and message in got.stderr, got.stderr
        assert KEY not in got.stderr


def test_the_start_up_message_says_whether_inference_is_open() -> None:
    from fastapply.server.cli import _keys_line

    assert "inference is open to whoever reaches these ports" in _keys_line((), True)
    line = _keys_line((KEY, SECOND), True)
    assert line.startswith("2 key(s) close inference on every port") and KEY not in line


def test_the_charts_helm_test_passes_against_the_real_server(keyed: tuple[Any, Any]) -> None:
    # The chart's auth test pod (helm/fastapply/templates/tests/auth-pod.yaml) runs its
    # checks here against the real server and front with two keys: every one passes.
    import textwrap

    server, front = keyed
    template = (Path(__file__).resolve().parents[2] / "helm" / "fastapply" / "templates" /
                "tests" / "auth-pod.yaml").read_text()
    script = textwrap.dedent(template.split("        - |\n", 1)[1].split("      env:", 1)[0])
    assert "{{" not in script  # the script is the pod's as rendered
    env = {**os.environ, "FASTAPPLY_API_KEYS": f"{KEY}, {SECOND}", "HTTP_URL": server.http_url,
           "OPENAI_URL": front.url, "REQUEST_TIMEOUT_S": "60"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "every check passed" in done.stdout, done.stdout + done.stderr
    assert KEY not in done.stdout and SECOND not in done.stdout
