"""``fastapply build`` (also ``python -m fastapply.engine_build``).

Subcommands ``merge-lora``, ``quantize``, ``engine``, ``render``, ``verify`` run one stage
in the build's own folder ``OUT/builds/KEY`` (see :mod:`.layout`); ``all`` runs them in
order with a progress line per stage and writes ``OUT/builds/KEY/build-report.json``.
Once every stage is done the build is published: ``OUT/current`` is switched to it
atomically. Every subcommand takes ``--config PROFILE`` (a shipped profile name or a YAML
file) and ``--out DIR``; ``--model``, ``--adapter``, ``--calibration``, ``--device``,
``--quantization``, ``--candidate`` and ``--min-identical`` override the profile. Inputs
are checked before any model is loaded.

Exit status: 0 done; 1 a stage failed (the FP8 check under a threshold included); 2 bad
input; 3 a tool is missing here (``trtllm-build``: the message names the container and
command; ``all`` still runs the stages that do not need it, the FP8 check included).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from fastapply.engine_build import layout
from fastapply.engine_build.errors import BuildError, ToolMissing
from fastapply.engine_build.profile import CANDIDATES, RECIPES, profile_names


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="PROFILE",
                   help="profile name (default: the embedded default model's, whichever "
                        f"base it has; {', '.join(profile_names())}) or a profile YAML file")
    p.add_argument("--out", required=True, type=Path,
                   help="build root: each build goes to OUT/builds/KEY, the finished one is "
                        "published as OUT/current")
    p.add_argument("--model", help="Hugging Face model directory (overrides the profile)")
    p.add_argument("--adapter", help="peft LoRA adapter directory (overrides the profile)")
    p.add_argument("--no-adapter", action="store_true", help="ignore the profile's adapter")
    p.add_argument("--calibration", help="JSONL of edits for calibration (and for verify "
                                         "where the profile names no verify.data)")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="where merge, calibration and verify run (overrides the profile)")
    p.add_argument("--quantization", choices=RECIPES,
                   help="FP8 recipe: fp8 (FP8 KV cache), fp8-bf16-kv, fp8-weights "
                        "(overrides the profile; a recipe is its own build)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="build_command", required=True, metavar="STAGE")
    helps = {
        "merge-lora": "merge the LoRA adapter into the model (bf16)",
        "quantize": "FP8 weights + KV cache with modelopt; export HF (+ TRT-LLM) checkpoints",
        "engine": "trtllm-build the FP8 TRT-LLM checkpoint (external draft tokens)",
        "render": "render the Triton model repository for the profile's runtime",
        "verify": "parity of quantized vs reference merges on held-out edits",
        "all": "run every stage in order and write OUT/build-report.json",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=text)
        _common(p)
        if name in ("verify", "all"):
            p.add_argument("--served", action="store_true", default=None,
                           help="also check served merges equal in-process merges "
                                "(starts tritonserver)")
            p.add_argument("--candidate", choices=CANDIDATES,
                           help="what is compared with the reference (overrides the "
                                "profile; default: modelopt's simulated FP8 on CPU)")
            p.add_argument("--min-identical", type=float,
                           help="FP8 check: least share 0..1 of held-out edits whose "
                                "quantized output is identical to the reference's "
                                "(overrides the profile's verify.min_identical)")


def make_profile(args: argparse.Namespace) -> Any:
    from fastapply.engine_build.profile import load_profile, with_overrides

    profile = load_profile(args.config)
    profile = with_overrides(profile, model_dir=args.model, adapter_dir=args.adapter,
                             device=args.device, quantization=args.quantization)
    if args.no_adapter:
        profile = dataclasses.replace(profile, adapter_dir=None)
    if args.calibration:
        profile.calibration = dataclasses.replace(profile.calibration, data=args.calibration)
    if getattr(args, "served", None):
        profile.verify = dataclasses.replace(profile.verify, served=True)
    if getattr(args, "candidate", None):
        profile.verify = dataclasses.replace(profile.verify, candidate=args.candidate)
    if getattr(args, "min_identical", None) is not None:
        profile.verify = dataclasses.replace(profile.verify, min_identical=args.min_identical)
    return profile.check()


def _summary(entry: dict[str, Any]) -> str:
    if entry["status"] == "skipped":
        return f"skipped ({entry.get('reason', '')[:90]})"
    parity = entry.get("parity")
    if parity:
        return (f"{entry['status']}: exact {parity['exact_rate_reference']:.3f} reference, "
                f"{parity['exact_rate_quantized']:.3f} quantized (drop at most "
                f"{parity['max_exact_drop']}); exact kept {parity['exact_kept']}/"
                f"{parity['exact_reference']} (at least {parity['min_exact_kept']}); "
                f"identical {parity['identical']}/{parity['edits']} "
                f"({parity['identical_share']:.3f}, reported)")
    keys = ("merged_dir", "hf_checkpoint_dir", "engine_dir", "model_repository")
    artefact = next((entry[k] for k in keys if k in entry), "")
    return f"{entry['status']} {artefact}"


def run_stages(build: Any, names: list[str]) -> int:
    """Run ``names`` in order with a progress line each; the exit status.

    When ``all`` finds trtllm-build missing, the stages that do not need the engine still
    run (the FP8 check above all), then the build stops with status 3 unpublished; a
    failed stage makes it 1.
    """
    from fastapply.engine_build import stages

    status = 0
    for i, name in enumerate(names, 1):
        step = f"[{i}/{len(names)}] {name}"
        if status == 3 and stages.needs_engine(build, name):
            print(f"{step} not run: it needs the engine", flush=True)
            continue
        print(f"{step} ...", flush=True)
        func = None
        if name == "engine" and len(names) == 1:  # asked for by name: a missing tool stops
            def func(b: Any) -> dict[str, Any]:
                return stages.engine_stage(b, strict=True)
        try:
            entry = stages.run_stage(build, name, func)
        except ToolMissing as exc:
            print(f"{step} stopped: {exc}", file=sys.stderr)
            if name != "engine" or len(names) == 1:
                return 3
            print(f"{step}: trtllm-build is missing here; the stages that do not need the "
                  f"engine still run, and the build is not published", flush=True)
            status = 3
            continue
        except BuildError as exc:
            print(f"{step} failed: {exc}", file=sys.stderr)
            return 1
        print(f"{step} {entry['seconds']:.1f} s: {_summary(entry)}", flush=True)
        if entry["status"] == "failed":
            print(f"fastapply build: {name} failed: {entry.get('error')}", file=sys.stderr)
            return 1
        if entry.get("message"):
            print(f"    note: {entry['message']}")
    return status


def run(args: argparse.Namespace) -> int:
    from fastapply.engine_build import stages

    start = time.perf_counter()
    try:
        profile = make_profile(args)
        build = stages.preflight(profile, args.out)
    except BuildError as exc:
        print(f"fastapply build: {exc}", file=sys.stderr)
        return 2
    names = list(stages.STAGES) if args.build_command == "all" else [args.build_command]
    if args.build_command == "all" and build.is_published:  # it was complete when published
        print(f"fastapply build all: {build.out} is already built with these inputs and "
              f"published as {build.root}/{layout.CURRENT}; nothing to do")
        return 0
    print(f"fastapply build: building in {build.out}", flush=True)
    status = run_stages(build, names)
    pointer = stages.publish_if_complete(build) if status == 0 else None
    total = time.perf_counter() - start
    print(f"fastapply build {args.build_command}: {'ok' if status == 0 else 'stopped'} in "
          f"{total:.1f} s; report: {build.report_path}")
    if pointer is not None:
        print(f"published: {pointer} -> {build.out}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastapply.engine_build",
                                     description="LoRA merge -> FP8 -> TensorRT-LLM engine")
    add_arguments(parser)
    return run(parser.parse_args(argv))
