"""The tiny test model (fastapply.model.tiny): built once, cached, and its greedy output
is noise that varies, so that tests comparing decoders see more than one token."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")


def test_the_tiny_model_is_cached_and_its_greedy_output_varies() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fastapply.model.tiny import ensure_tiny_model

    path = ensure_tiny_model()
    assert ensure_tiny_model() == path  # the same seed: the same cached directory
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prompt = tokenizer("def add(a, b):\n    return a + b\n", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=24, do_sample=False)
    new = out[0, prompt["input_ids"].shape[1]:].tolist()
    assert len(new) > 1 and len(set(new)) > 1, new  # not one token repeated
