"""Worst-case merge shapes on a large generated file (``bench merge --shapes``).

Each shape is a request that once cost seconds on a file far below the input limit;
every merge must stay near-linear (target: <= 200 ms at 20k lines) or be refused by the
merge's work budget with a message. The file is generated Python (seeded, so every run
merges the same text): functions with distinct names around generic lines (``return
None``, blank lines) that repeat, as real code does.

>>> lines = code_lines(12, seed=0)
>>> len(lines), lines[0].startswith("def ")
(12, True)
>>> sorted(SHAPES) == sorted(snippets("a\\nb\\n", seed=0))
True
"""

from __future__ import annotations

import random
import time
from typing import Any

from fastapply.bench.common import print_table

#: What each shape sends (all against the same generated file).
SHAPES = {
    "whole_file_as_lazy": "the whole file as its own snippet (no markers)",
    "whole_file_few_edits": "the whole file with 3 lines changed, no markers",
    "search_unmatched_100": "100 SEARCH blocks whose text is nowhere in the file",
    "search_matched_100": "100 SEARCH blocks of 3 lines, each found once",
    "lazy_many_markers": "100 lazy segments (a changed line, context each side), markers",
    "udiff_many_hunks": "a unified diff of 100 hunks",
}


def code_lines(n: int, seed: int) -> list[str]:
    """``n`` lines of generated Python: distinct functions around repeated generic lines."""
    rng = random.Random(seed)
    words = ["value", "count", "items", "total", "name", "path", "size", "key", "node", "data"]
    out: list[str] = []
    i = 0
    while len(out) < n:
        a, b = rng.sample(words, 2)
        out += [f"def {a}_{b}_{i}({a}, {b}=None):",
                f"    \"\"\"Compute the {a} of {b} number {i}.\"\"\"",
                f"    {a} = {a} + {i}",
                f"    if {b} is None:",
                "        return None",
                f"    for k in range({rng.randrange(2, 50)}):",
                f"        {b}.append({a} * k)",
                f"    return {b}",
                "", ""]
        i += 1
    return out[:n]


def joined(lines: list[str]) -> str:
    return "".join(s + "\n" for s in lines)


def snippets(text: str, seed: int) -> dict[str, str]:
    """The snippet of every shape for the file ``text``."""
    rng = random.Random(seed)
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    # places to edit: 100 lines found once in the file (``x = x + i``), spread over it
    spots = sorted(rng.sample([j for j, s in enumerate(lines) if s.startswith("    ") and
                               " = " in s and 2 <= j < len(lines) - 3],
                              min(100, len(lines) // 20)))
    edited = list(lines)
    for j in spots[:3]:
        edited[j] += "  # edited"
    search_hit = "".join(f"<<<<<<< SEARCH\n{joined(lines[j - 1:j + 2])}=======\n"
                         f"{joined([lines[j - 1], lines[j] + '  # edited', lines[j + 1]])}"
                         f">>>>>>> REPLACE\n" for j in spots)
    search_miss = "".join(f"<<<<<<< SEARCH\n    missing_{k} = {k}\n    again_{k}()\n=======\n"
                          f"    found_{k} = {k}\n>>>>>>> REPLACE\n" for k in range(100))
    lazy = "# ... existing code ...\n" + "".join(
        f"{lines[j - 1]}\n{lines[j]}  # edited\n{lines[j + 1]}\n# ... existing code ...\n"
        for j in spots)
    udiff = "--- a/x.py\n+++ b/x.py\n" + "".join(
        f"@@ -{j},3 +{j},3 @@\n {lines[j - 1]}\n-{lines[j]}\n+{lines[j]}  # edited\n"
        f" {lines[j + 1]}\n" for j in spots)
    return {"whole_file_as_lazy": text, "whole_file_few_edits": joined(edited),
            "search_unmatched_100": search_miss, "search_matched_100": search_hit,
            "lazy_many_markers": lazy, "udiff_many_hunks": udiff}


def run_shapes(lines: int, repeat: int, seed: int = 0) -> dict[str, Any]:
    """Merge every shape ``repeat`` times; print a table; return the best run's wall and
    CPU ms per shape (CPU time is the steadier figure on a shared machine)."""
    from fastapply.merge import apply_snippet
    from fastapply.merge.edits import EditError

    text = joined(code_lines(lines, seed))
    rows, result = [], {}
    for name, snippet in snippets(text, seed).items():
        best_ms, best_cpu_ms, outcome = float("inf"), float("inf"), ""
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                merged = apply_snippet(text, snippet)
                outcome = "flagged" if merged.uncertain else "merged"
            except EditError as exc:
                outcome = f"refused: {exc}"[:60]
            best_ms = min(best_ms, (time.perf_counter() - t0) * 1000)
            best_cpu_ms = min(best_cpu_ms, (time.process_time() - c0) * 1000)
        result[name] = {"ms": round(best_ms, 3), "cpu_ms": round(best_cpu_ms, 3),
                        "outcome": outcome.split(":")[0]}
        rows.append([name, round(best_ms, 3), round(best_cpu_ms, 3), outcome])
    print_table(["shape", "ms", "cpu_ms", "outcome"], rows)
    return {"shapes": result, "lines": lines, "repeat": repeat}
