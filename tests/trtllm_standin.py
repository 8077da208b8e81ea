"""STAND-IN for ``tensorrt_llm``, for tests only: this is NOT TensorRT-LLM.

TensorRT-LLM cannot be installed on these machines, so the TRT-LLM runtimes are tested
against this stand-in, inserted into ``sys.modules`` by :func:`install`. It follows the
documented semantics of the 1.2.x APIs the runtimes use, running the tiny HF model with
torch (full greedy forward per step, float32, CPU):

* ``tensorrt_llm.bindings.executor``: ``Executor(engine_dir, ModelType, ExecutorConfig)``
  reads ``engine_dir/config.json`` (``build_config`` limits; the stand-in's own
  ``standin.hf_model_dir`` names the model to run). A request with
  ``ExternalDraftTokensConfig(draft)`` runs one step: the accepted draft prefix plus the
  model's next token (what ``examples/prompt_lookup/run_dtm_pld.py`` expects: "target
  should return 1 more token"). ``OutputConfig(exclude_input_from_output)`` is honoured;
  ``end_id`` -1 never stops; drafts over the engine's ``max_draft_len`` and requests over
  ``max_seq_len`` get error responses. Requests are served by one worker thread in
  batches of everything pending (in-flight batching); with ``enable_block_reuse`` it
  counts the KV blocks a request's prefix could reuse (``reused_blocks``).
* ``tensorrt_llm.llmapi``: ``LLM(model, speculative_config=UserProvidedDecodingConfig(...),
  kv_cache_config=...)`` steps all active requests together; each iteration it calls
  ``drafter.prepare_draft_tokens(ScheduledRequests)`` with request objects offering
  ``get_tokens(0)``, ``py_orig_prompt_len``, ``py_max_new_tokens``, ``request_id`` and
  ``py_draft_tokens``, then verifies the drafts greedily.
* ``tensorrt_llm._torch.speculative.drafter.Drafter``: the abstract base class.
"""

from __future__ import annotations

import abc
import itertools
import json
import queue
import sys
import threading
import types
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

TOKENS_PER_BLOCK = 8


class GreedyModel:
    """The tiny HF model: argmax after every position (no cache, float32 CPU)."""

    def __init__(self, model_dir: str | Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.forward_passes = 0

    def step(self, tokens: list[int], draft: list[int]) -> list[int]:
        """Accepted draft prefix + the next token after ``tokens``."""
        ids = self.torch.tensor([tokens + draft])
        with self.torch.inference_mode():
            preds = self.model(input_ids=ids).logits[0, len(tokens) - 1:].argmax(-1).tolist()
        self.forward_passes += 1
        accepted = 0
        while accepted < len(draft) and draft[accepted] == preds[accepted]:
            accepted += 1
        return draft[:accepted] + [int(preds[accepted])]


# -- tensorrt_llm.bindings.executor -------------------------------------------------------


class ModelType:
    DECODER_ONLY = "decoder_only"


@dataclass
class KvCacheConfig:
    enable_block_reuse: bool = False
    free_gpu_memory_fraction: float | None = None


@dataclass
class ExecutorConfig:
    max_beam_width: int = 1
    kv_cache_config: KvCacheConfig | None = None


@dataclass
class SamplingConfig:
    beam_width: int = 1
    top_k: int | None = None


@dataclass
class OutputConfig:
    exclude_input_from_output: bool = False
    return_perf_metrics: bool = False


class ExternalDraftTokensConfig:
    def __init__(self, tokens: list[int], logits: Any = None,
                 acceptance_threshold: float | None = None, fast_logits: bool | None = None):
        self.tokens = list(tokens)


@dataclass
class Request:
    input_token_ids: list[int]
    max_tokens: int
    streaming: bool = False
    end_id: int | None = None
    pad_id: int | None = None
    sampling_config: SamplingConfig | None = None
    output_config: OutputConfig | None = None
    external_draft_tokens_config: ExternalDraftTokensConfig | None = None


@dataclass
class Result:
    output_token_ids: list[list[int]]
    is_final: bool = True


@dataclass
class Response:
    request_id: int
    result: Result | None = None
    error_msg: str = ""

    def has_error(self) -> bool:
        return bool(self.error_msg)


class Executor:
    def __init__(self, model_path: Path, model_type: str, config: ExecutorConfig) -> None:
        engine = json.loads((Path(model_path) / "config.json").read_text())
        self.limits = engine["build_config"]
        self.block_reuse = bool(config.kv_cache_config and
                                config.kv_cache_config.enable_block_reuse)
        self.model = GreedyModel(engine["standin"]["hf_model_dir"])
        self._ids = itertools.count(1)
        self._pending: queue.Queue[tuple[int, Request] | None] = queue.Queue()
        self._done: dict[int, Response] = {}
        self._cond = threading.Condition()
        self._blocks: set[tuple[int, ...]] = set()
        #: KV blocks reused from earlier requests' prefixes (with enable_block_reuse).
        self.reused_blocks = 0
        #: Size of every batch the worker ran (in-flight batching).
        self.batch_sizes: list[int] = []
        self.requests: list[Request] = []
        self._worker = threading.Thread(target=self._serve, daemon=True)
        self._worker.start()

    def enqueue_request(self, request: Request) -> int:
        request_id = next(self._ids)
        self.requests.append(request)
        self._pending.put((request_id, request))
        return request_id

    def await_responses(self, request_id: int, timeout: timedelta | None = None) -> list[Any]:
        wait = timeout.total_seconds() if timeout is not None else None
        with self._cond:
            self._cond.wait_for(lambda: request_id in self._done, timeout=wait)
            response = self._done.pop(request_id, None)
        return [response] if response is not None else []

    def shutdown(self) -> None:
        self._pending.put(None)
        self._worker.join(timeout=10)

    def _serve(self) -> None:
        while True:
            first = self._pending.get()
            if first is None:
                return
            batch = [first]
            while not self._pending.empty():
                item = self._pending.get()
                if item is None:
                    self._pending.put(None)
                    break
                batch.append(item)
            self.batch_sizes.append(len(batch))
            for request_id, request in batch:
                response = self._run(request_id, request)
                with self._cond:
                    self._done[request_id] = response
                    self._cond.notify_all()

    def _reuse(self, tokens: list[int]) -> None:
        full = len(tokens) // TOKENS_PER_BLOCK
        keys = [tuple(tokens[: (i + 1) * TOKENS_PER_BLOCK]) for i in range(full)]
        self.reused_blocks += sum(1 for k in itertools.takewhile(self._blocks.__contains__, keys))
        self._blocks.update(keys)

    def _run(self, request_id: int, request: Request) -> Response:
        tokens = list(request.input_token_ids)
        cfg = request.external_draft_tokens_config
        draft = cfg.tokens if cfg is not None else []
        if len(draft) > self.limits["max_draft_len"]:
            return Response(request_id, error_msg=f"Draft tokens length {len(draft)} exceeds "
                                                  f"maximum draft len")
        if len(tokens) + request.max_tokens > self.limits["max_seq_len"]:
            return Response(request_id, error_msg="input + max_tokens exceeds max_seq_len")
        if self.block_reuse:
            self._reuse(tokens)
        new = self.model.step(tokens, draft)[: request.max_tokens]
        if request.end_id is not None and request.end_id >= 0 and request.end_id in new:
            new = new[: new.index(request.end_id) + 1]
        config = request.output_config
        out = new if config is not None and config.exclude_input_from_output else tokens + new
        return Response(request_id, Result([out], is_final=True))


# -- tensorrt_llm._torch.speculative.drafter ----------------------------------------------


class Drafter(abc.ABC):
    def __init__(self, max_draft_len: int | None = None, max_total_draft_tokens: int | None = None,
                 max_concurrency: int | None = None, draft_len_schedule: Any = None) -> None:
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_total_draft_tokens
        self.max_concurrency = max_concurrency

    @abc.abstractmethod
    def prepare_draft_tokens(self, scheduled_requests: Any, resource_manager: Any = None) -> None:
        ...


# -- tensorrt_llm.llmapi -------------------------------------------------------------------


class SamplingParams:
    def __init__(self, max_tokens: int = 32, end_id: int | None = None,
                 stop_token_ids: list[int] | None = None, detokenize: bool = True) -> None:
        self.max_tokens = max_tokens
        self.end_id = end_id
        self.stop_token_ids = list(stop_token_ids or [])


@dataclass
class UserProvidedDecodingConfig:
    max_draft_len: int
    drafter: Any
    resource_manager: Any = None


@dataclass
class LlmRequest:
    request_id: int
    tokens: list[int]
    py_orig_prompt_len: int
    py_max_new_tokens: int
    params: SamplingParams
    py_draft_tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None

    @property
    def py_prompt_len(self) -> int:
        return self.py_orig_prompt_len

    def get_tokens(self, beam: int) -> list[int]:
        return list(self.tokens)


@dataclass
class ScheduledRequests:
    context_requests: list[LlmRequest]
    generation_requests: list[LlmRequest]


@dataclass
class CompletionOutput:
    token_ids: list[int]
    finish_reason: str | None = None


class RequestOutput:
    """``generate_async``'s result: ``.result()``; iterate it when streaming."""

    def __init__(self) -> None:
        self.outputs = [CompletionOutput([])]
        self.decoding_iter = 0
        self._updates: queue.Queue[bool] = queue.Queue()
        self._final = threading.Event()

    def result(self, timeout: float | None = 60) -> RequestOutput:
        if not self._final.wait(timeout):
            raise TimeoutError("stand-in LLM: no result")
        return self

    def __iter__(self) -> Any:
        while True:
            final = self._updates.get(timeout=60)
            yield self
            if final:
                return


class LLM:
    def __init__(self, model: str, speculative_config: UserProvidedDecodingConfig | None = None,
                 kv_cache_config: KvCacheConfig | None = None, **kwargs: Any) -> None:
        self.model = GreedyModel(model)
        self.spec = speculative_config
        self.kv_cache_config = kv_cache_config
        self.kwargs = kwargs
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._active: list[tuple[LlmRequest, RequestOutput]] = []

    def generate_async(self, inputs: list[int], sampling_params: SamplingParams,
                       streaming: bool = False) -> RequestOutput:
        req = LlmRequest(next(self._ids), list(inputs), len(inputs),
                         sampling_params.max_tokens, sampling_params)
        out = RequestOutput()
        with self._lock:
            self._active.append((req, out))
            if len(self._active) == 1:
                threading.Thread(target=self._loop, daemon=True).start()
        return out

    def _loop(self) -> None:
        while True:
            with self._lock:
                active = list(self._active)
                if not active:
                    return
            gen = [r for r, _ in active if len(r.tokens) > r.py_orig_prompt_len]
            if self.spec is not None and gen:
                self.spec.drafter.prepare_draft_tokens(ScheduledRequests([], gen), None)
            for req, out in active:
                self._advance(req, out)

    def _advance(self, req: LlmRequest, out: RequestOutput) -> None:
        draft = req.py_draft_tokens if len(req.tokens) > req.py_orig_prompt_len else []
        new = self.model.step(req.tokens, list(draft))
        req.py_draft_tokens = []
        budget = req.py_max_new_tokens - (len(req.tokens) - req.py_orig_prompt_len)
        new = new[:budget]
        stops = set(req.params.stop_token_ids)
        hit = next((i for i, t in enumerate(new) if t in stops), -1)
        if hit >= 0:
            new, req.finish_reason = new[: hit + 1], "stop"
        req.tokens.extend(new)
        out.decoding_iter += 1
        out.outputs[0].token_ids = req.tokens[req.py_orig_prompt_len:]
        if req.finish_reason is None and len(out.outputs[0].token_ids) >= req.py_max_new_tokens:
            req.finish_reason = "length"
        final = req.finish_reason is not None
        if final:
            out.outputs[0].finish_reason = req.finish_reason
            with self._lock:
                self._active.remove((req, out))
            out._final.set()
        out._updates.put(final)

    def shutdown(self) -> None:
        with self._lock:
            self._active.clear()


def install(monkeypatch: Any) -> types.ModuleType:
    """Insert the stand-in modules into sys.modules (undone by monkeypatch)."""
    names = {
        "tensorrt_llm": {}, "tensorrt_llm.bindings": {},
        "tensorrt_llm.bindings.executor": {
            n: globals()[n] for n in ("Executor", "ExecutorConfig", "KvCacheConfig", "Request",
                                      "ExternalDraftTokensConfig", "OutputConfig",
                                      "SamplingConfig", "ModelType", "Response", "Result")},
        "tensorrt_llm.llmapi": {n: globals()[n] for n in (
            "LLM", "SamplingParams", "KvCacheConfig", "UserProvidedDecodingConfig")},
        "tensorrt_llm._torch": {}, "tensorrt_llm._torch.speculative": {},
        "tensorrt_llm._torch.speculative.drafter": {"Drafter": Drafter},
    }
    for name, attrs in names.items():
        module = types.ModuleType(name, "STAND-IN for tests (tests/trtllm_standin.py)")
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    return sys.modules["tensorrt_llm"]
