"""Requests as published apply clients build them, for the tests of the OpenAI front.

* The Kortix FastApply prompt and the variants clients send (an MCP server's ``RULES:``
  heading, reordered rules, "Here's the complete updated code:", ``<update>`` before
  ``<code>``), with the client's XML escaping and its parsing of the answer
  (``<updated-code>`` found, checked for a second block, stripped, unescaped).
* Morph's SDK large-file anchor compaction (``@morphllm/morphsdk`` 0.2.196,
  ``createAnchorCompactionPlan`` for source files), written again here from its
  JavaScript: this is a copy of a client, for tests, not the server's code. Checked against
  the SDK itself once, on the file of ``tests/server/test_openai_server.py``'s large-file
  test (same request text, byte for byte).
"""

from __future__ import annotations

import json
import re

KORTIX_SYSTEM = ("You are a coding assistant that helps merge code updates, ensuring every "
                 "modification is fully integrated.")

#: Kortix FastApply's user prompt, as its model card gives it.
KORTIX = """Merge all changes from the <update> snippet into the <code> below.
- Preserve the code's structure, order, comments, and indentation exactly.
- Output only the updated code, enclosed within <updated-code> and </updated-code> tags.
- Do not include any additional text, explanations, placeholders, ellipses, or code fences.

<code>{original_code}</code>

<update>{update_snippet}</update>

Provide the complete updated code."""

_RULES = KORTIX.splitlines()[1:4]
#: The variants in use: name -> template.
VARIANTS = {
    "kortix": KORTIX,
    "rules_heading": """Merge all changes from the <update> snippet into the <code> below.

RULES:
- Preserve the code's structure, order, comments, and indentation exactly.
- Output only the updated code, enclosed within <updated-code> and </updated-code> tags.
- Do not include any additional text, explanations, placeholders, markdown, ellipses, or code fences.

<code>{original_code}</code>

<update>{update_snippet}</update>

Provide the complete updated code.""",  # noqa: E501
    # the rules in another order
    "reordered_rules": KORTIX.replace(_RULES[0] + "\n", "").replace(
        _RULES[2], _RULES[2] + "\n" + _RULES[0]),
    "heres_the_code": KORTIX.replace("Provide the complete updated code.",
                                     "Here's the complete updated code:"),
    "update_first": KORTIX.replace("<code>{original_code}</code>\n\n<update>{update_snippet}"
                                   "</update>", "<update>{update_snippet}</update>\n\n"
                                   "<code>{original_code}</code>"),
}


def escape_xml(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&apos;"))


def unescape_xml(text: str) -> str:
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
            .replace("&apos;", "'").replace("&amp;", "&"))


def kortix_messages(original: str, snippet: str, variant: str = "kortix",
                    escape: bool = True) -> list[dict[str, str]]:
    """The chat messages an MCP-style Kortix client sends."""
    fill = escape_xml if escape else (lambda t: t)
    user = VARIANTS[variant].format(original_code=fill(original), update_snippet=fill(snippet))
    return [{"role": "system", "content": KORTIX_SYSTEM}, {"role": "user", "content": user}]


def chat_template(messages: list[dict[str, str]]) -> str:
    """The ChatML prompt (Qwen's template, as the Kortix models use) that vLLM and TGI users
    send to /v1/completions."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def extract_updated_code(raw: str, unescape: bool = True) -> str:
    """The client's parsing of an answer: the one ``<updated-code>`` block, stripped and
    unescaped; ValueError as the client raises it."""
    start, end = raw.find("<updated-code>"), raw.find("</updated-code>")
    if start == -1 or end == -1:
        raise ValueError("Missing <updated-code> tags in response")
    second = raw.find("<updated-code>", start + 1)
    if second != -1 and second < end:
        raise ValueError("Multiple <updated-code> blocks detected")
    code = raw[start + len("<updated-code>"):end].strip()
    if not code:
        raise ValueError("Empty <updated-code> block")
    return unescape_xml(code) if unescape else code


# -- Morph SDK: anchor compaction ---------------------------------------------------------

MIN_ANCHOR_LINE_LENGTH = 24
ANCHOR_COMPACTION_THRESHOLD = 128 * 1024


def anchor_plan(original: str, collision: list[str]) -> tuple[str, str]:
    """(code block, instruction suffix) of the SDK's plan for a source file (not HTML)."""
    ns = next(n for n in range(10**6) if all(f"⟪M{n}:" not in v for v in [original, *collision]))
    prefix = f"⟪M{ns}:"
    ids: dict[str, int] = {}
    values: list[str] = []
    skeleton = []
    parts = re.split(r"(\r\n|\n|\r)", original)
    for i in range(0, len(parts), 2):
        line = parts[i]
        ending = parts[i + 1] if i + 1 < len(parts) else ""
        if len(line) >= MIN_ANCHOR_LINE_LENGTH:
            if line not in ids:
                ids[line] = len(values)
                values.append(line)
            skeleton.append(f"{prefix}{ids[line]}:line⟫")
        else:
            skeleton.append(line)
        skeleton.append(ending)
    table = "\n".join(f"{prefix}{n}:line⟫={json.dumps(v, ensure_ascii=False)}"
                      for n, v in enumerate(values))
    code_begin = f"⟪MORPH_CODE_BEGIN_{ns}⟫"
    code = "\n".join([f"⟪MORPH_DEFINITIONS_BEGIN_{ns}⟫", table,
                      f"⟪MORPH_DEFINITIONS_END_{ns}⟫", code_begin, "".join(skeleton)])
    suffix = f"""

LARGE-FILE ANCHOR PROTOCOL:
The <code> block starts with an exact anchor definition table, then {code_begin}, then the source skeleton.
Each {prefix}N:kind⟫ placeholder represents the exact source fragment in its matching JSON-string definition. The kind suffix describes its HTML tag, text, or source line.
Return only the updated source skeleton after {code_begin}; never return the definition table or protocol delimiters.
Copy a placeholder exactly when its source fragment is unchanged. You may repeat, reorder, or remove placeholders when the requested edit requires it.
To modify an anchored fragment, output the modified source instead of its placeholder.
Do not invent or alter placeholder IDs."""  # noqa: E501
    return code, suffix


def morph_sdk_message(original: str, snippet: str, instruction: str) -> str:
    """The user message of ``applyEdit`` (compacted where the file is 128 KiB or more)."""
    code, suffix = original, ""
    if len(original) >= ANCHOR_COMPACTION_THRESHOLD:
        code, suffix = anchor_plan(original, [snippet, instruction])
    return (f"<instruction>{instruction}{suffix}</instruction>\n<code>{code}</code>\n"
            f"<update>{snippet}</update>")


def morph_sdk_expand(content: str, original: str, snippet: str, instruction: str) -> str:
    """What the SDK makes of an answer: the skeleton after ⟪MORPH_CODE_BEGIN_n⟫ (or the whole
    answer) with each placeholder expanded; ValueError where one is left."""
    if len(original) < ANCHOR_COMPACTION_THRESHOLD:
        return content
    ns = next(n for n in range(10**6)
              if all(f"⟪M{n}:" not in v for v in [original, snippet, instruction]))
    begin = f"⟪MORPH_CODE_BEGIN_{ns}⟫"
    at = content.rfind(begin)
    if at >= 0:
        content = re.sub(r"\A\r?\n", "", content[at + len(begin):])
    values = {}
    code = anchor_plan(original, [snippet, instruction])[0]
    for line in code[:code.find(f"⟪MORPH_DEFINITIONS_END_{ns}⟫")].split("\n"):
        if line.startswith(f"⟪M{ns}:"):
            head, _, value = line.partition("⟫=")
            values[head + "⟫"] = json.loads(value)
    out = re.sub(rf"⟪M{ns}:(\d+):[^⟫]+⟫", lambda m: values.get(m.group(0), m.group(0)),
                 content)
    if f"⟪M{ns}:" in out:
        raise ValueError("anchor_integrity_failed")
    return out
