"""Morph's large-file anchor protocol, read back into the real file.

Morph's SDK (``@morphllm/morphsdk``, ``applyEdit``; read in its 0.2.196 release) sends a
file of 128 KiB or more (``anchorCompactionThreshold``) compacted: the ``<code>`` block is

    ⟪MORPH_DEFINITIONS_BEGIN_{ns}⟫
    ⟪M{ns}:0:line⟫="a source line of 24 characters or more, as a JSON string"
    ...
    ⟪MORPH_DEFINITIONS_END_{ns}⟫
    ⟪MORPH_CODE_BEGIN_{ns}⟫
    the skeleton: the file with each such line (an HTML tag or text run, in an HTML page)
    replaced by its placeholder ⟪M{ns}:N:kind⟫

and the instruction ends with a "LARGE-FILE ANCHOR PROTOCOL:" section asking the model to
answer the skeleton. The SDK expands the placeholders of the answer it gets and passes a
file without any through unchanged, so the front expands the skeleton to the real file,
merges the snippet into that, and answers the whole merged file. It never merges into the
skeleton: a table or skeleton it cannot read exactly is a 400 naming the protocol.

>>> code = ('⟪MORPH_DEFINITIONS_BEGIN_0⟫\\n⟪M0:0:line⟫="def a_long_function_name(x):"\\n'
...         '⟪MORPH_DEFINITIONS_END_0⟫\\n⟪MORPH_CODE_BEGIN_0⟫\\n⟪M0:0:line⟫\\n    return x\\n')
>>> expand(code).file
'def a_long_function_name(x):\\n    return x\\n'
>>> expand("def f():\\n    pass\\n") is None
True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: The protocol's name, as errors say it.
PROTOCOL = "Morph's large-file anchor protocol"
_BEGIN = re.compile(r"\A⟪MORPH_DEFINITIONS_BEGIN_(\d+)⟫\n")
#: What the SDK appends to the instruction (the rest is the protocol's rules).
INSTRUCTION_SUFFIX = "\n\nLARGE-FILE ANCHOR PROTOCOL:"


class AnchorError(ValueError):
    """A compacted ``<code>`` block that cannot be read exactly (the message says why)."""


@dataclass(frozen=True)
class Expanded:
    """The real file of a compacted block, and the strings its answer must not hold."""

    file: str
    namespace: int

    @property
    def code_begin(self) -> str:
        return f"⟪MORPH_CODE_BEGIN_{self.namespace}⟫"

    @property
    def marker_prefix(self) -> str:
        return f"⟪M{self.namespace}:"


def mentions(text: str) -> bool:
    """Whether ``text`` holds any of the protocol's delimiters (then it must be read)."""
    return "⟪MORPH_DEFINITIONS_BEGIN_" in text or "⟪MORPH_CODE_BEGIN_" in text


def expand(code: str) -> Expanded | None:
    """The real file of a compacted ``<code>`` block; None where ``code`` does not start
    the protocol. Raises AnchorError where it starts it but is not read exactly."""
    begin = _BEGIN.match(code)
    if begin is None:
        if mentions(code):
            raise AnchorError(f"the <code> block holds {PROTOCOL}'s delimiters but does not "
                              f"start with its definitions table")
        return None
    ns = begin.group(1)
    end = f"\n⟪MORPH_DEFINITIONS_END_{ns}⟫\n⟪MORPH_CODE_BEGIN_{ns}⟫\n"
    end_at = code.find(end, begin.end() - 1)
    if end_at < 0:
        raise AnchorError(f"{PROTOCOL}: the definitions table is not closed by "
                          f"⟪MORPH_DEFINITIONS_END_{ns}⟫ and ⟪MORPH_CODE_BEGIN_{ns}⟫")
    table = code[begin.end():end_at]
    skeleton = code[end_at + len(end):]
    prefix = f"⟪M{ns}:"
    markers: dict[str, str] = {}  # placeholder -> its text, in the table's order
    # The SDK writes one definition a line (JSON escapes line breaks); split on "\n" only,
    # as a JSON string may hold U+2028 raw.
    for n, line in enumerate(table.split("\n") if table else [], start=1):
        head, sep, value = line.partition("⟫=")
        match = re.fullmatch(rf"⟪M{ns}:(\d+):([^⟫]+)", head)
        if not sep or match is None or int(match.group(1)) != len(markers):
            raise AnchorError(f"{PROTOCOL}: definition {n} is not "
                              f"⟪M{ns}:{len(markers)}:KIND⟫=\"JSON string\"")
        try:
            text = json.loads(value)
        except ValueError:
            text = None
        if not isinstance(text, str):
            raise AnchorError(f"{PROTOCOL}: definition {n} does not hold a JSON string")
        markers[head + "⟫"] = text
    pattern = re.compile(rf"⟪M{ns}:\d+:[^⟫\n]+⟫")
    unknown: list[str] = []

    def fill(m: re.Match[str]) -> str:
        value = markers.get(m.group(0))
        if value is None:
            unknown.append(m.group(0))
            return m.group(0)
        return value

    file = pattern.sub(fill, skeleton)
    if unknown:
        raise AnchorError(f"{PROTOCOL}: the skeleton holds {unknown[0]}, which the "
                          f"definitions table does not define")
    if prefix in file:
        raise AnchorError(f"{PROTOCOL}: the skeleton holds a placeholder ({prefix}...) that "
                          f"is not well formed")
    return Expanded(file, int(ns))
