"""Plumbing shared by the benchmark commands: loading edits, percentiles, output."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fastapply.examples import load_edits

__all__ = ["emit", "load_edits", "percentile", "print_table"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; 0.0 for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]) \
        if 0 < q < 100 else float(min(values) if q <= 0 else max(values))


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows as an aligned plain-text table (floats with 3 significant decimals)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1f}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def emit(result: dict[str, Any], path: Path | None = None) -> None:
    """Print the result as one JSON line (the benchmark's last line); optionally save it."""
    line = json.dumps(result, sort_keys=True)
    if path is not None:
        path.write_text(line + "\n")
    print(line, flush=True)
