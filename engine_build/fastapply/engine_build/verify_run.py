"""The verify stage: choose reference and candidate, run the parity check, judge it.

Candidates:

* ``fakequant`` (default; CPU): modelopt's simulated FP8 of the merged model in float32,
  calibrated on the same prompts as the quantize stage, against the float32 model;
* ``trtllm-engine`` / ``trtllm-pytorch`` (GPU, inside the TensorRT-LLM container): the
  built engine / the FP8 HF checkpoint on the PyTorch backend, against the bf16 model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapply.engine_build.stages import Build

CANDIDATES = ("fakequant", "trtllm-engine", "trtllm-pytorch")


def _stop_ids(tokenizer: Any, runtime: Any) -> set[int]:
    from fastapply import prompts

    return prompts.stop_token_ids(tokenizer, getattr(runtime, "eos_token_id", None))


def _mergers(build: Build, tokenizer: Any, candidate: str) -> tuple[Any, Any]:
    """(reference Merger, candidate Merger)."""
    from fastapply.engine_build.quantize import merge_sequences
    from fastapply.engine_build.verify import (
        fakequant_pair,
        generate_merger,
        runtime_merger,
    )

    p = build.profile
    k = p.max_draft_len
    if candidate == "fakequant":
        calib = merge_sequences(tokenizer, p.prompt_format, build.calibration,
                                p.calibration.max_prompt_tokens)
        ref_rt, cand_rt = fakequant_pair(build.merged_dir, calib, p.max_seq_len)
        stops = _stop_ids(tokenizer, ref_rt)
        return runtime_merger(ref_rt, stops, k), runtime_merger(cand_rt, stops, k)
    from fastapply.runtimes.torch import TorchRuntime

    ref = TorchRuntime(build.merged_dir, device="cuda", dtype="bfloat16",
                       context_limit=p.max_seq_len)
    stops = _stop_ids(tokenizer, ref)
    if candidate == "trtllm-engine":
        from fastapply.runtimes.trtllm_engine import TrtllmEngineRuntime

        engine = TrtllmEngineRuntime(build.out / "engine", max_draft_len=k,
                                     context_limit=p.max_seq_len)
        return runtime_merger(ref, stops, k), runtime_merger(engine, stops, k)
    from fastapply.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

    backend = TrtllmPytorchRuntime(build.out / "quantized" / "hf", max_draft_len=k,
                                   context_limit=p.max_seq_len)
    return runtime_merger(ref, stops, k), generate_merger(backend, stops)


def run_verify(build: Build, served: bool = False,
               candidate: str = "fakequant") -> dict[str, Any]:
    """Parity figures (and the served check); status ``failed`` under the threshold."""
    from transformers import AutoTokenizer

    from fastapply.engine_build.errors import BuildError
    from fastapply.engine_build.verify import check_served, parity

    if candidate not in CANDIDATES:
        raise BuildError(f"unknown candidate {candidate!r}; use one of {', '.join(CANDIDATES)}")
    if not (build.merged_dir / "config.json").is_file():
        raise BuildError(f"{build.merged_dir} is missing: run the merge-lora stage first")
    p = build.profile
    tokenizer = AutoTokenizer.from_pretrained(build.merged_dir)
    reference, cand = _mergers(build, tokenizer, candidate)
    figures = parity(build.held_out, tokenizer, p.prompt_format, reference, cand,
                     p.verify.max_tokens)
    figures.update(candidate=candidate, held_out_disjoint=build.held_out_disjoint,
                   min_exact_match=p.verify.min_exact_match)
    entry: dict[str, Any] = {"parity": figures}
    ok = figures["exact_match_rate"] >= p.verify.min_exact_match
    if served:
        entry["served"] = check_served(build.merged_dir, build.held_out, p.verify.max_tokens,
                                       p.prompt_format, build.out)
        ok = ok and entry["served"]["served_equals_in_process"]
    entry["status"] = "done" if ok else "failed"
    if not ok:
        entry["error"] = (f"exact-match rate {figures['exact_match_rate']:.3f} is under the "
                          f"profile's threshold {p.verify.min_exact_match}"
                          if figures["exact_match_rate"] < p.verify.min_exact_match
                          else "served merges differ from in-process merges")
    return entry
