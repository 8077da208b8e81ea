"""``fastapply data build|split|sample``: edit corpora from local git history (the
training examples made from them are the model's: ``fastapply model sft``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapply.corpus.build import PERMISSIVE, Filters, records
from fastapply.corpus.gitsource import SourceError, license_of, repo_name, resolve_git_dir
from fastapply.corpus.split import sample, split_repos
from fastapply.examples import DataError, load_edits


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="data_command", required=True)
    b = sub.add_parser("build", help="edit records from the git history of local repositories")
    b.add_argument("repos", nargs="+", type=Path,
                   help="git work trees or git directories (e.g. /work/.mirror/owner+name/repo)")
    b.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    b.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    b.add_argument("--per-repo", type=int, default=Filters.per_repo,
                   help="records kept per repository at most")
    b.add_argument("--per-commit", type=int, default=Filters.per_commit,
                   help="records kept per commit at most")
    b.add_argument("--max-changed-lines", type=int, default=Filters.max_changed_lines)
    b.add_argument("--jobs", type=int, default=1,
                   help="repositories read in parallel (the output does not depend on it)")
    b.add_argument("--any-license", action="store_true",
                   help="also use repositories whose licence is not MIT/BSD/Apache-2.0")
    s = sub.add_parser("split", help="split a corpus by repository into tune and validation")
    s.add_argument("data", type=Path, help="JSONL of edit records")
    s.add_argument("--tune", type=Path, required=True, help="JSONL to write the tune set to")
    s.add_argument("--valid", type=Path, required=True, help="JSONL for the validation set")
    s.add_argument("--valid-fraction", type=float, default=0.4)
    s.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("sample", help="a small per-repository sample (small files only)")
    m.add_argument("data", type=Path, help="JSONL of edit records")
    m.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    m.add_argument("--per-repo", type=int, default=5, help="records per repository at most")
    m.add_argument("--max-chars", type=int, default=4000,
                   help="only records whose files have at most this many characters")
    m.add_argument("--seed", type=int, default=0)


def _write(path: Path, recs: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def _one_repo(path: Path, args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    """The records of one repository and a line saying what was kept, or skipped why."""
    f = Filters(max_changed_lines=args.max_changed_lines, per_repo=args.per_repo,
                per_commit=args.per_commit)
    licence = license_of(resolve_git_dir(path))
    if licence.split(" OR ")[0] not in PERMISSIVE and not args.any_license:
        return [], (f"{repo_name(path)}: skipped, licence {licence} is not permissive "
                    "(--any-license to use it anyway)")
    got = list(records(path, args.seed, f))
    langs = Counter(r["language"] for r in got)
    return got, f"{repo_name(path)} ({licence}): {len(got)} records {dict(langs.most_common())}"


def _build(args: argparse.Namespace) -> int:
    out: list[dict[str, Any]] = []
    failed = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:  # git does the work: threads do
        futures = [pool.submit(_one_repo, path, args) for path in args.repos]
        for fut in futures:  # in the order given, whatever finishes first
            try:
                got, line = fut.result()
            except SourceError as exc:  # e.g. a snapshot with missing objects: go on
                print(f"fastapply data build: skipped: {exc}", file=sys.stderr, flush=True)
                failed += 1
                continue
            print(line, flush=True)
            out.extend(got)
    _write(args.out, out)
    print(f"wrote {len(out)} records from {len({r['repo'] for r in out})} repositories to "
          f"{args.out}" + (f"; {failed} path(s) skipped (see above)" if failed else ""))
    return 1 if failed else 0


def _split(args: argparse.Namespace, recs: list[dict[str, Any]]) -> int:
    tune, valid = split_repos(recs, args.valid_fraction, args.seed)
    for path, repos in ((args.tune, tune), (args.valid, valid)):
        chosen = set(repos)
        part = [r for r in recs if r["repo"] in chosen]
        _write(path, part)
        print(f"{path}: {len(part)} records, {len(repos)} repositories: {', '.join(repos)}")
    return 0


def _sample(args: argparse.Namespace, recs: list[dict[str, Any]]) -> int:
    part = sample(recs, args.per_repo, args.max_chars, args.seed)
    _write(args.out, part)
    print(f"{args.out}: {len(part)} records from {len({r['repo'] for r in part})} repositories")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.data_command == "build":
        return _build(args)
    try:
        recs = load_edits(args.data)
    except DataError as exc:
        print(f"fastapply data {args.data_command}: {exc}", file=sys.stderr)
        return 2
    return (_split if args.data_command == "split" else _sample)(args, recs)
