"""Prompt KV reuse: the keys and values of recent prompts, kept for the next prompt that
starts the same way (the torch runtime's counterpart of TensorRT-LLM's block reuse).

Agents send several edits in a row to one file, and every prompt puts the file before the
snippet (``<code>FILE</code>`` then ``<update>SNIPPET</update>``), so a second edit of the
same file shares its prompt up to the snippet, and an edit of the file as the first edit
left it shares the prompt up to the first changed line. Every prompt also shares the
system turn and the instructions with every other prompt of its format.

The key and value of a token depend only on the tokens up to it, so a new prompt whose
first n tokens equal a cached prompt's needs the model only on the rest: the session
starts from the cached tensors cut to n tokens. In float32 the output is the same token
for token (tests/decoding/test_prompt_cache.py); only the prompt's arithmetic is split in
two passes, as speculative verification already splits the output's. A shared prefix
too short for its prompt is not reused: after a prefix, torch's CPU attention does more
work than a whole causal pass saves (:func:`reuse_pays`).

:class:`PromptCache` is a least-recently-used map from prompt ids to their per-layer
tensors, bounded by entries and by bytes, and safe to share between the service's
worker threads (one lock around lookups and inserts; the tensors themselves are never
written to once stored: transformers' ``DynamicLayer`` only replaces its tensors,
``torch.cat`` on update and slicing on crop). An entry evicted while a session still
copies from it stays alive until that session lets go, so the bytes bound can be passed
by at most the prompts in flight.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Default bound of a runtime's prompt cache, in MiB (float32 SmolLM2-135M: 45 KiB a
#: token, so about 5,800 prompt tokens; bfloat16 holds twice as many).
DEFAULT_PROMPT_CACHE_MB = 256
#: Default bound in prompts.
DEFAULT_PROMPT_CACHE_ENTRIES = 16

#: Cost of attending one query to one key, in units of one token's linear work
#: (projections, MLP): measured on SmolLM2-135M, float32, one CPU thread, a 1,400-token
#: prompt: 2.25 ms a token outside attention, 0.96 us a query-key pair (torch profiler).
PAIR_COST = 4.3e-4

_CHUNK = 256


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists.

    Compares chunks first (slice equality runs in C), then token by token inside the
    first chunk that differs.

    >>> common_prefix_len([1, 2, 3, 4], [1, 2, 5])
    2
    >>> common_prefix_len([1, 2], [1, 2, 3]), common_prefix_len([], [1])
    (2, 0)
    """
    n = min(len(a), len(b))
    lo = 0
    while lo < n:
        hi = min(lo + _CHUNK, n)
        if a[lo:hi] != b[lo:hi]:
            break
        lo = hi
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def reuse_pays(shared: int, total: int, pair_cost: float = PAIR_COST) -> bool:
    """Whether running the last ``total - shared`` tokens of a prompt after ``shared``
    reused ones costs less than running the whole prompt.

    A whole prompt is one causal pass: ``total`` tokens of linear work and
    ``total**2 / 2`` query-key pairs (the attention kernel skips the masked half). After
    a reused prefix the pass needs an explicit mask, and torch's CPU attention computes
    every pair of the rest x total rectangle (measured: 53 ms for 1,250 x 1,400 against
    32 ms for a causal 1,400 x 1,400), so a short shared prefix on a long prompt loses.
    Costs in units of one token's linear work (see PAIR_COST)::

        whole:  total + pair_cost * total**2 / 2
        reuse:  rest  + pair_cost * rest * total

    >>> reuse_pays(150, 1400), reuse_pays(700, 1400), reuse_pays(150, 400)
    (False, True, True)
    """
    rest = total - shared
    return rest + pair_cost * rest * total < total + pair_cost * total * total / 2


@dataclass(frozen=True)
class PromptEntry:
    """One prompt's keys and values."""

    #: The prompt's token ids.
    ids: list[int]
    #: Per layer (keys, values), each [1, kv_heads, len(ids), head_dim]; read only.
    layers: list[tuple[Any, Any]]
    #: Bytes the tensors hold.
    nbytes: int

    def prefix(self, n: int) -> list[tuple[Any, Any]]:
        """Per layer (keys, values) of the first ``n`` tokens (views, no copy)."""
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self.layers]


@dataclass
class PromptCacheCounts:
    """What the cache has done since it was made (for benchmarks and logs)."""

    #: Prompts looked up.
    lookups: int = 0
    #: Lookups that reused tokens.
    hits: int = 0
    #: Prompt tokens reused, summed over lookups.
    reused_tokens: int = 0
    #: Entries dropped to keep within the bounds.
    evictions: int = 0


def tensors_nbytes(layers: Sequence[tuple[Any, Any]]) -> int:
    """Bytes held by per-layer (keys, values) tensors."""
    return sum(t.numel() * t.element_size() for kv in layers for t in kv)


class PromptCache:
    """Recent prompts' KV tensors, least recently used dropped first; thread-safe."""

    def __init__(self, max_bytes: int, max_entries: int = DEFAULT_PROMPT_CACHE_ENTRIES,
                 pair_cost: float = PAIR_COST) -> None:
        #: Attention's cost per query-key pair (see :func:`reuse_pays`); 0: always reuse.
        self.pair_cost = pair_cost
        #: Most bytes the stored tensors may hold.
        self.max_bytes = max_bytes
        #: Most prompts kept.
        self.max_entries = max_entries
        #: Entries, least recently used first; keyed by ``tuple(ids)``.
        self._entries: OrderedDict[tuple[int, ...], PromptEntry] = OrderedDict()
        #: Bytes of the stored entries.
        self.nbytes = 0
        #: Running totals.
        self.counts = PromptCacheCounts()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: list[int]) -> tuple[PromptEntry | None, int]:
        """The entry sharing the longest prefix with ``ids`` and that prefix's length,
        at most ``len(ids) - 1`` (the last prompt token must run: its logits give the
        first output token); ``(None, 0)`` when no entry shares a token or reusing the
        shared tokens would not pay (:func:`reuse_pays`)."""
        with self._lock:
            best, best_n = self._best(ids)
            self.counts.lookups += 1
            if best is None:
                return None, 0
            self._entries.move_to_end(tuple(best.ids))
            self.counts.hits += 1
            self.counts.reused_tokens += best_n
            return best, best_n

    def peek(self, ids: list[int]) -> int:
        """How many of ``ids`` :meth:`lookup` would reuse now, without counting a lookup
        or reordering the entries."""
        with self._lock:
            return self._best(ids)[1]

    def _best(self, ids: list[int]) -> tuple[PromptEntry | None, int]:
        """What :meth:`lookup` returns, without its bookkeeping (the lock held)."""
        best, best_n = None, 0
        for entry in reversed(self._entries.values()):  # most recent first on ties
            n = common_prefix_len(entry.ids, ids)
            if n > best_n:
                best, best_n = entry, n
        best_n = min(best_n, len(ids) - 1)
        if best is None or best_n <= 0 or not reuse_pays(best_n, len(ids), self.pair_cost):
            return None, 0
        return best, best_n

    def store(self, ids: list[int], layers: list[tuple[Any, Any]]) -> bool:
        """Keep ``ids``'s per-layer tensors (which nobody may write to afterwards) as the
        most recent entry; drop entries it makes redundant (its own prefixes) and the
        least recently used ones past the bounds. False when it alone exceeds them."""
        entry = PromptEntry(list(ids), layers, tensors_nbytes(layers))
        if entry.nbytes > self.max_bytes or self.max_entries <= 0:
            return False
        key = tuple(entry.ids)
        with self._lock:
            for old_key in [k for k in self._entries
                            if len(k) <= len(key) and key[: len(k)] == k]:
                self.nbytes -= self._entries.pop(old_key).nbytes
            self._entries[key] = entry
            self.nbytes += entry.nbytes
            while self.nbytes > self.max_bytes or len(self._entries) > self.max_entries:
                _, dropped = self._entries.popitem(last=False)
                self.nbytes -= dropped.nbytes
                self.counts.evictions += 1
        return True

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self.nbytes = 0
