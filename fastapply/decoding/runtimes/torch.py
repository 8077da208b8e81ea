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


#: The draft lengths (K) the torch runtime chooses among when none is configured.
DRAFT_LENGTHS = (16, 32, 64, 128, 256)
#: K is the shortest whose copy-run throughput is within this share of the best's.
DRAFT_LEN_EFFICIENCY = 0.9


def choose_draft_len(pass_ms: dict[int, float]) -> int:
    """K from measured pass costs (``{pass length 1 + K: ms}``): the shortest draft whose
    pass yields, when accepted whole, at least ``DRAFT_LEN_EFFICIENCY`` of the best
    tokens per millisecond among the lengths measured.

    A pass is never free: on a GPU it costs about the same for 1 and 257 tokens (the
    weights are read once), so K goes to the largest length; on a 2-core CPU a pass of
    65 tokens costs ~3.8 passes of 1 and one of 257 ~10 (compute grows with length), so
    K stops where longer drafts stop paying. A rejected draft wastes its share of the pass,
    which the drafter's own K (halved after a miss) limits.

    >>> choose_draft_len({1: 43, 65: 162, 129: 258, 257: 450})   # 2-core CPU, float32
    256
    >>> choose_draft_len({1: 43, 65: 162, 129: 258, 257: 600})   # a CPU that saturates at 128
    128
    >>> choose_draft_len({1: 8.0, 65: 8.1, 129: 8.2, 257: 8.6})  # a GPU: flat
    256
    """
    rates = {n - 1: n / ms for n, ms in pass_ms.items() if n > 1 and ms > 0}
    if not rates:
        return DRAFT_LENGTHS[-1]
    best = max(rates.values())
    return min(k for k, rate in rates.items() if rate >= DRAFT_LEN_EFFICIENCY * best)


def measure_pass_cost(model: Any, device: str, lengths: tuple[int, ...],
                      cache_len: int = 1024, repeats: int = 5) -> dict[int, float]:
    """Milliseconds of one forward pass of each length after ``cache_len`` tokens (the
    shape of a verification pass: ``[1 + K]`` new tokens over a warm cache): the fastest
    of ``repeats`` timed runs, after one that warms the shape's kernels (the fastest is
    the one least disturbed by other work on the machine)."""
    import time

    import torch
    from transformers import DynamicCache

    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(0)

    def ids(n: int) -> Any:
        return torch.randint(0, vocab, (1, n), generator=gen).to(device)

    cache = DynamicCache(config=model.config)
    costs: dict[int, float] = {}
    with torch.inference_mode():
        model(input_ids=ids(cache_len), past_key_values=cache, use_cache=True)
        for n in lengths:
            times = []
            for _ in range(repeats + 1):  # the first of each length warms its kernels
                t0 = time.perf_counter()
                model(input_ids=ids(n), past_key_values=cache, use_cache=True)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
                cache.crop(-n)  # transformers 5: a negative count drops the last n
            costs[n] = min(times[1:])
    return costs


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
        #: Logits [S, vocab] and argmax ids [S] of the last pass.
        self._logits: Any = None
        self._preds: Any = None
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
        self._logits = out.logits[0]  # [S, vocab] ([1, vocab] with last_only)
        self._preds = self._logits.argmax(dim=-1)  # [S]: ids from the logits, not the probs
        return self._preds.tolist()

    def _top_probs(self, n: int) -> list[float]:
        """The top-1 probabilities of the last pass's first ``n`` positions: only the
        positions whose tokens are emitted (a softmax over the 49k vocabulary for each of
        a rejected draft's positions would be wasted; rows are independent, so the values
        are the same)."""
        logits, preds = self._logits[:n], self._preds[:n]
        return logits.float().softmax(dim=-1).gather(-1, preds[:, None])[:, 0].tolist()

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
        self.emitted_probs.extend(self._top_probs(1))  # last_only: one position
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
        self.emitted_probs.extend(self._top_probs(accepted + 1))
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
                 max_draft_len: int | None = None,
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
        #: Milliseconds of a pass per length (1 + K) measured at load (empty when K was given).
        self.pass_cost_ms: dict[int, float] = {}
        if max_draft_len is None:
            lengths = tuple(1 + k for k in (0, *DRAFT_LENGTHS))
            cache_len = min(256, self.context_limit - lengths[-1] - 1)
            if cache_len > 0:
                self.pass_cost_ms = measure_pass_cost(self.model, self.device, lengths,
                                                      cache_len=cache_len, repeats=2)
            max_draft_len = choose_draft_len(self.pass_cost_ms)
        #: Largest draft per verification pass (K): given, or chosen from the pass cost.
        self.max_draft_len = max_draft_len
        #: Keys and values of recent prompts (None: reuse off).
        self.prompt_cache: PromptCache | None = None
        if prompt_cache_mb > 0 and prompt_cache_entries > 0 and _reusable(self.model):
            self.prompt_cache = PromptCache(int(prompt_cache_mb * 2**20), prompt_cache_entries)

    def session(self, prompt_ids: list[int]) -> TorchSession:
        return TorchSession(self, prompt_ids)
