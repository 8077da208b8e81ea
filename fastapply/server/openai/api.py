"""The OpenAI, Morph and Relace request shapes, as pure functions: a request body in, a
:class:`MergeRequest` (or an :class:`~.errors.ApiError` saying what is wrong) out. The
answers are shaped by :mod:`.responses`, the message's tags read by :mod:`.tags`.

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

from fastapply.server.http.checks import lone_surrogate
from fastapply.server.openai import anchors
from fastapply.server.openai.errors import ApiError
from fastapply.server.openai.escaping import Escaper, detect, unescape
from fastapply.server.openai.tags import read_tags

#: Largest max_tokens accepted (the Triton tensor is INT32).
MAX_TOKENS_LIMIT = 2**31 - 1
#: The tags a Kortix FastApply prompt asks its answer to be wrapped in.
ANSWER_TAGS = ("<updated-code>", "</updated-code>")


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
    #: Answer inside <updated-code> tags (the request's prompt asks for them: Kortix).
    wrap: bool = False
    #: The XML escaping the file and snippet came in; the answer carries it too.
    escaping: Escaper | None = None

    def opening(self) -> str:
        """What the answer starts with, before the file."""
        return ANSWER_TAGS[0] if self.wrap else ""

    def closing(self) -> str:
        """What the answer ends with, after the file."""
        return ANSWER_TAGS[1] if self.wrap else ""

    def text(self, merged: str) -> str:
        """A piece of the merged file as the client reads it (escaped as it came)."""
        return self.escaping.escape(merged) if self.escaping else merged

    def answer(self, merged: str) -> str:
        """The whole answer for the merged file."""
        return self.opening() + self.text(merged) + self.closing()


# -- request parsing ------------------------------------------------------------------


def parse_json(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, else a 400 that says what is wrong.

    >>> parse_json(b'{"a": 1}')
    {'a': 1}
    >>> parse_json(b'[1]')
    Traceback (most recent call last):
    ...
    fastapply.server.openai.errors.ApiError: the request body must be a JSON object, not a list
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


_FENCE = re.compile(r"\A\s*```[^\n`]*\n(.*\n)```\s*\Z", re.DOTALL)


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


def _options(body: dict[str, Any]) -> tuple[str | None, bool, bool, int | None]:
    """(model, stream, include_usage, max_tokens) of a chat or text completion body."""
    model = _typed(body, "model", str, "a string")
    stream = bool(_typed(body, "stream", bool, "true or false"))
    n = _typed(body, "n", int, "an integer")
    if n not in (None, 1):
        raise ApiError(400, f"n is {n}; a merge has one answer, send n=1 or leave it out",
                       param="n", code="invalid_value")
    options = _typed(body, "stream_options", dict, "an object") or {}
    include_usage = bool(_typed(options, "include_usage", bool, "true or false"))
    return model, stream, include_usage, _max_tokens(body)


def _line_of(text: str, needle: str) -> int:
    return text.count("\n", 0, text.find(needle)) + 1


def prepare(original: str, update: str, instruction: str | None, wrap: bool, *,
            stream: bool = False, max_tokens: int | None = None, model: str = "fast_apply",
            include_usage: bool = False) -> MergeRequest:
    """The merge a request asks for, read back from the forms clients send: Morph's
    anchor-compacted large file expanded (:mod:`.anchors`), XML-escaped text unescaped
    (:mod:`.escaping`); and refused where the answer's own wrapping would cut it."""
    if anchors.mentions(update):
        raise ApiError(400, f"the snippet holds {anchors.PROTOCOL}'s delimiters; only the "
                            f"<code> block may be compacted", param="messages",
                       code="anchor_protocol")
    try:
        expanded = anchors.expand(original)
    except anchors.AnchorError as exc:
        raise ApiError(400, f"{exc}; nothing was merged. Send the file uncompacted "
                            f"(Morph SDK: anchorCompaction: false)", param="messages",
                       code="anchor_protocol") from None
    if expanded is not None:
        original = expanded.file
        if instruction is not None:
            instruction = instruction.split(anchors.INSTRUCTION_SUFFIX)[0].strip() or None
        for text, what in ((original, "file"), (update, "snippet")):
            for needle in (expanded.code_begin, expanded.marker_prefix):
                if needle in text:
                    raise ApiError(400, f"the expanded {what} holds {needle} (line "
                                        f"{_line_of(text, needle)}), which {anchors.PROTOCOL}"
                                        f" would read in the answer; send the file "
                                        f"uncompacted (Morph SDK: anchorCompaction: false)",
                                   param="messages", code="anchor_protocol")
    escaping = detect(original, update)
    if escaping is not None:
        plain = (unescape(original), unescape(update))
        if wrap and any(tag in t for t in plain for tag in ANSWER_TAGS):
            escaping = None  # unescaped, the file would close the model's answer: as sent
        else:
            original, update = plain
    if wrap and escaping is None:
        for text, what in ((original, "file"), (update, "snippet")):
            for tag in ANSWER_TAGS:
                if tag in text:
                    raise ApiError(400, f"the {what} holds '{tag}' (line "
                                        f"{_line_of(text, tag)}), and the prompt asks for the "
                                        f"answer inside <updated-code> tags: a client would "
                                        f"read a cut file. XML-escape the file and the "
                                        f"snippet (&lt; &gt; &amp;) or send them with the "
                                        f"Morph tags, which answer the bare file",
                                   param="messages", code="answer_tags_in_file")
    return MergeRequest(original, update, instruction, stream, max_tokens, model,
                        include_usage, wrap, escaping)


def _asks_for_tags(*prose: str) -> bool:
    """Whether a prompt asks for its answer inside <updated-code> tags."""
    return any(tag in p for p in prose for tag in ANSWER_TAGS)


def _system_text(messages: list[Any]) -> list[str]:
    """The text of the system and developer messages (where a prompt may ask for its
    answer's wrapping); content that is not text says nothing of it and is skipped."""
    texts = []
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            try:
                texts.append(_text(m.get("content"), f"messages[{i}].content"))
            except ApiError:
                continue
    return texts


def parse_chat(body: dict[str, Any]) -> MergeRequest:
    """A chat-completions body (Morph/Relace/Kortix tags or Predicted Outputs) ->
    MergeRequest."""
    model, stream, include_usage, max_tokens = _options(body)
    text = _last_user_message(body.get("messages"))
    tags = read_tags(text)
    code, update = tags.code, tags.update
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
    prose = tags.prose
    if update is None:
        fenced = _FENCE.match(text)
        update = fenced.group(1) if fenced and "\n```" not in fenced.group(1) else text
        prose = ""
    wrap = _asks_for_tags(prose, *_system_text(body["messages"]))
    return prepare(original, update, tags.instruction, wrap, stream=stream,
                   max_tokens=max_tokens, model=model or "fast_apply",
                   include_usage=include_usage)


def parse_completion(body: dict[str, Any]) -> MergeRequest:
    """A ``/v1/completions`` body whose prompt is a whole apply prompt (the Kortix or Morph
    message, chat-templated or not, as vLLM and TGI users send it) -> MergeRequest. The
    answer is wrapped in <updated-code> tags where the prompt asks for them.

    >>> req = parse_completion({"prompt": "<|im_start|>user\\nAnswer in <updated-code> tags."
    ...     "\\n<code>a = 1\\n</code>\\n<update>a = 2\\n</update><|im_end|>\\n"})
    >>> (req.initial_code, req.edit_snippet, req.answer("a = 2\\n"))
    ('a = 1\\n', 'a = 2\\n', '<updated-code>a = 2\\n</updated-code>')
    """
    model, stream, include_usage, max_tokens = _options(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be one string: the whole apply prompt, with the "
                            "file in <code>...</code> next to the snippet in <update>..."
                            "</update>", param="prompt", code="invalid_type")
    if _typed(body, "echo", bool, "true or false"):
        raise ApiError(400, "echo is not supported: the answer is the merged file alone; "
                            "send echo: false or leave it out", param="echo",
                       code="invalid_value")
    if _typed(body, "suffix", str, "a string"):
        raise ApiError(400, "suffix is not supported: the answer is the whole merged file; "
                            "leave suffix out", param="suffix", code="invalid_value")
    tags = read_tags(prompt)
    if tags.code is None or tags.update is None:
        raise ApiError(400, "the prompt holds no file and snippet: put the file in <code>"
                            "...</code> next to the snippet in <update>...</update> (the "
                            "Kortix FastApply or Morph prompt)", param="prompt",
                       code="missing_code" if tags.code is None else "missing_update")
    return prepare(tags.code, tags.update, tags.instruction, _asks_for_tags(tags.prose),
                   stream=stream, max_tokens=max_tokens, model=model or "fast_apply",
                   include_usage=include_usage)


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
