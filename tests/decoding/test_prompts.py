"""Prompt formats through a real tokenizer's chat template, and stop tokens."""

from __future__ import annotations

import pytest

from fastapply.decoding.prompts import KORTIX, MORPH, get_format

transformers = pytest.importorskip("transformers")

from fastapply.decoding.prompts import build_prompt_ids, render_prompt, stop_token_ids  # noqa: E402
from fastapply.model.tiny import ensure_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ensure_tiny_model())


def test_kortix_prompt_uses_chat_template(tokenizer):
    text = render_prompt(tokenizer, KORTIX, "a = 1\n", "# ... existing code ...\nb = 2\n")
    assert text.startswith("<|im_start|>system\nYou are a coding assistant")
    assert "<code>a = 1\n</code>" in text
    assert "<update># ... existing code ...\nb = 2\n</update>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_morph_prompt_carries_instruction(tokenizer):
    text = render_prompt(tokenizer, MORPH, "a\n", "b\n", instruction="Rename a to b")
    assert ("<instruction>Rename a to b</instruction>\n<code>a\n</code>\n"
            "<update>b\n</update>") in text
    assert "system" not in text
    default = render_prompt(tokenizer, MORPH, "a\n", "b\n")
    assert "<instruction>Apply the update to the code.</instruction>" in default


def test_prompt_ids_round_trip(tokenizer):
    ids = build_prompt_ids(tokenizer, KORTIX, "x = 'ü'\n", "y\n")
    assert tokenizer.decode(ids) == render_prompt(tokenizer, KORTIX, "x = 'ü'\n", "y\n")
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3


def test_stop_tokens(tokenizer):
    ids = stop_token_ids(tokenizer, eos_token_id=[7])
    assert {7, tokenizer.convert_tokens_to_ids("<|im_end|>"),
            tokenizer.convert_tokens_to_ids("<|endoftext|>")} <= ids
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") not in ids


def test_unknown_format_names_the_known_ones():
    with pytest.raises(ValueError, match="kortix, morph"):
        get_format("relace-v9")


def test_tiny_model_is_a_normal_hf_directory():
    from transformers import AutoConfig

    path = ensure_tiny_model()
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.model_type == "qwen2"
    assert (path / "tokenizer.json").is_file() and (path / "model.safetensors").is_file()
    assert ensure_tiny_model() == path  # cached, not rebuilt


class _Counting:
    """The real tokenizer, counting the characters it is asked to encode."""

    def __init__(self, tokenizer):
        self.tokenizer, self.chars = tokenizer, 0

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)

    def encode(self, text, **kwargs):
        self.chars += len(text)
        return self.tokenizer.encode(text, **kwargs)


def test_a_file_far_over_the_context_is_refused_after_counting_a_little_of_it(tokenizer):
    # A 2.4 MB file for an 8k context was tokenized whole (4.6 s at 4 MB) only to be
    # refused; now counting stops once it has clearly passed the limit.
    from fastapply.decoding.prompts import build_request
    from fastapply.decoding.speculate import ContextLimitError

    code = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(60_000))
    counting = _Counting(tokenizer)
    with pytest.raises(ContextLimitError, match=r"more than \d+ tokens .* limit is 8192"):
        build_request(counting, KORTIX, code, "# ...\ndef f5(x):\n    return 0\n# ...\n",
                      stop_ids={0}, max_new_tokens=16, max_draft_len=8, context_limit=8192)
    assert counting.chars < len(code) // 10
    # a prompt that fits is counted exactly, as before
    request = build_request(tokenizer, KORTIX, code[:2000], "# ...\n", stop_ids={0},
                            max_new_tokens=16, max_draft_len=8, context_limit=8192)
    assert request.prompt_ids == build_prompt_ids(tokenizer, KORTIX, code[:2000], "# ...\n")
