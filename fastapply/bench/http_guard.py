"""What the HTTP guard (fastapply.server.http.guard) adds per HTTP generate request.

Starts a tritonserver (deterministic runtime) behind its guard on free loopback ports,
then sends the same edit of a generated ``--lines``-line Python file ``--requests``
times down each path in turn, so all see the same machine load:

* ``direct``: ``POST /v2/models/fast_apply/generate`` to tritonserver's own HTTP port
  (the baseline), a keep-alive ``http.client`` connection;
* ``guard``: the same request to the guard's port (the public one of ``fastapply
  serve``): body checked, forwarded, answer relayed;
* ``direct_stream``, ``guard_stream``: ``generate_stream`` with ``stream: true``, read
  to the end of the event stream.

``added_p50_ms`` is the median of per-iteration differences ``guard - direct`` (the
target is <= 1 ms); ``added_stream_p50_ms`` the same for the streams. Every answer is
checked against the expected merge.
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
from collections.abc import Callable
from typing import Any

from fastapply.bench.common import interleaved_ms, percentile, post_ok, print_table
from fastapply.bench.openai_front import add_arguments
from fastapply.bench.serve import make_edit

__all__ = ["add_arguments", "run"]

PATHS = ("direct", "guard", "direct_stream", "guard_stream")
GENERATE = "/v2/models/fast_apply/generate"


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> bytes:
    return post_ok(conn, path, body, "http_guard")


def _streamed_text(raw: bytes) -> str:
    events = [json.loads(block[len(b"data: "):]) for block in raw.split(b"\n\n") if block]
    return "".join(e["merged_code"] for e in events)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import TritonServer

    original, snippet, expected = make_edit(args.lines)
    body = json.dumps({"initial_code": original, "edit_snippet": snippet}).encode()
    stream_body = json.dumps({"initial_code": original, "edit_snippet": snippet,
                              "stream": True}).encode()
    with tempfile.TemporaryDirectory(prefix="fastapply-bench-") as tmp:
        repo = render_repository(tmp, runtime="deterministic")
        with TritonServer(repo) as server:
            direct = http.client.HTTPConnection("127.0.0.1", server.triton_http_port, timeout=60)
            guard = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
            calls: dict[str, Callable[[], str]] = {
                "direct": lambda: json.loads(_post(direct, GENERATE, body))["merged_code"],
                "guard": lambda: json.loads(_post(guard, GENERATE, body))["merged_code"],
                "direct_stream": lambda: _streamed_text(
                    _post(direct, f"{GENERATE}_stream", stream_body)),
                "guard_stream": lambda: _streamed_text(
                    _post(guard, f"{GENERATE}_stream", stream_body)),
            }
            times = interleaved_ms(calls, expected, args.warmup, args.requests, "http_guard")
            direct.close()
            guard.close()
    result: dict[str, Any] = {"lines": original.count("\n") + 1, "requests": args.requests,
                              "body_bytes": len(body)}
    rows = []
    for path in PATHS:
        result[f"{path}_p50_ms"] = percentile(times[path], 50)
        result[f"{path}_p95_ms"] = percentile(times[path], 95)
    for suffix in ("", "_stream"):
        added = [g - d for g, d in zip(times[f"guard{suffix}"], times[f"direct{suffix}"],
                                       strict=True)]
        result[f"added{suffix}_p50_ms"] = percentile(added, 50)
        result[f"added{suffix}_p95_ms"] = percentile(added, 95)
    for path in PATHS:
        kind = "_stream" if path.endswith("_stream") else ""
        guarded = path.startswith("guard")
        rows.append([path, result[f"{path}_p50_ms"], result[f"{path}_p95_ms"],
                     result[f"added{kind}_p50_ms"] if guarded else "",
                     result[f"added{kind}_p95_ms"] if guarded else ""])
    print_table(["path", "p50_ms", "p95_ms", "added_p50_ms (vs direct)", "added_p95_ms"], rows)
    return result
