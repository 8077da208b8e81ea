"""What the OpenAI/Morph/Relace HTTP front adds per request over the direct gRPC path.

Starts a tritonserver (deterministic runtime) and ``fastapply.server.openai.server`` beside it
on free loopback ports, then sends the same edit of a generated ``--lines``-line Python
file ``--requests`` times through each path in turn, so all see the same machine load:

* ``grpc``: ``FastApplyClient.apply`` straight to Triton (the baseline);
* ``chat``: ``POST /v1/chat/completions`` with Morph tags, a keep-alive ``http.client``
  connection (the front's cost plus the least a client can spend on HTTP and JSON);
* ``chat_stream``: the same with ``stream: true``, read to ``[DONE]``;
* ``relace``: ``POST /v1/code/apply`` (Relace's JSON);
* ``openai_sdk``: ``chat.completions.create`` of the ``openai`` package (its own
  client-side cost included; for information).

``overhead_p50_ms`` is the median of per-iteration differences ``chat - grpc`` (the
target is <= 1 ms); every answer is checked against the expected merge.
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
from collections.abc import Callable
from typing import Any

from fastapply.bench.common import interleaved_ms, percentile, post_ok, print_table
from fastapply.bench.serve import make_edit

PATHS = ("grpc", "chat", "chat_stream", "relace", "openai_sdk")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lines", type=int, default=500, help="lines in the edited file (500)")
    p.add_argument("--requests", type=int, default=300,
                   help="requests through each path, interleaved (300)")
    p.add_argument("--warmup", type=int, default=20, help="untimed requests per path (20)")


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> bytes:
    return post_ok(conn, path, body, "openai_front")


def _streamed_text(raw: bytes) -> str:
    events = [block[len(b"data: "):] for block in raw.split(b"\n\n") if block]
    if events[-1] != b"[DONE]":
        raise SystemExit("bench openai_front: the stream did not end with [DONE]")
    chunks = [json.loads(e) for e in events[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c["choices"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    import openai

    from fastapply.client import FastApplyClient
    from fastapply.server.model_repo import render_repository
    from fastapply.server.openai.server import OpenAIFront
    from fastapply.server.triton import TritonServer

    original, snippet, expected = make_edit(args.lines)
    message = f"<code>{original}</code>\n<update>{snippet}</update>"
    chat_body = json.dumps({"model": "morph-v3-fast", "messages": [
        {"role": "user", "content": message}]}).encode()
    stream_body = json.dumps({"model": "morph-v3-fast", "stream": True, "messages": [
        {"role": "user", "content": message}]}).encode()
    relace_body = json.dumps({"initialCode": original, "editSnippet": snippet}).encode()
    with tempfile.TemporaryDirectory(prefix="fastapply-bench-") as tmp:
        repo = render_repository(tmp, runtime="deterministic")
        with TritonServer(repo) as server, OpenAIFront(server.grpc_url) as front, \
                FastApplyClient(server.grpc_url) as grpc:
            conn = http.client.HTTPConnection("127.0.0.1", front.port, timeout=60)
            sdk = openai.OpenAI(base_url=f"{front.url}/v1", api_key="any", max_retries=0)
            calls: dict[str, Callable[[], str]] = {
                "grpc": lambda: grpc.apply(original, snippet).merged_code,
                "chat": lambda: json.loads(_post(conn, "/v1/chat/completions", chat_body))[
                    "choices"][0]["message"]["content"],
                "chat_stream": lambda: _streamed_text(
                    _post(conn, "/v1/chat/completions", stream_body)),
                "relace": lambda: json.loads(_post(conn, "/v1/code/apply", relace_body))[
                    "mergedCode"],
                "openai_sdk": lambda: sdk.chat.completions.create(
                    model="morph-v3-fast", messages=[{"role": "user", "content": message}]
                ).choices[0].message.content or "",
            }
            times = interleaved_ms(calls, expected, args.warmup, args.requests, "openai_front")
            conn.close()
            sdk.close()
    result: dict[str, Any] = {"lines": original.count("\n") + 1, "requests": args.requests,
                              "file_bytes": len(original.encode())}
    rows = []
    for path in PATHS:
        extra = [t - g for t, g in zip(times[path], times["grpc"], strict=True)]
        result[f"{path}_p50_ms"] = percentile(times[path], 50)
        result[f"{path}_p95_ms"] = percentile(times[path], 95)
        if path != "grpc":
            result[f"{path}_overhead_p50_ms"] = percentile(extra, 50)
        rows.append([path, result[f"{path}_p50_ms"], result[f"{path}_p95_ms"],
                     result.get(f"{path}_overhead_p50_ms", "")])
    result["overhead_p50_ms"] = result["chat_overhead_p50_ms"]
    print_table(["path", "p50_ms", "p95_ms", "overhead_p50_ms (vs grpc)"], rows)
    return result
