"""The verify stage: choose reference and candidate, run the parity check, judge it.

Candidates:

* ``fakequant`` (default; CPU): modelopt's simulated FP8 of the merged model in float32,
  calibrated on the same prompts as the quantize stage, against the float32 model;
* ``trtllm-engine`` / ``trtllm-pytorch`` (GPU, inside the TensorRT-LLM container): the
  built engine / the FP8 HF checkpoint on the PyTorch backend, against the bf16 model.
"""

from __future__ import annotations

import time
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
        return fakequant_pair(build.merged_dir, calib, p.max_seq_len, recipe=p.quantization)
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


#: Diverged edits named in the stage's error message; the report names them all.
NAMED_IN_MESSAGE = 8


def _short(text: str, limit: int = 64) -> str:
    """``text`` as a one-line literal of at most about ``limit`` characters."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def describe_edit(row: dict[str, Any]) -> str:
    r"""One edit that is not identical, in a line: its id, where and how it diverged.

    >>> describe_edit({"id": "a/b@1:x.py", "identical": False, "cut": [],
    ...     "first_divergence": {"token_index": 7, "reference_text": "x = 1\n",
    ...                          "quantized_text": "x = 2\n"}})
    "a/b@1:x.py at token 7: reference 'x = 1\\n' / quantized 'x = 2\\n'"
    >>> describe_edit({"id": "a", "identical": False, "cut": [], "first_divergence": {
    ...     "token_index": 40, "line": 3, "reference_line": "    return x",
    ...     "quantized_line": "    return y"}})
    "a at line 3 (token 40): reference '    return x' / quantized '    return y'"
    >>> describe_edit({"id": "c", "identical": False, "cut": ["reference", "quantized"],
    ...                "reference_tokens": 900})
    'c: identical for 900 tokens, then both were cut at the budget'
    """
    cut = row.get("cut") or []
    div = row.get("first_divergence")
    if div is None:
        return (f"{row['id']}: identical for {row['reference_tokens']} tokens, then "
                f"{'both were' if len(cut) == 2 else cut[0] + ' was'} cut at the budget")
    if "line" in div:
        text = (f"{row['id']} at line {div['line']} (token {div['token_index']}): reference "
                f"{_short(div['reference_line'])} / quantized {_short(div['quantized_line'])}")
    else:
        text = (f"{row['id']} at token {div['token_index']}: reference "
                f"{_short(div['reference_text'])} / quantized {_short(div['quantized_text'])}")
    return text + (f" ({' and '.join(cut)} cut at the budget)" if cut else "")


def name_edits(rows: list[dict[str, Any]], limit: int = NAMED_IN_MESSAGE) -> str:
    """The first ``limit`` edits described, and how many more there are."""
    named = "; ".join(describe_edit(r) for r in rows[:limit])
    more = len(rows) - limit
    return named + (f"; and {more} more (all in build-report.json)" if more > 0 else "")


def judge(figures: dict[str, Any], verify: Any) -> list[str]:
    """What fails the stage, as sentences that name the edits concerned.

    ``figures``: :func:`.verify.parity`'s (plus ``logits`` where measured); ``verify``:
    the profile's thresholds. What a user sees decides: the exact rate may drop by at most
    ``max_exact_drop`` and, of the edits the reference gets exact, at least
    ``min_exact_kept`` must stay exact. Compared in counts of edits, so one edit of 100
    lost is within a drop of 0.01, and 37 of 38 kept meets 0.97. Identical outputs and
    the logits cosine fail it only under their own (loose, or off) thresholds.
    """
    problems = []
    n, rows = figures["edits"], figures["per_edit"]
    lost_rows = [r for r in rows if r["reference_exact"] and not r["quantized_exact"]]
    lost = figures["exact_reference"] - figures["exact_quantized"]
    if lost > verify.max_exact_drop * n + 1e-9:
        problems.append(
            f"exact rate {figures['exact_rate_quantized']:.3f} quantized against "
            f"{figures['exact_rate_reference']:.3f} reference: {100 * lost / n:.1f} points "
            f"lost, more than verify.max_exact_drop {verify.max_exact_drop}; exact on the "
            f"reference only: {name_edits(lost_rows)}")
    exact_ref = figures["exact_reference"]
    kept = exact_ref - len(lost_rows)
    if exact_ref and kept + 1e-9 < verify.min_exact_kept * exact_ref:
        problems.append(
            f"of the {exact_ref} edits the reference merges exactly, the quantized model "
            f"keeps {kept} ({kept / exact_ref:.3f}), under verify.min_exact_kept "
            f"{verify.min_exact_kept}; lost: {name_edits(lost_rows)}")
    if verify.min_identical and figures["identical"] + 1e-9 < verify.min_identical * n:
        diverged = [r for r in rows if not r["identical"]]
        problems.append(
            f"identical outputs {figures['identical']}/{n} ({figures['identical_share']:.3f}) "
            f"are under verify.min_identical {verify.min_identical}; the {len(diverged)} "
            f"edits that diverged: {name_edits(diverged)}")
    logits = figures.get("logits")
    if logits and logits["logits_cosine_mean"] < verify.min_logits_cosine:
        problems.append(f"logits cosine {logits['logits_cosine_mean']:.4f} is under "
                        f"verify.min_logits_cosine {verify.min_logits_cosine}: the quantized "
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
    cpu_start, start = time.process_time(), time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(build.merged_dir)
    reference, cand = _runtimes(build, tokenizer, p.verify.candidate)
    setup_seconds = round(time.perf_counter() - start, 1)

    def progress(k: int, row: dict[str, Any]) -> None:  # a line per edit in logs/verify.log
        exact = "".join("x" if row[f"{m}_exact"] else "-" for m in ("reference", "quantized"))
        state = f"exact {exact}, " + ("identical" if row["identical"] else describe_edit(row))
        print(f"edit {k}/{len(build.held_out)} {time.perf_counter() - start:.0f} s: {state}",
              flush=True)

    figures = parity(build.held_out, tokenizer, p.prompt_format, reference, cand,
                     p.verify.max_tokens, p.max_draft_len, progress=progress,
                     answer_margin_tokens=p.verify.answer_margin_tokens)
    figures["setup_seconds"] = setup_seconds  # loading both models, calibrating FP8
    figures.update(candidate=p.verify.candidate, recipe=p.quantization,
                   held_out_disjoint=build.held_out_disjoint,
                   data=p.verify.data or f"calibration data after the first "
                                         f"{p.calibration.num_samples}",
                   min_identical=p.verify.min_identical,
                   max_exact_drop=p.verify.max_exact_drop,
                   min_exact_kept=p.verify.min_exact_kept,
                   lost=[describe_edit(r) for r in figures["per_edit"]
                         if r["reference_exact"] and not r["quantized_exact"]],
                   diverged=[describe_edit(r) for r in figures["per_edit"] if not r["identical"]])
    if p.verify.candidate == "fakequant":
        start = time.perf_counter()
        read = build.held_out[: p.verify.logits_edits or None]
        sequences = merge_sequences(tokenizer, p.prompt_format, read,
                                    p.calibration.max_prompt_tokens)
        figures["logits"] = {**logits_agreement(reference.model, cand.model, sequences),
                             "min_logits_cosine": p.verify.min_logits_cosine,
                             "seconds": round(time.perf_counter() - start, 1)}
    entry: dict[str, Any] = {"parity": figures}
    figures["cpu_seconds"] = round(time.process_time() - cpu_start, 1)  # all threads
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
