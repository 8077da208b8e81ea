"""The verification loop: speculative decoding over any :mod:`fastapply.decoding.runtimes` session.

Each step the drafter proposes up to K tokens; one forward pass over
``[last token] + draft`` (shape ``[1, 1 + K]``) yields the model's argmax at every
position; the longest draft prefix equal to those argmaxes is accepted, plus the argmax
after it::

    draft     d0 d1 d2 d3          argmax  a0 a1 a2 a3 a4
    accepted  d0 d1                when d0 == a0, d1 == a1, d2 != a2
    new       d0 d1 a2             (at least one token per pass, at most K + 1)

Every accepted token is what greedy decoding would have produced at that position, so
the output equals greedy decoding token for token (exactly in float32; see DESIGN.md on
bf16/fp8). Speculation changes only the number of forward passes.

A :class:`GenerationRequest` (built once, by :func:`fastapply.decoding.prompts.build_request`)
says what to generate: prompt ids, the drafter's sources, stop ids, the token budget.
Every runtime answers it with ``runtime.generate(request) -> Generation``: session
runtimes through :func:`generate` below, TensorRT-LLM's PyTorch backend through its own
loop; both share the budget, stop and statistics rules defined here
(:func:`start`, :func:`cut_at_stop`, :func:`finish`).

``generate`` returns the tokens with their :class:`~fastapply.metrics.Stats`;
``TextStream`` turns tokens into text deltas that never split a UTF-8 character.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fastapply.metrics import Stats

if TYPE_CHECKING:
    from fastapply.decoding.drafting import Drafter


class Session(Protocol):
    """One request's decoding state (its KV cache) inside a runtime."""

    #: Number of tokens the KV cache holds (prompt + accepted output).
    cache_len: int

    def prefill(self) -> int:
        """Run the prompt through the model and return the first output token."""
        ...

    def step(self, draft: list[int]) -> list[int]:
        """Verify ``draft`` after the last token; return accepted prefix + next token."""
        ...

    def close(self) -> None:
        """Free the session's cache."""
        ...


class Sessions(Protocol):
    """What :func:`generate` needs of a runtime: its context and a session per prompt
    (every :class:`~fastapply.decoding.runtimes.SessionRuntime` is one). Defined here, not
    beside the runtimes, so that the loop does not import the runtimes that call it."""

    #: Largest number of tokens (prompt + output) one session may hold.
    context_limit: int

    def session(self, prompt_ids: list[int]) -> Session:
        """Open a session on ``prompt_ids`` (the prompt is not run until ``prefill``)."""
        ...


class ContextLimitError(ValueError):
    """The prompt does not fit the model's context; it is refused, never truncated."""


@dataclass(frozen=True)
class GenerationRequest:
    """What one merge asks of a runtime (built by :func:`.prompts.build_request`)."""

    #: The prompt's token ids.
    prompt_ids: list[int]
    #: The drafter's sources as token ids, best first (candidate merge, original, snippet).
    sources: list[list[int]]
    #: Tokens that end the output (kept as its last token).
    stop_ids: frozenset[int]
    #: Most tokens to generate; clipped to the room the context leaves.
    max_new_tokens: int
    #: Largest draft per verification step (K); 0 is plain greedy decoding.
    max_draft_len: int = 64


@dataclass
class Generation:
    """Output of :func:`generate`."""

    #: Generated token ids, the stop token included when the model emitted one.
    token_ids: list[int]
    #: Figures of this request; ``total_ms`` etc. are filled by the caller (it knows chars).
    stats: Stats
    #: Tokens accepted per forward pass after prefill (for acceptance histograms).
    tokens_per_pass: list[int] = field(default_factory=list)


def check_context(prompt_tokens: int, context_limit: int) -> int:
    """Tokens left for output; raises ContextLimitError when the prompt does not fit.

    >>> check_context(100, 4096)
    3996
    """
    if prompt_tokens >= context_limit:
        raise ContextLimitError(
            f"the prompt is {prompt_tokens} tokens but the context limit is {context_limit} "
            f"tokens (and the merged file needs room too); send a smaller file or serve a "
            f"model with a longer context")
    return context_limit - prompt_tokens


def start(prompt_tokens: int, max_new_tokens: int,
          context_limit: int) -> tuple[int, Stats]:
    """(token budget, fresh Stats) of a request; ContextLimitError when nothing fits.

    >>> start(100, 50, 4096)[0], start(100, 5000, 4096)[0]
    (50, 3996)
    """
    budget = min(max_new_tokens, check_context(prompt_tokens, context_limit))
    return budget, Stats(prompt_tokens=prompt_tokens, finish_reason="length")


def cut_at_stop(tokens: list[int], stop_ids: Collection[int]) -> tuple[list[int], bool]:
    """``tokens`` up to and including the first stop token; whether there was one.

    >>> cut_at_stop([5, 6, 2, 7], {2}), cut_at_stop([5, 6], {2})
    (([5, 6, 2], True), ([5, 6], False))
    """
    stop_at = next((i for i, t in enumerate(tokens) if t in stop_ids), -1)
    if stop_at < 0:
        return tokens, False
    return tokens[: stop_at + 1], True


def finish(stats: Stats, tokens: list[int], per_pass: list[int] | None = None) -> Generation:
    """The Generation of a finished request (completion_tokens filled in)."""
    stats.completion_tokens = len(tokens)
    return Generation(tokens, stats, per_pass if per_pass is not None else [])


def generate(
    runtime: Sessions,
    prompt_ids: list[int],
    drafter: Drafter,
    *,
    max_new_tokens: int,
    stop_ids: Collection[int],
    on_tokens: Callable[[list[int]], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Generation:
    """Speculative greedy decoding of up to ``max_new_tokens`` tokens.

    ``on_tokens`` is called with the new tokens after every forward pass (streaming).
    The budget is clipped to the runtime's context; a prompt that leaves no room raises
    ContextLimitError.
    """
    t0 = clock()
    budget, stats = start(len(prompt_ids), max_new_tokens, runtime.context_limit)
    out: list[int] = []
    per_pass: list[int] = []
    if budget <= 0:
        return finish(stats, out, per_pass)
    session = runtime.session(prompt_ids)
    try:
        new = [session.prefill()]
        stats.forward_passes = 1
        stats.ttft_ms = (clock() - t0) * 1e3
        stats.reused_prompt_tokens = getattr(session, "reused_prompt_tokens", 0)
        while True:
            new, stopped = cut_at_stop(new, stop_ids)
            out.extend(new)
            if on_tokens is not None:
                on_tokens(new)
            if stopped:
                stats.finish_reason = "stop"
                break
            remaining = budget - len(out)
            if remaining <= 0:
                break
            # A pass yields len(accepted) + 1 tokens, so the draft may use remaining - 1.
            draft = drafter.propose(out, remaining - 1)[: remaining - 1]
            new = session.step(draft)
            accepted = len(new) - 1
            stats.forward_passes += 1
            stats.accepted_draft_tokens += accepted
            stats.rejected_draft_tokens += len(draft) - accepted
            per_pass.append(len(new))
    finally:
        probs = getattr(session, "emitted_probs", None)  # runtimes that report them
        if probs:
            stats.min_token_prob = min(probs[: len(out)])
        session.close()
    return finish(stats, out, per_pass)


class TextStream:
    """Incremental detokenisation: text deltas that never split a character.

    Decodes a sliding window of recent tokens (so the cost per call does not grow with
    the output) and holds back text that ends in an incomplete UTF-8 sequence, which
    byte-level tokenizers decode as U+FFFD until the next token completes it.
    """

    def __init__(self, tokenizer: Any, skip_ids: Collection[int] = ()) -> None:
        self.tokenizer = tokenizer
        #: Token ids left out of the text (stop tokens).
        self.skip_ids = set(skip_ids)
        #: Tokens seen so far (skip_ids removed).
        self.ids: list[int] = []
        #: Start of the window whose text was already emitted up to ``read_offset``.
        self.prefix_offset = 0
        #: End of the part of the window already turned into text.
        self.read_offset = 0
        #: All text emitted so far.
        self.text = ""

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False))

    def push(self, new_ids: Sequence[int]) -> str:
        """Add tokens; return the new complete text (possibly empty)."""
        self.ids.extend(t for t in new_ids if t not in self.skip_ids)
        prefix_text = self._decode(self.ids[self.prefix_offset:self.read_offset])
        full = self._decode(self.ids[self.prefix_offset:])
        if len(full) <= len(prefix_text) or full.endswith("\ufffd"):
            return ""
        delta = full[len(prefix_text):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        self.text += delta
        return delta

    def flush(self) -> str:
        """At the end: whatever is left (an incomplete character stays as U+FFFD)."""
        full = self._decode(self.ids)
        delta = full[len(self.text):] if full.startswith(self.text) else ""
        self.text += delta
        return delta
