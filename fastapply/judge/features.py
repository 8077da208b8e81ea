"""What the judge reads of one reading: its change to the original, beside the snippet.

A reading is a whole file the merge proposes. Its features are figures of the *edit*
(the lines it removes and inserts, their context, the snippet's lines) and of the
merge's doubts: the diff is taken over the region where the reading and the original
part (their common head and tail cut off first), so it costs what the edit costs; the
whole file is only walked in linear passes (that head and tail, the count of each line)
and by the parser (:mod:`.syntax`; tree-sitter: milliseconds for thousands of lines).

>>> f = reading_features("a\\nb\\nc\\n", "a\\n# ...\\nc\\nd\\n", "a\\nb\\nc\\nd\\n")
>>> f["added"], f["removed"], f["removed_unshown"], f["snippet_lines_missing"]
(1, 0, 0, 0)
>>> reading_features("a\\nb\\nc\\n", "a\\nc\\n", "a\\nc\\n")["removed_unshown"]
1
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from fastapply.judge.syntax import Syntax
from fastapply.merge.definitions import defined_name
from fastapply.merge.syntax import is_commented, is_marker, says_removed

#: Words of the merge's doubts (its Uncertainty messages), each a feature: how many of
#: the merge's unsure places say it.
DOUBT_WORDS: dict[str, str] = {
    "doubt_tie": r"matches at lines|found at lines|its other match",
    "doubt_edge": r"edge|ends at|begins at|starts at",
    "doubt_unchanged": r"unchanged",
    "doubt_removal": r"remov|delet",
    "doubt_blank": r"blank",
    "doubt_second_copy": r"second copy|twice|doubl",
    "doubt_fragment": r"fragment|no marker",
    "doubt_nowhere": r"matches nothing|not found|nowhere",
}
_DOUBTS = {k: re.compile(v, re.IGNORECASE) for k, v in DOUBT_WORDS.items()}
#: Words of a rival reading's ``how``, each a 0/1 feature (the chosen reading has none).
HOW_WORDS: dict[str, str] = {
    "how_other_match": r"other match",
    "how_edge": r"edge",
    "how_kept": r"kept|keep",
    "how_replaced": r"replac",
}
_HOWS = {k: re.compile(v, re.IGNORECASE) for k, v in HOW_WORDS.items()}

#: Every feature, in the order the judge's model reads them.
FEATURES: tuple[str, ...] = (
    "certain", "chosen", "readings", "reading_index", "lazy",
    "file_lines_log", "snippet_lines", "snippet_markers", "snippet_removal_markers",
    "snippet_leading_marker", "snippet_trailing_marker",
    "hunks", "added", "removed", "removed_blank", "added_blank",
    "removed_unshown", "removed_unshown_run", "removed_unshown_comments",
    "removed_unshown_definitions", "removed_declaration_comments",
    "added_not_in_snippet", "snippet_lines_missing", "snippet_out_of_order",
    "doubled_adjacent", "near_copies_of_neighbours", "lines_in_excess",
    "blank_run_longest_added",
    "removed_unshown_over_least", "added_over_least", "removed_over_least",
    "syntax_errors_added", "definitions_doubled",
    *DOUBT_WORDS, *HOW_WORDS,
)


def _key(line: str) -> str:
    return line.strip()


Opcodes = list[tuple[str, int, int, int, int]]


def _opcodes(original: list[str], reading: list[str]) -> tuple[int, Opcodes]:
    """The diff of ``reading`` against ``original`` over the region where they part
    (in whole-file line numbers), with the common head's length."""
    head = 0
    while head < min(len(original), len(reading)) and original[head] == reading[head]:
        head += 1
    tail = 0
    while tail < min(len(original), len(reading)) - head and \
            original[-1 - tail] == reading[-1 - tail]:
        tail += 1
    a, b = original[head:len(original) - tail], reading[head:len(reading) - tail]
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return head, [(t, i1 + head, i2 + head, j1 + head, j2 + head) for t, i1, i2, j1, j2 in ops
                  if t != "equal"]


def _missing_in_order(body: Sequence[str], lines: Sequence[str]) -> int:
    """Snippet lines (keys) not found in ``lines`` in order, greedily (earliest match)."""
    i, missing = 0, 0
    for want in body:
        j = i
        while j < len(lines) and lines[j] != want:
            j += 1
        if j == len(lines):
            missing += 1
        else:
            i = j + 1
    return missing


def _near(a: str, b: str) -> bool:
    """Two lines nearly equal (not equal): a kept line written again, slightly changed."""
    if a == b or min(len(a), len(b)) < 8:
        return False
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.85


def reading_features(original: str, snippet: str, reading: str, *, certain: bool = False,
                     chosen: bool = True, readings: int = 1, reading_index: int = 0,
                     lazy: bool = True, doubts: Sequence[str] = (), how: str = "",
                     syntax: Syntax | None = None) -> dict[str, float]:
    """The features of one reading (see :data:`FEATURES`); ``syntax`` is the original
    parsed once per request (:meth:`Syntax.of`), None for no parser signals."""
    orig, read = original.splitlines(), reading.splitlines()
    snip = snippet.splitlines()
    body = [_key(s) for s in snip if not is_marker(s)]
    body_set = Counter(k for k in body if k)
    markers = [s for s in snip if is_marker(s)]
    _, ops = _opcodes(orig, read)
    removed_lines = [(i, orig[i]) for _t, i1, i2, _j1, _j2 in ops for i in range(i1, i2)]
    added_lines = [(j, read[j]) for _t, _i1, _i2, j1, j2 in ops for j in range(j1, j2)]
    unshown = [(i, s) for i, s in removed_lines if _key(s) and _key(s) not in body_set]
    run, longest, last = 0, 0, -2
    for i, _ in unshown:
        run = run + 1 if i == last + 1 else 1
        longest, last = max(longest, run), i
    removed_at = {i for i, _ in removed_lines}
    decl_comments = sum(1 for i, s in unshown if is_commented(s) and any(
        k not in removed_at and defined_name(orig[k]) for k in range(i + 1, min(i + 4, len(orig)))
        if _key(orig[k]) and not is_commented(orig[k])))
    read_keys = [_key(s) for s in read]
    orig_keys = [_key(s) for s in orig]
    doubled = sum(1 for a, b in pairwise(read_keys) if a and a == b) - \
        sum(1 for a, b in pairwise(orig_keys) if a and a == b)
    added_at = {j for j, _ in added_lines}
    near = sum(1 for j, s in added_lines if any(
        k not in added_at and _near(_key(s), read_keys[k])
        for k in range(max(0, j - 3), min(len(read), j + 4))))
    # a line the reading holds more often than the original and the snippet together
    count_o, count_r = Counter(_key(s) for s in orig), Counter(read_keys)
    excess = sum(max(0, count_r[k] - count_o[k] - body_set[k])
                 for k in {_key(s) for _, s in added_lines} if k)
    blank_run, run = 0, 0
    for _, s in added_lines:
        run = run + 1 if not s.strip() else 0
        blank_run = max(blank_run, run)
    out: dict[str, float] = {
        "certain": float(certain), "chosen": float(chosen), "readings": readings,
        "reading_index": reading_index, "lazy": float(lazy),
        "file_lines_log": math.log1p(len(orig)), "snippet_lines": len(body),
        "snippet_markers": len(markers),
        "snippet_removal_markers": sum(1 for s in markers if says_removed(s)),
        "snippet_leading_marker": float(bool(snip) and is_marker(snip[0])),
        "snippet_trailing_marker": float(bool(snip) and is_marker(snip[-1])),
        "hunks": len(ops), "added": len(added_lines), "removed": len(removed_lines),
        "removed_blank": sum(1 for _, s in removed_lines if not s.strip()),
        "added_blank": sum(1 for _, s in added_lines if not s.strip()),
        "removed_unshown": len(unshown), "removed_unshown_run": longest,
        "removed_unshown_comments": sum(1 for _, s in unshown if is_commented(s)),
        "removed_unshown_definitions": sum(1 for _, s in unshown if defined_name(s)),
        "removed_declaration_comments": decl_comments,
        "added_not_in_snippet": sum(1 for _, s in added_lines if _key(s) and
                                    _key(s) not in body_set),
        "snippet_lines_missing": _missing_in_order([k for k in body if k],
                                                   [k for k in read_keys if k]),
        "snippet_out_of_order": 0.0,
        "doubled_adjacent": doubled, "near_copies_of_neighbours": near,
        "lines_in_excess": excess, "blank_run_longest_added": blank_run,
        "removed_unshown_over_least": 0.0, "added_over_least": 0.0,
        "removed_over_least": 0.0,
        **(syntax.signals(reading) if syntax is not None else
           {"syntax_errors_added": float("nan"), "definitions_doubled": float("nan")}),
    }
    present = Counter(k for k in read_keys if k)
    out["snippet_out_of_order"] = float(out["snippet_lines_missing"] > 0 and all(
        present[k] >= n for k, n in body_set.items()))
    joined = "\n".join(doubts)
    out.update({k: len(rx.findall(joined)) for k, rx in _DOUBTS.items()})
    out.update({k: float(bool(rx.search(how))) for k, rx in _HOWS.items()})
    return out


def relative(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """The readings of one merge, each told how far it is from the least of them in what it
    removes unshown, adds and removes (a right reading is most often the one that takes
    away least that the snippet does not show)."""
    for name, of in (("removed_unshown_over_least", "removed_unshown"),
                     ("added_over_least", "added"), ("removed_over_least", "removed")):
        least = min(r[of] for r in rows)
        for r in rows:
            r[name] = r[of] - least
    return rows
