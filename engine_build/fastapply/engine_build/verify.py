"""The FP8 check: the quantized model's merges against the reference model's.

For each held-out edit both models merge it (greedy, through fastapply's own speculative
loop, which is lossless: the output is plain greedy decoding's). The figures: the share
of edits whose quantized output is *identical* to the reference's, token for token; each
model's *exact rate* (share of edits whose merged file is the record's ``updated``); and
for every edit that differs, the first divergence: the token index and the text of both
outputs around it. :func:`.verify_run.judge` fails the stage under the profile's
``verify.min_identical`` or when the exact rate drops by more than
``verify.max_exact_drop``, naming the edits that diverged.

Identical outputs alone can pass while quantisation is broken (a threshold of 0 on a
model whose greedy output is noise) and fail while it is fine (one flipped argmax early in a
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

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import Runtime
from fastapply.decoding.runtimes.torch import TorchRuntime
from fastapply.decoding.speculate import Generation

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
        # Each model runs every prompt whole: a parity check compares models, not caches.
        self.prompt_cache = None
        # K comes with each request (the profile's max_draft_len); nothing is measured.
        self.pass_cost_ms = {}
        self.max_draft_len = 64


def compare_edit(tokenizer: Any, ref: list[int], cand: list[int]) -> dict[str, Any]:
    """Whether two outputs are identical, or their first divergence with text around it."""
    index = first_divergence(ref, cand)
    row: dict[str, Any] = {"identical": index is None, "reference_tokens": len(ref),
                           "quantized_tokens": len(cand)}
    if index is not None:
        lo, hi = max(0, index - CONTEXT_TOKENS), index + CONTEXT_TOKENS
        row["first_divergence"] = {
            "token_index": index,
            "reference_text": tokenizer.decode(ref[lo:hi]),
            "quantized_text": tokenizer.decode(cand[lo:hi]),
        }
    return row


def merged_file(tokenizer: Any, fmt: Any, generation: Generation,
                stop_ids: Collection[int]) -> str | None:
    """The merged file of an answer the model finished; None when it did not finish (cut
    at the token budget) or a kortix answer has no closing tag (the server refuses both)."""
    if generation.stats.finish_reason != "stop":
        return None
    text = tokenizer.decode([t for t in generation.token_ids if t not in stop_ids])
    if fmt.close_tag and fmt.close_tag not in text:
        return None
    return str(fmt.extract(text))


def parity(records: list[dict[str, Any]], tokenizer: Any, prompt_format: str,
           reference: Runtime, candidate: Runtime, max_tokens: int, max_draft_len: int,
           progress: Callable[[int, dict[str, Any]], None] | None = None,
           answer_margin_tokens: int = 0) -> dict[str, Any]:
    """Merge ``records`` on both runtimes, greedy through fastapply's speculative loop.

    Each record is prompted in its own ``format`` where it names one (the validation
    examples do, as in training), else in ``prompt_format``. Per edit: whether the two
    outputs are identical token for token (an answer cut at the budget on either side
    is not: nothing says where it would have ended), and for each model whether its
    merged file is exactly the record's ``updated`` (exact). Returns the counts, the
    shares (``identical_share``, ``exact_rate_reference``, ``exact_rate_quantized``,
    ``exact_drop``), the seconds each model took, and a row per edit (also handed to
    ``progress`` with its 1-based number as it is done). The budget of an edit is
    ``max_tokens``, or with ``answer_margin_tokens`` the true answer's length plus that
    margin where it is smaller.
    """
    import time

    from fastapply.decoding import prompts
    from fastapply.engine_build.quantize import record_snippet

    stop_ids = prompts.stop_token_ids(tokenizer, reference.eos_token_id)
    rows = []
    seconds = {"reference": 0.0, "quantized": 0.0}
    for rec in records:
        fmt = prompts.get_format(rec.get("format") or prompt_format)
        budget = max_tokens
        if answer_margin_tokens:  # + 1: the stop token
            answer = prompts.encode(tokenizer, fmt.expected_output(rec["updated"]))
            budget = min(max_tokens, len(answer) + 1 + answer_margin_tokens)
        request = prompts.build_request(tokenizer, fmt, rec["original"], record_snippet(rec),
                                        stop_ids=stop_ids, max_new_tokens=budget,
                                        max_draft_len=max_draft_len)
        outputs = {}
        for name, runtime in (("reference", reference), ("quantized", candidate)):
            start = time.perf_counter()
            outputs[name] = runtime.generate(request)
            seconds[name] += time.perf_counter() - start
        ref, cand = outputs["reference"], outputs["quantized"]
        row = {"id": rec.get("id"), "format": fmt.name, "budget_tokens": budget,
               **compare_edit(tokenizer, ref.token_ids, cand.token_ids)}
        # cut: the model did not end its answer (the token budget did)
        row["cut"] = [name for name, gen in outputs.items() if gen.stats.finish_reason != "stop"]
        row["identical"] = row["identical"] and not row["cut"]
        for name, gen in outputs.items():
            row[f"{name}_exact"] = merged_file(tokenizer, fmt, gen, stop_ids) == rec["updated"]
        rows.append(row)
        if progress is not None:
            progress(len(rows), row)
    n = len(rows)
    identical = sum(r["identical"] for r in rows)
    exact = {name: sum(r[f"{name}_exact"] for r in rows) for name in seconds}
    return {"edits": n, "identical": identical, "identical_share": identical / n if n else 0.0,
            "cut": sum(bool(r["cut"]) for r in rows),
            "exact_reference": exact["reference"], "exact_quantized": exact["quantized"],
            "exact_rate_reference": exact["reference"] / n if n else 0.0,
            "exact_rate_quantized": exact["quantized"] / n if n else 0.0,
            "exact_drop": (exact["reference"] - exact["quantized"]) / n if n else 0.0,
            "max_tokens": max_tokens, "answer_margin_tokens": answer_margin_tokens,
            "reference_seconds": round(seconds["reference"], 1),
            "quantized_seconds": round(seconds["quantized"], 1),
            "per_edit": rows}


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


def fakequant_pair(model_dir: str | Path, calibration: list[list[int]], context_limit: int,
                   fold_weights: bool = True,
                   recipe: str = "fp8") -> tuple[LoadedTorchRuntime, LoadedTorchRuntime]:
    """(float32 reference, float32 simulated-FP8 candidate) runtimes on CPU; the candidate
    quantized with ``recipe`` (:func:`.quantize.fp8_config`).

    With ``fold_weights`` the candidate's weights are fake-quantized once (modelopt's
    ``fold_weight``) instead of on every forward pass: the same logits, bit for bit, at the
    reference's speed (measured on the default model, 2 CPU cores: 50.5 s of CPU time
    unfolded, 29.9 s folded, 29.8 s for the float32 reference). Activations and the KV
    cache are still fake-quantized on every pass. Leave it off to change the weight
    scales after calibration (the test that breaks them does).
    """
    import modelopt.torch.quantization as mtq
    import torch
    from transformers import AutoModelForCausalLM

    from fastapply.engine_build.quantize import quantize_model

    def load() -> Any:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    reference = LoadedTorchRuntime(load(), context_limit)
    quantized = quantize_model(load(), calibration, "cpu", recipe)
    if fold_weights:
        mtq.fold_weight(quantized)
    return reference, LoadedTorchRuntime(quantized, context_limit)


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
