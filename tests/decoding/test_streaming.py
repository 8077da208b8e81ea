"""Streaming: text deltas add up to the final text and never split a character."""

from __future__ import annotations

import random

import pytest

from fastapply.decoding.prompts import KORTIX, MORPH, StreamExtractor

transformers = pytest.importorskip("transformers")

from fastapply.decoding.speculate import TextStream  # noqa: E402
from fastapply.model.tiny import ensure_tiny_model  # noqa: E402

TEXT = "naïve = '日本語のテキスト' 🚀🚀 # ünïcödé\r\n\tcafé ∑ x² → done\n"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ensure_tiny_model())


def test_multibyte_characters_span_several_tokens(tokenizer):
    # Otherwise the next test would prove nothing.
    ids = tokenizer.encode("🚀", add_special_tokens=False)
    assert len(ids) > 1


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_text_stream_never_splits_a_character(tokenizer, chunk):
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    stream = TextStream(tokenizer)
    deltas = [stream.push(ids[i:i + chunk]) for i in range(0, len(ids), chunk)]
    deltas.append(stream.flush())
    assert "".join(deltas) == TEXT
    assert all("\ufffd" not in d for d in deltas)


def test_text_stream_skips_stop_tokens(tokenizer):
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    stream = TextStream(tokenizer, skip_ids={eos})
    ids = tokenizer.encode("x = 1\n", add_special_tokens=False)
    text = stream.push(ids) + stream.push([eos]) + stream.flush()
    assert text == "x = 1\n"


@pytest.mark.parametrize("fmt, raw, expected", [
    (KORTIX, "<updated-code>\nx = 1\n</updated-code>", "x = 1\n"),
    (KORTIX, "<updated-code>x = 1\n</updated-code>trailing", "x = 1\n"),
    (KORTIX, "  <updated-code>a</upd", "a</upd"),          # truncated: keep what came
    (KORTIX, "no tags at all\n", "no tags at all\n"),
    (MORPH, "```python\nx = 1\n```\n", "x = 1\n"),
    (MORPH, "x = 1\n", "x = 1\n"),
    (MORPH, "```\n```md\ninner\n```\n", "```md\ninner\n"),
])
def test_extract(fmt, raw, expected):
    assert fmt.extract(raw) == expected


@pytest.mark.parametrize("fmt", [KORTIX, MORPH])
@pytest.mark.parametrize("body", ["x = 1\n", "a </b> <updated-c ```\n", "🚀\n```js\n", ""])
def test_stream_extractor_deltas_add_up(fmt, body):
    for raw in (fmt.expected_output(body), "```py\n" + body + "\n```", body):
        rng = random.Random(len(raw))
        for _ in range(20):
            cuts = sorted(rng.sample(range(len(raw) + 1), min(4, len(raw) + 1)))
            ex = StreamExtractor(fmt)
            out = "".join(ex.feed(raw[:c]) for c in cuts) + ex.finish(raw)
            assert out == fmt.extract(raw), (raw, cuts)
