"""``trtllm-build``: the FP8 TRT-LLM checkpoint -> an engine with external draft tokens.

The engine accepts up to K draft tokens per request (``--speculative_decoding_mode
draft_tokens_external --max_draft_len K``), the form the ``trtllm-engine`` runtime sends
its verification steps in. ``trtllm-build`` exists only where TensorRT-LLM is installed
(it cannot be installed on these machines); where it is missing the stage stops with the
container to run it in and the exact command.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from fastapply.decoding.runtimes.trtllm_engine import TRTLLM_CONTAINER
from fastapply.engine_build.errors import BuildError, ToolMissing
from fastapply.engine_build.profile import Profile


def build_command(profile: Profile, checkpoint_dir: str | Path, engine_dir: str | Path,
                  tool: str = "trtllm-build") -> list[str]:
    """The trtllm-build command line for ``profile``.

    The KV cache dtype and FP8 GEMMs come from the checkpoint's ``config.json`` (modelopt
    writes the recipe's ``quant_algo`` and ``kv_cache_quant_algo`` there); the one flag
    that depends on the recipe is ``--use_fp8_context_fmha``, which needs an FP8 KV cache.
    """
    return [
        tool,
        "--checkpoint_dir", str(checkpoint_dir),
        "--output_dir", str(engine_dir),
        "--speculative_decoding_mode", "draft_tokens_external",
        "--max_draft_len", str(profile.max_draft_len),
        "--use_paged_context_fmha", "enable",
        # FP8 context attention reads an FP8 KV cache: only the recipe that has one
        *(["--use_fp8_context_fmha", "enable"] if profile.quantization == "fp8" else []),
        "--gemm_plugin", "auto",
        "--max_input_len", str(profile.max_input_len),
        "--max_seq_len", str(profile.max_seq_len),
        "--max_batch_size", str(profile.max_batch_size),
        # a verification step feeds [last token] + K drafts per request
        "--max_num_tokens", str(max(profile.max_input_len,
                                    profile.max_batch_size * (profile.max_draft_len + 1))),
    ]


def missing_message(command: list[str]) -> str:
    return (f"trtllm-build is not installed here (TensorRT-LLM cannot be installed from PyPI "
            f"on this machine). Run this stage inside {TRTLLM_CONTAINER} on a GPU machine, "
            f"with the build directory mounted at the same path:\n  "
            f"{shlex.join(command)}")


def build_engine(profile: Profile, checkpoint_dir: str | Path,
                 engine_dir: str | Path) -> dict[str, object]:
    """Run trtllm-build; raise ToolMissing (with the command) where it is not installed."""
    command = build_command(profile, checkpoint_dir, engine_dir)
    tool = shutil.which("trtllm-build")
    if tool is None:
        raise ToolMissing(missing_message(command), command)
    if not (Path(checkpoint_dir) / "config.json").is_file():
        raise BuildError(f"{checkpoint_dir}: no TRT-LLM checkpoint (run the quantize stage "
                         f"on a Llama-family model first)")
    proc = subprocess.run([tool, *command[1:]], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BuildError(f"trtllm-build failed with status {proc.returncode}:\n{tail}")
    return {"engine_dir": str(engine_dir), "command": shlex.join(command)}
