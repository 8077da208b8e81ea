"""A tiny random-weight Qwen2 model and BPE tokenizer, built locally in seconds.

Tests, the demo and the benchmarks need a real causal LM with a real tokenizer and chat
template, and nothing may be downloaded. This module trains a byte-level BPE tokenizer
with Qwen2's pre-tokenizer (its split regex, NFC normalisation, ChatML special tokens) on
the edits shipped in ``fastapply/examples``, and initialises a 2-layer Qwen2 model with
random weights, then saves both as an ordinary Hugging Face directory::

    >>> path = ensure_tiny_model()                  # doctest: +SKIP
    >>> AutoModelForCausalLM.from_pretrained(path)  # doctest: +SKIP

The weights are random, so the model's output is noise, but it is *deterministic* noise:
the same seed gives the same directory, greedy decoding is reproducible, and the
initialisation range is wide enough that greedy output varies from token to token
instead of repeating one token (tests/model/test_tiny.py checks that).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapply.examples import DEFAULT_EDITS, load_edits

#: Bump when the recipe changes, so cached directories built by an older recipe are not reused.
RECIPE_VERSION = 1

#: Qwen2's pre-tokenizer split pattern (from Qwen2's tokenizer.json).
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: ChatML, as Qwen2 uses it (no default system turn).
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: Default shape: small enough that a CPU forward pass costs about a millisecond.
DEFAULT_SHAPE: dict[str, Any] = {
    "vocab_size": 2048,
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    # Wide enough that random logits differ clearly between tokens (greedy output varies
    # and float32 ties are vanishingly rare), narrow enough that activations stay finite.
    "initializer_range": 0.35,
}

#: A Qwen2-1.5B-shaped configuration (random weights), for GPU benchmarks.
QWEN2_1_5B_SHAPE: dict[str, Any] = {
    "vocab_size": 2048,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "initializer_range": 0.02,
}


def default_cache_dir() -> Path:
    """Where built models are cached: ``$FASTAPPLY_CACHE`` or ``~/.cache/fastapply``."""
    root = os.environ.get("FASTAPPLY_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "fastapply")
    return Path(root)


def _training_texts() -> list[str]:
    texts: list[str] = []
    for rec in load_edits(DEFAULT_EDITS):
        for field in ("original", "updated", "lazy_snippet", "search_replace", "udiff"):
            if isinstance(rec.get(field), str):
                texts.append(rec[field])
    # The prompt scaffolding, so tags become single tokens or short sequences.
    texts.append("<code></code><update></update><updated-code></updated-code>"
                 "<instruction></instruction>```\n")
    return texts


def build_tokenizer(vocab_size: int = 2048) -> Any:
    """Train a Qwen2-style byte-level BPE tokenizer on the shipped examples.

    Returns a ``transformers.PreTrainedTokenizerFast`` with the ChatML template, EOS
    ``<|im_end|>`` and pad ``<|endoftext|>``. Deterministic for the same inputs.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_texts(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=DEFAULT_SHAPE["max_position_embeddings"],
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_model(out_dir: str | Path, shape: dict[str, Any] | None = None,
                     seed: int = 0) -> Path:
    """Build the tokenizer and a random Qwen2 model into ``out_dir`` (an HF directory)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    shape = {**DEFAULT_SHAPE, **(shape or {})}
    out = Path(out_dir)
    tokenizer = build_tokenizer(shape["vocab_size"])
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        **shape,
        tie_word_embeddings=True,
        eos_token_id=[eos_id, pad_id],
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config = GenerationConfig(
        eos_token_id=[eos_id, pad_id], pad_token_id=pad_id, do_sample=False)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "fastapply-tiny.json").write_text(json.dumps(
        {"recipe_version": RECIPE_VERSION, "seed": seed, "shape": shape,
         "note": "random weights: output is noise; built by fastapply.model.tiny"}, indent=2))
    return out


def ensure_tiny_model(cache_dir: str | Path | None = None, seed: int = 0) -> Path:
    """Return the tiny model's directory, building it once (atomically) if missing."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"tiny-qwen2-r{RECIPE_VERSION}-s{seed}"
    if (target / "fastapply-tiny.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-build-", dir=root))
    try:
        build_tiny_model(tmp, seed=seed)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race; its copy is identical
            if not (target / "fastapply-tiny.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m fastapply.model.tiny [OUT_DIR] [--shape 1.5b]``: build and print the path."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fastapply.model.tiny",
                                     description="Build the tiny random Qwen2 model locally.")
    parser.add_argument("out", nargs="?", help="output directory (default: the cache)")
    parser.add_argument("--shape", choices=["tiny", "1.5b"], default="tiny",
                        help="tiny (default) or a Qwen2-1.5B-shaped random model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    shape = QWEN2_1_5B_SHAPE if args.shape == "1.5b" else None
    if args.out:
        print(build_tiny_model(args.out, shape=shape, seed=args.seed))
    elif shape is not None:
        parser.error("--shape 1.5b needs an output directory")
    else:
        print(ensure_tiny_model(seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
