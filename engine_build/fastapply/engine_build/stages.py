"""The stages of one build, run in a build directory with a fixed layout::

    OUT/adapter/            random LoRA adapter (tiny-cpu only)
    OUT/merged/             base + LoRA, bf16 HF checkpoint with tokenizer
    OUT/quantized/hf/       unified FP8 HF checkpoint (hf_quant_config.json)
    OUT/quantized/trtllm-checkpoint/   FP8 TRT-LLM checkpoint (Llama family only)
    OUT/engine/             trtllm-build output
    OUT/model_repository/   the rendered Triton model repository
    OUT/logs/<stage>.log    what modelopt and friends print
    OUT/build-report.json   per stage: status, seconds, artefacts; parity figures

Every stage reads its inputs from that layout, so ``fastapply build quantize`` after
``fastapply build merge-lora`` continues the same build. :func:`preflight` runs first
and checks every input without loading a model.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapply.engine_build import checks
from fastapply.engine_build.errors import BuildError, ToolMissing
from fastapply.engine_build.profile import Profile

STAGES = ("merge-lora", "quantize", "engine", "render", "verify")


@dataclass
class Build:
    """One build: its profile, directory and the checked inputs."""

    profile: Profile
    out: Path
    #: The base model directory (resolved: "tiny" -> the tiny model's directory).
    model_dir: Path
    #: ``config.json`` of the base model.
    model_config: dict[str, Any]
    #: Calibration records (the first calibration.num_samples of the data).
    calibration: list[dict[str, Any]] = field(default_factory=list)
    #: Held-out records for verify (after the calibration ones).
    held_out: list[dict[str, Any]] = field(default_factory=list)
    #: Whether ``held_out`` really excludes the calibration records.
    held_out_disjoint: bool = True

    @property
    def family(self) -> str:
        return checks.model_family(self.model_config)

    @property
    def merged_dir(self) -> Path:
        """The model later stages start from: the merge output, or the base model."""
        return self.out / "merged" if self.profile.adapter_dir else self.model_dir

    @property
    def report_path(self) -> Path:
        return self.out / "build-report.json"


def resolve_model_dir(value: str | None) -> Path:
    if not value:
        raise BuildError("no model directory: pass --model DIR (the profile has none)")
    if value == "tiny":
        from fastapply.tinymodel import ensure_tiny_model

        return ensure_tiny_model()
    return Path(value)


def split_records(profile: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(calibration, held-out, disjoint) records from the profile's calibration data."""
    from fastapply.examples import load_edits

    records = load_edits(profile.calibration.data)
    calib = records[: profile.calibration.num_samples]
    held = records[profile.calibration.num_samples:][: profile.verify.num_edits]
    if held:
        return calib, held, True
    return calib, records[-profile.verify.num_edits:], False


def preflight(profile: Profile, out: Path) -> Build:
    """Check every input (no model is loaded); raise BuildError naming the problem."""
    model_dir = resolve_model_dir(profile.model_dir)
    config = checks.read_model_config(model_dir)
    checks.check_tokenizer(model_dir)
    adapter = profile.adapter_dir
    if adapter and adapter != "random":
        checks.check_adapter(adapter, config, model_dir)
    checks.check_calibration(profile.calibration.data, profile.calibration.num_samples)
    calib, held, disjoint = split_records(profile)
    out.mkdir(parents=True, exist_ok=True)
    return Build(profile, out, model_dir, config, calib, held, disjoint)


# -- the report ---------------------------------------------------------------------------


def load_report(build: Build) -> dict[str, Any]:
    if build.report_path.is_file():
        return dict(json.loads(build.report_path.read_text()))
    return {}


def save_stage(build: Build, stage: str, entry: dict[str, Any]) -> None:
    """Merge one stage's entry into build-report.json."""
    report = load_report(build)
    report["profile"] = asdict(build.profile)
    report["model_dir"] = str(build.model_dir)
    report.setdefault("stages", {})[stage] = entry
    if stage == "verify" and "parity" in entry:
        report["parity"] = {k: v for k, v in entry["parity"].items() if k != "per_edit"}
    build.report_path.write_text(json.dumps(report, indent=2) + "\n")


@contextlib.contextmanager
def stage_log(build: Build, stage: str) -> Iterator[Path]:
    """Send what libraries print during a stage to OUT/logs/<stage>.log."""
    log = build.out / "logs" / f"{stage}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if stage in ("merge-lora", "quantize", "verify"):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    with log.open("w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        yield log


# -- the stages ---------------------------------------------------------------------------


def merge_stage(build: Build) -> dict[str, Any]:
    from fastapply.engine_build.lora import make_random_adapter, merge_lora

    adapter = build.profile.adapter_dir
    if not adapter:
        return {"status": "skipped", "reason": "no adapter: later stages use the model as is"}
    if adapter == "random":
        adapter = str(make_random_adapter(build.model_dir, build.out / "adapter"))
    merged = merge_lora(build.model_dir, adapter, build.out / "merged")
    return {"status": "done", "adapter_dir": adapter, "merged_dir": str(merged)}


def quantize_stage(build: Build) -> dict[str, Any]:
    from fastapply.engine_build.quantize import quantize

    source = build.merged_dir
    if not (source / "config.json").is_file():
        raise BuildError(f"{source} is missing: run the merge-lora stage first")
    result = quantize(source, build.out / "quantized", records=build.calibration,
                      prompt_format=build.profile.prompt_format,
                      max_prompt_tokens=build.profile.calibration.max_prompt_tokens,
                      device=build.profile.device, family=build.family)
    return {"status": "done", **result}


def engine_stage(build: Build, strict: bool = False) -> dict[str, Any]:
    """trtllm-build; a missing tool stops the build when ``strict`` or the runtime needs it."""
    from fastapply.engine_build.engine import build_command, build_engine, missing_message

    ckpt = build.out / "quantized" / "trtllm-checkpoint"
    engine_dir = build.out / "engine"
    if build.family != "llama":
        command = build_command(build.profile, ckpt, engine_dir)
        return {"status": "skipped", "command": " ".join(command),
                "reason": f"{build.family} has no TRT-LLM checkpoint (modelopt exports only "
                          f"Llama-family models that way); serve the FP8 HF checkpoint "
                          f"with runtime trtllm-pytorch",
                "trtllm_build": missing_message(command)}
    try:
        return {"status": "done", **build_engine(build.profile, ckpt, engine_dir)}
    except ToolMissing as exc:
        if strict or build.profile.runtime == "trtllm-engine":
            raise
        return {"status": "skipped", "reason": str(exc), "command": " ".join(exc.command)}


def render_params(build: Build) -> dict[str, Any]:
    """Model-repository parameters for the profile's runtime."""
    p = build.profile
    params: dict[str, Any] = {"runtime": p.runtime, "prompt_format": p.prompt_format,
                              "max_draft_len": p.max_draft_len, "context_limit": p.max_seq_len,
                              "device": p.device}
    if p.runtime == "torch":
        params.update(model_dir=build.merged_dir,
                      dtype="float32" if p.device == "cpu" else "bfloat16")
    elif p.runtime == "trtllm-pytorch":
        params.update(model_dir=build.out / "quantized" / "hf")
    else:
        params.update(engine_dir=build.out / "engine", tokenizer_dir=build.merged_dir)
    return params


def render_stage(build: Build) -> dict[str, Any]:
    try:
        from fastapply.model_repo import render_repository
    except ImportError:
        raise BuildError("fastapply.model_repo is not available in this installation; "
                         "reinstall fastapply") from None
    out = render_repository(build.out / "model_repository", **render_params(build))
    config = out / "fast_apply" / "config.pbtxt"
    if "${" in config.read_text():
        raise BuildError(f"{config}: placeholders left unfilled")
    return {"status": "done", "model_repository": str(out), "runtime": build.profile.runtime}


def verify_stage(build: Build) -> dict[str, Any]:
    from fastapply.engine_build.verify_run import run_verify

    return run_verify(build, served=build.profile.verify.served)


STAGE_FUNCS: dict[str, Callable[[Build], dict[str, Any]]] = {
    "merge-lora": merge_stage, "quantize": quantize_stage, "engine": engine_stage,
    "render": render_stage, "verify": verify_stage,
}


def run_stage(build: Build, stage: str,
              func: Callable[[Build], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run one stage with its output logged and timed; record it in the report."""
    start = time.perf_counter()
    try:
        with stage_log(build, stage):
            entry = (func or STAGE_FUNCS[stage])(build)
    except BuildError as exc:
        entry = {"status": "failed", "error": str(exc)}
        if isinstance(exc, ToolMissing):
            entry["command"] = " ".join(exc.command)
        entry["seconds"] = round(time.perf_counter() - start, 3)
        save_stage(build, stage, entry)
        raise
    entry["seconds"] = round(time.perf_counter() - start, 3)
    save_stage(build, stage, entry)
    return entry
