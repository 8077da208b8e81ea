"""FP8 quantization with nvidia-modelopt, by the profile's recipe (``quantization``):
FP8 weights and activations with an FP8 KV cache (``fp8``, the default), the same with the
KV cache in bf16 (``fp8-bf16-kv``), or FP8 weights only (``fp8-weights``).

Calibration runs real merge prompts through the model: each edit record becomes the
prompt fastapply sends (``fastapply.decoding.prompts``) followed by the answer the model should
give, so the activation scales cover both the copied input and the generated file (an
uncalibrated export leaves activation scales missing).

Exports:

* always a unified Hugging Face checkpoint (``hf_quant_config.json`` says
  ``quant_algo: FP8``, and ``kv_cache_quant_algo: FP8`` with an FP8 KV cache) — the
  TensorRT-LLM PyTorch backend's input, with the tokenizer beside it;
* for Llama-family models also a TensorRT-LLM checkpoint (``inference_tensor_parallel=1``)
  for ``trtllm-build``. modelopt cannot export Qwen2 that way: those models are served
  from the HF checkpoint with the ``trtllm-pytorch`` runtime.

modelopt 0.47 quantizes and exports on CPU (tiny models in seconds).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fastapply.engine_build.errors import BuildError

QWEN2_MESSAGE = (
    "modelopt cannot export {model_type} models as a TensorRT-LLM checkpoint, so there is no "
    "trtllm-build engine for this model: serve the FP8 HF checkpoint {hf_dir} with the "
    "TensorRT-LLM PyTorch backend (runtime trtllm-pytorch, profile runtime: trtllm-pytorch)."
)


def record_snippet(record: dict[str, Any]) -> str:
    """The edit snippet of a record: its own ``snippet`` (training and validation examples,
    ``fastapply model sft``), else lazy, then search/replace, then udiff (corpus records)."""
    for key in ("snippet", "lazy_snippet", "search_replace", "udiff"):
        if isinstance(record.get(key), str) and record[key].strip():
            return str(record[key])
    return str(record["updated"])


def merge_sequences(tokenizer: Any, prompt_format: str, records: Iterable[dict[str, Any]],
                    max_tokens: int, with_answer: bool = True) -> list[list[int]]:
    """Token ids of merge prompts (+ the expected answer), skipping those over max_tokens.

    A record that names its own ``format`` (training and validation examples) is prompted
    in it, the others in ``prompt_format``."""
    from fastapply.decoding import prompts

    out: list[list[int]] = []
    for rec in records:
        fmt = prompts.get_format(rec.get("format") or prompt_format)
        ids = prompts.build_prompt_ids(tokenizer, fmt, rec["original"], record_snippet(rec))
        if with_answer:
            ids += prompts.encode(tokenizer, fmt.expected_output(rec["updated"]))
        if len(ids) <= max_tokens:
            out.append(ids)
    return out


#: What each recipe (``Profile.quantization``) exports: (quant_algo, kv_cache_quant_algo)
#: of ``hf_quant_config.json``. modelopt names a per-tensor FP8 weight FP8 whether or not
#: the activations are quantized; weight-only shows in the checkpoint as missing
#: activation scales.
EXPORTED = {"fp8": ("FP8", "FP8"), "fp8-bf16-kv": ("FP8", None), "fp8-weights": ("FP8", None)}


def fp8_config(recipe: str = "fp8") -> dict[str, Any]:
    """modelopt's config for a recipe of :data:`.profile.RECIPES`.

    * ``fp8``: ``FP8_DEFAULT_CFG`` (FP8 weights and input activations of every linear
      layer but ``lm_head``) plus ``FP8_KV_CFG``'s ``*[kv]_bmm_quantizer`` entries (FP8 KV
      cache);
    * ``fp8-bf16-kv``: ``FP8_DEFAULT_CFG`` alone: its first entry disables every quantizer
      (the ``*[kv]_bmm_quantizer`` ones and ``*output_quantizer`` included) and only the
      weight and input quantizers are turned back on;
    * ``fp8-weights``: that, with ``*input_quantizer`` disabled again (later entries win).
    """
    import copy

    import modelopt.torch.quantization as mtq

    if recipe == "fp8":
        return dict(mtq.utils.update_quant_cfg_with_kv_cache_quant(
            mtq.FP8_DEFAULT_CFG, mtq.FP8_KV_CFG["quant_cfg"]))
    cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)
    if recipe == "fp8-weights":
        cfg["quant_cfg"] = [*cfg["quant_cfg"], {"quantizer_name": "*input_quantizer",
                                                "enable": False}]
    elif recipe != "fp8-bf16-kv":
        raise BuildError(f"unknown quantization recipe {recipe!r}; use fp8, fp8-bf16-kv or "
                         f"fp8-weights")
    return dict(cfg)


def quantize_model(model: Any, sequences: list[list[int]], device: str,
                   recipe: str = "fp8") -> Any:
    """Insert the recipe's FP8 quantizers and calibrate them on ``sequences`` (one forward
    each)."""
    import modelopt.torch.quantization as mtq
    import torch

    if not sequences:
        raise BuildError("no calibration prompt fits max_prompt_tokens; raise "
                         "calibration.max_prompt_tokens or use shorter edits")

    def forward_loop(m: Any) -> None:
        with torch.no_grad():
            for ids in sequences:
                m(input_ids=torch.tensor([ids], device=device))  # [1, S]

    return mtq.quantize(model, fp8_config(recipe), forward_loop)


def read_quant_config(hf_dir: Path, recipe: str = "fp8") -> dict[str, Any]:
    """The ``quantization`` section of an exported ``hf_quant_config.json``, checked
    against what ``recipe`` exports (:data:`EXPORTED`)."""
    path = hf_dir / "hf_quant_config.json"
    if not path.is_file():
        raise BuildError(f"{hf_dir}: the export wrote no hf_quant_config.json")
    quant = json.loads(path.read_text())["quantization"]
    want = EXPORTED[recipe]
    got = (quant.get("quant_algo"), quant.get("kv_cache_quant_algo"))
    if got != want:
        raise BuildError(f"{path}: recipe {recipe} should export quant_algo {want[0]} and "
                         f"kv_cache_quant_algo {want[1]}, got {got[0]} / {got[1]}")
    return dict(quant)


def quantize(model_dir: str | Path, hf_dir: Path, trtllm_dir: Path, *,
             records: list[dict[str, Any]],
             prompt_format: str, max_prompt_tokens: int, device: str,
             family: str, recipe: str = "fp8") -> dict[str, Any]:
    """Quantize ``model_dir`` with ``recipe`` and export; return artefact paths and
    figures."""
    import torch
    from modelopt.torch.export import export_hf_checkpoint, export_tensorrt_llm_checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    sequences = merge_sequences(tokenizer, prompt_format, records, max_prompt_tokens)
    model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    model = quantize_model(model.to(device).eval(), sequences, device, recipe)
    result: dict[str, Any] = {"recipe": recipe, "calibration_prompts": len(sequences),
                              "calibration_tokens": sum(len(s) for s in sequences)}
    if family == "llama":
        ckpt = trtllm_dir
        export_tensorrt_llm_checkpoint(model, "llama", dtype=torch.bfloat16, export_dir=ckpt,
                                       inference_tensor_parallel=1)
        result["trtllm_checkpoint_dir"] = str(ckpt)
    export_hf_checkpoint(model, dtype=torch.bfloat16, export_dir=hf_dir)
    tokenizer.save_pretrained(hf_dir)
    result["hf_checkpoint_dir"] = str(hf_dir)
    result["quantization"] = read_quant_config(hf_dir, recipe)
    if family != "llama":
        result["message"] = QWEN2_MESSAGE.format(model_type=family, hf_dir=hf_dir)
    return result
