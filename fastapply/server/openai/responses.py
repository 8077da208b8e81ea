"""The front's answers: OpenAI's ``chat.completion`` and ``text_completion`` objects and
their streamed chunks (server-sent events), Relace's usage, the model list."""

from __future__ import annotations

import json
from typing import Any

from fastapply.metrics import Stats

#: Model names /v1/models lists; any other name is accepted as well.
MODEL_IDS = ("fast_apply", "auto", "morph-v3-fast", "morph-v3-large", "relace-apply-3")


def usage(stats: Stats) -> dict[str, Any]:
    """OpenAI ``usage`` from the server's Stats; draft tokens are the prediction tokens.

    >>> usage(Stats(prompt_tokens=10, completion_tokens=5, accepted_draft_tokens=4,
    ...             rejected_draft_tokens=1))["completion_tokens_details"]
    {'accepted_prediction_tokens': 4, 'rejected_prediction_tokens': 1}
    """
    return {"prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
            "total_tokens": stats.prompt_tokens + stats.completion_tokens,
            "completion_tokens_details": {
                "accepted_prediction_tokens": stats.accepted_draft_tokens,
                "rejected_prediction_tokens": stats.rejected_draft_tokens}}


def chat_completion(request_id: str, created: int, model: str, merged: str,
                    stats: Stats) -> dict[str, Any]:
    """A ``chat.completion`` carrying the merged file; ``stats`` is fastapply's own."""
    return {"id": request_id, "object": "chat.completion", "created": created,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": merged},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage(stats), "stats": stats.to_dict()}


def chat_chunk(request_id: str, created: int, model: str, delta: dict[str, Any] | None,
               finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta=None`` gives the choice-less usage chunk."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish_reason}]
    return {"id": request_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": choices, **extra}


def text_completion(request_id: str, created: int, model: str, text: str,
                    stats: Stats) -> dict[str, Any]:
    """A ``text_completion`` (``/v1/completions``) carrying the answer."""
    return {"id": request_id, "object": "text_completion", "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
            "usage": usage(stats), "stats": stats.to_dict()}


def text_chunk(request_id: str, created: int, model: str, text: str | None,
               finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """A streamed ``text_completion``; ``text=None`` gives the choice-less usage chunk."""
    choices = [] if text is None else [{"index": 0, "text": text, "logprobs": None,
                                        "finish_reason": finish_reason}]
    return {"id": request_id, "object": "text_completion", "created": created,
            "model": model, "choices": choices, **extra}


def relace_usage(stats: Stats) -> dict[str, int]:
    return {"prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
            "total_tokens": stats.prompt_tokens + stats.completion_tokens}


def models_list(created: int) -> dict[str, Any]:
    return {"object": "list", "data": [model_card(name, created) for name in MODEL_IDS]}


def model_card(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "fastapply"}


def dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sse(data: Any) -> bytes:
    """One server-sent event; a string is sent as is (``[DONE]``), anything else as JSON.

    >>> sse("[DONE]")
    b'data: [DONE]\\n\\n'
    """
    return b"data: " + (data.encode() if isinstance(data, str) else dumps(data)) + b"\n\n"
