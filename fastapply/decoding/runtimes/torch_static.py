"""The torch runtime's static KV cache, and on CUDA its passes replayed from CUDA graphs.

With transformers' ``DynamicCache`` and the eager model, a verification pass on a GPU
costs about the same for 1 token and for 257 (measured on an H200, bf16: 16.7 and
19.7 ms): the GPU waits on Python and on ~30 kernel launches per layer, not on
arithmetic. This module keeps the arithmetic and drops the waiting:

* **one static cache per runtime**, sized to the context limit (transformers'
  ``StaticCache``: tensors allocated once, written in place with ``index_copy_``), so a
  pass has fixed addresses and shapes;
* **positions, not crops**: every layer's write position (``cumulative_length``) is a
  view into one ``lengths`` tensor that each pass sets to the session's length from its
  input buffer, so "the cache keeps the accepted tokens" is only ``cache_len = keep``:
  the next pass writes over the rejected slots. Slots past a query's position are never
  read, because the mask is causal by position (query at p sees keys 0..p), which is
  also why a pass may be **padded**: the pad tokens sit after every real one, so they
  change no real token's logits, and their keys are overwritten by later passes before
  any query reaches their positions;
* **CUDA graphs** (on CUDA only): one per pass length bucket, captured at load; a pass
  of S tokens is padded to the smallest bucket that holds it and replayed (one host to
  device copy of ``[start, ids...]``, one replay, one read of the argmaxes). Longer
  passes, and padded ones that would run past the cache, run eagerly;
* **the prompt in chunks** of ``prefill_chunk`` tokens (with graphs, padded to a bucket
  like any pass).

On the CPU the same passes run eagerly (no graphs), optionally padded to buckets, which
is how the tests show padding changes no token (tests/decoding/test_static_cache.py).
The CUDA graph path is written against torch's ``torch.cuda.graphs`` and transformers
5's ``StaticLayer`` (its ``cumulative_length``); it has not run here (no GPU was lent):
the ``gpu`` test and ``python -m fastapply.bench decoders --kv-cache static`` check it.

One session at a time holds the cache (``StaticKV.lock``, taken when a session opens,
released when it closes): the service's worker threads queue for it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: Pass lengths (1 + K) captured as CUDA graphs; a pass is padded to the smallest that
#: holds it. The default K candidates are 16..256, so their passes fill their buckets.
PASS_BUCKETS = (1, 2, 5, 9, 17, 33, 65, 129, 257)
#: Prompt tokens per prefill pass (with graphs, also a bucket).
PREFILL_CHUNK = 512


def bucket_for(n: int, buckets: tuple[int, ...]) -> int | None:
    """The smallest bucket that holds a pass of ``n`` tokens; None when none does.

    >>> bucket_for(1, (1, 17, 33)), bucket_for(2, (1, 17, 33)), bucket_for(34, (1, 17, 33))
    (1, 17, None)
    """
    return min((b for b in buckets if b >= n), default=None)


def chunks(start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into passes of at most ``size`` tokens.

    >>> chunks(0, 1100, 512), chunks(300, 400, 512)
    ([(0, 512), (512, 1024), (1024, 1100)], [(300, 400)])
    """
    return [(i, min(i + size, end)) for i in range(start, end, size)]


class StaticCacheError(ValueError):
    """The model's cache cannot be held in a static cache this way."""


class StaticKV:
    """A runtime's static KV cache and the passes that run over it.

    ``run(ids, start)`` feeds ``ids`` at positions ``start..`` and returns the logits and
    argmax ids of each; what the cache holds past ``start + len(ids)`` is never read by
    this pass and is overwritten by the next ones.
    """

    def __init__(self, model: Any, device: str, max_len: int,
                 buckets: tuple[int, ...] = (), graphs: bool = False,
                 prefill_chunk: int = PREFILL_CHUNK) -> None:
        import torch
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        self.model, self.device = model, device
        #: Slots per layer: the longest session (prompt + output).
        self.max_len = max_len
        #: Prompt tokens per prefill pass.
        self.prefill_chunk = prefill_chunk
        #: Pass lengths a pass is padded to (empty: passes run at their own length).
        self.buckets = tuple(sorted(set(buckets)))
        #: Held by the session using the cache, from open to close.
        self.lock = threading.Lock()
        self.cache: Any = StaticCache(config=model.config, max_cache_len=max_len)
        #: Bucket -> (graph, its input buffer [1 + bucket], its (logits, argmax) outputs).
        self._graphs: dict[int, tuple[Any, Any, tuple[Any, Any]]] = {}
        #: Host staging buffer of the graphs' input (pinned: the copy runs asynchronously).
        self._host: Any = None
        #: Recorded after each copy out of ``_host``: it is written again only once the
        #: last copy is done (prompt chunks are queued without reading anything back).
        self._copied: Any = None
        layers: list[Any] = list(self.cache.layers)
        if not all(type(layer) is StaticLayer and hasattr(layer, "cumulative_length")
                   for layer in layers):
            raise StaticCacheError(
                f"{type(model).__name__}: its static cache is not plain full-attention "
                f"layers with a write position (sliding windows, or a transformers whose "
                f"StaticLayer has no cumulative_length; 5.24 has it); serve it with "
                f"--kv-cache dynamic")
        with torch.inference_mode():
            # lengths[i]: layer i's write position; StaticLayer.update adds each pass's
            # length to it in place, and every pass sets it from its own input first
            self.lengths = torch.zeros(len(layers), dtype=torch.long, device=device)
            for i, layer in enumerate(layers):
                layer.cumulative_length = self.lengths[i]
            self.run([0], 0)  # allocates the layers' tensors (lazily, on the first update)
        if graphs:
            self._capture()

    @property
    def graphed(self) -> tuple[int, ...]:
        """The buckets replayed from CUDA graphs."""
        return tuple(sorted(self._graphs))

    def _body(self, inp: Any, last_only: bool = False) -> tuple[Any, Any]:
        """One pass over ``inp = [start, id0, id1, ...]`` (shape [1 + S], on the device):
        logits [S, vocab] and argmax ids [S] (with ``last_only``: of the last id only).
        Everything is a tensor op on ``inp``, so a CUDA graph can capture it."""
        import torch

        start, ids = inp[0], inp[1:]
        self.lengths.copy_(start.expand_as(self.lengths))
        positions = torch.arange(ids.shape[0], device=inp.device) + start  # [S]
        out = self.model(input_ids=ids[None], position_ids=positions[None],
                         past_key_values=self.cache, use_cache=True,
                         logits_to_keep=1 if last_only else 0)  # 0: every position
        logits = out.logits[0]  # [S, vocab]
        return logits, logits.argmax(dim=-1)

    def _capture(self) -> None:
        """A CUDA graph per bucket (and the prefill chunk), largest first, sharing one
        memory pool (safe: passes replay one at a time, and each graph's outputs stay
        referenced). Each is warmed on a side stream first, as torch.cuda.graphs asks, so
        kernels are chosen and workspaces allocated outside the capture."""
        import torch

        widths = sorted({*self.buckets, self.prefill_chunk}, reverse=True)
        widths = [w for w in widths if w < self.max_len]
        self._host = torch.zeros(1 + widths[0], dtype=torch.long, pin_memory=True)
        self._copied = torch.cuda.Event()
        pool = torch.cuda.graph_pool_handle()
        with torch.inference_mode():
            for width in widths:
                inp = torch.zeros(1 + width, dtype=torch.long, device=self.device)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(2):
                        self._body(inp)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    outputs = self._body(inp)
                self._graphs[width] = (graph, inp, outputs)
            torch.cuda.synchronize()
        self.buckets = tuple(sorted({*self.buckets, *self._graphs}))

    def run(self, ids: list[int], start: int, last_only: bool = False) -> tuple[Any, Any]:
        """Feed ``ids`` at positions ``start..``: (logits [S, vocab], argmax [S]) of each
        (with ``last_only``: [1, vocab], [1] of the last). Padded to a bucket where one
        holds the pass and the padded pass fits the cache, eager or not, so that an eager
        run computes what the graph replays, shape for shape."""
        import torch

        n = len(ids)
        if start + n > self.max_len:
            raise ValueError(f"a pass of {n} tokens at {start} runs past the static cache "
                             f"({self.max_len} slots)")
        width = bucket_for(n, self.buckets)
        if width is not None and start + width > self.max_len:
            width = None
        if width in self._graphs:
            graph, inp, (logits, preds) = self._graphs[width]
            self._copied.synchronize()
            self._host[: 1 + n] = torch.tensor([start, *ids])  # the pad: earlier ids
            # the graph's buffers were made in inference mode: they may only be written
            # in it, whoever calls (measure_pass_cost runs outside any)
            with torch.inference_mode():
                inp.copy_(self._host[: 1 + width], non_blocking=True)
                self._copied.record()
                graph.replay()
        else:
            # no bucket: an exact pass, whose last position is a real one (last_only
            # then computes the logits of that position only)
            exact = width is None
            inp = torch.tensor([start, *ids, *[0] * ((width or n) - n)], device=self.device)
            with torch.inference_mode():
                logits, preds = self._body(inp, last_only=last_only and exact)
            if last_only and exact:
                return logits, preds
        return (logits[n - 1: n], preds[n - 1: n]) if last_only else (logits[:n], preds[:n])

    def prefill(self, ids: list[int], start: int) -> tuple[Any, Any]:
        """Feed the prompt's ``ids`` from position ``start`` in chunks: the logits and
        argmax after its last token ([1, vocab], [1])."""
        out: tuple[Any, Any] = (None, None)
        for a, b in chunks(start, start + len(ids), self.prefill_chunk):
            out = self.run(ids[a - start: b - start], a, last_only=True)
        return out

    def measure_pass_cost(self, lengths: tuple[int, ...], cache_len: int,
                          repeats: int) -> dict[int, float]:
        """:func:`fastapply.decoding.runtimes.torch.measure_pass_cost` over this cache:
        milliseconds of a pass of each length after ``cache_len`` random tokens, the
        fastest of ``repeats`` after a warm-up, the argmaxes read back as a step reads
        them."""
        import random

        rng = random.Random(0)
        vocab = int(self.model.config.vocab_size)
        costs: dict[int, float] = {}
        with self.lock:
            self.prefill([rng.randrange(vocab) for _ in range(cache_len)], 0)
            for n in lengths:
                times = []
                for _ in range(repeats + 1):
                    ids = [rng.randrange(vocab) for _ in range(n)]
                    t0 = time.perf_counter()
                    self.run(ids, cache_len)[1].tolist()  # waits for the device
                    times.append((time.perf_counter() - t0) * 1e3)
                costs[n] = min(times[1:])
        return costs
