"""The TensorRT-LLM engine runtime: a ``trtllm-build`` engine run by the 1.2.x executor.

NOT RUN ON A MACHINE WITH TENSORRT-LLM. TensorRT-LLM cannot be installed where this was
written (its PyPI entry is a stub), so this module is written against the upstream
1.2.x sources (``tensorrt_llm/bindings/executor``, ``examples/prompt_lookup/run_dtm_pld.py``,
``tensorrt_llm/runtime/model_runner_cpp.py`` and the Triton backend's
``inflight_batcher_llm/tensorrt_llm/1/model.py``) and tested only against a stand-in
that follows the documented executor semantics (``tests/trtllm_standin.py``).

One executor is shared by every session; concurrent sessions are batched in flight by
it. Each verification step is one request::

    Request(input_token_ids = prompt + output so far,     # block reuse keeps their KV
            max_tokens = len(draft) + 1,
            external_draft_tokens_config = ExternalDraftTokensConfig(draft),
            output_config = OutputConfig(exclude_input_from_output=True))
    -> output_token_ids[0] = accepted draft prefix + the model's next token

and the session waits for that request's own response id
(``executor.await_responses(request_id, timeout)``, thread-safe in the executor).
``end_id`` is -1 so the executor never stops by itself: stop tokens are handled by
:func:`fastapply.decoding.speculate.generate` like for every other runtime.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import SessionRuntime

#: NGC Triton image whose TensorRT-LLM is 1.2.x (the last line with trtllm-build engines).
#: triton-inference-server/server#8805 (2026-05-29): "tritonserver:26.05-trtllm-python-py3
#: ships TensorRT-LLM 1.2.1"; the Triton compatibility matrix lists 25.12 with 1.1.0.
TRTLLM_CONTAINER = "nvcr.io/nvidia/tritonserver:26.05-trtllm-python-py3"


class TrtllmNotInstalled(ImportError):
    """TensorRT-LLM is not importable here."""


def import_module(name: str) -> Any:
    """Import a tensorrt_llm module or raise TrtllmNotInstalled saying where to run."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise TrtllmNotInstalled(
            f"TensorRT-LLM is not installed ({exc}): run inside {TRTLLM_CONTAINER}") from None


def read_engine_limits(engine_dir: Path) -> dict[str, int]:
    """max_seq_len / max_input_len / max_draft_len / max_batch_size from config.json."""
    config_file = engine_dir / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{engine_dir}: no config.json, not a TensorRT-LLM engine directory "
                         f"(build one with `fastapply build engine`)")
    build = json.loads(config_file.read_text()).get("build_config", {})
    return {key: int(build.get(key) or 0) for key in
            ("max_seq_len", "max_input_len", "max_draft_len", "max_batch_size")}


class TrtllmEngineSession:
    """One request's tokens; each step is one executor request. See :class:`Session`."""

    def __init__(self, runtime: TrtllmEngineRuntime, prompt_ids: list[int]) -> None:
        self.runtime = runtime
        #: Prompt + output so far (the last token is not yet in the KV cache).
        self.tokens = list(prompt_ids)
        self.cache_len = 0
        self._started = False

    def _run(self, draft: list[int]) -> list[int]:
        new = self.runtime.run_request(self.tokens, draft)
        self.tokens.extend(new)
        self.cache_len = len(self.tokens) - 1
        return new

    def prefill(self) -> int:
        self._started = True
        return self._run([])[0]

    def step(self, draft: list[int]) -> list[int]:
        if not self._started:
            raise RuntimeError("step() before prefill()")
        # Room left in the engine: the request holds tokens + draft + 1 new token.
        room = self.runtime.context_limit - len(self.tokens) - 1
        if room < 0:
            raise ValueError(f"session holds {len(self.tokens)} tokens, at the context limit "
                             f"{self.runtime.context_limit}")
        return self._run(draft[: min(room, self.runtime.max_draft_len)])

    def close(self) -> None:
        self.tokens = []


class TrtllmEngineRuntime(SessionRuntime):
    """A TensorRT-LLM 1.2.x engine behind a shared executor (external draft tokens)."""

    def __init__(self, engine_dir: str | Path | None, max_draft_len: int = 64,
                 context_limit: int | None = None, kv_cache_free_gpu_memory_fraction: float = 0.9,
                 timeout_s: float = 600.0) -> None:
        if engine_dir is None:
            raise ValueError("trtllm-engine needs an engine directory (engine_dir / --engine)")
        path = Path(engine_dir)
        limits = read_engine_limits(path)
        self.trtllm = import_module("tensorrt_llm.bindings.executor")
        t = self.trtllm
        kv = t.KvCacheConfig(enable_block_reuse=True,
                             free_gpu_memory_fraction=kv_cache_free_gpu_memory_fraction)
        #: The executor every session shares (in-flight batching across sessions).
        self.executor = t.Executor(path, t.ModelType.DECODER_ONLY,
                                   t.ExecutorConfig(max_beam_width=1, kv_cache_config=kv))
        engine_limit = limits["max_seq_len"] or (context_limit or 0)
        #: Tokens one session may hold: the engine's max_seq_len, or less if asked.
        self.context_limit = min(engine_limit, context_limit or engine_limit)
        #: Drafts are clipped to what the engine was built for.
        self.max_draft_len = min(max_draft_len, limits["max_draft_len"] or max_draft_len)
        #: Stop tokens come from the tokenizer (fastapply.decoding.prompts.stop_token_ids).
        self.eos_token_id: int | list[int] | None = None
        self.timeout = timedelta(seconds=timeout_s)

    def session(self, prompt_ids: list[int]) -> TrtllmEngineSession:
        return TrtllmEngineSession(self, prompt_ids)

    def make_request(self, tokens: list[int], draft: list[int]) -> Any:
        t = self.trtllm
        return t.Request(
            input_token_ids=list(tokens), max_tokens=len(draft) + 1, streaming=False,
            end_id=-1, pad_id=0, sampling_config=t.SamplingConfig(beam_width=1, top_k=1),  # greedy
            output_config=t.OutputConfig(exclude_input_from_output=True,
                                         return_perf_metrics=True),
            external_draft_tokens_config=t.ExternalDraftTokensConfig(list(draft))
            if draft else None)

    def run_request(self, tokens: list[int], draft: list[int]) -> list[int]:
        """Enqueue one verification request and wait for its final response."""
        request_id = self.executor.enqueue_request(self.make_request(tokens, draft))
        out: list[int] = []
        while True:
            responses = self.executor.await_responses(request_id, self.timeout)
            if not responses:
                raise TimeoutError(f"no response from the TensorRT-LLM executor within "
                                   f"{self.timeout.total_seconds():.0f} s")
            for response in responses:
                if response.has_error():
                    raise RuntimeError(f"TensorRT-LLM executor: {response.error_msg}")
                result = response.result
                out = list(result.output_token_ids[0])
                if result.is_final:
                    if not out:
                        raise RuntimeError("TensorRT-LLM executor returned no token")
                    return out[: len(draft) + 1]

    def close(self) -> None:
        """Shut the executor down (frees the engine and its KV cache)."""
        if self.executor is not None:
            self.executor.shutdown()
            self.executor = None
