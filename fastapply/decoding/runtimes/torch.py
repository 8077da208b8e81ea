"""The torch runtime: a transformers causal LM with a ``DynamicCache``.

CPU float32 is the default without a GPU; on CUDA the default dtype is bfloat16. After
each verification pass the cache is cropped back to the accepted tokens. Positions come
from the cache length (transformers derives ``cache_position`` from it); no attention
mask is passed, so the model applies its own causal mask over cache + new tokens (a mask
covering only the new tokens silently gives wrong logits).

The prompt pass computes logits for its last position only (``logits_to_keep=1``): the
others are never read, and on a 49k vocabulary they cost a fifth of the pass. A prompt
that starts like a recent one reuses that one's keys and values
(:mod:`fastapply.decoding.runtimes.prompt_cache`) and runs only the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import SessionRuntime
from fastapply.decoding.runtimes.prompt_cache import (
    DEFAULT_PROMPT_CACHE_ENTRIES,
    DEFAULT_PROMPT_CACHE_MB,
    PromptCache,
)


class ModelLoadError(ValueError):
    """The model directory is missing or is not a causal LM checkpoint."""


def resolve_device_dtype(device: str | None, dtype: str | None) -> tuple[str, str]:
    """Defaults: CUDA + bfloat16 where a GPU is present, else CPU + float32."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was asked for but torch sees no GPU; "
                             "use --device cpu")
    if dtype is None:
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ModelLoadError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
    return device, dtype


def _reusable(model: Any) -> bool:
    """Whether the model's cache layers are all plain ``DynamicLayer`` (they keep every
    token and replace, never write into, their tensors): prompt reuse needs both."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer
               for layer in DynamicCache(config=model.config).layers)


class TorchSession:
    """One request's KV cache. See :class:`fastapply.decoding.runtimes.Session`."""

    def __init__(self, runtime: TorchRuntime, prompt_ids: list[int]) -> None:
        from transformers import DynamicCache

        self.runtime = runtime
        #: The prompt, run by ``prefill``.
        self.prompt_ids = prompt_ids
        #: Keys and values of every token already fed (prompt + accepted output).
        self.cache: Any = DynamicCache(config=runtime.model.config)
        #: The last output token: not yet in the cache, fed first by the next step.
        self.last: int | None = None
        #: Tokens in the cache.
        self.cache_len = 0
        #: The probability the model gave each token it emitted, in order (the second
        #: witness's confidence: free, the logits are computed anyway).
        self.emitted_probs: list[float] = []
        #: Top-1 probabilities of the last pass's positions (shape [S]).
        self._probs: list[float] = []
        #: Prompt tokens whose keys and values came from the runtime's prompt cache.
        self.reused_prompt_tokens = 0

    def _forward(self, ids: list[int], last_only: bool = False) -> Any:
        """Argmax token ids after each of ``ids`` (shape [len(ids)]; with ``last_only``,
        after the last one only: shape [1])."""
        import torch

        rt = self.runtime
        input_ids = torch.tensor([ids], dtype=torch.long, device=rt.device)  # [1, S]
        with torch.inference_mode():
            out = rt.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                           logits_to_keep=1 if last_only else 0)  # 0: every position
        self.cache = out.past_key_values
        self.cache_len += len(ids)
        logits = out.logits[0]  # [S, vocab] ([1, vocab] with last_only)
        preds = logits.argmax(dim=-1)  # [S]: the ids come from the logits, never the probs
        probs = logits.float().softmax(dim=-1).gather(-1, preds[:, None])[:, 0]  # [S]
        self._probs = probs.tolist()
        return preds.tolist()

    def prefill(self) -> int:
        from transformers import DynamicCache

        rt, start = self.runtime, 0
        if rt.prompt_cache is not None:
            entry, start = rt.prompt_cache.lookup(self.prompt_ids)
            if entry is not None:
                self.cache = DynamicCache(ddp_cache_data=entry.prefix(start),
                                          config=rt.model.config)
                self.cache_len = start
        self.reused_prompt_tokens = start
        preds = self._forward(self.prompt_ids[start:], last_only=True)
        if rt.prompt_cache is not None:  # the prompt's own tensors: only ever replaced
            rt.prompt_cache.store(self.prompt_ids, [(layer.keys, layer.values)
                                                    for layer in self.cache.layers])
        self.last = int(preds[-1])
        self.emitted_probs.append(self._probs[-1])
        return self.last

    def step(self, draft: list[int]) -> list[int]:
        if self.last is None:
            raise RuntimeError("step() before prefill()")
        keep = self.cache_len + 1  # the cache after this pass keeps [last] + accepted
        preds = self._forward([self.last, *draft])
        accepted = 0
        while accepted < len(draft) and draft[accepted] == preds[accepted]:
            accepted += 1
        keep += accepted
        rejected = self.cache_len - keep
        if rejected > 0:  # transformers 5: crop(-n) drops the last n tokens; crop(0) is not a no-op
            self.cache.crop(-rejected)
            self.cache_len = keep
        new = [*draft[:accepted], int(preds[accepted])]
        self.emitted_probs.extend(self._probs[: accepted + 1])
        self.last = new[-1]
        return new

    def close(self) -> None:
        self.cache = None


class TorchRuntime(SessionRuntime):
    """A Hugging Face causal LM loaded with transformers.

    ``prompt_cache_mb`` and ``prompt_cache_entries`` bound the keys and values kept of
    recent prompts for reuse (0: none kept). Models whose cache is not plain growing
    layers (sliding-window attention drops old tokens) keep none.
    """

    def __init__(self, model_dir: str | Path, device: str | None = None,
                 dtype: str | None = None, context_limit: int | None = None,
                 prompt_cache_mb: float = DEFAULT_PROMPT_CACHE_MB,
                 prompt_cache_entries: int = DEFAULT_PROMPT_CACHE_ENTRIES) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path}: not a model directory (no config.json); pass the "
                                 f"directory of a Hugging Face checkpoint")
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype))
        #: The loaded model, in eval mode on its device.
        self.model: Any = model.to(self.device).eval()
        model_limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 32768)
        #: Tokens one session may hold; the smaller of the model's and the caller's.
        self.context_limit = min(model_limit, context_limit or model_limit)
        #: The model's EOS id(s) from its generation config.
        self.eos_token_id = getattr(self.model.generation_config, "eos_token_id", None)
        #: Keys and values of recent prompts (None: reuse off).
        self.prompt_cache: PromptCache | None = None
        if prompt_cache_mb > 0 and prompt_cache_entries > 0 and _reusable(self.model):
            self.prompt_cache = PromptCache(int(prompt_cache_mb * 2**20), prompt_cache_entries)

    def session(self, prompt_ids: list[int]) -> TorchSession:
        return TorchSession(self, prompt_ids)
