"""The layout a newcomer, grep and mypy rely on.

Every module's file sits at the path its name says, under one of the source roots
(`.`, `client/`, `engine_build/`, `loadtest/`), and each audience's import stays as light as
its install: the client and the load test never import torch or transformers.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
ROOTS = (REPO, REPO / "client", REPO / "engine_build", REPO / "loadtest")


def _modules() -> list[tuple[str, Path]]:
    """(module name, file) for every Python file of the installed package, named by its path."""
    found = []
    for root in ROOTS:
        for path in sorted((root / "fastapply").rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), path))
    return found


def test_every_card_folder_is_a_source_root_whose_paths_are_module_names() -> None:
    names = {name for name, _ in _modules()}
    assert {"fastapply.client.grpc", "fastapply.engine_build.stages",
            "fastapply.loadtest.users", "fastapply.merge"} <= names
    # nothing Python lies outside the roots' `fastapply/` folders but tests and the model
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    stray = [name for name in tracked
             if Path(name).parts[0] not in ("tests", "model_repository")
             and not any((REPO / name).is_relative_to(root / "fastapply") for root in ROOTS)]
    assert stray == []


@pytest.mark.parametrize("name", ["fastapply.client.grpc", "fastapply.client.cli",
                                  "fastapply.engine_build.stages", "fastapply.loadtest.report",
                                  "fastapply.service"])
def test_a_module_imports_from_the_file_its_name_names(name: str) -> None:
    files = dict(_modules())
    module = importlib.import_module(name)
    assert Path(module.__file__ or "").resolve() == files[name].resolve()


def test_mypy_checks_every_source_root() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    checked = {REPO / f for f in config["files"]}
    for root in ROOTS:
        assert root / "fastapply" in checked or (root == REPO and REPO / "fastapply" in checked)
    assert REPO / "tests" in checked
    assert REPO / "model_repository/fast_apply/1/model.py" in checked
    # a first-party import that cannot be found must be an error, not a silent Any
    assert not config.get("ignore_missing_imports", False)


@pytest.mark.parametrize("module, heavy", [
    ("fastapply.client", ("torch", "transformers", "locust")),
    ("fastapply.client.cli", ("torch", "transformers", "locust")),
    ("fastapply.loadtest.workload", ("torch", "transformers")),
])
def test_thin_installs_import_nothing_heavy(module: str, heavy: tuple[str, ...]) -> None:
    code = (f"import sys, {module}; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"


def test_the_library_is_one_folder_per_concern() -> None:
    top = REPO / "fastapply"
    modules = sorted(p.name for p in top.glob("*.py"))
    assert modules == ["__init__.py", "__main__.py", "cli.py", "demo.py", "metrics.py"]
    packages = sorted(p.name for p in top.iterdir() if (p / "__init__.py").is_file())
    assert packages == ["bench", "corpus", "decoding", "examples", "judge", "merge", "model",
                        "server", "service"]
    # private helpers live inside the package they serve, without a prefix
    assert not list(top.rglob("_merge*.py"))


def test_every_package_is_installed() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {name for name, path in _modules() if path.name == "__init__.py"}
    assert found <= listed, f"missing from [tool.setuptools] packages: {found - listed}"


def test_the_tests_mirror_the_packages() -> None:
    tests = REPO / "tests"
    for package in ("merge", "decoding", "server", "model", "client", "engine_build",
                    "loadtest", "corpus", "judge"):
        assert list((tests / package).glob("test_*.py")), f"no tests/{package}/test_*.py"
    # pytest imports test files by their base name (no __init__.py): they must be unique
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names))


def test_every_adapter_in_the_package_is_one_a_build_profile_ships() -> None:
    """An adapter measured and not shipped lives in docs/history with the commands that
    rebuild it, not in the package every install copies (issue 56)."""
    from fastapply.model.default import SHIPPED_ADAPTERS_DIR

    profiles = (REPO / "engine_build" / "fastapply" / "engine_build" / "profiles").glob("*.yaml")
    named = {line.split("shipped:", 1)[1].split()[0] for p in profiles
             for line in p.read_text().splitlines() if line.startswith("adapter_dir: shipped:")}
    folders = {p.name for p in SHIPPED_ADAPTERS_DIR.iterdir() if p.is_dir()}
    assert folders and folders <= named, f"adapters no profile ships: {folders - named}"


#: Longest source file the house keeps to, and longest package __init__ (issue 56).
MOST_LINES, MOST_INIT_LINES = 450, 120


def test_every_source_file_is_short_enough_to_read() -> None:
    """A file over MOST_LINES is split along what its code does (issue 56); a package's
    __init__ says what is where, and holds little code."""
    long = {str(path.relative_to(REPO)): n for _, path in _modules()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"over {MOST_LINES} lines: {long}"
    inits = {str(path.relative_to(REPO)): n for _, path in _modules() if path.name == "__init__.py"
             and (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_INIT_LINES}
    assert not inits, f"package __init__ over {MOST_INIT_LINES} lines: {inits}"
