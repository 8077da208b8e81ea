"""The front's streamed answers: for each client shape, the server-sent events that start a
stream, carry each delta of the merged file, and end it with its usage (OpenAI's
``chat.completion.chunk`` and ``text_completion`` chunks, Relace's events)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapply.metrics import Stats
from fastapply.server.openai.api import MergeRequest
from fastapply.server.openai.responses import chat_chunk, relace_usage, sse, text_chunk, usage


class ChatEvents:
    """Server-sent events of a streamed chat completion (OpenAI's chunk shape). A request
    whose prompt asks for <updated-code> tags gets them as a delta of their own before the
    file and after it; each delta carries the escaping the request came in."""

    def __init__(self, req: MergeRequest) -> None:
        self.req = req
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None,
               **extra: Any) -> bytes:
        return sse(chat_chunk(self.id, self.created, self.req.model, delta, finish, **extra))

    def start(self) -> bytes:
        opening = self.req.opening()
        return self._chunk({"role": "assistant", "content": ""}) + (
            self._chunk({"content": opening}) if opening else b"")

    def delta(self, text: str) -> bytes:
        return self._chunk({"content": self.req.text(text)})

    def end(self, stats: Stats) -> bytes:
        closing = self.req.closing()
        last = (self._chunk({"content": closing}) if closing else b"") + \
            self._chunk({}, "stop", stats=stats.to_dict())
        if self.req.include_usage:
            last += self._chunk(None, usage=usage(stats))
        return last + sse("[DONE]")


class TextEvents:
    """Server-sent events of a streamed ``/v1/completions`` (``text_completion`` chunks),
    wrapped and escaped as :class:`ChatEvents`."""

    def __init__(self, req: MergeRequest) -> None:
        self.req = req
        self.id = f"cmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _chunk(self, text: str | None, finish: str | None = None, **extra: Any) -> bytes:
        return sse(text_chunk(self.id, self.created, self.req.model, text, finish, **extra))

    def start(self) -> bytes:
        opening = self.req.opening()
        return self._chunk(opening) if opening else b""

    def delta(self, text: str) -> bytes:
        return self._chunk(self.req.text(text))

    def end(self, stats: Stats) -> bytes:
        last = self._chunk(self.req.closing(), "stop", stats=stats.to_dict())
        if self.req.include_usage:
            last += self._chunk(None, usage=usage(stats))
        return last + sse("[DONE]")


class RelaceEvents:
    """Server-sent events of a streamed ``/v1/code/apply``: ``{"chunk": TEXT}`` per delta,
    then ``{"usage": ..., "stats": ...}`` and ``[DONE]`` (Relace does not publish its
    streaming format; this one mirrors the JSON answer)."""

    def __init__(self, req: MergeRequest) -> None:
        self.req = req

    def start(self) -> bytes:
        return b""

    def delta(self, text: str) -> bytes:
        return sse({"chunk": text})

    def end(self, stats: Stats) -> bytes:
        return sse({"usage": relace_usage(stats), "stats": stats.to_dict()}) + sse("[DONE]")
