"""The verify stage: choose reference and candidate, run the parity check, judge it.

Candidates:

* ``fakequant`` (default; CPU): modelopt's simulated FP8 of the merged model in float32,
  calibrated on the same prompts as the quantize stage, against the float32 model;
* ``trtllm-engine`` / ``trtllm-pytorch`` (GPU, inside the TensorRT-LLM container): the
  built engine / the FP8 HF checkpoint on the PyTorch backend, against the bf16 model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from fastapply.engine_build import layout
from fastapply.engine_build.errors import BuildError
from fastapply.engine_build.profile import Profile


class Build(Protocol):
    """What the verify stage reads of a build (a :class:`.stages.Build`; named here, not
    imported, because the stages call this module)."""

    profile: Profile
    out: Path
    calibration: list[dict[str, Any]]
    held_out: list[dict[str, Any]]
    held_out_disjoint: bool

    @property
    def merged_dir(self) -> Path: ...

    def path(self, name: str) -> Path: ...




def _runtimes(build: Build, tokenizer: Any, candidate: str) -> tuple[Any, Any]:
    """(reference runtime, candidate runtime)."""
    from fastapply.engine_build.quantize import merge_sequences
    from fastapply.engine_build.verify import fakequant_pair

    p = build.profile
    if candidate == "fakequant":
        calib = merge_sequences(tokenizer, p.prompt_format, build.calibration,
                                p.calibration.max_prompt_tokens)
        return fakequant_pair(build.merged_dir, calib, p.max_seq_len)
    from fastapply.decoding.runtimes.torch import TorchRuntime
    from fastapply.decoding.runtimes.trtllm_engine import TrtllmNotInstalled, import_module

    try:  # before loading the reference: say where to run, not what failed to load
        import_module("tensorrt_llm")
    except TrtllmNotInstalled as exc:
        raise BuildError(f"verify candidate {candidate}: {exc}") from None
    ref = TorchRuntime(build.merged_dir, device="cuda", dtype="bfloat16",
                       context_limit=p.max_seq_len)
    if candidate == "trtllm-engine":
        from fastapply.decoding.runtimes.trtllm_engine import TrtllmEngineRuntime

        return ref, TrtllmEngineRuntime(build.path(layout.ENGINE),
                                        max_draft_len=p.max_draft_len,
                                        context_limit=p.max_seq_len)
    from fastapply.decoding.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

    return ref, TrtllmPytorchRuntime(build.path(layout.QUANTIZED_HF),
                                     max_draft_len=p.max_draft_len, context_limit=p.max_seq_len)


def judge(figures: dict[str, Any], verify: Any) -> list[str]:
    """What fails the stage: each figure under its threshold, as a sentence."""
    problems = []
    if figures["exact_match_rate"] < verify.min_exact_match:
        problems.append(f"exact-match rate {figures['exact_match_rate']:.3f} is under the "
                        f"profile's threshold {verify.min_exact_match}")
    logits = figures.get("logits")
    if logits and logits["logits_cosine_mean"] < verify.min_logits_cosine:
        problems.append(f"logits cosine {logits['logits_cosine_mean']:.4f} is under the "
                        f"profile's threshold {verify.min_logits_cosine}: the quantized "
                        f"model's logits are off (check the FP8 scales and calibration)")
    return problems


def run_verify(build: Build) -> dict[str, Any]:
    """Parity figures (and the served check); status ``failed`` under a threshold.

    The candidate and the served check come from the profile (``verify.candidate``,
    ``verify.served``; the command line overrides both).
    """
    from transformers import AutoTokenizer

    from fastapply.engine_build.quantize import merge_sequences
    from fastapply.engine_build.verify import check_served, logits_agreement, parity

    p = build.profile
    if not (build.merged_dir / "config.json").is_file():
        raise BuildError(f"{build.merged_dir} is missing: run the merge-lora stage first")
    tokenizer = AutoTokenizer.from_pretrained(build.merged_dir)
    reference, cand = _runtimes(build, tokenizer, p.verify.candidate)
    figures = parity(build.held_out, tokenizer, p.prompt_format, reference, cand,
                     p.verify.max_tokens, p.max_draft_len)
    figures.update(candidate=p.verify.candidate, held_out_disjoint=build.held_out_disjoint,
                   min_exact_match=p.verify.min_exact_match)
    if p.verify.candidate == "fakequant":
        sequences = merge_sequences(tokenizer, p.prompt_format, build.held_out,
                                    p.calibration.max_prompt_tokens)
        figures["logits"] = {**logits_agreement(reference.model, cand.model, sequences),
                             "min_logits_cosine": p.verify.min_logits_cosine}
    entry: dict[str, Any] = {"parity": figures}
    problems = judge(figures, p.verify)
    if p.verify.served:
        entry["served"] = check_served(build.merged_dir, build.held_out, p.verify.max_tokens,
                                       p.prompt_format, build.out)
        if not entry["served"]["served_equals_in_process"]:
            problems.append("served merges differ from in-process merges")
    entry["status"] = "failed" if problems else "done"
    if problems:
        entry["error"] = "; ".join(problems)
    return entry
