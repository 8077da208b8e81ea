"""Runtimes: one module per engine behind one small protocol.

A runtime turns a prompt into a :class:`Session`; a session runs verification steps::

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

from typing import Protocol


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


class Runtime(Protocol):
    """A loaded model that can open decoding sessions."""

    #: Largest number of tokens (prompt + output) one session may hold.
    context_limit: int

    def session(self, prompt_ids: list[int]) -> Session:
        """Open a session on ``prompt_ids`` (the prompt is not run until ``prefill``)."""
        ...
