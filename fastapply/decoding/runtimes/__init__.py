"""Runtimes: one module per engine behind one small protocol.

Every runtime answers a :class:`~fastapply.decoding.speculate.GenerationRequest` (prompt ids,
drafter sources, stop ids, budget) with a :class:`~fastapply.decoding.speculate.Generation`::

    gen = runtime.generate(request, on_tokens=stream)   # Runtime: what callers use

Most runtimes only run single verification steps: they subclass :class:`SessionRuntime`,
whose ``generate`` drives their sessions through :func:`fastapply.decoding.speculate.generate`
with the speculative-edits drafter. A runtime whose engine runs the loop itself
(TensorRT-LLM's PyTorch backend) implements ``generate`` directly, with the budget, stop
and statistics rules of :mod:`fastapply.decoding.speculate`.

A session runtime turns a prompt into a :class:`Session`; a session runs verification
steps::

    session = runtime.session(prompt_ids)
    first = session.prefill()         # the model's first output token (one forward pass)
    new = session.step(draft)         # one forward pass over [last token] + draft

``step`` returns the accepted draft prefix plus the model's next token (so at least one
token), and afterwards the KV cache holds exactly the accepted tokens. Greedy only:
speculation is lossless because acceptance compares the draft with the argmax.

Modules: ``torch`` (transformers, CPU or CUDA), ``trtllm_engine`` (TensorRT-LLM 1.2.x
executor, external draft tokens), ``trtllm_pytorch`` (TensorRT-LLM PyTorch backend). The
two TensorRT-LLM runtimes are written against the upstream 1.2.x sources and have only
been tested against a stand-in here; see their docstrings.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Protocol

# The loop defines the session protocol it drives; the runtimes implement it.
from fastapply.decoding.speculate import Generation, GenerationRequest, Session, generate

__all__ = ["KV_CACHES", "MODEL_RUNTIMES", "PROB_RUNTIMES", "RUNTIMES", "TRTLLM_RUNTIMES",
           "Runtime", "Session", "SessionRuntime"]

#: The runtime names a service can be configured with (the one list of them).
RUNTIMES = ("deterministic", "torch", "trtllm-engine", "trtllm-pytorch")
#: The runtimes that run a model (every one but ``deterministic``).
MODEL_RUNTIMES = RUNTIMES[1:]
#: The runtimes that need TensorRT-LLM.
TRTLLM_RUNTIMES = ("trtllm-engine", "trtllm-pytorch")
#: Runtimes that report the probability of each token they write (``emitted_probs``, read
#: into Stats.min_token_prob); the TensorRT-LLM runtimes return token ids only.
PROB_RUNTIMES = ("torch",)
#: The KV caches the torch runtime can run a session over (see ``torch`` and
#: ``torch_static``).
#: ``auto``: ``static`` on CUDA (passes replayed from CUDA graphs: measured on an H100 at
#: 7.6-8.5 ms a pass for 2-257 tokens, identical to greedy; docs/benchmarks.md), ``dynamic``
#: elsewhere.
KV_CACHES = ("auto", "dynamic", "static")


class Runtime(Protocol):
    """A loaded model that answers generation requests."""

    #: Largest number of tokens (prompt + output) one request may hold.
    context_limit: int
    #: The model's own EOS id(s), if it declares any (stop ids come from the tokenizer too).
    eos_token_id: int | list[int] | None

    def generate(self, request: GenerationRequest,
                 on_tokens: Callable[[list[int]], None] | None = None) -> Generation:
        """Greedy speculative generation; ``on_tokens`` gets each pass's new tokens."""
        ...


class SessionRuntime(abc.ABC):
    """A runtime that opens decoding sessions; ``generate`` runs the verification loop."""

    #: Largest number of tokens (prompt + output) one session may hold.
    context_limit: int
    #: The model's own EOS id(s), if it declares any.
    eos_token_id: int | list[int] | None = None

    @abc.abstractmethod
    def session(self, prompt_ids: list[int]) -> Session:
        """Open a session on ``prompt_ids`` (the prompt is not run until ``prefill``)."""

    def generate(self, request: GenerationRequest,
                 on_tokens: Callable[[list[int]], None] | None = None) -> Generation:
        """:func:`fastapply.decoding.speculate.generate` with the speculative-edits drafter."""
        from fastapply.decoding.drafting import SpeculativeEditsDrafter

        drafter = SpeculativeEditsDrafter(request.sources, max_k=request.max_draft_len)
        return generate(self, request.prompt_ids, drafter,
                        max_new_tokens=request.max_new_tokens, stop_ids=request.stop_ids,
                        on_tokens=on_tokens)
