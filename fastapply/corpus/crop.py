"""Windows around a change: :func:`window` crops a record to the lines around some of its
changes, so that CPU training and evaluation see short examples whose true merge is still
known exactly."""

from __future__ import annotations

import random

from fastapply.corpus.agent_style import _join, _opcodes
from fastapply.corpus.snippets import lines_of


def window(original: str, updated: str, rng: random.Random, max_lines: int = 60,
           margin: tuple[int, int] = (3, 20)) -> tuple[str, str] | None:
    """A crop of ``original`` around one run of nearby changes, with those changes
    applied: ``(original_window, updated_window)``, or None when the change alone is
    longer than ``max_lines``. Changes outside the crop are left out of both sides, so
    the pair is itself a true edit.

    >>> old = "".join(f"l{i}\\n" for i in range(100))
    >>> w = window(old, old.replace("l50\\n", "L50\\n"), random.Random(0))
    >>> "L50" in w[1] and "l50" in w[0] and len(w[0].splitlines()) < 60
    True
    """
    old, new = lines_of(original), lines_of(updated)
    ops = [op for op in _opcodes(old, new) if op[0] != "equal"]
    if not ops:
        return None
    first = rng.randrange(len(ops))
    i1 = ops[first][1]
    last = first
    while last + 1 < len(ops) and ops[last + 1][2] - i1 <= max_lines // 2:
        last += 1
    i2 = ops[last][2]
    span_new = sum(j2 - j1 for _t, _a, _b, j1, j2 in ops[first:last + 1])
    if max(i2 - i1, span_new) > max_lines:
        return None
    a = max(0, i1 - rng.randint(*margin))
    b = min(len(old), i2 + rng.randint(*margin))
    kept = range(first, last + 1)  # changes outside the crop stay as they were
    out_old = old[a:b]
    out_new: list[str] = []
    pos = a
    for k in kept:
        _tag, o1, o2, j1, j2 = ops[k]
        out_new.extend(old[pos:o1])
        out_new.extend(new[j1:j2])
        pos = o2
    out_new.extend(old[pos:b])
    if not out_old or out_old == out_new:
        return None
    return _join(out_old), _join(out_new)
