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
from fastapply.server.openai import anchors
from fastapply.server.openai.escaping import Escaper, detect, unescape

#: Model names /v1/models lists; any other name is accepted as well.
MODEL_IDS = ("fast_apply", "auto", "morph-v3-fast", "morph-v3-large", "relace-apply-3")
#: Largest max_tokens accepted (the Triton tensor is INT32).
MAX_TOKENS_LIMIT = 2**31 - 1
#: The tags a Kortix FastApply prompt asks its answer to be wrapped in.
ANSWER_TAGS = ("<updated-code>", "</updated-code>")


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


_AFTER_CODE = re.compile(r"</code>\s*<update>")
_AFTER_UPDATE = re.compile(r"</update>\s*<code>")
_FENCE = re.compile(r"\A\s*```[^\n`]*\n(.*\n)```\s*\Z", re.DOTALL)


@dataclass(frozen=True)
class Tags:
    """What a message's tags frame: the instruction, the file, the snippet (None where
    absent), and the prose: the message outside the file and the snippet, where a prompt
    says how it wants its answer."""

    instruction: str | None
    code: str | None
    update: str | None
    prose: str


def _opening(text: str, tag: str, before: int) -> int:
    """Where the ``tag`` that opens a frame ending at ``before`` starts: the first one that
    begins a line (after spaces or tabs), since prose that mentions a tag ("merge the
    <update> into the <code> below") has words before it; else the first one; -1 if none.
    Linear: each look back stops at the first character that is not a space or tab."""
    first = at = text.find(tag, 0, before)
    while at >= 0:
        back = at - 1
        while back >= 0 and text[back] in " \t":
            back -= 1
        if back < 0 or text[back] == "\n":
            return at
        at = text.find(tag, at + 1, before)
    return first


def _frame(text: str, sep: re.Match[str], first: str, last: str
           ) -> tuple[int, int, int] | None:
    """The ``<first>...</first><last>...</last>`` frame around ``sep`` (the one place the
    first tag's close meets the second's opening): (where its opening tag starts, where
    its closing tag ends, where that closing tag starts); None where either is missing."""
    start = _opening(text, f"<{first}>", sep.start())
    close = text.rfind(f"</{last}>")
    if start < 0 or close < sep.end():
        return None
    return start, close + len(last) + 3, close


def read_tags(text: str) -> Tags:
    """The file and snippet of a Morph/Relace or Kortix FastApply message.

    The file is what stands between the ``<code>`` and ``</code>`` that frame it next to an
    ``<update>`` block, in either order. The file and snippet may themselves hold tag-like
    text, so the code ends at the one ``</code>`` followed by ``<update>`` (or starts at the
    one ``<code>`` after ``</update>``); a message holding such a meeting twice, or both
    orders, is refused rather than guessed. Where a message mentions the tags in prose, the
    opening tag is the one that begins a line. An ``<instruction>`` before the tags is read.

    >>> split_tags("<code>a <code>b</code>\\n</code>\\n<update>c</update>")
    (None, 'a <code>b</code>\\n', 'c')
    >>> tags = read_tags("Merge the <update> into the <code> below.\\n<update>u</update>\\n"
    ...                  "<code>f\\n</code>\\nDone.")
    >>> (tags.code, tags.update, tags.prose)
    ('f\\n', 'u', 'Merge the <update> into the <code> below.\\n\\nDone.')
    """
    instruction = None
    prose = ""
    found = _instruction(text)
    tag_at = min((i for i in (text.find("<code>"), text.find("<update>")) if i >= 0),
                 default=-1)
    if found is not None and (tag_at < 0 or found[0] < tag_at):
        instruction = found[1].strip() or None
        prose, text = text[:found[2]], text[found[2]:]
    readings = []
    for pattern, first, last in ((_AFTER_CODE, "code", "update"),
                                 (_AFTER_UPDATE, "update", "code")):
        seps = list(pattern.finditer(text))
        if len(seps) > 1:
            raise ApiError(400, f"the message holds '</{first}>' followed by '<{last}>' more "
                                f"than once, so where the file ends is ambiguous; send the "
                                f"file as prediction.content or use POST /v1/code/apply",
                           param="messages", code="ambiguous_tags")
        frame = _frame(text, seps[0], first, last) if seps else None
        if frame is not None:
            start, end, close = frame
            inner = (text[start + len(first) + 2:seps[0].start()], text[seps[0].end():close])
            readings.append((inner if first == "code" else inner[::-1],
                             prose + text[:start] + text[end:]))
    if len(readings) > 1:
        raise ApiError(400, "the message holds both '</code>' followed by '<update>' and "
                            "'</update>' followed by '<code>', so which is the file is "
                            "ambiguous; send the file as prediction.content or use POST "
                            "/v1/code/apply", param="messages", code="ambiguous_tags")
    if readings:
        (code, snippet), outside = readings[0]
        return Tags(instruction, code, snippet, outside)
    start, end = text.find("<update>"), text.rfind("</update>")
    if 0 <= start < end:
        return Tags(instruction, None, text[start + len("<update>"):end],
                    prose + text[:start] + text[end + len("</update>"):])
    return Tags(instruction, None, None, prose + text)


def split_tags(text: str) -> tuple[str | None, str | None, str | None]:
    """(instruction, code, update) of :func:`read_tags`.

    >>> split_tags("<update>only</update>")
    (None, None, 'only')
    """
    tags = read_tags(text)
    return tags.instruction, tags.code, tags.update


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
