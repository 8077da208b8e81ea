"""Parity check: the quantized model's merges against the reference model's.

For each held-out edit both models merge it (greedy, through fastapply's own loop); the
figures are the exact-match rate and, for every edit that differs, the first divergence:
the token index and the text of both outputs around it. The stage fails under the
profile's ``verify.min_exact_match``.

Exact match alone can pass while quantisation is broken (a threshold of 0 on a model
whose greedy output is noise) and fail while it is fine (one flipped argmax early in a
long merge). So where both models are at hand (the ``fakequant`` candidate) verify also
reads the same held-out sequences (prompt + true answer) through both, teacher-forced,
and reports the mean cosine of the two logit vectors per position (``logits_cosine_mean``)
and the share of positions whose argmax agrees (``top1_agreement``); the stage fails
under ``verify.min_logits_cosine``. On the tiny random model FP8 keeps the cosine at
~0.92 (its chaotic logits flip half the argmaxes), and FP8 weight scales off by 100x
drop it to ~0.00 (``tests/engine_build/test_engine_build.py`` breaks them on purpose).

On CPU the candidate is modelopt's *simulated* FP8: the same FP8 recipe and calibration
applied as fake quantization to a float32 copy of the model, compared with the float32
model. Where TensorRT-LLM is installed, the candidate can be the served runtime instead
(``--candidate trtllm-engine|trtllm-pytorch``), compared with the bf16 torch model.

``check_served`` compares merges served by a real tritonserver (the rendered repository,
torch runtime) with in-process merges of the same model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import Runtime
from fastapply.decoding.runtimes.torch import TorchRuntime

#: Tokens of context shown on each side of a divergence.
CONTEXT_TOKENS = 8


def first_divergence(reference: list[int], candidate: list[int]) -> int | None:
    """Index of the first differing token (None when equal).

    >>> first_divergence([1, 2, 3], [1, 2, 4])
    2
    >>> first_divergence([1, 2], [1, 2, 3])  # one output is a prefix of the other
    2
    >>> first_divergence([1, 2], [1, 2]) is None
    True
    """
    for i, (a, b) in enumerate(zip(reference, candidate, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(candidate) else min(len(reference), len(candidate))


class LoadedTorchRuntime(TorchRuntime):
    """The torch runtime around an already loaded model (e.g. a fake-quantized one)."""

    def __init__(self, model: Any, context_limit: int) -> None:
        self.model = model
        self.device = str(next(model.parameters()).device)
        self.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        self.context_limit = context_limit
        self.eos_token_id = getattr(model.generation_config, "eos_token_id", None)


def compare_edit(tokenizer: Any, ref: list[int], cand: list[int]) -> dict[str, Any]:
    """Figures of one edit: exact match, or the first divergence with text around it."""
    index = first_divergence(ref, cand)
    row: dict[str, Any] = {"exact_match": index is None, "reference_tokens": len(ref),
                           "quantized_tokens": len(cand)}
    if index is not None:
        lo, hi = max(0, index - CONTEXT_TOKENS), index + CONTEXT_TOKENS
        row["first_divergence"] = {
            "token_index": index,
            "reference_text": tokenizer.decode(ref[lo:hi]),
            "quantized_text": tokenizer.decode(cand[lo:hi]),
        }
    return row


def parity(records: list[dict[str, Any]], tokenizer: Any, prompt_format: str,
           reference: Runtime, candidate: Runtime, max_tokens: int,
           max_draft_len: int) -> dict[str, Any]:
    """Merge ``records`` on both runtimes; return the figures (exact_match_rate etc.)."""
    from fastapply.decoding import prompts
    from fastapply.engine_build.quantize import record_snippet

    fmt = prompts.get_format(prompt_format)
    stop_ids = prompts.stop_token_ids(tokenizer, reference.eos_token_id)
    rows = []
    for rec in records:
        request = prompts.build_request(tokenizer, fmt, rec["original"], record_snippet(rec),
                                        stop_ids=stop_ids, max_new_tokens=max_tokens,
                                        max_draft_len=max_draft_len)
        ref = reference.generate(request).token_ids
        cand = candidate.generate(request).token_ids
        rows.append({"id": rec.get("id"), **compare_edit(tokenizer, ref, cand)})
    exact = sum(r["exact_match"] for r in rows)
    return {"edits": len(rows), "exact_matches": exact,
            "exact_match_rate": exact / len(rows) if rows else 0.0,
            "max_tokens": max_tokens, "per_edit": rows}


def logits_agreement(reference: Any, candidate: Any,
                     sequences: list[list[int]]) -> dict[str, Any]:
    """Teacher-forced comparison of two models over ``sequences`` (token id lists).

    Per position: whether the argmax agrees, and the cosine of the logit vectors.
    """
    import torch

    agree = positions = 0
    cosines: list[float] = []
    with torch.inference_mode():
        for ids in sequences:
            x = torch.tensor([ids], device=next(reference.parameters()).device)  # [1, S]
            ref = reference(input_ids=x).logits[0].float()  # [S, V]
            cand = candidate(input_ids=x).logits[0].float()  # [S, V]
            agree += int((ref.argmax(-1) == cand.argmax(-1)).sum())
            positions += len(ids)
            cosines.extend(torch.nn.functional.cosine_similarity(ref, cand, dim=-1).tolist())
    return {"sequences": len(sequences), "positions": positions,
            "top1_agreement": agree / positions if positions else 0.0,
            "logits_cosine_mean": sum(cosines) / len(cosines) if cosines else 0.0}


def fakequant_pair(model_dir: str | Path, calibration: list[list[int]],
                   context_limit: int) -> tuple[LoadedTorchRuntime, LoadedTorchRuntime]:
    """(float32 reference, float32 simulated-FP8 candidate) runtimes on CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    from fastapply.engine_build.quantize import quantize_model

    def load() -> Any:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    reference = LoadedTorchRuntime(load(), context_limit)
    candidate = LoadedTorchRuntime(quantize_model(load(), calibration, "cpu"), context_limit)
    return reference, candidate


def check_served(model_dir: str | Path, records: list[dict[str, Any]], max_tokens: int,
                 prompt_format: str, work_dir: str | Path) -> dict[str, Any]:
    """Merges served by tritonserver (torch runtime, CPU float32) vs in-process ones."""
    from fastapply.client.grpc import FastApplyClient
    from fastapply.engine_build.quantize import record_snippet
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import TritonServer
    from fastapply.service import FastApplyService, IncompleteOutput, ServiceConfig

    params: dict[str, Any] = {"runtime": "torch", "model_dir": str(model_dir), "device": "cpu",
              "dtype": "float32", "prompt_format": prompt_format}
    repo = render_repository(Path(work_dir) / "served-check-repository", **params)
    local = FastApplyService(ServiceConfig(**params))
    mismatched: list[Any] = []
    with TritonServer(repo) as server, FastApplyClient(server.grpc_url) as client:
        for rec in records:
            snippet = record_snippet(rec)
            # A file cut at max_tokens is refused on both sides: compare what was written.
            served = client.stream(rec["original"], snippet, max_tokens=max_tokens)
            served_refusal = served.drain()
            try:
                here = local.apply(rec["original"], snippet, max_tokens=max_tokens)
            except IncompleteOutput as exc:
                here = exc.partial
            if (served.merged_code != here.merged_code
                    or (served_refusal is None) != here.stats.complete):
                mismatched.append(rec.get("id"))
    return {"edits": len(records), "mismatched": mismatched,
            "served_equals_in_process": not mismatched}
