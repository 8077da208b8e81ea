"""The FP8 check: what a user sees of the quantized model's merges against the reference's.

For each held-out edit both models merge it (greedy, through fastapply's own speculative
loop, which is lossless: the output is plain greedy decoding's). What decides the check
is what a user sees: each model's *exact rate* (share of edits whose merged file is the
record's ``updated``) and, of the edits the reference gets exact, the share the quantized
model keeps exact (``exact_kept_share``). :func:`.verify_run.judge` fails the stage when
the exact rate drops by more than ``verify.max_exact_drop`` or fewer than
``verify.min_exact_kept`` are kept, naming the edits lost: id, the line and token where
the quantized answer left the (exact) reference's.

Reported beside them, not gated by default: the share of edits whose outputs are
*identical* token for token, with the first divergence of each that is not. A model whose
misses come where it is unsure flips many of its wrong answers under FP8 noise without a
user seeing a difference (the default model: identical 0.52 with the exact rate 0.302 ->
0.310), so identical outputs judge the noise, not the harm. Each answer is read only as
far as these outcomes need (:mod:`.reading`): the outcomes are those of the whole answers.

Where both models are at hand (the ``fakequant`` candidate) verify also reads held-out
sequences (prompt + true answer) through both, teacher-forced, and reports the mean cosine
of the two logit vectors per position (``logits_cosine_mean``) and the share of positions
whose argmax agrees (``top1_agreement``); the stage fails under ``verify.min_logits_cosine``,
a loose floor for what exact rates cannot see: a model that is never exact (the tiny
random one) with broken scales. FP8 weight scales off by 100x drop the cosine to ~0.00
(``tests/engine_build/test_engine_build.py`` breaks them on purpose).

On CPU the candidate is modelopt's *simulated* FP8: the same FP8 recipe and calibration
applied as fake quantization to a float32 copy of the model, compared with the float32
model. Where TensorRT-LLM is installed, the candidate can be the served runtime instead
(``--candidate trtllm-engine|trtllm-pytorch``), compared with the bf16 torch model.

``check_served`` compares merges served by a real tritonserver (the rendered repository,
torch runtime) with in-process merges of the same model.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapply.decoding.runtimes import Runtime
from fastapply.decoding.runtimes.torch import TorchRuntime
from fastapply.decoding.speculate import GenerationRequest

if TYPE_CHECKING:
    from fastapply.engine_build.reading import Reading

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


def divergent_line(text_before: str, text: str) -> tuple[int, str]:
    r"""(1-based line number, whole line) of ``text`` at the end of ``text_before``.

    >>> divergent_line("<updated-code>a = 1\nb = ", "<updated-code>a = 1\nb = 2\nc\n")
    (2, 'b = 2')
    """
    at = len(text_before)
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text_before.count("\n") + 1, text[start: end if end >= 0 else len(text)]


def compare_edit(tokenizer: Any, ref: list[int], cand: list[int]) -> dict[str, Any]:
    """Whether two outputs are identical, or their first divergence: the token, the line
    of the answer it is on, and the text of both outputs around it."""
    index = first_divergence(ref, cand)
    row: dict[str, Any] = {"identical": index is None, "reference_tokens": len(ref),
                           "quantized_tokens": len(cand)}
    if index is not None:
        lo, hi = max(0, index - CONTEXT_TOKENS), index + CONTEXT_TOKENS
        before = tokenizer.decode(ref[:index])
        line, ref_line = divergent_line(before, tokenizer.decode(ref))
        row["first_divergence"] = {
            "token_index": index, "line": line,
            "reference_line": ref_line,
            "quantized_line": divergent_line(before, tokenizer.decode(cand))[1],
            "reference_text": tokenizer.decode(ref[lo:hi]),
            "quantized_text": tokenizer.decode(cand[lo:hi]),
        }
    return row


def merged_file(tokenizer: Any, fmt: Any, reading: Reading,
                stop_ids: Collection[int]) -> str | None:
    """The merged file of an answer the model finished; None when it did not finish (cut
    at the token budget, or read only until it could no longer be exact) or a kortix
    answer has no closing tag (the server refuses both)."""
    if not reading.finished:
        return None
    text = tokenizer.decode([t for t in reading.tokens if t not in stop_ids])
    if fmt.close_tag and fmt.close_tag not in text:
        return None
    return str(fmt.extract(text))


def read_edit(tokenizer: Any, fmt: Any, request: GenerationRequest, truth: list[int],
              updated: str, reference: Runtime, candidate: Runtime,
              ) -> tuple[Reading, Reading]:
    """Both models' answers to one merge, read as far as the check needs
    (:mod:`.reading`); runtimes without sessions generate whole answers."""
    from fastapply.decoding.drafting import SpeculativeEditsDrafter
    from fastapply.decoding.speculate import start
    from fastapply.engine_build.reading import Reading, could_be_exact, read_pair

    sources = [truth, *request.sources]  # the true answer drafts first: lossless
    readings: list[Reading] = []
    for runtime in (reference, candidate):
        budget = start(len(request.prompt_ids), request.max_new_tokens,
                       runtime.context_limit)[0]
        session = getattr(runtime, "session", None)  # SessionRuntime's
        if session is None:
            t0 = time.perf_counter()
            gen = runtime.generate(dataclasses.replace(request, sources=sources))
            readings.append(Reading.whole(gen, budget))
            readings[-1].seconds = time.perf_counter() - t0
            continue
        readings.append(Reading(session(request.prompt_ids),
                                SpeculativeEditsDrafter(sources, max_k=request.max_draft_len),
                                budget, request.stop_ids, request.max_draft_len))
    # A tokenizer that cleans up spaces on decode can change a prefix's text: read whole.
    cleans = bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))

    def exact_open(r: Reading) -> bool:
        if cleans:
            return True
        text = tokenizer.decode([t for t in r.tokens if t not in request.stop_ids])
        return could_be_exact(fmt, text, updated)

    try:
        read_pair(readings[0], readings[1], exact_open)
    finally:
        for r in readings:
            r.close()
    return readings[0], readings[1]


def parity(records: list[dict[str, Any]], tokenizer: Any, prompt_format: str,
           reference: Runtime, candidate: Runtime, max_tokens: int, max_draft_len: int,
           progress: Callable[[int, dict[str, Any]], None] | None = None,
           answer_margin_tokens: int = 0) -> dict[str, Any]:
    """Merge ``records`` on both runtimes, greedy through fastapply's speculative loop,
    each answer read as far as its outcomes need (:func:`read_edit`).

    Each record is prompted in its own ``format`` where it names one (the validation
    examples do, as in training), else in ``prompt_format``. Per edit: whether each
    model's merged file is exactly the record's ``updated`` (exact), and whether the two
    outputs are identical token for token (an answer cut at the budget on either side
    is not: nothing says where it would have ended). Returns the counts and shares
    (``exact_rate_reference``, ``exact_rate_quantized``, ``exact_drop``,
    ``exact_kept_share``: of the reference's exact edits, the share the candidate keeps;
    ``identical_share``), the seconds and passes each model took, and a row per edit
    (also handed to ``progress`` with its 1-based number as it is done). The budget of an
    edit is ``max_tokens``, or with ``answer_margin_tokens`` the true answer's length plus
    that margin where it is smaller.
    """
    from fastapply.decoding import prompts
    from fastapply.engine_build.quantize import record_snippet

    stop_ids = prompts.stop_token_ids(tokenizer, reference.eos_token_id)
    rows = []
    start = time.perf_counter()
    passes = {"reference": 0, "quantized": 0}
    seconds = {"reference": 0.0, "quantized": 0.0}
    for rec in records:
        fmt = prompts.get_format(rec.get("format") or prompt_format)
        truth = prompts.encode(tokenizer, fmt.expected_output(rec["updated"]))
        budget = max_tokens
        if answer_margin_tokens:  # + 1: the stop token
            budget = min(max_tokens, len(truth) + 1 + answer_margin_tokens)
        request = prompts.build_request(tokenizer, fmt, rec["original"], record_snippet(rec),
                                        stop_ids=stop_ids, max_new_tokens=budget,
                                        max_draft_len=max_draft_len)
        ref, cand = read_edit(tokenizer, fmt, request, truth, rec["updated"], reference,
                              candidate)
        row = {"id": rec.get("id"), "format": fmt.name, "budget_tokens": budget,
               **compare_edit(tokenizer, ref.tokens, cand.tokens)}
        readings = {"reference": ref, "quantized": cand}
        # cut: the model did not end its answer (the token budget did)
        row["cut"] = [name for name, r in readings.items() if r.cut]
        # read only until its outcomes were decided (not exact, parted from the other)
        row["stopped_early"] = [name for name, r in readings.items() if not r.done]
        row["identical"] = row["identical"] and ref.finished and cand.finished
        for name, r in readings.items():
            row[f"{name}_exact"] = merged_file(tokenizer, fmt, r, stop_ids) == rec["updated"]
            row[f"{name}_passes"] = r.passes
            passes[name] += r.passes
            seconds[name] += r.seconds
        rows.append(row)
        if progress is not None:
            progress(len(rows), row)
    return summarize(rows) | {
        "max_tokens": max_tokens, "answer_margin_tokens": answer_margin_tokens,
        "max_draft_len": max_draft_len, "passes": passes,
        "reference_seconds": round(seconds["reference"], 1),
        "quantized_seconds": round(seconds["quantized"], 1),
        "read_seconds": round(time.perf_counter() - start, 1), "per_edit": rows}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and shares of a check's rows (see :func:`parity`)."""
    n = len(rows)
    identical = sum(r["identical"] for r in rows)
    exact = {name: sum(r[f"{name}_exact"] for r in rows) for name in ("reference", "quantized")}
    kept = sum(r["reference_exact"] and r["quantized_exact"] for r in rows)
    return {"edits": n, "identical": identical, "identical_share": identical / n if n else 0.0,
            "cut": sum(bool(r["cut"]) for r in rows),
            "stopped_early": sum(bool(r.get("stopped_early")) for r in rows),
            "exact_reference": exact["reference"], "exact_quantized": exact["quantized"],
            "exact_kept": kept,
            "exact_kept_share": kept / exact["reference"] if exact["reference"] else 1.0,
            "exact_rate_reference": exact["reference"] / n if n else 0.0,
            "exact_rate_quantized": exact["quantized"] / n if n else 0.0,
            "exact_drop": (exact["reference"] - exact["quantized"]) / n if n else 0.0}


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
                   recipe: str = "fp8") -> tuple[TorchRuntime, TorchRuntime]:
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

    # Each model runs every prompt whole on a dynamic cache: a parity check compares
    # models, not caches; K comes with each request (the profile's max_draft_len).
    reference = TorchRuntime.around(load(), context_limit)
    quantized = quantize_model(load(), calibration, "cpu", recipe)
    if fold_weights:
        mtq.fold_weight(quantized)
    return reference, TorchRuntime.around(quantized, context_limit)


def check_served(model_dir: str | Path, records: list[dict[str, Any]], max_tokens: int,
                 prompt_format: str, work_dir: str | Path) -> dict[str, Any]:
    """Merges served by tritonserver (torch runtime, CPU float32) vs in-process ones."""
    from fastapply.client.grpc import FastApplyClient
    from fastapply.engine_build.quantize import record_snippet
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import TritonServer
    from fastapply.service import FastApplyService, IncompleteOutput, ServiceConfig

    # policy model: both sides serve the model's whole output, the thing compared (the
    # agreement policies answer certain merges without the model, and stop the others
    # where the model leaves the deterministic merge, refused)
    params: dict[str, Any] = {"runtime": "torch", "model_dir": str(model_dir), "device": "cpu",
              "dtype": "float32", "prompt_format": prompt_format, "policy": "model"}
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
