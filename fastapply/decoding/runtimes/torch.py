"""The torch runtime: a transformers causal LM with a ``DynamicCache`` or a static cache.

CPU float32 is the default without a GPU; on CUDA the default dtype is bfloat16. With the
dynamic cache (the default), the cache is cropped back to the accepted tokens after each
verification pass. With ``kv_cache="static"`` the session runs over the runtime's one
static cache, and on CUDA its passes replay CUDA graphs
(:mod:`fastapply.decoding.runtimes.torch_static`): there the cache length simply becomes
the accepted length and later passes overwrite the rejected slots. Positions come
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

from fastapply.decoding.runtimes import KV_CACHES, SessionRuntime
from fastapply.decoding.runtimes.prompt_cache import (
    DEFAULT_PROMPT_CACHE_ENTRIES,
    DEFAULT_PROMPT_CACHE_MB,
    PromptCache,
)
from fastapply.decoding.runtimes.torch_static import PASS_BUCKETS, PREFILL_CHUNK, StaticKV


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
        self.runtime = runtime
        #: The prompt, run by ``prefill``.
        self.prompt_ids = prompt_ids
        #: Keys and values of every token already fed (prompt + accepted output).
        self.cache: Any = self._open()
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

    def _open(self) -> Any:
        """A fresh cache for this session."""
        from transformers import DynamicCache

        return DynamicCache(config=self.runtime.model.config)

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

    def _load_prefix(self, layers: list[tuple[Any, Any]]) -> None:
        """Start the cache from a reused prompt prefix's keys and values (per layer)."""
        from transformers import DynamicCache

        self.cache = DynamicCache(ddp_cache_data=layers, config=self.runtime.model.config)

    def _prompt_layers(self) -> list[tuple[Any, Any]]:
        """The prompt's keys and values per layer, to keep for reuse: the cache's own
        tensors (a ``DynamicLayer`` only ever replaces them, never writes into them)."""
        return [(layer.keys, layer.values) for layer in self.cache.layers]

    def _truncate(self, keep: int) -> None:
        """Keep the first ``keep`` tokens of the cache (``keep < cache_len``)."""
        self.cache.crop(keep - self.cache_len)  # transformers 5: crop(-n) drops the last n
        self.cache_len = keep

    def prefill(self) -> int:
        rt, start = self.runtime, 0
        if rt.prompt_cache is not None:
            entry, start = rt.prompt_cache.lookup(self.prompt_ids)
            if entry is not None:
                self._load_prefix(entry.prefix(start))
                self.cache_len = start
        self.reused_prompt_tokens = start
        preds = self._forward(self.prompt_ids[start:], last_only=True)
        if rt.prompt_cache is not None:
            rt.prompt_cache.store(self.prompt_ids, self._prompt_layers())
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
        if self.cache_len > keep:  # crop(0) is not a no-op in transformers 5: guarded
            self._truncate(keep)
        new = [*draft[:accepted], int(preds[accepted])]
        self.emitted_probs.extend(self._top_probs(accepted + 1))
        self.last = new[-1]
        return new

    def close(self) -> None:
        self.cache = None


class StaticSession(TorchSession):
    """A session over the runtime's static cache (:class:`.torch_static.StaticKV`),
    which it holds from open to close: sessions of one runtime run one at a time."""

    def _open(self) -> StaticKV:
        kv = self.runtime.static_kv
        assert kv is not None
        kv.lock.acquire()
        return kv

    def _forward(self, ids: list[int], last_only: bool = False) -> Any:
        if last_only:  # the prompt: in chunks
            self._logits, self._preds = self.cache.prefill(ids, self.cache_len)
        else:
            self._logits, self._preds = self.cache.run(ids, self.cache_len)
        self.cache_len += len(ids)
        return self._preds.tolist()

    def _load_prefix(self, layers: list[tuple[Any, Any]]) -> None:
        import torch

        with torch.inference_mode():
            for layer, (keys, values) in zip(self.cache.cache.layers, layers, strict=True):
                layer.keys[:, :, : keys.shape[2]].copy_(keys)
                layer.values[:, :, : values.shape[2]].copy_(values)

    def _prompt_layers(self) -> list[tuple[Any, Any]]:
        # copies: the static tensors are written over by the next pass and session
        n = self.cache_len
        return [(layer.keys[:, :, :n].clone(), layer.values[:, :, :n].clone())
                for layer in self.cache.cache.layers]

    def _truncate(self, keep: int) -> None:
        self.cache_len = keep  # the next pass writes over the rejected slots

    def close(self) -> None:
        if self.cache is not None:
            self.cache.lock.release()
        self.cache = None


class TorchRuntime(SessionRuntime):
    """A Hugging Face causal LM loaded with transformers.

    ``prompt_cache_mb`` and ``prompt_cache_entries`` bound the keys and values kept of
    recent prompts for reuse (0: none kept). Models whose cache is not plain growing
    layers (sliding-window attention drops old tokens) keep none.

    ``kv_cache``: ``dynamic`` (a ``DynamicCache`` per session), ``static`` (one static
    cache of ``context_limit`` slots, sessions one at a time, the prompt in chunks of
    ``prefill_chunk``) or ``auto`` (the default: static on CUDA, dynamic elsewhere).
    ``cuda_graphs`` (static only; default: on CUDA) replays each pass
    from a CUDA graph captured at load for each of ``pass_buckets`` (default
    :data:`.torch_static.PASS_BUCKETS` with graphs, none without), a pass padded to the
    smallest that holds it; buckets without graphs pad eager passes the same way (tests).
    """

    def __init__(self, model_dir: str | Path, device: str | None = None,
                 dtype: str | None = None, context_limit: int | None = None,
                 max_draft_len: int | None = None,
                 prompt_cache_mb: float = DEFAULT_PROMPT_CACHE_MB,
                 prompt_cache_entries: int = DEFAULT_PROMPT_CACHE_ENTRIES,
                 kv_cache: str = "auto", cuda_graphs: bool | None = None,
                 pass_buckets: tuple[int, ...] | None = None,
                 prefill_chunk: int = PREFILL_CHUNK) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path}: not a model directory (no config.json); pass the "
                                 f"directory of a Hugging Face checkpoint")
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        if kv_cache not in KV_CACHES:
            raise ModelLoadError(f"unknown kv cache {kv_cache!r}; use {' or '.join(KV_CACHES)}")
        on_cuda = self.device.startswith("cuda")
        if kv_cache == "auto":
            kv_cache = "static" if on_cuda else "dynamic"
        graphs = kv_cache == "static" and (on_cuda if cuda_graphs is None else cuda_graphs)
        if graphs and not on_cuda:
            raise ModelLoadError("CUDA graphs need a CUDA device; use --device cuda, or "
                                 "the static cache without graphs")
        #: dynamic | static.
        self.kv_cache = kv_cache
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype))
        #: The loaded model, in eval mode on its device.
        self.model: Any = model.to(self.device).eval()
        model_limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 32768)
        #: Tokens one session may hold; the smaller of the model's and the caller's.
        self.context_limit = min(model_limit, context_limit or model_limit)
        #: The model's EOS id(s) from its generation config.
        self.eos_token_id = getattr(self.model.generation_config, "eos_token_id", None)
        #: The static cache every session runs over (None: a dynamic cache per session).
        self.static_kv: StaticKV | None = None
        if kv_cache == "static":
            buckets = pass_buckets if pass_buckets is not None else \
                (PASS_BUCKETS if graphs else ())
            self.static_kv = StaticKV(self.model, self.device, self.context_limit,
                                      buckets=buckets, graphs=graphs,
                                      prefill_chunk=prefill_chunk)
        #: Milliseconds of a pass per length (1 + K) measured at load (empty when K was given).
        self.pass_cost_ms: dict[int, float] = {}
        if max_draft_len is None:
            lengths = tuple(1 + k for k in (0, *DRAFT_LENGTHS))
            cache_len = min(256, self.context_limit - lengths[-1] - 1)
            if cache_len > 0:
                self.pass_cost_ms = self.measure_pass_cost(lengths, cache_len, repeats=2)
            max_draft_len = choose_draft_len(self.pass_cost_ms)
        #: Largest draft per verification pass (K): given, or chosen from the pass cost.
        self.max_draft_len = max_draft_len
        #: Keys and values of recent prompts (None: reuse off).
        self.prompt_cache: PromptCache | None = None
        if prompt_cache_mb > 0 and prompt_cache_entries > 0 and \
                (self.static_kv is not None or _reusable(self.model)):
            self.prompt_cache = PromptCache(int(prompt_cache_mb * 2**20), prompt_cache_entries)

    @classmethod
    def around(cls, model: Any, context_limit: int, max_draft_len: int = 64) -> TorchRuntime:
        """The runtime around an already loaded model (a fake-quantized one, in the engine
        build's checks): its device and dtype, a dynamic cache per session, no prompt
        reuse, K given (nothing is measured)."""
        rt = cls.__new__(cls)
        rt.model = model
        rt.device = str(next(model.parameters()).device)
        rt.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        rt.context_limit = context_limit
        rt.eos_token_id = getattr(model.generation_config, "eos_token_id", None)
        rt.kv_cache, rt.static_kv, rt.prompt_cache = "dynamic", None, None
        rt.pass_cost_ms, rt.max_draft_len = {}, max_draft_len
        return rt

    def measure_pass_cost(self, lengths: tuple[int, ...], cache_len: int = 256,
                          repeats: int = 5) -> dict[int, float]:
        """Milliseconds of a verification pass of each length, over this runtime's cache
        (see :func:`measure_pass_cost`; static: with its padding and graphs)."""
        if self.static_kv is not None:
            return self.static_kv.measure_pass_cost(lengths, cache_len, repeats)
        return measure_pass_cost(self.model, self.device, lengths, cache_len, repeats)

    def session(self, prompt_ids: list[int]) -> TorchSession:
        if self.static_kv is not None:
            return StaticSession(self, prompt_ids)
        return TorchSession(self, prompt_ids)
