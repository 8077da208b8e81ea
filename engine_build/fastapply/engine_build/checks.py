"""Checks that run before any heavy work: plain file reads, no torch, no model load.

A missing model directory, an adapter trained on another base model or a calibration
file that is not JSONL must fail in well under a second with a message that says what
to do, not after minutes of loading weights.

The adapter check compares the LoRA matrices' shapes (read from the safetensors header)
with the shapes the base model's ``config.json`` implies::

    q_proj: in = hidden_size, out = num_attention_heads * head_dim
    lora_A: [r, in]    lora_B: [out, r]
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from fastapply.engine_build.errors import BuildError

#: model_type values of the Llama family (TRT-LLM checkpoint export works for these).
LLAMA_TYPES = ("llama", "mistral")

_LORA_KEY = re.compile(r"layers\.(\d+)\..*?(\w+)\.lora_([AB])(?:\.\w+)?\.weight$")


def read_model_config(model_dir: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a Hugging Face checkpoint directory."""
    path = Path(model_dir)
    if not path.is_dir():
        raise BuildError(f"model directory {path} does not exist; pass --model with a Hugging "
                         f"Face checkpoint directory (config.json + weights + tokenizer)")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise BuildError(f"{path} has no config.json, so it is not a Hugging Face checkpoint; "
                         f"pass the directory that holds config.json and the weights")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BuildError(f"{config_file}: not valid JSON ({exc.msg})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise BuildError(f"{config_file}: no model_type; is this a causal LM checkpoint?")
    return config


def model_family(config: dict[str, Any]) -> str:
    """``llama`` (TRT-LLM checkpoint export) or the model_type as is (e.g. ``qwen2``)."""
    model_type = str(config.get("model_type"))
    return "llama" if model_type in LLAMA_TYPES else model_type


def linear_shapes(config: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each projection of a Llama/Qwen2-style layer."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config.get("intermediate_size") or 4 * hidden)
    return {
        "q_proj": (hidden, heads * head_dim), "k_proj": (hidden, kv_heads * head_dim),
        "v_proj": (hidden, kv_heads * head_dim), "o_proj": (heads * head_dim, hidden),
        "gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden),
    }


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape, from a safetensors file's JSON header (no tensor is read)."""
    with path.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise BuildError(f"{path}: not a safetensors file (too short)")
        (size,) = struct.unpack("<Q", raw)
        if size > 100_000_000:
            raise BuildError(f"{path}: not a safetensors file (bad header)")
        try:
            header = json.loads(fh.read(size))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BuildError(f"{path}: not a safetensors file (bad header)") from None
    return {k: list(v["shape"]) for k, v in header.items() if k != "__metadata__"}


def check_adapter(adapter_dir: str | Path, model_config: dict[str, Any],
                  model_dir: str | Path) -> dict[str, Any]:
    """Refuse an adapter whose LoRA shapes do not fit the base model; return its config."""
    path = Path(adapter_dir)
    cfg_file = path / "adapter_config.json"
    if not cfg_file.is_file():
        raise BuildError(f"{path}: no adapter_config.json; pass a peft LoRA adapter directory")
    adapter_cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    weights = path / "adapter_model.safetensors"
    if not weights.is_file():
        raise BuildError(f"{path}: no adapter_model.safetensors (save the adapter with "
                         f"peft's save_pretrained, safe_serialization=True)")
    base = adapter_cfg.get("base_model_name_or_path") or "an unnamed model"
    expected = linear_shapes(model_config)
    layers = int(model_config.get("num_hidden_layers", 0))
    problems: list[str] = []
    for key, shape in safetensors_shapes(weights).items():
        match = _LORA_KEY.search(key)
        if not match:
            continue
        layer, module, which = int(match[1]), match[2], match[3]
        if layers and layer >= layers:
            problems.append(f"{key}: layer {layer}, but the model has {layers} layers")
        elif module in expected:
            in_f, out_f = expected[module]
            got = shape[1] if which == "A" else shape[0]
            want = in_f if which == "A" else out_f
            if got != want:
                problems.append(f"{key}: {'in' if which == 'A' else 'out'}_features {got}, "
                                f"the model's {module} has {want}")
        if len(problems) >= 3:
            break
    if problems:
        raise BuildError(
            f"the adapter {path} does not fit the model {model_dir} (it was trained on "
            f"{base}): " + "; ".join(problems) + ". Pass the adapter's own base model.")
    return dict(adapter_cfg)


def check_device(device: str) -> None:
    """A profile for CUDA on a machine whose torch sees no CUDA device: say what to pass."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise BuildError("the profile runs merge, calibration and verify on device cuda, but "
                         "torch sees no CUDA device here: pass --device cpu (modelopt "
                         "quantizes on CPU; slow for large models), or build on a GPU node")


def check_calibration(path: str | Path | None, needed: int) -> int:
    """Read the calibration JSONL through (DataError -> BuildError); return its record count."""
    from fastapply.examples import DataError, load_edits

    try:
        records = load_edits(path)
    except DataError as exc:
        raise BuildError(f"calibration data: {exc}") from None
    if not records:
        raise BuildError(f"calibration data {path}: no records")
    return len(records)


def check_tokenizer(model_dir: str | Path) -> None:
    """The merge prompts need the model's tokenizer and chat template."""
    path = Path(model_dir)
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json",
                                                    "tokenizer.model")):
        raise BuildError(f"{path} has no tokenizer files; save the tokenizer with the model "
                         f"(calibration prompts are built with its chat template)")
