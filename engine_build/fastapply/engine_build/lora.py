"""LoRA merge: peft ``merge_and_unload`` in bf16, saved as an ordinary HF directory.

The merged directory holds the weights (safetensors), config, generation config and the
base model's tokenizer, so every later stage (and the torch runtime) can load it alone.
``make_random_adapter`` creates a LoRA adapter with random (non-zero) B matrices for the
tiny-cpu profile and the tests: merging it must change the weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Projections a LoRA adapter targets by default (Llama/Qwen2 naming).
DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def merge_lora(model_dir: str | Path, adapter_dir: str | Path, out_dir: str | Path,
               dtype: str = "bfloat16") -> Path:
    """Merge ``adapter_dir`` into ``model_dir``; write the result to ``out_dir``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=_torch_dtype(dtype))
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return out


def make_random_adapter(model_dir: str | Path, out_dir: str | Path, rank: int = 4,
                        seed: int = 0, targets: list[str] | None = None) -> Path:
    """A LoRA adapter of ``model_dir`` with random A and B (so it changes the model)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets or DEFAULT_TARGETS,
                        init_lora_weights=False, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    with torch.no_grad():  # small deltas: the merged model stays close to the base
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.mul_(0.1)
    out = Path(out_dir)
    peft_model.save_pretrained(str(out), safe_serialization=True)
    return out
