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
>>> merge_text("a\\nb\\nc\\n", "a\\n# ... existing code ...\\nc = 2\\n")
'a\\nb\\nc = 2\\n'
>>> r = apply_snippet("x\\ny\\nx\\n", "<<<<<<< SEARCH\\nx\\n=======\\nz\\n>>>>>>> REPLACE\\n")
>>> r.text
'z\\ny\\nx\\n'
>>> print(r.uncertain[0].message)
SEARCH block 1 (snippet line 1): its text matches at lines 1 and 3; used line 1
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapply.edits import EditError, EditPlan, Hunk, parse_edit

__all__ = ["EditError", "MergeResult", "Uncertainty", "apply_snippet", "merge"]


@dataclass(frozen=True)
class Uncertainty:
    """A place where the merge had to guess."""

    #: 1-based line of the original where it happened (0 when not tied to one).
    line: int
    #: What and where, for a person.
    message: str


@dataclass(frozen=True)
class MergeResult:
    """The candidate file and the places where the merge was unsure."""

    text: str
    uncertain: tuple[Uncertainty, ...] = ()

    def check(self) -> str:
        """The text, or EditError listing every unsure place."""
        if self.uncertain:
            raise EditError("; ".join(u.message for u in self.uncertain))
        return self.text


#: How far (in original lines) the next segment line may be from the previous match.
_WINDOW = 12
#: A line found more often than this after the cursor does not seed an alignment.
_MAX_SEEDS = 48
#: A line found at most this often in the original is "rare": a trustworthy anchor.
_RARE = 3
#: Gap allowed between two rare anchors (a deletion can be long).
_RARE_WINDOW = 200
#: Score lost per original line a lazy segment would drop (a unique line scores 1).
_DELETE_COST = 0.01


@dataclass
class _Replacement:
    start: int  # first original line replaced (0-based)
    end: int  # one past the last
    lines: list[str]  # new lines (without line endings)


def _norm(line: str) -> str:
    return line.rstrip()


def _loose(line: str) -> str:
    return line.strip()


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _find_runs(needle: Sequence[str], hay: Sequence[str], key: Callable[[str], str],
               lo: int = 0) -> list[int]:
    """Start positions >= lo where ``needle`` occurs in ``hay`` (compared through key)."""
    if not needle:
        return []
    keys = [key(s) for s in needle]
    first = keys[0]
    n = len(keys)
    return [j for j in range(lo, len(hay) - n + 1)
            if key(hay[j]) == first and all(key(hay[j + t]) == keys[t] for t in range(1, n))]


def _closest(needle: Sequence[str], orig: Sequence[str]) -> int:
    """1-based line where ``needle`` comes closest (most aligned lines equal, stripped)."""
    keys = [_loose(s) for s in needle if _loose(s)] or [""]
    best, best_score = 0, 0.0
    stripped = [_loose(s) for s in orig]
    for j in range(len(orig)):
        score = sum(1 for t, k in enumerate(keys) if j + t < len(orig) and stripped[j + t] == k)
        if score > best_score:
            best, best_score = j, score
    if best_score == 0:
        ratio = [difflib.SequenceMatcher(None, keys[0], s).quick_ratio() for s in stripped]
        best = max(range(len(orig)), key=ratio.__getitem__) if orig else 0
    return best + 1


def _similar(a: str, b: str) -> bool:
    """Are two lines near enough that one probably replaces the other?"""
    return (_indent(a) == _indent(b) and bool(b.strip())
            and difflib.SequenceMatcher(None, a.strip(), b.strip()).ratio() >= 0.6)


def _reindent(lines: Sequence[str], snippet_indent: str, orig_indent: str) -> list[str]:
    """Shift lines by the indentation offset found at the anchor."""
    out = []
    for s in lines:
        if s.startswith(snippet_indent) and s.strip():
            out.append(orig_indent + s[len(snippet_indent):])
        else:
            out.append(s)
    return out


def _keep_original_context(new: Sequence[str], orig: Sequence[str]) -> list[str]:
    """``new`` with lines equal (modulo trailing space) to ``orig`` lines in the original's text."""
    sm = difflib.SequenceMatcher(None, [_norm(s) for s in new], [_norm(s) for s in orig],
                                 autojunk=False)
    out = list(new)
    for a, b, size in sm.get_matching_blocks():
        out[a:a + size] = orig[b:b + size]
    return out


def _context_from_original(old: Sequence[str], new: Sequence[str], region: Sequence[str],
                           shift: tuple[str, str] | None = None) -> list[str]:
    """``new`` where its context lines (equal in ``old`` and ``new``) take the original's text.

    Changed lines stay as written (re-indented by ``shift`` = (snippet indent, file
    indent) when the snippet was matched loosely), so whitespace-only edits survive;
    context lines keep what the file had (a snippet often loses trailing spaces).
    """
    out = _reindent(new, *shift) if shift else list(new)
    sm = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        out[b:b + size] = region[a:a + size]
    return out


class _Merger:
    def __init__(self, orig: list[str]) -> None:
        self.orig = orig
        self.replacements: list[_Replacement] = []
        self.uncertain: list[Uncertainty] = []
        self.pos = 0  # end of the previous hunk's region, for order-based matching
        self._tables: dict[Callable[[str], str], dict[str, list[int]]] = {}

    def unsure(self, line: int, message: str) -> None:
        self.uncertain.append(Uncertainty(line, message))

    def locate(self, hunk: Hunk, block: Sequence[str], near: int | None) -> tuple[int, bool]:
        """Start of ``block`` in the original (-1 if absent) and whether it was loose."""
        for key, loose in ((_norm, False), (_loose, True)):
            hits = _find_runs(block, self.orig, key)
            if not hits:
                continue
            after = [j for j in hits if j >= self.pos] or hits
            if near is not None:
                pick = min(after, key=lambda j: (abs(j - near), j))
            else:
                pick = after[0]
            confirmed = near is not None and abs(pick - near) <= 3  # the @@ line number agrees
            if len(hits) > 1 and not confirmed:
                where = " and ".join(str(j + 1) for j in hits[:2])
                more = f" (and {len(hits) - 2} more)" if len(hits) > 2 else ""
                self.unsure(pick + 1, f"{hunk.label}: its text matches at lines "
                                      f"{where}{more}; used line {pick + 1}")
            return pick, loose
        return -1, False

    def replace_block(self, hunk: Hunk) -> None:
        old, new = list(hunk.old), list(hunk.new)
        if not any(s.strip() for s in old):
            if not self.orig or not any(s.strip() for s in self.orig):
                self.replacements.append(_Replacement(0, len(self.orig), new))
            else:  # an empty SEARCH appends
                self.replacements.append(_Replacement(len(self.orig), len(self.orig), new))
            return
        near = hunk.old_start - 1 if hunk.old_start else None
        start, loose = self.locate(hunk, old, near)
        if start < 0:
            what = "SEARCH block" if hunk.kind == "search_replace" else "diff hunk"
            closest = _closest(old, self.orig)
            self.unsure(closest, f"{what} {hunk.number} (snippet line {hunk.snippet_line}) "
                                 f"not found in the original; closest match at line {closest}")
            return
        region = self.orig[start:start + len(old)]
        shift = None
        if loose:
            anchor = next(t for t, s in enumerate(old) if s.strip())
            shift = (_indent(old[anchor]), _indent(region[anchor]))
        self.replacements.append(_Replacement(start, start + len(old),
                                              _context_from_original(old, new, region, shift)))
        self.pos = start + len(old)

    def lazy_segment(self, hunk: Hunk) -> None:
        """Place one lazy segment: it replaces the original lines between its anchors."""
        full = list(hunk.new)
        if not any(s.strip() for s in self.orig):
            self.replacements.append(_Replacement(0, len(self.orig), full))
            return
        lead = next(i for i, s in enumerate(full) if s.strip())
        trail = next(i for i, s in enumerate(reversed(full)) if s.strip())
        core = full[lead:len(full) - trail]
        pairs, loose = self._ends(core, self.pos)
        if not pairs:
            pairs, loose = self._align(core, self.pos)
        if not pairs:
            if not hunk.marker_before and not hunk.marker_after:
                # No markers and no anchor: the snippet is the whole new file.
                self.replacements.append(_Replacement(0, len(self.orig), full))
                self.unsure(1, f"{hunk.label}: no line of it matches the original; treated "
                               f"as the whole new file")
                return
            closest = _closest(core, self.orig)
            self.unsure(closest, f"{hunk.label}: no line of it matches the original; placed "
                                 f"over the closest match, at line {closest}")
            pairs = [(0, closest - 1), (len(core) - 1, min(len(self.orig), closest - 1
                                                          + len(core)) - 1)]
            loose = False
        (h, jh), (_, jt) = pairs[0], pairs[-1]
        start, end = jh, jt + 1
        if h > 0 and lead:  # new first lines after blank context: they replace up to it
            q = next((q for q in range(jh - 1, max(self.pos, jh - h - _WINDOW) - 1, -1)
                      if not self.orig[q].strip()), None)
            if q is not None:
                start = q + 1
        base = start
        while start > self.pos and base - start < lead and not self.orig[start - 1].strip():
            start -= 1  # blank context lines above the segment
        base = end
        while end < len(self.orig) and end - base < trail and not self.orig[end].strip():
            end += 1
        ends_new = pairs[-1][0] < len(core) - 1
        if ends_new and hunk.marker_after and end < len(self.orig) and _similar(
                core[-1], self.orig[end]):
            self.unsure(end + 1, f"{hunk.label}: it ends in new lines with no context after "
                                 f"them, so original line {end + 1} was kept after them; if it "
                                 f"was meant to be replaced, add a line of context")
        if not hunk.marker_before:
            if start > 0:
                self.unsure(1, f"{hunk.label}: no marker comes before it, so original lines "
                               f"1-{start} were replaced by it; add a marker to keep them")
            start = 0
        if not hunk.marker_after:
            if end < len(self.orig):
                self.unsure(end + 1, f"{hunk.label}: no marker comes after it, so original "
                                     f"lines {end + 1}-{len(self.orig)} were replaced by it; "
                                     f"add a marker to keep them")
            end = len(self.orig)
        if loose:
            full = _reindent(full, _indent(core[h]), _indent(self.orig[jh]))
        region = self.orig[start:end]
        self.replacements.append(_Replacement(start, end, _keep_original_context(full, region)))
        self.pos = end

    def _positions(self, key: Callable[[str], str]) -> dict[str, list[int]]:
        """Original line positions by key (built once per key function)."""
        table = self._tables.get(key)
        if table is None:
            table = {}
            for j, line in enumerate(self.orig):
                table.setdefault(key(line), []).append(j)
            self._tables[key] = table
        return table

    def _ends(self, seg: Sequence[str], lo: int) -> tuple[list[tuple[int, int]], bool]:
        """First/last-line anchoring: the segment's first line at a, its last line at e.

        The lines matching in a row from a (the head run) and back from e (the tail run)
        count by rarity (a line found c times in the original weighs 1/c), minus
        ``_DELETE_COST`` for each original line in between that the segment would drop.
        ``e`` may also be the end of the head run (the segment ends in new lines). The
        best score wins, then the one nearest ``lo``, then the most compact region.

        Returns [(0, a), (i, e)] or [] when the first line is found nowhere.
        """
        for key, loose in ((_norm, False), (_loose, True)):
            table = self._positions(key)
            okeys = [key(s) for s in self.orig]
            skeys = [key(s) for s in seg]
            n = len(skeys)
            heads = table.get(skeys[0], [])
            heads = heads[bisect_left(heads, lo):][:_MAX_SEEDS]
            if not heads:
                continue
            tails = table.get(skeys[-1], [])
            weight = [1.0 / max(1, len(table.get(k, ()))) for k in skeys]

            best: tuple[float, int, int, int, int] | None = None  # (-score, a, span, e, i)
            for a in heads:
                h, wh = _run(okeys, skeys, weight, a, 1, 0, n)
                options = [(a + h - 1, h - 1, 0, 0.0)]
                for e in tails[bisect_left(tails, a + h):][:_MAX_SEEDS]:
                    t, wt = _run(okeys, skeys, weight, e, -1, n - 1, h - 1)
                    options.append((e, n - 1, t, wt))
                for e, i, t, wt in options:
                    dropped = max(0, (e - a + 1) - h - t)
                    cand = (-(wh + wt - _DELETE_COST * dropped), a, e - a, e, i)
                    if best is None or cand < best:
                        best = cand
            if best is not None:
                return [(0, best[1]), (best[4], best[3])], loose
        return [], False

    def _align(self, seg: Sequence[str], lo: int) -> tuple[list[tuple[int, int]], bool]:
        """Matched (segment line, original line) pairs of the best placement after ``lo``.

        Rare lines (found at most ``_RARE`` times in the original) seed alignments that
        grow through other rare lines, in order; the seed matching most rare lines wins,
        nearest first. The winner is then extended at both ends through any equal lines
        (a ``)`` or ``}`` of context) at most ``_WINDOW`` lines apart. A segment with no
        rare line is placed the same way using its common lines, nearest first.
        """
        for key, loose in ((_norm, False), (_loose, True)):
            table = self._positions(key)
            okeys = [key(s) for s in self.orig]
            skeys = [key(s) for s in seg]
            rare = [len(table.get(k, ())) <= _RARE and k.strip() != "" for k in skeys]
            for only_rare in (True, False):
                best: list[tuple[int, int]] = []
                for i, k in enumerate(skeys):
                    if not k.strip() or (only_rare and not rare[i]):
                        continue
                    js = table.get(k, [])
                    for j in js[bisect_left(js, lo):][:_MAX_SEEDS]:
                        pairs = _grow(skeys, okeys, i, j, lo,
                                      rare if only_rare else None,
                                      _RARE_WINDOW if only_rare else _WINDOW)
                        if len(pairs) > len(best) or (
                                len(pairs) == len(best) and pairs[0][1] < best[0][1]):
                            best = pairs
                if best:
                    if only_rare:
                        best = _extend_ends(skeys, okeys, best, lo)
                    return best, loose
        return [], False

    def text_lines(self) -> list[str]:
        out: list[str] = []
        cursor = 0
        for r in sorted(self.replacements, key=lambda r: (r.start, r.end)):
            if r.start < cursor:
                self.unsure(r.start + 1, f"two edits overlap at original line {r.start + 1}; "
                                         f"the second was applied after the first")
                r = _Replacement(cursor, max(cursor, r.end), r.lines)
            out.extend(self.orig[cursor:r.start])
            out.extend(r.lines)
            cursor = r.end
        out.extend(self.orig[cursor:])
        return out


def _run(okeys: Sequence[str], skeys: Sequence[str], weight: Sequence[float], a: int,
         step: int, start: int, stop: int) -> tuple[int, float]:
    """Lines equal in a row from (start, a) in direction ``step``, and their weight."""
    k, w = 0, 0.0
    while (0 <= start + k * step < len(skeys) and start + k * step != stop
           and 0 <= a + k * step < len(okeys)
           and okeys[a + k * step] == skeys[start + k * step]):
        w += weight[start + k * step]
        k += 1
    return k, w


def _grow(skeys: Sequence[str], okeys: Sequence[str], i: int, j: int, lo: int,
          allowed: Sequence[bool] | None, window: int) -> list[tuple[int, int]]:
    """Greedy in-order matches around seed (i, j), both ways, gaps up to ``window``."""
    pairs = [(i, j)]
    for step in (1, -1):
        p = j + step
        for t in range(i + step, len(skeys) if step > 0 else -1, step):
            if not skeys[t].strip() or (allowed is not None and not allowed[t]):
                continue
            for q in range(p, p + step * window, step):
                if not lo <= q < len(okeys):
                    break
                if okeys[q] == skeys[t]:
                    pairs.append((t, q))
                    p = q + step
                    break
    pairs.sort()
    return pairs


def _extend_ends(skeys: Sequence[str], okeys: Sequence[str], pairs: list[tuple[int, int]],
                 lo: int) -> list[tuple[int, int]]:
    """Add equal lines before the first and after the last matched pair."""
    (i0, j0), (i1, j1) = pairs[0], pairs[-1]
    before = _grow(skeys[: i0 + 1], okeys[: j0 + 1], i0, j0, lo, None, _WINDOW)
    after = _grow(skeys, okeys, i1, j1, j1, None, _WINDOW)
    head = [(t, q) for t, q in before if t < i0]
    tail = [(t, q) for t, q in after if t > i1]
    return head + pairs + tail


def merge(original: str, plan: EditPlan) -> MergeResult:
    """Merge ``plan`` into ``original``: best-effort candidate plus unsure places."""
    newline = "\r\n" if original.count("\r\n") > original.count("\n") // 2 else "\n"
    body = original.replace("\r\n", "\n")
    final_newline = body.endswith("\n") or not body
    orig = body.split("\n")
    if body.endswith("\n"):
        orig.pop()
    if not body:
        orig = []
    m = _Merger(orig)
    for hunk in plan.hunks:
        if hunk.kind == "lazy":
            m.lazy_segment(hunk)
        else:
            m.replace_block(hunk)
    lines = m.text_lines()
    text = "\n".join(lines) + ("\n" if lines and final_newline else "")
    if newline != "\n":
        text = text.replace("\n", newline)
    return MergeResult(text, tuple(m.uncertain))


def apply_snippet(original: str, snippet: str) -> MergeResult:
    """Parse ``snippet`` and merge it into ``original``."""
    return merge(original, parse_edit(snippet))
