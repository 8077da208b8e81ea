"""Candidate changes from a local git directory: ``git log --numstat`` for the list,
one ``git cat-file --batch`` process for the file contents. Read-only, no network."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fastapply.corpus.languages import language_of

#: Path parts that mark vendored or generated code (not what people edit by hand).
SKIP_PARTS = frozenset({"vendor", "node_modules", "third_party", "thirdparty", "dist",
                        "external", "__snapshots__"})


class SourceError(RuntimeError):
    """A path that is not a readable git directory; the message says what to pass."""


@dataclass(frozen=True)
class Change:
    """One file changed by one non-merge commit, with its numstat counts."""

    commit: str
    path: str
    language: str
    changed_lines: int  # added + removed


def git(git_dir: Path, *args: str, partial: bool = False) -> str:
    """Run git on ``git_dir`` and return stdout; SourceError on failure. With
    ``partial``, a ``git log`` stopped by a missing object returns the commits it printed
    before, less the last one (maybe cut short)."""
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True,
                          text=True, encoding="utf-8", errors="replace", check=False)
    out = proc.stdout
    if partial and proc.returncode != 0 and "unable to read" in proc.stderr and "\n@" in out:
        return out[:out.rindex("\n@") + 1]
    if proc.returncode != 0:
        raise SourceError(f"{git_dir}: git {' '.join(args[:2])} failed: "
                          f"{proc.stderr.strip()[:200]}")
    return proc.stdout


def resolve_git_dir(path: Path) -> Path:
    """The git directory of ``path`` (a work tree or a bare/mirror git directory)."""
    for cand in (path / ".git", path):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    raise SourceError(f"{path}: not a git repository (pass a work tree or a git directory)")


def changes(git_dir: Path, max_changed_lines: int) -> list[Change]:
    """Every (non-merge commit, text file in a covered language) with 1..max changed
    lines, newest first, reachable from HEAD (a snapshot whose older history lacks
    objects gives the commits before the gap)."""
    out = git(git_dir, "log", "--no-merges", "--no-renames", "--format=@%H", "--numstat",
              "HEAD", partial=True)
    found: list[Change] = []
    commit = ""
    for line in out.splitlines():
        if line.startswith("@"):
            commit = line[1:]
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue  # blank line, or a binary file ("-\t-\tpath")
        added, removed, path = int(parts[0]), int(parts[1]), parts[2]
        lang = language_of(path)
        if lang is None or not 0 < added + removed <= max_changed_lines \
                or SKIP_PARTS.intersection(path.split("/")):
            continue
        found.append(Change(commit, path, lang, added + removed))
    return found


class Blobs:
    """File contents at revisions through one long-lived ``git cat-file --batch``."""

    def __init__(self, git_dir: Path) -> None:
        self._proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, rev: str, path: str) -> bytes | None:
        """The bytes of ``rev:path``; None when it does not exist (e.g. a new file)."""
        assert self._proc.stdin and self._proc.stdout
        self._proc.stdin.write(f"{rev}:{path}\n".encode())
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().decode()
        if header.endswith("missing\n") or " blob " not in header:
            return None
        size = int(header.split()[2])
        data = self._proc.stdout.read(size + 1)[:-1]
        return data

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait()

    def __enter__(self) -> Blobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LICENSE_FILE = re.compile(r"^(LICEN[CS]E|COPYING|MIT-LICENSE)([-._].*)?$", re.I)


def license_of(git_dir: Path) -> str:
    """The licence named by the license files at HEAD ('unknown' when none is
    recognised): MIT, Apache-2.0, BSD-2-Clause, BSD-3-Clause, or 'A OR B'."""
    names = [n for n in git(git_dir, "ls-tree", "--name-only", "HEAD").splitlines()
             if LICENSE_FILE.match(n)]
    found: list[str] = []
    for name in names:
        text = git(git_dir, "show", f"HEAD:{name}")
        if "Apache License" in text:
            kind = "Apache-2.0"
        elif "Permission is hereby granted, free of charge" in text:
            kind = "MIT"
        elif "Redistribution and use in source and binary forms" in text:
            kind = "BSD-3-Clause" if "Neither the name" in text or "names of its" in text \
                else "BSD-2-Clause"
        else:
            continue
        if kind not in found:
            found.append(kind)
    return " OR ".join(sorted(found)) or "unknown"


def repo_name(path: Path) -> str:
    """``owner/name`` for a mirror laid out as ``.../owner+name/repo``, else the folder
    name (``.git`` and ``repo`` stripped)."""
    p = path.resolve()
    if p.name in (".git", "repo"):
        p = p.parent
    return p.name.replace("+", "/", 1) if "+" in p.name else p.name

