"""``fastapply build`` (also ``python -m fastapply.engine_build``).

Subcommands ``merge-lora``, ``quantize``, ``engine``, ``render``, ``verify`` run one stage
in a build directory; ``all`` runs them in order with a progress line per stage and
writes ``OUT/build-report.json``. Every subcommand takes ``--config PROFILE`` (a shipped
profile name or a YAML file) and ``--out DIR``; ``--model``, ``--adapter`` and
``--calibration`` override the profile. Inputs are checked before any model is loaded.

Exit status: 0 done; 1 a stage failed (parity under the threshold included); 2 bad input;
3 a tool is missing here (``trtllm-build``: the message names the container and command).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from fastapply.engine_build.errors import BuildError, ToolMissing


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="PROFILE",
                   help="profile name (qwen2.5-coder-1.5b, qwen2.5-coder-7b, llama-3.1-8b, "
                        "tiny-cpu) or a profile YAML file")
    p.add_argument("--out", required=True, type=Path, help="build directory")
    p.add_argument("--model", help="Hugging Face model directory (overrides the profile)")
    p.add_argument("--adapter", help="peft LoRA adapter directory (overrides the profile)")
    p.add_argument("--no-adapter", action="store_true", help="ignore the profile's adapter")
    p.add_argument("--calibration", help="JSONL of edits for calibration and verify")


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
            p.add_argument("--candidate", default="fakequant",
                           choices=["fakequant", "trtllm-engine", "trtllm-pytorch"],
                           help="what is compared with the reference (default: modelopt's "
                                "simulated FP8 on CPU)")
            p.add_argument("--min-exact-match", type=float,
                           help="parity threshold 0..1 (overrides the profile)")


def make_profile(args: argparse.Namespace) -> Any:
    from fastapply.engine_build.profile import load_profile, with_overrides

    profile = load_profile(args.config)
    profile = with_overrides(profile, model_dir=args.model, adapter_dir=args.adapter)
    if args.no_adapter:
        profile = dataclasses.replace(profile, adapter_dir=None)
    if args.calibration:
        profile.calibration = dataclasses.replace(profile.calibration, data=args.calibration)
    if getattr(args, "served", None):
        profile.verify = dataclasses.replace(profile.verify, served=True)
    if getattr(args, "min_exact_match", None) is not None:
        profile.verify = dataclasses.replace(profile.verify,
                                             min_exact_match=args.min_exact_match)
    return profile.check()


def _summary(entry: dict[str, Any]) -> str:
    if entry["status"] == "skipped":
        return f"skipped ({entry.get('reason', '')[:90]})"
    parity = entry.get("parity")
    if parity:
        return (f"{entry['status']}: exact match {parity['exact_matches']}/{parity['edits']} "
                f"({parity['exact_match_rate']:.2f}, threshold {parity['min_exact_match']})")
    keys = ("merged_dir", "hf_checkpoint_dir", "engine_dir", "model_repository")
    artefact = next((entry[k] for k in keys if k in entry), "")
    return f"{entry['status']} {artefact}"


def run_stages(build: Any, names: list[str], candidate: str) -> int:
    """Run ``names`` in order with a progress line each; the exit status."""
    from fastapply.engine_build import stages
    from fastapply.engine_build.verify_run import run_verify

    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name} ...", flush=True)
        func = None
        if name == "engine" and len(names) == 1:  # asked for by name: a missing tool stops
            def func(b: Any) -> dict[str, Any]:
                return stages.engine_stage(b, strict=True)
        elif name == "verify":
            def func(b: Any) -> dict[str, Any]:
                return run_verify(b, served=b.profile.verify.served, candidate=candidate)
        try:
            entry = stages.run_stage(build, name, func)
        except ToolMissing as exc:
            print(f"[{i}/{len(names)}] {name} stopped: {exc}", file=sys.stderr)
            return 3
        except BuildError as exc:
            print(f"[{i}/{len(names)}] {name} failed: {exc}", file=sys.stderr)
            return 1
        print(f"[{i}/{len(names)}] {name} {entry['seconds']:.1f} s: {_summary(entry)}",
              flush=True)
        if entry["status"] == "failed":
            print(f"fastapply build: {name} failed: {entry.get('error')}", file=sys.stderr)
            return 1
        if entry.get("message"):
            print(f"    note: {entry['message']}")
    return 0


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
    status = run_stages(build, names, getattr(args, "candidate", "fakequant"))
    total = time.perf_counter() - start
    print(f"fastapply build {args.build_command}: {'ok' if status == 0 else 'stopped'} in "
          f"{total:.1f} s; report: {build.report_path}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastapply.engine_build",
                                     description="LoRA merge -> FP8 -> TensorRT-LLM engine")
    add_arguments(parser)
    return run(parser.parse_args(argv))
