"""``fastapply data build|split`` on a git repository the test makes, and the invariants
of the records it writes: every snippet, applied as its format says, gives ``updated``."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fastapply.cli import main
from fastapply.corpus.snippets import lazy_parts, search_replace, udiff
from fastapply.corpus.verify import VerifyError, apply_search_replace, apply_udiff
from fastapply.merge.edits import is_marker

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

MIT = "MIT License\n\nPermission is hereby granted, free of charge, to any person ...\n"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def _commit(repo: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def _py(n: int, change: int = -1) -> str:
    return "".join(f"def f{i}(x):\n    return x + {i * 10 if i == change else i}\n\n\n"
                   for i in range(n))


def _java(n: int, change: int = -1) -> str:
    body = "".join(f"    int m{i}() {{\n        return {i + 1 if i == change else i};\n    }}\n\n"
                   for i in range(n))
    return f"class A {{\n{body}}}\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a licence, Python and Java files and a few edit commits
    (plus a too-small file and a binary one that the filters must skip)."""
    repo = tmp_path_factory.mktemp("mirror") / "owner+proj" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, {"LICENSE": MIT, "a.py": _py(12), "src/A.java": _java(10),
                   "small.py": "x = 1\n", "img.bin": "\0\1\2"}, "start")
    for k in range(1, 6):
        _commit(repo, {"a.py": _py(12, change=k), "src/A.java": _java(10, change=k),
                       "small.py": f"x = {k}\n"}, f"edit {k}")
    return repo


def _build(repo: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    assert main(["data", "build", str(repo), "--out", str(out), *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_build_writes_exact_records_and_is_reproducible(repo: Path, tmp_path: Path) -> None:
    recs = _build(repo, tmp_path / "a.jsonl", "--seed", "3")
    assert len(recs) == 10  # 5 commits x (a.py, A.java); small.py and img.bin filtered
    assert {r["language"] for r in recs} == {"python", "java"}
    assert {r["repo"] for r in recs} == {"owner/proj"}
    assert {r["license"] for r in recs} == {"MIT"}
    for r in recs:
        assert r["id"] == f"owner/proj@{r['commit'][:10]}:{r['path']}"
        assert apply_search_replace(r["original"], r["search_replace"]) == r["updated"]
        assert apply_udiff(r["original"], r["udiff"]) == r["updated"]
        assert any(is_marker(s) for s in r["lazy_snippet"].splitlines())
    again = (tmp_path / "a.jsonl").read_text()
    _build(repo, tmp_path / "b.jsonl", "--seed", "3")
    assert (tmp_path / "b.jsonl").read_text() == again


def test_build_caps_records_per_repository(repo: Path, tmp_path: Path) -> None:
    assert len(_build(repo, tmp_path / "c.jsonl", "--per-repo", "3")) == 3


def test_udiffs_apply_with_patch(repo: Path, tmp_path: Path) -> None:
    if shutil.which("patch") is None:
        pytest.skip("patch is not installed")
    for r in _build(repo, tmp_path / "d.jsonl"):
        target = tmp_path / "file"
        target.write_text(r["original"])
        subprocess.run(["patch", "-s", str(target)], input=r["udiff"], text=True, check=True)
        assert target.read_text() == r["updated"]


def test_split_is_by_repository(repo: Path, tmp_path: Path) -> None:
    recs = _build(repo, tmp_path / "e.jsonl")
    other = [dict(r, repo="other/one", id="other/one" + r["id"][len("owner/proj"):])
             for r in recs]
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps(r) + "\n" for r in recs + other))
    tune, valid = tmp_path / "tune.jsonl", tmp_path / "valid.jsonl"
    assert main(["data", "split", str(both), "--tune", str(tune), "--valid", str(valid),
                 "--valid-fraction", "0.5"]) == 0
    repos = [{json.loads(s)["repo"] for s in p.read_text().splitlines()} for p in (tune, valid)]
    assert len(repos[0]) == len(repos[1]) == 1 and not repos[0] & repos[1]


def test_build_reports_a_path_that_is_not_a_repository(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert main(["data", "build", str(tmp_path), "--out", str(tmp_path / "x.jsonl")]) == 1
    assert "not a git repository" in capsys.readouterr().err


@pytest.mark.parametrize("language", ["python", "java", "markdown", "vue", "sql", "json"])
def test_lazy_snippet_expands_to_updated(language: str) -> None:
    original = _java(30)
    updated = _java(30, change=4).replace("    int m20() {\n", "    int m20() {\n// new\n")
    for seed in range(20):
        snippet, expansion = lazy_parts(original, updated, language, random.Random(seed))
        assert expansion == updated
        kept = [s for s in snippet.splitlines() if not is_marker(s)]
        assert 2 <= len(kept) <= 2 + 2 * 6  # the changed lines and 1-3 (+3) of context


def test_search_text_is_widened_until_unique() -> None:
    original = "x\n" * 5 + "a\n" + "x\n" * 5
    updated = original.replace("a\n", "b\n")
    sr = search_replace(original, updated)
    assert sr is not None and apply_search_replace(original, sr) == updated
    with pytest.raises(VerifyError):
        apply_search_replace(original, "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert apply_udiff(original, udiff(original, updated, "f")) == updated
