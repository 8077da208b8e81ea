"""Deterministic merge: original + parsed edit -> candidate file, plus where it was unsure.

Every hunk becomes a replacement of a run of original lines, in original coordinates;
the replacements are then laid into the file in order. Lines are compared without
trailing whitespace and, as a fallback, without indentation too (the snippet is then
re-indented by the offset found at its anchor). A context line that matches keeps the
original's exact text (its trailing spaces, its line ending). An anchor found twice is
resolved by order (after the previous hunk, nearest first) and reported; one found
nowhere leaves the original untouched there and is reported, with the closest match.
Code is never dropped silently: anything removed lies between a hunk's own anchors.

>>> merge_text = lambda o, s: apply_snippet(o, s).text
>>> merge_text("a\\nb\\nc\\nd\\n", "a\\n# ... existing code ...\\nc\\nc2\\nd\\n")
'a\\nb\\nc\\nc2\\nd\\n'
>>> r = apply_snippet("x\\ny\\nx\\n", "<<<<<<< SEARCH\\nx\\n=======\\nz\\n>>>>>>> REPLACE\\n")
>>> r.text
'z\\ny\\nx\\n'
>>> print(r.uncertain[0].message)
SEARCH block 1 (snippet line 1): its text matches at lines 1 and 3; used line 1
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from fastapply.merge import doubts, formats
from fastapply.merge.blocks import replace_block
from fastapply.merge.costs import WorkBudget
from fastapply.merge.definitions import opens_block
from fastapply.merge.edits import parse_edit
from fastapply.merge.indent import tabs_for_spaces
from fastapply.merge.inputs import diff_lines_in_lazy, refuse_block_markers
from fastapply.merge.lines import key_exact, key_loose
from fastapply.merge.merger import Uncertainty, _Merger
from fastapply.merge.precision import strict_runs, unanchored_removals
from fastapply.merge.review import review
from fastapply.merge.syntax import EditError, EditPlan
from fastapply.merge.text import line_ends, with_ends

__all__ = ["Candidate", "EditError", "MergeResult", "Uncertainty", "WorkBudget", "apply_snippet",
           "doubts_raised", "merge"]


#: Tied anchors retried the other way when the chosen reading is in other trouble (each
#: retry re-runs the reading).
TIE_RETRIES = 8
#: Most rival readings an unsure merge builds (each is a whole file: a reading re-run).
RIVALS = 12


@dataclass(frozen=True)
class Candidate:
    """One reading the merge weighed, as a whole file."""

    #: The merged file under this reading.
    text: str
    #: How this reading differs from the chosen one, for a person ("chosen" for it).
    how: str
    #: (hunk index in the plan, first original line, end) of every hunk it placed:
    #: which part of the snippet a region of the original answers to.
    placed: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class MergeResult:
    """The candidate file and the places where the merge was unsure.

    An unsure merge can also name the readings it weighed (``candidates``: the chosen one
    first, then each distinct rival, built within the merge's work budget) and, per line
    of ``text``, the original line it keeps (``kept``: -1 for a line an edit wrote), so a
    witness can be asked about the lines where the readings differ only
    (:mod:`fastapply.merge.windows`). They cost a reading each, so they are built only
    when asked for (:meth:`with_readings`); a certain merge has none.
    """

    text: str
    uncertain: tuple[Uncertainty, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    kept: tuple[int, ...] = ()
    #: The parsed snippet (its hunks' snippet lines), for an unsure merge.
    plan: EditPlan | None = None
    #: Builds ``candidates`` and ``kept`` on demand (the rivals cost a reading each).
    readings: Callable[[], tuple[tuple[Candidate, ...], tuple[int, ...]]] | None = field(
        default=None, compare=False, repr=False)

    def with_readings(self) -> MergeResult:
        """This result with its candidates and kept lines built (see the class)."""
        if self.readings is None or self.candidates:
            return self
        candidates, kept = self.readings()
        return replace(self, candidates=candidates, kept=kept)

    def check(self) -> str:
        """The text, or EditError listing every unsure place."""
        if self.uncertain:
            raise EditError("; ".join(u.message for u in self.uncertain))
        return self.text


def _reading(plan: EditPlan, orig: list[str], context: int | None, eof: int,
             shared: _Merger | None, flips: frozenset[int],
             budget: WorkBudget | None = None,
             anchored: dict[int, tuple[bool, bool]] | None = None,
             edge_flips: frozenset[tuple[int, str]] = frozenset()) -> _Merger:
    """Merge ``plan`` with ``context`` lines of context, taking the rival placement of
    the lazy segments numbered in ``flips`` and reading the unsure edges in
    ``edge_flips`` the other way; the segments numbered in ``anchored`` have an edge
    anchored where its line is found (see _signature_edges)."""
    m = _Merger(orig, context, eof, shared, flips, edge_flips)
    if shared is None:
        m.anchored = anchored or {}
        m.budget = budget or WorkBudget()
        m.snippet_lines = frozenset(s.strip() for hunk in plan.hunks for s in hunk.new
                                    if s.strip())
        m.mixed = plan.format == "mixed"
    for k, hunk in enumerate(plan.hunks):
        done = len(m.replacements)
        if hunk.kind == "lazy":
            doubts.lazy_segment(m, hunk)
        else:
            replace_block(m, hunk)
        m.placed.extend((k, r.start, r.end) for r in m.replacements[done:])
    for k, hunk in enumerate(plan.hunks):
        if hunk.removal is not None:  # a removal marker: the lines it stands between go
            mine = [(a, b) for h, a, b in m.placed if h == k]
            if not mine:
                continue
            if hunk.removal[0] == "after":
                lo = max(b for _, b in mine)
                hi = min((a for h, a, _ in m.placed if h > k), default=m.eof)
            else:
                hi = min(a for a, _ in mine)
                lo = max((b for h, _, b in m.placed if h < k), default=0)
            m.removal_gap(hunk, lo, hi)
    return m


def _signature_edges(plan: EditPlan, orig: list[str]
                     ) -> tuple[EditPlan, dict[int, tuple[bool, bool]]]:
    """A lazy snippet that starts, with no marker before it, at a line that opens a block
    (a signature) found once in the original but not as its first line starts there: an
    agent wrote the function or class from its signature to its end, with markers only
    inside it (and shows no line found once, before it). Its first segment then keeps
    the lines before it (as if a marker came first), and its last segment, with no
    marker after it, ends where its last line is found (the block's end) unless that
    line is also the file's last. Returns the plan with those markers implied and, by
    segment number, the edges (before, after) they were implied for (a snippet without
    any marker is read by :func:`fastapply.merge.doubts.lazy_segment`).

    >>> orig = ["import os", "", "def f():", "    a = 1", "    b = 2", "    return a", "",
    ...         "x = f()"]
    >>> plan, anchored = _signature_edges(parse_edit(
    ...     "def f():\\n    # ... existing code ...\\n    b = 3\\n    return a\\n"), orig)
    >>> [(h.marker_before, h.marker_after) for h in plan.hunks], anchored
    ([(True, True), (True, True)], {1: (True, False), 2: (False, True)})
    """
    hunks = list(plan.hunks)
    if not hunks or any(h.kind != "lazy" for h in hunks) or hunks[0].marker_before or \
            (len(hunks) == 1 and not hunks[0].marker_after):
        return plan, {}
    head = [s for s in hunks[0].new if s.strip()]
    first = key_exact(head[0])
    file_lines = [key_exact(o) for o in orig if o.strip()]
    if not file_lines or first == file_lines[0] or file_lines.count(first) != 1 or \
            not opens_block(head):
        return plan, {}
    shown = {key_loose(s) for h in hunks for s in h.new if s.strip()}
    loose = Counter(key_loose(s) for s in file_lines)
    before = file_lines[:file_lines.index(first)]
    if any(loose[key_loose(s)] == 1 and key_loose(s) in shown for s in before):
        return plan, {}  # it shows a line from before its start: moved, or not its start
    anchored = {hunks[0].number: (True, False)}
    hunks[0] = replace(hunks[0], marker_before=True)
    tail = hunks[-1]
    last = next(key_exact(s) for s in reversed(tail.new) if s.strip())
    if not tail.marker_after and last != file_lines[-1]:
        hunks[-1] = replace(tail, marker_after=True)
        anchored[tail.number] = (anchored.get(tail.number, (False, False))[0], True)
    return EditPlan(tuple(hunks)), anchored


#: Most removal runs of an unsure merge read the other way, one rival each.
KEPT_RUNS = 4


def _kept_runs(chosen: _Merger) -> Iterator[tuple[_Merger, str]]:
    """Rival readings that keep a run of lines the chosen reading removes by adjacency
    (:func:`.layout.removed_runs`), where the merge named a doubt on that run's lines
    (on any run, where it named none there): each such run kept alone, then all of them
    together."""
    doubted = [run for run in chosen.runs
               if any(run[2] < u.line <= run[3] + 1 for u in chosen.uncertain)] or chosen.runs

    def keeping(runs: list[tuple[int, int, int, int]]) -> _Merger:
        other = copy.copy(chosen)
        other.uncertain = list(chosen.uncertain)
        other.replacements = list(chosen.replacements)
        for n, k, lo, hi in sorted(runs, key=lambda run: -run[1]):
            r = other.replacements[n]
            other.replacements[n] = replace(r, lines=[*r.lines[:k], *chosen.orig[lo:hi],
                                                      *r.lines[k:]])
        return other

    for run in doubted[:KEPT_RUNS]:
        yield keeping([run]), f"original lines {run[2] + 1}-{run[3]} kept"
    if len(doubted) > 1:
        yield keeping(doubted), "every doubted removal kept"


def merge(original: str, plan: EditPlan, budget: WorkBudget | None = None) -> MergeResult:
    """Merge ``plan`` into ``original``: best-effort candidate plus unsure places.

    The work it does is spent from ``budget`` (default: MERGE_WORK units); a merge that
    needs more is refused (EditError) rather than holding a worker for seconds.
    """
    newline = "\r\n" if original.count("\r\n") > original.count("\n") // 2 else "\n"
    body = original.replace("\r\n", "\n")
    final_newline = body.endswith("\n") or not body
    orig = body.split("\n")
    if body.endswith("\n"):
        orig.pop()
    if not body:
        orig = []
    budget = budget or WorkBudget()
    formats.diff_files(plan, orig)
    formats.refuse_ambiguous(plan, orig, budget)
    refuse_block_markers(plan, orig)
    # A lazy snippet usually shows the same number of context lines (1-3) beside each
    # change: try each and keep the reading its segments fit (fewest misfits; among
    # equals, the most context). One line of context is weak evidence, so a free
    # reading (0-3 lines, any mix) that anchors more unique lines beats it: LLM snippets
    # often show 2 lines before a change and 3 after. The free reading also beats any
    # reading that removes definitions or headings the snippet never names (``drops``:
    # a rewrite of a similar neighbour) if it removes fewer and anchors as many lines.
    # (Figures: docs/benchmarks.md.)
    lazy = any(hunk.kind == "lazy" for hunk in plan.hunks)
    # After a final newline a snippet may show the empty "line" that follows it as
    # context (``text.split("\n")`` has it): let lazy segments match it too.
    as_written = plan
    plan, anchored = _signature_edges(plan, orig)
    phantom = lazy and body.endswith("\n")
    if phantom:
        orig = [*orig, ""]
    best: _Merger | None = None
    weighed: list[_Merger] = []  # every reading made, the rivals of an unsure merge
    for context in (3, 2, 1, None) if lazy else (None,):
        if best is not None and (best.violations == 0 if context is not None
                                 else best.context != 1 and not best.drops):
            if context is not None and best.drops:
                continue  # only the free reading may still win
            break  # no later reading can win
        m = _reading(plan, orig, context, len(orig) - phantom, best, frozenset(), budget,
                     anchored)
        weighed.append(m)
        if best is None:
            best = m
        elif context is not None:
            if m.violations < best.violations:
                best = m
        elif (m.anchors >= best.anchors and m.drops < best.drops) or \
                (best.context == 1 and m.anchors > best.anchors):
            best = m
    assert best is not None
    m = best
    # An anchor that fits two places (a tie): if the reading is in trouble beyond the ties
    # themselves, does taking the other place let the later segments fit better?
    for tie in m.ties[:TIE_RETRIES]:
        if not m.violations and len(m.uncertain) + len(m.misfits) <= len(m.ties):
            break
        other = _reading(plan, orig, m.context, len(orig) - phantom, m, m.flips | {tie})
        if other.trouble() < m.trouble():
            m = other
    if m.fits:  # a segment unlike the others (a single odd one is just a style)
        m.uncertain.extend(m.misfits)
    m.uncertain.extend(diff_lines_in_lazy(plan, orig))
    m.uncertain.extend(Uncertainty(*f) for f in unanchored_removals(m.removals))
    m.uncertain.extend(Uncertainty(*f) for f in strict_runs(m.removals))
    m.uncertain.extend(m.idle)
    m.uncertain.extend(u for lo, hi, u in m.edges  # another copy inside a marker's gap
                       if not any(r.start < hi and r.end > lo for r in m.replacements))
    ends = line_ends(original)  # a file that mixes CRLF and LF keeps each line's ending

    def render(r: _Merger, kept: list[int] | None = None) -> str:
        """The file one reading writes (``kept`` gets its lines' original numbers)."""
        sources: list[int] | None = [] if ends else None
        lines = r.text_lines(sources, kept)
        if phantom and not any(x.end == len(orig) for x in r.replacements):
            lines.pop()  # the empty line after the final newline is still there: drop it
            if sources:
                sources.pop()
            if kept:
                kept.pop()
        # a diff said "No newline at end of file"
        newline_at_end = final_newline if r.final_newline is None else r.final_newline
        if ends and sources is not None:
            return with_ends(lines, sources, ends, newline, newline_at_end)
        text = "\n".join(lines) + ("\n" if lines and newline_at_end else "")
        return text.replace("\n", newline) if newline != "\n" else text

    text = render(m)
    chosen = m

    def readings() -> tuple[tuple[Candidate, ...], tuple[int, ...]]:
        """The chosen reading and its rivals: the other readings weighed, each tied
        segment at its other match, each unsure edge read the other way, a snippet from
        a signature read as written; each distinct file once, within the budget."""
        kept: list[int] = []
        render(chosen, kept)
        out = [Candidate(text, "chosen", tuple(chosen.placed))]
        eof = len(orig) - phantom

        def rivals() -> Iterator[tuple[_Merger, str]]:
            for r in weighed:
                yield r, (f"read with {r.context} lines of context" if r.context is not None
                          else "read with 0-3 lines of context")
            for tie in chosen.ties:
                yield (_reading(plan, orig, chosen.context, eof, chosen, chosen.flips ^ {tie}),
                       f"lazy segment {tie} at its other match")
            for edge in dict.fromkeys(chosen.edge_choices):
                yield (_reading(plan, orig, chosen.context, eof, chosen, chosen.flips,
                                edge_flips=frozenset({edge})),
                       f"lazy segment {edge[0]}: the lines {edge[1]} it read the other way")
            blank = frozenset(e for e in chosen.edge_choices if e[1].startswith("blank"))
            if len(blank) > 1:  # every blank-only anchor read as a removal at once
                yield (_reading(plan, orig, chosen.context, eof, chosen, chosen.flips,
                                edge_flips=blank),
                       "every removal anchored by blank lines beside a marker")
            named = frozenset(e for e in chosen.edge_choices if e[1] == "named")
            if named:  # every removal marker read as removing only what it names
                yield (_reading(plan, orig, chosen.context, eof, chosen, chosen.flips,
                                edge_flips=named),
                       "only what the removal markers name removed")
            for r, how in _kept_runs(chosen):
                yield r, how
            if anchored:
                yield (_reading(as_written, orig, chosen.context, eof, None, frozenset(),
                                chosen.budget),
                       "the snippet read as written (its first segment at the file's top)")

        try:
            for r, how in rivals():
                other = render(r)
                if all(c.text != other for c in out):
                    out.append(Candidate(other, how, tuple(r.placed)))
                if len(out) > RIVALS:
                    break
        except EditError:
            pass  # the budget is spent: the readings built so far
        return tuple(out), tuple(kept)

    return MergeResult(text, tuple(m.uncertain), plan=plan, readings=readings)


def apply_snippet(original: str, snippet: str, budget: WorkBudget | None = None
                  ) -> MergeResult:
    """Parse ``snippet``, merge it into ``original`` (spending ``budget``, see merge) and
    review the result (:func:`fastapply.merge.review.review`: what contradicts the snippet is
    flagged). A UTF-8 byte order mark before the file that the snippet never shows is
    kept and not merged (the snippet's first line matches without it); a snippet that
    shows it edits it like any text (a commit may remove it)."""
    bom = BOM if original.startswith(BOM) and BOM not in snippet else ""
    original = original[len(bom):]
    plan = tabs_for_spaces(parse_edit(snippet, original), original)
    result = merge(original, plan, budget)
    found = review(plan, original, result.text)
    if found:
        result = replace(result, uncertain=result.uncertain + tuple(
            Uncertainty(*f, local=False) for f in found))
    if not result.uncertain:
        result = replace(result, plan=None, readings=None)
    elif bom and result.readings is not None:
        build = result.readings

        def readings() -> tuple[tuple[Candidate, ...], tuple[int, ...]]:
            candidates, kept = build()
            return tuple(replace(c, text=bom + c.text) for c in candidates), kept

        result = replace(result, readings=readings)
    return replace(result, text=bom + result.text) if bom else result


#: The byte order mark some editors write before UTF-8 text.
BOM = "\ufeff"


def doubts_raised(original: str, snippet: str) -> list[str]:
    """The doubts of the lazy pipeline (:data:`fastapply.merge.doubts.PIPELINE`) that the
    merge of ``snippet`` into ``original`` raised on the reading it chose, by name, in
    order: what each doubt's docstring example shows.

    >>> doubts_raised("a\\nb\\n", "<<<<<<< SEARCH\\nb\\n=======\\nc\\n>>>>>>> REPLACE\\n")
    []
    >>> doubts_raised("x = 1\\ny = 2\\nx = 1\\n", "# ... existing code ...\\nx = 1\\nz = 3\\n"
    ...               "# ... existing code ...\\n")
    ['tie']
    """
    return [u.doubt for u in apply_snippet(original, snippet).uncertain if u.doubt]
