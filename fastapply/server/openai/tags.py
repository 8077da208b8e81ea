"""The tags of a Morph / Relace / Kortix message: ``<instruction>``, ``<code>`` and
``<update>``, found in linear time, with the prose around them (where a prompt says how it
wants its answer).

>>> split_tags("<code>x = 1\\n</code>\\n<update>y = 1\\n</update>")
(None, 'x = 1\\n', 'y = 1\\n')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapply.server.openai.errors import ApiError


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
