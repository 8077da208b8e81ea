"""Where a build puts things: the one definition of the build folder's layout.

``fastapply build --out ROOT`` never writes into the build that is being served. Each
build has its own folder, keyed by what makes its artefacts (profile, model, GPU type,
TensorRT-LLM version, and a hash of the inputs that change the weights or the engine);
a finished build is published by switching one relative symlink, atomically::

    ROOT/current -> builds/KEY        the published build: servers read paths through it
    ROOT/builds/KEY/adapter/          random LoRA adapter (tiny-cpu only)
    ROOT/builds/KEY/merged/           base + LoRA, bf16 HF checkpoint with tokenizer
    ROOT/builds/KEY/quantized/hf/     unified FP8 HF checkpoint (hf_quant_config.json)
    ROOT/builds/KEY/quantized/trtllm-checkpoint/   FP8 TRT-LLM checkpoint (Llama family)
    ROOT/builds/KEY/engine/           trtllm-build output
    ROOT/builds/KEY/model_repository/ the rendered Triton model repository
    ROOT/builds/KEY/logs/<stage>.log  what modelopt and friends print
    ROOT/builds/KEY/build-report.json per stage: status, seconds, artefacts; parity figures

A server started on ``ROOT/current/...`` keeps the files it opened when the pointer moves
(the rendered repository holds resolved paths into its own ``builds/KEY``). The Helm
chart builds its serving paths from the same names (``helm/fastapply/templates/
_helpers.tpl``, checked against this module by ``tests/engine_build/test_engine_build.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

#: The published build's pointer under ROOT (a relative symlink to ``builds/KEY``).
CURRENT = "current"
#: The folder of keyed builds under ROOT.
BUILDS = "builds"
#: Paths inside one build's folder.
ADAPTER = "adapter"
MERGED = "merged"
QUANTIZED_HF = "quantized/hf"
TRTLLM_CHECKPOINT = "quantized/trtllm-checkpoint"
ENGINE = "engine"
MODEL_REPOSITORY = "model_repository"
LOGS = "logs"
REPORT = "build-report.json"


def gpu_type() -> str:
    """The GPU the engine is built for: ``$FASTAPPLY_GPU_TYPE``, nvidia-smi's name, or cpu."""
    name = os.environ.get("FASTAPPLY_GPU_TYPE", "")
    smi = shutil.which("nvidia-smi")
    if not name and smi:
        proc = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)
        name = proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout else ""
    return name or "cpu"


def trtllm_version() -> str:
    """The installed TensorRT-LLM version, or ``none``."""
    try:
        return metadata.version("tensorrt_llm")
    except metadata.PackageNotFoundError:
        return "none"


def slug(text: str) -> str:
    """A path-safe lower-case form.

    >>> slug("NVIDIA H100 80GB HBM3"), slug("/models/Qwen2.5-Coder-7B/")
    ('nvidia-h100-80gb-hbm3', 'models-qwen2.5-coder-7b')
    """
    return re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-")


def build_key(profile: str, model_dir: str | Path, gpu: str, trtllm: str,
              inputs: dict[str, Any]) -> str:
    """``PROFILE--MODEL--GPU--trtllm-VERSION--HASH``; HASH covers ``inputs`` (adapter,
    calibration, engine limits...) and the model's full path.

    >>> build_key("tiny-cpu", "/m/tiny", "cpu", "none", {"max_seq_len": 8192})
    'tiny-cpu--tiny--cpu--trtllm-none--78985d215e'
    """
    digest = hashlib.sha256(json.dumps({"model_dir": str(model_dir), **inputs},
                                       sort_keys=True, default=str).encode()).hexdigest()
    return "--".join([slug(profile), slug(Path(model_dir).name), slug(gpu),
                      f"trtllm-{slug(trtllm)}", digest[:10]])


def published(root: Path) -> Path | None:
    """The build ``ROOT/current`` points at (None before the first publish)."""
    pointer = root / CURRENT
    return pointer.resolve() if pointer.is_symlink() else None


def publish(root: Path, build_dir: Path) -> Path:
    """Point ``ROOT/current`` at ``build_dir`` in one atomic rename; return the pointer."""
    pointer = root / CURRENT
    if pointer.exists() and not pointer.is_symlink():
        raise FileExistsError(f"{pointer} exists and is not the build pointer (a symlink); "
                              f"move it away")
    tmp = root / f".{CURRENT}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(os.path.relpath(build_dir, root))
    os.replace(tmp, pointer)
    return pointer
