"""Where an unsure merge needs a witness: windows around the lines its readings differ on.

An unsure merge (:class:`fastapply.merge.MergeResult` with ``candidates``) names the
readings it weighed as whole files. Two readings agree everywhere but in a run of lines;
:func:`unsure_windows` turns those runs, and the lines where the merge reported an unsure
place, into windows of the chosen file: the run plus ``context`` lines each side, widened
to lines the chosen reading keeps from the original (so the window is exactly the merge of
a run of original lines), windows that overlap or nearly touch joined. Each window lists
every reading's text of it, the chosen one first. Whatever a witness picks in each window,
the file served is the chosen file with those windows replaced: with one window, exactly
the picked reading's whole file.

>>> chosen = ["a", "b", "X", "c", "d"]
>>> rival = ["a", "b", "c", "d"]          # the other reading keeps no X
>>> kept = [0, 1, -1, 2, 3]                # original a b c d; X written by the edit
>>> [w] = unsure_windows(chosen, kept, [rival], [], context=1)
>>> w.start, w.end, w.orig_start, w.orig_end  # chosen lines 1:4 are original lines 1:3
(1, 4, 1, 3)
>>> w.texts
(('b', 'X', 'c'), ('b', 'c'))
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapply.merge.syntax import EditPlan, is_marker

if TYPE_CHECKING:
    from fastapply.merge.apply import MergeResult

#: Unchanged lines shown each side of the lines where the readings differ.
CONTEXT = 6
#: Windows whose gap is at most this many lines are joined (one prompt, not two).
JOIN = 4
#: Lines of two readings' differing middle past which it is one run, not diffed (a diff
#: of long runs of repeated lines costs seconds).
DIFF_LINES = 4000


@dataclass(frozen=True)
class Window:
    """Lines ``start:end`` of the chosen file, the merge of original lines
    ``orig_start:orig_end`` under every reading; ``texts`` holds each distinct reading's
    lines there (the chosen one first), ``readings`` which candidate each came from first,
    and ``members`` every candidate whose lines there each text is (a rival that differs
    from the chosen reading only elsewhere shares the chosen text here). A witness that
    takes text ``i`` here keeps only the candidates of ``members[i]``: over several windows,
    only a candidate every window agrees with may be served."""

    start: int
    end: int
    orig_start: int
    orig_end: int
    texts: tuple[tuple[str, ...], ...]
    readings: tuple[int, ...]
    members: tuple[frozenset[int], ...] = ()

    def agreeing(self, text: int) -> frozenset[int]:
        """The candidates whose lines here are text ``text``."""
        return self.members[text] if self.members else frozenset({self.readings[text]})


def _span(chosen: Sequence[str], other: Sequence[str]) -> tuple[int, int]:
    """Lines ``start:end`` of ``chosen`` outside the common head and tail of the two.

    >>> _span(["a", "b", "c"], ["a", "x", "c"]), _span(["a", "c"], ["a", "b", "c"])
    ((1, 2), (1, 1))
    """
    most = min(len(chosen), len(other))
    head = 0
    while head < most and chosen[head] == other[head]:
        head += 1
    tail = 0
    while tail < most - head and chosen[-1 - tail] == other[-1 - tail]:
        tail += 1
    return head, len(chosen) - tail


def _snap(start: int, end: int, kept: Sequence[int],
          lines: Sequence[str] = ()) -> tuple[int, int]:
    """``start:end`` widened until its first and last lines are kept original lines (or
    the file's edges), so it is the merge of the original lines between them, and its
    first line is not blank where ``lines`` are given (a model's answer that opens with a
    blank line reads like a newline after its opening tag, which extraction drops)."""
    n = len(kept)
    start, end = max(0, min(start, n)), max(0, min(end, n))
    while start > 0 and (kept[start] < 0 or (lines and not lines[start].strip())):
        start -= 1
    while end < n and (end == 0 or kept[end - 1] < 0):
        end += 1
    return start, end


def _orig_range(start: int, end: int, kept: Sequence[int], orig_lines: int) -> tuple[int, int]:
    """The original lines whose merge is chosen lines ``start:end`` (see _snap)."""
    lo = kept[start] if start < len(kept) and kept[start] >= 0 else \
        next((k + 1 for k in reversed(kept[:start]) if k >= 0), 0)
    hi = kept[end - 1] + 1 if end > 0 and kept[end - 1] >= 0 else \
        next((k for k in kept[end:] if k >= 0), orig_lines)
    return lo, max(lo, hi)


def _diff_spans(chosen: Sequence[str], other: Sequence[str]
                ) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """The runs of ``chosen`` lines where ``other`` differs (``start:end``, an insertion
    as an empty run), and for every line of ``chosen`` they share, its line in ``other``.

    >>> _diff_spans(["a", "b", "c", "d", "e"], ["a", "B", "c", "d", "E"])[0]
    [(1, 2), (4, 5)]
    """
    head, end = _span(chosen, other)
    tail = len(chosen) - end
    same = {i: i for i in range(head)}
    same.update({len(chosen) - 1 - t: len(other) - 1 - t for t in range(tail)})
    mid_a, mid_b = chosen[head:end], other[head:len(other) - tail]
    if len(mid_a) + len(mid_b) > DIFF_LINES:  # one run: a diff of it costs too much
        return [(head, end)], same
    spans = []
    ops = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, _j2 in ops:
        if tag == "equal":
            same.update({head + i1 + d: head + j1 + d for d in range(i2 - i1)})
        else:
            spans.append((head + i1, head + i2))
    return spans, same


def unsure_windows(chosen: Sequence[str], kept: Sequence[int],
                   rivals: Sequence[Sequence[str]], unsure_lines: Sequence[int],
                   context: int = CONTEXT, join: int = JOIN,
                   orig_lines: int | None = None) -> list[Window]:
    """The windows of ``chosen`` (a reading's lines, ``kept[i]`` the original line of its
    line ``i`` or -1) that hold every line where a rival reading differs and every
    original line of ``unsure_lines`` (0-based) where the merge was unsure, each with
    ``context`` lines each side; windows ``join`` lines apart or closer are joined. A
    rival that differs in two far places has a window at each."""
    n_orig = orig_lines if orig_lines is not None else 1 + max((k for k in kept if k >= 0),
                                                                default=-1)
    spans: list[tuple[int, int, set[int]]] = []
    maps: dict[int, dict[int, int]] = {}
    for k, rival in enumerate(rivals, 1):
        runs, maps[k] = _diff_spans(chosen, rival)
        spans.extend((start, end, {k}) for start, end in runs)
    where = {o: i for i, o in enumerate(kept) if o >= 0}
    for line in unsure_lines:
        if line in where:
            spans.append((where[line], where[line] + 1, set()))
            continue
        # a line an edit replaced: the lines written between its kept neighbours
        before = max((i for o, i in where.items() if o < line), default=-1)
        after = min((i for o, i in where.items() if o > line), default=len(chosen))
        spans.append((before + 1, after, set()))
    spans.sort(key=lambda s: (s[0], s[1]))
    merged: list[tuple[int, int, set[int]]] = []
    for start, end, owners in spans:
        start, end = _snap(start - context, end + context, kept, chosen)
        if merged and start <= merged[-1][1] + join:
            lo, hi, was = merged[-1]
            start, end = _snap(lo, max(hi, end), kept, chosen)
            merged[-1] = (lo, end, was | owners)
        else:
            merged.append((start, end, set(owners)))
    windows = []
    for start, end, owners in merged:
        texts = [tuple(chosen[start:end])]
        readings = [0]
        # every candidate that differs from the chosen one only elsewhere shares its text
        members = [{0} | {k for k in range(1, len(rivals) + 1) if k not in owners}]
        for k in sorted(owners):
            same, rival = maps[k], rivals[k - 1]
            if (start > 0 and start - 1 not in same) or (end < len(chosen) and end not in same):
                continue  # cannot happen: a window's edges are lines both share
            lo = same[start - 1] + 1 if start > 0 else 0
            hi = same[end] if end < len(chosen) else len(rival)
            text = tuple(rival[lo:hi])
            if text not in texts:
                texts.append(text)
                readings.append(k)
                members.append(set())
            members[texts.index(text)].add(k)
        lo, hi = _orig_range(start, end, kept, n_orig)
        windows.append(Window(start, end, lo, hi, tuple(texts), tuple(readings),
                              tuple(frozenset(m) for m in members)))
    return windows


class NoWindows(Exception):
    """The merge's unsure places cannot be put in windows (a place tied to no line, or
    no reading named): the whole-file witness decides."""


def _hunk_span(lines: Sequence[str], plan: EditPlan, k: int) -> tuple[int, int]:
    """Snippet lines ``lo:hi`` (0-based) of hunk ``k`` of ``plan``, with the markers
    beside a lazy segment, a SEARCH/REPLACE block to its ``>>>>>>>`` line, a diff hunk
    from its ``@@`` line to the next one.

    >>> from fastapply.merge import parse_edit
    >>> s = "a\\n// ...\\nb\\nc\\n// ...\\nd\\n".split("\\n")
    >>> _hunk_span(s, parse_edit("\\n".join(s)), 1)
    (1, 5)
    """
    hunk = plan.hunks[k]
    lo = hunk.snippet_line - 1
    if hunk.kind == "lazy":
        hi = lo + len(hunk.new)
        if lo > 0 and is_marker(lines[lo - 1]):
            lo -= 1
        if hi < len(lines) and is_marker(lines[hi]):
            hi += 1
        return lo, hi
    hi = lo + 1
    while hi < len(lines):
        line = lines[hi]
        hi += 1
        if hunk.kind == "search_replace" and line.startswith(">>>>>>>"):
            break
        if hunk.kind == "udiff" and hi < len(lines) and lines[hi].startswith(("@@", "--- ")):
            break
    return lo, hi


def snippet_part(snippet: str, plan: EditPlan | None, hunks: set[int]) -> str:
    """The snippet's lines from the first to the last hunk of ``hunks`` (markers beside
    them included); the whole snippet where none is named."""
    if plan is None or not hunks:
        return snippet
    lines = snippet.splitlines(keepends=True)
    bare = [s.rstrip("\r\n") for s in lines]
    spans = [_hunk_span(bare, plan, k) for k in sorted(hunks) if k < len(plan.hunks)]
    if not spans:
        return snippet
    return "".join(lines[min(lo for lo, _ in spans):max(hi for _, hi in spans)])


def _hunks_in(window: Window, placed: Sequence[Sequence[tuple[int, int, int]]]) -> set[int]:
    """The hunks some reading placed inside the window's original lines."""
    lo, hi = window.orig_start, window.orig_end
    return {k for places in placed for k, start, end in places
            if ((start < hi and end > lo) if start < end else lo < start < hi)}


@dataclass(frozen=True)
class WindowTask:
    """One window as the model is asked about it."""

    window: Window
    #: The original lines of the window (the prompt's code).
    original: str
    #: The part of the snippet placed there (the prompt's update).
    snippet: str
    #: Each reading's text of the window, the chosen one first.
    texts: tuple[str, ...]


def window_tasks(original: str, snippet: str, merge: MergeResult) -> list[WindowTask]:
    """The windows of an unsure merge as the model is asked about them (the windowed
    witness serves them; training builds its hard cases from them), or NoWindows where an
    unsure place is tied to no line or the merge named no readings."""
    if not merge.candidates or any(u.line <= 0 or not u.local for u in merge.uncertain):
        raise NoWindows  # an unsure place no window holds: the whole file decides
    chosen = merge.text.splitlines(keepends=True)
    if len(chosen) != len(merge.kept):
        raise NoWindows
    rivals = [c.text.splitlines(keepends=True) for c in merge.candidates[1:]]
    orig_lines = original.splitlines(keepends=True)
    windows = unsure_windows(chosen, merge.kept, rivals,
                             [u.line - 1 for u in merge.uncertain], orig_lines=len(orig_lines))
    placed = [c.placed for c in merge.candidates]
    return [WindowTask(w, "".join(orig_lines[w.orig_start:w.orig_end]),
                       snippet_part(snippet, merge.plan, _hunks_in(w, placed)),
                       tuple("".join(t) for t in w.texts)) for w in windows]
