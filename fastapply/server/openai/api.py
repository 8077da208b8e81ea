"""The OpenAI, Morph and Relace request and response shapes, as pure functions.

``fastapply.server.openai.server`` is the thin HTTP layer around these; everything here works
on plain dicts and strings, so it is tested without a server.

Three ways to ask for a merge, all answered from the same gRPC call:

* **Morph / Relace chat** (``POST /v1/chat/completions``): the last user message holds
  ``<instruction>`` (or ``<instructions>``, optional), ``<code>`` and ``<update>``;
* **OpenAI Predicted Outputs** (same endpoint): ``prediction: {"type": "content",
  "content": ORIGINAL}`` and the edit snippet as the last user message (an ``<update>``
  tag or a message that is one fenced code block is unwrapped);
* **Relace REST** (``POST /v1/code/apply``): ``initialCode`` / ``editSnippet`` /
  ``instruction`` / ``stream`` (snake_case accepted too).

>>> req = parse_chat({"model": "morph-v3-fast", "messages": [{"role": "user", "content":
...     "<instruction>rename</instruction>\\n<code>x = 1\\n</code>\\n<update>y = 1\\n</update>"}]})
>>> (req.initial_code, req.edit_snippet, req.instruction, req.stream)
('x = 1\\n', 'y = 1\\n', 'rename', False)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fastapply.metrics import Stats
from fastapply.server.http.checks import lone_surrogate

#: Model names /v1/models lists; any other name is accepted as well.
MODEL_IDS = ("fast_apply", "auto", "morph-v3-fast", "morph-v3-large", "relace-apply-3")
#: Largest max_tokens accepted (the Triton tensor is INT32).
MAX_TOKENS_LIMIT = 2**31 - 1


class ApiError(Exception):
    """An error answered in OpenAI's shape: ``{"error": {message, type, param, code}}``."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @property
    def type(self) -> str:
        return "invalid_request_error" if self.status < 500 else "server_error"

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


@dataclass(frozen=True)
class MergeRequest:
    """One merge, whichever shape it came in."""

    initial_code: str
    edit_snippet: str
    instruction: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    #: The model name the client asked for (echoed back).
    model: str = "fast_apply"
    #: stream_options.include_usage: a last chunk with the usage (OpenAI streaming).
    include_usage: bool = False


# -- request parsing ------------------------------------------------------------------


def parse_json(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, else a 400 that says what is wrong.

    >>> parse_json(b'{"a": 1}')
    {'a': 1}
    >>> parse_json(b'[1]')
    Traceback (most recent call last):
    ...
    fastapply.server.openai.api.ApiError: the request body must be a JSON object, not a list
    """
    if not body.strip():
        raise ApiError(400, "the request body is empty; send a JSON object",
                       code="invalid_json")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}",
                       code="invalid_json") from None
    except RecursionError:
        raise ApiError(400, "the request body nests JSON too deeply; send a JSON object "
                            "of the documented fields", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, not a "
                            f"{type(data).__name__}", code="invalid_json")
    where = lone_surrogate(data, body)  # no text holding one can be UTF-8 encoded
    if where is not None:
        raise ApiError(400, f"the request body holds a lone UTF-16 surrogate {where}, "
                            f"which is no character; escape a character outside the BMP "
                            f"as a pair (\\ud83d\\ude00) or send it as UTF-8",
                       code="invalid_json")
    return data


def _typed(body: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ApiError(400, f"{name} must be {what}, not {json.dumps(value)[:40]}",
                       param=name, code="invalid_type")
    return value


def _field(body: dict[str, Any], names: tuple[str, ...], what: str) -> str | None:
    """The one string among ``names`` (spellings of one field) that the body holds."""
    given = {n: _typed(body, n, str, what) for n in names if body.get(n) is not None}
    if len(set(given.values())) > 1:
        raise ApiError(400, f"{' and '.join(given)} are both set and differ; send one",
                       param=next(iter(given)), code="conflicting_fields")
    return next(iter(given.values()), None)


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = None
    for name in ("max_completion_tokens", "max_tokens"):
        value = _typed(body, name, int, "a positive integer")
        if value is not None:
            if not 0 < value <= MAX_TOKENS_LIMIT:
                raise ApiError(400, f"{name} is {value}; send a positive integer up to "
                                    f"{MAX_TOKENS_LIMIT}, or leave it out", param=name,
                               code="invalid_value")
            break
    return value


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or a list of text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or \
                    not isinstance(part.get("text"), str):
                raise ApiError(400, f"{where}: only text parts are understood "
                                    f"({{\"type\": \"text\", \"text\": ...}})",
                               param=where, code="invalid_type")
            texts.append(part["text"])
        return "".join(texts)
    raise ApiError(400, f"{where} must be a string or a list of text parts", param=where,
                   code="invalid_type")


def _instruction(text: str) -> tuple[int, str, int] | None:
    """(start, text, end) of the first ``<instruction>...</instruction>`` (or
    ``<instructions>``) element, as ``re.search(r"<(instructions?)>(.*?)</\1>")`` finds
    it, in linear time (that pattern retries every opening tag to the end of the text:
    16,000 unclosed tags took 12.6 s). Only the first opening tag of each name matters:
    a closing tag after a later one is after the first one too.

    >>> _instruction("<instructions>a<instruction>b</instruction></instructions>")
    (0, 'a<instruction>b</instruction>', 58)
    >>> _instruction("<instruction>" * 3) is None
    True
    """
    best = None
    for name in ("instruction", "instructions"):
        start = text.find(f"<{name}>")
        end = text.find(f"</{name}>", start + len(name) + 2) if start >= 0 else -1
        if end >= 0 and (best is None or start < best[0]):
            best = (start, text[start + len(name) + 2:end], end + len(name) + 3)
    return best


_SEPARATOR = re.compile(r"</code>\s*<update>")
_FENCE = re.compile(r"\A\s*```[^\n`]*\n(.*\n)```\s*\Z", re.DOTALL)


def split_tags(text: str) -> tuple[str | None, str | None, str | None]:
    """(instruction, code, update) of a Morph/Relace message; None where a tag is absent.

    Tags are read in their documented order; the file may itself contain tag-like text,
    so the code ends at the one ``</code>`` followed by ``<update>``, and a message holding
    that pair twice is refused rather than guessed.

    >>> split_tags("<code>a <code>b</code>\\n</code>\\n<update>c</update>")
    (None, 'a <code>b</code>\\n', 'c')
    >>> split_tags("<update>only</update>")
    (None, None, 'only')
    """
    instruction = None
    found = _instruction(text)
    code_at = text.find("<code>")
    if found is not None and (code_at < 0 or found[0] < code_at):
        instruction = found[1].strip() or None
        text = text[found[2]:]
    seps = list(_SEPARATOR.finditer(text))
    if len(seps) > 1:
        raise ApiError(400, "the message holds '</code>' followed by '<update>' more than "
                            "once, so where the file ends is ambiguous; send the file as "
                            "prediction.content or use POST /v1/code/apply",
                       param="messages", code="ambiguous_tags")
    code = update = None
    if seps:
        start = text.find("<code>")
        end = text.rfind("</update>")
        if 0 <= start < seps[0].start() and end >= seps[0].end():
            code = text[start + len("<code>"):seps[0].start()]
            update = text[seps[0].end():end]
    elif "<update>" in text:
        start, end = text.find("<update>"), text.rfind("</update>")
        if end > start:
            update = text[start + len("<update>"):end]
    return instruction, code, update


def _last_user_message(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of {role, content} objects",
                       param="messages", code="invalid_type")
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, dict):
            raise ApiError(400, f"messages[{i}] must be an object with role and content",
                           param=f"messages[{i}]", code="invalid_type")
        if message.get("role") == "user":
            return _text(message.get("content"), f"messages[{i}].content")
    raise ApiError(400, "messages holds no user message; put the edit in one",
                   param="messages", code="missing_user_message")


def _prediction(body: dict[str, Any]) -> str | None:
    prediction = body.get("prediction")
    if prediction is None:
        return None
    if not isinstance(prediction, dict) or prediction.get("type") != "content":
        raise ApiError(400, 'prediction must be {"type": "content", "content": ORIGINAL_FILE}',
                       param="prediction", code="invalid_type")
    return _text(prediction.get("content"), "prediction.content")


def parse_chat(body: dict[str, Any]) -> MergeRequest:
    """A chat-completions body (Morph/Relace tags or Predicted Outputs) -> MergeRequest."""
    model = _typed(body, "model", str, "a string") or "fast_apply"
    stream = bool(_typed(body, "stream", bool, "true or false"))
    n = _typed(body, "n", int, "an integer")
    if n not in (None, 1):
        raise ApiError(400, f"n is {n}; a merge has one answer, send n=1 or leave it out",
                       param="n", code="invalid_value")
    options = _typed(body, "stream_options", dict, "an object") or {}
    include_usage = bool(_typed(options, "include_usage", bool, "true or false"))
    max_tokens = _max_tokens(body)
    text = _last_user_message(body.get("messages"))
    instruction, code, update = split_tags(text)
    prediction = _prediction(body)
    if code is not None and prediction is not None and code != prediction:
        raise ApiError(400, "the message's <code> and prediction.content differ; send the "
                            "original file once", param="prediction", code="conflicting_fields")
    original = code if code is not None else prediction
    if original is None and "<code>" in text:
        if update is None:
            raise ApiError(400, "the last user message has <code> but no <update>...</update>"
                                "; put the edit snippet in it", param="messages",
                           code="missing_update")
        raise ApiError(400, "in the last user message '</code>' is not directly followed by "
                            "'<update>'; write <code>FILE</code> then <update>EDIT</update>",
                       param="messages", code="misplaced_tags")
    if original is None:
        raise ApiError(400, "no original file: put it in <code>...</code> before <update>"
                            "...</update> in the last user message (Morph/Relace), or send "
                            "it as prediction.content (OpenAI Predicted Outputs)",
                       param="messages", code="missing_code")
    if update is None:
        fenced = _FENCE.match(text)
        update = fenced.group(1) if fenced and "\n```" not in fenced.group(1) else text
    return MergeRequest(original, update, instruction, stream, max_tokens, model,
                        include_usage)


def parse_relace(body: dict[str, Any]) -> MergeRequest:
    """A Relace ``/v1/code/apply`` body -> MergeRequest.

    >>> parse_relace({"initial_code": "a", "editSnippet": "b", "stream": True}).stream
    True
    """
    original = _field(body, ("initialCode", "initial_code"), "a string")
    snippet = _field(body, ("editSnippet", "edit_snippet"), "a string")
    instruction = _field(body, ("instruction", "instructions"), "a string")
    for name, value, field in (("initialCode", original, "the original file"),
                               ("editSnippet", snippet, "the edit to merge")):
        if value is None:
            raise ApiError(400, f"{name} is missing; send {field} as a string "
                                f"({name} or its snake_case spelling)", param=name,
                           code="missing_field")
    assert original is not None and snippet is not None
    model = _typed(body, "model", str, "a string") or "relace-apply-3"
    return MergeRequest(original, snippet, instruction or None,
                        bool(_typed(body, "stream", bool, "true or false")),
                        _max_tokens(body), model)


# -- responses --------------------------------------------------------------------------


def check_complete(stats: Stats | None) -> Stats:
    """The request's stats if its file is complete; a 400 if the token budget cut it off.

    A merged file cut off by the budget is never returned as success (``finish_reason``
    ``length`` in OpenAI's API would hand the client a fragment).
    """
    if stats is None:
        raise ApiError(502, "the server ended the request without its statistics, so "
                            "whether the file is complete is unknown", code="incomplete")
    if stats.finish_reason == "length":
        raise ApiError(400, f"the merged file did not fit in the token budget: it was cut "
                            f"off after {stats.completion_tokens} tokens; raise max_tokens "
                            f"(or leave it out) or send a smaller file",
                       param="max_tokens", code="output_truncated")
    return stats


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


# -- upstream errors ----------------------------------------------------------------------

#: Prefixes of errors the server reports for its own faults (model.py's wording, Triton's).
_SERVER_FAULTS = ("internal error", "request for unknown model", "model is not ready")


def upstream_error(message: str, reported: bool) -> ApiError:
    """Map a failed gRPC request to an HTTP error.

    ``reported``: the server answered the request with this error (Triton's INVALID_ARG
    for bad input, whose message says what to fix: 400), as opposed to a transport
    failure (server unreachable or stream broken: 502; no answer in time: 504).

    >>> upstream_error("edit_snippet is empty; send the edit", True).status
    400
    >>> upstream_error("internal error: RuntimeError: boom", True).status
    500
    >>> upstream_error("the server is shutting down and takes no new requests; ...", True).status
    503
    >>> upstream_error("no answer from 127.0.0.1:8001 within 300 s", False).status
    504
    """
    if reported:
        lowered = message.lower()
        if lowered.startswith("request cancelled"):
            return ApiError(499, message, code="cancelled")
        if lowered.startswith("the server is shutting down"):  # model.py's UNAVAILABLE
            return ApiError(503, message, code="server_shutting_down")
        if any(lowered.startswith(p) for p in _SERVER_FAULTS):
            return ApiError(500, message, code="server_error")
        return ApiError(400, message, code="invalid_request")
    if message.startswith("no answer from"):
        return ApiError(504, message, code="upstream_timeout")
    return ApiError(502, message, code="upstream_unavailable")
