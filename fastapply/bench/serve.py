"""Serving overhead: deterministic merges through Triton's gRPC stream vs in process.

Starts a tritonserver (deterministic runtime) on free loopback ports, then sends the
same edit of a generated ``--lines``-line Python file ``--requests`` times, alternating
one in-process ``FastApplyService.apply`` and one ``FastApplyClient.apply`` round trip,
so both see the same machine load. Reports median and p95 latency of each, the median
overhead of serving, and the characters per second of the merged file through gRPC.

The round trip is also split with the server's own ``stats.total_ms`` (the service call
inside the Python-backend stub): ``server_service`` against ``in process`` says whether
the merge itself is slower in the server, ``transport`` (round trip minus service time,
per request) is what gRPC, Triton and the backend's process hops cost.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from fastapply.bench.common import percentile, print_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lines", type=int, default=500, help="lines in the edited file (500)")
    p.add_argument("--requests", type=int, default=200,
                   help="requests of each kind, interleaved (200)")
    p.add_argument("--warmup", type=int, default=10, help="untimed requests of each kind (10)")


def make_edit(lines: int) -> tuple[str, str, str]:
    """(original, lazy snippet, expected merge): a file of small functions, one of them
    in the middle changed, the rest elided with markers."""
    functions = max(3, lines // 5)
    blocks = [f"def step_{i}(value):\n    \"\"\"Step {i}.\"\"\"\n    value = value + {i}\n"
              f"    return value * 2\n\n" for i in range(functions)]
    original = "".join(blocks)[:-1]
    mid = functions // 2
    new_block = (f"def step_{mid}(value):\n    \"\"\"Step {mid}, now clamped.\"\"\"\n"
                 f"    value = min(value + {mid}, 1000)\n    return value * 2\n")
    snippet = (f"# ... existing code ...\n\n{new_block}\ndef step_{mid + 1}(value):\n"
               f"# ... existing code ...\n")
    expected = original.replace(blocks[mid][:-1], new_block)
    return original, snippet, expected


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.client import FastApplyClient
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import TritonServer
    from fastapply.service import FastApplyService, ServiceConfig

    original, snippet, expected = make_edit(args.lines)
    service = FastApplyService(ServiceConfig(runtime="deterministic"))
    merged = service.apply(original, snippet).merged_code
    if merged != expected:
        raise SystemExit("bench serve: the generated edit does not merge as expected; "
                         "the deterministic merge has changed, fix make_edit")
    local_ms: list[float] = []
    grpc_ms: list[float] = []
    service_ms: list[float] = []  # the server's stats.total_ms of each gRPC request
    with tempfile.TemporaryDirectory(prefix="fastapply-bench-") as tmp:
        repo = render_repository(tmp, runtime="deterministic")
        with TritonServer(repo) as server, FastApplyClient(server.grpc_url) as client:
            for i in range(args.warmup + args.requests):
                t0 = time.perf_counter()
                service.apply(original, snippet)
                t1 = time.perf_counter()
                served = client.apply(original, snippet)
                t2 = time.perf_counter()
                if served.merged_code != expected:
                    raise SystemExit("bench serve: the server returned a different merge")
                if i >= args.warmup:
                    local_ms.append((t1 - t0) * 1e3)
                    grpc_ms.append((t2 - t1) * 1e3)
                    service_ms.append(served.stats.total_ms)
    result = {
        "lines": original.count("\n") + 1,
        "requests": args.requests,
        "inprocess_p50_ms": percentile(local_ms, 50),
        "inprocess_p95_ms": percentile(local_ms, 95),
        "grpc_p50_ms": percentile(grpc_ms, 50),
        "grpc_p95_ms": percentile(grpc_ms, 95),
    }
    result["overhead_p50_ms"] = result["grpc_p50_ms"] - result["inprocess_p50_ms"]
    result["grpc_chars_per_s"] = len(expected) / (result["grpc_p50_ms"] / 1e3)
    transport_ms = [g - s for g, s in zip(grpc_ms, service_ms, strict=True)]
    result["server_service_p50_ms"] = percentile(service_ms, 50)
    result["server_service_p95_ms"] = percentile(service_ms, 95)
    result["transport_p50_ms"] = percentile(transport_ms, 50)
    result["transport_p95_ms"] = percentile(transport_ms, 95)
    print_table(["path", "p50_ms", "p95_ms", "chars_per_s (p50)"], [
        ["in process", result["inprocess_p50_ms"], result["inprocess_p95_ms"],
         len(expected) / (result["inprocess_p50_ms"] / 1e3)],
        ["gRPC stream", result["grpc_p50_ms"], result["grpc_p95_ms"],
         result["grpc_chars_per_s"]],
        ["  server_service", result["server_service_p50_ms"],
         result["server_service_p95_ms"], ""],
        ["  transport", result["transport_p50_ms"], result["transport_p95_ms"], ""],
        ["overhead", result["overhead_p50_ms"], result["grpc_p95_ms"] -
         result["inprocess_p95_ms"], ""],
    ])
    return result
