"""The embedded default model: the pretrained base + the LoRA adapter shipped in this package.

``default_model_dir()`` returns a plain Hugging Face checkpoint directory (safetensors +
tokenizer) holding the base with the adapter merged in, built once into the cache
(:func:`fastapply.model.base.cache_dir`) under a name that carries the adapter's hash, so
a new adapter never reuses an old merge. Every model path reads it: the torch runtime,
``fastapply serve`` and ``fastapply demo`` by default, and ``fastapply build`` (merge-lora ->
FP8 -> TensorRT-LLM) through the ``smollm2-135m`` profile.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from fastapply.model.base import DONE_FILE, base_checkpoint, cache_dir, is_built

#: The shipped adapter (``adapter_config.json`` + ``adapter_model.safetensors``).
ADAPTER_DIR = Path(__file__).resolve().parent / "adapter"
#: Adapters trained for other bases, one folder each with its card (``candidates/NAME``); a
#: build profile names one as ``adapter_dir: shipped:NAME``.
SHIPPED_ADAPTERS_DIR = Path(__file__).resolve().parent / "candidates"
#: Prefix of the merged checkpoint's directory name; the adapter's hash follows it.
MERGED_PREFIX = "smollm2-135m-fastapply-"


def adapter_digest(adapter: Path = ADAPTER_DIR) -> str:
    """First 12 hex digits of the SHA-256 of the adapter's files (name + bytes)."""
    h = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        path = adapter / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the shipped adapter is missing; reinstall "
                                    f"fastapply, or pass --model DIR")
        h.update(name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def merge_adapter(base: Path, adapter: Path, out: Path) -> Path:
    """Write ``base`` with ``adapter`` merged (float32) to ``out``, atomically."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    merged.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp)
    (tmp / DONE_FILE).write_text(json.dumps(
        {"base": str(base), "adapter": str(adapter), "adapter_sha256_12": out.name[-12:],
         "dtype": "float32"}, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def default_model_dir(quiet: bool = True) -> Path:
    """The default model's checkpoint directory, built on first use (base from the
    installed package, the adapter from this package)."""
    out = cache_dir() / (MERGED_PREFIX + adapter_digest())
    if is_built(out):
        return out
    base = base_checkpoint(quiet=quiet)
    if not quiet:
        print(f"merging the shipped adapter into the base: {out} ...", file=sys.stderr)
    return merge_adapter(base, ADAPTER_DIR, out)
