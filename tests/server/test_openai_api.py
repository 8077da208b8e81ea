"""The OpenAI / Morph / Relace request parsing and response shapes (no server).

Responses are checked against the ``openai`` package's own models, so a shape that an
SDK user could not read fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from apply_clients import (
    ANCHOR_COMPACTION_THRESHOLD,
    VARIANTS,
    anchor_plan,
    chat_template,
    escape_xml,
    extract_updated_code,
    kortix_messages,
    morph_sdk_message,
)

from fastapply.metrics import Stats
from fastapply.server.openai.api import parse_chat, parse_completion, parse_json, parse_relace
from fastapply.server.openai.errors import ApiError, check_complete, upstream_error
from fastapply.server.openai.responses import (
    chat_chunk,
    chat_completion,
    text_chunk,
    text_completion,
)
from fastapply.server.openai.tags import split_tags

HTML = '<p>Use <code>x</code></p>\n<code>y</code>\n'


def user(content: Any, **body: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": content}], **body}


def morph(code: str, update: str, instruction: str | None = None, tag: str = "instruction"
          ) -> str:
    head = f"<{tag}>{instruction}</{tag}>\n" if instruction is not None else ""
    return f"{head}<code>{code}</code>\n<update>{update}</update>"


def refused(body: dict[str, Any], parse: Any = parse_chat) -> ApiError:
    with pytest.raises(ApiError) as info:
        parse(body)
    assert info.value.status == 400
    return info.value


# -- chat: Morph / Relace tags ------------------------------------------------------------


@pytest.mark.parametrize("tag", ["instruction", "instructions"])
def test_morph_tags_with_either_instruction_tag(tag: str) -> None:
    req = parse_chat(user(morph("a = 1\n", "a = 2\n", "set a to 2", tag)))
    assert (req.initial_code, req.edit_snippet, req.instruction) == ("a = 1\n", "a = 2\n",
                                                                      "set a to 2")


def test_instruction_is_optional_and_file_text_is_kept_exactly() -> None:
    req = parse_chat(user(morph("\n  a = 1\n\n", "\n  a = 2\n")))
    assert req.instruction is None
    assert (req.initial_code, req.edit_snippet) == ("\n  a = 1\n\n", "\n  a = 2\n")


def test_files_holding_tag_like_text_survive() -> None:
    update = "<code>z</code> or <update>not a tag</update>\n"
    req = parse_chat(user(morph(HTML, update)))
    assert (req.initial_code, req.edit_snippet) == (HTML, update)


def test_the_last_user_message_counts_and_text_parts_are_joined() -> None:
    body = {"messages": [
        {"role": "system", "content": "You merge code."},
        {"role": "user", "content": morph("old\n", "older\n")},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "<code>a\n</code>\n"},
                                     {"type": "text", "text": "<update>b\n</update>"}]}]}
    req = parse_chat(body)
    assert (req.initial_code, req.edit_snippet, req.model) == ("a\n", "b\n", "fast_apply")


def test_an_ambiguous_code_update_boundary_is_refused() -> None:
    text = "<code>a</code>\n<update>b</code>\n<update>c</update>"
    assert refused(user(text)).code == "ambiguous_tags"


@pytest.mark.parametrize(("content", "code"), [
    ("<code>a = 1\n</code>", "missing_update"),
    ("<code>a = 1\n</code>\n\nthen\n<update>b</update>", "misplaced_tags"),
    ("<update>a = 2\n</update>", "missing_code"),
    ("just words", "missing_code"),
])
def test_missing_parts_are_named(content: str, code: str) -> None:
    err = refused(user(content))
    assert err.code == code and ("<update>" in err.message or "prediction" in err.message)


# -- chat: OpenAI Predicted Outputs ---------------------------------------------------------


def test_prediction_is_the_original_and_the_message_the_snippet() -> None:
    req = parse_chat(user("a = 2\n", prediction={"type": "content", "content": "a = 1\n"}))
    assert (req.initial_code, req.edit_snippet) == ("a = 1\n", "a = 2\n")
    parts = {"type": "content", "content": [{"type": "text", "text": "a = 1\n"}]}
    assert parse_chat(user("a = 2\n", prediction=parts)).initial_code == "a = 1\n"


@pytest.mark.parametrize(("message", "snippet"), [
    ("```python\na = 2\n```", "a = 2\n"),                       # one fenced block: unwrapped
    ("<update>a = 2\n</update>", "a = 2\n"),                    # an <update> tag
    ("```\na\n```\ntext\n```\nb\n```", "```\na\n```\ntext\n```\nb\n```"),  # two: as sent
    ("Set a:\n```\na = 2\n```", "Set a:\n```\na = 2\n```"),   # text around: as sent
])
def test_prediction_style_snippets(message: str, snippet: str) -> None:
    req = parse_chat(user(message, prediction={"type": "content", "content": "a = 1\n"}))
    assert req.edit_snippet == snippet


def test_code_and_prediction_must_agree() -> None:
    same = parse_chat(user(morph("a\n", "b\n"), prediction={"type": "content",
                                                             "content": "a\n"}))
    assert same.initial_code == "a\n"
    err = refused(user(morph("a\n", "b\n"), prediction={"type": "content", "content": "z\n"}))
    assert err.code == "conflicting_fields"


@pytest.mark.parametrize(("extra", "param"), [
    ({"stream": "yes"}, "stream"),
    ({"max_tokens": "5"}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2**31}, "max_tokens"),
    ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"n": 2}, "n"),
    ({"model": 5}, "model"),
    ({"stream_options": {"include_usage": "yes"}}, "include_usage"),
    ({"prediction": {"type": "text", "content": "a"}}, "prediction"),
    ({"prediction": {"type": "content", "content": 5}}, "prediction.content"),
])
def test_wrong_types_and_values_are_400_naming_the_field(extra: dict[str, Any], param: str
                                                          ) -> None:
    err = refused(user(morph("a\n", "b\n"), **extra))
    assert err.param == param and param.split(".")[-1] in err.message


@pytest.mark.parametrize("messages", [None, [], "hi", [5], [{"role": "system",
                                                               "content": "x"}],
                                      [{"role": "user", "content": 5}],
                                      [{"role": "user", "content": [{"type": "image_url"}]}]])
def test_malformed_messages_are_400(messages: Any) -> None:
    assert "messages" in refused({"messages": messages}).param  # type: ignore[operator]


def test_options_are_read() -> None:
    req = parse_chat(user(morph("a\n", "b\n"), stream=True, max_completion_tokens=7,
                          stream_options={"include_usage": True}, model="morph-v3-large"))
    assert (req.stream, req.max_tokens, req.include_usage, req.model) == (
        True, 7, True, "morph-v3-large")


@pytest.mark.parametrize(("body", "message"), [
    (b"", "empty"), (b"  ", "empty"), (b"{", "not valid JSON"), (b"\xff", "not valid JSON"),
    (b"[1, 2]", "JSON object"), (b'"x"', "JSON object"),
])
def test_bodies_that_are_not_a_json_object(body: bytes, message: str) -> None:
    with pytest.raises(ApiError, match=message) as info:
        parse_json(body)
    assert info.value.status == 400


# -- Relace /v1/code/apply ------------------------------------------------------------------


@pytest.mark.parametrize("names", [("initialCode", "editSnippet", "instruction"),
                                   ("initial_code", "edit_snippet", "instructions")])
def test_relace_fields_in_both_spellings(names: tuple[str, str, str]) -> None:
    req = parse_relace(dict(zip(names, ("a\n", "b\n", "why"), strict=True)))
    assert (req.initial_code, req.edit_snippet, req.instruction, req.stream) == (
        "a\n", "b\n", "why", False)


def test_relace_refusals() -> None:
    assert refused({"initialCode": "a"}, parse_relace).param == "editSnippet"
    assert refused({"editSnippet": "a"}, parse_relace).param == "initialCode"
    assert refused({"initialCode": 1, "editSnippet": "a"}, parse_relace).param == "initialCode"
    both = refused({"initialCode": "a", "initial_code": "b", "editSnippet": "c"}, parse_relace)
    assert both.code == "conflicting_fields"
    assert refused({"initialCode": "a", "editSnippet": "b", "stream": 1},
                   parse_relace).param == "stream"


# -- responses ------------------------------------------------------------------------------


STATS = Stats(prompt_tokens=30, completion_tokens=12, accepted_draft_tokens=9,
              rejected_draft_tokens=2, forward_passes=3, finish_reason="stop")


def test_chat_completion_reads_back_through_the_openai_sdk() -> None:
    from openai.types.chat import ChatCompletion

    data = chat_completion("chatcmpl-1", 1700000000, "morph-v3-fast", "x = 1\n", STATS)
    completion = ChatCompletion.model_validate(data)
    assert completion.choices[0].message.content == "x = 1\n"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 42
    details = completion.usage.completion_tokens_details
    assert details is not None
    assert (details.accepted_prediction_tokens, details.rejected_prediction_tokens) == (9, 2)
    assert data["stats"]["forward_passes"] == 3  # an object, not a JSON string


def test_chunks_read_back_through_the_openai_sdk() -> None:
    from openai.types.chat import ChatCompletionChunk

    delta = ChatCompletionChunk.model_validate(chat_chunk("c", 1, "m", {"content": "x"}))
    assert delta.choices[0].delta.content == "x"
    last = ChatCompletionChunk.model_validate(chat_chunk("c", 1, "m", {}, "stop"))
    assert last.choices[0].finish_reason == "stop"
    usage = ChatCompletionChunk.model_validate(chat_chunk("c", 1, "m", None, usage={
        "prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}))
    assert usage.choices == [] and usage.usage is not None


def test_a_file_cut_by_the_token_budget_is_an_error() -> None:
    assert check_complete(STATS) is STATS
    assert check_complete(Stats(finish_reason="merged")).finish_reason == "merged"
    cut = Stats(completion_tokens=5, finish_reason="length")
    with pytest.raises(ApiError, match="cut off after 5 tokens") as info:
        check_complete(cut)
    assert (info.value.status, info.value.code) == (400, "output_truncated")
    with pytest.raises(ApiError) as missing:
        check_complete(None)
    assert missing.value.status == 502


@pytest.mark.parametrize(("message", "reported", "status"), [
    ("the snippet cannot be merged: SEARCH block 1 not found", True, 400),
    ("input is 300000 bytes, over the limit", True, 400),
    ("internal error: RuntimeError: boom", True, 500),
    ("Request for unknown model: 'fast_apply' is not found", True, 500),
    ("request cancelled by the client", True, 499),
    # model.py's UNAVAILABLE answers while the server stops: the client must go elsewhere,
    # not be told its request was wrong (they were 400s)
    ("the server is shutting down and takes no new requests; send the request again (to "
     "another replica)", True, 503),
    ("the server is shutting down: the drain grace period ran out before the request "
     "finished; send the request again (to another replica)", True, 503),
    ("cannot reach a fastapply server at 127.0.0.1:1: failed to connect", False, 502),
    ("stream to 127.0.0.1:1 failed: Socket closed", False, 502),
    ("no answer from 127.0.0.1:1 within 300 s", False, 504),
])
def test_upstream_errors_map_to_statuses(message: str, reported: bool, status: int) -> None:
    err = upstream_error(message, reported)
    assert err.status == status
    body = err.body()["error"]
    assert body["message"] == message
    assert body["type"] == ("invalid_request_error" if status < 500 else "server_error")
    assert set(body) == {"message", "type", "param", "code"}


def test_split_tags_without_tags() -> None:
    assert split_tags("plain") == (None, None, None)


def test_unclosed_instruction_tags_take_linear_work() -> None:
    # A regex retried every opening tag to the end of the message: 16,000 unclosed
    # "<instruction>" (208 KB) held the front's event loop for 12.6 s, 100,000 for hours.
    # A subprocess, so that a regression fails at the bound instead of hanging the run.
    import subprocess
    import sys

    code = ("from fastapply.server.openai.tags import split_tags\n"
            "print(split_tags('<instruction>' * 100_000 + '<code>a</code><update>b</update>'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "(None, 'a', 'b')"


def test_docstring_examples() -> None:
    import doctest

    import fastapply.server.openai.anchors
    import fastapply.server.openai.api
    import fastapply.server.openai.escaping

    for module in (fastapply.server.openai.api, fastapply.server.openai.anchors,
                   fastapply.server.openai.escaping):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# -- the Kortix FastApply prompt, as clients send it ------------------------------------------

CODE = 'if a < b and s == "x" & t:\n    print(\'<code>\')\n'
EDIT = 'if a < b and s == "y" & t:\n    print(\'<code>\')\n'


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("escape", [True, False])
def test_kortix_templates_read_the_framed_file_not_the_prose(variant: str, escape: bool
                                                             ) -> None:
    code, edit = ("a = 1\n", "a = 2\n") if not escape else (CODE, EDIT)
    req = parse_chat({"messages": kortix_messages(code, edit, variant, escape)})
    assert (req.initial_code, req.edit_snippet, req.wrap) == (code, edit, True)
    assert (req.escaping is not None) == escape
    answer = req.answer(edit)
    assert extract_updated_code(answer) == edit.strip()
    assert answer == "<updated-code>" + (escape_xml(edit) if escape else edit) + \
        "</updated-code>"


def test_the_answer_is_bare_unless_the_prompt_asks_for_tags() -> None:
    assert not parse_chat(user(morph("a\n", "b\n"))).wrap
    system = {"role": "system", "content": "Answer inside <updated-code> tags."}
    asked = parse_chat({"messages": [system, {"role": "user", "content": morph("a\n", "b\n")}]})
    assert asked.wrap and asked.answer("b\n") == "<updated-code>b\n</updated-code>"
    assert not parse_relace({"initialCode": "a", "editSnippet": "b"}).wrap


def test_escaped_text_is_merged_unescaped_and_answered_escaped() -> None:
    req = parse_chat({"messages": kortix_messages(CODE, EDIT)})
    assert req.escaping is not None and req.escaping.name == "xml"
    assert req.text('s == "y" & t') == "s == &quot;y&quot; &amp; t"
    # text that is not escaped the same way is merged as sent
    raw = parse_chat(user(morph("a &lt; b\n", "a < c\n")))
    assert (raw.initial_code, raw.escaping) == ("a &lt; b\n", None)


def test_a_file_holding_the_answer_tags_is_refused_unescaped_and_kept_escaped() -> None:
    code = "x = '</updated-code>'\n"
    err = refused({"messages": kortix_messages(code, "x = 1\n", escape=False)})
    assert err.code == "answer_tags_in_file" and "line 1" in err.message
    req = parse_chat({"messages": kortix_messages(code, "x = 1\n")})
    assert req.escaping is None and req.initial_code == escape_xml(code)  # merged as sent
    assert extract_updated_code(req.answer(escape_xml("x = 1\n"))) == "x = 1"


def test_prose_mentioning_tags_after_the_frame_is_not_the_file() -> None:
    text = ("Merge the <update> into the <code> below.\n<code>a\n</code>\n<update>b\n"
            "</update>\nAnswer in <updated-code> tags, not <code>.")
    req = parse_chat(user(text))
    assert (req.initial_code, req.edit_snippet, req.wrap) == ("a\n", "b\n", True)


def test_both_orders_at_once_are_ambiguous() -> None:
    text = "<code>a\n</code>\n<update>b\n</update>\n<code>c</code>"
    assert refused(user(text)).code == "ambiguous_tags"


def test_completions_read_the_chat_templated_prompt() -> None:
    prompt = chat_template(kortix_messages(CODE, EDIT))
    req = parse_completion({"model": "kortix", "prompt": prompt, "max_tokens": 900})
    assert (req.initial_code, req.edit_snippet, req.wrap, req.max_tokens) == (
        CODE, EDIT, True, 900)
    assert parse_completion({"prompt": [morph("a\n", "b\n")]}).wrap is False


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": 5}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": "no tags here"}, None),
    ({"prompt": "<code>a</code>"}, None),
    ({"prompt": morph("a\n", "b\n"), "echo": True}, "echo"),
    ({"prompt": morph("a\n", "b\n"), "suffix": "x"}, "suffix"),
    ({"prompt": morph("a\n", "b\n"), "n": 2}, "n"),
])
def test_completions_refusals_name_what_is_wrong(body: dict[str, Any], param: str | None
                                                 ) -> None:
    err = refused(body, parse_completion)
    assert param is None or err.param == param
    assert err.message


def test_completion_shapes_read_back_through_the_openai_sdk() -> None:
    from openai.types import Completion

    stats = Stats(prompt_tokens=3, completion_tokens=2, finish_reason="merged")
    done = Completion.model_validate(text_completion("cmpl-1", 0, "m", "<updated-code>x"
                                                     "</updated-code>", stats))
    assert done.choices[0].text.endswith("</updated-code>") and done.usage is not None
    chunk = Completion.model_validate(text_chunk("cmpl-1", 0, "m", "x", "stop"))
    assert chunk.choices[0].finish_reason == "stop"


# -- Morph's large-file anchor protocol -----------------------------------------------------

def big_file(lines: int = 3000) -> str:
    body = [f"def function_number_{i:05d}(value):\n    return value * {i} + 1\n\n"
            for i in range(lines)]
    return "".join(body) + "x = 1\n"


def test_an_anchor_compacted_file_is_expanded_to_the_real_file() -> None:
    original = big_file()
    assert len(original) >= ANCHOR_COMPACTION_THRESHOLD
    snippet = "# ... existing code ...\nx = 2\n"
    req = parse_chat(user(morph_sdk_message(original, snippet, "set x to 2")))
    assert "⟪" in morph_sdk_message(original, snippet, "set x to 2")
    assert (req.initial_code, req.edit_snippet, req.instruction) == (original, snippet,
                                                                     "set x to 2")
    assert not req.wrap and req.escaping is None


@pytest.mark.parametrize(("change", "why"), [
    (lambda c: c.replace("⟪M0:1:line⟫=", "⟪M0:2:line⟫=", 1), "definition 2"),
    (lambda c: c.replace("⟪MORPH_DEFINITIONS_END_0⟫", "", 1), "not closed"),
    (lambda c: c + "⟪M0:99999:line⟫\n", "does not define"),
    (lambda c: c.replace('⟫="', '⟫=', 1), "JSON string"),
    (lambda c: c.replace("⟪MORPH_DEFINITIONS_BEGIN_0⟫\n", "", 1), "definitions table"),
])
def test_a_compacted_file_read_wrong_is_refused_naming_the_protocol(change: Any, why: str
                                                                     ) -> None:
    code, suffix = anchor_plan(big_file(50), [])
    message = f"<instruction>x{suffix}</instruction>\n<code>{change(code)}</code>\n" \
              f"<update>x = 2\n</update>"
    err = refused(user(message))
    assert err.code == "anchor_protocol" and "anchor protocol" in err.message
    assert why in err.message


def test_a_snippet_with_protocol_delimiters_is_refused() -> None:
    code, _ = anchor_plan(big_file(50), [])
    err = refused(user(morph("a\n", code)))
    assert err.code == "anchor_protocol"


def test_hostile_kortix_escaped_and_anchor_messages_take_linear_work() -> None:
    # Each is a few MB under the body limit; each is read or refused in well under a
    # second here. A subprocess, so that a quadratic regression fails at the bound.
    import subprocess
    import sys

    code = ("from fastapply.server.openai.api import parse_chat\n"
            "from fastapply.server.openai.errors import ApiError\n"
            "cases = ['x <code>' * 400_000 + '</code>\\n<update>a</update>',\n"
            "         '</code><update>' * 200_000,\n"
            "         '<code>' + '&amp;' * 500_000 + '</code><update>&lt;</update>',\n"
            "         '<code>\\u27eaMORPH_DEFINITIONS_BEGIN_0\\u27eb\\n' + "
            "'\\u27eaM0:0:line\\u27eb=\"x\"\\n' * 100_000 + '</code><update>a</update>']\n"
            "for text in cases:\n"
            "    try:\n"
            "        parse_chat({'messages': [{'role': 'user', 'content': text}]})\n"
            "        print('read')\n"
            "    except ApiError as exc:\n"
            "        print(exc.code)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["read", "ambiguous_tags", "read", "anchor_protocol"]
