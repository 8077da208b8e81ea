"""Request -> result: the one function the Triton model and the command line both call.

``FastApplyService(config).apply(initial_code, edit_snippet, ...)`` validates the input,
builds the prompt and the drafter's sources (the deterministic merge of the snippet, the
original, the snippet), runs speculative decoding on the configured runtime, extracts
the file from the model's answer and returns it with its statistics. The
``deterministic`` runtime needs no model: it returns the deterministic merge, or refuses
with the spot where the merge is ambiguous.

Every user error is an :class:`InvalidRequest` whose message says what was wrong and
what to do; the server maps it to ``INVALID_ARG`` and keeps serving.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapply.metrics import Stats
from fastapply.runtimes import RUNTIMES, Runtime

#: Largest accepted input (initial_code + edit_snippet + instruction), in bytes.
DEFAULT_MAX_INPUT_BYTES = 4 * 1024 * 1024


class InvalidRequest(ValueError):
    """Bad input: the message names the field and what to do about it."""


@dataclass(frozen=True)
class ServiceConfig:
    """How the service is set up (the Triton model's parameters map onto these)."""

    #: deterministic | torch | trtllm-engine | trtllm-pytorch
    runtime: str = "deterministic"
    #: Hugging Face model directory (torch, trtllm-pytorch) or tokenizer source.
    model_dir: str | None = None
    #: TensorRT-LLM engine directory (trtllm-engine).
    engine_dir: str | None = None
    #: Tokenizer directory when it is not ``model_dir``.
    tokenizer_dir: str | None = None
    #: kortix | morph (see fastapply.prompts).
    prompt_format: str = "kortix"
    #: Largest draft per verification step (K); 0 disables speculation.
    max_draft_len: int = 64
    #: Context limit in tokens (None: the model's own).
    context_limit: int | None = None
    #: cpu | cuda (None: cuda when present).
    device: str | None = None
    #: float32 | bfloat16 | float16 (None: float32 on CPU, bfloat16 on CUDA).
    dtype: str | None = None
    #: Largest accepted input in bytes.
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {self.runtime!r}; use one of: "
                             f"{', '.join(RUNTIMES)}")
        if self.runtime != "deterministic" and not (self.model_dir or self.engine_dir):
            raise ValueError(f"runtime {self.runtime!r} needs a model directory "
                             f"(model_dir / --model)")
        if self.max_draft_len < 0:
            raise ValueError("max_draft_len must be >= 0")


@dataclass
class ApplyResult:
    """The merged file and the figures of the request that produced it."""

    merged_code: str
    stats: Stats = field(default_factory=Stats)


def as_text(name: str, value: str | bytes | None, *, required: bool = True) -> str | None:
    """Decode one input field, naming it in the error.

    >>> as_text("edit_snippet", b"x = 1")
    'x = 1'
    >>> as_text("edit_snippet", b"\\xff")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fastapply.service.InvalidRequest: edit_snippet is not valid UTF-8 (byte 0: 0xff); ...
    """
    if value is None:
        if required:
            raise InvalidRequest(f"{name} is missing; send it as a UTF-8 string")
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(
                f"{name} is not valid UTF-8 (byte {exc.start}: 0x{value[exc.start]:02x}); "
                f"send UTF-8 text") from None
    return value


class FastApplyService:
    """Loads the configured runtime once; ``apply`` serves one request (thread-safe)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.runtime: Runtime | None = None
        self.tokenizer: Any = None
        self.stop_ids: set[int] = set()
        if config.runtime != "deterministic":
            self._load_model()
        else:
            import fastapply.merge  # noqa: F401 - load now, not on the first request

    def _load_model(self) -> None:
        from fastapply import prompts

        cfg = self.config
        self.format = prompts.get_format(cfg.prompt_format)
        tokenizer_dir = cfg.tokenizer_dir or cfg.model_dir or cfg.engine_dir
        assert tokenizer_dir is not None
        if not Path(tokenizer_dir).is_dir():
            raise ValueError(f"{tokenizer_dir}: no such model/tokenizer directory")
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        self.runtime = make_runtime(cfg)
        self.stop_ids = prompts.stop_token_ids(self.tokenizer, self.runtime.eos_token_id)

    # -- requests -----------------------------------------------------------------
    def validate(self, initial_code: str | bytes | None, edit_snippet: str | bytes | None,
                 instruction: str | bytes | None = None) -> tuple[str, str, str | None]:
        """Decode and check the inputs; raise InvalidRequest naming the problem."""
        original = as_text("initial_code", initial_code)
        snippet = as_text("edit_snippet", edit_snippet)
        instr = as_text("instruction", instruction, required=False)
        assert original is not None and snippet is not None
        if not snippet.strip():
            raise InvalidRequest("edit_snippet is empty; send the edit to merge (lazy "
                                 "markers, SEARCH/REPLACE blocks or a unified diff)")
        size = sum(len(s.encode("utf-8")) for s in (original, snippet, instr or ""))
        if size > self.config.max_input_bytes:
            raise InvalidRequest(
                f"input is {size} bytes, over the limit of {self.config.max_input_bytes} "
                f"bytes; send a smaller file or raise max_input_bytes on the server")
        return original, snippet, instr

    def apply(self, initial_code: str | bytes | None, edit_snippet: str | bytes | None,
              instruction: str | bytes | None = None, max_tokens: int | None = None,
              on_delta: Callable[[str], None] | None = None) -> ApplyResult:
        """Merge ``edit_snippet`` into ``initial_code``.

        ``on_delta`` receives the merged file as it is produced (text deltas that
        concatenate to ``merged_code``). Raises InvalidRequest for bad input.
        """
        start = time.perf_counter()
        original, snippet, instr = self.validate(initial_code, edit_snippet, instruction)
        if max_tokens is not None and max_tokens <= 0:
            raise InvalidRequest(f"max_tokens is {max_tokens}; send a positive number or "
                                 f"leave it out")
        if self.runtime is None:
            result = self._apply_deterministic(original, snippet)
            if on_delta is not None and result.merged_code:
                on_delta(result.merged_code)
        else:
            result = self._apply_model(original, snippet, instr, max_tokens, on_delta)
        result.stats.finalise(time.perf_counter() - start, len(result.merged_code))
        return result

    def _apply_deterministic(self, original: str, snippet: str) -> ApplyResult:
        from fastapply.edits import EditError
        from fastapply.merge import apply_snippet

        try:
            merged = apply_snippet(original, snippet).check()
        except EditError as exc:
            raise InvalidRequest(f"the snippet cannot be merged: {exc}") from None
        return ApplyResult(merged, Stats(finish_reason="merged"))

    def _apply_model(self, original: str, snippet: str, instruction: str | None,
                     max_tokens: int | None,
                     on_delta: Callable[[str], None] | None) -> ApplyResult:
        from fastapply import prompts
        from fastapply.speculate import ContextLimitError, TextStream

        tok, runtime = self.tokenizer, self.runtime
        assert runtime is not None
        request = prompts.build_request(
            tok, self.format, original, snippet, instruction, stop_ids=self.stop_ids,
            max_new_tokens=max_tokens or runtime.context_limit,
            max_draft_len=self.config.max_draft_len)
        text_stream = TextStream(tok, skip_ids=self.stop_ids)
        extractor = prompts.StreamExtractor(self.format)

        def on_tokens(new: list[int]) -> None:
            if text_stream.push(new) and on_delta is not None:
                delta = extractor.feed(text_stream.text)
                if delta:
                    on_delta(delta)

        try:
            gen = runtime.generate(request, on_tokens=on_tokens)
        except ContextLimitError as exc:
            raise InvalidRequest(str(exc)) from None
        text_stream.flush()
        tail = extractor.finish(text_stream.text)
        if tail and on_delta is not None:
            on_delta(tail)
        return ApplyResult(self.format.extract(text_stream.text), gen.stats)


def make_runtime(config: ServiceConfig) -> Runtime:
    """Instantiate the configured model runtime."""
    if config.runtime == "torch":
        from fastapply.runtimes.torch import TorchRuntime

        assert config.model_dir is not None
        return TorchRuntime(config.model_dir, device=config.device, dtype=config.dtype,
                            context_limit=config.context_limit)
    if config.runtime == "trtllm-engine":
        from fastapply.runtimes.trtllm_engine import TrtllmEngineRuntime

        return TrtllmEngineRuntime(config.engine_dir or config.model_dir,
                                   max_draft_len=config.max_draft_len,
                                   context_limit=config.context_limit)
    if config.runtime == "trtllm-pytorch":
        from fastapply.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

        return TrtllmPytorchRuntime(config.model_dir, max_draft_len=config.max_draft_len,
                                    context_limit=config.context_limit)
    raise ValueError(f"runtime {config.runtime!r} has no model")
