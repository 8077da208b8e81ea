"""Models the build tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with the tiny model's tokenizer (Llama: the TRT-LLM export path)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from fastapply.model.tiny import build_tokenizer

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = build_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out
