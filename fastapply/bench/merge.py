"""Exact-match rate of the deterministic merge, per snippet format.

A merge is exact when ``apply_snippet(original, snippet).text == updated``. The table
also counts exact merges that were flagged unsure (the deterministic server runtime
refuses those), **served exact** merges (exact and not flagged: what a user gets), wrong
merges that were not flagged (it would return those as merged: the figure to drive to
zero, as a count and a rate), the merge time per record (p50/p95 ms), and lists the first
failing ids. Of the flagged wrong merges it counts those whose truth is one of the merge's
rival readings (``wrong_flagged_rival``; the time to build them is in the merge time), and
the **ceiling**: the share of flagged merges with the truth among their readings (chosen
or rival), what a witness that picks among them could serve at best. ``--by-language``
adds the same figures per language.

With ``--regenerate`` it also merges lazy snippets rebuilt from each record's true change
with 1, 2 and 3 lines of context (:func:`lazy_snippet`): the same files, other snippets,
a check that the merge is not fitted to the corpus' own snippets.

With ``--agent-styles`` it also merges, per record and on the whole file, a lazy snippet
in each style coding agents write (:data:`fastapply.corpus.agent_style.AGENT_STYLES`:
``agent_signature``, ``agent_named``, ``agent_whole_block``, ``agent_whole_file``), made
with a fixed seed (``--seed``); a record where a style does not apply is left out of that
style's total. ``--formats`` keeps only the named formats (a comma-separated list);
``--outcomes`` writes each merge's outcome, to compare two builds record by record.

Each format also reports the merge time per edit (``merge_ms_p50``, ``merge_ms_p95``) and
in all (``merge_s``). With ``--shapes`` it instead merges the worst-case shapes of
:mod:`fastapply.bench.merge_shapes` on a generated file (``--lines``, default 20,000).
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any

from fastapply.bench.common import load_edits, percentile, print_table

FIELDS = {"lazy": "lazy_snippet", "search_replace": "search_replace", "udiff": "udiff"}
#: Marker comment per language for regenerated lazy snippets (default ``//``).
MARKERS = {"python": "# ... existing code ...", "markdown": "<!-- ... existing code ... -->",
           "html": "<!-- ... existing code ... -->"}


def lazy_snippet(original: str, updated: str, context: int, language: str = "") -> str:
    """A lazy snippet of the change from ``original`` to ``updated``: each group of
    changes with ``context`` unchanged lines each side (difflib's grouping, so changes
    closer than 2 * context lines share a segment), one marker per elided run, indented
    like the segment's first non-blank line.

    >>> print(lazy_snippet("a\\nb\\nc\\nd\\ne\\n", "a\\nb\\nC\\nd\\ne\\n", 1, "python"), end="")
    # ... existing code ...
    b
    C
    d
    # ... existing code ...
    """
    old, new = original.splitlines(), updated.splitlines()
    marker = MARKERS.get(language, "// ... existing code ...")
    out: list[str] = []
    groups = list(difflib.SequenceMatcher(None, old, new, autojunk=False)
                  .get_grouped_opcodes(context))
    for n, group in enumerate(groups):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        seg = new[j1:j2]
        indent = next((s[:len(s) - len(s.lstrip())] for s in seg if s.strip()), "")
        if i1 > 0:
            out.append(indent + marker)
        out.extend(seg)
        if n == len(groups) - 1 and i2 < len(old):
            out.append(indent + marker)
    return "".join(line + "\n" for line in out)


def _regenerated(rec: dict[str, Any], context: int) -> str:
    return lazy_snippet(rec["original"], rec["updated"], context, rec.get("language", ""))


def _agent(rec: dict[str, Any], style: str, seed: int) -> str | None:
    """The record's snippet in agent ``style`` (None where the style does not apply); the
    random choices are seeded by ``seed``, the record and the style, so reruns agree."""
    from fastapply.corpus.agent_style import agent_snippet

    rng = random.Random(f"{seed}:{rec.get('id', '')}:{style}")
    snippet = agent_snippet(rec["original"], rec["updated"], rec.get("language", ""), style, rng)
    return snippet or None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of edits (default: shipped examples)")
    p.add_argument("--limit", type=int, help="only the first N edits")
    p.add_argument("--show", type=int, default=5, help="failing ids to list per format")
    p.add_argument("--regenerate", action="store_true",
                   help="also merge lazy snippets rebuilt from the true change with 1, 2 and "
                        "3 lines of context (formats lazy_context_1..3)")
    p.add_argument("--agent-styles", action="store_true",
                   help="also merge lazy snippets in the styles coding agents write, built "
                        "from the true change on the whole file (formats agent_signature, "
                        "agent_named, agent_whole_block, agent_whole_file)")
    p.add_argument("--seed", type=int, default=0, help="--agent-styles: seed of the snippets")
    p.add_argument("--formats", help="only these formats (comma-separated names, e.g. "
                                     "lazy,agent_signature)")
    p.add_argument("--outcomes", type=Path,
                   help="also write each merge's outcome (format, id, outcome) as JSON lines")
    p.add_argument("--shapes", action="store_true",
                   help="time the worst-case shapes on a generated file instead of the corpus")
    p.add_argument("--lines", type=int, default=20000, help="--shapes: lines of the file")
    p.add_argument("--repeat", type=int, default=3, help="--shapes: runs per shape (best kept)")
    p.add_argument("--by-language", action="store_true",
                   help="also print the figures per language for each format")


class _Tally:
    """Outcome counts of one format (or one format and language)."""

    def __init__(self) -> None:
        self.exact = self.flagged_exact = self.flagged_wrong = self.silent = self.errors = 0
        self.flagged_rival = 0  # flagged, wrong, and the truth is one of its rival readings
        self.total = 0

    def add(self, outcome: str) -> None:
        self.total += 1
        if outcome == "flagged_rival":
            self.flagged_rival += 1
            outcome = "flagged_wrong"
        setattr(self, outcome, getattr(self, outcome) + 1)

    def figures(self) -> dict[str, Any]:
        total = self.total or 1
        exact = self.exact + self.flagged_exact
        unsure = self.flagged_exact + self.flagged_wrong
        return {"exact": exact, "total": self.total, "exact_rate": exact / total,
                "served_exact": self.exact, "served_exact_rate": self.exact / total,
                "exact_but_flagged": self.flagged_exact, "wrong_flagged": self.flagged_wrong,
                "wrong_flagged_rival": self.flagged_rival,
                "ceiling": (self.flagged_exact + self.flagged_rival) / (unsure or 1),
                "wrong_unflagged": self.silent, "wrong_unflagged_rate": self.silent / total,
                "parse_errors": self.errors}


COLUMNS = ["exact_rate", "served_exact_rate", "exact_but_flagged", "wrong_flagged",
           "wrong_flagged_rival", "ceiling", "wrong_unflagged", "wrong_unflagged_rate",
           "parse_errors"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.merge import apply_snippet
    from fastapply.merge.edits import EditError

    if args.shapes:
        from fastapply.bench.merge_shapes import run_shapes

        return run_shapes(args.lines, args.repeat)
    edits = load_edits(args.data, args.limit)
    formats: dict[str, dict[str, Any]] = {}
    rows, failures, lang_rows = [], [], []
    outcomes: list[str] = []  # JSON lines for --outcomes
    # format name -> the snippet of a record in that format
    # (None: the format does not apply to this record, which is left out of its total)
    fields: dict[str, Callable[[dict[str, Any]], str | None]] = {
        name: itemgetter(field) for name, field in FIELDS.items()}
    if args.regenerate:
        fields.update({f"lazy_context_{c}": partial(_regenerated, context=c) for c in (1, 2, 3)})
    if args.agent_styles:
        from fastapply.corpus.agent_style import AGENT_STYLES

        fields.update({f"agent_{style}": partial(_agent, style=style, seed=args.seed)
                       for style in AGENT_STYLES})
    if args.formats:
        wanted = [f.strip() for f in args.formats.split(",") if f.strip()]
        unknown = [f for f in wanted if f not in fields]
        if unknown:
            raise SystemExit(f"unknown format(s) {', '.join(unknown)}; these are available "
                             f"with the options given: {', '.join(fields)}")
        fields = {name: fields[name] for name in wanted}
    for name, snippet_of in fields.items():
        tally = _Tally()
        by_lang: dict[str, _Tally] = defaultdict(_Tally)
        merge_ms: list[float] = []
        for rec in edits:
            snippet = snippet_of(rec)
            if snippet is None:
                continue
            start = time.perf_counter()
            try:
                result = apply_snippet(rec["original"], snippet)
            except EditError as exc:
                outcome, why = "errors", f"EditError: {exc}"[:90]
            else:
                right = result.text == rec["updated"]
                outcome = ("flagged_" if result.uncertain else "") + \
                    ("exact" if right else "wrong")
                outcome = "silent" if outcome == "wrong" else outcome
                if outcome == "flagged_wrong" and any(
                        c.text == rec["updated"] for c in result.with_readings().candidates):
                    outcome = "flagged_rival"
                why = "; ".join(u.message for u in result.uncertain)[:90] \
                    or "differs, not flagged"
            merge_ms.append((time.perf_counter() - start) * 1000)
            tally.add(outcome)
            outcomes.append(json.dumps({"format": name, "id": rec.get("id"), "outcome": outcome}))
            by_lang[rec.get("language", "?")].add(outcome)
            if outcome not in ("exact", "flagged_exact"):
                failures.append((name, rec["id"], why))
        formats[name] = {**tally.figures(),
                         "merge_ms_p50": round(percentile(merge_ms, 50), 3),
                         "merge_ms_p95": round(percentile(merge_ms, 95), 3),
                         "merge_s": round(sum(merge_ms) / 1000, 3)}
        f = formats[name]
        rows.append([name, f["total"], *(f[c] for c in COLUMNS),
                     *(f[k] for k in ("merge_ms_p50", "merge_ms_p95", "merge_s"))])
        if args.by_language:
            formats[name]["languages"] = {lang: t.figures() for lang, t in sorted(by_lang.items())}
            lang_rows += [[name, lang, t.total, *(t.figures()[c] for c in COLUMNS)]
                          for lang, t in sorted(by_lang.items())]
    print_table(["format", "total", *COLUMNS, "merge_ms_p50", "merge_ms_p95", "merge_s"], rows)
    if args.outcomes:
        args.outcomes.write_text("".join(line + "\n" for line in outcomes))
    if lang_rows:
        print()
        print_table(["format", "language", "total", *COLUMNS], lang_rows)
    shown = [f for name in fields for f in [x for x in failures if x[0] == name][: args.show]]
    if shown:
        print()
        print_table(["format", "failing id", "why"], shown)
    return {"formats": formats}
