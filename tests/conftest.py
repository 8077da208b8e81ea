"""Shared fixtures: the development corpus and real tritonserver processes.

Servers run on free loopback ports and are stopped by PID when their scope ends; a test
needing one is skipped (with the reason) where no tritonserver binary is installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The development corpus (../shared/data next to the repository), or where that is absent
#: (a fresh clone) its 60 smallest records shipped in tests/data; $FASTAPPLY_DATA overrides.
SHARED_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/data/edits-dev.jsonl"
#: Data shipped with the tests; every test folder reaches it through this name.
DATA = Path(__file__).resolve().parent / "data"
SHIPPED_CORPUS = DATA / "edits-dev-sample.jsonl"
CORPUS = Path(os.environ.get("FASTAPPLY_DATA") or
              (SHARED_CORPUS if SHARED_CORPUS.is_file() else SHIPPED_CORPUS))

#: Input size limit of the test servers, small so that "too large" is cheap to send.
TEST_MAX_INPUT_BYTES = 200_000


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc``, killed and waited for on the way out if it still runs: a test that
    fails midway never leaves the process it started behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def corpus() -> list[dict[str, Any]]:
    """The development corpus' records (skips where the file is missing)."""
    if not CORPUS.is_file():
        pytest.skip(f"development corpus not found at {CORPUS} (set FASTAPPLY_DATA)")
    with CORPUS.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def start_server(tmp_path_factory: pytest.TempPathFactory, **params: Any) -> Any:
    """Render a repository with ``params`` and start a server on it (skip if none)."""
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import ServerError, TritonServer, find_server

    try:
        find_server()
    except ServerError as exc:
        pytest.skip(f"no tritonserver: {exc}")
    out = tmp_path_factory.mktemp("repo")
    repo = render_repository(out, **params)
    return TritonServer(repo, log_path=out / "tritonserver.log").start()


@pytest.fixture(scope="session")
def det_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A server running the deterministic runtime (no model)."""
    server = start_server(tmp_path_factory, runtime="deterministic",
                          max_input_bytes=TEST_MAX_INPUT_BYTES)
    yield server
    server.stop()


#: Context limit of the tiny-model server, in tokens: small, so "too long" is cheap.
TINY_CONTEXT_LIMIT_TOKENS = 1024

#: How the tiny random model is served: the morph format (a raw answer), because noise
#: never writes kortix's closing tag and a kortix answer without it is refused; and the
#: policy "model" (serve the model's output as is), because noise never agrees with the
#: deterministic merge. The real default model has its own tests (tests/model).
TINY_SERVING: dict[str, Any] = {"prompt_format": "morph", "policy": "model"}

#: (file, snippet) the tiny random model answers completely: greedy float32 decoding in
#: the morph format emits its stop token after 83 tokens. Noise rarely ends; other
#: requests hit max_tokens.
TINY_COMPLETE = ("y = 1\n", "y = 0\n")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    from fastapply.model.tiny import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[Any]:
    """A server running the torch runtime on the tiny random model (CPU, float32)."""
    server = start_server(tmp_path_factory, runtime="torch", model_dir=tiny_model_dir,
                          device="cpu", dtype="float32", worker_threads=2,
                          context_limit=TINY_CONTEXT_LIMIT_TOKENS, **TINY_SERVING)
    yield server
    server.stop()


@pytest.fixture
def raw_infer() -> Any:
    """:func:`stream_infer`, for tests."""
    return stream_infer


def stream_infer(url: str, inputs: dict[str, Any]) -> tuple[list[str], str | None]:
    """Send raw tensors (bytes/bool/int, or leave a name out) on the gRPC stream.

    Returns (merged_code texts, the error message or None): for bad-input tests that
    FastApplyClient cannot send (missing tensors, invalid UTF-8).
    """
    import queue

    import numpy as np
    import tritonclient.grpc as grpcclient

    dtypes = {bytes: ("BYTES", np.object_), bool: ("BOOL", np.bool_), int: ("INT64", np.int64)}
    tensors = []
    for name, value in inputs.items():
        triton_type, np_type = dtypes[type(value)]
        tensor = grpcclient.InferInput(name, [1], triton_type)
        tensor.set_data_from_numpy(np.array([value], dtype=np_type))
        tensors.append(tensor)
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    texts: list[str] = []
    try:
        client.async_stream_infer("fast_apply", tensors, enable_empty_final_response=True)
        while True:
            result, error = answers.get(timeout=30)
            if error is not None:
                return texts, str(error.message())
            out = result.as_numpy("merged_code")
            if out is not None:
                texts.append(out[0].decode("utf-8"))
            if result.get_response().parameters["triton_final_response"].bool_param:
                return texts, None
    finally:
        client.stop_stream()
        client.close()


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with the tiny model's tokenizer (Llama: the TRT-LLM export path;
    the engine build tests)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from fastapply.model.tiny import build_tokenizer

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = build_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out
