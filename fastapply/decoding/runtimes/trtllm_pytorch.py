"""The TensorRT-LLM PyTorch-backend runtime, with the speculative-edits drafter plugged in.

NOT RUN ON A MACHINE WITH TENSORRT-LLM. Written against the upstream 1.2.x sources
(``tensorrt_llm/llmapi`` ``LLM``, ``UserProvidedDecodingConfig``, ``KvCacheConfig`` and the
``Drafter`` base class in ``tensorrt_llm/_torch/speculative/drafter.py``) and tested only
against the stand-in in ``tests/trtllm_standin.py``.

This backend runs the whole generation loop itself, so the runtime offers no sessions:
it implements :class:`fastapply.decoding.runtimes.Runtime`'s ``generate(request)`` directly, with
the budget, stop and statistics rules of :mod:`fastapply.decoding.speculate`::

    llm = LLM(model=fp8_hf_checkpoint,
              speculative_config=UserProvidedDecodingConfig(max_draft_len=K, drafter=d),
              kv_cache_config=KvCacheConfig(enable_block_reuse=True),
              disable_overlap_scheduler=True)   # drafts need the newest token

Each iteration the backend calls ``d.prepare_draft_tokens(scheduled_requests)``; for every
generation request our drafter finds that request's :class:`SpeculativeEditsDrafter`
(registered by ``generate`` under the request's prompt, created per executor request id)
and sets ``request.py_draft_tokens`` to its proposal for the tokens generated so far.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes.trtllm_engine import import_module
from fastapply.decoding.speculate import Generation, GenerationRequest, cut_at_stop, finish, start


@dataclass
class _Entry:
    """The sources of one prompt (shared by identical concurrent prompts)."""

    sources: list[list[int]]
    refs: int = 0
    request_ids: set[int] = field(default_factory=set)


class DraftRegistry:
    """Prompt -> drafter sources, executor request id -> drafter state; thread-safe."""

    def __init__(self, max_draft_len: int) -> None:
        self.max_draft_len = max_draft_len
        self._lock = threading.Lock()
        self._by_prompt: dict[tuple[int, ...], _Entry] = {}
        self._by_request: dict[int, Any] = {}
        #: Draft tokens proposed per executor request id (for statistics).
        self.drafted: dict[int, int] = {}

    def register(self, prompt_ids: list[int], sources: list[list[int]]) -> tuple[int, ...]:
        key = tuple(prompt_ids)
        with self._lock:
            entry = self._by_prompt.setdefault(key, _Entry(sources))
            entry.refs += 1
        return key

    def release(self, key: tuple[int, ...]) -> int:
        """Drop one reference; return the draft tokens proposed under this prompt."""
        with self._lock:
            entry = self._by_prompt[key]
            entry.refs -= 1
            drafted = sum(self.drafted.get(r, 0) for r in entry.request_ids)
            if entry.refs == 0:
                del self._by_prompt[key]
                for rid in entry.request_ids:
                    self._by_request.pop(rid, None)
                    self.drafted.pop(rid, None)
        return drafted

    def propose(self, request_id: int, tokens: list[int], prompt_len: int,
                max_new_tokens: int) -> list[int]:
        """Draft for one request: ``tokens`` is prompt + output so far."""
        from fastapply.decoding.drafting import SpeculativeEditsDrafter

        with self._lock:
            drafter = self._by_request.get(request_id)
            if drafter is None:
                entry = self._by_prompt.get(tuple(tokens[:prompt_len]))
                if entry is None:
                    return []  # not ours (or already finished): no draft
                drafter = SpeculativeEditsDrafter(entry.sources, max_k=self.max_draft_len)
                self._by_request[request_id] = drafter
                entry.request_ids.add(request_id)
        output = tokens[prompt_len:]
        # The step yields len(accepted) + 1 tokens: the draft may use remaining - 1.
        room = min(self.max_draft_len, max_new_tokens - len(output) - 1)
        draft = list(drafter.propose(output, room))[:room] if room > 0 else []
        with self._lock:
            self.drafted[request_id] = self.drafted.get(request_id, 0) + len(draft)
        return draft


def make_drafter(registry: DraftRegistry, pad_to_max: bool = False) -> Any:
    """An instance of a ``tensorrt_llm`` Drafter subclass that asks ``registry``."""
    base = import_module("tensorrt_llm._torch.speculative.drafter").Drafter
    k = registry.max_draft_len

    class SpeculativeEditsTrtllmDrafter(base):  # type: ignore[misc,valid-type]
        """Sets ``py_draft_tokens`` of each generation request from its sources."""

        def __init__(self) -> None:
            try:  # 1.2: Drafter(max_draft_len, max_total_draft_tokens, max_concurrency, ...)
                super().__init__(max_draft_len=k, max_total_draft_tokens=k)
            except TypeError:  # older signature: Drafter(max_concurrency=None)
                super().__init__()
            self.max_draft_len = k

        def prepare_draft_tokens(self, scheduled_requests: Any,
                                 resource_manager: Any = None) -> None:
            for request in scheduled_requests.generation_requests:
                tokens = list(request.get_tokens(0))
                prompt_len = int(getattr(request, "py_orig_prompt_len", None)
                                 or request.py_prompt_len)
                draft = registry.propose(int(request.request_id), tokens, prompt_len,
                                         int(request.py_max_new_tokens))
                if pad_to_max:  # fixed-length drafts (CUDA graphs); padding is verified too
                    draft = draft + [0] * (k - len(draft))
                request.py_draft_tokens = draft

    return SpeculativeEditsTrtllmDrafter()


def _model_context(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    return int(config.get("max_position_embeddings") or 32768)


class TrtllmPytorchRuntime:
    """An FP8 HF checkpoint on TensorRT-LLM's PyTorch backend; see the module docstring.

    A :class:`fastapply.decoding.runtimes.Runtime`: the backend runs the loop, so there are no
    sessions, and drafts are at most the ``max_draft_len`` the LLM was created with.
    """

    def __init__(self, model_dir: str | Path | None, max_draft_len: int = 64,
                 context_limit: int | None = None, kv_cache_free_gpu_memory_fraction: float = 0.9,
                 pad_drafts: bool = False, **llm_kwargs: Any) -> None:
        if model_dir is None:
            raise ValueError("trtllm-pytorch needs a model directory (model_dir / --model)")
        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path}: not a Hugging Face checkpoint (no config.json); pass the "
                             f"FP8 checkpoint from `fastapply build quantize` (OUT/quantized/hf)")
        llmapi = import_module("tensorrt_llm.llmapi")
        model_limit = _model_context(path)
        #: Tokens one request may hold (prompt + output).
        self.context_limit = min(model_limit, context_limit or model_limit)
        self.registry = DraftRegistry(max_draft_len)
        #: Largest draft per verification step (K), as the LLM was created with.
        self.max_draft_len = max_draft_len
        self.sampling_params_cls = llmapi.SamplingParams
        kwargs: dict[str, Any] = {"disable_overlap_scheduler": True,
                                  "max_seq_len": self.context_limit, **llm_kwargs}
        if max_draft_len > 0:
            kwargs["speculative_config"] = llmapi.UserProvidedDecodingConfig(
                max_draft_len=max_draft_len, drafter=make_drafter(self.registry, pad_drafts))
        self.llm = llmapi.LLM(model=str(path), kv_cache_config=llmapi.KvCacheConfig(
            enable_block_reuse=True, free_gpu_memory_fraction=kv_cache_free_gpu_memory_fraction),
            **kwargs)
        self.eos_token_id: int | list[int] | None = None

    def generate(self, request: GenerationRequest,
                 on_tokens: Callable[[list[int]], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> Generation:
        """Greedy speculative generation by the backend, with our drafter plugged in."""
        t0 = clock()
        prompt_ids, stop_ids = request.prompt_ids, request.stop_ids
        budget, stats = start(len(prompt_ids), request.max_new_tokens, self.context_limit)
        if budget <= 0:
            return finish(stats, [])
        params = self.sampling_params_cls(max_tokens=budget, end_id=-1,
                                          stop_token_ids=sorted(stop_ids), detokenize=False)
        key = self.registry.register(prompt_ids, request.sources)
        out: list[int] = []
        try:
            result = self.llm.generate_async(list(prompt_ids), sampling_params=params,
                                             streaming=on_tokens is not None)
            if on_tokens is None:
                result = result.result()
            else:
                for chunk in result:
                    new = list(chunk.outputs[0].token_ids)[len(out):]
                    if new:
                        if not out:
                            stats.ttft_ms = (clock() - t0) * 1e3
                        out.extend(new)
                        on_tokens(new)
        finally:
            drafted = self.registry.release(key)
        completion = result.outputs[0]
        out, stopped = cut_at_stop(list(completion.token_ids), stop_ids)
        if stopped or completion.finish_reason == "stop":
            stats.finish_reason = "stop"
        passes = getattr(result, "decoding_iter", None) or getattr(completion, "decoding_iter", 0)
        stats.forward_passes = int(passes or 0)
        if stats.forward_passes:
            stats.accepted_draft_tokens = max(0, len(out) - stats.forward_passes)
            stats.rejected_draft_tokens = max(0, drafted - stats.accepted_draft_tokens)
        return finish(stats, out)

    def close(self) -> None:
        self.llm.shutdown()
