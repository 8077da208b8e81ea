"""The fast_apply Triton model served by a real tritonserver, and its repository template.

Servers (fixtures in conftest.py) run on free loopback ports: the deterministic runtime
for corpus edits, errors, concurrency and metrics; the tiny random model (torch, CPU
float32) for the lossless check against in-process greedy decoding.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    TEST_MAX_INPUT_BYTES,
    TINY_COMPLETE,
    TINY_CONTEXT_LIMIT_TOKENS,
    TINY_SERVING,
    reaped,
)

from fastapply.metrics import PROMETHEUS_COUNTERS, PROMETHEUS_LATENCY, PROMETHEUS_REQUESTS
from fastapply.server.model_repo import RenderError, fill, render_repository

FORMATS = ("lazy_snippet", "search_replace", "udiff")
ORIGINAL = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
SNIPPET = "<<<<<<< SEARCH\n    return 1\n=======\n    return 10\n>>>>>>> REPLACE\n"
MERGED = "def a():\n    return 10\n\n\ndef b():\n    return 2\n"


def mergeable(corpus: list[dict[str, Any]], n: int) -> list[tuple[dict[str, Any], str]]:
    """The first ``n`` (edit, snippet format) pairs, formats in turn, whose deterministic
    in-process merge is exactly the true updated file."""
    from fastapply.merge import apply_snippet
    from fastapply.merge.edits import EditError

    picked = []
    for i, edit in enumerate(corpus):
        fmt = FORMATS[i % len(FORMATS)]
        try:
            if apply_snippet(edit["original"], edit[fmt]).check() == edit["updated"]:
                picked.append((edit, fmt))
        except EditError:
            continue
        if len(picked) == n:
            return picked
    pytest.fail(f"only {len(picked)} corpus edits merge exactly in process")


def client(server: Any) -> Any:
    from fastapply.client import FastApplyClient

    return FastApplyClient(server.grpc_url, timeout_s=60)


# -- the repository template ------------------------------------------------------------


def test_render_refuses_leftover_and_unknown_placeholders(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"\$\{device\}"):
        fill("runtime: ${runtime} device: ${device}", {"runtime": "torch"})
    with pytest.raises(RenderError, match=r"unknown parameter.*colour"):
        render_repository(tmp_path, colour="blue")
    with pytest.raises(RenderError, match="unknown runtime"):
        render_repository(tmp_path, runtime="onnx")
    with pytest.raises(RenderError, match="needs a model directory"):
        render_repository(tmp_path, runtime="torch")


def test_render_writes_a_complete_decoupled_config(tmp_path: Path) -> None:
    repo = render_repository(tmp_path, runtime="torch", model_dir=tmp_path, max_draft_len=16)
    config = (repo / "fast_apply" / "config.pbtxt").read_text()
    assert "${" not in config
    assert "decoupled: true" in config
    assert 'string_value: "torch"' in config and 'string_value: "16"' in config
    assert f'string_value: "{tmp_path.resolve()}"' in config
    assert (repo / "fast_apply" / "1" / "model.py").is_file()


# -- deterministic runtime ------------------------------------------------------------


@pytest.mark.server
def test_corpus_edits_through_grpc_equal_updated(det_server: Any, corpus: Any) -> None:
    with client(det_server) as c:
        for edit, fmt in mergeable(corpus, 20):
            result = c.apply(edit["original"], edit[fmt])
            assert result.merged_code == edit["updated"], (edit["id"], fmt)
            assert result.stats.finish_reason == "merged"
            assert result.stats.total_ms > 0


@pytest.mark.server
def test_streamed_deltas_concatenate_to_the_merged_file(det_server: Any) -> None:
    with client(det_server) as c:
        stream = c.stream(ORIGINAL, SNIPPET)
        assert stream.stats is None
        assert "".join(stream) == MERGED
        assert stream.merged_code == MERGED
        assert stream.stats is not None and stream.stats.finish_reason == "merged"


@pytest.mark.server
def test_eight_concurrent_clients(det_server: Any, corpus: Any) -> None:
    pairs = mergeable(corpus, 24)
    failures: list[str] = []
    right: list[int] = [0] * 8  # exact merges per worker

    def work(worker: int) -> None:
        try:
            with client(det_server) as c:
                for edit, fmt in pairs[worker::8] * 2:
                    if c.apply(edit["original"], edit[fmt]).merged_code != edit["updated"]:
                        failures.append(f"{edit['id']}: wrong merge")
                    else:
                        right[worker] += 1
        except Exception as exc:  # collected and asserted below
            failures.append(f"worker {worker}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [t.name for t in threads if t.is_alive()] == []  # none hung
    assert failures == []
    assert right == [len(pairs[w::8]) * 2 for w in range(8)]  # every request answered


BAD_INPUTS = {
    "missing edit_snippet": ({"initial_code": b"x = 1\n"}, "missing required input"),
    "empty snippet": ({"initial_code": b"x = 1\n", "edit_snippet": b"  \n"},
                      "edit_snippet is empty"),
    "invalid UTF-8": ({"initial_code": b"x = \xff\n", "edit_snippet": b"x = 2\n"},
                      "initial_code is not valid UTF-8"),
    "too large": ({"initial_code": b"x\n" * TEST_MAX_INPUT_BYTES, "edit_snippet": b"x = 2\n"},
                  f"over the limit of {TEST_MAX_INPUT_BYTES} bytes"),
    "unmergeable": ({"initial_code": ORIGINAL.encode(),
                     "edit_snippet": b"<<<<<<< SEARCH\nnot here\n=======\nx\n>>>>>>> REPLACE\n"},
                    "cannot be merged: SEARCH block 1"),
    "zero max_tokens": ({"initial_code": ORIGINAL.encode(), "edit_snippet": SNIPPET.encode(),
                         "max_tokens": 0}, "max_tokens is 0"),
}


@pytest.mark.server
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_refused_with_a_useful_message(det_server: Any, raw_infer: Any,
                                                    case: str) -> None:
    inputs, expected = BAD_INPUTS[case]
    texts, error = raw_infer(det_server.grpc_url, inputs)
    assert error is not None and expected in error, error
    assert texts == []
    with client(det_server) as c:  # the server keeps serving
        assert c.apply(ORIGINAL, SNIPPET).merged_code == MERGED


@pytest.mark.server
def test_client_error_carries_the_server_message(det_server: Any) -> None:
    from fastapply.client import FastApplyError

    with client(det_server) as c:
        with pytest.raises(FastApplyError, match="edit_snippet is empty"):
            c.apply(ORIGINAL, "")
        assert c.apply(ORIGINAL, SNIPPET).merged_code == MERGED  # same stream still works


@pytest.mark.server
def test_metrics_endpoint_shows_our_counters(det_server: Any) -> None:
    def successes(text: str) -> float:
        rows = [line for line in text.splitlines()
                if line.startswith(PROMETHEUS_REQUESTS[0]) and 'outcome="success"' in line]
        return float(rows[0].split()[-1]) if rows else 0.0

    # The model applies counter updates at most every 0.1 s, on a request's way out: ask
    # until they show (the deadline only guards against a hang, it decides nothing).
    deadline = time.monotonic() + 60
    with client(det_server) as c:
        while True:
            c.apply(ORIGINAL, SNIPPET)
            text = urllib.request.urlopen(det_server.metrics_url, timeout=10).read().decode()
            if successes(text) >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.15)
    assert successes(text) >= 1
    for name, _, _ in PROMETHEUS_COUNTERS:
        assert f"\n{name} " in text, name
    latency = [line for line in text.splitlines() if line.startswith(PROMETHEUS_LATENCY[0])]
    assert latency and float(latency[0].split()[-1]) > 0


def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.server
def test_http_generate_and_generate_stream(det_server: Any) -> None:
    base = f"{det_server.http_url}/v2/models/fast_apply"
    status, body = post(f"{base}/generate", {"initial_code": ORIGINAL, "edit_snippet": SNIPPET})
    assert status == 200, body
    answer = json.loads(body)
    assert answer["merged_code"] == MERGED
    assert json.loads(answer["stats"])["finish_reason"] == "merged"

    status, body = post(f"{base}/generate_stream",
                        {"initial_code": ORIGINAL, "edit_snippet": SNIPPET, "stream": True})
    assert status == 200, body
    events = [json.loads(line[len("data: "):]) for line in body.splitlines()
              if line.startswith("data: ")]
    assert "".join(e["merged_code"] for e in events) == MERGED
    assert "stats" in events[-1]

    status, body = post(f"{base}/generate", {"initial_code": ORIGINAL, "edit_snippet": ""})
    assert status == 400 and "edit_snippet is empty" in body


# -- tiny model: served speculation equals in-process greedy decoding ------------------


@pytest.mark.server
@pytest.mark.slow
def test_tiny_model_served_equals_inprocess_greedy(tiny_server: Any, tiny_model_dir: Path
                                                   ) -> None:
    from fastapply.examples import load_edits
    from fastapply.service import FastApplyService, IncompleteOutput, ServiceConfig

    greedy = FastApplyService(ServiceConfig(
        runtime="torch", model_dir=str(tiny_model_dir), device="cpu", dtype="float32",
        max_draft_len=0, **TINY_SERVING))
    want = greedy.apply(*TINY_COMPLETE)  # a whole file: the model stops by itself
    with client(tiny_server) as c:
        served = c.apply(*TINY_COMPLETE)
        stream = c.stream(*TINY_COMPLETE)
        deltas = list(stream)
    assert served.merged_code == "".join(deltas) == want.merged_code
    assert served.stats.completion_tokens == want.stats.completion_tokens
    assert served.stats.finish_reason == want.stats.finish_reason == "stop"
    assert stream.stats is not None and stream.stats.forward_passes > 0

    # Noise cut at max_tokens: refused, and the text streamed before the refusal is greedy's.
    edit = min(load_edits(), key=lambda e: len(e["original"]))
    with pytest.raises(IncompleteOutput) as cut:
        greedy.apply(edit["original"], edit["lazy_snippet"], max_tokens=64)
    with client(tiny_server) as c:
        stream = c.stream(edit["original"], edit["lazy_snippet"], max_tokens=64)
        refusal = stream.drain()
    assert refusal is not None and "reached max_tokens=64" in refusal
    assert stream.merged_code == cut.value.partial.merged_code != ""


@pytest.mark.server
@pytest.mark.slow
def test_tiny_model_refuses_a_prompt_over_the_context_limit(tiny_server: Any) -> None:
    from fastapply.client import FastApplyError

    long_file = "".join(f"value_{i} = {i} * {i}\n" for i in range(TINY_CONTEXT_LIMIT_TOKENS))
    with client(tiny_server) as c, pytest.raises(FastApplyError, match="context limit"):
        c.apply(long_file, "value_1 = 2\n# ... existing code ...\n", max_tokens=8)


@pytest.mark.server
@pytest.mark.slow
def test_client_timeout_then_the_same_client_recovers(tiny_server: Any) -> None:
    from fastapply.client import FastApplyClient, FastApplyError

    # The server is paused (SIGSTOP) while the first request waits, so it cannot answer
    # in time however fast or loaded the machine is (a short timeout against a slow
    # prefill was a race: the answer could come first); it resumes before the second.
    with FastApplyClient(tiny_server.grpc_url, timeout_s=0.2) as c:
        os.kill(tiny_server.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises(FastApplyError, match=r"no answer from .* within 0.2 s"):
                c.apply(*TINY_COMPLETE)
        finally:
            os.kill(tiny_server.process.pid, signal.SIGCONT)
        c.timeout_s = 120  # the timed-out stream was dropped; a new one serves this
        again = c.apply(*TINY_COMPLETE)
    assert again.stats.finish_reason == "stop"


# -- `fastapply serve` -----------------------------------------------------------------


def serve_command(*args: str) -> list[str]:
    """``fastapply serve`` on free ports; the deterministic runtime unless ``args`` name
    one (the default model has tests of its own: tests/model)."""
    from fastapply.server.processes import free_ports

    if "--runtime" not in args and "--tiny-model" not in args:
        args = ("--runtime", "deterministic", *args)

    ports = [str(port) for port in free_ports(3)]
    return [sys.executable, "-m", "fastapply", "serve", "--grpc-port", ports[0],
            "--http-port", ports[1], "--metrics-port", ports[2], *args]


@pytest.mark.server
def test_serve_exits_nonzero_with_the_log_tail_when_the_model_fails(tmp_path: Path) -> None:
    done = subprocess.run(serve_command("--runtime", "torch", "--model", str(tmp_path / "no")),
                          capture_output=True, text=True, timeout=90)
    assert done.returncode != 0
    assert "did not load" in done.stderr and "no such model/tokenizer directory" in done.stderr


@pytest.mark.server
@pytest.mark.parametrize("guard", ["on", "off"])
def test_serve_prints_addresses_and_stops_on_sigterm(guard: str) -> None:
    # --http-guard off: tritonserver's own HTTP on the port, with its 500 for client errors
    proc = subprocess.Popen(serve_command("--http-guard", guard), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        while "Ctrl-C stops it" not in lines[-1]:
            lines.append(proc.stdout.readline())
            assert lines[-1], "".join(lines)
        assert any("gRPC" in line for line in lines), lines
        assert any("metrics" in line for line in lines), lines
        # no --api-key: inference is open as before, and serve says so
        assert any(line.strip().startswith("keys") and "inference is open" in line
                   for line in lines), lines
        http_url = next(line for line in lines if line.strip().startswith("HTTP")).split()[-1]
        generate = f"{http_url}/v2/models/fast_apply/generate"
        status, answer = post(generate, {"initial_code": ORIGINAL, "edit_snippet": SNIPPET,
                                         "stream": "yes"})
        if guard == "on":
            assert any("tritonserver's own HTTP on http://127.0.0.1:" in line
                       for line in lines), lines
            assert status == 400 and "stream is the string" in answer
        else:
            assert not any("guard" in line for line in lines), lines
            assert status == 500 and "non-boolean as boolean" in answer
        assert post(generate, {"initial_code": ORIGINAL, "edit_snippet": SNIPPET})[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "every request in flight was answered" in out


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--grace-period-s", "nan", "is not a grace period"),  # was a ValueError traceback
    ("--grace-period-s", "inf", "is not a grace period"),  # an OverflowError traceback
    ("--grace-period-s", "-5", "is not a grace period"),  # served, drained for -5 s
    ("--grpc-port", "70000", "is not a port"),
])
def test_serve_refuses_bad_numbers_before_it_starts(option: str, value: str,
                                                    message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "fastapply", "serve", option, value],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--runtime", "deterministic", "--witness-budget-s", "-1"),
     "witness_budget_s must be a number of seconds >= 0"),
    (("--runtime", "trtllm-engine", "--engine", ".", "--policy",
      "certain_or_confident_agree"),
     "policy 'certain_or_confident_agree' decides by the model's token probabilities, "
     "which runtime 'trtllm-engine' does not report"),
])
def test_serve_refuses_settings_the_service_refuses_with_their_reason(
        args: tuple[str, ...], message: str) -> None:
    # these were a RenderError traceback from the model repository's rendering
    done = subprocess.run([sys.executable, "-m", "fastapply", "serve", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"fastapply serve: {message}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.server
def test_a_signal_while_the_model_loads_stops_serve_at_once() -> None:
    # serve waited for the model to be ready (minutes for a large one) before it looked
    # at a Ctrl-C or SIGTERM, then printed its addresses and only then stopped.
    cmd = serve_command("--runtime", "deterministic")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        grpc_port = cmd[cmd.index("--grpc-port") + 1]
        # tritonserver is started (serve's handlers are set) and loads the model (~2 s)
        deadline = time.monotonic() + 60
        while subprocess.run(["pgrep", "-f", f"grpc-port={grpc_port}"],
                             capture_output=True).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert "Ctrl-C stops it" not in out, out
    assert "stopped before the model was ready" in err
    assert proc.returncode == 0
    assert subprocess.run(["pgrep", "-f", f"grpc-port={grpc_port}"]).returncode == 1


@pytest.mark.server
def test_serve_says_the_server_did_not_start_when_the_http_port_is_taken() -> None:
    # The HTTP guard cannot bind a port another process holds: the message said "the
    # model did not load" above the guard's bind error.
    import socket

    cmd = serve_command("--runtime", "deterministic")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(cmd[cmd.index("--http-port") + 1])))
        taken.listen()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert done.returncode != 0
    assert "the server did not start" in done.stderr and "HTTP guard" in done.stderr, \
        done.stderr[-2000:]
    assert "did not load" not in done.stderr


def test_max_draft_len_zero_is_kept_and_empty_means_the_runtimes_own() -> None:
    from fastapply.server.model_repo import config_from_parameters

    assert config_from_parameters({"max_draft_len": "0"})[0].max_draft_len == 0  # no drafts
    assert config_from_parameters({"max_draft_len": ""})[0].max_draft_len is None
    assert config_from_parameters({"context_limit": "0"})[0].context_limit is None
