"""Exact-match rate of the deterministic merge, per snippet format.

A merge is exact when ``apply_snippet(original, snippet).text == updated``. The table
also counts exact merges that were flagged unsure (the deterministic server runtime
refuses those), wrong merges that were not flagged (it would return those as merged:
the figure to drive to zero) and lists the first failing ids.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fastapply.bench.common import load_edits, print_table

FIELDS = {"lazy": "lazy_snippet", "search_replace": "search_replace", "udiff": "udiff"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of edits (default: shipped examples)")
    p.add_argument("--limit", type=int, help="only the first N edits")
    p.add_argument("--show", type=int, default=5, help="failing ids to list per format")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.edits import EditError
    from fastapply.merge import apply_snippet

    edits = load_edits(args.data, args.limit)
    formats: dict[str, dict[str, Any]] = {}
    rows, failures = [], []
    for name, field in FIELDS.items():
        exact = unsure = errors = silent = 0
        for rec in edits:
            try:
                result = apply_snippet(rec["original"], rec[field])
            except EditError as exc:
                errors += 1
                failures.append((name, rec["id"], f"EditError: {exc}"[:90]))
                continue
            if result.text == rec["updated"]:
                exact += 1
                unsure += bool(result.uncertain)
            else:
                silent += not result.uncertain
                failures.append((name, rec["id"], "; ".join(
                    u.message for u in result.uncertain)[:90] or "differs, not flagged"))
        total = len(edits)
        formats[name] = {"exact": exact, "total": total,
                         "exact_rate": exact / total if total else 0.0,
                         "wrong_unflagged": silent}
        rows.append([name, exact, total, formats[name]["exact_rate"], unsure, silent, errors])
    print_table(["format", "exact", "total", "exact_rate", "exact_but_flagged_unsure",
                 "wrong_unflagged", "parse_errors"], rows)
    shown = [f for name in FIELDS for f in [x for x in failures if x[0] == name][: args.show]]
    if shown:
        print()
        print_table(["format", "failing id", "why"], shown)
    return {"formats": formats}
