"""Quantisation recipes: FP8 with an FP8 KV cache, with a bf16 KV cache, FP8 weights only.

Each recipe inserts the quantizers it names and no others, exports what TensorRT-LLM
reads (``hf_quant_config.json``, the TRT-LLM checkpoint's ``config.json``), gives the
``trtllm-build`` flags it needs, and the FP8 check runs on it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("modelopt")

from fastapply.engine_build.errors import BuildError
from fastapply.engine_build.profile import RECIPES, load_profile
from fastapply.model.tiny import ensure_tiny_model


def enabled_quantizers(model: Any) -> set[str]:
    """The kinds of quantizer enabled anywhere in ``model`` (e.g. ``weight_quantizer``)."""
    from modelopt.torch.quantization.nn import TensorQuantizer

    return {name.rsplit(".", 1)[-1] for name, m in model.named_modules()
            if isinstance(m, TensorQuantizer) and m.is_enabled}


WHAT_IS_FP8 = {
    "fp8": {"weight_quantizer", "input_quantizer", "k_bmm_quantizer", "v_bmm_quantizer"},
    "fp8-bf16-kv": {"weight_quantizer", "input_quantizer"},
    "fp8-weights": {"weight_quantizer"},
}


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES)
def test_each_recipe_quantizes_exports_and_builds_its_engine_flags(
        recipe: str, tiny_llama: Path, tmp_path: Path) -> None:
    from fastapply.engine_build.engine import build_command
    from fastapply.engine_build.quantize import EXPORTED, quantize
    from fastapply.engine_build.verify import fakequant_pair
    from fastapply.examples import load_edits

    hf_dir, ckpt = tmp_path / "hf", tmp_path / "trtllm"
    result = quantize(tiny_llama, hf_dir, ckpt, records=load_edits()[:2], prompt_format="kortix",
                      max_prompt_tokens=2048, device="cpu", family="llama", recipe=recipe)
    quant = json.loads((hf_dir / "hf_quant_config.json").read_text())["quantization"]
    assert (quant["quant_algo"], quant.get("kv_cache_quant_algo")) == EXPORTED[recipe]
    assert result["recipe"] == recipe
    trt = json.loads((ckpt / "config.json").read_text())["quantization"]
    assert trt["quant_algo"] == "FP8"
    assert (trt.get("kv_cache_quant_algo") == "FP8") == (recipe == "fp8")
    weights = (hf_dir / "model.safetensors").read_bytes()[:200_000]
    assert (b"input_scale" in weights) == (recipe != "fp8-weights")  # activation scales
    profile = dataclasses.replace(load_profile("tiny-cpu"), quantization=recipe)
    command = " ".join(build_command(profile, ckpt, tmp_path / "engine"))
    # FP8 context attention reads the FP8 KV cache: not asked for without one
    assert ("--use_fp8_context_fmha enable" in command) == (recipe == "fp8")
    assert "--use_paged_context_fmha enable" in command
    # the simulated-FP8 candidate of the check carries exactly the recipe's quantizers
    _, candidate = fakequant_pair(tiny_llama, [list(range(5, 60))], 8192, fold_weights=False,
                                  recipe=recipe)
    assert enabled_quantizers(candidate.model) == WHAT_IS_FP8[recipe]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["fp8-bf16-kv", "fp8-weights"])
def test_the_fp8_check_runs_on_each_recipe(recipe: str, tmp_path: Path) -> None:
    """`fastapply build --quantization RECIPE`: its own build, quantized and checked that way."""
    from fastapply.engine_build import cli, layout

    tiny = ensure_tiny_model()
    common = ["--config", "tiny-cpu", "--out", str(tmp_path / "out"), "--model", str(tiny),
              "--no-adapter", "--quantization", recipe]
    assert cli.main(["quantize", *common]) == 0
    assert cli.main(["verify", *common]) == 0
    (keyed,) = (tmp_path / "out" / layout.BUILDS).iterdir()
    report = json.loads((keyed / layout.REPORT).read_text())
    assert report["stages"]["quantize"]["recipe"] == recipe
    assert report["parity"]["recipe"] == recipe and report["parity"]["edits"] == 4


def test_an_unknown_recipe_is_refused_with_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nquantization: int4\n")
    with pytest.raises(BuildError, match="quantization 'int4' is not one of fp8, fp8-bf16-kv"):
        load_profile(str(path))


def test_the_default_recipe_keeps_the_build_key() -> None:
    """Builds made before there was a choice of recipe are found again."""
    from fastapply.engine_build.stages import build_inputs

    profile = load_profile("tiny-cpu")
    assert "quantization" not in build_inputs(profile)
    assert build_inputs(dataclasses.replace(profile, quantization="fp8-weights"))[
        "quantization"] == "fp8-weights"
