"""The stages of one build, run in its own keyed folder (see :mod:`.layout`)::

    ROOT/builds/KEY/   merged/, quantized/hf/, engine/, model_repository/, logs/, ...
    ROOT/current       -> builds/KEY, switched once every stage is done

Every stage reads its inputs from that layout, so ``fastapply build quantize`` after
``fastapply build merge-lora`` continues the same build (same inputs, same KEY).
:func:`preflight` runs first and checks every input without loading a model. Stages that
write artefacts refuse to run in the published build: a rebuild never overwrites what a
server may be reading.
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

from fastapply.engine_build import checks, layout
from fastapply.engine_build.errors import BuildError, ToolMissing
from fastapply.engine_build.profile import Profile

STAGES = ("merge-lora", "quantize", "engine", "render", "verify")


@dataclass
class Build:
    """One build: its profile, directory and the checked inputs."""

    profile: Profile
    #: This build's own folder, ``ROOT/builds/KEY`` (every artefact goes under it).
    out: Path
    #: The base model directory (resolved: "tiny" -> the tiny model's directory).
    model_dir: Path
    #: ``config.json`` of the base model.
    model_config: dict[str, Any]
    #: Calibration records (the first calibration.num_samples of the data).
    calibration: list[dict[str, Any]] = field(default_factory=list)
    #: Held-out records for verify (``verify.data``, or after the calibration ones).
    held_out: list[dict[str, Any]] = field(default_factory=list)
    #: Whether ``held_out`` really excludes the calibration records.
    held_out_disjoint: bool = True
    #: The build root (``--out``), holding ``builds/`` and the ``current`` pointer.
    root: Path | None = None

    @property
    def family(self) -> str:
        return checks.model_family(self.model_config)

    @property
    def merged_dir(self) -> Path:
        """The model later stages start from: the merge output, or the base model."""
        return self.out / layout.MERGED if self.profile.adapter_dir else self.model_dir

    @property
    def report_path(self) -> Path:
        return self.out / layout.REPORT

    def path(self, name: str) -> Path:
        """An artefact's path in this build (``name``: a :mod:`.layout` constant)."""
        return self.out / name

    @property
    def is_published(self) -> bool:
        """Whether ROOT/current points at this build (a server may be reading it)."""
        return self.root is not None and layout.published(self.root) == self.out.resolve()

    @property
    def complete(self) -> bool:
        """Whether every stage is recorded as done or skipped."""
        stages = load_report(self).get("stages", {})
        return all(stages.get(s, {}).get("status") in ("done", "skipped") for s in STAGES)


def resolve_model_dir(value: str | None) -> Path:
    if not value:
        raise BuildError("no model directory: pass --model DIR (the profile has none)")
    if value == "tiny":
        from fastapply.model.tiny import ensure_tiny_model

        return ensure_tiny_model()
    from fastapply.model.bases import BASES

    if value == "smollm2-base":  # the name before bases were named
        value = "smollm2-135m"
    if value in BASES:
        from fastapply.model.base import BaseModelError, base_checkpoint

        try:
            return base_checkpoint(quiet=False, name=value)
        except BaseModelError as exc:
            raise BuildError(str(exc)) from None
    return Path(value)


def resolve_adapter_dir(value: str | None) -> str | None:
    """"default": the LoRA adapter shipped in fastapply/model/adapter; "shipped:NAME": the
    one shipped in fastapply/model/candidates/NAME (refused where it holds no weights); else
    as given."""
    if value == "default":
        from fastapply.model.default import ADAPTER_DIR

        return str(ADAPTER_DIR)
    if value is not None and value.startswith("shipped:"):
        from fastapply.model.default import SHIPPED_ADAPTERS_DIR

        path = SHIPPED_ADAPTERS_DIR / value.removeprefix("shipped:")
        if not (path / "adapter_model.safetensors").is_file():
            raise BuildError(f"adapter {value!r}: {path} holds no adapter_model.safetensors; "
                             "reinstall fastapply, or pass --adapter DIR (or --no-adapter)")
        return str(path)
    return value


def resolve_verify_data(value: str | None) -> Path | None:
    """"validation": the validation sample shipped with fastapply; else the path given."""
    if value == "validation":
        from fastapply.examples import VALIDATION_EDITS

        return VALIDATION_EDITS
    return Path(value) if value else None


def split_records(profile: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(calibration, held-out, disjoint) records.

    Held out: the first ``verify.num_edits`` of ``verify.data`` (refused when it has
    fewer), or without it the calibration data's records after the calibration ones;
    disjoint: no held-out record is a calibration record (same ``id``).
    """
    from fastapply.examples import DataError, load_edits

    records = load_edits(profile.calibration.data)
    calib = records[: profile.calibration.num_samples]
    wanted = profile.verify.num_edits
    path = resolve_verify_data(profile.verify.data)
    if path is not None:
        try:
            held = load_edits(path, limit=wanted)
        except DataError as exc:
            raise BuildError(f"verify data: {exc}") from None
        if len(held) < wanted:
            raise BuildError(f"verify data {path}: {len(held)} records, fewer than "
                             f"verify.num_edits {wanted}; lower num_edits or add edits")
        ids = {r["id"] for r in calib}
        return calib, held, not any(r["id"] in ids for r in held)
    held = records[profile.calibration.num_samples:][:wanted]
    if held:
        return calib, held, True
    return calib, records[-wanted:], False


def build_inputs(profile: Profile) -> dict[str, Any]:
    """What changes the artefacts (all of the profile but its name and verify section)."""
    inputs = asdict(profile)
    del inputs["name"], inputs["verify"]
    if inputs["quantization"] == "fp8":  # the recipe before there was a choice: same key
        del inputs["quantization"]
    return inputs


def preflight(profile: Profile, root: Path) -> Build:
    """Check every input (no model is loaded); raise BuildError naming the problem.

    The build's folder is ``root/builds/KEY`` (:func:`.layout.build_key`).
    """
    model_dir = resolve_model_dir(profile.model_dir)
    config = checks.read_model_config(model_dir)
    checks.check_tokenizer(model_dir)
    adapter = resolve_adapter_dir(profile.adapter_dir)
    if adapter and adapter != "random":
        checks.check_adapter(adapter, config, model_dir)
    checks.check_device(profile.device)
    checks.check_calibration(profile.calibration.data, profile.calibration.num_samples)
    calib, held, disjoint = split_records(profile)
    key = layout.build_key(profile.name, model_dir.resolve(), layout.gpu_type(),
                           layout.trtllm_version(), build_inputs(profile))
    out = root / layout.BUILDS / key
    out.mkdir(parents=True, exist_ok=True)
    return Build(profile, out, model_dir, config, calib, held, disjoint, root)


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
    log = build.path(layout.LOGS) / f"{stage}.log"
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

    adapter = resolve_adapter_dir(build.profile.adapter_dir)
    if not adapter:
        return {"status": "skipped", "reason": "no adapter: later stages use the model as is"}
    if adapter == "random":
        adapter = str(make_random_adapter(build.model_dir, build.path(layout.ADAPTER)))
    merged = merge_lora(build.model_dir, adapter, build.path(layout.MERGED))
    return {"status": "done", "adapter_dir": adapter, "merged_dir": str(merged)}


def quantize_stage(build: Build) -> dict[str, Any]:
    from fastapply.engine_build.quantize import quantize

    source = build.merged_dir
    if not (source / "config.json").is_file():
        raise BuildError(f"{source} is missing: run the merge-lora stage first")
    result = quantize(source, build.path(layout.QUANTIZED_HF),
                      build.path(layout.TRTLLM_CHECKPOINT), records=build.calibration,
                      prompt_format=build.profile.prompt_format,
                      max_prompt_tokens=build.profile.calibration.max_prompt_tokens,
                      device=build.profile.device, family=build.family,
                      recipe=build.profile.quantization)
    return {"status": "done", **result}


def engine_stage(build: Build, strict: bool = False) -> dict[str, Any]:
    """trtllm-build; a missing tool stops the build when ``strict`` or the runtime needs it."""
    from fastapply.engine_build.engine import build_command, build_engine, missing_message

    ckpt = build.path(layout.TRTLLM_CHECKPOINT)
    engine_dir = build.path(layout.ENGINE)
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
        params.update(model_dir=build.path(layout.QUANTIZED_HF))
    else:
        params.update(engine_dir=build.path(layout.ENGINE), tokenizer_dir=build.merged_dir)
    return params


def render_stage(build: Build) -> dict[str, Any]:
    from fastapply.server.model_repo import render_repository  # it refuses unfilled placeholders

    out = render_repository(build.path(layout.MODEL_REPOSITORY), **render_params(build))
    return {"status": "done", "model_repository": str(out), "runtime": build.profile.runtime}


def needs_engine(build: Build, stage: str) -> bool:
    """Whether ``stage`` reads the engine: the repository rendered for trtllm-engine, and
    verify with the engine as candidate (the default, simulated FP8, does not)."""
    if stage == "render":
        return build.profile.runtime == "trtllm-engine"
    return stage == "verify" and build.profile.verify.candidate == "trtllm-engine"


def verify_stage(build: Build) -> dict[str, Any]:
    from fastapply.engine_build.verify_run import run_verify

    return run_verify(build)


STAGE_FUNCS: dict[str, Callable[[Build], dict[str, Any]]] = {
    "merge-lora": merge_stage, "quantize": quantize_stage, "engine": engine_stage,
    "render": render_stage, "verify": verify_stage,
}


#: Stages that only read artefacts (and write the report): allowed in the published build.
READ_ONLY_STAGES = ("verify",)


def run_stage(build: Build, stage: str,
              func: Callable[[Build], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run one stage with its output logged and timed; record it in the report."""
    if build.is_published and stage not in READ_ONLY_STAGES:
        raise BuildError(f"{build.out} is the published build ({build.root}/{layout.CURRENT} "
                         f"points at it), so {stage} will not overwrite it; build with "
                         f"other inputs, or point {layout.CURRENT} elsewhere first")
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


def publish_if_complete(build: Build) -> Path | None:
    """Switch ROOT/current to this build once every stage is done; the pointer, or None."""
    if build.root is None or not build.complete:
        return None
    return layout.publish(build.root, build.out)
